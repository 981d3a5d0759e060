//! The node-subset sweep: one program on every set of `k` nodes of a machine.
//!
//! Problem: AsymSched's central measurement is that, with the same number of threads and the
//! same relative placement of threads and data, the *choice of nodes* alone changes a program's
//! speed by up to 2.37x on the asymmetric 8-node Opteron; and its claim is that the algorithm
//! lands close to the best static choice. Checking either needs every static choice.
//!
//! Approach: for every `k`-subset of the nodes with CPUs, run the program with its threads and
//! memory confined to the subset (`--nodes`, like `numactl --cpunodebind --membind`) and its
//! pages interleaved over the subset's nodes (the same relative placement on every subset). The
//! threads may move between the subset's CPUs as Linux's scheduler moves them. The subsets are
//! independent, so they run in parallel.

use ptb_policy::{Params, PolicyKind, PolicySpec};
use ptb_sim::{SimError, SimOptions, Simulation, Workload};
use ptb_topology::{Machine, NodeIdx, NodeSet};
use serde::Serialize;

/// One static subset's run.
#[derive(Clone, Debug, Serialize)]
pub struct SubsetRun {
    /// Kernel node ids of the subset.
    pub nodes: Vec<u32>,
    pub runtime_s: f64,
    /// Sum of the Bandwidth Graph between the subset's nodes (both directions), GB/s.
    pub internal_gbps: f64,
}

/// Every subset of one size, fastest first, with the spread statistics the paper reports.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    pub workload: String,
    pub threads: usize,
    pub size: usize,
    pub runs: Vec<SubsetRun>,
    pub best_s: f64,
    pub worst_s: f64,
    pub mean_s: f64,
}

impl Sweep {
    /// Worst over best runtime, minus one (237% for facerec in the paper).
    pub fn best_vs_worst(&self) -> f64 {
        self.worst_s / self.best_s - 1.0
    }
    /// How much faster the best subset is than the average one (up to 88% in the paper).
    pub fn best_vs_mean(&self) -> f64 {
        self.mean_s / self.best_s - 1.0
    }
    /// How much slower the worst subset is than the average one (up to 44%).
    pub fn worst_vs_mean(&self) -> f64 {
        1.0 - self.mean_s / self.worst_s
    }
}

/// All `k`-subsets of `items`, in lexicographic order.
pub fn combinations(items: &[u32], k: usize) -> Vec<Vec<u32>> {
    fn go(items: &[u32], k: usize, start: usize, cur: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
        if cur.len() == k {
            out.push(cur.clone());
            return;
        }
        for i in start..items.len() {
            cur.push(items[i]);
            go(items, k, i + 1, cur, out);
            cur.pop();
        }
    }
    let mut out = Vec::new();
    if k <= items.len() {
        go(items, k, 0, &mut Vec::with_capacity(k), &mut out);
    }
    out
}

/// Run `workload` with `threads` threads on every `size`-subset of `machine`'s CPU nodes.
/// `base` gives the seed, run length and scheduler model; `jobs` worker threads.
pub fn sweep(
    machine: &Machine,
    workload: &Workload,
    threads: usize,
    size: usize,
    base: &SimOptions,
    jobs: usize,
) -> Result<Sweep, SimError> {
    let ids: Vec<u32> = machine.nodes.iter().filter(|n| n.has_cpus() && n.has_memory()).map(|n| n.id.0).collect();
    if size == 0 || size > ids.len() {
        return Err(SimError::Options(format!(
            "subset size {size}: the machine has {} nodes with CPUs and memory",
            ids.len()
        )));
    }
    let sets = combinations(&ids, size);
    let results: Vec<std::sync::Mutex<Option<Result<SubsetRun, SimError>>>> =
        sets.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, sets.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= sets.len() {
                    break;
                }
                let r = run_one(machine, workload, threads, &sets[i], base);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    let mut runs = Vec::new();
    for slot in results {
        match slot.into_inner().ok().flatten() {
            Some(Ok(r)) => runs.push(r),
            Some(Err(e)) => return Err(e),
            None => return Err(SimError::Options("a subset run did not finish".into())),
        }
    }
    runs.sort_by(|a, b| a.runtime_s.total_cmp(&b.runtime_s).then(a.nodes.cmp(&b.nodes)));
    let best_s = runs.first().map_or(0.0, |r| r.runtime_s);
    let worst_s = runs.last().map_or(0.0, |r| r.runtime_s);
    let mean_s = runs.iter().map(|r| r.runtime_s).sum::<f64>() / runs.len().max(1) as f64;
    Ok(Sweep { workload: workload.name.clone(), threads, size, runs, best_s, worst_s, mean_s })
}

fn run_one(
    machine: &Machine,
    workload: &Workload,
    threads: usize,
    nodes: &[u32],
    base: &SimOptions,
) -> Result<SubsetRun, SimError> {
    let set: NodeSet = nodes.iter().copied().collect();
    let opts = SimOptions { nodes: Some(set), threads: Some(threads), ..base.clone() };
    let sim = Simulation::new(machine.clone(), vec![workload.clone()], opts)?;
    let r = sim.run_policy(PolicySpec::plain(PolicyKind::Interleave), &Params::new())?;
    let idx: Vec<NodeIdx> = nodes.iter().filter_map(|&id| machine.node_idx(ptb_topology::NodeId(id))).collect();
    let mut internal = 0.0;
    for &a in &idx {
        for &b in &idx {
            if a != b {
                internal += machine.node_bg(a, b).unwrap_or(0.0);
            }
        }
    }
    Ok(SubsetRun { nodes: nodes.to_vec(), runtime_s: r.runtime_s, internal_gbps: internal })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_every_subset_once() {
        let c = combinations(&[0, 1, 2, 3, 4, 5, 6, 7], 3);
        assert_eq!(c.len(), 56);
        let mut d = c.clone();
        d.dedup();
        assert_eq!(d.len(), 56);
        assert!(c.iter().all(|s| s.windows(2).all(|w| w[0] < w[1])));
        assert!(combinations(&[1, 2], 3).is_empty());
    }
}

//! Thread placements the oracle tries: one thread per CPU in CPU order, a spread balanced over
//! the nodes (when there are fewer threads than CPUs), and clusters of threads that share pages,
//! built from the true access pattern. Every one pins its threads: a static placement fixes
//! threads as well as pages (unpinned threads wander under the simulated Linux scheduler).

use crate::demand::Demand;
use ptb_policy::ThreadTarget;
use ptb_sim::Simulation;
use ptb_topology::CpuId;

/// Where every thread runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadPlacement {
    pub label: String,
    /// One target per thread.
    pub targets: Vec<ThreadTarget>,
    /// Dense node and CPU group of each thread.
    pub node: Vec<usize>,
    pub group: Vec<usize>,
    /// Each thread's share of its CPU.
    pub cpu_share: Vec<f64>,
}

/// CPUs of the allowed nodes, ascending (the simulator's scheduling order).
fn allowed_cpus(sim: &Simulation) -> Vec<CpuId> {
    let m = sim.machine();
    m.cpus().into_iter().filter(|c| m.node_of_cpu(*c).is_some_and(|n| sim.allowed().contains_idx(n))).collect()
}

fn from_cpus(sim: &Simulation, label: &str, cpus: &[CpuId], pin: bool) -> ThreadPlacement {
    let m = sim.machine();
    let mut load = std::collections::BTreeMap::<CpuId, usize>::new();
    for c in cpus {
        *load.entry(*c).or_default() += 1;
    }
    ThreadPlacement {
        label: label.to_string(),
        targets: if pin { cpus.iter().map(|&c| ThreadTarget::Cpu(c)).collect() } else { vec![] },
        node: cpus.iter().map(|c| m.node_of_cpu(*c).map_or(0, |n| n.ix())).collect(),
        group: cpus.iter().map(|c| m.group_of_cpu(*c).map_or(0, |g| g.ix())).collect(),
        cpu_share: cpus.iter().map(|c| 1.0 / load[c] as f64).collect(),
    }
}

impl ThreadPlacement {
    /// Thread k pinned to the k-th allowed CPU (wrapping around).
    pub fn default_spread(sim: &Simulation) -> ThreadPlacement {
        let all = allowed_cpus(sim);
        let n = sim.layout().threads.len();
        let cpus: Vec<CpuId> = (0..n).map(|k| all[k % all.len()]).collect();
        from_cpus(sim, "spread", &cpus, true)
    }

    /// Consecutive threads in equal blocks over every allowed node with CPUs (only when there
    /// are fewer threads than CPUs, where the default fills the first nodes).
    pub fn balanced(sim: &Simulation) -> Option<ThreadPlacement> {
        let all = allowed_cpus(sim);
        let n = sim.layout().threads.len();
        if n >= all.len() || n == 0 {
            return None;
        }
        let m = sim.machine();
        let mut nodes: Vec<Vec<CpuId>> = Vec::new();
        for c in &all {
            let node = m.node_of_cpu(*c).map_or(0, |x| x.ix());
            match nodes.iter_mut().find(|v| m.node_of_cpu(v[0]).map_or(0, |x| x.ix()) == node) {
                Some(v) => v.push(*c),
                None => nodes.push(vec![*c]),
            }
        }
        let nb = nodes.len();
        let mut used = vec![0usize; nb];
        let cpus: Vec<CpuId> = (0..n)
            .map(|k| {
                let b = k * nb / n;
                let c = nodes[b][used[b] % nodes[b].len()];
                used[b] += 1;
                c
            })
            .collect();
        Some(from_cpus(sim, "balanced", &cpus, true))
    }

    /// Threads grouped by how many pages they share (true pattern): greedily fill each node's
    /// CPUs with the unplaced thread sharing most with those already there.
    pub fn clustered(sim: &Simulation, d: &Demand) -> Option<ThreadPlacement> {
        let all = allowed_cpus(sim);
        let n = sim.layout().threads.len();
        if !(2..=1024).contains(&n) {
            return None;
        }
        // Per-page access density of each thread over fine groups.
        let ng = d.groups.len();
        let mut dens = vec![vec![0.0f64; ng]; n];
        for ph in &d.phases {
            for th in &ph.threads {
                for &(g, r, w) in &th.access {
                    dens[th.thread][g] += (r + w) / d.groups[g].2.max(1) as f64;
                }
            }
        }
        let share =
            |a: usize, b: usize| -> f64 { (0..ng).map(|g| dens[a][g].min(dens[b][g]) * d.groups[g].2 as f64).sum() };
        let s: Vec<Vec<f64>> =
            (0..n).map(|a| (0..n).map(|b| if a == b { 0.0 } else { share(a, b) }).collect()).collect();
        let m = sim.machine();
        let mut by_node: Vec<Vec<CpuId>> = Vec::new();
        for c in &all {
            let node = m.node_of_cpu(*c).map_or(0, |x| x.ix());
            match by_node.iter_mut().find(|v| m.node_of_cpu(v[0]).map_or(0, |x| x.ix()) == node) {
                Some(v) => v.push(*c),
                None => by_node.push(vec![*c]),
            }
        }
        let cap = n.div_ceil(by_node.len()).max(1);
        let mut placed = vec![None::<CpuId>; n];
        let mut left: Vec<usize> = (0..n).collect();
        for cpus in &by_node {
            let mut members: Vec<usize> = Vec::new();
            while members.len() < cap && !left.is_empty() {
                let pick = if members.is_empty() {
                    0
                } else {
                    let score = |t: usize| members.iter().map(|&m2| s[t][m2]).sum::<f64>();
                    (0..left.len())
                        .max_by(|&a, &b| score(left[a]).total_cmp(&score(left[b])).then(b.cmp(&a)))
                        .unwrap_or(0)
                };
                let t = left.remove(pick);
                placed[t] = Some(cpus[members.len() % cpus.len()]);
                members.push(t);
            }
        }
        let cpus: Option<Vec<CpuId>> = placed.into_iter().collect();
        Some(from_cpus(sim, "clustered", &cpus?, true))
    }
}

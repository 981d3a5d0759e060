//! Which CPU groups of a node run its threads, when they do not fill it.
//!
//! Problem: a node can hold several CPU groups (dies, last-level caches) that reach memory
//! differently: on the thesis' Opteron (`opteron6272-4n`) a node's upper die has no memory of
//! its own and reaches every node one link further than its lower die. Threads pinned to a
//! node they do not fill are spread by Linux's balancer over all its groups (it evens out the
//! running threads of a node's last-level caches while they have idle CPUs), so half of them
//! run on the slow die, and a program that meets at barriers runs at their pace.
//!
//! Approach: for each node whose pinned threads do not fill it, every set of its groups with
//! CPUs for all of them is scored by the loaded latency of the node's accesses from the
//! slowest group of the set (the program's pace): per group, the machine file's idle latency
//! from that group to each memory node plus the load model's queue ([`super::model::queue_ns`])
//! on the way from the group to that node (capacity: the group's Bandwidth Graph entry; load:
//! the node's sampled accesses there, in proportion to the group's share of the set's CPUs,
//! as the balancer spreads them), weighted by where the node's accesses go. That queue is
//! scaled as far as the samples' latency shows the node's paths to queue, as the load model's
//! own path queue is ([`super::model::LoadModel::calibrate_paths`]): with the nominal queue,
//! NPB SP's four threads a node on `opteron6272-4n`, their slabs at home at 80-98% of the lower
//! die's entry, went to both dies and back every few cycles (394 thread moves, seed 1), though
//! the die served them without a measured wait. The node's
//! threads run on the best set only when its latency is lower than all of the node's
//! groups' (then the kernel balances within the node) by more than the spread of the
//! threads' times through a phase ([`IMBALANCE`], 5%): a smaller difference does not surely
//! set the program's pace, and measured latencies of alike groups (a real EPYC's CCDs) differ
//! by that much by chance, while packing threads on fewer groups shares their caches, which
//! the model does not see. Groups that are exactly alike never leave the node either, since
//! one of them alone carries the others' load too. Threads are pinned to one group each, in
//! tid blocks sized by the groups' CPUs, each keeping its group where it can.

use super::model::queue_ns;
use super::pace::IMBALANCE;
use ptb_topology::{GroupIdx, Machine, NodeIdx};

/// Most groups of one node whose subsets are scored (more: the node's groups are kept).
const MAX_GROUPS: usize = 8;

/// Where the node's accesses go: `(memory node, share)` from `row[d]`, the node's accesses per
/// second to memory node `d`; all zero (no samples yet): evenly over `mem`.
fn mix_of(row: &[f64], mem: &[NodeIdx]) -> Vec<(NodeIdx, f64)> {
    let total: f64 = row.iter().sum();
    if total > 0.0 {
        row.iter().enumerate().filter(|x| *x.1 > 0.0).map(|(d, &a)| (NodeIdx::from_ix(d), a / total)).collect()
    } else {
        mem.iter().map(|&d| (d, 1.0 / mem.len().max(1) as f64)).collect()
    }
}

/// The loaded latency (ns) of the node's accesses (`row`, and their `mix` over memory nodes,
/// [`mix_of`]) from the slowest group of `set`. `None` when the machine file has no latency
/// for one of the groups.
fn score(m: &Machine, set: &[GroupIdx], row: &[f64], scale: f64, mix: &[(NodeIdx, f64)]) -> Option<f64> {
    let cpus: usize = set.iter().map(|g| m.group(*g).cpus.len()).sum();
    let line = m.line_size as f64;
    let mut worst: f64 = 0.0;
    for &g in set {
        let share = m.group(g).cpus.len() as f64 / cpus.max(1) as f64;
        let mut lat = 0.0;
        for &(d, x) in mix {
            let idle = m.latency_ns(g, d)?;
            let cap = m.bandwidth.as_ref().map_or(0.0, |b| b.uncontended.get(g.ix(), d.ix()) * 1e9 / line);
            let load = row.get(d.ix()).copied().unwrap_or(0.0) * share;
            lat += x * (idle + scale * queue_ns(load, cap));
        }
        worst = worst.max(lat);
    }
    Some(worst)
}

/// The groups of node `n` its `k` threads should run on, in the node's order; `None`: all of
/// them (the threads fill the node, its groups are alike, or the machine file cannot tell).
pub fn choose(m: &Machine, n: NodeIdx, k: usize, row: &[f64], scale: f64, mem: &[NodeIdx]) -> Option<Vec<GroupIdx>> {
    let node = m.nodes.get(n.ix())?;
    let groups = &node.groups;
    if groups.len() < 2 || groups.len() > MAX_GROUPS || k == 0 || k >= node.cpus.len() {
        return None;
    }
    let mix = mix_of(row, mem);
    let all = score(m, groups, row, scale, &mix)?;
    let mut best: Option<(f64, Vec<GroupIdx>)> = None;
    for mask in 1u32..(1 << groups.len()) - 1 {
        let set: Vec<GroupIdx> = (0..groups.len()).filter(|i| mask & (1 << i) != 0).map(|i| groups[i]).collect();
        if set.iter().map(|g| m.group(*g).cpus.len()).sum::<usize>() < k {
            continue;
        }
        let Some(s) = score(m, &set, row, scale, &mix) else { continue };
        if s < all * (1.0 - IMBALANCE) && best.as_ref().is_none_or(|b| s < b.0) {
            best = Some((s, set));
        }
    }
    best.map(|b| b.1)
}

/// How many of `k` threads each group of `set` gets: in proportion to its CPUs, largest
/// remainders first.
pub fn quotas(m: &Machine, set: &[GroupIdx], k: usize) -> Vec<usize> {
    let cpus: Vec<usize> = set.iter().map(|g| m.group(*g).cpus.len()).collect();
    super::threads::by_cpus(&cpus, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opteron4() -> Machine {
        ptb_topology::presets::get("opteron6272-4n").unwrap()
    }

    #[test]
    fn a_node_that_is_not_full_runs_on_its_lower_die() {
        let m = opteron4();
        let mem = m.memory_nodes();
        // Node 2 (dense 1): dies P2 (its memory) and P3. Four threads, nothing sampled yet.
        let n = NodeIdx(1);
        let set = choose(&m, n, 4, &[0.0; 4], 1.0, &mem).unwrap();
        assert_eq!(set.iter().map(|g| m.group(*g).name.as_str()).collect::<Vec<_>>(), ["P2"]);
        // Nine threads do not fit on one die; sixteen fill the node.
        assert_eq!(choose(&m, n, 9, &[0.0; 4], 1.0, &mem), None);
        assert_eq!(choose(&m, n, 16, &[0.0; 4], 1.0, &mem), None);
    }

    #[test]
    fn a_saturated_die_shares_its_load_with_the_other_where_its_path_queues() {
        let m = opteron4();
        let mem = m.memory_nodes();
        let n = NodeIdx(1);
        // Accesses per second from node 2 to its own memory, near the lower die's capacity.
        let cap = m.bandwidth.as_ref().unwrap().uncontended.get(m.node(n).groups[0].ix(), 1) * 1e9 / 64.0;
        let light = [0.0, 0.2 * cap, 0.0, 0.0];
        let heavy = [0.0, 0.97 * cap, 0.0, 0.0];
        assert!(choose(&m, n, 4, &light, 1.0, &mem).is_some());
        assert_eq!(choose(&m, n, 4, &heavy, 1.0, &mem), None);
        assert_eq!(choose(&m, n, 4, &heavy, 0.5, &mem), None);
        // Unless the samples' latency shows that the node's paths do not queue (scale 0): NPB SP
        // with 16 threads on this machine, its slabs at home, issues 50-61 million accesses a
        // second from node 2's four threads, 80-98% of the lower die's entry (4.0 GB/s), and its
        // lower die served them without a measured wait (a build that starts with first touch
        // and brings data home, simulated).
        let kept = choose(&m, n, 4, &heavy, 0.0, &mem).unwrap();
        assert_eq!(kept.iter().map(|g| m.group(*g).name.as_str()).collect::<Vec<_>>(), ["P2"]);
    }

    #[test]
    fn alike_groups_keep_the_whole_node() {
        let m = ptb_topology::presets::get("epyc-nps4-2s").unwrap();
        let mem = m.memory_nodes();
        for n in 0..m.n_nodes() {
            let row: Vec<f64> = (0..m.n_nodes()).map(|d| if d == n { 1e8 } else { 1e7 }).collect();
            assert_eq!(choose(&m, NodeIdx::from_ix(n), 4, &row, 1.0, &mem), None, "node {n}");
            assert_eq!(choose(&m, NodeIdx::from_ix(n), 4, &[0.0; 8], 1.0, &mem), None, "node {n}");
        }
    }

    #[test]
    fn groups_a_few_percent_apart_keep_the_whole_node() {
        // epyc-nps4-2s with its second CCD of node 0 made slower to every node.
        let slower = |f: f64| {
            let mut m = ptb_topology::presets::get("epyc-nps4-2s").unwrap();
            let g = m.node(NodeIdx(0)).groups[1].ix();
            let lat = m.bandwidth.as_mut().unwrap().latency.as_mut().unwrap();
            lat.rows[g].iter_mut().for_each(|x| *x *= f);
            let mem = m.memory_nodes();
            choose(&m, NodeIdx(0), 4, &[0.0; 8], 1.0, &mem).map(|s| s.len())
        };
        assert_eq!(slower(1.02), None);
        assert_eq!(slower(1.3), Some(1));
    }

    proptest::proptest! {
        /// Any thread count, any traffic (zero, huge, uneven) and any latencies a machine file
        /// may hold: a proper subset of the node's groups with a CPU for every thread, or none.
        #[test]
        fn a_choice_is_a_proper_subset_that_holds_the_threads(
            k in 0usize..20,
            row in proptest::collection::vec(0.0f64..1e12, 4),
            scale in proptest::collection::vec(0.1f64..10.0, 8),
        ) {
            let mut m = opteron4();
            let lat = m.bandwidth.as_mut().unwrap().latency.as_mut().unwrap();
            for (r, f) in lat.rows.iter_mut().zip(&scale) {
                r.iter_mut().for_each(|x| *x *= f);
            }
            let mem = m.memory_nodes();
            for n in 0..m.n_nodes() {
                let n = NodeIdx::from_ix(n);
                if let Some(set) = choose(&m, n, k, &row, 1.0, &mem) {
                    let groups = &m.node(n).groups;
                    proptest::prop_assert!(!set.is_empty() && set.len() < groups.len());
                    proptest::prop_assert!(set.iter().all(|g| groups.contains(g)));
                    proptest::prop_assert!(set.iter().map(|g| m.group(*g).cpus.len()).sum::<usize>() >= k);
                    let q = quotas(&m, &set, k);
                    proptest::prop_assert_eq!(q.iter().sum::<usize>(), k);
                }
            }
        }
    }

    #[test]
    fn quotas_follow_the_cpus() {
        let m = opteron4();
        let g = &m.node(NodeIdx(0)).groups;
        assert_eq!(quotas(&m, g, 5), vec![3, 2]);
        assert_eq!(quotas(&m, &g[..1], 5), vec![5]);
    }
}

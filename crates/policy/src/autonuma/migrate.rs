//! "CPU follows memory": kernel 3.13's `task_numa_migrate` / `task_numa_find_cpu` /
//! `task_numa_compare` (kernel/sched/fair.c), on the model's view of the machine.
//!
//! Problem: a task away from its preferred node is moved there, or swapped with a task whose
//! own placement does not suffer; on a fully loaded machine the rules about capacity decide
//! whether anything moves at all.
//!
//! Approach, as 3.13 does it ("sched: numa: Favor placing a task on the preferred node" and
//! "sched: numa: fix placement of workloads spread across multiple nodes", merged for 3.13):
//! - weights are per mille of faults, the task's plus its numa group's (`task_weight +
//!   group_weight`); `imp` = weight at the destination - weight at the source;
//! - the preferred node is searched only when it has capacity (`nr_running < capacity`); if
//!   that finds nothing, every other node where the task's weight is not lower than at its
//!   source is searched (whatever its load);
//! - on a node, an idle CPU takes the task if the loads stay within `imbalance_pct` (112 for
//!   the NUMA domain: 100 + (125 - 100) / 2) and does not fill a node while the source has
//!   room; a busy CPU's task is a swap candidate when the pair's improvement `imp +
//!   weight(cur, src) - weight(cur, dst)` is not below the best so far (one task per CPU:
//!   balance does not matter); the best improvement wins, a later CPU on ties.
//!
//! Load is counted in tasks (every task has the same weight in the model).

use super::stats::TaskStats;
use ptb_profile::Tid;

/// `imbalance_pct` of `task_numa_migrate` for the NUMA domain (sd_numa's 125, halved excess).
pub const IMBALANCE_PCT: u64 = 112;

/// A task as the search sees it.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub tid: Tid,
    /// Dense node index it runs on, and its CPU (a position shared by tasks on one CPU).
    pub node: usize,
    pub cpu: u32,
    /// Whether it may run on each node (its affinity), as a bit mask over dense nodes (nodes
    /// from 64 on are always allowed).
    pub allowed: u64,
}

impl Slot {
    pub fn may_run_on(&self, n: usize) -> bool {
        n >= 64 || self.allowed & (1 << n) != 0
    }
}

/// What the search decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Move to an idle CPU of this node.
    Move { node: usize },
    /// Swap places with this task, on this node.
    Swap { with: Tid, node: usize },
}

/// The machine during one decision: which tasks run where, CPUs per node.
pub struct Machine<'a> {
    pub slots: &'a mut [Slot],
    /// CPUs (capacity) of each node; 0 for nodes the tasks may not use.
    pub cpus: &'a [usize],
    /// CPU ids of each node.
    pub cpu_ids: &'a [Vec<u32>],
}

impl Machine<'_> {
    fn running(&self, n: usize) -> usize {
        self.slots.iter().filter(|s| s.node == n).count()
    }
    fn has_capacity(&self, n: usize) -> bool {
        self.running(n) < self.cpus[n]
    }
}

/// `load_too_imbalanced` in its 3.13 form: with `src` the smaller load, refuse when
/// `src * imbalance_pct < dst * 100`.
pub fn too_imbalanced(a: usize, b: usize) -> bool {
    let (small, large) = if a < b { (a, b) } else { (b, a) };
    (small as u64) * IMBALANCE_PCT < (large as u64) * 100
}

/// Search for `task` (index into `m.slots`): `weight(tid, node)` is `task_weight +
/// group_weight`. Returns the migration, or None (`-EAGAIN`).
pub fn task_numa_migrate(
    m: &Machine,
    task: usize,
    preferred: usize,
    weight: &dyn Fn(Tid, usize) -> i64,
) -> Option<Migration> {
    let me = m.slots[task];
    let src = me.node;
    let w_src = weight(me.tid, src);
    let mut best: Option<(i64, Migration)> = None;
    let nodes = m.cpus.len();
    if m.has_capacity(preferred) {
        find_cpu(m, task, preferred, weight(me.tid, preferred) - w_src, weight, &mut best);
    }
    if best.is_none() {
        for n in (0..nodes).filter(|&n| n != src && n != preferred && m.cpus[n] > 0) {
            let imp = weight(me.tid, n) - w_src;
            if imp >= 0 {
                find_cpu(m, task, n, imp, weight, &mut best);
            }
        }
    }
    best.map(|b| b.1)
}

/// `task_numa_find_cpu` + `task_numa_compare` over the CPUs of node `dst`.
fn find_cpu(
    m: &Machine,
    task: usize,
    dst: usize,
    imp: i64,
    weight: &dyn Fn(Tid, usize) -> i64,
    best: &mut Option<(i64, Migration)>,
) {
    let me = m.slots[task];
    if !me.may_run_on(dst) {
        return;
    }
    let src = me.node;
    let (n_src, n_dst) = (m.running(src), m.running(dst));
    let (cap_src, cap_dst) = (n_src < m.cpus[src], n_dst < m.cpus[dst]);
    let best_imp = |b: &Option<(i64, Migration)>| b.map_or(0, |x| x.0);
    let src_cpu_tasks = m.slots.iter().filter(|s| s.cpu == me.cpu).count();
    for &cpu in &m.cpu_ids[dst] {
        // The task running there (`dst_rq->curr`): the first one on that CPU.
        let cur = m.slots.iter().find(|s| s.cpu == cpu);
        match cur {
            None => {
                if imp < best_imp(best) || (cap_src && !cap_dst) {
                    continue;
                }
                if too_imbalanced(n_src - 1, n_dst + 1) {
                    continue;
                }
                *best = Some((imp, Migration::Move { node: dst }));
            }
            Some(cur) => {
                if !cur.may_run_on(src) {
                    continue;
                }
                let imp = imp + weight(cur.tid, src) - weight(cur.tid, dst);
                if imp < best_imp(best) {
                    continue;
                }
                let dst_cpu_tasks = m.slots.iter().filter(|s| s.cpu == cpu).count();
                // One task per CPU on both sides: balance does not matter; otherwise a swap
                // leaves the task counts as they were.
                if !(src_cpu_tasks == 1 && dst_cpu_tasks == 1) && too_imbalanced(n_src, n_dst) {
                    continue;
                }
                *best = Some((imp, Migration::Swap { with: cur.tid, node: dst }));
            }
        }
    }
}

/// Apply a migration to the model's view (so later searches in the same decision see it).
pub fn apply(m: &mut Machine, task: usize, mv: Migration) {
    match mv {
        Migration::Move { node } => {
            let used: Vec<u32> = m.slots.iter().map(|s| s.cpu).collect();
            let cpu = m.cpu_ids[node].iter().copied().find(|c| !used.contains(c)).unwrap_or(m.slots[task].cpu);
            m.slots[task].node = node;
            m.slots[task].cpu = cpu;
        }
        Migration::Swap { with, node } => {
            let Some(o) = m.slots.iter().position(|s| s.tid == with) else { return };
            let (src_node, src_cpu) = (m.slots[task].node, m.slots[task].cpu);
            m.slots[task].node = node;
            m.slots[task].cpu = m.slots[o].cpu;
            m.slots[o].node = src_node;
            m.slots[o].cpu = src_cpu;
        }
    }
}

/// `task_weight + group_weight` of a task (stats may be missing: weight 0). In 3.13 the group
/// weight counts 1200 per mille ("to group tasks together that are almost evenly spread out
/// between numa nodes"); 3.14 brought it to 1000.
pub fn weight_of(t: Option<&TaskStats>, group: Option<(&[u64], u64)>, n: usize) -> i64 {
    let tw = t.map_or(0, |t| t.weight(n));
    let gw = group.map_or(0, |(g, total)| (1200 * g[n]).checked_div(total).unwrap_or(0));
    (tw + gw) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(spec: &[(Tid, usize, u32)]) -> Vec<Slot> {
        spec.iter().map(|&(tid, node, cpu)| Slot { tid, node, cpu, allowed: u64::MAX }).collect()
    }

    #[test]
    fn moves_to_an_idle_cpu_of_the_preferred_node() {
        // 2 nodes x 4 CPUs; task 1 on node 0 (3 tasks) with its memory on node 1 (1 task). A
        // swap with task 3 gains as much, but the idle CPUs come later and the loads stay
        // balanced (2 and 2), so the task moves.
        let mut s = slots(&[(1, 0, 0), (2, 0, 1), (4, 0, 2), (3, 1, 4)]);
        let ids = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        let m = Machine { slots: &mut s, cpus: &[4, 4], cpu_ids: &ids };
        let w = |t: Tid, n: usize| if t == 1 { [0, 1000][n] } else { [500, 500][n] };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w), Some(Migration::Move { node: 1 }));
        // With 2 tasks on node 0 the move would leave 1 vs 2 (beyond imbalance_pct): 3.13
        // swaps instead.
        let mut s = slots(&[(1, 0, 0), (2, 0, 1), (3, 1, 4)]);
        let m = Machine { slots: &mut s, cpus: &[4, 4], cpu_ids: &ids };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w), Some(Migration::Swap { with: 3, node: 1 }));
    }

    #[test]
    fn full_preferred_node_is_not_searched_in_3_13() {
        // 3 nodes x 1 CPU, all busy. Task 1 (node 0) prefers node 1, whose task 2 would gain
        // from node 0 too: 3.13 does not search a full preferred node, so no swap there; node 2
        // is searched and its task 3 swaps only if the pair gains.
        let mut s = slots(&[(1, 0, 0), (2, 1, 1), (3, 2, 2)]);
        let ids = vec![vec![0], vec![1], vec![2]];
        let m = Machine { slots: &mut s, cpus: &[1, 1, 1], cpu_ids: &ids };
        let w = |t: Tid, n: usize| match t {
            1 => [100, 600, 300][n],
            2 => [900, 100, 0][n],
            _ => [0, 0, 1000][n],
        };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w), None, "task 3 loses 1000 on node 0");
        let w2 = |t: Tid, n: usize| match t {
            1 => [100, 600, 300][n],
            2 => [900, 100, 0][n],
            _ => [500, 0, 400][n],
        };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w2), Some(Migration::Swap { with: 3, node: 2 }));
    }

    #[test]
    fn imbalance_and_capacity_rules() {
        assert!(!too_imbalanced(15, 16));
        assert!(too_imbalanced(8, 10));
        // Node 1 has room, but moving there would leave 1 vs 3 tasks: no move; a swap keeps the
        // counts and gains, so the task swaps (the later CPU wins the tie).
        let mut s = slots(&[(1, 0, 0), (2, 0, 1), (3, 1, 4), (4, 1, 5)]);
        let ids = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        let m = Machine { slots: &mut s, cpus: &[4, 4], cpu_ids: &ids };
        let w = |t: Tid, n: usize| if t == 1 { [0, 1000][n] } else { 0 };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w), Some(Migration::Swap { with: 4, node: 1 }));
        // Affinity: a task that may not run on the source is no swap candidate.
        let mut s = slots(&[(1, 0, 0), (2, 1, 1), (3, 2, 2)]);
        s[2].allowed = 0b100;
        let ids = vec![vec![0], vec![1], vec![2]];
        let m = Machine { slots: &mut s, cpus: &[1, 1, 1], cpu_ids: &ids };
        let w = |t: Tid, n: usize| if t == 1 { [0, 600, 400][n] } else { 0 };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w), None);
        s[2].allowed = u64::MAX;
        let m = Machine { slots: &mut s, cpus: &[1, 1, 1], cpu_ids: &ids };
        assert_eq!(task_numa_migrate(&m, 0, 1, &w), Some(Migration::Swap { with: 3, node: 2 }));
    }
}

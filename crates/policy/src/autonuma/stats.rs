//! Fault statistics of the autonuma model, as kernel 3.13 keeps them (kernel/sched/fair.c):
//! per-task decayed fault counts by memory node and private/shared (`numa_faults`), the faults
//! since the last placement (`numa_faults_buffer`), local/remote counts for the scan rate
//! (`numa_faults_locality`), numa groups, and the scan-period rules.
//!
//! Problem: placement, the scan rate and the task moves all read these counts; they must
//! decay, merge and adapt exactly when the kernel's do, or the model's dynamics differ.
//!
//! Approach: integer counts (the kernel's `unsigned long` with `>>= 1` decay, so small counts
//! die out as they do there); every rule is a free function with the kernel function it
//! follows named in its doc, so tests can pin each one.

use ptb_profile::histogram::FxBuild;
use ptb_profile::Tid;
use std::collections::HashMap;

/// `NUMA_PERIOD_SLOTS`: the scan period changes in tenths.
pub const NUMA_PERIOD_SLOTS: u64 = 10;
/// `NUMA_PERIOD_THRESHOLD` of kernel 3.13: the scan slows once 30% of a pass's faults are
/// local. It was introduced as 3 by "sched/numa: Adjust scan rate in task_numa_placement"
/// (04bb2f94, merged for 3.13) and raised to 7 ("aim for 70% local") only by "sched/numa:
/// Change scan period code to match intent" (a22b4b01, 3.16).
pub const NUMA_PERIOD_THRESHOLD: u64 = 3;
/// `MAX_SCAN_WINDOW` (MB/s): the scanner never marks more than this per second.
pub const MAX_SCAN_WINDOW_MB: u64 = 2560;

/// Index of the private / shared halves of a task's counts (the kernel's `priv` 1 / 0).
pub const SHARED: usize = 0;
pub const PRIVATE: usize = 1;

/// One task's NUMA statistics.
#[derive(Clone, Debug)]
pub struct TaskStats {
    /// Decayed faults per [shared, private] x memory node (`numa_faults`).
    pub faults: [Vec<u64>; 2],
    /// Faults since the last placement (`numa_faults_buffer`).
    pub buffer: [Vec<u64>; 2],
    /// `total_numa_faults`: sum of `faults`.
    pub total: u64,
    /// Remote / local faults since the last placement (`numa_faults_locality`).
    pub remote: u64,
    pub local: u64,
    /// `numa_preferred_nid` (dense node index).
    pub preferred: Option<usize>,
    /// This task's scan period, ms (`numa_scan_period`).
    pub period_ms: u64,
    /// Scan pass of the last placement (`numa_scan_seq`).
    pub seq: u64,
    /// No migration attempt before this time, ns (`numa_migrate_retry`).
    pub retry_ns: u64,
    /// Shared-page migrations still to skip (`numa_migrate_deferred`).
    pub deferred: u32,
}

impl TaskStats {
    pub fn new(nodes: usize, period_ms: u64) -> Self {
        TaskStats {
            faults: [vec![0; nodes], vec![0; nodes]],
            buffer: [vec![0; nodes], vec![0; nodes]],
            total: 0,
            remote: 0,
            local: 0,
            preferred: None,
            period_ms,
            seq: 0,
            retry_ns: 0,
            deferred: 0,
        }
    }

    /// `task_faults(p, nid)`.
    pub fn on(&self, n: usize) -> u64 {
        self.faults[SHARED][n] + self.faults[PRIVATE][n]
    }

    /// `task_weight(p, nid)`: per mille of the task's faults on node `n`.
    pub fn weight(&self, n: usize) -> u64 {
        (1000 * self.on(n)).checked_div(self.total).unwrap_or(0)
    }

    /// The decay-and-merge half of `task_numa_placement`: halve the averages, add the buffer.
    /// Returns (shared, private) faults of the buffer (`fault_types`).
    pub fn merge_buffer(&mut self) -> (u64, u64) {
        let mut types = [0u64; 2];
        for (priv_, ty) in types.iter_mut().enumerate() {
            for n in 0..self.faults[priv_].len() {
                let f = &mut self.faults[priv_][n];
                *f = (*f >> 1) + self.buffer[priv_][n];
                *ty += self.buffer[priv_][n];
                self.buffer[priv_][n] = 0;
            }
        }
        self.total = self.faults.iter().flatten().sum();
        (types[SHARED], types[PRIVATE])
    }

    /// Node with the most faults (`max_nid`; the lowest node wins ties, as `faults >
    /// max_faults` does), None without faults.
    pub fn busiest(&self) -> Option<usize> {
        argmax((0..self.faults[0].len()).map(|n| self.on(n)))
    }
}

/// Index of the largest positive value, the first one on ties.
pub fn argmax(v: impl Iterator<Item = u64>) -> Option<usize> {
    let mut best: Option<(usize, u64)> = None;
    for (i, x) in v.enumerate() {
        if x > best.map_or(0, |b| b.1) {
            best = Some((i, x));
        }
    }
    best.map(|b| b.0)
}

/// `task_nr_scan_windows`: how many scan windows of `scan_pages` the task's resident memory
/// spans (at least one).
pub fn scan_windows(rss_pages: u64, scan_pages: u64) -> u64 {
    let scan = scan_pages.max(1);
    let rss = if rss_pages == 0 { scan } else { rss_pages };
    rss.div_ceil(scan)
}

/// `task_scan_min` and `task_scan_max` (ms): the period tunables are for scanning the whole
/// resident memory, so the period of one window is theirs divided by the number of windows,
/// never below `1000 / (MAX_SCAN_WINDOW / scan_size)` (at most 2.56 GB marked per second).
pub fn scan_bounds(min_ms: u64, max_ms: u64, scan_size_mb: u64, windows: u64) -> (u64, u64) {
    let per_s = if scan_size_mb < MAX_SCAN_WINDOW_MB { MAX_SCAN_WINDOW_MB / scan_size_mb.max(1) } else { 1 };
    let floor = 1000 / per_s;
    let smin = floor.max(min_ms / windows.max(1));
    let smax = smin.max(max_ms / windows.max(1));
    (smin, smax)
}

/// `update_task_scan_period` of kernel 3.13 (04bb2f94): the next period from one pass's
/// faults. No local and no shared faults (the kernel tests `local + shared`): the period
/// doubles, up to `max`. Otherwise `ratio` = local faults in tenths; at or above the threshold
/// the period grows by `ratio - 3` slots (at least one), below it shrinks by `3 - ratio` slots,
/// scaled down by the private share (no point scanning faster when shared faults dominate).
pub fn next_period(period: u64, local: u64, remote: u64, shared: u64, private: u64, min: u64, max: u64) -> u64 {
    if local + shared == 0 {
        return max.min(period.saturating_mul(2));
    }
    let slot = period.div_ceil(NUMA_PERIOD_SLOTS) as i64;
    let ratio = (local * NUMA_PERIOD_SLOTS / (local + remote).max(1)) as i64;
    let th = NUMA_PERIOD_THRESHOLD as i64;
    let diff = if ratio >= th {
        (ratio - th).max(1) * slot
    } else {
        let d = -(th - ratio) * slot;
        let priv_ratio = (private * NUMA_PERIOD_SLOTS).div_ceil((private + shared).max(1)) as i64;
        d * priv_ratio / NUMA_PERIOD_SLOTS as i64
    };
    ((period as i64 + diff).max(0) as u64).clamp(min, max.max(min))
}

/// NUMA groups: tasks that fault on each other's pages (`task_numa_group`; threads of one
/// process always join). Union-find with path halving; the smaller tid leads, for determinism.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    parent: HashMap<Tid, Tid, FxBuild>,
}

impl Groups {
    pub fn leader(&mut self, t: Tid) -> Tid {
        let mut x = t;
        while let Some(&p) = self.parent.get(&x) {
            if p == x {
                break;
            }
            let gp = self.parent.get(&p).copied().unwrap_or(p);
            self.parent.insert(x, gp);
            x = gp;
        }
        x
    }
    /// Join the groups of `a` and `b`; false when they already were one.
    pub fn join(&mut self, a: Tid, b: Tid) -> bool {
        let (la, lb) = (self.leader(a), self.leader(b));
        if la == lb {
            return false;
        }
        let (lead, other) = if la < lb { (la, lb) } else { (lb, la) };
        self.parent.insert(other, lead);
        self.parent.entry(lead).or_insert(lead);
        true
    }
    /// Whether `t` belongs to a group of two or more tasks.
    pub fn grouped(&self, t: Tid) -> bool {
        self.parent.contains_key(&t)
    }
    /// Forget tasks that are gone; the survivors of each group stay together.
    pub fn retain(&mut self, alive: &dyn Fn(Tid) -> bool) {
        let mut all: Vec<Tid> = self.parent.keys().copied().collect();
        all.sort_unstable();
        let leaders: Vec<(Tid, Tid)> = all.iter().map(|&t| (t, self.leader(t))).collect();
        let mut fresh = Groups::default();
        let mut first_alive: HashMap<Tid, Tid, FxBuild> = HashMap::default();
        for (t, l) in leaders {
            if alive(t) {
                match first_alive.get(&l) {
                    Some(&f) => {
                        fresh.join(f, t);
                    }
                    None => {
                        first_alive.insert(l, t);
                    }
                }
            }
        }
        *self = fresh;
    }
    /// Number of groups (of two or more tasks).
    pub fn count(&mut self) -> usize {
        let all: Vec<Tid> = self.parent.keys().copied().collect();
        let mut leaders: Vec<Tid> = all.into_iter().map(|t| self.leader(t)).collect();
        leaders.sort_unstable();
        leaders.dedup();
        leaders.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_period_follows_kernel_3_13() {
        let (min, max) = (500, 30000);
        // 10 s period, slot 1 s. 20% local (< 30%): shrink by one slot, all private.
        assert_eq!(next_period(10000, 20, 80, 0, 100, min, max), 9000);
        // All remote and private: the kernel tests local + shared, which is 0: it doubles.
        assert_eq!(next_period(10000, 0, 100, 0, 100, min, max), 20000);
        // All remote, half shared: shrink by 3 slots, scaled by the private share 5/10.
        assert_eq!(next_period(10000, 0, 100, 50, 50, min, max), 8500);
        // Exactly 30% local: grows by one slot; 100% local: by 7.
        assert_eq!(next_period(10000, 30, 70, 0, 100, min, max), 11000);
        assert_eq!(next_period(10000, 100, 0, 0, 100, min, max), 17000);
        // Clamped to the bounds.
        assert_eq!(next_period(29000, 100, 0, 0, 100, min, max), max);
        assert_eq!(next_period(600, 10, 90, 0, 100, min, max), min);
        // No faults at all: doubles.
        assert_eq!(next_period(4000, 0, 0, 0, 0, min, max), 8000);
    }

    #[test]
    fn scan_bounds_divide_by_windows_with_the_floor() {
        // 416 MB resident, 256 MB windows: 2 windows, 1000/2 and 60000/2.
        let w = scan_windows(416 << 8, 256 << 8);
        assert_eq!(w, 2);
        assert_eq!(scan_bounds(1000, 60000, 256, w), (500, 30000));
        // 64 windows: 1000/64 = 15 ms is below the floor 1000 / (2560/256) = 100 ms.
        assert_eq!(scan_bounds(1000, 60000, 256, 64), (100, 937));
        // 1 GB windows over 416 MB: one window, floor 1000 / 2 = 500 ms.
        assert_eq!(scan_bounds(1000, 1000, 1024, scan_windows(416 << 8, 1024 << 8)), (1000, 1000));
        assert_eq!(scan_windows(0, 100), 1);
    }

    #[test]
    fn placement_halves_and_merges() {
        let mut t = TaskStats::new(2, 1000);
        t.buffer[PRIVATE][1] = 5;
        t.buffer[SHARED][0] = 2;
        assert_eq!(t.merge_buffer(), (2, 5));
        assert_eq!((t.on(0), t.on(1), t.total), (2, 5, 7));
        assert_eq!(t.busiest(), Some(1));
        assert_eq!(t.weight(1), 714);
        // An odd count decays as the kernel's >>= 1 does.
        t.merge_buffer();
        assert_eq!((t.on(0), t.on(1)), (1, 2));
        t.merge_buffer();
        t.merge_buffer();
        assert_eq!((t.total, t.busiest()), (0, None));
    }

    #[test]
    fn groups_join_and_survive_departures() {
        let mut g = Groups::default();
        assert!(g.join(5, 3));
        assert!(g.join(3, 9));
        assert!(!g.join(9, 5));
        assert_eq!(g.leader(9), 3);
        assert_eq!(g.count(), 1);
        g.retain(&|t| t != 3);
        assert_eq!(g.leader(9), g.leader(5));
        assert!(g.grouped(9) && !g.grouped(3));
        g.retain(&|t| t == 9);
        assert_eq!(g.count(), 0);
    }
}

//! "Memory follows CPU": what kernel 3.13 does with one NUMA hinting fault's page
//! (`mpol_misplaced` in mm/mempolicy.c, `numamigrate_update_ratelimit` in mm/migrate.c).
//!
//! Problem: a page must move towards the task that uses it, but not bounce between tasks that
//! share it, and migration must not saturate the memory bus.
//!
//! Approach, per fault, in arrival order:
//! - the page's last fault (`page_cpupid_xchg_last`: task and node) is swapped for this one;
//! - two-stage filter: if the last fault came from another node, the page stays (and a shared
//!   fault — last task not this one — defers this task's next `migrate_deferred` shared-page
//!   migrations: `defer_numa_migrate`); a page never faulted before passes (`cpupid` unset);
//! - a passing non-private fault is skipped while the task still has deferrals
//!   (`numa_migrate_deferred`: "workloads with shared pages rely more on move task near its
//!   memory");
//! - the page moves to the faulting CPU's node (MPOL_F_MORON: "migrate the page towards the
//!   node whose CPU is referencing it") unless that node already took more than 128 MB in the
//!   current 100 ms window (`ratelimit_pages`, `migrate_interval_millisecs`) or is full.

use super::stats::TaskStats;
use ptb_profile::Tid;

/// `ratelimit_pages`: 128 MB per destination node and window.
pub const RATELIMIT_BYTES: u64 = 128 << 20;
/// `migrate_interval_millisecs`: the rate-limit window.
pub const RATELIMIT_WINDOW_NS: u64 = 100_000_000;

/// Why a misplaced page did not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The previous fault on it came from another node (two-stage filter).
    Filter,
    /// A shared page while the task's deferrals last.
    Deferred,
}

/// `mpol_misplaced` for a page on another node than the faulting CPU: may it move there?
/// `last` is the page's previous fault (task, node), `None` when never faulted.
pub fn misplaced(
    tid: Tid,
    cpu_node: usize,
    last: Option<(Tid, usize)>,
    task: &mut TaskStats,
    migrate_deferred: u32,
) -> Result<(), Refused> {
    if let Some((lt, ln)) = last {
        if ln != cpu_node {
            if lt != tid {
                task.deferred = migrate_deferred;
            }
            return Err(Refused::Filter);
        }
    }
    // `numa_migrate_deferred`: never defer a private fault (`cpupid_match_pid`; an unset
    // cpupid does not match).
    if last.is_none_or(|(lt, _)| lt != tid) && task.deferred > 0 {
        task.deferred -= 1;
        return Err(Refused::Deferred);
    }
    Ok(())
}

/// Per-node migration windows (`pgdat->numabalancing_migrate_*`).
#[derive(Clone, Debug, Default)]
pub struct RateLimit {
    /// (end of the current window, pages taken in it) per node.
    windows: Vec<(u64, u64)>,
}

impl RateLimit {
    /// Whether node `n` may take one more page at `t_ns` (and count it if so).
    pub fn take(&mut self, n: usize, t_ns: u64, limit_pages: u64) -> bool {
        if self.windows.len() <= n {
            self.windows.resize(n + 1, (0, 0));
        }
        let w = &mut self.windows[n];
        if t_ns > w.0 {
            *w = (t_ns.saturating_add(RATELIMIT_WINDOW_NS), 0);
        }
        if w.1 > limit_pages {
            return false;
        }
        w.1 += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_stage_filter_and_deferral() {
        let mut t = TaskStats::new(2, 1000);
        // Never faulted: passes. Last fault from this node (any task): passes.
        assert_eq!(misplaced(1, 0, None, &mut t, 16), Ok(()));
        assert_eq!(misplaced(1, 0, Some((1, 0)), &mut t, 16), Ok(()));
        assert_eq!(misplaced(1, 0, Some((2, 0)), &mut t, 16), Ok(()));
        // Last fault from another node: refused; by another task: 16 shared migrations deferred.
        assert_eq!(misplaced(1, 0, Some((1, 1)), &mut t, 16), Err(Refused::Filter));
        assert_eq!(t.deferred, 0, "a private refusal defers nothing");
        assert_eq!(misplaced(1, 0, Some((2, 1)), &mut t, 16), Err(Refused::Filter));
        assert_eq!(t.deferred, 16);
        // Private faults are never deferred; shared ones are, 16 times.
        assert_eq!(misplaced(1, 0, Some((1, 0)), &mut t, 16), Ok(()));
        for _ in 0..16 {
            assert_eq!(misplaced(1, 0, Some((3, 0)), &mut t, 16), Err(Refused::Deferred));
        }
        assert_eq!(misplaced(1, 0, Some((3, 0)), &mut t, 16), Ok(()));
    }

    #[test]
    fn rate_limit_per_node_and_window() {
        let mut r = RateLimit::default();
        // limit 2: the kernel tests `nr_pages > ratelimit` before counting, so 3 pass.
        assert!((0..3).all(|_| r.take(1, 10, 2)));
        assert!(!r.take(1, 20, 2));
        assert!(r.take(0, 20, 2), "another node has its own window");
        assert!(!r.take(1, 10 + RATELIMIT_WINDOW_NS, 2), "the window lasts 100 ms");
        assert!(r.take(1, 11 + RATELIMIT_WINDOW_NS, 2), "a new window");
    }
}

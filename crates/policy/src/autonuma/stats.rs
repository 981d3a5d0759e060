//! Fault statistics of the autonuma model: per-task faults by memory node and by CPU node,
//! private/shared split, numa groups (union-find over tasks that fault on each other's pages)
//! and the adaptive scan period.

use ptb_profile::Tid;
use std::collections::BTreeMap;
use std::time::Duration;

/// Decayed fault counts of one task (the kernel's `numa_faults` array).
#[derive(Clone, Debug, Default)]
pub struct TaskFaults {
    /// Faults per memory node (where the faulting page lived).
    pub mem: Vec<f64>,
    /// Faults per CPU node (where the task ran when it faulted).
    pub cpu: Vec<f64>,
    pub private: f64,
    pub shared: f64,
}

impl TaskFaults {
    pub fn new(nodes: usize) -> Self {
        TaskFaults { mem: vec![0.0; nodes], cpu: vec![0.0; nodes], private: 0.0, shared: 0.0 }
    }
    pub fn total(&self) -> f64 {
        self.mem.iter().sum()
    }
    /// Halve every count (the kernel halves at each placement pass so that old faults fade).
    pub fn decay(&mut self) {
        self.mem.iter_mut().chain(self.cpu.iter_mut()).for_each(|x| *x *= 0.5);
        self.private *= 0.5;
        self.shared *= 0.5;
    }
}

/// NUMA groups: tasks that share pages, joined by union-find.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    parent: BTreeMap<Tid, Tid>,
}

impl Groups {
    pub fn leader(&self, t: Tid) -> Tid {
        let mut x = t;
        while let Some(&p) = self.parent.get(&x) {
            if p == x {
                break;
            }
            x = p;
        }
        x
    }
    /// Join the groups of `a` and `b` (the smaller tid leads, for determinism).
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
    /// Forget tasks that are gone; their members are re-rooted.
    pub fn retain(&mut self, alive: &dyn Fn(Tid) -> bool) {
        let all: Vec<Tid> = self.parent.keys().copied().collect();
        let leaders: BTreeMap<Tid, Tid> = all.iter().map(|&t| (t, self.leader(t))).collect();
        let mut fresh = Groups::default();
        let mut first_alive: BTreeMap<Tid, Tid> = BTreeMap::new();
        for (&t, &l) in &leaders {
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
    /// Members per group leader (only groups with at least two tasks).
    pub fn members(&self) -> BTreeMap<Tid, Vec<Tid>> {
        let mut m: BTreeMap<Tid, Vec<Tid>> = BTreeMap::new();
        for &t in self.parent.keys() {
            m.entry(self.leader(t)).or_default().push(t);
        }
        m.retain(|_, v| v.len() > 1);
        m
    }
}

/// Next scan period from this period's local/remote fault counts.
///
/// The kernel's `update_task_scan_period` (kernel/sched/fair.c): the period is split into
/// `NUMA_PERIOD_SLOTS` = 10 slots; `ratio` = local faults in tenths; at or above
/// `NUMA_PERIOD_THRESHOLD` = 7 the period grows by `(ratio - 7)` slots (at least one), below
/// it shrinks by `(7 - ratio)` slots. With no faults at all the period doubles.
pub fn next_scan_period(period: Duration, local: u64, remote: u64, min: Duration, max: Duration) -> Duration {
    const SLOTS: u128 = 10;
    const THRESHOLD: i128 = 7;
    let p = period.as_millis();
    let next = if local + remote == 0 {
        p.saturating_mul(2)
    } else {
        let slot = p.div_ceil(SLOTS) as i128;
        let ratio = (local as i128 * SLOTS as i128) / (local + remote) as i128;
        let diff = if ratio >= THRESHOLD { (ratio - THRESHOLD).max(1) * slot } else { -(THRESHOLD - ratio) * slot };
        (p as i128 + diff).max(0) as u128
    };
    let next = Duration::from_millis(next.min(u64::MAX as u128) as u64);
    next.clamp(min, max.max(min))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_period_shrinks_on_remote_and_grows_on_local() {
        let (min, max) = (Duration::from_millis(1000), Duration::from_millis(60000));
        let p = Duration::from_millis(10000);
        // All remote: ratio 0 -> shrink by 7 slots of 1000 ms.
        assert_eq!(next_scan_period(p, 0, 100, min, max), Duration::from_millis(3000));
        // All local: ratio 10 -> grow by 3 slots.
        assert_eq!(next_scan_period(p, 100, 0, min, max), Duration::from_millis(13000));
        // Exactly 70% local: grows by one slot.
        assert_eq!(next_scan_period(p, 70, 30, min, max), Duration::from_millis(11000));
        // No faults: doubles, clamped.
        assert_eq!(next_scan_period(Duration::from_millis(40000), 0, 0, min, max), max);
        assert_eq!(next_scan_period(Duration::from_millis(1000), 0, 50, min, max), min);
    }

    #[test]
    fn groups_join_and_survive_departures() {
        let mut g = Groups::default();
        assert!(g.join(5, 3));
        assert!(g.join(3, 9));
        assert!(!g.join(9, 5));
        assert_eq!(g.leader(9), 3);
        assert_eq!(g.members().get(&3).map(Vec::len), Some(3));
        g.retain(&|t| t != 3);
        assert_eq!(g.leader(9), g.leader(5));
        assert_eq!(g.members().len(), 1);
    }
}

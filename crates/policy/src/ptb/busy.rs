//! Which threads run, from the CPU time the driver reports.
//!
//! Problem: ptb gives each thread a CPU's share of a node. A thread that mostly waits (a master
//! blocked in `pthread_join`, a JVM's compiler and GC service threads between bursts, a pool's
//! spare workers) needs no CPU of its own, yet counted as one it makes a program look bigger
//! than it is: in the VM harness the test program's four workers and its waiting main thread
//! are five threads on four CPUs, and ptb treated them as threads that outnumber the CPUs.
//!
//! Approach: the driver reports each thread's CPU time since it started
//! ([`Snapshot::thread_cpu`], user + system time from `/proc/PID/task/TID/stat`). Between two
//! snapshots a thread used `d cpu / d t` of a CPU; its share is the decayed mean of that (the
//! evidence decay of the cycle, [`super::params::DECAY`]). A thread *waits* when its share is
//! known and under one half: two such threads fit on one CPU. Threads whose CPU time the driver
//! does not know (the simulator, whose threads always run; a recorded trace) and threads seen in
//! one snapshot only count as running, so without CPU times nothing changes.

use crate::snapshot::Snapshot;
use ptb_profile::Tid;
use std::collections::BTreeMap;
use std::time::Duration;

/// A thread under this share of a CPU waits (see the module docs).
const WAITING: f64 = 0.5;

/// The last CPU time seen of each thread, and its decayed share of a CPU.
#[derive(Debug, Default)]
pub struct Busy {
    seen: BTreeMap<Tid, Seen>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Duration,
    cpu_s: f64,
    share: Option<f64>,
}

impl Busy {
    /// Take this snapshot's CPU times; threads that are gone are forgotten.
    pub fn observe(&mut self, snap: &Snapshot, decay: f64) {
        if snap.thread_cpu.is_empty() {
            self.seen.clear();
            return;
        }
        let mut next = BTreeMap::new();
        for t in snap.threads {
            let Some(cpu_s) = snap.cpu_s(t.tid) else { continue };
            let share = match self.seen.get(&t.tid) {
                Some(p) if snap.now > p.at && cpu_s >= p.cpu_s => {
                    let now = ((cpu_s - p.cpu_s) / (snap.now - p.at).as_secs_f64()).min(1.0);
                    Some(p.share.map_or(now, |s| decay * s + (1.0 - decay) * now))
                }
                // The same time again, or a CPU time that went back (a reused tid): keep or restart.
                Some(p) if snap.now == p.at => p.share,
                _ => None,
            };
            next.insert(t.tid, Seen { at: snap.now, cpu_s, share });
        }
        self.seen = next;
    }

    /// True unless the thread is known to wait (see the module docs).
    pub fn running(&self, tid: Tid) -> bool {
        self.seen.get(&tid).and_then(|s| s.share).is_none_or(|s| s >= WAITING)
    }

    /// True once the thread's share is known (it was in two snapshots with CPU times).
    pub fn known(&self, tid: Tid) -> bool {
        self.seen.get(&tid).is_some_and(|s| s.share.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ThreadState;
    use ptb_topology::{synthetic::synthetic, CpuId, GroupIdx, NodeIdx};

    fn thread(tid: Tid) -> ThreadState {
        ThreadState { tid, app: 1, cpu: CpuId(0), node: NodeIdx(0), group: GroupIdx(0), affinity: None }
    }

    #[test]
    fn a_thread_that_waits_is_told_from_one_that_runs() {
        let m = synthetic("nodes=2,cpus=2").unwrap();
        let allowed = m.all_nodes();
        let threads = [thread(10), thread(11)];
        let mut b = Busy::default();
        let free = [0u64; 2];
        for (i, cpu) in [[(10, 1.0), (11, 0.30)], [(10, 1.1), (11, 0.31)], [(10, 1.2), (11, 0.32)]].iter().enumerate() {
            let snap = Snapshot::new(&m, &allowed, &threads, &free)
                .at(Duration::from_millis(100 * i as u64), Duration::from_millis(100))
                .with_thread_cpu(cpu);
            b.observe(&snap, 0.5);
            if i == 0 {
                assert!(!b.known(10) && b.running(10) && b.running(11), "one snapshot says nothing");
            } else {
                assert!(b.known(10) && b.known(11));
            }
        }
        assert!(b.running(10), "a thread using a whole CPU runs");
        assert!(!b.running(11), "a thread using a tenth of one waits");
        // Without CPU times (the simulator) every thread runs and nothing is pending.
        let snap = Snapshot::new(&m, &allowed, &threads, &free).at(Duration::from_secs(1), Duration::from_millis(100));
        b.observe(&snap, 0.5);
        assert!(b.running(11) && !b.known(11));
    }
}

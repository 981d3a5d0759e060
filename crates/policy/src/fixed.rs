//! `fixed`: thread i pinned to CPU i (like `GOMP_CPU_AFFINITY=0-63`), pages by first touch.
//! Threads are taken in tid order and CPUs in kernel order over the allowed nodes; with more
//! threads than CPUs the assignment wraps around. Threads that appear later (a program
//! launched by `ptb run` has none at start) get the next CPUs at the next cycle, in tid order;
//! a thread keeps its CPU once given.

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan, ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[];

#[derive(Debug, Default)]
pub struct Fixed {
    /// CPU given to each thread so far.
    assigned: std::collections::BTreeMap<u32, ptb_topology::CpuId>,
    /// Threads assigned so far (the next one gets CPU `next` modulo the CPUs).
    next: usize,
}

impl Fixed {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.section("fixed").finish()?;
        Ok(Fixed::default())
    }

    /// Pins for the threads not yet assigned, in tid order.
    fn assign(
        &mut self,
        machine: &ptb_topology::Machine,
        allowed: &ptb_topology::NodeSet,
        tids: impl Iterator<Item = u32>,
    ) -> Vec<ThreadMove> {
        let cpus: Vec<_> = machine
            .nodes
            .iter()
            .filter(|n| allowed.contains_idx(n.idx))
            .flat_map(|n| n.cpus.iter())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if cpus.is_empty() {
            return vec![];
        }
        let mut tids: Vec<u32> = tids.filter(|t| !self.assigned.contains_key(t)).collect();
        tids.sort_unstable();
        tids.dedup();
        tids.into_iter()
            .map(|tid| {
                let cpu = cpus[self.next % cpus.len()];
                self.next += 1;
                self.assigned.insert(tid, cpu);
                ThreadMove { tid, to: ThreadTarget::Cpu(cpu) }
            })
            .collect()
    }
}

impl Policy for Fixed {
    fn name(&self) -> String {
        "fixed".into()
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        let threads = self.assign(ctx.machine, ctx.allowed, ctx.threads.iter().map(|t| t.tid));
        StartPlan { alloc: AllocPolicy::FirstTouch, threads }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(SamplingMode::None, Duration::from_secs(1))
    }
    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let threads = self.assign(snap.machine, snap.allowed, snap.threads.iter().map(|t| t.tid));
        Plan { threads, ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autonuma::test_world::World;
    use ptb_topology::{CpuId, NodeSet};

    fn pins(w: &World) -> Vec<(u32, u32)> {
        let mut p = Fixed::from_params(&Params::new()).unwrap();
        let ctx = StartContext { machine: &w.machine, allowed: &w.allowed, threads: &w.threads };
        let sp = p.start(&ctx);
        assert_eq!(sp.alloc, AllocPolicy::FirstTouch);
        sp.threads
            .iter()
            .map(|m| match m.to {
                ThreadTarget::Cpu(CpuId(c)) => (m.tid, c),
                other => panic!("fixed pins to CPUs, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn thread_i_goes_to_cpu_i_in_tid_order_and_wraps() {
        let mut w = World::synthetic("nodes=2,cpus=2");
        for (tid, cpu) in [(30, 3), (10, 3), (20, 0), (40, 1), (50, 2)] {
            w.add_thread(tid, 0, cpu);
        }
        assert_eq!(pins(&w), vec![(10, 0), (20, 1), (30, 2), (40, 3), (50, 0)]);
        // Only the allowed nodes' CPUs are used.
        w.allowed = NodeSet::from_iter([1u32]);
        assert_eq!(pins(&w), vec![(10, 2), (20, 3), (30, 2), (40, 3), (50, 2)]);
        // Started with every thread: nothing left to pin.
        let mut p = Fixed::from_params(&Params::new()).unwrap();
        p.start(&StartContext { machine: &w.machine, allowed: &w.allowed, threads: &w.threads });
        assert!(p.decide(&w.snap()).is_empty());
    }

    #[test]
    fn threads_that_appear_later_get_the_next_cpus() {
        let mut w = World::synthetic("nodes=2,cpus=2");
        let mut p = Fixed::from_params(&Params::new()).unwrap();
        // `ptb run`: no thread exists at start.
        assert!(p.start(&StartContext { machine: &w.machine, allowed: &w.allowed, threads: &[] }).threads.is_empty());
        w.add_thread(20, 0, 3);
        w.add_thread(10, 0, 3);
        let got = |plan: Plan| -> Vec<(u32, u32)> {
            plan.threads
                .iter()
                .map(|m| match m.to {
                    ThreadTarget::Cpu(CpuId(c)) => (m.tid, c),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(got(p.decide(&w.snap())), vec![(10, 0), (20, 1)]);
        assert!(p.decide(&w.snap()).is_empty());
        w.add_thread(5, 0, 0);
        assert_eq!(got(p.decide(&w.snap())), vec![(5, 2)]);
    }
}

//! `fixed`: thread i pinned to CPU i (like `GOMP_CPU_AFFINITY=0-63`), pages by first touch.
//! Threads are taken in tid order and CPUs in kernel order over the allowed nodes; with more
//! threads than CPUs the assignment wraps around.

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan, ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[];

#[derive(Debug, Default)]
pub struct Fixed;

impl Fixed {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.section("fixed").finish()?;
        Ok(Fixed)
    }
}

impl Policy for Fixed {
    fn name(&self) -> String {
        "fixed".into()
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        let cpus: Vec<_> = ctx
            .machine
            .nodes
            .iter()
            .filter(|n| ctx.allowed.contains_idx(n.idx))
            .flat_map(|n| n.cpus.iter())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut tids: Vec<_> = ctx.threads.iter().map(|t| t.tid).collect();
        tids.sort_unstable();
        let threads = if cpus.is_empty() {
            vec![]
        } else {
            tids.iter()
                .enumerate()
                .map(|(i, &tid)| ThreadMove { tid, to: ThreadTarget::Cpu(cpus[i % cpus.len()]) })
                .collect()
        };
        StartPlan { alloc: AllocPolicy::FirstTouch, threads }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest { mode: SamplingMode::None, cycle: Duration::from_secs(1) }
    }
    fn decide(&mut self, _snap: &Snapshot) -> Plan {
        Plan::default()
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
        assert!(Fixed::from_params(&Params::new()).unwrap().decide(&w.snap()).is_empty());
    }
}

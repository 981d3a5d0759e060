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

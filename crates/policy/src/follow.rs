//! `follow`: a deliberately naive policy for benchmarks and tests, not a product policy (it is
//! not in the registry). Every cycle it moves each sampled page that is not on the node of the
//! thread that sampled it to that node, up to `max_moves` pages.

use crate::plan::{PageMove, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::Policy;
use ptb_topology::NodeIdx;
use std::collections::HashSet;
use std::time::Duration;

/// Pages follow the threads that sample them.
#[derive(Clone, Debug)]
pub struct Follow {
    pub mode: SamplingMode,
    pub cycle: Duration,
    /// Most pages moved per cycle.
    pub max_moves: usize,
}

impl Policy for Follow {
    fn name(&self) -> String {
        "follow".into()
    }
    fn start(&mut self, _: &StartContext) -> StartPlan {
        StartPlan::default()
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(self.mode, self.cycle)
    }
    fn decide(&mut self, s: &Snapshot) -> Plan {
        let mut plan = Plan::default();
        let mut seen: HashSet<_, ptb_profile::histogram::FxBuild> =
            HashSet::with_capacity_and_hasher(self.max_moves.min(s.samples.len()), Default::default());
        // Samples come thread after thread: look each thread up once per run of its samples.
        let mut last: Option<(u32, Option<NodeIdx>)> = None;
        for x in s.samples {
            if plan.pages.len() >= self.max_moves {
                break;
            }
            let page = x.page(s.machine.page_size);
            let node = match last {
                Some((tid, node)) if tid == x.tid => node,
                _ => s.thread(x.tid).map(|t| t.node),
            };
            last = Some((x.tid, node));
            let Some(node) = node else { continue };
            if s.pages.get(page) != Some(node) && seen.insert(page) {
                plan.pages.push(PageMove { page, to: node });
            }
        }
        plan
    }
}

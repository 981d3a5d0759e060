//! The oracle's placement reached by migration (`oracle-moved`): what full knowledge is worth
//! to a policy that, like every real one, finds the program's data where first touch put it.
//!
//! The oracle places pages as they are allocated, at no cost. A policy that runs beside the
//! program must first let it allocate, then move the pages, paying the copies. This bound gives
//! the oracle the same start: threads placed at start (free, as for any policy), pages by first
//! touch, then, after `delay`, one plan moves every page to the placement of a static candidate;
//! the simulator charges the move like any policy's. The fastest of the few best static
//! candidates reached this way, or first touch left alone, is kept.
//!
//! Like the oracle it is a bound found by search, not a proof: moving in stages, or to another
//! placement, may do better.

use crate::{OracleResult, StaticCandidate};
use ptb_policy::{
    AllocPolicy, PageMove, Plan, Policy, SamplingMode, SamplingRequest, Snapshot, StartContext, StartPlan, ThreadMove,
};
use ptb_profile::PageKey;
use ptb_sim::layout::slice;
use ptb_sim::{FractionRr, RunResult, SimError, Simulation};
use ptb_topology::NodeIdx;
use std::time::Duration;

/// Name of the column and the runs.
pub const ORACLE_MOVED: &str = "oracle-moved";

/// The best candidate reached by migration.
#[derive(Clone, Debug)]
pub struct Reached {
    /// The run, labelled [`ORACLE_MOVED`].
    pub best: RunResult,
    /// Label of the static candidate it moved to (`first-touch` when leaving the pages where
    /// first touch put them was fastest).
    pub winner: String,
}

/// Reach each of the `k` fastest static candidates of `oracle` (first touch excluded: it needs
/// no move) by one migration after `delay`, and keep the fastest run, or first touch.
pub fn reach(sim: &Simulation, oracle: &OracleResult, delay: Duration, k: usize) -> Result<Reached, SimError> {
    let mut best = (sim.first_touch()?, "first-touch".to_string());
    for c in oracle.placements.iter().filter(|c| c.label != "first-touch").take(k) {
        let r = sim.run_with(Box::new(MoveOnce::new(sim, c, delay)))?;
        if r.runtime_s < best.0.runtime_s {
            best = (r, c.label.clone());
        }
    }
    let (mut r, winner) = best;
    r.policy = ORACLE_MOVED.into();
    // No policy code decided anything: the plan was known before the run.
    r.decision_ms = 0.0;
    r.cycles = 0;
    r.policy_stats.clear();
    Ok(Reached { best: r, winner })
}

/// Start with the candidate's threads and first touch; at the first cycle move every page of the
/// candidate's placed objects to its node; then nothing.
struct MoveOnce {
    threads: Vec<ThreadMove>,
    pages: Option<Vec<PageMove>>,
    delay: Duration,
}

impl MoveOnce {
    fn new(sim: &Simulation, c: &StaticCandidate, delay: Duration) -> MoveOnce {
        let l = sim.layout();
        let threads = c.threads.iter().zip(&l.threads).map(|(&to, t)| ThreadMove { tid: t.tid, to }).collect();
        let mut pages = Vec::new();
        for (o, gs) in c.groups.iter().enumerate() {
            let Some(obj) = l.objects.get(o) else { continue };
            for (g, f) in gs.iter().enumerate() {
                let (s, e) = slice(obj.npages, gs.len(), g);
                let mut rr = FractionRr::new(f);
                for p in s..e {
                    let page = PageKey { app: obj.app as ptb_profile::AppId, vpn: obj.start_vpn + p as u64 };
                    pages.push(PageMove { page, to: NodeIdx::from_ix(rr.next_node()) });
                }
            }
        }
        MoveOnce { threads, pages: Some(pages), delay }
    }
}

impl Policy for MoveOnce {
    fn name(&self) -> String {
        ORACLE_MOVED.into()
    }
    fn start(&mut self, _: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: self.threads.clone() }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(SamplingMode::None, self.delay)
    }
    fn decide(&mut self, _: &Snapshot) -> Plan {
        let Some(pages) = self.pages.take() else { return Plan::default() };
        // One move, then no more cycles worth speaking of.
        let sampling = Some(SamplingRequest::new(SamplingMode::None, Duration::from_secs(1 << 20)));
        Plan { pages, sampling, ..Plan::default() }
    }
}

//! `POLICY+selective`: the selective-migration history in front of another policy's page
//! moves. Thread moves and range actions pass through unchanged; a page move survives only
//! when the page lies in a region seen in at least `min_count` epochs (an epoch is the inner
//! policy's cycle). The filter needs address samples; it uses whatever the inner policy asks
//! for, so behind a policy that samples nothing every page move is dropped.

use super::history::History;
use super::{observe, Config};
use crate::params::Params;
use crate::plan::{Plan, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};

pub struct SelectiveFilter {
    inner: Box<dyn Policy>,
    cfg: Config,
    history: History,
    epoch: u64,
}

impl SelectiveFilter {
    pub fn wrap(inner: Box<dyn Policy>, p: &Params) -> Result<Self, PolicyError> {
        Ok(SelectiveFilter { inner, cfg: Config::from_params(p)?, history: History::default(), epoch: 0 })
    }
}

impl Policy for SelectiveFilter {
    fn name(&self) -> String {
        format!("{}+selective", self.inner.name())
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        self.inner.start(ctx)
    }
    fn sampling(&self) -> SamplingRequest {
        self.inner.sampling()
    }
    fn decide(&mut self, snap: &Snapshot) -> Plan {
        self.epoch += 1;
        observe(&mut self.history, self.epoch, self.cfg.max_age, snap);
        let mut plan = self.inner.decide(snap);
        let before = plan.pages.len();
        let (h, min) = (&self.history, self.cfg.min_count);
        plan.pages.retain(|p| h.count_at(p.page.app, p.page.vpn) >= min);
        plan.stats.insert("selective_pages_kept".into(), plan.pages.len() as f64);
        plan.stats.insert("selective_pages_dropped".into(), (before - plan.pages.len()) as f64);
        plan
    }
}

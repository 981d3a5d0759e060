//! `first-touch`: the Linux default and the reference for every speed-up. Pages go to the node
//! of the CPU that touches them first; threads are left to the scheduler; nothing moves.

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[];

#[derive(Debug, Default)]
pub struct FirstTouch;

impl FirstTouch {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.section("first-touch").finish()?;
        Ok(FirstTouch)
    }
}

impl Policy for FirstTouch {
    fn name(&self) -> String {
        "first-touch".into()
    }
    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest { mode: SamplingMode::None, cycle: Duration::from_secs(1) }
    }
    fn decide(&mut self, _snap: &Snapshot) -> Plan {
        Plan::default()
    }
}

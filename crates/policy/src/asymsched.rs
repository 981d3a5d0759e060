//! `asymsched`: placeholder until its implementation lands (returns empty plans).

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[];

#[derive(Debug, Default)]
pub struct AsymSched;

impl AsymSched {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.section("asymsched").finish()?;
        Ok(AsymSched)
    }
}

impl Policy for AsymSched {
    fn name(&self) -> String {
        "asymsched".into()
    }
    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest { mode: SamplingMode::Address { period: 4096 }, cycle: Duration::from_secs(1) }
    }
    fn decide(&mut self, _snap: &Snapshot) -> Plan {
        Plan::default()
    }
}

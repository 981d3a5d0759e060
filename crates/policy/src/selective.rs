//! `selective`: placeholder until its implementation lands (returns empty plans).

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[];

#[derive(Debug, Default)]
pub struct Selective;

impl Selective {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        p.section("selective").finish()?;
        Ok(Selective)
    }
}

impl Policy for Selective {
    fn name(&self) -> String {
        "selective".into()
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

/// The selective filter in front of another policy's page moves (`POLICY+selective`).
pub struct SelectiveFilter {
    inner: Box<dyn Policy>,
}

impl SelectiveFilter {
    pub fn wrap(inner: Box<dyn Policy>, p: &Params) -> Result<Self, PolicyError> {
        p.section("selective").finish()?;
        Ok(SelectiveFilter { inner })
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
        self.inner.decide(snap)
    }
}

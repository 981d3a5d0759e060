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
        SamplingRequest::new(SamplingMode::None, Duration::from_secs(1))
    }
    fn decide(&mut self, _snap: &Snapshot) -> Plan {
        Plan::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autonuma::test_world::World;

    #[test]
    fn allocates_by_first_touch_and_never_moves_anything() {
        let mut w = World::synthetic("nodes=2,cpus=2");
        w.add_thread(1, 0, 0);
        w.place(0, 0..4, 1);
        (0..4).for_each(|v| w.touch(1, v, ptb_profile::SampleKind::Load));
        let mut p = FirstTouch::from_params(&Params::new()).unwrap();
        let ctx = StartContext { machine: &w.machine, allowed: &w.allowed, threads: &w.threads };
        assert_eq!(p.start(&ctx), StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] });
        assert_eq!(p.sampling().mode, SamplingMode::None);
        assert!(p.decide(&w.snap()).is_empty());
        let mut ps = Params::new();
        ps.set_assignment("first-touch.x=1").unwrap();
        assert!(FirstTouch::from_params(&ps).is_err());
    }
}

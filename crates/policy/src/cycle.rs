//! One policy cycle, the same for every driver (the simulator and the Linux daemon).
//!
//! Problem: each driver ran its own decide -> validate -> apply, and they drifted: the daemon
//! honoured only the cycle length of a policy's sampling request and dropped its sampling
//! mode and period, so what a policy asked for held in the simulator only.
//!
//! Approach: a cycle is [`decide`] (the policy's plan, timed with the driver's clock, checked
//! against the snapshot it was made from) then [`Decision::carry_out`] (the plan applied
//! through the driver's [`Actuator`] unless it was refused, and the plan's sampling request
//! handed to the driver's [`SampleControl`]). [`step`] does both. The two halves are apart so
//! that a driver whose snapshot borrows the state its actuator changes (the simulator) can
//! drop the snapshot in between. The clock is passed in: nothing here reads time.
//!
//! ```text
//! Snapshot ──decide──▶ Plan ──validate_plan──▶ Decision ──carry_out──▶ Actuator::apply
//!                                                          └──────────▶ SampleControl::set_sampling
//! ```

use crate::actuator::{Actuator, ApplyReport};
use crate::plan::{validate_plan, Plan, PlanError, SamplingRequest};
use crate::snapshot::Snapshot;
use crate::Policy;
use std::time::Duration;

/// The driver's side of a policy's sampling plan.
pub trait SampleControl {
    /// From the next cycle on, sample as `req` says: its cycle length, its mode (what is
    /// sampled, or nothing) and the mode's period. A driver keeps its own setting where the
    /// user fixed one (e.g. `ptb run --cycle-ms`) or where its source cannot do what is asked,
    /// and says so in the next snapshot (`Snapshot::sampling`, `Snapshot::sampling_period`).
    fn set_sampling(&mut self, req: SamplingRequest);
}

/// A plan and its check, before anything is applied.
#[derive(Debug)]
pub struct Decision {
    pub plan: Plan,
    /// How long `Policy::decide` took, by the driver's clock (zero for a plan not decided
    /// by a policy, e.g. a start plan).
    pub decide_time: Duration,
    /// Why the plan was refused; nothing of a refused plan's placement is applied.
    pub refused: Option<PlanError>,
}

/// What a cycle did.
#[derive(Debug)]
pub struct CycleOutcome {
    pub plan: Plan,
    pub decide_time: Duration,
    pub refused: Option<PlanError>,
    /// What the actuator did (all zero when the plan was refused or applying failed).
    pub report: ApplyReport,
    /// The actuator's error, if applying failed as a whole (per-page failures are in `report`).
    pub apply_error: Option<std::io::Error>,
}

impl CycleOutcome {
    /// True when the actuator applied the plan (it was not refused and did not fail).
    pub fn applied(&self) -> bool {
        self.refused.is_none() && self.apply_error.is_none()
    }
}

/// Check a plan that no policy decided this cycle (a start plan) as [`decide`] checks one.
pub fn check(plan: Plan, snap: &Snapshot) -> Decision {
    let refused = validate_plan(&plan, snap).err();
    Decision { plan, decide_time: Duration::ZERO, refused }
}

/// Ask the policy for its plan and check it. `clock` is the driver's: any monotonic time
/// (only differences count); the decision time is the difference around `decide`.
pub fn decide(policy: &mut dyn Policy, snap: &Snapshot, clock: &mut dyn FnMut() -> Duration) -> Decision {
    let t0 = clock();
    let plan = policy.decide(snap);
    let decide_time = clock().saturating_sub(t0);
    Decision { decide_time, ..check(plan, snap) }
}

impl Decision {
    /// Apply the plan (unless refused) and hand its sampling request to the driver. The request
    /// is not a placement: it is handed on even when the placement was refused, so that the
    /// driver samples as the policy believes it does.
    pub fn carry_out<D: Actuator + SampleControl + ?Sized>(self, driver: &mut D) -> CycleOutcome {
        let Decision { plan, decide_time, refused } = self;
        let (mut report, mut apply_error) = (ApplyReport::default(), None);
        if refused.is_none() {
            match driver.apply(&plan) {
                Ok(r) => report = r,
                Err(e) => apply_error = Some(e),
            }
        }
        if let Some(req) = plan.sampling {
            driver.set_sampling(req);
        }
        CycleOutcome { plan, decide_time, refused, report, apply_error }
    }
}

/// One whole cycle: [`decide`], then [`Decision::carry_out`].
pub fn step<D: Actuator + SampleControl + ?Sized>(
    policy: &mut dyn Policy,
    snap: &Snapshot,
    driver: &mut D,
    clock: &mut dyn FnMut() -> Duration,
) -> CycleOutcome {
    decide(policy, snap, clock).carry_out(driver)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuator::Capabilities;
    use crate::plan::{SamplingMode, StartPlan, ThreadMove, ThreadTarget};
    use crate::snapshot::{StartContext, ThreadState};
    use ptb_topology::{CpuId, GroupIdx, Machine, NodeIdx};

    /// Asks for a given plan every cycle.
    struct Fixed(Plan);
    impl Policy for Fixed {
        fn name(&self) -> String {
            "fixed-plan".into()
        }
        fn start(&mut self, _: &StartContext) -> StartPlan {
            StartPlan::default()
        }
        fn sampling(&self) -> SamplingRequest {
            SamplingRequest::new(SamplingMode::None, Duration::from_secs(1))
        }
        fn decide(&mut self, _: &Snapshot) -> Plan {
            self.0.clone()
        }
    }

    #[derive(Default)]
    struct Recorder {
        applied: Vec<Plan>,
        sampling: Vec<SamplingRequest>,
        fail: bool,
    }
    impl Actuator for Recorder {
        fn capabilities(&self) -> Capabilities {
            Capabilities::default()
        }
        fn apply(&mut self, plan: &Plan) -> std::io::Result<ApplyReport> {
            if self.fail {
                return Err(std::io::Error::other("gone"));
            }
            self.applied.push(plan.clone());
            Ok(ApplyReport { threads_moved: plan.threads.len() as u64, ..Default::default() })
        }
    }
    impl SampleControl for Recorder {
        fn set_sampling(&mut self, req: SamplingRequest) {
            self.sampling.push(req);
        }
    }

    fn machine() -> Machine {
        ptb_topology::synthetic::synthetic("nodes=2,cpus=2").unwrap()
    }

    fn thread(m: &Machine) -> ThreadState {
        let cpu = CpuId(0);
        ThreadState {
            tid: 7,
            app: 1,
            cpu,
            node: NodeIdx(0),
            group: m.group_of_cpu(cpu).unwrap_or(GroupIdx(0)),
            affinity: None,
        }
    }

    fn request(period: u64) -> SamplingRequest {
        SamplingRequest::new(
            SamplingMode::Address { event: ptb_profile::SampledEvent::Misses, period },
            Duration::from_millis(250),
        )
    }

    /// A clock that advances 3 ms per reading.
    fn ticking() -> impl FnMut() -> Duration {
        let mut t = Duration::ZERO;
        move || {
            t += Duration::from_millis(3);
            t
        }
    }

    #[test]
    fn a_valid_plan_is_applied_and_its_sampling_request_reaches_the_driver() {
        let m = machine();
        let allowed = m.all_nodes();
        let threads = [thread(&m)];
        let free = vec![1 << 30; m.n_nodes()];
        let snap = Snapshot::new(&m, &allowed, &threads, &free);
        let plan = Plan {
            threads: vec![ThreadMove { tid: 7, to: ThreadTarget::Node(NodeIdx(1)) }],
            sampling: Some(request(1234)),
            ..Default::default()
        };
        let mut d = Recorder::default();
        let out = step(&mut Fixed(plan.clone()), &snap, &mut d, &mut ticking());
        assert!(out.applied());
        assert_eq!(out.report.threads_moved, 1);
        assert_eq!(out.decide_time, Duration::from_millis(3), "the difference of the driver's clock around decide");
        assert_eq!(d.applied, vec![plan]);
        assert_eq!(d.sampling, vec![request(1234)]);
    }

    #[test]
    fn a_refused_plan_moves_nothing_but_its_sampling_request_still_counts() {
        let m = machine();
        let allowed = m.all_nodes();
        let threads = [thread(&m)];
        let free = vec![1 << 30; m.n_nodes()];
        let snap = Snapshot::new(&m, &allowed, &threads, &free);
        // Thread 9 is not in the snapshot.
        let plan = Plan {
            threads: vec![ThreadMove { tid: 9, to: ThreadTarget::Node(NodeIdx(1)) }],
            sampling: Some(request(99)),
            ..Default::default()
        };
        let mut d = Recorder::default();
        let out = step(&mut Fixed(plan), &snap, &mut d, &mut ticking());
        assert_eq!(out.refused, Some(PlanError::UnknownThread(9)));
        assert!(!out.applied());
        assert!(d.applied.is_empty());
        assert_eq!(d.sampling, vec![request(99)]);
    }

    #[test]
    fn a_group_target_names_its_cpus_and_node_and_an_unknown_or_disallowed_group_is_refused() {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=4,dies=2").unwrap();
        let g = m.node(NodeIdx(1)).groups[1];
        let to = ThreadTarget::Group(g);
        assert_eq!(to.node(&m), Some(NodeIdx(1)));
        assert_eq!(to.cpus(&m), Some(m.group(g).cpus.clone()));
        assert_eq!(m.group(g).cpus.len(), 2);
        let threads = [thread(&m)];
        let free = vec![1 << 30; m.n_nodes()];
        let all = m.all_nodes();
        let snap = Snapshot::new(&m, &all, &threads, &free);
        let plan = |to| Plan { threads: vec![ThreadMove { tid: 7, to }], ..Default::default() };
        assert_eq!(validate_plan(&plan(to), &snap), Ok(()));
        let bad = ThreadTarget::Group(ptb_topology::GroupIdx(99));
        assert_eq!(validate_plan(&plan(bad), &snap), Err(PlanError::UnknownGroup { tid: 7, group: 99 }));
        let only0 = ptb_topology::NodeSet::from_iter([0u32]);
        let snap = Snapshot::new(&m, &only0, &threads, &free);
        assert_eq!(validate_plan(&plan(to), &snap), Err(PlanError::NodeNotAllowed(1)));
    }

    #[test]
    fn an_actuator_failure_is_reported_and_a_plan_without_request_leaves_sampling_alone() {
        let m = machine();
        let allowed = m.all_nodes();
        let threads = [thread(&m)];
        let free = vec![1 << 30; m.n_nodes()];
        let snap = Snapshot::new(&m, &allowed, &threads, &free);
        let plan =
            Plan { threads: vec![ThreadMove { tid: 7, to: ThreadTarget::Node(NodeIdx(1)) }], ..Default::default() };
        let mut d = Recorder { fail: true, ..Default::default() };
        let out = check(plan, &snap).carry_out(&mut d);
        assert!(out.refused.is_none());
        assert!(out.apply_error.is_some());
        assert_eq!(out.decide_time, Duration::ZERO);
        assert_eq!(out.report, ApplyReport::default());
        assert!(d.sampling.is_empty());
    }
}

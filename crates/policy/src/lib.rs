//! Placement policies: pure functions from a [`Snapshot`] of the world to a [`Plan`].
//!
//! ```text
//! driver (simulator | Linux daemon)
//!   start():  StartContext ──Policy::start──▶ StartPlan (allocation policy, initial pinning)
//!   every cycle (cycle::step, the same for both drivers):
//!     samples + placement ──▶ Snapshot ──Policy::decide──▶ Plan ──validate──▶ Actuator::apply
//!                                                             └── plan.sampling ──▶ SampleControl
//! ```
//!
//! A policy never reads a clock, never makes a syscall and never touches globals: time,
//! placement and samples arrive in the snapshot. The same policy object runs unchanged in the
//! simulator and in the daemon. Policies are chosen by name through [`PolicyKind`] and built
//! by [`build`].

pub mod actuator;
pub mod cycle;
pub mod huge;
pub mod kind;
pub mod params;
pub mod plan;
pub mod snapshot;

pub mod asymsched;
pub mod autonuma;
pub mod first_touch;
pub mod fixed;
pub mod follow;
pub mod interleave;
pub mod ptb;
pub mod ptb_classic;
pub mod ptb_v1;
pub mod selective;

pub use actuator::{Actuator, ApplyReport, Capabilities};
pub use cycle::{CycleOutcome, Decision, SampleControl};
pub use huge::{spread_node, whole_huge_pages, HugeBacking};
pub use kind::{build, check_params, PolicyKind, PolicySpec};
pub use params::{ParamDoc, Params, Section};
pub use plan::{
    validate_plan, AllocPolicy, PageMove, Plan, PlanError, RangeAction, RangeOp, SamplingMode, SamplingRequest,
    StartPlan, ThreadMove, ThreadTarget,
};
pub use ptb_profile::SampledEvent;
pub use snapshot::{PageLocations, PageLookup, Region, Snapshot, StartContext, ThreadState};

use thiserror::Error;

/// Errors building or configuring a policy.
#[derive(Debug, Error)]
pub enum PolicyError {
    #[error("unknown policy `{0}` (known: ptb, ptb-v1, ptb-classic, asymsched, selective, autonuma, interleave, weighted-interleave, first-touch, fixed)")]
    Unknown(String),
    #[error("{origin}: parameter `{policy}.{key}`: {reason}")]
    Param { origin: String, policy: String, key: String, reason: String },
    #[error("{0}")]
    Config(String),
}

/// A placement policy.
///
/// Contract:
/// - `start` is called once before the target runs (simulator) or when management begins
///   (daemon); it chooses the allocation policy for new pages and optional initial pinning.
/// - `sampling` says what samples the policy wants and how long a cycle is; the driver may
///   be asked to change it through [`Plan::sampling`].
/// - `decide` is called at the end of every cycle with the samples of that cycle and the
///   current placement. It may keep state between cycles (history), but must not read
///   clocks, files or the OS; identical inputs and state give identical plans.
/// - A plan only names threads in the snapshot, CPU nodes for threads, memory nodes for
///   pages, and nodes in `snapshot.allowed`; the driver rejects any other plan.
pub trait Policy: Send {
    /// The policy's name as on the command line.
    fn name(&self) -> String;
    /// Called once at the start.
    fn start(&mut self, ctx: &StartContext) -> StartPlan;
    /// What samples the policy wants, and the cycle length.
    fn sampling(&self) -> SamplingRequest;
    /// Decide the moves for this cycle.
    fn decide(&mut self, snap: &Snapshot) -> Plan;
}

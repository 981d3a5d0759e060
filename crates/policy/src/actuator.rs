//! The actuator trait: what applies a plan. The Linux runtime implements it with syscalls,
//! the simulator with its own state; dry-run and recording actuators exist for tests.

use crate::plan::Plan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an actuator can do (hwloc's `topology_support` is the model).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub move_threads: bool,
    pub move_pages: bool,
    pub interleave_ranges: bool,
    pub weighted_interleave: bool,
    /// True when applying changes real processes.
    pub real: bool,
}

/// What applying a plan did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyReport {
    pub threads_moved: u64,
    /// Base (4 KiB) pages moved one by one.
    pub pages_moved: u64,
    /// Huge pages moved whole (transparent huge pages on Linux; in the simulator, every
    /// migration of a huge page of a `huge_pages` object). Not counted in `pages_moved`.
    #[serde(default)]
    pub huge_pages_moved: u64,
    /// Base pages not moved where the plan asked, by reason (e.g. `ENOENT`, `EBUSY`, `budget`,
    /// `headroom`, `huge-page`: the huge page holding it went elsewhere).
    pub pages_failed: BTreeMap<String, u64>,
    pub ranges_applied: u64,
    /// Pages tried again after an earlier failure that may pass (e.g. EBUSY).
    #[serde(default)]
    pub pages_retried: u64,
    /// Time the moves cost (simulated seconds in the simulator; wall seconds on Linux).
    pub seconds: f64,
}

impl ApplyReport {
    /// Total failed pages.
    pub fn failed(&self) -> u64 {
        self.pages_failed.values().sum()
    }
}

/// Applies plans.
pub trait Actuator {
    fn capabilities(&self) -> Capabilities;
    /// Apply a validated plan. Per-page failures are counted in the report, never fatal.
    fn apply(&mut self, plan: &Plan) -> std::io::Result<ApplyReport>;
}

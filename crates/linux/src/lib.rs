//! The Linux runtime: real sampling and real placement.
//!
//! ```text
//! procfs (tasks, maps, numa_maps, status)  perf (IBS / PEBS / SPE / page faults) | trace replay
//!            │                                   │
//!            └──────────────▶ daemon ◀───────────┘   (the only wall-clock reader)
//!                               │ Snapshot ─▶ Policy::decide ─▶ validate_plan
//!                               ▼
//!                 actuator: real (move_pages, sched_setaffinity) | dry-run | recording
//! ```
//!
//! Safety rules live in [`safety`]: who may be managed, and what is put back on exit.

pub mod actuator;
pub mod backing;
pub mod daemon;
pub mod holder;
pub mod launch;
pub mod live;
pub mod metrics;
pub mod observe;
pub mod offline;
pub mod pagemove;
pub mod perf;
pub mod procfs;
pub mod record;
pub mod roi;
pub mod safety;
pub mod sys;
pub mod thp;
pub mod trace;
pub mod units;

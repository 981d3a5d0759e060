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
//! Safety rules live in [`safety`]: who may be managed, and what is put back on exit; a
//! managed process is tracked by identity ([`identity`]), not by its pid alone; `ptb roi` and
//! `ptb status` reach a daemon over its [`control`] socket.

/// `eprintln!` that ignores a closed stderr: a daemon managing processes must not panic (and
/// leave threads pinned) because the terminal or pipe that showed its log went away.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod actuator;
pub mod backing;
pub mod control;
pub mod daemon;
pub mod holder;
pub mod identity;
pub mod launch;
pub mod live;
pub mod measured;
pub mod metrics;
pub mod numa_pages;
pub mod observe;
pub mod offline;
pub mod pagemove;
pub mod perf;
pub mod plan_log;
pub mod procfs;
pub mod record;
pub mod rules;
pub mod safety;
pub mod sampling;
pub mod service;
pub mod sys;
pub mod thp;
pub mod trace;
pub mod units;

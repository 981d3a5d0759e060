//! The `ptb` policy's parameters: their documentation (`ptb policies`, `--help`), defaults
//! and parsing from `--set ptb.KEY=VALUE` / `--config`. Eight, each a lever a user can reason
//! about; everything else is the model's to decide (README, "How ptb decides").

use crate::params::{ParamDoc, Params};
use crate::PolicyError;
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "cycle_ms",
        default: "100",
        doc: "milliseconds between decisions (the first cycles, and those after a phase change, last a quarter of it); shorter reacts sooner and costs more CPU",
    },
    ParamDoc {
        key: "period",
        default: "8192",
        doc: "sampling period: one address sample per N memory accesses (half of it in the quick first cycles, 4x once nothing moved for 3 cycles; a source that keeps fewer, such as IBS op without a miss filter, is asked for more, its interrupts held to 2% of the threads' time, to 0.5% in the 4x cycles); smaller sees more and costs more",
    },
    ParamDoc {
        key: "chunk_pages",
        default: "512",
        doc: "pages per chunk, the unit ptb places (power of two; 512 x 4 KiB = 2 MiB): smaller follows finer data structures and needs more samples",
    },
    ParamDoc {
        key: "gate",
        default: "0.02",
        doc: "memory traffic, as a share of the machine's memory bandwidth, below which ptb leaves a program alone (compute-bound)",
    },
    ParamDoc {
        key: "payback",
        default: "2.0",
        doc: "a move must save this many times its migration cost over the data's expected residency; larger moves less",
    },
    ParamDoc {
        key: "horizon_s",
        default: "10",
        doc: "seconds a program just started is expected to keep its access pattern (the prior of the expected residency); set it near your programs' run time",
    },
    ParamDoc {
        key: "mlp",
        default: "6",
        doc: "the most memory accesses a thread overlaps (memory-level parallelism): each program's own is estimated from its samples, at most this; lower makes locality count more",
    },
    ParamDoc {
        key: "pin_threads",
        default: "true",
        doc: "pin each thread to a node and choose each program's nodes with the model; false leaves threads to the scheduler and places pages only",
    },
];

/// Decayed evidence keeps this share from one cycle to the next (per node observed).
pub const DECAY: f64 = 0.5;
/// Decayed samples a chunk needs before it is placed.
pub const MIN_SAMPLES: f64 = 3.0;
/// A chunk never moved by ptb counts as placed within this share of its target at most (less
/// where its sampled homes are many: `sampling_tolerance` in ptb.rs).
pub const TOLERANCE: f64 = 0.25;
/// Quick cycles at start and at a new phase.
pub const QUICK_CYCLES: u32 = 4;
/// Cycles without moves before sampling slows down 4x.
pub const QUIET_AFTER: u32 = 3;
/// Cycles of averaged predictions before the home share of programs ptb does not pin may change.
pub const HOME_CONFIRM: u32 = 3;

/// Tunables of the `ptb` policy (see [`PARAMS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PtbParams {
    pub cycle: Duration,
    pub period: u64,
    pub chunk_pages: u64,
    pub gate: f64,
    pub payback: f64,
    pub horizon_s: f64,
    pub mlp: f64,
    /// Pin threads to nodes ([`super::threads`]) and choose each program's nodes ([`super::layout`]).
    pub pin_threads: bool,
}

impl Default for PtbParams {
    fn default() -> Self {
        PtbParams {
            cycle: Duration::from_millis(100),
            period: 8192,
            chunk_pages: 512,
            gate: 0.02,
            payback: 2.0,
            horizon_s: 10.0,
            mlp: 6.0,
            pin_threads: true,
        }
    }
}

impl PtbParams {
    /// Length of the quick cycles (a quarter of a cycle, at least 1 ms).
    pub fn quick_cycle(&self) -> Duration {
        (self.cycle / 4).max(Duration::from_millis(1))
    }

    /// Sampling period of the quick cycles (half the period, at least 1).
    pub fn quick_period(&self) -> u64 {
        (self.period / 2).max(1)
    }

    /// The `[ptb]` section of `params`, checked (unknown keys and bad values are refused).
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let s = params.section("ptb");
        let d = PtbParams::default();
        let chunk_pages: u64 = s.get("chunk_pages", d.chunk_pages)?;
        if !chunk_pages.is_power_of_two() {
            return Err(PolicyError::Param {
                origin: s.origin("chunk_pages"),
                policy: "ptb".into(),
                key: "chunk_pages".into(),
                reason: format!("{chunk_pages} is not a power of two"),
            });
        }
        let p = PtbParams {
            cycle: Duration::from_millis(s.u64_in("cycle_ms", d.cycle.as_millis() as u64, 10, 3_600_000)?),
            period: s.u64_in("period", d.period, 1, u64::MAX)?,
            chunk_pages,
            gate: s.f64_in("gate", d.gate, 0.0, 1.0)?,
            payback: s.f64_in("payback", d.payback, 0.0, 1e6)?,
            horizon_s: s.f64_in("horizon_s", d.horizon_s, 0.0, 1e6)?,
            mlp: s.f64_in("mlp", d.mlp, 1.0, 1000.0)?,
            pin_threads: s.get("pin_threads", d.pin_threads)?,
        };
        s.finish()?;
        Ok(p)
    }
}

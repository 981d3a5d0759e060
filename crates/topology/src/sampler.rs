//! The address sampler a machine's CPUs have, as a machine file states it.
//!
//! What a policy's samples are depends on the hardware: AMD IBS op tags ops (cache hits
//! included) and, before Zen 4, cannot keep only last-level misses; Intel PEBS load latency
//! sees loads slower than a threshold and never a store, and its precise-store event (Sandy
//! Bridge and later) sees every retired store with only whether it hit the L1 data cache.
//! `ptb run` serves each policy's request
//! with what the hardware has (`ptb_profile::thinning::served`), and the simulator serves it the
//! same way on a machine whose file names its sampler.

use serde::{Deserialize, Serialize};

/// A machine's hardware address sampler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AddressSampler {
    /// AMD IBS op. `op_count`: it can count dispatched ops instead of cycles (`cnt_ctl`,
    /// family 10h revision C and later); `miss_filter`: it can keep only ops that missed the
    /// last-level cache (`l3missonly`, Zen 4 and later).
    IbsOp { op_count: bool, miss_filter: bool },
    /// Intel PEBS load latency (`mem-loads` with a latency threshold). `stores`: the CPU also
    /// has PEBS precise stores (`mem-stores`: every retired store, with its address and whether
    /// it hit the L1 data cache, no latency), which `ptb run` opens beside it when a policy asks
    /// for memory accesses; without it (the default in a file) loads only.
    PebsLoads {
        #[serde(default)]
        stores: bool,
    },
}

impl AddressSampler {
    /// A short name for outputs: `ibs-op (ops counted, no miss filter)`.
    pub fn describe(&self) -> String {
        match self {
            AddressSampler::IbsOp { op_count, miss_filter } => format!(
                "ibs-op ({}, {})",
                if *op_count { "ops counted" } else { "cycles only" },
                if *miss_filter { "last-level-miss filter" } else { "no miss filter" }
            ),
            AddressSampler::PebsLoads { stores: false } => "pebs-loads (loads above a latency threshold)".into(),
            AddressSampler::PebsLoads { stores: true } => {
                "pebs-loads (loads above a latency threshold; precise stores, L1 hit or miss)".into()
            }
        }
    }
}

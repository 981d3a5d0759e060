//! The sample type shared by every driver and every policy.

use ptb_topology::CpuId;
use serde::{Deserialize, Serialize};

/// A thread id (the kernel's TID on Linux; a synthetic id in the simulator).
pub type Tid = u32;

/// An application (process): the PID on Linux; the workload index in the simulator.
pub type AppId = u32;

/// A page of one application's address space: (application, virtual page number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PageKey {
    pub app: AppId,
    /// Virtual address / page size.
    pub vpn: u64,
}

/// What kind of event produced a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleKind {
    /// A sampled load (IBS op, PEBS load-latency, SPE).
    Load,
    /// A sampled store.
    Store,
    /// A sampled access whose direction is unknown.
    Access,
    /// A NUMA hinting fault (the kernel balancer's sampling; simulated for `autonuma`).
    HintFault,
    /// A software page-fault event (works without a PMU; coarse).
    PageFault,
}

/// One sampled memory access.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub app: AppId,
    pub tid: Tid,
    pub cpu: CpuId,
    /// Virtual data address.
    pub addr: u64,
    pub kind: SampleKind,
    /// Time of the sample in ns since the start of management (driver's clock).
    pub time_ns: u64,
    /// Raw perf data source bits (PERF_SAMPLE_DATA_SRC), when the source provides them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_src: Option<u64>,
    /// Access latency in ns (the PEBS/IBS/SPE weight, converted from core cycles by the
    /// source), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<f32>,
    /// Physical address, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys: Option<u64>,
}

impl Sample {
    /// The page this sample falls in, for a page size (a power of two).
    pub fn page(&self, page_size: u64) -> PageKey {
        PageKey { app: self.app, vpn: self.addr / page_size }
    }

    /// Where the access was served from, when the source says so (`data_src`).
    pub fn level(&self) -> Option<crate::datasrc::MemLevel> {
        self.data_src.and_then(crate::datasrc::decode)
    }

    /// False only for a sample the source marks as a cache hit: every sample of a source
    /// that samples memory accesses (PEBS load latency, faults) counts as one.
    pub fn is_memory_access(&self) -> bool {
        self.level().is_none_or(|l| l.is_dram())
    }
}

/// Which events a hardware address sampler counts, i.e. what one sample stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampledEvent {
    /// One op every `period` core clock cycles (AMD IBS op in its default mode, the one the
    /// PTB thesis and AsymSched used): a fixed number of samples per second per busy core,
    /// each op a memory op, a DRAM access or neither in proportion to the program's mix. Like
    /// [`Ops`](Self::Ops), cache hits included and non-memory ops without an address.
    Cycles,
    /// Every executed op (AMD IBS op with `cnt_ctl`, Arm SPE without filters): one sample per
    /// `period` ops; memory ops of every kind carry an address, cache hits included, and a
    /// data source that says which were DRAM accesses. Non-memory ops are sampled (and cost
    /// an interrupt) but carry no address.
    Ops,
    /// Loads slower than a latency threshold (Intel PEBS load latency, SPE with a latency
    /// filter): in practice the loads that miss the caches; one sample per `period` such loads,
    /// with the latency. Stores are not seen.
    SlowLoads,
    /// Every access that misses the last-level cache, loads and stores (SPE with a
    /// last-level-miss filter; IBS filtered in software): one sample per `period` memory
    /// accesses.
    Misses,
}

impl SampledEvent {
    pub fn name(self) -> &'static str {
        match self {
            SampledEvent::Cycles => "cycles",
            SampledEvent::Ops => "ops",
            SampledEvent::SlowLoads => "slow-loads",
            SampledEvent::Misses => "misses",
        }
    }
}

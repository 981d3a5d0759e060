//! The sample-source trait: perf rings, the simulator and trace replay implement it.

use serde::{Deserialize, Serialize};

/// Counters a source keeps about what it delivered and what it lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceStats {
    /// Samples delivered.
    pub samples: u64,
    /// Samples the kernel reported lost (PERF_RECORD_LOST) or the source dropped.
    pub lost: u64,
    /// Records that were not samples and were skipped (throttle, unknown records).
    pub other: u64,
    /// Samples of cache hits dropped because the source was asked for memory accesses only.
    pub cache_hits: u64,
}

impl SourceStats {
    /// Add another set of counters to this one.
    pub fn add(&mut self, o: &SourceStats) {
        self.samples += o.samples;
        self.lost += o.lost;
        self.other += o.other;
        self.cache_hits += o.cache_hits;
    }
}

/// A producer of samples. `drain` appends every sample available now to `out` and returns
/// the counters for this call. It never blocks for long.
pub trait SampleSource {
    /// Short description, e.g. `ibs_op (AMD IBS, period 65536)` or `page-faults (software)`.
    fn describe(&self) -> String;
    /// Append available samples to `out`.
    fn drain(&mut self, out: &mut Vec<crate::Sample>) -> std::io::Result<SourceStats>;
}

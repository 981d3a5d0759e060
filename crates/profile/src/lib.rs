//! Memory-access samples and what is built from them.
//!
//! ```text
//! SampleSource (perf ring / simulator / trace replay) --drain--> [Sample] --> histograms --> policy
//! ```
//!
//! A [`Sample`] is one sampled memory access (or one NUMA hinting fault): which thread, on which
//! CPU, at which virtual address, optionally with data source, latency and physical address.
//! Every driver (the Linux daemon, the simulator, trace replay) produces the same type.

pub mod datasrc;
pub mod histogram;
pub mod regions;
pub mod sample;
pub mod source;
pub mod thinning;

pub use datasrc::MemLevel;
pub use histogram::{HistStats, Histogram, HistogramKind};
pub use regions::{infer_regions, infer_segment, InferredRegion};
pub use sample::{AppId, PageKey, Sample, SampleKind, SampledEvent, Tid};
pub use source::{SampleSource, SourceStats};

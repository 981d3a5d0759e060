//! Machine characterisation: measures the Bandwidth Graph (GB/s from every CPU group to every
//! memory node, one group active and all at once) and the idle latency matrix of the machine
//! ptb runs on, and imports the same from Intel MLC output.
//!
//! ```text
//! options (sizes from the LLC) ──> measure::characterize ──> Characterisation ──> model::with_measurements ──> Machine
//!      kernel (triad, copy; pinned thread team)   latency (pointer chase)   buffer (mbind-ed memory)   sys (syscalls)
//! MLC text ──> mlc::parse ──> import::import ──> Machine
//! ```

pub mod buffer;
pub mod error;
pub mod import;
pub mod kernel;
pub mod latency;
pub mod llc;
pub mod measure;
pub mod mlc;
pub mod model;
pub mod options;
pub mod sys;

pub use error::CharError;
pub use measure::{characterize, Characterisation, Sanity, Step};
pub use mlc::{MlcError, MlcKind, MlcMatrix};
pub use model::Grouping;
pub use options::Options;

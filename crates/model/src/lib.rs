//! A user's own program as a simulator workload: `ptb model --trace app.trace -o app.toml`.
//!
//! ```text
//! ptb record trace | perf script text ──▶ Recording (one process: samples, regions, page nodes)
//!   ──▶ objects (sampled mappings)  ──▶ thread order  ──▶ phases (kinds of access mix over time)
//!   ──▶ per phase, thread and object: the access spread that explains the sampled addresses best
//!       (private slice, neighbours, uniform, hot subset, streaming, all-to-all, private+uniform)
//!   ──▶ Workload (docs/workload-file.md) + a fit score per object ──▶ TOML with comments
//! check: the recorded access map vs the model simulated on the recorded machine under the
//!        recorded placement (L1 distance between the two normalised node x node matrices)
//! ```
//!
//! Everything here is a pure function of the recording: no clock, no system calls.

pub mod check;
pub mod fit;
pub mod objects;
pub mod patterns;
pub mod perf_script;
pub mod phases;
pub mod recording;

pub use check::{check, CheckResult};
pub use fit::{fit, FitOptions, Fitted};
pub use recording::Recording;

/// Why a recording could not be modelled.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// A malformed input: file, line, field and what is wrong.
    Input {
        origin: String,
        line: usize,
        field: String,
        reason: String,
    },
    /// Nothing to fit (no samples, no thread or object with enough samples).
    Empty(String),
    Io(String),
    /// The input contradicts itself (a sample from a CPU its machine does not have).
    Mismatch(String),
    /// The simulator refused the model or the placement (a bug: the fitter must not emit those).
    Sim(String),
}

impl ModelError {
    pub fn input(origin: &str, line: usize, field: &str, reason: impl Into<String>) -> Self {
        ModelError::Input { origin: origin.into(), line, field: field.into(), reason: reason.into() }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::Input { origin, line, field, reason } => {
                write!(f, "{origin}: line {line}: field `{field}`: {reason}")
            }
            ModelError::Empty(s) | ModelError::Io(s) | ModelError::Mismatch(s) | ModelError::Sim(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ModelError {}

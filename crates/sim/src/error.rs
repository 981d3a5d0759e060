//! Errors of the simulator. Each names the file (or workload), the field and the reason.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("{origin}: field `{field}`: {reason}")]
    Workload { origin: String, field: String, reason: String },
    #[error("unknown workload `{0}`: not a built-in model (see `ptb workloads`) and no such file")]
    UnknownWorkload(String),
    #[error("cannot read {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("machine: {0}")]
    Machine(String),
    #[error("simulation options: {0}")]
    Options(String),
    #[error("policy `{policy}`: {reason}")]
    Policy { policy: String, reason: String },
    #[error("policy `{policy}` returned an impossible plan at t={time_s:.3} s (cycle {cycle}): {reason}; nothing of it was applied")]
    InvalidPlan { policy: String, cycle: u64, time_s: f64, reason: String },
    #[error("static placement: {0}")]
    Placement(String),
}

impl SimError {
    pub fn workload(origin: impl Into<String>, field: impl Into<String>, reason: impl Into<String>) -> Self {
        SimError::Workload { origin: origin.into(), field: field.into(), reason: reason.into() }
    }
}

//! Typed errors of the machine model. Each names the file or directory, the field, and what to do.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TopologyError {
    #[error("cannot read {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("cannot write {path}: {error}")]
    Write { path: PathBuf, error: std::io::Error },
    /// A file of a sysfs/proc tree that exists but cannot be read.
    #[error("cannot read {path}: {error}; {hint}")]
    Unreadable { path: PathBuf, error: std::io::Error, hint: String },
    #[error("{path}: cannot parse {what}: {reason}")]
    Parse { path: PathBuf, what: String, reason: String },
    #[error("{origin}: field `{field}`: {reason}")]
    Invalid { origin: String, field: String, reason: String },
    #[error("bad list `{text}`: {reason} (expected a numactl-style list such as `0-3,8,10-11`)")]
    List { text: String, reason: String },
    #[error("unknown machine `{name}`: not a preset (see `ptb machines`) and no such file")]
    UnknownMachine { name: String },
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error("{path} is a directory, not {what}: {hint}")]
    Directory { path: PathBuf, what: String, hint: String },
    #[error("bad synthetic spec `{spec}`: {reason} (example: `nodes=4,cpus=8,dies=2`)")]
    Synthetic { spec: String, reason: String },
}

impl TopologyError {
    /// Shorthand for an [`TopologyError::Invalid`].
    pub fn invalid(origin: impl Into<String>, field: impl Into<String>, reason: impl Into<String>) -> Self {
        TopologyError::Invalid { origin: origin.into(), field: field.into(), reason: reason.into() }
    }
}

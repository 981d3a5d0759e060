//! Typed errors of characterisation and MLC import; each says what failed, on what, and what to do.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CharError {
    /// `mbind(2)` refused to bind a buffer to a node.
    #[error("cannot bind {bytes} bytes of memory to node {node}: {error}. {hint}")]
    Bind { node: u32, bytes: usize, error: std::io::Error, hint: String },
    /// Pages did not land on the node they were bound to.
    #[error("memory bound to node {node} was placed on node {found}: the kernel ignored the binding ({hint})")]
    Misplaced { node: u32, found: i32, hint: String },
    /// `sched_setaffinity(2)` refused a CPU.
    #[error("cannot pin a measuring thread to CPU {cpu}: {error}. {hint}")]
    Affinity { cpu: u32, error: std::io::Error, hint: String },
    /// `mmap(2)` failed.
    #[error(
        "cannot allocate {bytes} bytes for node {node}'s buffers: {error} (try --quick, which uses smaller buffers)"
    )]
    Alloc { node: u32, bytes: usize, error: std::io::Error },
    /// Nothing can be measured on this machine model.
    #[error("nothing to measure: {0}")]
    Nothing(String),
    /// A measuring thread panicked (a bug; please report it).
    #[error("a measuring thread failed: {0}")]
    Thread(String),
    /// An MLC output file could not be read.
    #[error("cannot read MLC output {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    /// An MLC output file is malformed.
    #[error("{path}: {error}")]
    Mlc { path: PathBuf, error: crate::mlc::MlcError },
    /// MLC matrices do not fit the machine they are imported onto.
    #[error("MLC import: {0}")]
    Import(String),
    /// The machine model was refused.
    #[error(transparent)]
    Topology(#[from] ptb_topology::TopologyError),
}

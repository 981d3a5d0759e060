//! ptb's machine model: the one type every other part of ptb reads.
//!
//! ```text
//! Machine
//!  ├─ nodes:  Node { id: NodeId (kernel), idx: NodeIdx (dense), cpus, memory }   (CPU-less nodes allowed)
//!  ├─ groups: CpuGroup { idx: GroupIdx, node, cpus }      (die / LLC domain inside a node)
//!  ├─ distances: Matrix (SLIT, node x node)
//!  ├─ links:  Link { a, b: End, gbps each way, width }     + routes: (group, node) -> directed hops
//!  └─ bandwidth: BandwidthGraph { uncontended, contended (GB/s), latency (ns): group x node }
//! ```
//!
//! Sources of a machine: [`sysfs`] (this machine; root passed in), [`file`] (TOML/JSON machine
//! files), [`presets`] (built-in published machines), [`synthetic`] (a short text spec for tests).
//! Every matrix carries its [`MatrixSource`] and unit. A machine also records where it came from
//! ([`ModelSource`]) so that a model from a preset or a fixture is never used to move real processes.

pub mod cpulist;
pub mod error;
pub mod file;
pub mod ids;
pub mod input;
pub mod machine;
pub mod matrix;
pub mod presets;
pub mod render;
pub mod sampler;
pub mod synthetic;
pub mod sysfs;
pub mod validate;

pub use cpulist::{CpuSet, NodeSet};
pub use error::TopologyError;
pub use ids::{CpuId, GroupIdx, LinkIdx, NodeId, NodeIdx};
pub use machine::{BandwidthGraph, CpuGroup, DirLink, End, Link, Machine, MigrationCosts, ModelSource, Node, Route};
pub use matrix::{Matrix, MatrixSource};
pub use sampler::AddressSampler;

/// Resolve a `--machine` argument: a preset name, `synthetic:SPEC`, a machine file path, or a
/// directory holding a captured sysfs tree (`scripts/capture-sysfs.sh`).
pub fn resolve(arg: &str) -> Result<Machine, TopologyError> {
    if let Some(spec) = arg.strip_prefix("synthetic:") {
        return synthetic::synthetic(spec);
    }
    if presets::list().iter().any(|(n, _)| *n == arg) {
        return presets::get(arg);
    }
    let path = std::path::Path::new(arg);
    if path.is_dir() {
        if !path.join("sys/devices/system").is_dir() {
            return Err(TopologyError::Directory {
                path: path.into(),
                what: "a machine file".into(),
                hint: "a directory given as a machine must hold a captured sysfs tree (sys/devices/system/..., made \
                       by scripts/capture-sysfs.sh); give a machine file (.toml or .json) or a preset name"
                    .into(),
            });
        }
        return sysfs::read_machine(path);
    }
    if path.symlink_metadata().is_ok() {
        return file::load(path);
    }
    Err(TopologyError::UnknownMachine { name: arg.to_string() })
}

//! The built-in workload suite: models named after the programs of the published evaluations
//! (workloads.md), stored as TOML files under `crates/sim/workloads/` and embedded at build
//! time. Each file says what its parameters are based on. Sizes are scaled down (hundreds of
//! MiB instead of tens of GiB) so a run takes seconds; the access patterns, intensities and
//! initialisation are what matter for placement.

use super::Workload;
use crate::error::SimError;

macro_rules! suite {
    ($($name:literal),* $(,)?) => {
        /// (name, TOML text) of every built-in workload.
        pub const FILES: &[(&str, &str)] = &[$(($name, include_str!(concat!("../../workloads/", $name, ".toml")))),*];
    };
}

suite!(
    "canneal",
    "fluidanimate",
    "streamcluster",
    "facesim",
    "cg",
    "mg",
    "ft",
    "sp",
    "bt",
    "lu",
    "ep",
    "is",
    "wr",
    "wc",
    "kmeans",
    "pca",
    "matrixmult",
    "specjbb",
    "graph500",
    "swaptions",
);

/// Names of the built-in workloads.
pub fn names() -> Vec<&'static str> {
    FILES.iter().map(|f| f.0).collect()
}

/// A built-in workload by name.
pub fn get(name: &str) -> Option<Result<Workload, SimError>> {
    FILES.iter().find(|f| f.0 == name).map(|(n, text)| Workload::parse(text, &format!("built-in workload {n}.toml")))
}

/// Every built-in workload.
pub fn all() -> Result<Vec<Workload>, SimError> {
    FILES.iter().map(|(n, t)| Workload::parse(t, &format!("built-in workload {n}.toml"))).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_parses_and_is_named_after_its_file() {
        for (name, _) in super::FILES {
            let w = super::get(name).unwrap().unwrap();
            assert_eq!(&w.name, name);
            assert!(!w.description.is_empty() && !w.source.is_empty(), "{name}");
        }
    }
}

//! One module per subcommand.

pub mod attach;
pub mod bench;
pub mod calibrate;
pub mod characterize;
pub mod compare;
pub mod daemon;
pub mod machines;
pub mod plan;
pub mod policies;
pub mod record;
pub mod report;
pub mod roi;
pub mod run;
pub mod simulate;
pub mod status;
pub mod subsets;
pub mod topology;
pub mod workloads;

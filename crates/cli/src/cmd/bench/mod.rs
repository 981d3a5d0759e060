//! `ptb bench`: benchmarks that print figures (never timed tests). One file per benchmark.

use anyhow::Result;
use clap::Subcommand;

mod actuator;
mod policy;
mod sim;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand, Debug)]
enum Which {
    /// Policy decision time per cycle and sample ingest rate.
    Policy(policy::Args),
    /// Simulator speed: simulated seconds per wall second, and memory.
    Sim(sim::Args),
    /// Page-migration rate of the batched parallel actuator vs one page per call (Linux).
    Actuator(actuator::Args),
}

pub fn run(args: Args) -> Result<()> {
    match args.which {
        Which::Policy(a) => policy::run(a),
        Which::Sim(a) => sim::run(a),
        Which::Actuator(a) => actuator::run(a),
    }
}

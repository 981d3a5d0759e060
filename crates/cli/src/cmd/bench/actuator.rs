//! `ptb bench actuator` (being built).

use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<()> {
    bail!("`ptb bench actuator` is not available in this build yet")
}

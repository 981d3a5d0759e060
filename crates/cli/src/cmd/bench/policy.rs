//! `ptb bench policy` (being built).

use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<()> {
    bail!("`ptb bench policy` is not available in this build yet")
}

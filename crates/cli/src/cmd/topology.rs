//! `ptb topology` (being built).

use anyhow::{bail, Result};

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<()> {
    bail!("`ptb topology` is not available in this build yet")
}

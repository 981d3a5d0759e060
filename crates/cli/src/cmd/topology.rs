//! `ptb topology`: show a machine's nodes, CPUs, CPU groups, memory, distances, links, routes
//! and Bandwidth Graph, as text (like lstopo) or as stable JSON (`--json`).

use crate::common;
use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Machine to show: a preset name (see `ptb machines`), a machine file (TOML or JSON), a
    /// directory with a captured sysfs tree (scripts/capture-sysfs.sh), or `synthetic:SPEC`
    /// (e.g. `synthetic:nodes=4,cpus=8,dies=2`). Default: this machine, from /sys.
    #[arg(short, long, value_name = "NAME|FILE|DIR|synthetic:SPEC")]
    machine: Option<String>,
    /// Print the machine as JSON (schema `ptb.topology/1`, documented in the README).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let m = common::load_machine(args.machine.as_deref())?;
    if args.json {
        write_stdout(&(serde_json::to_string_pretty(&ptb_topology::render::to_json(&m))? + "\n"))
    } else {
        write_stdout(&ptb_topology::render::render_text(&m))
    }
}

/// Write `text` to stdout; a closed pipe (`ptb topology | head`) is not an error.
pub(crate) fn write_stdout(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

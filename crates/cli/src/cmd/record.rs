//! `ptb record`: samples and placements of a process to a trace file (docs/trace-format.md).

use anyhow::{Context, Result};
use ptb_linux::procfs::ProcRoot;
use ptb_linux::record::{record, RecordConfig};
use ptb_linux::safety::{self, check_target, Caller};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Process to record.
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// How long to record, seconds.
    #[arg(long, default_value_t = 10.0, value_parser = crate::common::seconds)]
    pub seconds: f64,
    /// Trace file to write (JSON lines).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// Sample source.
    #[arg(long, default_value = "auto", value_parser = ["auto", "ibs-op", "pebs-loads", "spe", "page-faults"])]
    pub source: String,
    /// Sampling period: events per sample (default: 1 for page faults, 4096 for hardware).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub period: Option<u64>,
    /// How often placements are written, in milliseconds (10 to 3600000).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub cycle: u64,
}

pub fn run(a: Args) -> Result<()> {
    let root = ProcRoot::live();
    check_target(&root, &Caller::current(&root), a.pid)?;
    let m = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    if m.n_nodes() < 2 {
        ptb_linux::say!(
            "ptb: this machine has 1 NUMA node: the trace will show accesses but every page is on node 0; \
             `ptb plan --machine NAME` can still plan it for another machine"
        );
    }
    safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
    let cfg =
        RecordConfig { seconds: a.seconds, cycle: Duration::from_millis(a.cycle), source: a.source, period: a.period };
    let s = record(&root, &m, a.pid, &a.output, &cfg).map_err(anyhow::Error::msg)?;
    ptb_linux::say!(
        "ptb: recorded pid {} with {}: {} samples ({} lost), {} threads, {} placements{} -> {}",
        a.pid,
        s.source,
        s.samples,
        s.lost,
        s.threads_seen,
        s.placements,
        if s.target_exited { ", target exited" } else { "" },
        a.output.display()
    );
    Ok(())
}

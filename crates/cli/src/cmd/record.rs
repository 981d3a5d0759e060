//! `ptb record`: samples and placements of a process to a trace file (docs/trace-format.md),
//! either a running one (`ptb record PID -o FILE`) or a program ptb launches and records until
//! it exits (`ptb record -o FILE -- CMD ARGS`, like `perf record`).

use anyhow::{bail, Context, Result};
use ptb_linux::procfs::ProcRoot;
use ptb_linux::record::{record, RecordConfig};
use ptb_linux::safety::{self, check_target, Caller};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Process to record (or give a program after `--`).
    #[arg(value_name = "PID", required_unless_present = "cmd", conflicts_with = "cmd")]
    pub pid: Option<u32>,
    /// How long to record, in seconds (default: 10 for a PID; until the program exits for a
    /// program ptb launches).
    #[arg(long, value_name = "S", value_parser = crate::common::seconds)]
    pub seconds: Option<f64>,
    /// Trace file to write (JSON lines). `--output` is the old spelling, still accepted.
    #[arg(short, long, alias = "output", value_name = "FILE")]
    pub out: PathBuf,
    /// Sample source.
    #[arg(long, default_value = "auto", value_parser = ["auto", "ibs-op", "pebs-loads", "spe", "page-faults"])]
    pub source: String,
    /// Sampling period: events per sample (default: 1 for page faults, 4096 for hardware).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub period: Option<u64>,
    /// How often placements are written, in milliseconds (10 to 3600000).
    #[arg(long, value_name = "MS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub cycle: u64,
    /// A program to launch and record until it exits, with its arguments.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    let root = ProcRoot::live();
    let seconds = match a.seconds {
        Some(s) if !(s.is_finite() && s > 0.0) => bail!("--seconds {s}: give a positive number of seconds"),
        Some(s) => s,
        None if a.cmd.is_empty() => 10.0,
        None => f64::INFINITY,
    };
    if let Some(pid) = a.pid {
        check_target(&root, &Caller::current(&root), pid)?;
    }
    let m = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    if m.n_nodes() < 2 {
        ptb_linux::say!(
            "ptb: this machine has 1 NUMA node: the trace will show accesses but every page is on node {}; \
             `ptb plan --machine NAME` can still plan it for another machine",
            m.nodes.first().map_or(0, |n| n.id.0)
        );
    }
    safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
    let cfg =
        RecordConfig { seconds, cycle: Duration::from_millis(a.cycle.max(10)), source: a.source, period: a.period };
    let mut child = None;
    let pid = match a.pid {
        Some(pid) => pid,
        None => {
            let (c, _, _) = ptb_linux::launch::spawn(&root, &m, &a.cmd, &ptb_policy::AllocPolicy::FirstTouch)
                .map_err(anyhow::Error::msg)?;
            let pid = c.id();
            ptb_linux::say!("ptb: started `{}` as pid {pid}; recording it to {}", a.cmd.join(" "), a.out.display());
            child = Some(c);
            pid
        }
    };
    let r = record(&root, &m, pid, &a.out, &cfg).map_err(anyhow::Error::msg);
    // A launched program: pass a stop signal on, then wait for it and exit like it.
    let status = match child.as_mut() {
        Some(c) => {
            if r.is_err() || safety::stop_requested().is_some() {
                let sig = safety::stop_requested().unwrap_or(libc::SIGTERM);
                // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
                unsafe { libc::kill(pid as i32, sig) };
            }
            Some(c.wait().with_context(|| format!("waiting for pid {pid}"))?)
        }
        None => None,
    };
    let s = r?;
    ptb_linux::say!(
        "ptb: recorded pid {pid} with {}: {} ({} lost), {}, {}{} -> {}",
        s.source,
        crate::common::plural(s.samples, "sample", "samples"),
        s.lost,
        crate::common::plural(s.threads_seen, "thread", "threads"),
        crate::common::plural(s.placements, "placement", "placements"),
        if s.target_exited { ", target exited" } else { "" },
        a.out.display()
    );
    if let Some(st) = status {
        use std::os::unix::process::ExitStatusExt;
        let code = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
        if code != 0 {
            std::process::exit(code);
        }
    }
    Ok(())
}

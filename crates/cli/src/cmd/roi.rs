//! `ptb roi begin|end PID`: turn placement on or off for a process managed by `ptb run` or
//! `ptb attach` (around a program's region of interest). Writes `$PTB_ROI_DIR/ptb-roi.PID`
//! (default /tmp), which the daemon reads every cycle.

use anyhow::{Context, Result};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Which {
    /// Placement on.
    Begin,
    /// Placement off (threads and pages stay where they are).
    End,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(value_enum)]
    pub which: Which,
    /// The managed process.
    #[arg(value_name = "PID")]
    pub pid: u32,
}

pub fn run(a: Args) -> Result<()> {
    let on = matches!(a.which, Which::Begin);
    // A pid that does not exist (a typo, a program that already ended) would only leave a
    // stale file that a later process with the same pid would obey.
    if !ptb_linux::observe::alive(&ptb_linux::procfs::ProcRoot::live(), a.pid) {
        anyhow::bail!(
            "no running process {}: `ptb roi {}` applies to a process that ptb run or ptb attach manages",
            a.pid,
            if on { "begin" } else { "end" }
        );
    }
    let p = ptb_linux::roi::write(a.pid, on).with_context(|| format!("writing the ROI file of pid {}", a.pid))?;
    eprintln!(
        "ptb: placement {} for pid {} ({}; a ptb daemon managing it reads this every cycle)",
        if on { "on" } else { "off" },
        a.pid,
        p.display()
    );
    Ok(())
}

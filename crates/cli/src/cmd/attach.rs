//! `ptb attach`: manage the placement of running processes.

use super::run::{manage, prepare, ManageArgs};
use anyhow::{bail, Result};
use ptb_linux::daemon::Target;
use ptb_linux::procfs::ProcRoot;
use ptb_linux::safety::{check_target, Caller};
use ptb_linux::say;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Process ids to manage.
    #[arg(required = true, value_name = "PID")]
    pub pids: Vec<u32>,
    #[command(flatten)]
    pub manage: ManageArgs,
}

pub fn run(args: Args) -> Result<()> {
    let root = ProcRoot::live();
    let me = Caller::current(&root);
    if args.pids.iter().collect::<std::collections::BTreeSet<_>>().len() != args.pids.len() {
        bail!("the same pid is given twice");
    }
    for &pid in &args.pids {
        check_target(&root, &me, pid)?;
    }
    let Some(p) = prepare(&args.manage)? else {
        say!("ptb: not attaching to {:?}", args.pids);
        return Ok(());
    };
    // Each process is known by identity from here on: if it exits and its pid is reused,
    // the new process is never touched.
    let targets = args
        .pids
        .iter()
        .map(|&pid| Target::attach(&root, pid).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let out = manage(&args.manage, p, None, targets, false, "attach")?;
    if let Some(sig) = out.signal {
        say!("ptb: detached on signal {sig}; the processes keep running");
    }
    Ok(())
}

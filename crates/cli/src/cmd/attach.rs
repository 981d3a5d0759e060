//! `ptb attach`: manage the placement of running processes.

use super::run::{manage, prepare, ManageArgs};
use anyhow::{bail, Result};
use ptb_linux::daemon::Target;
use ptb_linux::procfs::ProcRoot;
use ptb_linux::safety::{check_target, Caller};

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
    for &pid in &args.pids {
        check_target(&root, &me, pid)?;
    }
    let Some(p) = prepare(&args.manage)? else {
        eprintln!("ptb: not attaching to {}", crate::common::join(&args.pids));
        return Ok(());
    };
    if args.pids.len() > 1 && args.pids.iter().collect::<std::collections::BTreeSet<_>>().len() != args.pids.len() {
        bail!("the same pid is given twice");
    }
    let targets = args.pids.iter().map(|&pid| Target { pid, child: None }).collect();
    let out = manage(&args.manage, p, None, targets, false)?;
    if let Some(sig) = out.signal {
        eprintln!("ptb: detached on signal {sig}; the processes keep running");
    }
    Ok(())
}

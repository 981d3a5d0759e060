//! `ptb roi begin|end PID`: turn placement on or off for a process managed by `ptb run`,
//! `ptb attach` or the `ptb daemon` service (around a program's region of interest). The
//! request goes over the managing daemon's control socket (see `ptb_linux::control`), which
//! checks who asks: root, the daemon's user or the process's owner.

use anyhow::Result;
use ptb_linux::control;
use ptb_linux::say;

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
    let euid = nix_euid();
    let msg = control::roi(&control::client_dirs(euid), euid, a.pid, on).map_err(anyhow::Error::msg)?;
    say!("ptb: {msg}");
    Ok(())
}

/// This process's effective uid.
pub fn nix_euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

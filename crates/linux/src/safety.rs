//! Safety rules: which processes ptb may manage, the kernel NUMA balancer, and stopping on
//! SIGINT/SIGTERM.
//!
//! - Only processes the caller may manage: same uid, or CAP_SYS_NICE / CAP_SYS_ADMIN.
//! - Never pid 1, kernel threads, or ptb itself.
//! - The kernel's numa_balancing is only changed on request and always put back.

use crate::procfs::{ProcRoot, PF_KTHREAD};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use thiserror::Error;

/// capability.h bit numbers.
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_SYS_NICE: u32 = 23;

#[derive(Debug, Error, PartialEq)]
pub enum SafetyError {
    #[error("pid {0}: refusing to manage pid 1 (init)")]
    Init(u32),
    #[error("pid {0}: refusing to manage ptb itself")]
    Myself(u32),
    #[error("pid {0}: is a kernel thread; only user processes can be managed")]
    KernelThread(u32),
    #[error("pid {pid}: no such process (check the pid with `ps -p {pid}`)")]
    NoProcess { pid: u32 },
    #[error("pid {pid}: owned by uid {owner}, you are uid {me}; run as that user, or give ptb CAP_SYS_NICE")]
    NotPermitted { pid: u32, owner: u32, me: u32 },
    #[error("pid {pid}: {reason}")]
    Unreadable { pid: u32, reason: String },
}

/// Who is asking: effective uid and effective capabilities of ptb.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub pid: u32,
    pub euid: u32,
    pub cap_eff: u64,
}

impl Caller {
    /// This process.
    pub fn current(root: &ProcRoot) -> Caller {
        let pid = std::process::id();
        let cap_eff = root.status(pid).map(|s| s.cap_eff).unwrap_or(0);
        // SAFETY: geteuid has no preconditions and cannot fail.
        Caller { pid, euid: unsafe { libc::geteuid() }, cap_eff }
    }
    pub fn has_cap(&self, bit: u32) -> bool {
        self.cap_eff & (1u64 << bit) != 0
    }
}

/// Check that `caller` may manage process `pid`.
pub fn check_target(root: &ProcRoot, caller: &Caller, pid: u32) -> Result<(), SafetyError> {
    if pid == 1 {
        return Err(SafetyError::Init(pid));
    }
    if pid == caller.pid {
        return Err(SafetyError::Myself(pid));
    }
    let status = root.status(pid).map_err(|e| {
        if e.is_gone() {
            SafetyError::NoProcess { pid }
        } else {
            SafetyError::Unreadable { pid, reason: e.to_string() }
        }
    })?;
    if status.tgid != pid {
        return Err(SafetyError::Unreadable {
            pid,
            reason: format!("is a thread of process {}; give the process id", status.tgid),
        });
    }
    let kflag = root.task_stat(pid, pid).map(|s| s.flags & PF_KTHREAD != 0).unwrap_or(false);
    if status.kthread == Some(true) || kflag || pid == 2 || status.ppid == 2 {
        return Err(SafetyError::KernelThread(pid));
    }
    let same_user = status.uid[0] == caller.euid && status.uid[1] == caller.euid;
    if !same_user && !caller.has_cap(CAP_SYS_NICE) && !caller.has_cap(CAP_SYS_ADMIN) {
        return Err(SafetyError::NotPermitted { pid, owner: status.uid[0], me: caller.euid });
    }
    Ok(())
}

const BALANCING: &str = "proc/sys/kernel/numa_balancing";

/// The kernel's automatic NUMA balancing setting, put back on drop if ptb changed it.
pub struct BalancingGuard {
    root: ProcRoot,
    original: Option<String>,
}

impl BalancingGuard {
    /// Read the current setting; with `disable`, turn the balancer off (restored on drop).
    /// Warns when the balancer stays on, since it fights user-space moves.
    pub fn new(root: &ProcRoot, disable: bool) -> Result<Self, String> {
        let mut g = BalancingGuard { root: root.clone(), original: None };
        let cur = match root.read_line(BALANCING) {
            Ok(v) => v,
            Err(_) => return Ok(g), // kernel without CONFIG_NUMA_BALANCING
        };
        if cur == "0" {
            return Ok(g);
        }
        if disable {
            let path = root.path(BALANCING);
            std::fs::write(&path, "0").map_err(|e| {
                format!("--disable-kernel-balancing: cannot write {}: {e} (needs root)", path.display())
            })?;
            tracing::info!(was = %cur, "kernel numa_balancing disabled while ptb runs");
            g.original = Some(cur);
        } else {
            tracing::warn!(
                "kernel NUMA balancing is on (kernel.numa_balancing={cur}): it moves pages and threads too and will \
                 fight ptb's moves; pass --disable-kernel-balancing to turn it off while ptb runs"
            );
        }
        Ok(g)
    }

    /// True when ptb turned the balancer off.
    pub fn changed(&self) -> bool {
        self.original.is_some()
    }

    /// Put the original setting back (idempotent).
    pub fn restore(&mut self) {
        if let Some(v) = self.original.take() {
            match std::fs::write(self.root.path(BALANCING), &v) {
                Ok(()) => tracing::info!(value = %v, "kernel numa_balancing restored"),
                Err(e) => tracing::error!(error = %e, "could not restore kernel.numa_balancing={v}"),
            }
        }
    }
}

impl Drop for BalancingGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The last signal not yet passed on by [`take_signal`].
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    PENDING.store(sig, Ordering::SeqCst);
}

/// Install SIGINT/SIGTERM handlers that ask the daemon loop to stop (and clean up).
pub fn install_stop_handler() -> std::io::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(SigHandler::Handler(on_signal), SaFlags::SA_RESTART, SigSet::empty());
    for s in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to atomics (async-signal-safe).
        unsafe { sigaction(s, &act) }.map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// The signal that asked to stop, if any.
pub fn stop_requested() -> Option<i32> {
    STOP.load(Ordering::SeqCst).then(|| STOP_SIGNAL.load(Ordering::SeqCst))
}

/// A signal that arrived since the last call (each SIGINT/SIGTERM once), to pass on to a child.
pub fn take_signal() -> Option<i32> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Wait for child `pid` of this process, passing every SIGINT/SIGTERM ptb receives on to it;
/// returns its wait status as an exit code (its code, or 128 + the signal that ended it).
/// Used whenever ptb does not (or no longer) manage a program it started: unmanaged runs,
/// after `--seconds`, and after an error or a panic, so a child is never left behind.
pub fn supervise(pid: u32) -> i32 {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let p = nix::unistd::Pid::from_raw(pid as i32);
    loop {
        if let Some(sig) = take_signal() {
            if let Ok(s) = nix::sys::signal::Signal::try_from(sig) {
                // Our own unreaped child: the pid still names it.
                let _ = nix::sys::signal::kill(p, s);
            }
        }
        match waitpid(p, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return 1, // not our child any more (reaped elsewhere): nothing to wait for
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(root: &std::path::Path, pid: u32, uid: u32, ppid: u32, kthread: bool) {
        let d = root.join(format!("proc/{pid}/task/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        let st = format!(
            "Name:\tx\nTgid:\t{pid}\nPPid:\t{ppid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nKthread:\t{}\n",
            u8::from(kthread)
        );
        std::fs::write(root.join(format!("proc/{pid}/status")), st).unwrap();
    }

    #[test]
    fn refuses_init_self_kernel_threads_and_other_users() {
        let d = tempfile::tempdir().unwrap();
        let r = ProcRoot::new(d.path());
        fake(d.path(), 100, 1000, 50, false);
        fake(d.path(), 101, 1001, 50, false);
        fake(d.path(), 102, 0, 2, true);
        let me = Caller { pid: 99, euid: 1000, cap_eff: 0 };
        assert_eq!(check_target(&r, &me, 1), Err(SafetyError::Init(1)));
        assert_eq!(check_target(&r, &me, 99), Err(SafetyError::Myself(99)));
        assert!(check_target(&r, &me, 100).is_ok());
        assert!(matches!(check_target(&r, &me, 101), Err(SafetyError::NotPermitted { owner: 1001, .. })));
        assert_eq!(check_target(&r, &me, 102), Err(SafetyError::KernelThread(102)));
        assert_eq!(check_target(&r, &me, 555), Err(SafetyError::NoProcess { pid: 555 }));
        let nice = Caller { cap_eff: 1 << CAP_SYS_NICE, ..me };
        assert!(check_target(&r, &nice, 101).is_ok());
        assert_eq!(check_target(&r, &nice, 102), Err(SafetyError::KernelThread(102)));
    }

    #[test]
    fn balancing_guard_restores_what_it_changed() {
        let d = tempfile::tempdir().unwrap();
        let r = ProcRoot::new(d.path());
        std::fs::create_dir_all(d.path().join("proc/sys/kernel")).unwrap();
        let f = d.path().join(BALANCING);
        std::fs::write(&f, "1\n").unwrap();
        {
            let g = BalancingGuard::new(&r, false).unwrap();
            assert!(!g.changed());
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "1\n");
        {
            let g = BalancingGuard::new(&r, true).unwrap();
            assert!(g.changed());
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "0");
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "1");
    }

    #[test]
    fn real_kernel_thread_is_refused() {
        let r = ProcRoot::live();
        let me = Caller::current(&r);
        if r.status(2).is_ok() {
            assert_eq!(check_target(&r, &me, 2), Err(SafetyError::KernelThread(2)));
        }
    }
}

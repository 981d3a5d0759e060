//! What a measured comparison (`ptb compare --real`) needs from the kernel besides the daemon:
//! the exact moment a launched program exits, the kernel's NUMA balancing switched on for one
//! run (and put back), the kernel release, and whether this machine is a virtual one.
//!
//! Problem: the daemon notices a target's exit only at its next 20 ms poll, after its cycle's
//! work; wall times must not carry that. Approach: a thread blocks in `waitid(WEXITED |
//! WNOWAIT)` on the child, which returns the instant the child exits and leaves it to be
//! reaped by its owner (the daemon), so the pid cannot be reused under the daemon's feet.

use crate::procfs::ProcRoot;
use std::io::Read;
use std::time::Instant;

/// Wait in a background thread for child `pid` to exit, without reaping it; the thread
/// returns the instant of the exit, or `None` when the wait failed (the child was already
/// reaped by someone else: fall back to the owner's own observation).
pub fn watch_exit(pid: u32) -> std::thread::JoinHandle<Option<Instant>> {
    std::thread::spawn(move || loop {
        // SAFETY: waitid writes only into the siginfo we pass; WNOWAIT leaves the child a
        // zombie for its owner to reap.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if r == 0 {
            return Some(Instant::now());
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    })
}

const BALANCING: &str = "proc/sys/kernel/numa_balancing";

/// The kernel's automatic NUMA balancing switched on for a while; the previous setting is
/// put back on drop.
pub struct BalancingOn {
    root: ProcRoot,
    original: Option<String>,
}

impl BalancingOn {
    /// Check, without changing anything, that the balancer exists and can be switched on
    /// (already on, or its sysctl file is writable). The error says why not.
    pub fn check(root: &ProcRoot) -> Result<(), String> {
        let cur = current(root)?;
        if is_on(&cur) {
            return Ok(());
        }
        let path = root.path(BALANCING);
        std::fs::OpenOptions::new().write(true).open(&path).map(|_| ()).map_err(|e| {
            format!(
                "mode `numa-balancing` needs to switch the kernel's NUMA balancing on for its runs (write 1 to {}), \
                 and cannot: {e}. Run as root, or leave the mode out (--modes)",
                path.display()
            )
        })
    }

    /// Switch the balancer on (no change when it is on already).
    pub fn enable(root: &ProcRoot) -> Result<Self, String> {
        let cur = current(root)?;
        let mut g = BalancingOn { root: root.clone(), original: None };
        if is_on(&cur) {
            return Ok(g);
        }
        let on = cur.parse::<u32>().map_or(1, |v| v | 1);
        let path = root.path(BALANCING);
        std::fs::write(&path, on.to_string())
            .map_err(|e| format!("cannot switch the kernel's NUMA balancing on (write {}): {e}", path.display()))?;
        g.original = Some(cur);
        Ok(g)
    }
}

impl Drop for BalancingOn {
    fn drop(&mut self) {
        if let Some(v) = self.original.take() {
            if let Err(e) = std::fs::write(self.root.path(BALANCING), &v) {
                tracing::error!(error = %e, "could not put kernel.numa_balancing back to {v}");
            }
        }
    }
}

fn current(root: &ProcRoot) -> Result<String, String> {
    root.read_line(BALANCING).map_err(|e| {
        format!("this kernel has no automatic NUMA balancing to switch on ({e}; it needs CONFIG_NUMA_BALANCING)")
    })
}

/// Whether a `numa_balancing` value has the normal balancing mode (bit 0) on.
pub fn is_on(value: &str) -> bool {
    value.trim().parse::<u32>().is_ok_and(|v| v & 1 == 1)
}

/// The kernel's balancing setting now (`None` when the kernel has none).
pub fn balancing_now(root: &ProcRoot) -> Option<String> {
    root.read_line(BALANCING).ok()
}

/// The kernel release (`uname -r`), or "unknown".
pub fn kernel_release(root: &ProcRoot) -> String {
    root.read_line("proc/sys/kernel/osrelease")
        .ok()
        .filter(|s| !s.is_empty() && s.len() < 256)
        .unwrap_or_else(|| "unknown".into())
}

/// Why this machine looks virtual (its NUMA nodes then are whatever the hypervisor makes up),
/// or `None` when nothing says so: the `hypervisor` CPU flag, `/sys/hypervisor/type`, or a
/// DMI vendor/product of a known hypervisor.
pub fn virtual_machine(root: &ProcRoot) -> Option<String> {
    let small = |rel: &str| -> Option<String> {
        let f = std::fs::File::open(root.path(rel)).ok()?;
        let mut s = String::new();
        f.take(1 << 20).read_to_string(&mut s).ok()?;
        Some(s)
    };
    if let Some(info) = small("proc/cpuinfo") {
        if cpu_flags_say_hypervisor(&info) {
            return Some("the CPU flags include `hypervisor`".into());
        }
    }
    if let Some(t) = small("sys/hypervisor/type").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()) {
        return Some(format!("/sys/hypervisor/type is `{}`", t.chars().take(32).collect::<String>()));
    }
    for rel in ["sys/class/dmi/id/sys_vendor", "sys/class/dmi/id/product_name"] {
        if let Some(v) = small(rel) {
            let v = v.trim();
            let known = ["QEMU", "KVM", "VMware", "VirtualBox", "Xen", "Bochs", "Parallels", "Virtual Machine"];
            if known.iter().any(|k| v.contains(k)) {
                return Some(format!("the DMI {} is `{}`", &rel[17..], v.chars().take(48).collect::<String>()));
            }
        }
    }
    None
}

/// Whether /proc/cpuinfo's `flags` lines carry the `hypervisor` flag.
pub fn cpu_flags_say_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_once(':').is_some_and(|(_, f)| f.split_whitespace().any(|x| x == "hypervisor")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_instant_comes_before_the_reap() {
        let mut c = std::process::Command::new("sh").args(["-c", "sleep 0.2; exit 3"]).spawn().unwrap();
        let t0 = Instant::now();
        let w = watch_exit(c.id());
        std::thread::sleep(std::time::Duration::from_millis(500));
        // The child is still ours to reap (WNOWAIT), with its status.
        assert_eq!(c.wait().unwrap().code(), Some(3));
        let at = w.join().unwrap().expect("exit seen");
        let d = at - t0;
        assert!(d.as_millis() >= 150 && d.as_millis() < 490, "{d:?}");
    }

    #[test]
    fn balancing_values_and_a_fake_sysctl() {
        assert!(is_on("1") && is_on("3") && !is_on("0") && !is_on("2") && !is_on("x"));
        let d = tempfile::tempdir().unwrap();
        let root = ProcRoot::new(d.path());
        assert!(BalancingOn::check(&root).unwrap_err().contains("CONFIG_NUMA_BALANCING"));
        std::fs::create_dir_all(d.path().join("proc/sys/kernel")).unwrap();
        let f = d.path().join("proc/sys/kernel/numa_balancing");
        std::fs::write(&f, "0\n").unwrap();
        BalancingOn::check(&root).unwrap();
        {
            let _g = BalancingOn::enable(&root).unwrap();
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "1");
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "0");
        std::fs::write(&f, "1\n").unwrap();
        drop(BalancingOn::enable(&root).unwrap());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "1\n");
    }

    #[test]
    fn hypervisor_flag() {
        assert!(cpu_flags_say_hypervisor("processor : 0\nflags\t\t: fpu vme hypervisor lahf_lm\n"));
        assert!(!cpu_flags_say_hypervisor("flags : fpu vme\nmodel name : hypervisor-like\n"));
        let d = tempfile::tempdir().unwrap();
        assert_eq!(virtual_machine(&ProcRoot::new(d.path())), None);
        assert!(!kernel_release(&ProcRoot::live()).is_empty());
    }
}

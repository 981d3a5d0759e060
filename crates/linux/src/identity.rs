//! Which process a pid names: a managed target is tracked by identity, not by number.
//!
//! Problem: a pid names a process only while it lives. When a target exits, the kernel
//! hands its pid (and its threads' ids) to new processes; a daemon that keeps acting on the
//! number moves another user's threads and pages. The owner of a process may also change
//! while ptb manages it (a set-user-id `exec`).
//!
//! Approach: when ptb takes a target it records its identity: a pidfd (Linux >= 5.3: a
//! handle on *that* process, readable once it has exited) and its start time from
//! `/proc/PID/stat` (the fallback on kernels without pidfds, and the identity of each thread
//! id), plus its owner. Before every action the actuator asks the [`Gate`]: is this pid still
//! that process, alive, with the same owner; is this thread id a thread of such a process and
//! the same thread first seen under that id. The interface is narrow on purpose (two
//! questions), so the daemon loop can change around it.

use crate::procfs::ProcRoot;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

/// What the actuator asks before it touches a process or a thread.
pub trait Gate: Send + Sync {
    /// True while `pid` is the process ptb took: alive (not exited, not a zombie) and owned
    /// by the same user.
    fn pid_ok(&self, pid: u32) -> bool;
    /// True while `tid` is a thread of such a process, and the same thread ptb saw.
    fn tid_ok(&self, tid: u32) -> bool;
}

/// A gate that lets everything through (tests of the actuator on ptb's own process).
pub struct Open;

impl Gate for Open {
    fn pid_ok(&self, _pid: u32) -> bool {
        true
    }
    fn tid_ok(&self, _tid: u32) -> bool {
        true
    }
}

/// One process ptb took: its pid, start time, owner and (where the kernel has them) a pidfd.
#[derive(Debug)]
pub struct ProcId {
    pub pid: u32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22).
    pub starttime: u64,
    /// Real uid when taken.
    pub uid: u32,
    pidfd: Option<OwnedFd>,
}

/// pidfd_open(2): a descriptor for process `pid`, or None where the kernel has none (< 5.3).
fn pidfd_open(pid: u32) -> std::io::Result<Option<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if fd >= 0 {
        // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as i32) }));
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) => Ok(None),
        _ => Err(e),
    }
}

/// True when the process behind `fd` has exited (the pidfd polls readable).
fn pidfd_exited(fd: &OwnedFd) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd that lives across the call; timeout 0 never blocks.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r != 0 && (r < 0 || p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0)
}

impl ProcId {
    /// Take process `pid`: record who it is now. The caller has checked that it may manage it.
    /// The pidfd is opened before the start time is read, so if the pid was reused in
    /// between, the start time (read from the new process) and the pidfd (of the new process)
    /// still agree.
    pub fn capture(root: &ProcRoot, pid: u32) -> Result<ProcId, String> {
        let pidfd = if root.root() == std::path::Path::new("/") {
            pidfd_open(pid).map_err(|e| format!("pid {pid}: {e}"))?
        } else {
            None // a fixture tree: its pids are not this machine's
        };
        let st = root.task_stat(pid, pid).map_err(|e| format!("pid {pid}: {e}"))?;
        let uid = root.status(pid).map_err(|e| format!("pid {pid}: {e}"))?.uid[0];
        Ok(ProcId { pid, starttime: st.starttime, uid, pidfd })
    }

    /// True while this is the same process, alive, with the same owner.
    pub fn current(&self, root: &ProcRoot) -> bool {
        if self.pidfd.as_ref().is_some_and(pidfd_exited) {
            return false;
        }
        match root.task_stat(self.pid, self.pid) {
            Ok(s) if s.starttime == self.starttime && s.state != 'Z' && s.state != 'X' => {}
            _ => return false,
        }
        root.status(self.pid).is_ok_and(|s| s.uid[0] == self.uid)
    }

    /// A second handle on the same process (the pidfd duplicated; without one, the start
    /// time alone identifies it).
    pub fn try_clone(&self) -> ProcId {
        ProcId {
            pid: self.pid,
            starttime: self.starttime,
            uid: self.uid,
            pidfd: self.pidfd.as_ref().and_then(|f| f.try_clone().ok()),
        }
    }

    /// True when the kernel gave a pidfd (so exit is seen without reading /proc).
    pub fn has_pidfd(&self) -> bool {
        self.pidfd.is_some()
    }
}

/// The processes a daemon manages, with the threads seen in them: the daemon's [`Gate`].
pub struct Identities {
    root: ProcRoot,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    procs: BTreeMap<u32, ProcId>,
    /// tid -> (pid, thread start time) for every thread seen in a managed process.
    threads: BTreeMap<u32, (u32, u64)>,
}

impl Identities {
    pub fn new(root: &ProcRoot, procs: Vec<ProcId>) -> Self {
        let procs = procs.into_iter().map(|p| (p.pid, p)).collect();
        Identities { root: root.clone(), inner: Mutex::new(Inner { procs, threads: BTreeMap::new() }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pids still the processes taken; the others are forgotten for good (with their
    /// threads), so a process that later gets one of their numbers is never touched.
    pub fn alive(&self) -> Vec<u32> {
        let mut g = self.lock();
        let gone: Vec<u32> = g.procs.values().filter(|p| !p.current(&self.root)).map(|p| p.pid).collect();
        for pid in &gone {
            g.procs.remove(pid);
        }
        g.threads.retain(|_, (pid, _)| !gone.contains(pid));
        g.procs.keys().copied().collect()
    }

    /// Like [`Identities::alive`], but only polls the pidfds (cheap enough to call between
    /// cycles); processes without a pidfd get the full check.
    pub fn alive_quick(&self) -> Vec<u32> {
        let mut g = self.lock();
        let gone: Vec<u32> = g
            .procs
            .values()
            .filter(|p| match &p.pidfd {
                Some(fd) => pidfd_exited(fd),
                None => !p.current(&self.root),
            })
            .map(|p| p.pid)
            .collect();
        for pid in &gone {
            g.procs.remove(pid);
        }
        g.threads.retain(|_, (pid, _)| !gone.contains(pid));
        g.procs.keys().copied().collect()
    }

    /// Record the threads seen this cycle ((pid, tid) pairs of managed processes: all the
    /// threads each listed process has now), with their start times; threads of other
    /// processes are ignored, and threads of a listed process that are no longer listed are
    /// forgotten (so a program that keeps starting threads does not grow this table).
    pub fn note_threads(&self, seen: &[(u32, u32)]) {
        let mut g = self.lock();
        let now: std::collections::BTreeSet<(u32, u32)> = seen.iter().copied().collect();
        let listed: std::collections::BTreeSet<u32> = seen.iter().map(|(p, _)| *p).collect();
        g.threads.retain(|tid, (pid, _)| !listed.contains(pid) || now.contains(&(*pid, *tid)));
        for &(pid, tid) in seen {
            if !g.procs.contains_key(&pid) || g.threads.contains_key(&tid) {
                continue;
            }
            if let Ok(st) = self.root.task_stat(pid, tid) {
                g.threads.insert(tid, (pid, st.starttime));
            }
        }
    }

    /// Managed pids (as last checked).
    pub fn pids(&self) -> Vec<u32> {
        self.lock().procs.keys().copied().collect()
    }
}

impl Gate for Identities {
    fn pid_ok(&self, pid: u32) -> bool {
        self.lock().procs.get(&pid).is_some_and(|p| p.current(&self.root))
    }

    fn tid_ok(&self, tid: u32) -> bool {
        let g = self.lock();
        let Some(&(pid, start)) = g.threads.get(&tid) else { return false };
        let Some(p) = g.procs.get(&pid) else { return false };
        // The thread must still be listed under its process, with the same start time: a
        // thread id reused by another process lives under another /proc/PID/task.
        p.current(&self.root)
            && self.root.task_stat(pid, tid).is_ok_and(|s| s.starttime == start && s.state != 'Z' && s.state != 'X')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(root: &std::path::Path, pid: u32, tid: u32, start: u64, uid: u32) {
        let d = root.join(format!("proc/{pid}/task/{tid}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut stat = format!("{tid} (x) S 1 {pid} 1 0 -1 0");
        for i in 0..12 {
            stat.push_str(&format!(" {i}"));
        }
        stat.push_str(&format!(" {start}"));
        for _ in 0..20 {
            stat.push_str(" 0");
        }
        std::fs::write(d.join("stat"), stat).unwrap();
        std::fs::write(
            root.join(format!("proc/{pid}/status")),
            format!("Name:\tx\nTgid:\t{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
        )
        .unwrap();
    }

    /// A pid reused by another process (later start time, or another owner) is not the target.
    #[test]
    fn a_reused_pid_or_thread_id_is_not_the_target() {
        let d = tempfile::tempdir().unwrap();
        let r = ProcRoot::new(d.path());
        fake(d.path(), 500, 500, 1000, 1000);
        fake(d.path(), 500, 501, 1001, 1000);
        let ids = Identities::new(&r, vec![ProcId::capture(&r, 500).unwrap()]);
        ids.note_threads(&[(500, 500), (500, 501), (600, 601)]);
        assert!(ids.pid_ok(500) && ids.tid_ok(500) && ids.tid_ok(501));
        assert!(!ids.pid_ok(600) && !ids.tid_ok(601));
        // A thread no longer listed is forgotten.
        ids.note_threads(&[(500, 500)]);
        assert!(!ids.tid_ok(501));
        ids.note_threads(&[(500, 500), (500, 501)]);
        // Thread 501 exits and its id goes to a new thread of the same process: not the same.
        fake(d.path(), 500, 501, 2000, 1000);
        assert!(!ids.tid_ok(501));
        // The process exits; another user's process gets pid 500.
        fake(d.path(), 500, 500, 3000, 1001);
        assert!(!ids.pid_ok(500) && !ids.tid_ok(500));
        assert!(ids.alive().is_empty());
        // Forgotten for good, even if the files looked right again.
        fake(d.path(), 500, 500, 1000, 1000);
        assert!(!ids.pid_ok(500));
        // The same process whose owner changed (set-uid exec) is not managed either.
        fake(d.path(), 700, 700, 10, 1000);
        let ids = Identities::new(&r, vec![ProcId::capture(&r, 700).unwrap()]);
        fake(d.path(), 700, 700, 10, 0);
        assert!(!ids.pid_ok(700));
    }

    /// A real child: alive while it runs; once it exited and was reaped its pidfd says so
    /// whatever /proc shows under that number later.
    #[test]
    fn a_pidfd_sees_the_exit_of_a_real_process() {
        let r = ProcRoot::live();
        let mut c = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let id = ProcId::capture(&r, c.id()).unwrap();
        assert!(id.current(&r));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(!id.current(&r));
        let ids = Identities::new(&r, vec![id]);
        assert!(ids.alive().is_empty());
    }
}

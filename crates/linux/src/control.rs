//! The control channel of a running ptb: `ptb roi begin|end PID` and `ptb status` talk to the
//! daemon that manages a process.
//!
//! Problem: the old channel was a file per pid in /tmp. Any user could plant it: a symlink
//! made root's `ptb roi end` overwrite a root file, a root-owned file that said "0" paused a
//! root daemon, a user's own file was obeyed by nobody yet reported as obeyed, and removed by
//! the daemon on exit.
//!
//! Approach: each daemon listens on a Unix socket, `PID.sock`, in a directory that only its
//! user can write: `/run/ptb` for root (mode 0755, so other users can reach the socket),
//! `$XDG_RUNTIME_DIR/ptb` for other users (0700); `$PTB_RUN_DIR` overrides both (tests).
//! The daemon creates the directory itself and refuses one that is a symlink, owned by
//! another user, or writable by group or others. Nothing is read from or written to a path a
//! user could plant: requests come over the socket, and the daemon asks the kernel who sent
//! them (`SO_PEERCRED`). Root, the daemon's own user, or the owner of the managed process may
//! pause or resume it; `status` shows each user only what they may see. Clients check the
//! same ownership rules before they connect, so they do not talk to a planted socket either.
//!
//! ```text
//! client ──{"op":"roi","pid":4242,"on":false}\n──▶ /run/ptb/77.sock ──▶ daemon 77 (peer uid checked)
//!        ◀──{"ok":true,"message":"placement off for pid 4242"}\n──
//! ```

use crate::metrics::Stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one client may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Most clients served at once (more are closed at once).
const MAX_CLIENTS: usize = 16;
/// Largest request accepted (requests are one short JSON line).
const MAX_REQUEST: u64 = 4096;
/// Largest answer a client reads (a status of many programs).
const MAX_ANSWER: u64 = 16 << 20;

/// A request on the control socket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// What the daemon manages.
    Status,
    /// Placement on (`on`) or off for a managed process.
    Roi { pid: u32, on: bool },
}

/// The answer to a request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub ok: bool,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DaemonStatus>,
}

/// What one daemon manages, as `ptb status` shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    /// `run`, `attach` or `daemon` (the system-wide service).
    pub mode: String,
    /// Config file of the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    pub uptime_s: f64,
    pub programs: Vec<ProgramStatus>,
    /// Programs the caller may not see (other users').
    pub hidden: usize,
}

/// One managed program.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramStatus {
    pub pid: u32,
    /// Owner (real uid).
    pub uid: u32,
    pub command: String,
    /// The service rule that matched it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub policy: String,
    /// Kernel node ids placement may use.
    pub nodes: String,
    /// Placement paused by `ptb roi end` (or `--roi` before `ptb roi begin`).
    pub paused: bool,
    pub managed_s: f64,
    pub stats: Stats,
}

/// A managed program as the daemon registers it.
#[derive(Clone, Debug)]
pub struct Program {
    pub pid: u32,
    pub uid: u32,
    pub command: String,
    pub rule: Option<String>,
    pub policy: String,
    pub nodes: String,
    pub stats: Arc<Mutex<Stats>>,
    pub since: std::time::Instant,
    /// Paused until `ptb roi begin` (`--roi`).
    pub roi_wait: bool,
}

/// What the daemon and the control thread share.
#[derive(Debug)]
pub struct Shared {
    mode: String,
    config: Option<String>,
    euid: u32,
    started: std::time::Instant,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    programs: BTreeMap<u32, Program>,
    /// Placement asked for by `ptb roi` (true: on).
    roi: BTreeMap<u32, bool>,
}

impl Shared {
    /// Shared state of a daemon of `mode` (run, attach, daemon).
    pub fn new(mode: &str, config: Option<String>) -> Arc<Shared> {
        Arc::new(Shared {
            mode: mode.into(),
            config,
            euid: nix::unistd::geteuid().as_raw(),
            started: std::time::Instant::now(),
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start showing a managed program.
    pub fn register(&self, p: Program) {
        self.lock().programs.insert(p.pid, p);
    }

    /// Forget a program (it exited or was detached).
    pub fn unregister(&self, pid: u32) {
        let mut g = self.lock();
        g.programs.remove(&pid);
        g.roi.remove(&pid);
    }

    /// Managed pids.
    pub fn pids(&self) -> Vec<u32> {
        self.lock().programs.keys().copied().collect()
    }

    /// True when placement is paused for `pid`: `ptb roi end` said so, or the program started
    /// with `--roi` and no `ptb roi begin` came yet.
    pub fn paused(&self, pid: u32) -> bool {
        let g = self.lock();
        match g.roi.get(&pid) {
            Some(on) => !on,
            None => g.programs.get(&pid).is_some_and(|p| p.roi_wait),
        }
    }

    /// Answer one request from a peer with uid `peer`.
    pub fn answer(&self, req: &Request, peer: u32) -> Answer {
        let mut g = self.lock();
        let may = |p: &Program| peer == 0 || peer == self.euid || peer == p.uid;
        match req {
            Request::Status => {
                let visible: Vec<&Program> = g.programs.values().filter(|p| may(p)).collect();
                let hidden = g.programs.len() - visible.len();
                let programs = visible
                    .iter()
                    .map(|p| ProgramStatus {
                        pid: p.pid,
                        uid: p.uid,
                        command: p.command.clone(),
                        rule: p.rule.clone(),
                        policy: p.policy.clone(),
                        nodes: p.nodes.clone(),
                        paused: match g.roi.get(&p.pid) {
                            Some(on) => !on,
                            None => p.roi_wait,
                        },
                        managed_s: p.since.elapsed().as_secs_f64(),
                        stats: p.stats.lock().map(|s| s.clone()).unwrap_or_default(),
                    })
                    .collect();
                Answer {
                    ok: true,
                    message: String::new(),
                    status: Some(DaemonStatus {
                        pid: std::process::id(),
                        mode: self.mode.clone(),
                        config: self.config.clone(),
                        uptime_s: self.started.elapsed().as_secs_f64(),
                        programs,
                        hidden,
                    }),
                }
            }
            Request::Roi { pid, on } => {
                let Some(p) = g.programs.get(pid) else {
                    return Answer { ok: false, message: format!("pid {pid} is not managed here"), status: None };
                };
                if !may(p) {
                    return Answer {
                        ok: false,
                        message: format!(
                            "pid {pid} belongs to uid {}, and you are uid {peer}: only its owner, the daemon's user or \
                             root may pause or resume it",
                            p.uid
                        ),
                        status: None,
                    };
                }
                g.roi.insert(*pid, *on);
                let message = format!("placement {} for pid {pid}", if *on { "on" } else { "off" });
                tracing::info!(pid, on, peer, "region of interest changed");
                Answer { ok: true, message, status: None }
            }
        }
    }
}

/// The directory of control sockets for a process of effective uid `euid`: `$PTB_RUN_DIR`,
/// else `/run/ptb` for root, else `$XDG_RUNTIME_DIR/ptb`; None when a non-root user has no
/// runtime directory.
pub fn own_dir(euid: u32) -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PTB_RUN_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if euid == 0 {
        return Some(PathBuf::from("/run/ptb"));
    }
    std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()).map(|d| PathBuf::from(d).join("ptb"))
}

/// Directories a client looks in: its own, and (for other users) root's `/run/ptb`, where the
/// system-wide service listens.
pub fn client_dirs(euid: u32) -> Vec<PathBuf> {
    if let Some(d) = std::env::var_os("PTB_RUN_DIR").filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(d)];
    }
    let mut v = vec![PathBuf::from("/run/ptb")];
    if euid != 0 {
        v.extend(own_dir(euid));
    }
    v
}

/// Why a directory is not trusted, or None when it is: a real directory (not a symlink),
/// owned by root or `euid`, not writable by group or others.
pub fn untrusted(dir: &Path, euid: u32) -> Option<String> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(format!("{}: {e}", dir.display())),
    };
    if meta.file_type().is_symlink() {
        return Some(format!("{} is a symbolic link", dir.display()));
    }
    if !meta.is_dir() {
        return Some(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != 0 && meta.uid() != euid {
        return Some(format!("{} belongs to uid {}, not to root or uid {euid}", dir.display(), meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!("{} is writable by group or others (mode {:o})", dir.display(), meta.mode() & 0o7777));
    }
    None
}

/// Create (or check) the daemon's socket directory: mode 0755 for root (other users connect
/// to the system service), 0700 for a user; refused if it is not trusted.
fn make_dir(dir: &Path, euid: u32) -> Result<(), String> {
    let mode = if euid == 0 { 0o755 } else { 0o700 };
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    if let Some(why) = untrusted(dir, euid) {
        return Err(format!("{why}: refusing it as the control directory (remove it, or set PTB_RUN_DIR)"));
    }
    // Only the directory's owner: a root daemon does not use a user's directory.
    let owner = std::fs::symlink_metadata(dir).map(|m| m.uid()).unwrap_or(u32::MAX);
    if owner != euid {
        return Err(format!("{} belongs to uid {owner}, not to this daemon's uid {euid}", dir.display()));
    }
    Ok(())
}

/// The uid of the process at the other end of a Unix socket, from the kernel.
fn peer_uid(s: &UnixStream) -> std::io::Result<u32> {
    let cred =
        nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials).map_err(std::io::Error::from)?;
    Ok(cred.uid())
}

/// The listening side: a socket in the daemon's directory, served by a background thread,
/// removed when dropped.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Listen for `shared`'s daemon in its user's directory ([`own_dir`]). Errors say why
    /// (untrusted directory, no runtime directory).
    pub fn start(shared: Arc<Shared>) -> Result<Server, String> {
        let dir = own_dir(shared.euid).ok_or(
            "no control directory: XDG_RUNTIME_DIR is not set (log in through a session, or set PTB_RUN_DIR to a \
             directory only you can write)",
        )?;
        Server::start_in(shared, &dir)
    }

    /// Listen in `dir` (created if missing; refused unless trusted and the daemon's own).
    pub fn start_in(shared: Arc<Shared>, dir: &Path) -> Result<Server, String> {
        let euid = shared.euid;
        make_dir(dir, euid)?;
        let path = dir.join(format!("{}.sock", std::process::id()));
        // A socket left by an earlier process with our pid: the directory is ours alone.
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_file(&path).map_err(|e| format!("removing the stale {}: {e}", path.display()))?;
        }
        let listener = UnixListener::bind(&path).map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
        let mode = if euid == 0 { 0o666 } else { 0o600 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let thread = std::thread::Builder::new()
            .name("ptb-control".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    match listener.accept() {
                        // One thread per client (at most MAX_CLIENTS), each bounded in time:
                        // a silent client does not hold the others up.
                        Ok((s, _)) if active.load(Ordering::SeqCst) < MAX_CLIENTS => {
                            active.fetch_add(1, Ordering::SeqCst);
                            let (shared, active) = (shared.clone(), active.clone());
                            let spawned =
                                std::thread::Builder::new().name("ptb-control-client".into()).spawn(move || {
                                    serve_one(s, &shared);
                                    active.fetch_sub(1, Ordering::SeqCst);
                                });
                            if spawned.is_err() {
                                tracing::warn!("control: cannot start a client thread");
                            }
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "control socket");
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Server { path, stop, thread: Some(thread) })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Our own socket in our own directory (no other user can write there).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Read one request line (bounded in size and time), answer, close.
fn serve_one(s: UnixStream, shared: &Shared) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
    let answer = match peer_uid(&s) {
        Err(e) => Answer { ok: false, message: format!("cannot tell who is asking: {e}"), status: None },
        Ok(peer) => {
            let mut line = String::new();
            let read = BufReader::new((&s).take(MAX_REQUEST)).read_line(&mut line);
            match read
                .map_err(|e| e.to_string())
                .and_then(|_| serde_json::from_str::<Request>(line.trim()).map_err(|e| format!("not a request: {e}")))
            {
                Ok(req) => shared.answer(&req, peer),
                Err(e) => Answer { ok: false, message: e, status: None },
            }
        }
    };
    let mut text = serde_json::to_string(&answer).unwrap_or_default();
    text.push('\n');
    let _ = (&s).write_all(text.as_bytes());
}

/// Control sockets of running daemons a client may talk to: `*.sock` in `dirs` (see
/// [`client_dirs`]) that are trusted, each a socket owned by its directory's owner.
pub fn sockets(dirs: &[PathBuf], euid: u32) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in dirs {
        if untrusted(dir, euid).is_some() {
            continue;
        }
        let owner = std::fs::symlink_metadata(dir).map(|m| m.uid()).unwrap_or(u32::MAX);
        let Ok(rd) = std::fs::read_dir(dir) else { continue };
        let mut socks: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "sock"))
            .filter(|p| {
                std::fs::symlink_metadata(p).is_ok_and(|m| {
                    use std::os::unix::fs::FileTypeExt;
                    m.file_type().is_socket() && m.uid() == owner
                })
            })
            .collect();
        socks.sort();
        out.extend(socks);
    }
    out
}

/// Send one request to the daemon at `sock` and read its answer.
pub fn ask(sock: &Path, req: &Request) -> Result<Answer, String> {
    let s = UnixStream::connect(sock).map_err(|e| format!("{}: {e}", sock.display()))?;
    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut text = serde_json::to_string(req).map_err(|e| e.to_string())?;
    text.push('\n');
    (&s).write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", sock.display()))?;
    let mut line = String::new();
    BufReader::new((&s).take(MAX_ANSWER)).read_line(&mut line).map_err(|e| format!("{}: {e}", sock.display()))?;
    serde_json::from_str(line.trim()).map_err(|e| format!("{}: not an answer: {e}", sock.display()))
}

/// The status of every running daemon this user can reach (stale sockets are skipped).
pub fn status_all(dirs: &[PathBuf], euid: u32) -> Vec<(PathBuf, DaemonStatus)> {
    sockets(dirs, euid)
        .into_iter()
        .filter_map(|p| {
            let a = ask(&p, &Request::Status).ok()?;
            a.status.map(|s| (p, s))
        })
        .collect()
}

/// Turn placement on or off for `pid` in the daemon that manages it. Errors say what was
/// found: no daemon, or the daemon's refusal.
pub fn roi(dirs: &[PathBuf], euid: u32, pid: u32, on: bool) -> Result<String, String> {
    let socks = sockets(dirs, euid);
    let mut refused = None;
    for p in &socks {
        let Ok(a) = ask(p, &Request::Roi { pid, on }) else { continue };
        if a.ok {
            return Ok(a.message);
        }
        if !a.message.contains("is not managed here") {
            refused = Some(a.message);
        }
    }
    Err(refused.unwrap_or_else(|| {
        format!(
            "no running ptb manages pid {pid} (looked for control sockets in {}; `ptb status` lists what is managed)",
            dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(pid: u32, uid: u32) -> Program {
        Program {
            pid,
            uid,
            command: "app".into(),
            rule: None,
            policy: "ptb".into(),
            nodes: "0-1".into(),
            stats: Arc::new(Mutex::new(Stats::default())),
            since: std::time::Instant::now(),
            roi_wait: false,
        }
    }

    #[test]
    fn only_root_the_daemon_user_or_the_owner_may_pause() {
        let sh = Shared::new("daemon", None);
        sh.register(program(10, 1000));
        sh.register(program(11, 1001));
        assert!(!sh.paused(10));
        let a = sh.answer(&Request::Roi { pid: 10, on: false }, 1001);
        assert!(!a.ok && a.message.contains("belongs to uid 1000"), "{a:?}");
        assert!(!sh.paused(10));
        assert!(sh.answer(&Request::Roi { pid: 10, on: false }, 1000).ok);
        assert!(sh.paused(10));
        assert!(sh.answer(&Request::Roi { pid: 10, on: true }, 0).ok);
        assert!(!sh.paused(10));
        let a = sh.answer(&Request::Roi { pid: 99, on: true }, 0);
        assert!(!a.ok && a.message.contains("not managed"));
        // Status shows a user only their own programs.
        let s = sh.answer(&Request::Status, 1001).status.unwrap();
        if sh.euid != 1001 {
            assert_eq!((s.programs.len(), s.hidden), (1, 1));
            assert_eq!(s.programs[0].pid, 11);
        }
        let mut w = program(12, 1000);
        w.roi_wait = true;
        sh.register(w);
        assert!(sh.paused(12));
        sh.answer(&Request::Roi { pid: 12, on: true }, 0);
        assert!(!sh.paused(12));
        sh.unregister(12);
        assert!(!sh.pids().contains(&12));
    }

    /// A directory another user could write, or a symlink to one, is never used.
    #[test]
    fn untrusted_directories_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let ok = d.path().join("ok");
        make_dir(&ok, me).unwrap();
        assert!(untrusted(&ok, me).is_none());
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(make_dir(&open, me).unwrap_err().contains("writable by group or others"));
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert!(make_dir(&link, me).unwrap_err().contains("symbolic link"));
        assert!(untrusted(&ok, me.wrapping_add(1)).is_some() || me == 0);
    }

    /// Over a real socket: a request, the peer's uid from the kernel, the answer; the socket
    /// is removed when the server stops.
    #[test]
    fn roi_and_status_over_the_socket() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("run");
        let dirs = [dir.clone()];
        let me = nix::unistd::geteuid().as_raw();
        let sh = Shared::new("attach", None);
        sh.register(program(4242, me));
        let srv = Server::start_in(sh.clone(), &dir).unwrap();
        assert_eq!(sockets(&dirs, me), vec![srv.path().to_path_buf()]);
        assert_eq!(roi(&dirs, me, 4242, false).unwrap(), "placement off for pid 4242");
        assert!(sh.paused(4242));
        let e = roi(&dirs, me, 4343, false).unwrap_err();
        assert!(e.contains("no running ptb manages pid 4343"), "{e}");
        let st = status_all(&dirs, me);
        assert_eq!(st.len(), 1);
        assert_eq!(st[0].1.programs[0].pid, 4242);
        assert!(st[0].1.programs[0].paused);
        // Garbage and silence get an answer or a timeout, never a stuck daemon.
        let mut s = UnixStream::connect(srv.path()).unwrap();
        s.write_all(b"garbage\n").unwrap();
        let mut back = String::new();
        BufReader::new(&s).read_line(&mut back).unwrap();
        assert!(back.contains("not a request"), "{back}");
        let _idle = UnixStream::connect(srv.path()).unwrap();
        let t = std::time::Instant::now();
        assert!(roi(&dirs, me, 4242, true).is_ok());
        assert!(t.elapsed() < IO_TIMEOUT * 2, "{:?}", t.elapsed());
        let p = srv.path().to_path_buf();
        drop(srv);
        assert!(!p.exists());
    }

    proptest::proptest! {
        /// Fuzz target of the control protocol: any line a client sends is answered (or
        /// refused as not a request), never a panic, and never pauses a program the sender
        /// does not own.
        #[test]
        fn any_request_line_is_answered_safely(
            line in "\\{\"op\":\"(roi|status|x)\"(,\"pid\":[0-9]{1,11})?(,\"on\":(true|false|1))?\\}|\\PC{0,60}",
            peer in 0u32..3000,
        ) {
            let sh = Shared::new("daemon", None);
            sh.register(program(10, 1000));
            let a = match serde_json::from_str::<Request>(&line) {
                Ok(req) => sh.answer(&req, peer),
                Err(_) => Answer::default(),
            };
            if peer != 0 && peer != 1000 && peer != sh.euid {
                proptest::prop_assert!(!sh.paused(10), "{line} from {peer}: {a:?}");
            }
        }
    }

    /// A socket planted in a directory another user can write is never contacted.
    #[test]
    fn clients_skip_untrusted_directories() {
        let d = tempfile::tempdir().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let _l = UnixListener::bind(open.join("1.sock")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(sockets(std::slice::from_ref(&open), me).is_empty());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(sockets(std::slice::from_ref(&open), me).len(), 1);
    }
}

//! `ptb daemon`, the system-wide service: on any machine (a dry run on a made-up 2-node
//! machine), it takes the processes its rules select, shows them in `ptb status` and on one
//! metrics endpoint, lets them go when they exit, never takes what the rules leave out, and
//! stops cleanly on SIGTERM.

use assert_cmd::Command;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kills the process it holds when dropped (a failed assertion must not leave a daemon behind).
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status(run: &std::path::Path) -> serde_json::Value {
    let out = ptb().env("PTB_RUN_DIR", run).args(["status", "--json"]).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn managed(run: &std::path::Path) -> Vec<u64> {
    let v = status(run);
    v[0]["daemon"]["programs"].as_array().map_or(vec![], |a| a.iter().filter_map(|p| p["pid"].as_u64()).collect())
}

#[test]
fn the_service_takes_what_its_rules_select_and_lets_go() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // Programs with names no other process on this machine has: the rules must not take
    // anyone else's `sleep`.
    let tag = format!("s{}", std::process::id() % 100_000);
    let (sleep, tail) = (d.path().join(format!("{tag}-sl")), d.path().join(format!("{tag}-tl")));
    std::fs::copy(which("sleep"), &sleep).unwrap();
    std::fs::copy(which("tail"), &tail).unwrap();
    let cfg = d.path().join("ptb.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nscan_ms = 200\nmachine = \"synthetic:nodes=2,cpus=1\"\ndry_run = true\nsource = \"none\"\n\
             metrics_addr = \"127.0.0.1:0\"\npolicy = \"interleave\"\n\n\
             [[rule]]\nname = \"not-tail\"\ncommand = [\"{tag}-tl\"]\nexclude = true\n\n\
             [[rule]]\nname = \"sleepers\"\nuser = [{me}]\ncommand = [\"{tag}-*\"]\n"
        ),
    )
    .unwrap();
    let log = d.path().join("daemon.err");
    let mut daemon = Reap(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("ptb"))
            .env("PTB_RUN_DIR", &run)
            .args(["daemon", "--config"])
            .arg(&cfg)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut sleeper = Reap(spawn_copied(std::process::Command::new(&sleep).arg("30")));
    let tail = Reap(spawn_copied(std::process::Command::new(&tail).args(["-f", "/dev/null"])));
    let (sleeper_pid, tail_pid) = (sleeper.0.id() as u64, tail.0.id() as u64);
    wait_for("the service to take the sleeper", Duration::from_secs(30), || managed(&run).contains(&sleeper_pid));
    let v = status(&run);
    assert_eq!(v[0]["daemon"]["mode"], "daemon");
    let p = v[0]["daemon"]["programs"].as_array().unwrap().iter().find(|p| p["pid"] == sleeper_pid).unwrap().clone();
    assert_eq!((p["rule"].as_str(), p["policy"].as_str()), (Some("sleepers"), Some("interleave")));
    assert!(!managed(&run).contains(&tail_pid), "an excluded process was taken");
    assert_eq!(managed(&run), vec![sleeper_pid], "only the matching program is taken");
    // One metrics endpoint, every program labelled.
    let text = std::fs::read_to_string(&log).unwrap();
    let addr = text.split("metrics on http://").nth(1).and_then(|r| r.split('/').next()).unwrap().to_string();
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    c.read_to_string(&mut body).unwrap();
    let label = format!("pid=\"{sleeper_pid}\"");
    assert!(body.lines().any(|l| l.starts_with("ptb_cycles_total{") && l.contains(&label)), "{body}");
    assert!(body.contains("ptb_daemon_programs 1"), "{body}");
    // The program exits: let go.
    sleeper.0.kill().unwrap();
    sleeper.0.wait().unwrap();
    wait_for("the service to let go", Duration::from_secs(30), || managed(&run).is_empty());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(daemon.0.id() as i32), nix::sys::signal::Signal::SIGTERM)
        .unwrap();
    let st = daemon.0.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(st.success(), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(text.contains("let go of pid"), "{text}");
    drop(tail);
}

/// Spawns a program copied by this test. Another test thread may fork while the copy's
/// write descriptor is open; the child holds it until it execs, and exec of the copy fails
/// with ETXTBSY meanwhile (seen in CI). The window is short: try again for a while.
fn spawn_copied(cmd: &mut std::process::Command) -> std::process::Child {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            r => return r.unwrap(),
        }
    }
}

/// The path of a program on PATH.
fn which(name: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not on PATH"))
}

#[test]
fn a_bad_config_is_refused_with_its_field() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("ptb.toml");
    std::fs::write(&cfg, "[daemon]\nscan_ms = 5\n[[rule]]\nname = \"x\"\n").unwrap();
    let out = ptb().args(["daemon", "--check", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("ptb.toml") && err.contains("daemon.scan_ms"), "{err}");
    std::fs::write(&cfg, "[[rule]]\nname = \"x\"\nnodes = \"7\"\n[ptb]\npayback = -1\n").unwrap();
    let out = ptb().args(["daemon", "--check", "--config"]).arg(&cfg).output().unwrap();
    assert!(!out.status.success());
    // A policy table of a policy no rule uses is checked too (it was taken unchecked).
    std::fs::write(&cfg, "[[rule]]\nname = \"x\"\npolicy = \"ptb\"\n[selective]\nepoch_ms = 0\n").unwrap();
    let out = ptb().args(["daemon", "--check", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("ptb.toml") && err.contains("epoch_ms"), "{err}");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/ptb.toml");
    let out = ptb().args(["daemon", "--check", "--config", example]).output().unwrap();
    assert!(out.status.success(), "the shipped example config: {}", String::from_utf8_lossy(&out.stderr));
}

/// On a machine with one NUMA node there is nothing to place: the service said "dry run" but
/// acted (the `fixed` policy pinned the threads it took). Only meaningful on such a machine.
#[test]
fn on_one_node_the_service_moves_nothing() {
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|r| r.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .unwrap_or(0);
    if nodes != 1 {
        eprintln!("skipped: this machine has {nodes} NUMA nodes");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let tag = format!("o{}", std::process::id() % 100_000);
    let sleep = d.path().join(format!("{tag}-sl"));
    std::fs::copy(which("sleep"), &sleep).unwrap();
    let cfg = d.path().join("ptb.toml");
    std::fs::write(
        &cfg,
        format!(
            "[daemon]\nscan_ms = 200\ncycle_ms = 100\nsource = \"none\"\npolicy = \"fixed\"\n\n\
             [[rule]]\nname = \"sleepers\"\ncommand = [\"{tag}-sl\"]\n"
        ),
    )
    .unwrap();
    let log = d.path().join("daemon.err");
    let mut sleeper = Reap(spawn_copied(std::process::Command::new(&sleep).arg("30")));
    let pid = sleeper.0.id();
    let before = affinity(pid);
    let daemon = Reap(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("ptb"))
            .env("PTB_RUN_DIR", &run)
            .args(["daemon", "--config"])
            .arg(&cfg)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("the service to take the sleeper", Duration::from_secs(30), || managed(&run).contains(&(pid as u64)));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(affinity(pid), before, "{}", std::fs::read_to_string(&log).unwrap());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().any(|l| l.contains(&format!("taking pid {pid}")) && l.contains("(dry run)")), "{text}");
    drop(daemon);
    sleeper.0.kill().unwrap();
}

/// The CPU affinity list of a process.
fn affinity(pid: u32) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines().find(|l| l.starts_with("Cpus_allowed_list")).unwrap_or("").to_string()
}

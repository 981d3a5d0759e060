//! Hostile and careless input to the runtime commands (issue 19): every bad option is refused
//! before anything starts, a program ptb started is never left behind, the control channel
//! cannot be planted, and a closed pipe ends ptb quietly.

use assert_cmd::Command;
use std::path::Path;
use std::time::{Duration, Instant};

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

fn bin() -> std::process::Command {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("ptb"))
}

/// A dry run on a made-up 2-node machine: the managed path, on any machine.
const DRY: [&str; 6] = ["--machine", "synthetic:nodes=2,cpus=1", "--dry-run", "--source", "none", "--quiet"];

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !matches!(s.rsplit(')').next().and_then(|r| r.split_whitespace().next()), Some("Z" | "X")))
}

/// Every one of these was accepted on a 1-node machine (`--seconds nan` panicked after the
/// program had started): now each is refused and the program never runs.
#[test]
fn bad_options_are_refused_before_anything_starts() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("ran");
    let bad: &[&[&str]] = &[
        &["--policy", "nonexistent"],
        &["--nodes", "a"],
        &["--nodes", ""],
        &["--nodes", "1000"],
        &["--nodes", "2-3:4294967295,1000"],
        &["--set", "ptb.cycle_ms=nan"],
        &["--set", "ptbb.x=1"],
        &["--set", "ptb.period=0"],
        &["--set", "selective.epoch_ms=0"],
        &["--set", "asymsched.cycle_ms=0"],
        &["--config", "/nonexistent"],
        &["--config", "/dev/zero"],
        &["--metrics-addr", "garbage"],
        &["--budget-mbps", "nan"],
        &["--seconds", "nan"],
        &["--seconds", "inf"],
        &["--seconds", "1e300"],
        &["--seconds", "-1"],
        &["--cycle", "0"],
        &["--source", "bogus"],
    ];
    for args in bad {
        let out = ptb().arg("run").args(*args).arg("--").arg("touch").arg(&marker).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?}: the program ran although the options were bad");
        let out = ptb().arg("attach").arg(std::process::id().to_string()).args(*args).output().unwrap();
        assert!(!out.status.success(), "attach {args:?} was accepted");
    }
    let out = ptb().args(["record", "1", "--seconds", "nan", "-o"]).arg(d.path().join("t")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"));
}

/// `ptb run -- /nonexistent` exited 1 like `false`; shells use 127.
#[test]
fn a_missing_program_exits_127() {
    let out = ptb().args(["run", "--", "/nonexistent/program"]).output().unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", String::from_utf8_lossy(&out.stderr));
    let mut args = vec!["run"];
    args.extend(DRY);
    args.extend(["--", "/nonexistent/program"]);
    assert_eq!(ptb().args(&args).output().unwrap().status.code(), Some(127));
}

/// SIGTERM to ptb reaches the program (unmanaged on one node, and managed), and ptb exits with
/// the program's status; before, the unmanaged child kept running.
#[test]
fn signals_reach_the_program_and_ptb_exits_with_its_status() {
    let run_dir = tempfile::tempdir().unwrap();
    for managed in [false, true] {
        let mut c = bin();
        c.env("PTB_RUN_DIR", run_dir.path()).arg("run");
        if managed {
            c.args(DRY);
        }
        let mut p = c.args(["--", "sleep", "30"]).stderr(std::process::Stdio::null()).spawn().unwrap();
        let ptb_pid = p.id();
        let mut child = 0;
        wait_for("the program to start", Duration::from_secs(20), || {
            child = std::fs::read_to_string(format!("/proc/{ptb_pid}/task/{ptb_pid}/children"))
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            child != 0
        });
        std::thread::sleep(Duration::from_millis(300));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(ptb_pid as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
        let st = p.wait().unwrap();
        assert_eq!(st.code(), Some(128 + 15), "managed={managed}");
        wait_for("the program to end", Duration::from_secs(5), || !alive(child));
    }
}

/// An error after the program started (here: the metrics port is taken) used to end ptb and
/// leave the program behind; now ptb says so, waits for the program and exits with its status.
#[test]
fn an_error_after_the_start_never_abandons_the_program() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let run_dir = tempfile::tempdir().unwrap();
    let mut args = vec!["run"];
    args.extend(DRY);
    args.extend(["--metrics-addr", &addr, "--", "sh", "-c", "sleep 0.5; exit 7"]);
    let out = ptb().env("PTB_RUN_DIR", run_dir.path()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("keeps running unmanaged"), "{err}");
}

/// The old channel was `/tmp/ptb-roi.PID`: a planted symlink made root's `ptb roi end`
/// overwrite the file it pointed to. Nothing is written to a user-plantable path now.
#[test]
fn roi_never_writes_through_a_planted_file() {
    let d = tempfile::tempdir().unwrap();
    let precious = d.path().join("precious");
    std::fs::write(&precious, "keep").unwrap();
    std::os::unix::fs::symlink(&precious, d.path().join("ptb-roi.4242")).unwrap();
    let out = ptb()
        .env("PTB_ROI_DIR", d.path())
        .env("PTB_RUN_DIR", d.path().join("run"))
        .args(["roi", "end", "4242"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "no daemon manages 4242: `roi end` must say so");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
}

/// `ptb roi` and `ptb status` reach a running ptb over its socket; the daemon obeys what it
/// reports; its socket is gone after it stops.
#[test]
fn roi_and_status_reach_a_running_ptb() {
    let run_dir = tempfile::tempdir().unwrap();
    let rd = run_dir.path().join("ptb");
    let mut target = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = target.id().to_string();
    let mut a = bin()
        .env("PTB_RUN_DIR", &rd)
        .args(["attach", &pid, "--policy", "interleave", "--cycle", "100"])
        .args(DRY)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the control socket", Duration::from_secs(20), || {
        std::fs::read_dir(&rd)
            .is_ok_and(|mut r| r.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sock"))))
    });
    let out = ptb().env("PTB_RUN_DIR", &rd).args(["roi", "end", &pid]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("placement off for pid {pid}")));
    let status = |json: bool| {
        let mut c = ptb();
        c.env("PTB_RUN_DIR", &rd).arg("status");
        if json {
            c.arg("--json");
        }
        String::from_utf8_lossy(&c.output().unwrap().stdout).to_string()
    };
    let v: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    let p = &v[0]["daemon"]["programs"][0];
    assert_eq!(p["pid"].as_u64(), Some(target.id() as u64));
    assert_eq!(p["paused"], true);
    // The daemon really pauses: paused cycles grow.
    let paused = || {
        let v: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
        v[0]["daemon"]["programs"][0]["stats"]["cycles_paused"].as_u64().unwrap_or(0)
    };
    wait_for("paused cycles", Duration::from_secs(10), || paused() >= 2);
    assert!(status(false).contains("paused (roi)"));
    // The sampling in force: interleave asks for no samples; `--cycle 100` fixed the cycle.
    assert!(status(false).contains("off every 100 ms"), "{}", status(false));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(a.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    a.wait().unwrap();
    assert!(std::fs::read_dir(&rd).unwrap().next().is_none(), "the socket is removed on exit");
    assert!(status(false).contains("no running ptb"));
    target.kill().unwrap();
    target.wait().unwrap();
}

/// `ptb policies | head -1` panicked with "Broken pipe" (exit 101): a closed stdout now ends
/// ptb quietly (SIGPIPE, as for `cat`).
#[test]
fn a_closed_pipe_is_a_quiet_end() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    let sim = ["simulate", "--workload", "cg", "--duration-scale", "0.01"];
    for args in [&["policies"][..], &["workloads"], &["machines"], &["topology", "--machine", "opteron6272-8n"], &sim] {
        let (r, w) = nix::unistd::pipe().unwrap();
        drop(r);
        // SAFETY: `w` is an open descriptor we own; the Stdio takes it over.
        let stdout = unsafe { std::process::Stdio::from(OwnedFd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(w))) };
        let out = bin().args(args).stdout(stdout).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.status.success() || out.status.signal() == Some(libc::SIGPIPE), "{args:?}: {:?}", out.status);
    }
}

/// Files that are not regular files, or too big, are refused with a message, never read.
#[test]
fn device_files_and_fifos_are_refused_everywhere() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("f.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for file in [Path::new("/dev/zero"), fifo.as_path()] {
        let f = file.to_str().unwrap();
        let cases: Vec<Vec<&str>> = vec![
            vec!["topology", "--machine", f],
            vec!["simulate", "--workload", f],
            vec!["simulate", "--workload", "cg", "--config", f],
            vec!["characterize", "--import-mlc", f],
            vec!["plan", "--trace", f],
            vec!["report", f],
        ];
        for args in cases {
            let t = Instant::now();
            let out = ptb().args(&args).timeout(Duration::from_secs(30)).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?} succeeded");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert!(err.contains("device") || err.contains("FIFO") || err.contains("not a"), "{args:?}: {err}");
            assert!(t.elapsed() < Duration::from_secs(20), "{args:?} took {:?}", t.elapsed());
        }
    }
}

/// The final statistics said `targets_alive: 1` after "every target has exited".
#[test]
fn final_stats_count_no_target_alive_after_they_exited() {
    let d = tempfile::tempdir().unwrap();
    let stats = d.path().join("s.json");
    let mut args = vec!["run"];
    args.extend(DRY);
    args.extend(["--cycle", "50", "--stats", stats.to_str().unwrap(), "--", "sh", "-c", "sleep 0.4"]);
    let out = ptb().env("PTB_RUN_DIR", d.path().join("run")).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("every target has exited"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["targets_alive"], 0, "{v}");
    assert!(v["cycles"].as_u64().unwrap() >= 2, "{v}");
}

/// `characterize --out /dev/full` said "cannot read" and said it twice; `--duration-scale inf`
/// said "must be > 0".
#[test]
fn output_and_option_messages_say_what_is_wrong_once() {
    let mlc =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../characterize/tests/fixtures/broadwell-4node-bandwidth.txt");
    let out = ptb().arg("characterize").arg("--import-mlc").arg(&mlc).args(["--out", "/dev/full"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("cannot write output `/dev/full`: it is a device"), "{err}");
    assert_eq!(err.matches("cannot").count(), 1, "{err}");
    for (opt, v) in [("--duration-scale", "inf"), ("--duration-scale", "nan"), ("--linux-migrations", "nan")] {
        let out = ptb().args(["simulate", "--workload", "cg", opt, v]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{opt} {v} accepted");
        assert!(err.contains(opt) && !err.contains("must be > 0"), "{opt} {v}: {err}");
    }
}

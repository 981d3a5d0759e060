//! The runtime commands on the machine the tests run on: on a single-node machine every one
//! runs and says there is nothing to place; everywhere, unsafe targets are refused and a
//! preset never drives real moves.

use assert_cmd::Command;

fn nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|rd| rd.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .unwrap_or(1)
}

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

#[test]
fn single_node_commands_explain_and_succeed() {
    if nodes() != 1 {
        eprintln!("skipped: this machine has {} nodes", nodes());
        return;
    }
    let out = ptb().args(["run", "--", "sh", "-c", "exit 7"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "ptb run exits like the program");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to place") && err.contains("unmanaged"), "{err}");

    let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id().to_string();
    let out = ptb().args(["attach", &pid, "--policy", "interleave"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to place"));

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let out = ptb().args(["record", &pid, "--seconds", "0.3", "--cycle", "100", "-o"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ptb().args(["plan", "--trace"]).arg(&trace).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to place"));
    let out = ptb()
        .args(["plan", "--machine", "synthetic:nodes=2,cpus=1", "--policy", "fixed", "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("access map"));
    let out = ptb().args(["bench", "actuator"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to measure"));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn unsafe_targets_and_presets_are_refused() {
    let out = ptb().args(["attach", "1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pid 1"));
    let out = ptb()
        .args(["attach", &std::process::id().to_string(), "--machine", "synthetic:nodes=7,cpus=1"])
        .output()
        .unwrap();
    // Either refused (a model of another machine moves nothing) or, on one node, nothing to place.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("never drives real moves") || err.contains("nothing to place"), "{err}");
}

/// This machine's CPUs per node as a synthetic spec would make them (`nodes=N,cpus=C`), if
/// every node has the same count.
fn cpus_per_node() -> usize {
    let list = std::fs::read_to_string("/sys/devices/system/node/node0/cpulist").unwrap_or_default();
    ptb_topology::CpuSet::parse_list(&list).map_or(1, |s| s.len()).max(1)
}

/// A synthetic spec (here: one with this machine's nodes and CPUs, which on a single-node
/// machine matches it exactly) never moves a real process: without --dry-run ptb refuses it
/// before the program starts (it used to run the program, managed with the spec's topology).
#[test]
fn a_synthetic_spec_matching_this_machine_is_refused_without_dry_run() {
    let spec = format!("synthetic:nodes={},cpus={},dies=1", nodes(), cpus_per_node());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = ptb().args(["run", "-m", &spec, "--", "touch"]).arg(&marker).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is a synthetic spec") && err.contains("never drives real moves"), "{err}");
    assert!(!marker.exists(), "the program must not start");
    let out = ptb().args(["run", "--dry-run", "-m", &spec, "--", "touch"]).arg(&marker).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists(), "with --dry-run the program runs");
}

/// A node the machine lacks is named with the machine's nodes as the README writes node lists,
/// before anything starts, on every machine.
#[test]
fn a_node_this_machine_lacks_is_refused_with_its_nodes_listed() {
    let out = ptb().args(["run", "--nodes", "999", "--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("node 999 does not exist here (nodes: 0"), "{err}");
    assert!(!err.contains('['), "no Rust debug text: {err}");
}

#[test]
fn roi_without_a_daemon_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = ptb().env("PTB_RUN_DIR", dir.path()).args(["roi", "end", "4242"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no running ptb manages pid 4242"));
}

#[test]
fn help_of_policy_commands_lists_every_policy_parameter() {
    for cmd in ["run", "attach", "simulate", "compare", "plan"] {
        let out = ptb().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        for want in ["ptb-classic.min_acc", "ptb.payback", "autonuma.", "weighted-interleave.weights", "+selective"] {
            assert!(text.contains(want), "`ptb {cmd} --help` lacks {want}");
        }
    }
}

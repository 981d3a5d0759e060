//! `ptb topology` and `ptb machines` as a user runs them.

use assert_cmd::Command;
use std::path::Path;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

/// This machine's online CPUs as the kernel lists them, to compare with `ptb topology`.
fn online_cpus() -> Option<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    Some(ptb_topology::CpuSet::parse_list(text.trim()).ok()?.len())
}

#[test]
fn topology_describes_this_machine() {
    if !Path::new("/sys/devices/system/cpu").exists() {
        eprintln!("skipped: no /sys here");
        return;
    }
    let out = ptb().arg("topology").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("(this machine)"), "{text}");
    let out = ptb().args(["topology", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "ptb.topology/1");
    assert_eq!(v["summary"]["live"], true);
    if let Some(n) = online_cpus() {
        assert_eq!(v["summary"]["cpus"], n, "ptb topology and /sys/devices/system/cpu/online disagree");
        let line = text.lines().next().unwrap();
        let want = format!(", {n} CPU{}", if n == 1 { "" } else { "s" });
        assert!(line.contains(&want), "summary line `{line}` lacks `{want}`");
    }
}

#[test]
fn synthetic_machine_as_json() {
    let out = ptb().args(["topology", "--machine", "synthetic:nodes=4,cpus=8,dies=2", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 4);
    assert_eq!(v["summary"]["cpus"], 32);
    assert_eq!(v["summary"]["cpu_groups"], 8);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(v["bandwidth"]["uncontended"]["unit"], "GB/s");
}

#[test]
fn json_output_loads_back_as_a_machine_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = ptb().args(["topology", "--machine", "synthetic:nodes=2,cpus=4,memonly=1", "--json"]).output().unwrap();
    let path = dir.path().join("m.json");
    std::fs::write(&path, &out.stdout).unwrap();
    let again = ptb().args(["topology", "--json", "--machine"]).arg(&path).output().unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(a["nodes"], b["nodes"]);
    assert_eq!(a["bandwidth"], b["bandwidth"]);
}

#[test]
fn bad_machine_file_names_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=4").unwrap();
    ptb_topology::file::save(&m, &good).unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    // Put CPU 0 into node 1 as well.
    let bad_text = text.replacen("cpus = \"4-7\"", "cpus = \"0,4-7\"", 1);
    assert_ne!(bad_text, text, "fixture edit did not apply");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, bad_text).unwrap();
    let out = ptb().args(["topology", "--machine"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("nodes[1].cpus"), "{err}");
}

#[test]
fn unknown_machine_is_refused() {
    let out = ptb().args(["topology", "--machine", "no-such-machine"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-machine"));
}

#[test]
fn machines_lists_every_preset() {
    let out = ptb().arg("machines").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for (name, _) in ptb_topology::presets::list() {
        assert!(text.lines().any(|l| l.starts_with(name)), "`{name}` missing from:\n{text}");
    }
    let out = ptb().args(["machines", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), ptb_topology::presets::list().len());
}

#[test]
fn captured_sysfs_tree_as_machine() {
    let out = ptb()
        .args(["topology", "--machine", "../topology/tests/fixtures/qemu-4node-memonly", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 4);
    assert_eq!(v["summary"]["memory_only_nodes"], serde_json::json!([4]));
    assert_eq!(v["summary"]["live"], false);
}

#[test]
fn preset_with_asymmetric_links_as_json() {
    let out = ptb().args(["topology", "--machine", "opteron6272-8n", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["nodes"], 8);
    assert_eq!(v["summary"]["cpus"], 64);
    assert!(v["summary"]["asymmetric_links"].as_u64().unwrap() > 0);
    let text = ptb().args(["topology", "--machine", "opteron6272-8n"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("asymmetric"));
}

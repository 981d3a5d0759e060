//! `ptb characterize` as a user runs it: measure (quick), import MLC output, refuse bad input.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../characterize/tests/fixtures").join(name)
}

#[test]
fn a_quick_run_writes_a_machine_file_that_topology_shows() {
    if !Path::new("/sys/devices/system/node").exists() {
        eprintln!("skipped: no NUMA sysfs here");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("m.toml");
    let prefix = d.path().join("bg");
    let run = ptb()
        .args(["characterize", "--quick", "--repeats", "2", "--out"])
        .arg(&out)
        .arg("--heatmap")
        .arg(&prefix)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{}\n{}", text, String::from_utf8_lossy(&run.stderr));
    assert!(text.contains("Measured in") && text.contains("Sanity check") && text.contains("ratio"), "{text}");
    assert!(text.contains("Idle latency"), "{text}");
    let m = ptb_topology::file::load(&out).unwrap();
    let bg = m.bandwidth.as_ref().unwrap();
    assert_eq!(bg.uncontended.source, ptb_topology::MatrixSource::Measured);
    assert!(bg.uncontended.has_shape(m.groups.len(), m.nodes.len()));
    assert!(bg.uncontended.spread.is_some(), "two repeats give a spread");
    for (g, grp) in m.groups.iter().enumerate() {
        let local = m.node_idx(m.nodes[grp.node.ix()].id).unwrap();
        assert!(bg.uncontended.get(g, local.ix()) > 0.0);
        assert!(bg.latency.as_ref().unwrap().get(g, local.ix()) > 0.0);
    }
    if m.nodes.len() == 1 {
        assert!(text.contains("1x1 case"), "{text}");
    }
    // The file names the address sampler `ptb run` would use here (none on a VM without a PMU).
    let found = ptb_linux::perf::detect(Path::new("/")).found.iter().find_map(|k| k.sampler());
    assert_eq!(m.sampler, found);
    assert!(text.contains("Address sampler: "), "{text}");
    for f in ["bg-uncontended.png", "bg-contended.svg", "bg-latency.png"] {
        assert!(d.path().join(f).exists(), "{f}");
    }
    let shown = ptb().args(["topology", "--machine"]).arg(&out).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("measured") && shown.contains("Idle latency"), "{shown}");
    // The simulator runs on the measured machine.
    let sim = ptb().args(["simulate", "--duration-scale", "0.02", "--machine"]).arg(&out).output().unwrap();
    let sim_out = String::from_utf8_lossy(&sim.stdout);
    assert!(sim.status.success(), "{sim_out}\n{}", String::from_utf8_lossy(&sim.stderr));
    assert!(sim_out.contains("SIMULATED"), "{sim_out}");
}

#[test]
fn json_output_carries_the_matrices() {
    if !Path::new("/sys/devices/system/node").exists() {
        return;
    }
    let run = ptb().args(["characterize", "--quick", "--json", "--groups", "node"]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(v["bandwidth"]["uncontended"]["source"], "measured");
    assert!(v["characterisation"]["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["rows"][0].as_str().unwrap().starts_with("node"));
}

#[test]
fn mlc_import_round_trips_the_broadwell_matrices() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bdw.toml");
    let run = ptb()
        .args(["characterize", "--import-mlc"])
        .arg(fixture("broadwell-4node-bandwidth.txt"))
        .arg("--latency")
        .arg(fixture("broadwell-4node-latency.txt"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(text.contains("36.5") && text.contains("151.1"), "{text}");
    let m = ptb_topology::file::load(&out).unwrap();
    let bg = m.bandwidth.unwrap();
    assert!((bg.uncontended.get(1, 0) - 20.194).abs() < 1e-9);
    assert_eq!(bg.latency.unwrap().get(3, 2), 141.1);
}

#[test]
fn mlc_import_onto_a_preset_uses_its_structure() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("bdw.json");
    let run = ptb()
        .args(["characterize", "--machine", "broadwell-cod-4n", "--import-mlc"])
        .arg(fixture("broadwell-4node-bandwidth.txt"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let m = ptb_topology::file::load(&out).unwrap();
    let preset = ptb_topology::resolve("broadwell-cod-4n").unwrap();
    assert_eq!(m.n_cpus(), preset.n_cpus());
    assert!((m.node_bg(m.nodes[0].idx, m.nodes[1].idx).unwrap() - 18.91).abs() < 1e-9);
}

#[test]
fn malformed_mlc_files_are_refused_with_line_and_reason() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.txt");
    std::fs::write(&bad, "Bandwidths are in MB/sec\nNuma node\t0\t1\n0\t100.0\n").unwrap();
    let run = ptb().args(["characterize", "--import-mlc"]).arg(&bad).output().unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("bad.txt: line 3") && err.contains("has 1 values but the header names 2"), "{err}");
}

#[test]
fn unwritable_output_paths_are_refused_before_measuring() {
    let run = ptb().args(["characterize", "--quick", "--out", "/no/such/dir/m.toml"]).output().unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("/no/such/dir") && err.contains("does not exist"), "{err}");
    assert!(!String::from_utf8_lossy(&run.stdout).contains("Measured"), "refused before measuring");
}

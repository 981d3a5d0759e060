//! `ptb compare --real` where there is nothing to compare, and `ptb model` end to end: a trace
//! becomes a workload file that `ptb simulate` and `ptb compare --workload` run, whose access
//! map matches the recorded one; bad inputs are refused with the file, line and field.

use assert_cmd::Command;
use ptb_linux::trace::{TraceRecord, TraceRegion, TraceThread, TraceWriter};
use ptb_profile::{Sample, SampleKind};
use ptb_topology::CpuId;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

fn nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|rd| rd.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
        .unwrap_or(1)
}

const MACHINE: &str = "synthetic:nodes=2,cpus=2";

/// Two threads on a 2-node machine (CPUs 0-1 on node 0, 2-3 on node 1), each reading its half
/// of a buffer whose halves are on their nodes.
fn write_trace(path: &std::path::Path) {
    let m = ptb_topology::resolve(MACHINE).unwrap();
    let mut out: Vec<u8> = Vec::new();
    let mut w = TraceWriter::new(&mut out);
    w.write(&TraceRecord::Header {
        version: 1,
        pids: vec![50],
        page_size: 4096,
        source: "page-faults (software page-fault events, period 1)".into(),
        period: 1,
        machine: Box::new(m),
    })
    .unwrap();
    let mut x: u64 = 1;
    let mut pages = Vec::new();
    for ms in 0..2000u64 {
        for j in 0..2u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let vpn = 0x10_0000 + u64::from(j) * 512 + (x >> 20) % 512;
            let s = Sample {
                app: 50,
                tid: 51 + j,
                cpu: CpuId(2 * j),
                addr: vpn * 4096,
                kind: SampleKind::PageFault,
                time_ns: ms * 1_000_000,
                data_src: None,
                latency_ns: None,
                phys: None,
            };
            w.write(&TraceRecord::Sample(s)).unwrap();
            pages.push((50, vpn, j as u16));
        }
        if ms % 250 == 249 {
            pages.sort_unstable();
            pages.dedup();
            w.write(&TraceRecord::Placement {
                time_ns: (ms + 1) * 1_000_000,
                threads: (0..2).map(|j| TraceThread { app: 50, tid: 51 + j, cpu: 2 * j, node: j as u16 }).collect(),
                pages: std::mem::take(&mut pages),
                regions: vec![TraceRegion {
                    app: 50,
                    start_vpn: 0x10_0000,
                    npages: 1024,
                    name: "[anon]".into(),
                    resident: vec![512, 512],
                }],
                free_bytes: vec![1 << 30, 1 << 30],
            })
            .unwrap();
        }
    }
    w.flush().unwrap();
    std::fs::write(path, out).unwrap();
}

#[test]
fn compare_real_on_one_node_says_there_is_nothing_to_compare() {
    if nodes() != 1 {
        eprintln!("skipped: this machine has {} nodes", nodes());
        return;
    }
    let out = ptb().args(["compare", "--real", "--", "true"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nothing to compare") && text.contains("ptb model"), "{text}");
    let out = ptb().args(["compare", "--real", "--json", "--", "true"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["nothing_to_compare"].as_str().is_some() && v["measured"] == true, "{v}");
}

#[test]
fn compare_real_options_need_real_and_a_program() {
    let out = ptb().args(["compare", "--", "true"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--real"));
    let out = ptb().args(["compare", "--modes", "default"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--real"));
    let out = ptb().args(["compare", "--real"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CMD"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ptb().args(["compare", "--real", "--workload", "cg", "--", "true"]).output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn a_trace_becomes_a_workload_the_simulator_runs() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("app.trace");
    let model = d.path().join("app.toml");
    write_trace(&trace);
    let out = ptb()
        .args(["model", "--trace"])
        .arg(&trace)
        .arg("-o")
        .arg(&model)
        .args(["--check", "--max-l1", "0.15"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("L1 distance") && text.contains("written to"), "{text}");
    let toml = std::fs::read_to_string(&model).unwrap();
    assert!(toml.contains("# Objects (fit =") && toml.contains("pattern = \"private\""), "{toml}");
    assert!(toml.contains("init = \"parallel\""), "{toml}");
    let out = ptb()
        .args(["simulate", "--machine", MACHINE, "--policy", "interleave", "--workload"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ptb()
        .args([
            "compare",
            "--machine",
            "synthetic:nodes=4,cpus=2",
            "--policy",
            "interleave",
            "--no-oracle",
            "--workload",
        ])
        .arg(&model)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("app"));
    // JSON: the check's numbers.
    let out = ptb().args(["model", "--json", "--check", "--trace"]).arg(&trace).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["check"]["l1"].as_f64().unwrap() <= 0.15, "{v}");
    assert_eq!(v["threads"].as_array().unwrap().len(), 2);
    // Without -o the model is stdout, and nothing else is: the check goes to stderr.
    let out = ptb().args(["model", "--check", "--trace"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let toml = String::from_utf8_lossy(&out.stdout);
    ptb_sim::Workload::parse(&toml, "stdout").unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("L1 distance"));
    // --max-l1 outside [0, 2] is refused before anything is read.
    let out = ptb().args(["model", "--check", "--max-l1", "NaN", "--trace"]).arg(&trace).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--max-l1"));
}

#[test]
fn perf_script_input_and_bad_inputs() {
    let d = tempfile::tempdir().unwrap();
    let perf = d.path().join("perf.txt");
    let mut text = String::new();
    for i in 0..400u64 {
        let tid = 11 + i % 2;
        let addr = 0x7f00_0000_0000u64 + (tid - 11) * (1 << 20) + (i * 4096) % (1 << 20);
        text.push_str(&format!(
            "  app {:>7}/{tid:<7} [{:03}] {}.{:06}: {addr:16x} {:16x} |OP LOAD|LVL L1 hit|\n",
            10,
            (tid - 11) * 2,
            1000 + i / 100,
            (i % 100) * 10_000,
            0x68100142u64
        ));
    }
    std::fs::write(&perf, text).unwrap();
    let out = ptb().args(["model", "--machine", MACHINE, "--trace"]).arg(&perf).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let toml = String::from_utf8_lossy(&out.stdout);
    assert!(toml.contains("threads = 2") && toml.contains("perf mem"), "{toml}");
    // Bad inputs: the file, the line, the field.
    let bad = d.path().join("bad.txt");
    std::fs::write(&bad, "  10/11 [000] 1.000000: nothex 68100142 |OP LOAD|\n").unwrap();
    let out = ptb().args(["model", "--machine", MACHINE, "--trace"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.txt: line 1: field `addr`"), "{err}");
    let empty = d.path().join("empty.trace");
    std::fs::write(&empty, "").unwrap();
    let out = ptb().args(["model", "--machine", MACHINE, "--trace"]).arg(&empty).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no samples"));
    let broken = d.path().join("broken.trace");
    let mut t = Vec::new();
    write_trace(&broken);
    t.extend(std::fs::read(&broken).unwrap().split(|b| *b == b'\n').next().unwrap());
    t.extend(b"\n{\"type\":\"sample\",\"app\":50,\n");
    std::fs::write(&broken, t).unwrap();
    let out = ptb().args(["model", "--trace"]).arg(&broken).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.trace: line 2"), "{err}");
}

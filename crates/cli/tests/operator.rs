//! What an operator reads and types: a dry run says "would" everywhere and names its sample
//! source; every node is a kernel node id (as numactl numbers them) and nothing is Rust debug
//! text; every command follows the same conventions (short flags, one default machine, the
//! global options first in help, no colour in a pipe); benchmarks say what they will cost.

use assert_cmd::Command;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Rust debug formatting that must never reach a person.
fn assert_no_debug(s: &str) {
    for bad in ["NodeIdx", "NodeId(", "Weighted(", "Interleave(", "MoveTo(", "Some(", "[\"", "\\u001b", "\u{1b}"] {
        assert!(!s.contains(bad), "debug text `{bad}` in:\n{s}");
    }
}

const SUBCOMMANDS: [&str; 19] = [
    "topology",
    "machines",
    "policies",
    "workloads",
    "simulate",
    "compare",
    "subsets",
    "calibrate",
    "report",
    "characterize",
    "run",
    "attach",
    "record",
    "plan",
    "roi",
    "bench policy",
    "bench sim",
    "bench actuator",
    "bench",
];

fn help(cmd: &str) -> String {
    let out = ptb().args(cmd.split(' ')).arg("--help").assert().success().get_output().stdout.clone();
    text(&out)
}

#[test]
fn every_help_lists_the_global_log_first_and_has_consistent_short_flags() {
    for cmd in SUBCOMMANDS {
        let h = help(cmd);
        if let Some(opts) = h.split("Options:").nth(1) {
            let first = opts.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
            assert!(first.trim_start().starts_with("--log <FILTER>"), "{cmd}: first option is `{first}`");
        }
        for (short, long) in [
            ("-m", "--machine"),
            ("-p", "--policy"),
            ("-w", "--workload"),
            ("-j", "--jobs"),
            ("-o", "--out"),
            ("-s", "--seed"),
        ] {
            if h.contains(&format!("{long} <")) || h.contains(&format!("{long}\n")) {
                assert!(h.contains(&format!("{short}, {long}")), "{cmd}: {long} without {short}");
            }
        }
        // A default is said once: by clap's [default: X], not also in the text before it.
        for para in h.split("\n\n") {
            let flat = para.split_whitespace().collect::<Vec<_>>().join(" ");
            if let (Some(a), Some(_)) = (flat.find("(default "), flat.find("[default: ")) {
                panic!("{cmd}: default said twice: {}", &flat[a..]);
            }
        }
        assert!(!h.contains("--bg"), "{cmd}: the --bg alias is gone");
    }
    for cmd in ["simulate", "compare", "bench sim"] {
        assert!(help(cmd).contains("[default: opteron6272-8n]"), "{cmd}: default machine not shown or not the same");
    }
}

#[test]
fn simulate_defaults_to_the_machine_compare_uses_and_takes_a_seed_list() {
    let out = ptb().args(["simulate", "-w", "ep", "-p", "interleave", "-s", "1-2", "--duration-scale", "0.1"]).assert();
    let s = text(&out.success().get_output().stdout);
    assert!(s.contains("machine opteron6272-8n") && s.contains("seeds 1, 2"), "{s}");
    assert_no_debug(&s);
    let out = ptb().args(["simulate", "-w", "ep", "--seed", "3-1"]).assert().failure();
    assert!(text(&out.get_output().stderr).contains("--seed"));
}

#[test]
fn weights_and_nodes_are_kernel_node_ids() {
    // opteron6272-4n numbers its nodes 0, 2, 4, 6.
    let run = |w: &str| {
        ptb()
            .args([
                "simulate",
                "-m",
                "opteron6272-4n",
                "-w",
                "ep",
                "-p",
                "weighted-interleave",
                "--duration-scale",
                "0.05",
            ])
            .args(["--set", &format!("weighted-interleave.weights={w}"), "--json"])
            .output()
            .unwrap()
    };
    let ok = run("2:3,6:1");
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    let r = v["results"].as_array().unwrap().iter().find(|r| r["policy"] == "weighted-interleave").unwrap();
    // Memory only on nodes 2 and 6, three quarters on node 2.
    let share = r["access_map"]["controller_share"].as_array().unwrap();
    let s: Vec<f64> = share.iter().map(|x| x.as_f64().unwrap()).collect();
    assert!(s[0] < 0.01 && s[2] < 0.01 && (s[1] - 0.75).abs() < 0.05 && (s[3] - 0.25).abs() < 0.05, "{s:?}");
    let bad = run("1:3");
    assert!(!bad.status.success());
    let e = text(&bad.stderr);
    assert!(e.contains("node 1 is not a memory node") && e.contains("0, 2, 4, 6"), "{e}");
}

/// A trace of one thread on node 0 of a 2-node machine reading a page on node 1.
fn trace(dir: &std::path::Path) -> std::path::PathBuf {
    use ptb_linux::trace::{TraceRecord, TraceThread, TraceWriter};
    use ptb_profile::{Sample, SampleKind};
    let m = ptb_topology::resolve("synthetic:nodes=2,cpus=2").unwrap();
    let path = dir.join("t.jsonl");
    let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap());
    w.write(&TraceRecord::Header {
        version: ptb_linux::trace::TRACE_VERSION,
        pids: vec![42],
        page_size: 4096,
        source: "test".into(),
        period: 1,
        machine: Box::new(m),
    })
    .unwrap();
    for i in 0..40u64 {
        let s = Sample {
            app: 42,
            tid: 43,
            cpu: ptb_topology::CpuId(0),
            addr: (7 + i % 4) * 4096,
            kind: SampleKind::PageFault,
            time_ns: i * 1000,
            data_src: None,
            latency_ns: None,
            phys: None,
        };
        w.write(&TraceRecord::Sample(s)).unwrap();
    }
    w.write(&TraceRecord::Placement {
        time_ns: 50_000,
        threads: vec![TraceThread { app: 42, tid: 43, cpu: 0, node: 0 }],
        pages: (7..11).map(|v| (42, v, 1)).collect(),
        regions: vec![],
        free_bytes: vec![],
    })
    .unwrap();
    w.write(&TraceRecord::End { time_ns: 60_000, samples: 40, lost: 0 }).unwrap();
    w.flush().unwrap();
    path
}

#[test]
fn plan_prints_kernel_node_ids_and_no_debug_text() {
    let d = tempfile::tempdir().unwrap();
    let t = trace(d.path());
    for policy in ["weighted-interleave", "interleave", "fixed", "ptb-classic"] {
        let out = ptb().args(["plan", "-m", "opteron6272-4n", "-p", policy]).arg(&t).output().unwrap();
        assert!(out.status.success(), "{policy}: {}", text(&out.stderr));
        let s = text(&out.stdout) + &text(&out.stderr);
        assert_no_debug(&s);
        assert!(!s.contains(" n0") && !s.contains(" n1") && !s.contains("#"), "{policy}: dense indices in:\n{s}");
        assert!(s.contains("   0        2        4        6"), "{policy}: access map columns by kernel id:\n{s}");
        if policy.contains("interleave") {
            assert!(s.contains("nodes 0,2,4,6") || s.contains("0:") && s.contains("6:"), "{policy}:\n{s}");
        }
    }
    let out =
        ptb().args(["plan", "-m", "opteron6272-4n", "-p", "weighted-interleave", "--json"]).arg(&t).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["nodes"], serde_json::json!([0, 2, 4, 6]));
    assert!(v["start"]["alloc"].as_str().unwrap().contains("0:") && !text(&out.stdout).contains("NodeIdx"));
    // The old spelling still works.
    ptb().args(["plan", "--trace"]).arg(&t).assert().success();
}

/// On one node there is nothing to place; with --json that is said in JSON, as `ptb compare
/// --real --json` says there is nothing to compare (it printed plain text on stdout).
#[test]
fn plan_json_on_one_node_is_json() {
    let d = tempfile::tempdir().unwrap();
    let t = trace(d.path());
    let out = ptb().args(["plan", "-m", "synthetic:nodes=1,cpus=2", "--json"]).arg(&t).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert!(v["nothing_to_place"].as_str().unwrap().contains("1 NUMA node"), "{v}");
    assert_eq!(v["nodes"], serde_json::json!([0]));
    assert!(text(&out.stderr).contains("(1 node)"), "{}", text(&out.stderr));
    let out = ptb().args(["plan", "-m", "synthetic:nodes=1,cpus=2"]).arg(&t).output().unwrap();
    assert!(text(&out.stdout).starts_with("nothing to place"), "{}", text(&out.stdout));
}

#[test]
fn a_dry_run_says_would_everywhere_and_names_its_sample_source() {
    let d = tempfile::tempdir().unwrap();
    let stats = d.path().join("stats.json");
    // `dd` touches a 32 MiB buffer: page faults for the software sample source.
    let out = ptb()
        .args(["--log", "info", "run", "--dry-run", "-m", "opteron6272-4n", "--source", "page-faults", "--cycle", "50"])
        .arg("--stats")
        .arg(&stats)
        .args(["--", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=32M count=2 2>/dev/null; sleep 0.3"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    if err.contains("perf_event_paranoid") || err.contains("not permitted") {
        eprintln!("skipped: no software perf events here: {err}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let head: Vec<&str> = err.lines().take(6).collect();
    assert!(head.iter().any(|l| l.contains("samples from page-faults")), "source not named early:\n{err}");
    assert!(err.contains("dry run") && err.contains("would move: threads="), "{err}");
    assert!(err.contains("would have moved") && err.contains("nothing was moved"), "{err}");
    for l in err.lines() {
        assert!(!l.contains("moved:") && !l.contains("pages moved"), "a dry-run line says moved: {l}");
    }
    assert!(!err.contains('\u{1b}'), "colour codes in a pipe:\n{err}");
    assert!(err.contains("INFO"), "--log info shows the cycle log:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["pages_moved"], 0);
    assert_eq!(v["threads_moved"], 0);
}

#[test]
fn record_launches_a_program_like_perf_record() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.jsonl");
    let out = ptb()
        .args(["record", "--source", "page-faults", "--cycle", "50", "-o"])
        .arg(&t)
        .args(["--", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=8M count=2 2>/dev/null; sleep 0.2; exit 3"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    if err.contains("perf_event_paranoid") || err.contains("not permitted") {
        eprintln!("skipped: no software perf events here: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(3), "exits like the program: {err}");
    assert!(err.contains("started `sh -c") && err.contains("target exited"), "{err}");
    let trace = std::fs::read_to_string(&t).unwrap();
    assert!(trace.lines().next().unwrap().contains("\"header\"") && trace.contains("\"end\""));
    // Exactly one of a pid or a program.
    ptb().args(["record", "-o"]).arg(&t).assert().failure();
    ptb().args(["record", "1", "-o"]).arg(&t).args(["--", "true"]).assert().failure();
}

#[test]
fn roi_refuses_a_process_that_does_not_exist() {
    let d = tempfile::tempdir().unwrap();
    let out = ptb().env("PTB_ROI_DIR", d.path()).args(["roi", "end", "4000000"]).assert().failure();
    let e = text(&out.get_output().stderr);
    assert!(e.contains("no running ptb manages pid 4000000"), "{e}");
    assert!(!d.path().join("ptb-roi.4000000").exists());
}

#[test]
fn bench_policy_defaults_to_the_small_case_and_says_its_cost_and_verdict() {
    let out = ptb().args(["bench", "policy", "--cycles", "1", "--no-ingest"]).assert().success();
    let (o, e) = (text(&out.get_output().stdout), text(&out.get_output().stderr));
    assert!(e.contains("64 threads x 15000 pages") && e.contains("needs about"), "{e}");
    assert!(!e.contains("1000000"), "a large case ran by default: {e}");
    assert!(o.contains("target") && (o.contains("pass") || o.contains("FAIL")), "{o}");
    assert!(o.contains("cases meet their target") && o.contains("--large"), "{o}");
}

#[test]
fn bench_policy_of_ptb_times_its_goal_case_at_a_real_cycles_samples() {
    let out = ptb().args(["bench", "policy", "-p", "ptb", "--cycles", "1", "--no-ingest"]).assert().success();
    let (o, e) = (text(&out.get_output().stdout), text(&out.get_output().stderr));
    assert!(e.contains("64 threads x 1000000 pages (contiguous, 7600 samples per cycle)"), "{e}");
    assert!(o.contains("ptb's goal per cycle") && o.contains("slowest cpu ms"), "{o}");
}

#[test]
fn bench_policy_refuses_a_case_larger_than_the_free_memory_instead_of_aborting() {
    // 2^40 pages at 1,000 samples each: far beyond any machine's memory (and the estimate's
    // arithmetic must not overflow).
    let out = ptb()
        .args(["bench", "policy", "-p", "ptb", "--case", "64x1099511627776:1000", "--no-ingest"])
        .assert()
        .failure();
    let e = text(&out.get_output().stderr);
    assert!(e.contains("--case for ptb") && e.contains("MemAvailable") && e.contains("--scale"), "{e}");
    assert!(!e.contains("panicked") && !e.contains("memory allocation"), "{e}");
}

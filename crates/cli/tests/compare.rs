//! `ptb compare` and `ptb report` end to end on a tiny machine and a saved fixture.

use assert_cmd::Command;
use serde_json::Value;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

const TINY: [&str; 10] = [
    "compare",
    "--machine",
    "synthetic:nodes=2,cpus=2",
    "--workload",
    "canneal",
    "--policy",
    "first-touch,interleave",
    "--seeds",
    "1",
    "--duration-scale=0.25",
];

#[test]
fn compare_prints_a_simulated_table_with_the_oracle() {
    let out = ptb().args(TINY).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("SIMULATED"), "{text}");
    for want in [
        "canneal",
        "first-touch",
        "interleave",
        "oracle",
        "oracle-moved",
        "geometric mean",
        "worst",
        "oracle share",
        "not a proof",
        "one migration",
    ] {
        assert!(text.contains(want), "missing {want}: {text}");
    }
}

#[test]
fn compare_json_has_results_oracle_and_summary_and_the_oracle_wins() {
    let out = ptb().args(TINY).arg("--json").assert().success().get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["simulated"], true);
    let results = v["results"].as_array().unwrap();
    let rt = |p: &str| results.iter().find(|r| r["policy"] == p).unwrap()["runtime_s"].as_f64().unwrap();
    assert!(rt("oracle") <= rt("first-touch"));
    assert!(rt("oracle") <= rt("interleave") * (1.0 + 1e-6));
    // The oracle's placement reached by migration: slower than the oracle, never slower than
    // leaving first touch alone.
    assert!(rt("oracle-moved") >= rt("oracle") && rt("oracle-moved") <= rt("first-touch"));
    let moved = results.iter().find(|r| r["policy"] == "oracle-moved").unwrap();
    assert_eq!(moved["oracle_delay_ms"], 25);
    assert!(v["summary"]["policies"].as_array().unwrap().iter().any(|p| p == "oracle-moved"));
    let per = v["summary"]["per_policy"].as_array().unwrap();
    let il = per.iter().find(|p| p["policy"] == "interleave").unwrap();
    let sp = results.iter().find(|r| r["policy"] == "interleave").unwrap()["speedup_vs_first_touch"].as_f64().unwrap();
    assert!((il["geomean_speedup"].as_f64().unwrap() - sp).abs() < 1e-12);
    for r in results {
        assert!(r["access_map"]["shares"].is_array(), "{r}");
    }
}

#[test]
fn compare_report_and_report_from_saved_json_write_pages_and_plots() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("rep");
    ptb().args(TINY).arg("--report").arg(&dir).assert().success();
    for f in ["index.html", "report.md", "speedup.png", "speedup.svg", "compare.json", "access-canneal-oracle.png"] {
        assert!(dir.join(f).exists(), "missing {f}");
    }
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("simulated"));
    let again = d.path().join("again");
    ptb().arg("report").arg(dir.join("compare.json")).arg("--out").arg(&again).assert().success();
    assert!(again.join("index.html").exists());
}

#[test]
fn report_renders_the_fixture() {
    let d = tempfile::tempdir().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/compare-small.json");
    let out = ptb().args(["report", fixture, "--out"]).arg(d.path()).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("canneal") && text.contains("1.60x ±0.03"), "{text}");
    for f in ["index.html", "report.md", "speedup.png", "pages-canneal.png", "util-streamcluster-ptb.svg"] {
        assert!(d.path().join(f).exists(), "missing {f}");
    }
    let md = std::fs::read_to_string(d.path().join("report.md")).unwrap();
    assert!(md.contains("| canneal |"), "{md}");
}

#[test]
fn bad_inputs_are_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\"nothing\": 1}").unwrap();
    let e = ptb().arg("report").arg(&bad).assert().failure().get_output().stderr.clone();
    assert!(String::from_utf8(e).unwrap().contains("no `results`"));
    let e = ptb().args(["compare", "--suite", "/no/such/suite"]).assert().failure().get_output().stderr.clone();
    assert!(String::from_utf8(e).unwrap().contains("--suite"));
    let e = ptb().args(["compare", "--machine", "synthetic:nodes=2,cpus=2", "--workload", "nope"]).assert().failure();
    let e = String::from_utf8(e.get_output().stderr.clone()).unwrap();
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn report_summarises_a_recorded_trace() {
    use ptb_linux::trace::{TraceRecord, TraceThread, TraceWriter};
    use ptb_profile::{Sample, SampleKind};
    let m = ptb_topology::resolve("synthetic:nodes=2,cpus=2").unwrap();
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("t.jsonl");
    let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap());
    let header = TraceRecord::Header {
        version: ptb_linux::trace::TRACE_VERSION,
        pids: vec![42],
        page_size: 4096,
        source: "test".into(),
        period: 1,
        machine: Box::new(m),
    };
    w.write(&header).unwrap();
    let sample = |cpu: u32, vpn: u64, t: u64| Sample {
        app: 42,
        tid: 43,
        cpu: ptb_topology::CpuId(cpu),
        addr: vpn * 4096 + 8,
        kind: SampleKind::PageFault,
        time_ns: t,
        data_src: None,
        latency_ns: None,
        phys: None,
    };
    // Three samples from node 0 (CPU 0) to a page on node 1, one local on node 1 (CPU 2).
    for (i, (cpu, vpn)) in [(0, 7), (0, 7), (0, 7), (2, 7)].into_iter().enumerate() {
        w.write(&TraceRecord::Sample(sample(cpu, vpn, i as u64 * 1000))).unwrap();
    }
    w.write(&TraceRecord::Placement {
        time_ns: 5000,
        threads: vec![TraceThread { app: 42, tid: 43, cpu: 0, node: 0 }],
        pages: vec![(42, 7, 1)],
        regions: vec![],
        free_bytes: vec![],
    })
    .unwrap();
    w.write(&TraceRecord::End { time_ns: 6000, samples: 4, lost: 0 }).unwrap();
    w.flush().unwrap();
    let out_dir = d.path().join("rep");
    let out = ptb().arg("report").arg(&path).arg("--out").arg(&out_dir).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("MEASURED") && text.contains("25.0%"), "{text}");
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(html.contains("measured") && !html.contains("(simulated)"), "{html}");
    assert!(out_dir.join("access-pid-42-recorded.png").exists());
}

#[test]
fn compare_rejects_a_zero_oracle_delay_and_no_oracle_drops_both_columns() {
    let out = ptb().args(TINY).arg("--oracle-delay-ms=0").assert().failure().get_output().stderr.clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("--oracle-delay-ms"), "{err}");
    let out = ptb().args(TINY).args(["--no-oracle", "--json"]).assert().success().get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["policy"] != "oracle" && r["policy"] != "oracle-moved"));
}

/// Every output says whose sampler served the policies: a preset's own (it names one), each
/// policy's own where the machine file names none or `--samplers asked` is given; `ptb
/// topology` shows the preset's.
#[test]
fn compare_says_which_sampler_served_the_policies() {
    let line = |args: &[&str]| {
        let mut a = vec!["compare", "--workload", "ep", "--policy", "first-touch", "--no-oracle"];
        a.extend_from_slice(args);
        a.push("--duration-scale=0.02");
        let out = ptb().args(&a).assert().success().get_output().stdout.clone();
        String::from_utf8(out).unwrap()
    };
    let t = line(&["--machine", "opteron6272-4n"]);
    assert!(t.contains("samples: the machine's ibs-op (ops counted, no miss filter)"), "{t}");
    let t = line(&["--machine", "broadwell-cod-4n"]);
    assert!(t.contains("samples: the machine's pebs-loads"), "{t}");
    let t = line(&["--machine", "opteron6272-4n", "--samplers", "asked"]);
    assert!(t.contains("samples: each policy the sampler it asks for (--samplers asked)"), "{t}");
    let t = line(&["--machine", "synthetic:nodes=2,cpus=2"]);
    assert!(t.contains("the machine file names no sampler"), "{t}");
    let out = ptb().args(["topology", "--machine", "opteron6272-8n"]).assert().success().get_output().stdout.clone();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("address sampler: ibs-op (ops counted, no miss filter)"), "{t}");
}

//! `--plan-log` names kernel node ids: a dry run of `ptb` on `opteron6272-4n` (kernel nodes 0,
//! 2, 4 and 6) over the test program logs its plans with those ids, never the dense 0..3 that
//! the policy works with (the ranges' weighted interleaves named nodes 1 and 3 before).

use ptb_linux::daemon::{self, Act, Config, Target};
use ptb_linux::metrics::Stats;
use ptb_linux::procfs::ProcRoot;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn a_dry_runs_plan_log_names_kernel_nodes() {
    let root = ProcRoot::new("/");
    let m = ptb_topology::resolve("opteron6272-4n").unwrap();
    let kernel: Vec<u64> = m.nodes.iter().map(|n| u64::from(n.id.0)).collect();
    assert_eq!(kernel, [0, 2, 4, 6]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("plans.jsonl");
    let cfg = Config {
        cycle: None,
        period: None,
        budget_mbps: None,
        allowed: m.all_nodes(),
        source: "page-faults".into(),
        roi_wait: false,
        control: None,
        rule: None,
        stop: None,
        label: "ptb-test".into(),
        alloc_applied: true,
        max_time: Some(Duration::from_secs(10)),
        summary_lines: false,
        stats: Arc::new(Mutex::new(Stats::default())),
        plan_log: Some(log.clone()),
    };
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ptb-testapp"))
        .args(["--seconds", "2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the test program starts");
    let target = Target::launched(&root, child).map_err(|(_, e)| e).unwrap();
    let mut policy = ptb_policy::build("ptb".parse().unwrap(), &ptb_policy::Params::new()).unwrap();
    let allowed = m.all_nodes();
    let start = policy.start(&ptb_policy::StartContext { machine: &m, allowed: &allowed, threads: &[] });
    let act = Act::DryRun(ptb_linux::actuator::DryRunActuator::default());
    let out = match daemon::run(&root, &m, policy.as_mut(), Some(start), vec![target], act, &cfg) {
        Ok(out) => out,
        Err(e) if e.contains("perf") || e.contains("page-faults") => {
            eprintln!("skipped: no page-fault samples here: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    if out.stats.samples == 0 {
        eprintln!("skipped: no samples here (perf_event_paranoid?)");
        return;
    }
    let text = std::fs::read_to_string(&log).expect("the plan log was written");
    let mut nodes = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["dry_run"], true, "{line}");
        let plan = &v["plan"];
        for r in plan["ranges"].as_array().unwrap() {
            let op = r["op"].as_object().unwrap().values().next().unwrap();
            match op {
                serde_json::Value::Number(n) => nodes.push(n.as_u64().unwrap()),
                serde_json::Value::Array(xs) => {
                    for x in xs {
                        // interleave: [node, ...]; weighted: [[node, weight], ...]
                        nodes.push(x.as_u64().unwrap_or_else(|| x[0].as_u64().unwrap()));
                    }
                }
                other => panic!("unexpected range op {other}"),
            }
        }
        for p in plan["pages"].as_array().unwrap() {
            nodes.push(p["to"].as_u64().unwrap());
        }
        for t in plan["threads"].as_array().unwrap() {
            if let Some(n) = t["to"].get("node").or(t["to"].get("preferred")) {
                nodes.push(n.as_u64().unwrap());
            }
        }
        for p in v["would_move_pages"].as_array().unwrap() {
            nodes.push(p[2].as_u64().unwrap());
        }
    }
    assert!(!nodes.is_empty(), "ptb planned something for the test program: {text}");
    assert!(nodes.iter().all(|n| kernel.contains(n)), "a node that is no kernel id: {nodes:?}");
    assert!(nodes.iter().any(|n| *n > 3), "kernel ids beyond the dense 0..3: {nodes:?}");
}

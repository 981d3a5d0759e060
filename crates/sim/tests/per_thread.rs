//! Per-thread access entries (`threads` on an access entry) and per-thread work
//! (`thread_work` on a phase): what `ptb model` writes for programs whose threads differ.

use ptb_policy::ThreadTarget;
use ptb_sim::{SimOptions, Simulation, Workload};
use ptb_topology::CpuId;

const W: &str = r#"
name = "two-kinds"
threads = 2
[[object]]
name = "a"
size_mib = 8
init = "parallel"
[[phase]]
name = "p"
work_ginstr = 0.05
apki = 5
thread_work = [3, 1]
access = [
  { object = "a", pattern = "private", threads = "0" },
  { object = "a", pattern = "uniform", threads = "1" },
]
"#;

#[test]
fn entries_apply_to_their_threads_and_work_splits_the_accesses() {
    let w = Workload::parse(W, "w.toml").unwrap();
    let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=1").unwrap();
    let sim = Simulation::new(m, vec![w], SimOptions::default()).unwrap();
    let threads = [ThreadTarget::Cpu(CpuId(0)), ThreadTarget::Cpu(CpuId(1))];
    // First half of the object on node 0, second half on node 1.
    let groups = vec![vec![vec![1.0, 0.0], vec![0.0, 1.0]]];
    let r = sim.run_static_groups("t", &threads, &groups).unwrap();
    let s = &r.access_map.shares;
    // Thread 0 does 3/4 of the accesses, all to its own (first) half on node 0; thread 1 the
    // other quarter, spread evenly over both halves.
    assert!((s[0][0] - 0.75).abs() < 0.01, "{s:?}");
    assert!(s[0][1] < 1e-9, "{s:?}");
    assert!((s[1][0] - 0.125).abs() < 0.01 && (s[1][1] - 0.125).abs() < 0.01, "{s:?}");
}

#[test]
fn bad_per_thread_fields_are_refused_with_the_field() {
    for (from, to, field) in [
        ("thread_work = [3, 1]", "thread_work = []", "phase[0].thread_work"),
        ("thread_work = [3, 1]", "thread_work = [0, 0]", "phase[0].thread_work"),
        ("thread_work = [3, 1]", "thread_work = [-1, 1]", "phase[0].thread_work"),
        ("threads = \"0\" }", "threads = \"x\" }", "phase[0].access[0].threads"),
    ] {
        let e = Workload::parse(&W.replace(from, to), "w.toml").unwrap_err().to_string();
        assert!(e.contains(field), "{to}: {e}");
    }
}

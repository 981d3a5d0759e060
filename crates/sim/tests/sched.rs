//! The simulated Linux scheduler (crates/sim/src/sched.rs): where threads start, how unpinned
//! threads wander between nodes, and that pinned ones do not.

use ptb_policy::{Params, PolicyKind, PolicySpec, ThreadTarget};
use ptb_sim::{SimOptions, Simulation, StaticPlacement, Workload};
use ptb_topology::NodeIdx;

/// Every thread writes and then reads its own slice (NPB lu/ep-like parallel initialisation).
const PRIVATE: &str = r#"
name = "private"
threads = "per-cpu"
[[object]]
name = "grid"
size_mib = 64
init = "parallel"
[[phase]]
name = "sweep"
work_ginstr = 30
apki = 10
mlp = 4
access = [{ object = "grid", pattern = "private" }]
"#;

fn sim(opts: SimOptions) -> Simulation {
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=4,dies=1").unwrap();
    Simulation::new(m, vec![Workload::parse(PRIVATE, "private").unwrap()], opts).unwrap()
}

#[test]
fn unpinned_threads_lose_their_data_and_pinned_ones_keep_it() {
    let s = sim(SimOptions::default());
    let ft = s.first_touch().unwrap();
    assert!(ft.runtime_s > 10.0, "a run long enough to mix: {}", ft.runtime_s);
    // Under the default, threads wander: about a quarter of the accesses stay local.
    assert!(ft.local_fraction < 0.35, "first touch, unpinned: {}", ft.local_fraction);
    assert!(ft.sched_migrations > 100, "{}", ft.sched_migrations);
    // Pinned (thread i on CPU i): the first-touched slices stay local.
    let fixed = s.run_policy(PolicySpec::plain(PolicyKind::Fixed), &Params::new()).unwrap();
    assert!(fixed.local_fraction > 0.95, "fixed: {}", fixed.local_fraction);
    assert_eq!(fixed.sched_migrations, 0);
    // Without the scheduler model, unpinned threads keep their data too.
    let still = sim(SimOptions { linux_migrations_per_s: 0.0, ..Default::default() }).first_touch().unwrap();
    assert!(still.local_fraction > 0.95, "no migrations: {}", still.local_fraction);
}

#[test]
fn threads_pinned_to_a_node_stay_on_it() {
    let s = sim(SimOptions::default());
    let n = s.layout().threads.len();
    let pl = StaticPlacement {
        label: "node-pinned".into(),
        threads: (0..n).map(|i| ThreadTarget::Node(NodeIdx((i % 4) as u16))).collect(),
        objects: vec![],
    };
    let r = s.run_static(&pl).unwrap();
    assert_eq!(r.sched_migrations, 0);
    assert!(r.local_fraction > 0.95, "{}", r.local_fraction);
}

#[test]
fn fork_balancing_spreads_consecutive_threads_over_the_nodes() {
    // Four threads on an idle 4-node machine: one per node whatever node the first starts on.
    let text = PRIVATE.replace("threads = \"per-cpu\"", "threads = 4");
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=4,dies=1").unwrap();
    for seed in 1..6 {
        let s = Simulation::new(
            m.clone(),
            vec![Workload::parse(&text, "four").unwrap()],
            SimOptions { seed, linux_migrations_per_s: 0.0, ..Default::default() },
        )
        .unwrap();
        let r = s.first_touch().unwrap();
        // Each thread's slice was first-touched on its own node and nothing moved: every row of
        // the access map is one node's, so each node issues a quarter of the accesses.
        for row in &r.access_map.shares {
            let sum: f64 = row.iter().sum();
            assert!((sum - 0.25).abs() < 0.02, "seed {seed}: {:?}", r.access_map.shares);
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_wandering() {
    let a = sim(SimOptions::default()).first_touch().unwrap();
    let b = sim(SimOptions::default()).first_touch().unwrap();
    let c = sim(SimOptions { seed: 2, ..Default::default() }).first_touch().unwrap();
    assert_eq!(a.sched_migrations, b.sched_migrations);
    assert_eq!(a.runtime_s, b.runtime_s);
    assert_ne!(a.sched_migrations, c.sched_migrations);
}

#[test]
fn threads_pinned_to_a_node_share_its_cpus_evenly_when_they_outnumber_them() {
    // Two programs of one thread per CPU: 32 threads on 16 CPUs. Pinned to nodes in blocks (8
    // per 4-CPU node, pinned one by one from where fork balancing put them), the node's CPUs
    // must end up two threads each, as with thread k pinned to CPU k mod 16: a CPU left with
    // three would hold every barrier of its programs.
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=4,dies=1").unwrap();
    let w = || Workload::parse(PRIVATE, "private").unwrap();
    let s = Simulation::new(m, vec![w(), w()], SimOptions::default()).unwrap();
    let n = s.layout().threads.len();
    assert_eq!(n, 32);
    let run = |label: &str, threads: Vec<ThreadTarget>| {
        s.run_static(&StaticPlacement { label: label.into(), threads, objects: vec![] }).unwrap().runtime_s
    };
    let nodes = run("node-blocks", (0..n).map(|i| ThreadTarget::Node(NodeIdx(((i % 16) / 4) as u16))).collect());
    let cpus = run("cpu", (0..n).map(|i| ThreadTarget::Cpu(ptb_topology::CpuId((i % 16) as u32))).collect());
    assert!((nodes / cpus - 1.0).abs() < 0.02, "node pins {nodes} s, CPU pins {cpus} s");
}

#[test]
fn threads_with_a_preferred_node_are_brought_back_to_it() {
    // Every thread moved once to a node that becomes its preferred node, its affinity left
    // open: the wandering still picks them, but the balancer returns each to its node.
    let s = sim(SimOptions::default());
    let n = s.layout().threads.len();
    let pl = StaticPlacement {
        label: "preferred".into(),
        threads: (0..n).map(|i| ThreadTarget::Preferred(NodeIdx((i % 4) as u16))).collect(),
        objects: vec![],
    };
    let r = s.run_static(&pl).unwrap();
    assert!(r.local_fraction > 0.95, "preferred: {}", r.local_fraction);
    // The wandering still draws them, but nearly every draw ends with the wanderer back home.
    let ft = s.first_touch().unwrap();
    assert!(r.sched_migrations * 10 < ft.sched_migrations, "{} vs {}", r.sched_migrations, ft.sched_migrations);
}

#[test]
fn threads_pinned_to_a_node_they_do_not_fill_spread_over_its_dies() {
    // opteron6272-4n: node 2 (dense 1) has two dies, P2 (CPUs 16-23, its memory) and P3
    // (24-31, no memory of its own, slower to every node). Four threads pinned to the node
    // must run two on each die, as Linux's balancer spreads them, not all four on P2.
    let m = ptb_topology::presets::get("opteron6272-4n").unwrap();
    let opts = SimOptions { threads: Some(4), ..Default::default() };
    let s = Simulation::new(m, vec![Workload::parse(PRIVATE, "private").unwrap()], opts).unwrap();
    assert_eq!(s.layout().threads.len(), 4);
    let run = |label: &str, threads: Vec<ThreadTarget>| {
        s.run_static(&StaticPlacement { label: label.into(), threads, objects: vec![] }).unwrap().runtime_s
    };
    let cpus = |ids: [u32; 4]| ids.iter().map(|&c| ThreadTarget::Cpu(ptb_topology::CpuId(c))).collect();
    let node = run("node", vec![ThreadTarget::Node(NodeIdx(1)); 4]);
    let split = run("two-per-die", cpus([16, 17, 24, 25]));
    let lower = run("lower-die", cpus([16, 17, 18, 19]));
    assert!(lower < split * 0.98, "the dies differ: lower die {lower} s, split {split} s");
    assert!((node / split - 1.0).abs() < 0.01, "node pins {node} s, two per die {split} s");
}

//! A tiny characterisation of the machine the tests run on (checks the machinery; the figures
//! themselves are not meaningful at these sizes).

use ptb_characterize::{characterize, model, sys, CharError, Options};
use ptb_topology::{synthetic::synthetic, Machine};

/// This machine as one node whose CPUs are the ones this process may use (from CPU 0 on).
fn this_machine(extra: &str) -> Machine {
    let allowed = sys::allowed_cpus();
    let n = allowed.iter().enumerate().take_while(|(i, c)| *i as u32 == **c).count().clamp(1, 2);
    synthetic(&format!("nodes=1,cpus={n}{extra}")).unwrap()
}

#[test]
fn a_tiny_run_fills_every_matrix_with_spread_and_saves_a_loadable_machine() {
    let m = this_machine("");
    let mut steps = Vec::new();
    let c = characterize(&m, &Options::tiny(), &mut |s| steps.push((s.done, s.total, s.what.to_string()))).unwrap();
    for mx in [&c.uncontended, &c.contended, &c.latency] {
        assert!(mx.has_shape(1, 1));
        assert!(mx.get(0, 0) > 0.0, "{mx:?}");
        assert_eq!(mx.spread.as_ref().map(|s| s.len()), Some(1));
    }
    assert!(c.plateau_threads[0][0] >= 1 && c.plateau_threads[0][0] <= 2);
    assert!(!c.sweeps[0][0].is_empty());
    let s = c.sanity.as_ref().unwrap();
    assert!(s.copy_gbps > 0.0 && s.ratio > 0.0);
    assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0), "progress never goes back");
    assert!(steps.iter().any(|s| s.2.contains("latency")) && steps.last().unwrap().0 == steps.last().unwrap().1);

    let out = model::with_measurements(&m, &c, Some("m.toml"));
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.toml");
    ptb_topology::file::save(&out, &p).unwrap();
    let back = ptb_topology::file::load(&p).unwrap();
    let g = back.bandwidth.unwrap();
    assert_eq!(g.uncontended, c.uncontended);
    assert!(!back.source.is_live());
}

#[test]
fn binding_to_a_node_that_is_not_here_is_explained() {
    // A model with a memory-only node 1 that this single-node box does not have.
    let m = this_machine(",memonly=1");
    let e = characterize(&m, &Options::tiny(), &mut |_| {});
    if std::path::Path::new("/sys/devices/system/node/node1").exists() {
        return; // a multi-node machine: node 1 is real, nothing to check here
    }
    let e = e.unwrap_err();
    assert!(matches!(e, CharError::Bind { node: 1, .. }), "{e}");
    assert!(e.to_string().contains("no memory this process may use"), "{e}");
}

#[test]
fn two_groups_on_one_node_give_two_rows_and_share_the_contended_run() {
    if sys::allowed_cpus().iter().take(2).copied().collect::<Vec<_>>() != vec![0, 1] {
        return; // needs CPUs 0 and 1
    }
    // CPU 0 and CPU 1 as two CPU groups of node 0.
    let m = synthetic("nodes=1,cpus=2,dies=2").unwrap();
    let c = characterize(&m, &Options::tiny(), &mut |_| {}).unwrap();
    assert!(c.uncontended.has_shape(2, 1) && c.contended.has_shape(2, 1) && c.latency.has_shape(2, 1));
    for g in 0..2 {
        assert_eq!(c.plateau_threads[g][0], 1, "a one-CPU group sweeps one thread count");
        assert!(c.uncontended.get(g, 0) > 0.0 && c.contended.get(g, 0) > 0.0 && c.latency.get(g, 0) > 0.0);
    }
    assert!(c.min_cpu_share > 0.0 && c.min_cpu_share <= 1.05);
}

#[test]
fn grouping_by_node_merges_dies() {
    let m = synthetic("nodes=2,cpus=4,dies=2").unwrap();
    let by = model::group_by_node(&m);
    assert_eq!(by.groups.len(), 2);
    assert_eq!(by.groups[1].cpus.len(), 4);
    ptb_topology::validate::validate(&by, "test").unwrap();
}

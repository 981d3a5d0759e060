//! The oracle on a small simulated case: it is never slower than any static baseline it tried,
//! nor than first-touch and interleave run as policies.

use ptb_policy::{Params, PolicyKind, PolicySpec};
use ptb_sim::{SimOptions, Simulation};

fn sim(workload: &str) -> Simulation {
    sim_of(ptb_sim::resolve_mix(workload).unwrap())
}

fn sim_of(w: Vec<ptb_sim::Workload>) -> Simulation {
    let m = ptb_topology::resolve("synthetic:nodes=2,cpus=2").unwrap();
    Simulation::new(m, w, SimOptions { duration_scale: 0.25, ..SimOptions::default() }).unwrap()
}

/// A private matrix and a vector every thread reads from memory.
const GATHER: &str = r#"
name = "gather"
threads = "per-cpu"
[[object]]
name = "matrix"
size_mib = 64
[[object]]
name = "x"
size_mib = 8
[[phase]]
name = "spmv"
work_ginstr = 0.05
apki = 35
access = [
  { object = "matrix", pattern = "private", weight = 0.7 },
  { object = "x", pattern = "uniform", weight = 0.3 },
]
"#;

#[test]
fn oracle_beats_every_static_baseline_it_tried() {
    for w in ["canneal", "cg"] {
        let s = sim(w);
        let o = ptb_oracle::search(&s, &ptb_oracle::OracleOptions::default()).unwrap();
        assert_eq!(o.best.policy, "oracle");
        let tried: Vec<_> = o.candidates.iter().filter(|c| c.failed.is_none()).collect();
        assert!(tried.len() >= 4, "{w}: {:?}", o.candidates);
        for c in tried {
            assert!(o.best.runtime_s <= c.runtime_s, "{w}: {} beat the oracle", c.label);
        }
        let ft = s.first_touch().unwrap();
        assert!(o.best.runtime_s <= ft.runtime_s);
        let il = s.run_policy(PolicySpec::plain(PolicyKind::Interleave), &Params::new()).unwrap();
        assert!(
            o.best.runtime_s <= il.runtime_s * (1.0 + 1e-6),
            "{w}: interleave {} < oracle {}",
            il.runtime_s,
            o.best.runtime_s
        );
        assert!(o.best.speedup_vs_first_touch.unwrap() >= 1.0);
        // Runs handed in that moved nothing are static placements and are considered.
        let wi = s.run_policy(PolicySpec::plain(PolicyKind::WeightedInterleave), &Params::new()).unwrap();
        let o2 = ptb_oracle::search_with(&s, &ptb_oracle::OracleOptions::default(), &[wi.clone(), il]).unwrap();
        assert!(o2.best.runtime_s <= wi.runtime_s && o2.best.runtime_s <= o.best.runtime_s);
        assert!(o2.candidates.iter().any(|c| c.label == "policy:weighted-interleave"));
    }
}

#[test]
fn demand_covers_every_access_and_coarsens_uniform_objects() {
    let s = sim("canneal");
    let d = ptb_oracle::demand::Demand::of(s.layout());
    // canneal: one uniform object -> every fine group merges into one coarse group.
    let (coarse, n) = d.coarsen();
    assert_eq!(n, 1, "{coarse:?}");
    // Accesses per thread = instructions x accesses per instruction.
    let l = s.layout();
    let ph = &l.apps[0].phases[0];
    let reps = l.apps[0].sequence.len() as f64;
    for th in &d.phases[0].threads {
        let total: f64 = th.access.iter().map(|a| a.1 + a.2).sum();
        let want = ph.work_instr * reps * ph.m;
        assert!((total - want).abs() <= 1e-6 * want, "{total} vs {want}");
    }
}

#[test]
fn private_slices_stay_apart_and_uniform_objects_merge() {
    // A private matrix (one group per thread) and a uniform vector (one group).
    let s = sim_of(vec![ptb_sim::Workload::parse(GATHER, "gather.toml").unwrap()]);
    let d = ptb_oracle::demand::Demand::of(s.layout());
    let threads = s.layout().threads.len();
    let (coarse, n) = d.coarsen();
    assert_eq!(n, threads + 1, "{coarse:?}");
    // Each private slice is read by exactly one thread.
    for o in 0..d.per_object.len() {
        for k in 0..d.per_object[o] {
            let g = d.first[o] + k;
            let readers: std::collections::BTreeSet<usize> = d
                .phases
                .iter()
                .flat_map(|p| p.threads.iter())
                .filter(|t| t.access.iter().any(|a| a.0 == g && a.1 + a.2 > 0.0))
                .map(|t| t.thread)
                .collect();
            assert!(!readers.is_empty());
            if d.per_object[o] > 1 && s.layout().objects[o].name == "matrix" {
                assert_eq!(readers.len(), 1, "group {g}: {readers:?}");
            }
        }
    }
}

#[test]
fn oracle_moved_pays_for_its_moves_and_sits_between_the_oracle_and_first_touch() {
    use std::time::Duration;
    for w in ["canneal", "cg"] {
        let s = sim(w);
        let o = ptb_oracle::search(&s, &ptb_oracle::OracleOptions::default()).unwrap();
        assert!(o.placements.windows(2).all(|p| p[0].runtime_s <= p[1].runtime_s), "{w}: not fastest first");
        let ft = s.first_touch().unwrap();
        let m = ptb_oracle::moved::reach(&s, &o, Duration::from_millis(25), 3).unwrap();
        assert_eq!(m.best.policy, "oracle-moved");
        // Master-initialised data: the oracle gains, so reaching its placement moves pages and
        // costs something the oracle does not pay.
        assert!(o.best.speedup_vs_first_touch.unwrap() > 1.1, "{w}: {:?}", o.best.speedup_vs_first_touch);
        assert_ne!(m.winner, "first-touch", "{w}");
        assert!(m.best.pages_migrated > 0 && m.best.page_migration_s > 0.0, "{w}");
        assert!(m.best.runtime_s > o.best.runtime_s, "{w}: {} <= {}", m.best.runtime_s, o.best.runtime_s);
        assert!(m.best.runtime_s < ft.runtime_s, "{w}");
        // Moving later leaves the program longer on first touch.
        let late = ptb_oracle::moved::reach(&s, &o, Duration::from_millis(200), 3).unwrap();
        assert!(late.best.runtime_s > m.best.runtime_s, "{w}: {} <= {}", late.best.runtime_s, m.best.runtime_s);
    }
}

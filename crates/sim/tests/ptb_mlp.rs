//! ptb estimates how many accesses a program's threads overlap from its samples alone
//! (`ptb::mlp`): the estimate follows the workload model's `mlp`, which ptb never reads.

use ptb_policy::{Params, PolicyKind, PolicySpec};
use ptb_sim::{SimOptions, Simulation};

/// ptb's mean estimate of the program's overlap over a short run of `workload` with 16
/// threads on the 8-node Opteron (packed on two nodes: their latencies differ).
fn mean_estimate(workload: &str) -> f64 {
    let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
    let w = ptb_sim::suite::get(workload).unwrap().unwrap();
    let opts = SimOptions { threads: Some(16), duration_scale: 0.2, ..SimOptions::default() };
    let r = Simulation::new(m, vec![w], opts)
        .unwrap()
        .run_policy(PolicySpec::plain(PolicyKind::Ptb), &Params::new())
        .unwrap();
    let sum = r.policy_stats.get("mlp_app0").copied().unwrap_or(f64::NAN);
    sum / r.cycles as f64
}

#[test]
fn a_pointer_chasing_program_is_seen_to_overlap_little_and_no_estimate_exceeds_the_parameter() {
    // canneal's model overlaps 1.5 accesses; the parameter (the prior) is 6, which the first
    // cycles use (in the mean), before the samples of two nodes say more.
    let canneal = mean_estimate("canneal");
    assert!(canneal < 4.5, "canneal: {canneal}");
    // sp's model overlaps 5: its estimate stays at or under the prior.
    let sp = mean_estimate("sp");
    assert!(sp > canneal + 1.0 && sp <= 6.0 + 1e-9, "sp: {sp}, canneal: {canneal}");
}

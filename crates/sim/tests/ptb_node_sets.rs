//! With fewer threads than CPUs ptb runs a program on the node set its own model rates fastest:
//! on the 8-node Opteron the set with the most Bandwidth Graph inside (nodes 0, 1, 6, 7, joined
//! by 16-bit links) is not the fastest for a program whose threads read data on every node,
//! because the all-to-all routes of its pairs share links; the model's routes see that.

use ptb_policy::{Params, PolicyKind, PolicySpec};
use ptb_sim::{SimOptions, Simulation};

/// The nodes whose CPUs issued at least a tenth of the accesses of a short run of
/// `workload` under ptb with 16 threads on the 8-node Opteron.
fn busy_nodes(workload: &str) -> Vec<usize> {
    let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
    let w = ptb_sim::suite::get(workload).unwrap().unwrap();
    let opts = SimOptions { threads: Some(16), duration_scale: 0.2, ..SimOptions::default() };
    let r = Simulation::new(m, vec![w], opts)
        .unwrap()
        .run_policy(PolicySpec::plain(PolicyKind::Ptb), &Params::new())
        .unwrap();
    let rows: Vec<f64> = r.access_map.shares.iter().map(|row| row.iter().sum()).collect();
    let total: f64 = rows.iter().sum();
    (0..rows.len()).filter(|&i| rows[i] >= 0.1 * total).collect()
}

#[test]
fn sixteen_streamcluster_threads_run_on_the_four_nodes_the_model_rates_fastest() {
    // `ptb subsets -w streamcluster --threads 16 --size 4` (pages interleaved over each set):
    // 2,3,4,5 first (2.700 s), 0,2,4,6 second (2.705 s), 0,1,6,7 twelfth of 70 (2.828 s) with
    // the most Bandwidth Graph inside (64.5 GB/s against 57.0).
    assert_eq!(busy_nodes("streamcluster"), vec![2, 3, 4, 5]);
}

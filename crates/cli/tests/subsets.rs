//! End-to-end tests of `ptb subsets` (the node-subset sweep, simulated).

use assert_cmd::Command;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

const QUICK: [&str; 6] =
    ["--machine", "synthetic:nodes=4,cpus=2", "--workload", "streamcluster", "--duration-scale", "0.02"];

#[test]
fn json_lists_every_subset_fastest_first_with_the_spreads() {
    let out = ptb().arg("subsets").args(QUICK).args(["--size", "2", "--jobs", "2", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simulated"], true);
    assert_eq!(v["size"], 2);
    assert_eq!(v["threads"], 4, "default: the CPUs of 2 nodes");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "C(4,2) subsets");
    let times: Vec<f64> = runs.iter().map(|r| r["runtime_s"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "fastest first: {times:?}");
    assert!(times.iter().all(|t| *t > 0.0));
    let mut sets: Vec<Vec<u64>> =
        runs.iter().map(|r| r["nodes"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect()).collect();
    sets.sort();
    sets.dedup();
    assert_eq!(sets.len(), 6, "every subset once");
    let (best, mean, worst) =
        (v["best_s"].as_f64().unwrap(), v["mean_s"].as_f64().unwrap(), v["worst_s"].as_f64().unwrap());
    assert_eq!(best, times[0]);
    assert_eq!(worst, times[5]);
    // The mean of equal runtimes may differ from them in the last bits.
    let eps = 1e-9 * worst;
    assert!(best <= mean + eps && mean <= worst + eps, "{best} {mean} {worst}");
    assert!((v["best_vs_worst"].as_f64().unwrap() - (worst / best - 1.0)).abs() < 1e-9);
}

#[test]
fn table_says_simulated_and_bad_sizes_are_refused() {
    let out = ptb().arg("subsets").args(QUICK).args(["--size", "3", "--threads", "3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SIMULATED") && text.contains("SHORTENED"), "{text}");
    assert!(text.contains("4 subsets"), "{text}");
    assert!(text.contains("best ") && text.contains("worst/best"), "{text}");
    let out = ptb().arg("subsets").args(QUICK).args(["--size", "5"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--size 5"));
}

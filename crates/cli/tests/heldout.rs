//! The held-out workload models (`workloads/heldout/`) stay valid and runnable.
//!
//! Problem: the held-out set checks policies on programs they were not tuned on; a model
//! that stops parsing, or a suite file that forgets one, would silently shrink that check.
//! Approach: run `ptb compare --suite workloads/heldout/suite` briefly (from this crate's
//! folder, so the suite's paths must resolve relative to the suite file) and check every
//! model in the folder is in the suite and has a run under each policy.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn heldout_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../workloads/heldout")
}

/// The `name` of every held-out TOML model in the folder.
fn model_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for e in std::fs::read_dir(heldout_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let v: toml::Value = toml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let name = v["name"].as_str().unwrap().to_string();
            for key in ["description", "source"] {
                let text = v.get(key).and_then(|d| d.as_str()).unwrap_or("");
                assert!(!text.is_empty(), "{}: no `{key}`", p.display());
            }
            names.insert(name);
        }
    }
    names
}

#[test]
fn the_heldout_suite_lists_every_model_and_each_runs_under_every_policy() {
    let names = model_names();
    assert!(names.len() >= 8, "expected at least 8 held-out models, found {names:?}");
    let suite = heldout_dir().join("suite");
    let out = Command::cargo_bin("ptb")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["compare", "--suite"])
        .arg(&suite)
        .args(["--duration-scale", "0.02", "-p", "first-touch,ptb", "--no-oracle", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["simulated"], true);
    let results = v["results"].as_array().unwrap();
    for name in &names {
        for policy in ["first-touch", "ptb"] {
            let r = results
                .iter()
                .find(|r| r["workload"] == name.as_str() && r["policy"] == policy)
                .unwrap_or_else(|| panic!("no {policy} run of {name} in the held-out suite's results"));
            let t = r["runtime_s"].as_f64().unwrap();
            assert!(t.is_finite() && t > 0.0, "{name} under {policy}: runtime {t}");
        }
    }
}

#[test]
fn the_heldout_suite_runs_as_a_table_from_the_repository_root() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::cargo_bin("ptb")
        .unwrap()
        .current_dir(&root)
        .args(["compare", "--suite", "workloads/heldout/suite", "--duration-scale", "0.02"])
        .args(["-p", "first-touch", "--no-oracle"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    for name in model_names() {
        assert!(text.contains(&name), "{name} missing from the table: {text}");
    }
}

//! `ptb calibrate` end to end on shortened runs: every item judged, the world said, known
//! deviations marked with their cause.

use assert_cmd::Command;
use serde_json::Value;

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

#[test]
fn calibrate_judges_every_published_item_in_json() {
    let out =
        ptb().args(["calibrate", "--duration-scale", "0.02", "--json"]).assert().success().get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["simulated"], true);
    assert_eq!(v["world"]["duration_scale"], 0.02);
    let items = v["items"].as_array().unwrap();
    assert!(items.len() >= 40, "{} items", items.len());
    for i in items {
        assert!(i["id"].is_string() && i["published"].is_string() && i["simulated"].is_number(), "{i}");
        assert!(i["verdict"].is_object(), "{i}");
    }
    let right = v["directions_right"].as_u64().unwrap();
    assert!(right <= v["directions"].as_u64().unwrap());
    let md = ptb()
        .args(["calibrate", "--duration-scale", "0.02", "--markdown"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let md = String::from_utf8(md).unwrap();
    assert!(md.starts_with("| study | item | machine | published | simulated | verdict |"), "{md}");
    assert_eq!(md.lines().filter(|l| l.starts_with("| ")).count(), items.len() + 1);
}

#[test]
fn calibrate_refuses_zero_jobs() {
    let out = ptb().args(["calibrate", "-j", "0"]).assert().failure().get_output().stderr.clone();
    assert!(String::from_utf8_lossy(&out).contains("--jobs"));
}

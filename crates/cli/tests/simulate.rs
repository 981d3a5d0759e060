//! End-to-end tests of `ptb simulate` and `ptb workloads`.

use assert_cmd::Command;

const MACHINE: &str = "synthetic:nodes=4,cpus=4,dies=2";

fn ptb() -> Command {
    Command::cargo_bin("ptb").unwrap()
}

#[test]
fn workloads_lists_the_suite() {
    let out = ptb().args(["workloads", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    for n in ["canneal", "cg", "ep", "graph500", "swaptions", "specjbb", "ft", "is"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let out = ptb().args(["workloads", "--show", "canneal"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("[[phase]]"));
}

#[test]
fn simulate_json_reports_a_speedup_over_first_touch() {
    let out = ptb()
        .args(["simulate", "--machine", MACHINE, "--workload", "canneal", "--policy", "interleave", "--json"])
        .args(["--duration-scale", "0.2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simulated"], true);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "first-touch reference + interleave");
    assert_eq!(results[0]["policy"], "first-touch");
    let r = &results[1];
    assert_eq!(r["policy"], "interleave");
    for key in [
        "workload",
        "runtime_s",
        "speedup_vs_first_touch",
        "local_fraction",
        "access_map",
        "pages_migrated",
        "threads_migrated",
        "migration_s",
        "decision_ms",
    ] {
        assert!(!r[key].is_null(), "{key} missing");
    }
    // canneal: one thread initialises everything, all threads access it uniformly, so first
    // touch piles every access onto one controller and interleaving must be faster.
    assert!(r["speedup_vs_first_touch"].as_f64().unwrap() > 1.0);
}

#[test]
fn simulate_table_says_simulated_and_honours_nodes() {
    let out = ptb()
        .args([
            "simulate",
            "--machine",
            MACHINE,
            "--workload",
            "ep+cg",
            "--nodes",
            "1,2",
            "--duration-scale",
            "0.1",
            "--map",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SIMULATED") && text.contains("ep+cg"), "{text}");
    assert!(text.contains("controller share"), "{text}");
}

#[test]
fn bad_workload_files_are_refused_with_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        "name = \"bad\"\n[[object]]\nname = \"a\"\nsize_mib = 0\n[[phase]]\nname = \"p\"\nwork_ginstr = 1\napki = 1\naccess = [{ object = \"a\", pattern = \"uniform\" }]\n",
    )
    .unwrap();
    let out = ptb().args(["simulate", "--machine", MACHINE, "--workload"]).arg(&p).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("size_mib"), "{err}");
    let out = ptb().args(["simulate", "--machine", MACHINE, "--workload", "nosuchthing"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("ptb workloads"));
}

#[test]
fn simulate_moves_whole_huge_pages_of_a_huge_pages_object() {
    // Each thread works on its own slice of data thread 0 first-touched: ptb wants to move most
    // of it. With `huge_pages = true` every move is a whole 2 MiB huge page (512 base pages).
    let dir = tempfile::tempdir().unwrap();
    let mut migrated = Vec::new();
    for huge in [false, true] {
        let p = dir.path().join(format!("private-{huge}.toml"));
        std::fs::write(
            &p,
            format!(
                "name = \"private\"\nthreads = 8\n[[object]]\nname = \"data\"\nsize_mib = 64\ninit = \"thread:0\"\n\
                 huge_pages = {huge}\n[[phase]]\nname = \"work\"\nwork_ginstr = 0.4\napki = 25\nmlp = 4\n\
                 access = [{{ object = \"data\", pattern = \"private\" }}]\n"
            ),
        )
        .unwrap();
        let out = ptb()
            .args([
                "simulate",
                "--machine",
                "synthetic:nodes=4,cpus=2,dies=1",
                "--policy",
                "ptb",
                "--json",
                "--workload",
            ])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &v["results"][1];
        assert_eq!(r["policy"], "ptb");
        let planned = r["policy_stats"]["huge_pages_planned"].as_f64();
        assert_eq!(planned.is_some(), huge, "huge_pages_planned with huge_pages = {huge}: {planned:?}");
        migrated.push(r["pages_migrated"].as_u64().unwrap());
    }
    assert!(migrated[0] > 0, "ptb moves nothing on base pages: the test shows nothing");
    assert!(migrated[1] > 0 && migrated[1] % 512 == 0, "huge pages: {} base pages migrated", migrated[1]);
}

#[test]
fn perturb_known_needs_a_perturbed_world_and_is_stated_in_every_output() {
    let base = ["simulate", "--machine", "opteron6272-8n", "--workload", "ep", "--policy", "interleave"];
    let out = ptb().args(base).args(["--duration-scale", "0.05", "--perturb-known", "links"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--perturb"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ptb()
        .args(base)
        .args(["--duration-scale", "0.05", "--perturb", "2", "--perturb-known", "links,latency", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["world"]["perturb"], 2);
    assert_eq!(v["world"]["perturb_known"], serde_json::json!(["links", "latency"]));
    let out = ptb()
        .args(base)
        .args(["--duration-scale", "0.05", "--perturb", "2", "--perturb-known", "links"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("states its links rightly"));
    let out = ptb().args(base).args(["--perturb", "2", "--perturb-known", "bandwidth"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("give links or latency"));
}

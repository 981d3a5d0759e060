//! Golden tests: sysfs fixtures under `tests/fixtures/` are read with
//! `sysfs::read_machine` and the `ptb topology` text and JSON are compared with the files in
//! `tests/golden/`. Broken fixtures must fail with the error in `tests/golden/<name>.err`.
//!
//! After an intended change of the output, regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p ptb-topology --test golden` and review the diff.

use ptb_topology::render::{render_text, to_json};
use ptb_topology::sysfs::read_machine;
use std::path::Path;

/// Compare `actual` with the golden file `name`, or rewrite it under UPDATE_GOLDEN=1.
/// JSON files are compared as values, so key order (a serde_json feature) does not matter.
fn check(name: &str, actual: &str) {
    let path = Path::new("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all("tests/golden").unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (create it with UPDATE_GOLDEN=1)", path.display()));
    let same = if name.ends_with(".json") {
        serde_json::from_str::<serde_json::Value>(&want).ok() == serde_json::from_str(actual).ok()
    } else {
        want == actual
    };
    assert!(
        same,
        "{} differs from the output (UPDATE_GOLDEN=1 rewrites it):\n--- want\n{want}\n--- got\n{actual}",
        path.display()
    );
}

/// Fixture roots are passed relative to the crate so the recorded `source.root` is stable.
fn good(fixture: &str) -> ptb_topology::Machine {
    let root = format!("tests/fixtures/{fixture}");
    let m = read_machine(Path::new(&root)).unwrap_or_else(|e| panic!("{fixture}: {e}"));
    check(&format!("{fixture}.txt"), &render_text(&m));
    check(&format!("{fixture}.json"), &(serde_json::to_string_pretty(&to_json(&m)).unwrap() + "\n"));
    m
}

fn broken(fixture: &str, must_name: &str) {
    let root = format!("tests/fixtures/{fixture}");
    let e = read_machine(Path::new(&root)).expect_err(fixture).to_string();
    assert!(e.contains(must_name), "{fixture}: error does not name `{must_name}`: {e}");
    check(&format!("{fixture}.err"), &(e + "\n"));
}

#[test]
fn this_machine_capture_is_one_node_with_two_cpus() {
    let m = good("this-1node");
    assert_eq!((m.n_nodes(), m.n_cpus(), m.groups.len()), (1, 2, 1));
    assert_eq!(m.nodes[0].cpus.to_list(), "0-1");
    assert!(!m.source.is_live(), "a fixture must never count as this machine");
}

#[test]
fn qemu_four_nodes_with_a_gap_and_a_memory_only_node() {
    let m = good("qemu-4node-memonly");
    assert_eq!((m.n_nodes(), m.n_cpus(), m.groups.len()), (4, 24, 6));
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.id.0).collect();
    assert_eq!(ids, [0, 1, 2, 4]);
    assert!(!m.nodes[3].has_cpus() && m.nodes[3].memory_bytes == 8 << 30);
    assert_eq!(m.nodes[0].cpus.to_list(), "0-3,12-15");
    let g0: Vec<String> = m.nodes[0].groups.iter().map(|g| m.group(*g).cpus.to_list()).collect();
    assert_eq!(g0, ["0-3", "12-15"]);
    assert_eq!(m.distances.as_ref().unwrap().rows[0], [10.0, 20.0, 20.0, 30.0]);
}

#[test]
fn kernel_without_numa_is_one_node() {
    let m = good("nonuma");
    assert_eq!((m.n_nodes(), m.n_cpus(), m.groups.len()), (1, 4, 1));
    assert_eq!(m.nodes[0].memory_bytes, 8 << 30);
}

#[test]
fn broken_trees_are_refused_with_the_path() {
    broken("broken-cpulist", "node1/cpulist");
    broken("broken-distance-row", "node1/distance");
    broken("broken-distance-value", "node1/distance");
    broken("broken-meminfo", "node0/meminfo");
    broken("broken-cpu-in-two-nodes", "node1/cpulist");
    broken("broken-unreadable", "node1/cpulist");
}

//! MLC import round trips: fixture text -> machine file -> load -> the same numbers.

use ptb_characterize::import::{fits, import, placeholder};
use ptb_characterize::mlc::{self, MlcKind, MlcMatrix};
use ptb_topology::{file, NodeId};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn broadwell_matrices_round_trip_through_a_machine_file() {
    let bw = mlc::parse_one(&fixture("broadwell-4node-bandwidth.txt"), MlcKind::Bandwidth).unwrap();
    let lat = mlc::parse_one(&fixture("broadwell-4node-latency.txt"), MlcKind::Latency).unwrap();
    assert_eq!((bw.rows.len(), bw.cols.len()), (4, 4));
    let base = placeholder(&bw, "broadwell", 4).unwrap();
    assert!(fits(&base, &bw));
    let m = import(&base, &bw, Some((&lat, "lat fixture")), "broadwell fixture").unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broadwell.toml");
    file::save(&m, &path).unwrap();
    let back = file::load(&path).unwrap();
    let g = back.bandwidth.as_ref().unwrap();
    assert_eq!(g.uncontended.unit, "GB/s");
    assert!((g.uncontended.get(1, 0) - 20.194).abs() < 1e-9, "node 1 -> node 0 keeps its asymmetry");
    assert!((g.uncontended.get(0, 1) - 18.910).abs() < 1e-9);
    assert_eq!(g.latency.as_ref().unwrap().get(2, 3), 150.9);
    assert!(g.contended.is_none());

    // Write the loaded graph back out the way MLC prints it and read it again: same numbers.
    let again = MlcMatrix {
        kind: MlcKind::Bandwidth,
        line: 4,
        rows: back.groups.iter().map(|gr| back.nodes[gr.node.ix()].id.0).collect(),
        cols: back.nodes.iter().map(|n| n.id.0).collect(),
        values: g
            .uncontended
            .rows
            .iter()
            .map(|r| r.iter().map(|v| Some((v * 1e3 * 10.0).round() / 10.0)).collect())
            .collect(),
        sequential: false,
    };
    let reparsed = mlc::parse_one(&mlc::format(&again), MlcKind::Bandwidth).unwrap();
    assert_eq!(reparsed.values, bw.values);
}

#[test]
fn a_cxl_node_without_cpus_becomes_a_memory_only_column() {
    let text = fixture("cxl-default-run.txt");
    let bw = mlc::parse_one(&text, MlcKind::Bandwidth).unwrap();
    let lat = mlc::parse_one(&text, MlcKind::Latency).unwrap();
    let base = placeholder(&bw, "cxl", 8).unwrap();
    let m = import(&base, &bw, Some((&lat, "cxl fixture")), "cxl fixture").unwrap();
    let cxl = m.node_idx(NodeId(1)).unwrap();
    assert!(!m.node(cxl).has_cpus() && m.node(cxl).has_memory());
    assert_eq!(m.groups.len(), 1);
    assert!((m.bg(m.groups[0].idx, cxl).unwrap() - 4.8).abs() < 1e-9);
    assert_eq!(m.latency_ns(m.groups[0].idx, cxl), Some(564.5));
}

#[test]
fn matrices_that_do_not_fit_the_machine_are_refused() {
    let bw = mlc::parse_one(&fixture("broadwell-4node-bandwidth.txt"), MlcKind::Bandwidth).unwrap();
    let small = mlc::parse_one("bandwidth\nNuma node 0 1\n0 1 2\n1 3 4\n", MlcKind::Bandwidth).unwrap();
    let base = placeholder(&small, "two", 2).unwrap();
    assert!(!fits(&base, &bw));
    let e = import(&base, &bw, None, "x").unwrap_err().to_string();
    assert!(e.contains("node 2") && e.contains("does not have"), "{e}");
    let lat = mlc::parse_one("latency\nNuma node 0 1\n0 1 2\n", MlcKind::Latency).unwrap();
    let e = import(&base, &small, Some((&lat, "y")), "x").unwrap_err().to_string();
    assert!(e.contains("no row for node 1"), "{e}");
}

/// `--cpus-per-node` 0 silently became 1, 300000 wrote a machine file ptb then refused, and
/// 4294967296 aborted allocating 16 GiB: each is refused with what to give instead.
#[test]
fn placeholder_cpu_counts_are_bounded() {
    let bw = mlc::parse_one(&fixture("broadwell-4node-bandwidth.txt"), MlcKind::Bandwidth).unwrap();
    for bad in [0usize, 300_000, 4_294_967_296] {
        let e = placeholder(&bw, "b", bad).unwrap_err().to_string();
        assert!(e.contains("--cpus-per-node"), "{bad}: {e}");
    }
    let m = placeholder(&bw, "b", 4096).unwrap();
    ptb_topology::validate::validate(&m, "b").unwrap();
}

/// The MLC and machine errors were printed twice (the message and its `source` again).
#[test]
fn an_mlc_error_is_said_once() {
    let e = mlc::parse("garbage\n", Some(MlcKind::Bandwidth)).unwrap_err();
    let c = ptb_characterize::CharError::Mlc { path: "x.txt".into(), error: e };
    assert!(std::error::Error::source(&c).is_none());
    let text = c.to_string();
    assert_eq!(text.matches("no `Numa node`").count(), 1, "{text}");
}

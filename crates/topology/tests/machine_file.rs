//! Machine files: every kind of inconsistency is refused with the file, the field and the
//! reason; random and mutated files never panic the loader.

use proptest::prelude::*;
use ptb_topology::file::parse;
use serde_json::{json, Value};
use std::path::Path;

fn base() -> Value {
    let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=4,dies=2,memonly=1").unwrap();
    serde_json::to_value(&m).unwrap()
}

fn load_json(v: &Value) -> Result<ptb_topology::Machine, String> {
    parse(&v.to_string(), true, Path::new("bad-machine.json")).map_err(|e| e.to_string())
}

/// Apply `edit` to a good machine and check that loading fails naming the file and `field`.
fn refused(field: &str, edit: impl FnOnce(&mut Value)) {
    let mut v = base();
    edit(&mut v);
    let e = load_json(&v).expect_err(field);
    assert!(e.contains("bad-machine.json"), "error does not name the file: {e}");
    assert!(e.contains(field), "error does not name `{field}`: {e}");
}

#[test]
fn the_base_machine_loads() {
    load_json(&base()).unwrap();
}

#[test]
fn inconsistent_files_name_the_field() {
    refused("links[0].b", |v| v["links"][0]["b"] = json!({"group": 9}));
    refused("links[1].b", |v| v["links"][1]["b"] = json!({"memory": 7}));
    refused("links[0].gbps_ab", |v| v["links"][0]["gbps_ab"] = json!(-3.0));
    refused("nodes[1].cpus", |v| v["nodes"][1]["cpus"] = json!("0,4-7"));
    refused("nodes[0].idx", |v| v["nodes"][0]["idx"] = json!(1));
    refused("nodes[1].id", |v| v["nodes"][1]["id"] = json!(0));
    refused("nodes[0].groups", |v| v["nodes"][0]["groups"] = json!([2, 1]));
    refused("groups[0].node", |v| v["groups"][0]["node"] = json!(9));
    refused("groups[1].cpus", |v| v["groups"][1]["cpus"] = json!("1-3"));
    refused("distances.rows", |v| {
        v["distances"]["rows"][1].as_array_mut().unwrap().pop();
    });
    refused("distances.rows", |v| {
        v["distances"]["rows"].as_array_mut().unwrap().pop();
    });
    refused("distances[0][1]", |v| v["distances"]["rows"][0][1] = json!(-20));
    refused("bandwidth.uncontended.rows", |v| {
        v["bandwidth"]["uncontended"]["rows"].as_array_mut().unwrap().pop();
    });
    refused("bandwidth.contended[2][1]", |v| v["bandwidth"]["contended"]["rows"][2][1] = json!(-1));
    refused("routes[1].hops[0].link", |v| v["routes"][1]["hops"] = json!([{"link": 99, "forward": true}]));
    refused("routes[0].node", |v| v["routes"][0]["node"] = json!(7));
    refused("routes[1]", |v| {
        let f = v["routes"][1]["hops"][0]["forward"].as_bool().unwrap();
        v["routes"][1]["hops"][0]["forward"] = json!(!f);
    });
    refused("routes[1]", |v| v["routes"][1]["hops"] = json!([]));
    refused("routes[1]", |v| v["routes"][1]["node"] = json!(0));
    refused("page_size", |v| v["page_size"] = json!(1000));
    refused("controller_gbps", |v| v["controller_gbps"] = json!([1.0]));
    refused("nodes[0].colour", |v| v["nodes"][0]["colour"] = json!("red"));
    refused("memory_bytes", |v| {
        v["nodes"][0].as_object_mut().unwrap().remove("memory_bytes");
    });
    refused("line", |v| v["nodes"][0]["memory_bytes"] = json!("lots"));
    refused("field `nodes[0].memory_bytes`", |v| v["nodes"][0]["memory_bytes"] = json!(-1));
}

#[test]
fn toml_errors_carry_the_line() {
    let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=4").unwrap();
    let text = ptb_topology::file::to_toml(&m).unwrap().replacen("memory_bytes = ", "memory_bytes = -", 1);
    let e = parse(&text, false, Path::new("m.toml")).unwrap_err().to_string();
    assert!(e.contains("m.toml") && e.contains("line"), "{e}");
}

/// A loaded machine is safe to use: rendering and queries do not panic.
fn use_it(m: &ptb_topology::Machine) {
    let _ = ptb_topology::render::render_text(m);
    let _ = ptb_topology::render::to_json(m);
    for g in &m.groups {
        for n in &m.nodes {
            let _ = (m.bg(g.idx, n.idx), m.latency_ns(g.idx, n.idx), m.route(g.idx, n.idx));
        }
    }
    for a in &m.nodes {
        for b in &m.nodes {
            let _ = (m.distance(a.idx, b.idx), m.node_bg(a.idx, b.idx));
        }
    }
}

/// Every number leaf of a JSON value, as a path of keys/indices.
fn number_paths(v: &Value, at: Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match v {
        Value::Number(_) => out.push(at),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            let mut p = at.clone();
            p.push(json!(i));
            number_paths(x, p, out);
        }),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            let mut p = at.clone();
            p.push(json!(k));
            number_paths(x, p, out);
        }),
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match k {
        Value::String(s) => &mut v[s.as_str()],
        k => &mut v[k.as_u64().unwrap() as usize],
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), json in any::<bool>()) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse(&text, json, Path::new("fuzz.toml")) {
            prop_assert!(e.to_string().contains("fuzz.toml"));
        }
    }

    #[test]
    fn mutated_toml_never_panics(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6)) {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=4,dies=2,memonly=1").unwrap();
        let mut bytes = ptb_topology::file::to_toml(&m).unwrap().into_bytes();
        for (at, b, op) in edits {
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = b,
                1 => { bytes.remove(i); }
                _ => bytes.insert(i, b),
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        match parse(&text, false, Path::new("mutated.toml")) {
            Ok(m) => use_it(&m),
            Err(e) => prop_assert!(e.to_string().contains("mutated.toml"), "{}", e),
        }
    }

    #[test]
    fn mutated_numbers_are_refused_or_safe(pick in any::<prop::sample::Index>(), val in prop_oneof![
        Just(json!(-1)), Just(json!(0)), Just(json!(1)), Just(json!(65535)), Just(json!(4294967296u64)),
        Just(json!(1e300)), Just(json!(-0.5)), Just(json!(3.5)), Just(json!(99)),
    ]) {
        let mut v = base();
        let mut paths = Vec::new();
        number_paths(&v, vec![], &mut paths);
        let path = &paths[pick.index(paths.len())];
        *at_mut(&mut v, path) = val;
        match load_json(&v) {
            Ok(m) => use_it(&m),
            Err(e) => prop_assert!(e.contains("bad-machine.json"), "{}", e),
        }
    }
}

#[test]
fn the_documented_example_loads() {
    let m = ptb_topology::file::load(Path::new("../../docs/examples/two-socket-cxl.toml")).unwrap();
    assert_eq!((m.n_nodes(), m.n_cpus(), m.groups.len(), m.links.len()), (3, 8, 2, 2));
    assert!(!m.nodes[2].has_cpus());
}

#[test]
fn the_readme_example_loads() {
    let readme = std::fs::read_to_string("../../README.md").unwrap();
    let section = &readme[readme.find("## Machines and topology").expect("README section")..];
    let start = section.find("```toml\n").expect("toml example") + "```toml\n".len();
    let text = &section[start..start + section[start..].find("```").unwrap()];
    let m = parse(text, false, Path::new("README.md")).unwrap();
    assert_eq!((m.n_nodes(), m.n_cpus()), (1, 4));
}

/// `page_size = 1` or `2` made every megabyte a million pages and hung the simulator.
#[test]
fn page_and_line_sizes_are_bounded() {
    for bad in [0u64, 1, 2, 1024, 3 << 12, 1 << 31] {
        refused("page_size", |v| v["page_size"] = json!(bad));
    }
    for bad in [0, 1, 4, 24, 8192] {
        refused("line_size", |v| v["line_size"] = json!(bad));
    }
    let mut v = base();
    v["page_size"] = json!(65536);
    v["line_size"] = json!(128);
    load_json(&v).unwrap();
}

/// `[costs]` took nan, inf, 1e308 and -1 (the simulator then reported a misleading timeout),
/// and refused a partial table although every cost is optional.
#[test]
fn costs_are_finite_bounded_and_each_optional() {
    for (field, bad) in
        [("page_us", "nan"), ("copy_gbps", "inf"), ("thread_us", "1e308"), ("sample_us", "-1"), ("copy_gbps", "0")]
    {
        let text = format!("{}\n[costs]\n{field} = {bad}\n", toml_base());
        let e = parse(&text, false, Path::new("c.toml")).unwrap_err().to_string();
        assert!(e.contains("c.toml") && e.contains(&format!("costs.{field}")), "{field}={bad}: {e}");
    }
    let text = format!("{}\n[costs]\npage_us = 2.5\n", toml_base());
    let m = parse(&text, false, Path::new("c.toml")).unwrap();
    assert_eq!(m.costs.page_us, 2.5);
    assert_eq!(m.costs.copy_gbps, ptb_topology::MigrationCosts::default().copy_gbps);
}

/// The machine file without its `[costs]` table (TOML), so a test can append its own.
fn toml_base() -> String {
    let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=2").unwrap();
    let t = ptb_topology::file::to_toml(&m).unwrap();
    let start = t.find("[costs]").unwrap();
    let end = t[start + 1..].find("\n[").map_or(t.len(), |e| start + 1 + e);
    format!("{}{}", &t[..start], &t[end..])
}

/// `/dev/zero` read until memory ran out, a FIFO blocked forever, a directory named `x.toml`
/// got a sysfs message.
#[test]
fn only_regular_files_are_machine_files() {
    let e = ptb_topology::resolve("/dev/zero").unwrap_err().to_string();
    assert!(e.contains("/dev/zero") && e.contains("device"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("x.toml");
    std::fs::create_dir(&dir).unwrap();
    let e = ptb_topology::resolve(dir.to_str().unwrap()).unwrap_err().to_string();
    assert!(e.contains("is a directory, not a machine file"), "{e}");
    let fifo = d.path().join("m.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = ptb_topology::resolve(fifo.to_str().unwrap()).unwrap_err().to_string();
    assert!(e.contains("FIFO"), "{e}");
    let big = d.path().join("big.toml");
    std::fs::File::create(&big).unwrap().set_len(ptb_topology::input::cap::MACHINE + 1).unwrap();
    let e = ptb_topology::resolve(big.to_str().unwrap()).unwrap_err().to_string();
    assert!(e.contains("larger than"), "{e}");
}

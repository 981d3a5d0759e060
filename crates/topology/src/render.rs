//! What `ptb topology` prints: a readable text view of a [`Machine`] (in the spirit of
//! hwloc's lstopo) and a stable JSON document.
//!
//! Both live here, not in the CLI, so that golden tests compare exactly what users see.
//!
//! The JSON document is the machine itself as its machine file would hold it (see
//! `docs/machine-file.md`) plus two fields: `schema` ([`JSON_SCHEMA`]) and `summary` (counts
//! for scripts). Fields are only ever added under the same schema name; a field that changes
//! meaning gets a new schema name. A saved `--json` output loads back as a machine file.

use crate::machine::{End, Machine, ModelSource};
use crate::matrix::{Matrix, MatrixSource};
use serde_json::{json, Value};
use std::fmt::Write;

/// The `schema` field of `ptb topology --json`.
pub const JSON_SCHEMA: &str = "ptb.topology/1";

/// The JSON document of `ptb topology --json`.
pub fn to_json(m: &Machine) -> Value {
    let mut v = match serde_json::to_value(m) {
        Ok(v) => v,
        Err(e) => json!({ "error": format!("cannot serialise machine: {e}") }),
    };
    if let Value::Object(map) = &mut v {
        map.insert("schema".into(), json!(JSON_SCHEMA));
        map.insert("summary".into(), summary(m));
    }
    v
}

/// Counts that scripts want without walking the model.
fn summary(m: &Machine) -> Value {
    json!({
        "nodes": m.n_nodes(),
        "cpus": m.n_cpus(),
        "cpu_groups": m.groups.len(),
        "memory_bytes": m.nodes.iter().map(|n| n.memory_bytes).sum::<u64>(),
        "memory_only_nodes": m.nodes.iter().filter(|n| !n.has_cpus()).map(|n| n.id.0).collect::<Vec<_>>(),
        "links": m.links.len(),
        "asymmetric_links": m.links.iter().filter(|l| l.gbps_ab != l.gbps_ba).count(),
        "routes": m.routes.len(),
        "has_distances": m.distances.is_some(),
        "has_bandwidth_graph": m.bandwidth.is_some(),
        "live": m.source.is_live(),
    })
}

/// Bytes as a short binary size (`13.8 GiB`).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A matrix entry: whole numbers without decimals, others with one.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn source_word(s: MatrixSource) -> &'static str {
    match s {
        MatrixSource::Measured => "measured",
        MatrixSource::Firmware => "firmware",
        MatrixSource::Published => "published",
        MatrixSource::Derived => "derived",
    }
}

/// Aligned columns: the first `left` columns left-aligned, the rest right-aligned; each line
/// indented by two spaces, trailing spaces trimmed.
fn table(rows: &[Vec<String>], left: usize) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> =
        (0..ncol).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r.iter().enumerate().map(|(c, s)| pad(s, width[c], c < left)).collect();
        out.push_str("  ");
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `s` padded with spaces to `width` characters, on the right (`left` aligned) or on the left.
/// Written out because `format!`'s width is limited to 65,535 and panics beyond (a machine
/// file may hold a longer name).
pub fn pad(s: &str, width: usize, left: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(s.chars().count()));
    if left {
        format!("{s}{fill}")
    } else {
        format!("{fill}{s}")
    }
}

/// `1 node`, `4 nodes`: a count (of any integer type) with its noun, for every message that
/// counts.
pub fn plural(n: impl std::fmt::Display, one: &str, many: &str) -> String {
    let n = n.to_string();
    let noun = if n == "1" { one } else { many };
    format!("{n} {noun}")
}

/// How a link end reads in the text view: `g3 (P3)` or `memory of node 4`.
fn end_name(m: &Machine, e: &End) -> String {
    match e {
        End::Group(g) => match m.groups.get(g.ix()) {
            Some(gr) => format!("g{} ({})", g.0, gr.name),
            None => format!("g{} (missing)", g.0),
        },
        End::Memory(n) => match m.nodes.get(n.ix()) {
            Some(node) => format!("memory of node {}", node.id.0),
            None => format!("memory of n#{} (missing)", n.0),
        },
    }
}

/// Column headings of node-indexed matrices: kernel node ids.
fn node_heads(m: &Machine) -> Vec<String> {
    m.nodes.iter().map(|n| format!("node{}", n.id.0)).collect()
}

/// A group x node matrix (Bandwidth Graph, latency).
fn group_matrix(m: &Machine, title: &str, mx: &Matrix, out: &mut String) {
    let _ =
        writeln!(out, "\n{title} ({}, {}; rows: CPU groups, columns: memory nodes)", mx.unit, source_word(mx.source));
    let mut rows = vec![[vec![String::new(), String::new()], node_heads(m)].concat()];
    for (r, vals) in mx.rows.iter().enumerate() {
        let name = m.groups.get(r).map_or("?".to_string(), |g| g.name.clone());
        let mut row = vec![format!("g{r}"), name];
        row.extend(vals.iter().map(|v| num(*v)));
        rows.push(row);
    }
    out.push_str(&table(&rows, 2));
}

/// The readable text view of `ptb topology`.
pub fn render_text(m: &Machine) -> String {
    let mut out = String::new();
    let mem: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
    let memonly = m.nodes.iter().filter(|n| !n.has_cpus()).count();
    let _ = writeln!(
        out,
        "Machine {}: {}, {}, {}, {} memory{}",
        m.name,
        plural(m.n_nodes(), "node", "nodes"),
        plural(m.n_cpus(), "CPU", "CPUs"),
        plural(m.groups.len(), "CPU group", "CPU groups"),
        human_bytes(mem),
        if memonly > 0 { format!(", {memonly} memory-only") } else { String::new() }
    );
    if !m.description.is_empty() {
        let _ = writeln!(out, "  {}", m.description);
    }
    let src = &m.source;
    let _ = writeln!(
        out,
        "  source: {src}{}; page {} B, cache line {} B",
        match &m.source {
            s if s.is_live() => " (this machine)",
            // What `ptb_linux::live::adopt` does with a file given to `ptb run/attach/daemon`.
            ModelSource::File { .. } => {
                " (a machine file: where its nodes and CPUs match the machine ptb runs on, its bandwidth figures \
                 are used; nodes and CPUs always come from /sys)"
            }
            _ => " (a model: never used to move real processes)",
        },
        m.page_size,
        m.line_size
    );
    if let Some(s) = &m.sampler {
        let _ = writeln!(out, "  address sampler: {}", s.describe());
    }

    let _ = writeln!(out, "\nNUMA nodes");
    let mut rows = vec![vec!["node".into(), "logical".into(), "CPUs".into(), "groups".into(), "memory".into()]];
    for n in &m.nodes {
        let groups = n.groups.iter().map(|g| format!("g{}", g.0)).collect::<Vec<_>>().join(",");
        let mut row = vec![
            n.id.0.to_string(),
            format!("#{}", n.idx.0),
            if n.has_cpus() { n.cpus.to_list() } else { "-".into() },
            if groups.is_empty() { "-".into() } else { groups },
            human_bytes(n.memory_bytes),
        ];
        if !n.has_cpus() {
            row.push("memory-only".into());
        } else if !n.has_memory() {
            row.push("no memory".into());
        }
        rows.push(row);
    }
    out.push_str(&table(&rows, 4));

    let _ = writeln!(out, "\nCPU groups (die / LLC domain)");
    let mut rows = vec![vec!["group".into(), "name".into(), "node".into(), "CPUs".into()]];
    for g in &m.groups {
        let node = m.nodes.get(g.node.ix()).map_or("?".to_string(), |n| n.id.0.to_string());
        rows.push(vec![format!("g{}", g.idx.0), g.name.clone(), node, g.cpus.to_list()]);
    }
    out.push_str(&table(&rows, 4));

    match &m.distances {
        Some(d) => {
            let _ =
                writeln!(out, "\nDistances ({}, {}; rows: from node, columns: to node)", d.unit, source_word(d.source));
            let mut rows = vec![[vec![String::new()], node_heads(m)].concat()];
            for (r, vals) in d.rows.iter().enumerate() {
                let name = m.nodes.get(r).map_or("?".to_string(), |n| format!("node{}", n.id.0));
                rows.push([vec![name], vals.iter().map(|v| num(*v)).collect()].concat());
            }
            out.push_str(&table(&rows, 1));
        }
        None => {
            let _ = writeln!(out, "\nDistances: not known");
        }
    }

    render_links(m, &mut out);

    if let Some(c) = &m.controller_gbps {
        let list: Vec<String> = m.nodes.iter().zip(c).map(|(n, v)| format!("node{} {}", n.id.0, num(*v))).collect();
        let _ = writeln!(out, "\nMemory controllers (GB/s, all groups together): {}", list.join(", "));
    }

    match &m.bandwidth {
        Some(b) => {
            group_matrix(m, "Bandwidth Graph, uncontended: one group active", &b.uncontended, &mut out);
            if let Some(c) = &b.contended {
                group_matrix(m, "Bandwidth Graph, contended: all groups active", c, &mut out);
            }
            if let Some(l) = &b.latency {
                group_matrix(m, "Idle latency", l, &mut out);
            }
        }
        None => {
            let _ = writeln!(
                out,
                "\nBandwidth Graph: not known (measure it with `ptb characterize`, or pick a preset with --machine)"
            );
        }
    }

    if !m.notes.is_empty() {
        let _ = writeln!(out, "\nNotes");
        for n in &m.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

/// Links table and route summary.
fn render_links(m: &Machine, out: &mut String) {
    if m.links.is_empty() {
        let _ = writeln!(out, "\nLinks: not known");
    } else {
        let asym = m.links.iter().filter(|l| l.gbps_ab != l.gbps_ba).count();
        let _ = writeln!(out, "\nLinks ({}, {asym} asymmetric; GB/s each way)", plural(m.links.len(), "link", "links"));
        let mut rows = vec![vec!["link".into(), "a".into(), "b".into(), "width".into(), "a->b".into(), "b->a".into()]];
        for (i, l) in m.links.iter().enumerate() {
            let mut row = vec![
                format!("l{i}"),
                end_name(m, &l.a),
                end_name(m, &l.b),
                l.width.clone(),
                num(l.gbps_ab),
                num(l.gbps_ba),
            ];
            if l.gbps_ab != l.gbps_ba {
                row.push("asymmetric".into());
            }
            rows.push(row);
        }
        out.push_str(&table(&rows, 4));
    }
    if m.routes.is_empty() {
        if !m.links.is_empty() {
            let _ = writeln!(out, "\nRoutes: not known");
        }
        return;
    }
    let oneway = m.routes.iter().filter(|r| r.write_hops.is_some()).count();
    let _ = writeln!(
        out,
        "\nRoutes (links a read crosses, from memory to group; 0 = local{})",
        if oneway > 0 { "; * = writes take another way" } else { "" }
    );
    let mut rows = vec![[vec![String::new(), String::new()], node_heads(m)].concat()];
    for g in &m.groups {
        let mut row = vec![format!("g{}", g.idx.0), g.name.clone()];
        for n in &m.nodes {
            row.push(match m.route(g.idx, n.idx) {
                Some(r) => {
                    let hops = r.hops.iter().map(|h| format!("l{}", h.link.0)).collect::<Vec<_>>();
                    let star = if r.write_hops.is_some() { "*" } else { "" };
                    if hops.is_empty() {
                        format!("0{star}")
                    } else {
                        format!("{}{star}", hops.join(">"))
                    }
                }
                None => "-".into(),
            });
        }
        rows.push(row);
    }
    out.push_str(&table(&rows, 2));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_naturally() {
        assert_eq!(plural(1, "node", "nodes"), "1 node");
        assert_eq!(plural(0, "node", "nodes"), "0 nodes");
        assert_eq!(plural(4, "thread", "threads"), "4 threads");
        let m = crate::synthetic::synthetic("nodes=1,cpus=1").unwrap();
        assert!(render_text(&m).starts_with("Machine synthetic(nodes=1,cpus=1): 1 node, 1 CPU, 1 CPU group"));
        assert_eq!(m.node_id_list(), "0");
        let m = crate::presets::get("opteron6272-4n").unwrap();
        assert_eq!(m.node_id_list(), "0, 2, 4, 6");
    }

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(16 << 30), "16.0 GiB");
        assert_eq!(human_bytes(1536 << 20), "1.5 GiB");
    }

    #[test]
    fn text_shows_every_part_of_a_synthetic_machine() {
        let m = crate::synthetic::synthetic("nodes=2,cpus=4,dies=2,memonly=1").unwrap();
        let t = render_text(&m);
        for want in
            ["3 nodes, 8 CPUs, 4 CPU groups", "memory-only", "Distances (SLIT", "Links (", "Routes (", "contended"]
        {
            assert!(t.contains(want), "missing `{want}` in\n{t}");
        }
        let j = to_json(&m);
        assert_eq!(j["schema"], JSON_SCHEMA);
        assert_eq!(j["summary"]["cpus"], 8);
        assert_eq!(j["summary"]["memory_only_nodes"], json!([2]));
    }

    /// The source line says what ptb does with the model: a machine file (as `ptb characterize`
    /// writes) lends its bandwidth figures to `ptb run` where it matches; other models never move
    /// real processes.
    #[test]
    fn the_source_line_says_what_a_model_is_used_for() {
        let mut m = crate::synthetic::synthetic("nodes=2,cpus=2").unwrap();
        assert!(render_text(&m).contains("(a model: never used to move real processes)"));
        m.source = ModelSource::File { path: "m.toml".into() };
        let t = render_text(&m);
        assert!(t.contains("machine file m.toml (a machine file: where its nodes and CPUs match"), "{t}");
        assert!(!t.contains("never used to move"), "{t}");
        m.source = ModelSource::Sysfs { root: "/".into() };
        assert!(render_text(&m).contains("sysfs at / (this machine)"));
    }

    /// `format!("{s:<w$}")` panics for widths over 65,535: a machine file may name a group so.
    #[test]
    fn names_longer_than_65535_characters_render() {
        let mut m = crate::synthetic::synthetic("nodes=2,cpus=2").unwrap();
        m.groups[0].name = "g".repeat(70_000);
        m.name = "m".repeat(70_000);
        let t = render_text(&m);
        assert!(t.contains(&m.groups[0].name));
        assert_eq!(pad("ab", 4, true), "ab  ");
        assert_eq!(pad("ab", 4, false), "  ab");
        assert_eq!(pad("abcdef", 4, false), "abcdef");
    }
}

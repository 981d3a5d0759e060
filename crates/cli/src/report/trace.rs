//! `ptb report` on a `ptb record` trace (JSON lines): a summary run built from the recorded
//! samples — the measured node x node access map (row = node of the sampled CPU, column = node
//! of the sampled page, from the last placement record that knows the page).

use crate::report::model::{AccessMapRec, Document, RunRecord};
use anyhow::{anyhow, Result};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

/// Whether the file starts like a trace (first non-empty line is a `header` record).
pub fn is_trace(path: &Path) -> bool {
    let Ok(f) = ptb_topology::input::open(path, "trace", ptb_topology::input::cap::TRACE) else { return false };
    let first = std::io::BufReader::new(std::io::Read::take(f, ptb_topology::input::cap::LINE))
        .lines()
        .map_while(Result::ok)
        .find(|l| !l.trim().is_empty());
    first
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .is_some_and(|v| v.get("type").and_then(Value::as_str) == Some("header"))
}

/// Read a trace into a one-run document (not simulated).
pub fn load(path: &Path) -> Result<Document> {
    let t = ptb_linux::trace::read_trace(path).map_err(|e| anyhow!("{e}"))?;
    let m = &t.machine;
    let nn = m.n_nodes();
    let mut node_of: HashMap<(u32, u64), u16> = HashMap::new();
    for p in &t.placements {
        if let ptb_linux::trace::TraceRecord::Placement { pages, .. } = p {
            for &(app, vpn, n) in pages {
                node_of.insert((app, vpn), n);
            }
        }
    }
    let page = t.page_size.max(1);
    let mut counts = vec![vec![0u64; nn]; nn];
    let (mut known, mut unknown) = (0u64, 0u64);
    for s in &t.samples {
        let row = m.node_of_cpu(s.cpu).map(|n| n.ix());
        let col = node_of.get(&(s.app, s.addr / page)).map(|&n| n as usize);
        match (row, col) {
            (Some(r), Some(c)) if r < nn && c < nn => {
                counts[r][c] += 1;
                known += 1;
            }
            _ => unknown += 1,
        }
    }
    let tot = known.max(1) as f64;
    let shares: Vec<Vec<f64>> = counts.iter().map(|r| r.iter().map(|&c| c as f64 / tot).collect()).collect();
    let controller_share = (0..nn).map(|c| (0..nn).map(|r| shares[r][c]).sum()).collect();
    let local: f64 = (0..nn).map(|i| shares[i][i]).sum();
    let end_ns = t.samples.iter().map(|s| s.time_ns).max().unwrap_or(0);
    let mut extra = Map::new();
    extra.insert("samples".into(), json!(t.samples.len()));
    extra.insert("samples_with_known_page_node".into(), json!(known));
    extra.insert("samples_unknown_node".into(), json!(unknown));
    extra.insert("lost".into(), json!(t.lost));
    extra.insert("source".into(), json!(t.source));
    let run = RunRecord {
        workload: format!("recorded pids {:?}", t.pids),
        policy: "recorded".into(),
        seed: 0,
        runtime_s: end_ns as f64 / 1e9,
        speedup_vs_first_touch: None,
        local_fraction: if known > 0 { local } else { 0.0 },
        access_map: (known > 0).then(|| AccessMapRec {
            nodes: m.nodes.iter().map(|n| n.id.0).collect(),
            shares,
            controller_share,
            local,
            remote: 1.0 - local,
            extra: Map::new(),
        }),
        controller_utilisation: vec![],
        link_utilisation: vec![],
        pages_migrated: 0,
        threads_migrated: 0,
        migration_s: 0.0,
        decision_ms: 0.0,
        cycles: 0,
        pages_planned_per_cycle: vec![],
        extra,
    };
    let mut doc_extra = Map::new();
    doc_extra.insert("trace".into(), json!(path.display().to_string()));
    Ok(Document { simulated: false, machine: m.name.clone(), results: vec![run], summary: None, extra: doc_extra })
}

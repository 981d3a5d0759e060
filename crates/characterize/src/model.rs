//! Putting measurements into a machine model: CPU grouping choices and the Bandwidth Graph.

use crate::measure::Characterisation;
use ptb_topology::{BandwidthGraph, CpuGroup, CpuSet, GroupIdx, Machine, ModelSource};

/// How CPUs are grouped into Bandwidth Graph rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// The model's own CPU groups (dies / LLC domains).
    Die,
    /// One group per node with CPUs.
    Node,
}

/// `m` with one CPU group per node that has CPUs. Links and routes name the old groups, so they
/// are dropped (a note says so).
pub fn group_by_node(m: &Machine) -> Machine {
    let mut out = m.clone();
    out.groups.clear();
    for node in out.nodes.iter_mut() {
        node.groups.clear();
        if node.has_cpus() {
            let idx = GroupIdx::from_ix(out.groups.len());
            out.groups.push(CpuGroup {
                idx,
                name: format!("node{}", node.id.0),
                node: node.idx,
                cpus: node.cpus.iter().collect::<CpuSet>(),
            });
            node.groups.push(idx);
        }
    }
    if !out.links.is_empty() || !out.routes.is_empty() {
        out.links.clear();
        out.routes.clear();
        out.notes.push("CPU groups merged per node for characterisation; links and routes dropped".into());
    }
    out.bandwidth = None;
    out
}

/// `m` with the measured Bandwidth Graph, noted as measured and saved to `path` (so the model
/// is never mistaken for a live read of some other machine's /sys).
pub fn with_measurements(m: &Machine, c: &Characterisation, path: Option<&str>) -> Machine {
    let mut out = m.clone();
    out.bandwidth = Some(BandwidthGraph {
        uncontended: c.uncontended.clone(),
        contended: Some(c.contended.clone()),
        latency: Some(c.latency.clone()),
    });
    if let Some(p) = path {
        out.source = ModelSource::File { path: p.to_string() };
    }
    if out.description.is_empty() || !out.description.contains("measured") {
        out.description = format!("{} (Bandwidth Graph measured by ptb characterize)", out.description.trim())
            .trim_start()
            .to_string();
    }
    // Notes that asked for a measurement are answered now.
    out.notes.retain(|n| !n.contains("ptb characterize` to measure"));
    out.notes.extend(c.notes.iter().cloned());
    out.notes.push(
        "bandwidth.uncontended: one CPU group active, threads swept to the plateau; bandwidth.contended: every \
         group active at once; spread = max - min over repeats"
            .into(),
    );
    out
}

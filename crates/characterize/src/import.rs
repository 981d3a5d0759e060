//! MLC matrices -> a machine model with a measured Bandwidth Graph.
//!
//! MLC measures node to node: each row is every CPU of one node reading one memory node, one
//! source node active at a time, so its bandwidth matrix is the uncontended Bandwidth Graph at
//! node granularity (every CPU group of a node gets its node's row). MB/s become GB/s (MLC's
//! MB is 10^6 bytes). MLC has no contended matrix.
//!
//! The structure (CPU lists, memory sizes) comes from a machine model when one is given and
//! its node ids match; MLC output does not contain it, so otherwise a placeholder structure is
//! built and a note says so.

use crate::error::CharError;
use crate::mlc::{MlcKind, MlcMatrix};
use ptb_topology::{
    BandwidthGraph, CpuGroup, CpuId, CpuSet, GroupIdx, Machine, Matrix, MatrixSource, ModelSource, Node, NodeId,
    NodeIdx,
};

/// Placeholder memory size of a node when the structure is not known.
const PLACEHOLDER_MEM: u64 = 16 << 30;

/// Most CPUs a placeholder node may get (`--cpus-per-node`).
pub const MAX_CPUS_PER_NODE: u32 = 4096;

/// True when `base` has exactly the CPU nodes of `bw`'s rows and memory nodes of its columns.
pub fn fits(base: &Machine, bw: &MlcMatrix) -> bool {
    let ids = |f: fn(&Node) -> bool| {
        let mut v: Vec<u32> = base.nodes.iter().filter(|n| f(n)).map(|n| n.id.0).collect();
        v.sort();
        v
    };
    let (mut rows, mut cols) = (bw.rows.clone(), bw.cols.clone());
    rows.sort();
    cols.sort();
    ids(Node::has_cpus) == rows && ids(Node::has_memory) == cols
}

/// A placeholder machine for `bw`: nodes = row and column ids, `cpus_per_node` CPUs per row
/// node (numbered densely), 16 GiB per column node. Refused when `cpus_per_node` is 0 or
/// above [`MAX_CPUS_PER_NODE`], or the CPUs would be numbered beyond what a CPU list may name.
pub fn placeholder(bw: &MlcMatrix, name: &str, cpus_per_node: usize) -> Result<Machine, CharError> {
    if cpus_per_node == 0 || cpus_per_node > MAX_CPUS_PER_NODE as usize {
        return Err(CharError::Import(format!(
            "--cpus-per-node {cpus_per_node}: give 1 to {MAX_CPUS_PER_NODE} CPUs per placeholder node"
        )));
    }
    let total = cpus_per_node as u64 * bw.rows.len() as u64;
    if total > u64::from(ptb_topology::cpulist::MAX_LIST_ID) {
        return Err(CharError::Import(format!(
            "--cpus-per-node {cpus_per_node} x {} CPU nodes = {total} CPUs, more than the {} a CPU list may name",
            bw.rows.len(),
            ptb_topology::cpulist::MAX_LIST_ID
        )));
    }
    let mut ids: Vec<u32> = bw.rows.iter().chain(&bw.cols).copied().collect();
    ids.sort();
    ids.dedup();
    let (mut nodes, mut groups, mut next_cpu) = (Vec::new(), Vec::new(), 0u32);
    for (i, &id) in ids.iter().enumerate() {
        let idx = NodeIdx::from_ix(i);
        let mut node = Node {
            id: NodeId(id),
            idx,
            cpus: CpuSet::new(),
            memory_bytes: if bw.cols.contains(&id) { PLACEHOLDER_MEM } else { 0 },
            groups: vec![],
        };
        if bw.rows.contains(&id) {
            let cpus: CpuSet = (0..cpus_per_node).map(|k| CpuId(next_cpu + k as u32)).collect();
            next_cpu += cpus_per_node as u32;
            node.cpus = cpus.clone();
            let g = GroupIdx::from_ix(groups.len());
            groups.push(CpuGroup { idx: g, name: format!("node{id}"), node: idx, cpus });
            node.groups.push(g);
        }
        nodes.push(node);
    }
    let source = ModelSource::Synthetic { spec: format!("placeholder structure for MLC import `{name}`") };
    Ok(Machine {
        notes: vec![format!(
            "structure is a placeholder: MLC output has no CPU lists or memory sizes, so each CPU node got \
             {cpus_per_node} CPUs numbered densely and each memory node {} GiB",
            PLACEHOLDER_MEM >> 30
        )],
        ..Machine::bare(name.to_string(), String::new(), source, nodes, groups)
    })
}

/// Spread an MLC node x node matrix over `base`'s CPU groups (rows) and nodes (columns).
fn to_group_matrix(base: &Machine, mx: &MlcMatrix, unit: &str, scale: f64) -> Result<Matrix, CharError> {
    let mut rows = vec![vec![0.0; base.nodes.len()]; base.groups.len()];
    for (gi, g) in base.groups.iter().enumerate() {
        let nid = base.nodes[g.node.ix()].id.0;
        let r = mx.rows.iter().position(|&r| r == nid).ok_or_else(|| {
            CharError::Import(format!(
                "the {} matrix (line {}) has no row for node {nid}, which has CPUs in the machine model",
                mx.kind.unit(),
                mx.line
            ))
        })?;
        for (c, &cid) in mx.cols.iter().enumerate() {
            let n = base.node_idx(NodeId(cid)).ok_or_else(|| {
                CharError::Import(format!(
                    "the {} matrix (line {}) names node {cid}, which the machine model does not have",
                    mx.kind.unit(),
                    mx.line
                ))
            })?;
            rows[gi][n.ix()] = mx.values[r][c].unwrap_or(0.0) * scale;
        }
    }
    Ok(Matrix::new(unit, MatrixSource::Measured, rows))
}

/// `base` with the Bandwidth Graph from MLC's bandwidth matrix (read from `origin`) and, if
/// given, a latency matrix (with the file it came from).
pub fn import(
    base: &Machine,
    bw: &MlcMatrix,
    lat: Option<(&MlcMatrix, &str)>,
    origin: &str,
) -> Result<Machine, CharError> {
    if bw.kind != MlcKind::Bandwidth {
        return Err(CharError::Import(format!("{origin}: expected a bandwidth matrix, found a latency matrix")));
    }
    if let Some((l, _)) = lat {
        if l.kind != MlcKind::Latency {
            return Err(CharError::Import(format!("{origin}: expected a latency matrix, found a bandwidth matrix")));
        }
    }
    let mut m = base.clone();
    let latency = lat.map(|(l, _)| to_group_matrix(base, l, "ns", 1.0)).transpose()?;
    m.bandwidth =
        Some(BandwidthGraph { uncontended: to_group_matrix(base, bw, "GB/s", 1e-3)?, contended: None, latency });
    m.notes.push(format!(
        "bandwidth.uncontended imported from Intel MLC --bandwidth_matrix ({origin}); MB/s / 1000 = GB/s; \
         every CPU group of a node has its node's row; no contended matrix (MLC does not measure one)"
    ));
    if let Some((_, lat_origin)) = lat {
        m.notes.push(format!("bandwidth.latency imported from Intel MLC --latency_matrix ({lat_origin})"));
    }
    m.description = format!("Bandwidth Graph imported from Intel MLC output ({origin})");
    ptb_topology::validate::validate(&m, origin)?;
    Ok(m)
}

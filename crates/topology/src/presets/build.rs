//! Shared tools for writing presets: nodes and CPU groups from short tables, a link set
//! that turns a path of ends into directed hops, SLIT distances derived from latencies,
//! and a contended Bandwidth Graph derived by max-min fair sharing of controllers and links.
//!
//! Problem: every preset needs the same bookkeeping (dense indices, CPU sets, routes as
//! directed link hops) and the same derivations for numbers that were never published.
//! Approach: presets describe their machine as small tables of constants; this module
//! turns them into a [`Machine`] and fills derived parts with one documented rule each.

use crate::cpulist::CpuSet;
use crate::error::TopologyError;
use crate::ids::{CpuId, GroupIdx, LinkIdx, NodeId, NodeIdx};
use crate::machine::{BandwidthGraph, CpuGroup, DirLink, End, Link, Machine, MigrationCosts, ModelSource, Node, Route};
use crate::matrix::{Matrix, MatrixSource};
pub(super) use crate::sampler::AddressSampler;

/// Bytes in one GiB (preset memory sizes are given in GiB).
pub(super) const GIB: u64 = 1 << 30;

/// One node of a preset: kernel id and memory size in GiB.
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeSpec {
    pub id: u32,
    pub mem_gib: u64,
}

/// One CPU group of a preset: name, position of its node in the node table, and its CPUs
/// as a range of kernel CPU ids `first..first + count`.
#[derive(Clone, Debug)]
pub(super) struct GroupSpec {
    pub name: String,
    pub node: usize,
    pub first_cpu: u32,
    pub n_cpus: u32,
}

/// Build the node and group vectors (dense indices in table order).
pub(super) fn nodes_and_groups(nodes: &[NodeSpec], groups: &[GroupSpec]) -> (Vec<Node>, Vec<CpuGroup>) {
    let mut ns: Vec<Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Node {
            id: NodeId(n.id),
            idx: NodeIdx::from_ix(i),
            cpus: CpuSet::new(),
            memory_bytes: n.mem_gib * GIB,
            groups: vec![],
        })
        .collect();
    let mut gs = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let cpus: CpuSet = (g.first_cpu..g.first_cpu + g.n_cpus).map(CpuId).collect();
        let idx = GroupIdx::from_ix(i);
        if let Some(node) = ns.get_mut(g.node) {
            for c in cpus.iter() {
                node.cpus.insert(c);
            }
            node.groups.push(idx);
        }
        gs.push(CpuGroup { idx, name: g.name.clone(), node: NodeIdx::from_ix(g.node), cpus });
    }
    (ns, gs)
}

/// Shorthand for a group end.
pub(super) fn grp(i: usize) -> End {
    End::Group(GroupIdx::from_ix(i))
}

/// Shorthand for a memory end.
pub(super) fn mem(i: usize) -> End {
    End::Memory(NodeIdx::from_ix(i))
}

/// The links of a preset, with lookups of directed hops.
#[derive(Clone, Debug, Default)]
pub(super) struct LinkSet {
    pub links: Vec<Link>,
}

impl LinkSet {
    /// Add a link; `ab` is GB/s from `a` to `b`, `ba` the other way.
    pub fn add(&mut self, a: End, b: End, ab: f64, ba: f64, width: &str) {
        self.links.push(Link { a, b, gbps_ab: ab, gbps_ba: ba, width: width.to_string() });
    }

    /// The link used from `from` to `to`, with its direction.
    pub fn dir(&self, from: End, to: End) -> Option<DirLink> {
        self.links.iter().enumerate().find_map(|(i, l)| {
            if l.a == from && l.b == to {
                Some(DirLink { link: LinkIdx::from_ix(i), forward: true })
            } else if l.a == to && l.b == from {
                Some(DirLink { link: LinkIdx::from_ix(i), forward: false })
            } else {
                None
            }
        })
    }

    /// Directed hops along `ends` (first end = where the data starts).
    pub fn path(&self, origin: &str, ends: &[End]) -> Result<Vec<DirLink>, TopologyError> {
        ends.windows(2)
            .map(|w| {
                self.dir(w[0], w[1]).ok_or_else(|| {
                    TopologyError::invalid(origin, "routes", format!("no link between {:?} and {:?}", w[0], w[1]))
                })
            })
            .collect()
    }
}

/// GB/s a directed hop can carry.
pub(crate) fn hop_gbps(links: &[Link], h: &DirLink) -> f64 {
    let l = &links[h.link.ix()];
    if h.forward {
        l.gbps_ab
    } else {
        l.gbps_ba
    }
}

/// SLIT-style distances derived from an idle latency matrix (rows = groups, columns = nodes):
/// `round(10 * lat(first group of a, b) / lat(first group of a, a))`. Rows of CPU-less nodes
/// mirror their column (the kernel's SLIT is symmetric for such nodes); their diagonal is 10.
pub(super) fn slit_from_latency(nodes: &[Node], lat: &Matrix) -> Matrix {
    let n = nodes.len();
    let mut d = vec![vec![0.0; n]; n];
    for (a, na) in nodes.iter().enumerate() {
        if let Some(g) = na.groups.first() {
            let local = lat.get(g.ix(), a);
            for (b, v) in d[a].iter_mut().enumerate() {
                *v = (10.0 * lat.get(g.ix(), b) / local).round();
            }
        }
    }
    for (a, na) in nodes.iter().enumerate() {
        if na.groups.is_empty() {
            let column: Vec<f64> = d.iter().map(|row| row[a]).collect();
            for (b, v) in d[a].iter_mut().enumerate() {
                *v = if a == b { 10.0 } else { column[b] };
            }
        }
    }
    Matrix::new("SLIT", MatrixSource::Derived, d)
}

/// Max-min fair sharing of memory controllers and directed links among read flows.
///
/// Each flow is `(group, node, demand GB/s, weight)`: the group reads memory on the node
/// along the machine's route, crossing the node's controller (`controller_gbps`) and every
/// hop. Rates rise in proportion to their weights until a flow reaches its demand or a
/// resource it uses is full (weighted progressive filling). Returns one rate per flow, GB/s.
/// Flows without a route only use the controller.
pub(crate) fn fair_share(m: &Machine, flows: &[(GroupIdx, NodeIdx, f64, f64)]) -> Vec<f64> {
    let ctrl = m.controller_gbps.clone().unwrap_or_else(|| vec![f64::INFINITY; m.n_nodes()]);
    // Resources: controllers 0..nodes, then (link, direction) pairs.
    let n_res = m.n_nodes() + 2 * m.links.len();
    let mut cap = vec![f64::INFINITY; n_res];
    for (i, c) in ctrl.iter().enumerate() {
        cap[i] = *c;
    }
    for (i, l) in m.links.iter().enumerate() {
        cap[m.n_nodes() + 2 * i] = l.gbps_ab;
        cap[m.n_nodes() + 2 * i + 1] = l.gbps_ba;
    }
    let uses: Vec<Vec<usize>> = flows
        .iter()
        .map(|(g, n, _, _)| {
            let mut u = vec![n.ix()];
            if let Some(r) = m.route(*g, *n) {
                u.extend(r.hops.iter().map(|h| m.n_nodes() + 2 * h.link.ix() + usize::from(!h.forward)));
            }
            u
        })
        .collect();
    let mut rate = vec![0.0; flows.len()];
    let mut active: Vec<bool> = flows.iter().map(|f| f.2 > 0.0 && f.3 > 0.0).collect();
    const EPS: f64 = 1e-9;
    while active.iter().any(|a| *a) {
        let mut weight = vec![0.0; n_res];
        for (f, u) in uses.iter().enumerate() {
            if active[f] {
                for r in u {
                    weight[*r] += flows[f].3;
                }
            }
        }
        // The common step `inc`: flow f gains inc * weight_f.
        let mut inc = f64::INFINITY;
        for (f, a) in active.iter().enumerate() {
            if *a {
                inc = inc.min((flows[f].2 - rate[f]) / flows[f].3);
            }
        }
        for r in 0..n_res {
            if weight[r] > 0.0 {
                inc = inc.min(cap[r] / weight[r]);
            }
        }
        if !inc.is_finite() {
            break;
        }
        let inc = inc.max(0.0);
        for (f, u) in uses.iter().enumerate() {
            if active[f] {
                rate[f] += inc * flows[f].3;
                for r in u {
                    cap[*r] -= inc * flows[f].3;
                }
            }
        }
        for (f, u) in uses.iter().enumerate() {
            if active[f] && (rate[f] >= flows[f].2 - EPS || u.iter().any(|r| cap[*r] <= EPS)) {
                active[f] = false;
            }
        }
    }
    rate
}

/// Contended Bandwidth Graph derived from the uncontended one: for each memory node, every
/// CPU group reads it at once with its uncontended figure as demand and as weight (a group
/// with a shorter, faster way to the memory keeps a larger share, as latency-bound readers
/// do), and the node's controller and the links share out ([`fair_share`]). Source: derived.
pub(super) fn contended_by_fair_share(m: &Machine, uncontended: &Matrix) -> Matrix {
    let mut rows = vec![vec![0.0; m.n_nodes()]; m.groups.len()];
    for n in m.memory_nodes() {
        let flows: Vec<(GroupIdx, NodeIdx, f64, f64)> = m
            .groups
            .iter()
            .map(|g| {
                let d = uncontended.get(g.idx.ix(), n.ix());
                (g.idx, n, d, d)
            })
            .collect();
        for (f, r) in fair_share(m, &flows).into_iter().enumerate() {
            rows[f][n.ix()] = (r * 1000.0).round() / 1000.0;
        }
    }
    Matrix::new("GB/s", MatrixSource::Derived, rows)
}

/// A route as ends: (group, node, read path from the memory to the group, optional write
/// path from the group to the memory when it differs).
pub(super) type RoutePath = (usize, usize, Vec<End>, Option<Vec<End>>);

/// Everything a preset provides; [`Parts::finish`] assembles and validates the machine.
pub(super) struct Parts {
    pub name: &'static str,
    pub description: &'static str,
    pub nodes: Vec<Node>,
    pub groups: Vec<CpuGroup>,
    pub distances: Matrix,
    pub links: LinkSet,
    /// Read route of every (group, memory node) pair, as a path of ends from the memory to
    /// the group (one end = local); optional write path when it differs.
    pub routes: Vec<RoutePath>,
    pub controller_gbps: Vec<f64>,
    pub uncontended: Matrix,
    /// `None`: derived with [`contended_by_fair_share`].
    pub contended: Option<Matrix>,
    pub latency: Matrix,
    pub costs: MigrationCosts,
    /// Nominal core clock, GHz (the part's base frequency).
    pub clock_ghz: f64,
    /// The part's hardware address sampler (vendor documentation).
    pub sampler: AddressSampler,
    pub notes: Vec<String>,
}

impl Parts {
    /// Assemble the machine, derive the contended matrix when not given, and validate.
    pub fn finish(self) -> Result<Machine, TopologyError> {
        let origin = format!("preset {}", self.name);
        let mut routes = Vec::new();
        for (g, n, read, write) in &self.routes {
            let hops = self.links.path(&origin, read)?;
            let write_hops = match write {
                Some(w) => Some(self.links.path(&origin, w)?),
                None => None,
            };
            routes.push(Route { group: GroupIdx::from_ix(*g), node: NodeIdx::from_ix(*n), hops, write_hops });
        }
        let mut m = Machine {
            name: self.name.to_string(),
            description: self.description.to_string(),
            source: ModelSource::Preset { name: self.name.to_string() },
            page_size: 4096,
            line_size: 64,
            nodes: self.nodes,
            groups: self.groups,
            distances: Some(self.distances),
            links: self.links.links,
            routes,
            controller_gbps: Some(self.controller_gbps),
            bandwidth: None,
            costs: self.costs,
            clock_ghz: Some(self.clock_ghz),
            sampler: Some(self.sampler),
            notes: self.notes,
        };
        let contended = match self.contended {
            Some(c) => c,
            None => {
                m.notes.push(
                    "contended matrix: derived: every CPU group reads the column's node at once, with its \
                     uncontended figure as demand and weight; the node's controller_gbps and the route's \
                     links are shared by weighted max-min fairness (crates/topology/src/presets/build.rs, fair_share)"
                        .into(),
                );
                contended_by_fair_share(&m, &self.uncontended)
            }
        };
        m.bandwidth = Some(BandwidthGraph {
            uncontended: self.uncontended,
            contended: Some(contended),
            latency: Some(self.latency),
        });
        crate::validate::validate(&m, &origin)?;
        Ok(m)
    }
}

/// Round to 3 decimals (derived figures are shown as GB/s with MB/s resolution).
pub(super) fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_share_splits_a_full_link_and_respects_demands() {
        let mut m = crate::synthetic::synthetic("nodes=2,cpus=4,dies=1,local=10,remote=5").unwrap();
        m.controller_gbps = Some(vec![100.0, 100.0]);
        let (g0, g1, n1) = (GroupIdx(0), GroupIdx(1), NodeIdx(1));
        // g0 reads node 1 over the 5 GB/s link; g1 reads its own node.
        let r = fair_share(&m, &[(g0, n1, 100.0, 1.0), (g1, n1, 1.0, 1.0)]);
        assert!((r[0] - 5.0).abs() < 1e-9, "{r:?}");
        assert!((r[1] - 1.0).abs() < 1e-9, "{r:?}");
        m.controller_gbps = Some(vec![100.0, 4.0]);
        let r = fair_share(&m, &[(g0, n1, 100.0, 1.0), (g1, n1, 100.0, 1.0)]);
        assert!((r[0] - 2.0).abs() < 1e-9 && (r[1] - 2.0).abs() < 1e-9, "{r:?}");
        // Weights 1:3 split the 4 GB/s controller 1:3.
        let r = fair_share(&m, &[(g0, n1, 100.0, 1.0), (g1, n1, 100.0, 3.0)]);
        assert!((r[0] - 1.0).abs() < 1e-9 && (r[1] - 3.0).abs() < 1e-9, "{r:?}");
    }
}

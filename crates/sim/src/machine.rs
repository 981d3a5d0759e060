//! The machine side of the simulator: every memory controller, every directed link and every
//! (CPU group, memory node) path becomes a *resource* with a capacity and a queueing service
//! time; every (group, node) pair gets an idle latency and the list of resources its reads and
//! writes cross.
//!
//! Problem: machine models come with different amounts of detail (a full link map with routes
//! and a Bandwidth Graph for presets; only SLIT distances for a bare sysfs read).
//! Approach: use the most specific number available and fall back in a fixed order, recorded in
//! [`SimMachine::notes`]:
//! - idle latency: Bandwidth Graph latency matrix -> SLIT distance x local latency / 10 ->
//!   `default_local_ns` x (1 + hops/2);
//! - controller capacity: `controller_gbps` -> the largest uncontended Bandwidth Graph entry
//!   into the node -> 10 GB/s;
//! - link capacity: the link's own GB/s per direction; links are used only when `routes` exist;
//! - path capacity: the uncontended Bandwidth Graph entry of the pair (what one group alone
//!   reaches), when the machine has a Bandwidth Graph.

use crate::error::SimError;
use crate::model::ModelParams;
use ptb_topology::{GroupIdx, Machine, NodeIdx};

/// What a resource is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceKind {
    /// The memory controller of a node.
    Controller(NodeIdx),
    /// One direction of an interconnect link (`forward`: a -> b).
    Link { link: u16, forward: bool },
    /// A CPU group's own path to one node (its per-pair Bandwidth Graph limit).
    Path(GroupIdx, NodeIdx),
}

/// A shared resource with a capacity.
#[derive(Clone, Debug)]
pub struct Resource {
    pub kind: ResourceKind,
    /// Capacity in GB/s (= bytes per ns).
    pub capacity: f64,
    /// Queueing service time `s_R`, ns.
    pub service_ns: f64,
    /// Steepness `k` of the delay curve `q = s (u / (1 - u))^k` (1 unless perturbed).
    pub steepness: f64,
}

/// The machine as the simulator sees it.
#[derive(Clone, Debug)]
pub struct SimMachine {
    pub n_nodes: usize,
    pub n_groups: usize,
    pub resources: Vec<Resource>,
    /// Idle latency, ns, `[group * n_nodes + node]`.
    pub(crate) lat0: Vec<f64>,
    /// Resources crossed by a read from group to node, `[group * n_nodes + node]`.
    read_res: Vec<Vec<u32>>,
    /// Resources crossed by a write (write-back) from group to node.
    write_res: Vec<Vec<u32>>,
    /// Where each number came from.
    pub notes: Vec<String>,
}

impl SimMachine {
    /// Build from a machine model.
    pub fn new(m: &Machine, p: &ModelParams) -> Result<Self, SimError> {
        let nn = m.n_nodes();
        let ng = m.groups.len();
        if nn == 0 || ng == 0 {
            return Err(SimError::Machine(format!("machine `{}` has no nodes or no CPU groups", m.name)));
        }
        if nn > 254 {
            return Err(SimError::Machine(format!(
                "machine `{}` has {nn} nodes; the simulator handles at most 254",
                m.name
            )));
        }
        let mut notes = Vec::new();
        let mut resources = Vec::new();
        let bg = m.bandwidth.as_ref().map(|b| &b.uncontended).filter(|u| u.has_shape(ng, nn));
        // Controllers.
        for n in 0..nn {
            let node = NodeIdx::from_ix(n);
            let from_file = m.controller_gbps.as_ref().and_then(|v| v.get(n).copied()).filter(|v| *v > 0.0);
            let from_bg = bg.map(|b| (0..ng).map(|g| b.get(g, n)).fold(0.0, f64::max)).filter(|v| *v > 0.0);
            let cap = match (from_file, from_bg) {
                (Some(c), _) => c,
                (None, Some(c)) => {
                    notes.push(format!("controller of node {n}: capacity from the Bandwidth Graph ({c:.2} GB/s)"));
                    c
                }
                (None, None) => {
                    notes.push(format!("controller of node {n}: no capacity known, assumed 10 GB/s"));
                    10.0
                }
            };
            resources.push(Resource {
                kind: ResourceKind::Controller(node),
                capacity: cap.max(1e-3),
                service_ns: p.controller_service_ns,
                steepness: 1.0,
            });
        }
        // Directed links.
        let link_base = resources.len();
        for (i, l) in m.links.iter().enumerate() {
            for (forward, gbps) in [(true, l.gbps_ab), (false, l.gbps_ba)] {
                resources.push(Resource {
                    kind: ResourceKind::Link { link: i as u16, forward },
                    capacity: gbps.max(1e-3),
                    service_ns: p.link_service_ns,
                    steepness: 1.0,
                });
            }
        }
        let link_res = |link: usize, forward: bool| (link_base + 2 * link + usize::from(!forward)) as u32;
        let mut lat0 = vec![0.0; ng * nn];
        let mut read_res = vec![Vec::new(); ng * nn];
        let mut write_res = vec![Vec::new(); ng * nn];
        let lat_m = m.bandwidth.as_ref().and_then(|b| b.latency.as_ref()).filter(|l| l.has_shape(ng, nn));
        if lat_m.is_none() {
            notes.push(if m.distances.is_some() {
                format!("idle latency: SLIT distance x {} ns / 10 (no latency matrix)", p.default_local_ns)
            } else {
                format!("idle latency: {} ns x (1 + hops/2) (no latency matrix, no distances)", p.default_local_ns)
            });
        }
        if m.routes.is_empty() && !m.links.is_empty() {
            notes.push("links known but no routes: link contention is not modelled".into());
        }
        for g in 0..ng {
            let gi = GroupIdx::from_ix(g);
            let gnode = m.groups[g].node;
            for n in 0..nn {
                let ni = NodeIdx::from_ix(n);
                let k = g * nn + n;
                let route = m.route(gi, ni);
                let hops = route.map_or(0, |r| r.hops.len());
                let lat = lat_m
                    .map(|l| l.get(g, n))
                    .filter(|v| *v > 0.0)
                    .or_else(|| m.distance(gnode, ni).filter(|d| *d > 0.0).map(|d| p.default_local_ns * d / 10.0));
                lat0[k] =
                    lat.unwrap_or(p.default_local_ns * (1.0 + 0.5 * hops as f64 + if gnode == ni { 0.0 } else { 0.5 }));
                let ctrl = n as u32;
                let mut rr = vec![ctrl];
                let mut wr = vec![ctrl];
                if let Some(b) = bg {
                    let cap = b.get(g, n);
                    if cap > 0.0 {
                        let id = resources.len() as u32;
                        resources.push(Resource {
                            kind: ResourceKind::Path(gi, ni),
                            capacity: cap,
                            service_ns: p.path_service_ns,
                            steepness: 1.0,
                        });
                        rr.push(id);
                        wr.push(id);
                    }
                }
                if let Some(r) = route {
                    for h in &r.hops {
                        if h.link.ix() < m.links.len() {
                            rr.push(link_res(h.link.ix(), h.forward));
                        }
                    }
                    match &r.write_hops {
                        Some(w) => {
                            for h in w {
                                if h.link.ix() < m.links.len() {
                                    wr.push(link_res(h.link.ix(), h.forward));
                                }
                            }
                        }
                        None => {
                            for h in &r.hops {
                                if h.link.ix() < m.links.len() {
                                    wr.push(link_res(h.link.ix(), !h.forward));
                                }
                            }
                        }
                    }
                }
                read_res[k] = rr;
                write_res[k] = wr;
            }
        }
        Ok(SimMachine { n_nodes: nn, n_groups: ng, resources, lat0, read_res, write_res, notes })
    }

    /// Idle latency from group `g` to node `n`, ns.
    pub fn lat0(&self, g: usize, n: usize) -> f64 {
        self.lat0[g * self.n_nodes + n]
    }

    /// Resources a read from `g` to `n` crosses (controller first).
    pub fn read_res(&self, g: usize, n: usize) -> &[u32] {
        &self.read_res[g * self.n_nodes + n]
    }

    /// Resources a write from `g` to `n` crosses (controller first).
    pub fn write_res(&self, g: usize, n: usize) -> &[u32] {
        &self.write_res[g * self.n_nodes + n]
    }

    /// Indices of the link resources, with their link index and direction.
    pub fn links(&self) -> impl Iterator<Item = (usize, u16, bool)> + '_ {
        self.resources.iter().enumerate().filter_map(|(i, r)| match r.kind {
            ResourceKind::Link { link, forward } => Some((i, link, forward)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_machine_has_controllers_links_and_paths() {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=4,dies=2").unwrap();
        let s = SimMachine::new(&m, &ModelParams::default()).unwrap();
        assert_eq!(s.n_nodes, 2);
        assert_eq!(s.n_groups, 4);
        // local read: controller + path; remote read from node 1's first die: + one link.
        assert_eq!(s.read_res(0, 0).len(), 2);
        assert_eq!(s.read_res(2, 0).len(), 3);
        assert!(s.lat0(0, 1) > s.lat0(0, 0));
        assert_eq!(s.resources.iter().filter(|r| matches!(r.kind, ResourceKind::Controller(_))).count(), 2);
    }
}

//! Synthetic machines for tests and examples, from a short text spec.
//!
//! `nodes=4,cpus=8,dies=2` is 4 nodes with 8 CPUs each, split into 2 CPU groups (dies) per
//! node. Optional keys: `memonly=N` (extra CPU-less memory nodes), `mem=GiB` per node (16),
//! `local=GB/s` (10), `remote=GB/s` (5), `lat=ns` local latency (80), `rlat=ns` remote (130).
//! Nodes form a full mesh of symmetric links; memory-only nodes hang off node 0's first die
//! with a link at `remote/2` and twice the remote latency.

use crate::cpulist::CpuSet;
use crate::error::TopologyError;
use crate::ids::{CpuId, GroupIdx, LinkIdx, NodeId, NodeIdx};
use crate::machine::{BandwidthGraph, CpuGroup, DirLink, End, Link, Machine, MigrationCosts, ModelSource, Node, Route};
use crate::matrix::{Matrix, MatrixSource};

/// Parameters of a synthetic machine.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    pub nodes: usize,
    pub cpus_per_node: usize,
    pub dies_per_node: usize,
    pub memonly: usize,
    pub mem_gib: u64,
    pub local_gbps: f64,
    pub remote_gbps: f64,
    pub local_ns: f64,
    pub remote_ns: f64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            nodes: 2,
            cpus_per_node: 4,
            dies_per_node: 1,
            memonly: 0,
            mem_gib: 16,
            local_gbps: 10.0,
            remote_gbps: 5.0,
            local_ns: 80.0,
            remote_ns: 130.0,
        }
    }
}

impl SyntheticSpec {
    /// Parse `key=value` pairs separated by commas.
    pub fn parse(spec: &str) -> Result<Self, TopologyError> {
        let err = |reason: String| TopologyError::Synthetic { spec: spec.to_string(), reason };
        let mut s = SyntheticSpec::default();
        for kv in spec.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| err(format!("`{kv}` is not key=value")))?;
            let int = || v.trim().parse::<usize>().map_err(|_| err(format!("`{k}` wants a whole number, got `{v}`")));
            let flt = || match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(err(format!("`{k}` wants a positive number, got `{v}`"))),
            };
            match k.trim() {
                "nodes" => s.nodes = int()?,
                "cpus" => s.cpus_per_node = int()?,
                "dies" => s.dies_per_node = int()?,
                "memonly" => s.memonly = int()?,
                "mem" => s.mem_gib = int()? as u64,
                "local" => s.local_gbps = flt()?,
                "remote" => s.remote_gbps = flt()?,
                "lat" => s.local_ns = flt()?,
                "rlat" => s.remote_ns = flt()?,
                other => return Err(err(format!("unknown key `{other}`"))),
            }
        }
        if s.nodes == 0 || s.nodes > 256 {
            return Err(err("nodes must be 1..=256".into()));
        }
        if s.cpus_per_node == 0 || s.cpus_per_node > 1024 {
            return Err(err("cpus must be 1..=1024".into()));
        }
        if s.dies_per_node == 0 || s.cpus_per_node % s.dies_per_node != 0 {
            return Err(err("dies must be >= 1 and divide cpus".into()));
        }
        if s.memonly > 64 {
            return Err(err("memonly must be <= 64".into()));
        }
        Ok(s)
    }

    /// Build the machine.
    pub fn build(&self, spec_text: &str) -> Machine {
        let total = self.nodes + self.memonly;
        let per_die = self.cpus_per_node / self.dies_per_node;
        let mut nodes = Vec::new();
        let mut groups = Vec::new();
        for n in 0..total {
            let idx = NodeIdx::from_ix(n);
            let mut node = Node {
                id: NodeId(n as u32),
                idx,
                cpus: CpuSet::new(),
                memory_bytes: self.mem_gib << 30,
                groups: vec![],
            };
            if n < self.nodes {
                for d in 0..self.dies_per_node {
                    let first = n * self.cpus_per_node + d * per_die;
                    let cpus: CpuSet = (first..first + per_die).map(|c| CpuId(c as u32)).collect();
                    for c in cpus.iter() {
                        node.cpus.insert(c);
                    }
                    let g = GroupIdx::from_ix(groups.len());
                    groups.push(CpuGroup { idx: g, name: format!("n{n}d{d}"), node: idx, cpus });
                    node.groups.push(g);
                }
            }
            nodes.push(node);
        }
        // Links: full mesh between the first dies of CPU nodes; dies of one node joined to the
        // node's first die; memory-only nodes attached to node 0's first die.
        let first_die = |n: usize| GroupIdx::from_ix(n * self.dies_per_node);
        let mut links = Vec::new();
        let link = |a: End, b: End, g: f64, w: &str| Link { a, b, gbps_ab: g, gbps_ba: g, width: w.to_string() };
        for a in 0..self.nodes {
            for b in a + 1..self.nodes {
                links.push(link(End::Group(first_die(a)), End::Group(first_die(b)), self.remote_gbps, "mesh"));
            }
            for d in 1..self.dies_per_node {
                let g = GroupIdx::from_ix(a * self.dies_per_node + d);
                links.push(link(End::Group(first_die(a)), End::Group(g), self.local_gbps, "on-package"));
            }
        }
        let mem_link0 = links.len();
        for m in 0..self.memonly {
            let node = NodeIdx::from_ix(self.nodes + m);
            links.push(link(End::Group(first_die(0)), End::Memory(node), self.remote_gbps / 2.0, "cxl"));
        }
        let find = |links: &[Link], a: End, b: End| -> Option<DirLink> {
            links
                .iter()
                .position(|l| l.a == a && l.b == b)
                .map(|i| DirLink { link: LinkIdx::from_ix(i), forward: true })
                .or_else(|| {
                    links
                        .iter()
                        .position(|l| l.a == b && l.b == a)
                        .map(|i| DirLink { link: LinkIdx::from_ix(i), forward: false })
                })
        };
        // Route data from the memory's die to the group: memory-die -> [first die of group's node] -> group.
        let mut routes = Vec::new();
        let mut lat = vec![vec![0.0; total]; groups.len()];
        let mut bw = vec![vec![0.0; total]; groups.len()];
        for g in &groups {
            let gn = g.node.ix();
            let gdie = first_die(gn);
            for n in 0..total {
                let mut hops = Vec::new();
                let (src, extra_ns, cap) = if n < self.nodes {
                    (
                        End::Group(first_die(n)),
                        if n == gn { 0.0 } else { self.remote_ns - self.local_ns },
                        if n == gn { self.local_gbps } else { self.remote_gbps },
                    )
                } else {
                    let mi = mem_link0 + (n - self.nodes);
                    hops.push(DirLink { link: LinkIdx::from_ix(mi), forward: false });
                    (
                        End::Group(first_die(0)),
                        2.0 * (self.remote_ns - self.local_ns)
                            + if gn == 0 { 0.0 } else { self.remote_ns - self.local_ns },
                        self.remote_gbps / 2.0,
                    )
                };
                if src != End::Group(gdie) {
                    hops.extend(find(&links, src, End::Group(gdie)));
                }
                if g.idx != gdie {
                    hops.extend(find(&links, End::Group(gdie), End::Group(g.idx)));
                }
                routes.push(Route { group: g.idx, node: NodeIdx::from_ix(n), hops, write_hops: None });
                lat[g.idx.ix()][n] = self.local_ns + extra_ns;
                bw[g.idx.ix()][n] = cap;
            }
        }
        let dist: Vec<Vec<f64>> = (0..total)
            .map(|a| {
                (0..total)
                    .map(|b| {
                        if a == b {
                            10.0
                        } else if a < self.nodes && b < self.nodes {
                            20.0
                        } else {
                            30.0
                        }
                    })
                    .collect()
            })
            .collect();
        let contended: Vec<Vec<f64>> =
            bw.iter().map(|r| r.iter().map(|v| v / self.nodes.max(1) as f64 * 1.5).collect()).collect();
        Machine {
            name: format!("synthetic({spec_text})"),
            description: format!(
                "synthetic: {} nodes x {} CPUs, {} dies/node, {} memory-only",
                self.nodes, self.cpus_per_node, self.dies_per_node, self.memonly
            ),
            source: ModelSource::Synthetic { spec: spec_text.to_string() },
            page_size: 4096,
            line_size: 64,
            nodes,
            groups,
            distances: Some(Matrix::new("SLIT", MatrixSource::Derived, dist)),
            links,
            routes,
            controller_gbps: Some(vec![self.local_gbps * 1.5; total]),
            bandwidth: Some(BandwidthGraph {
                uncontended: Matrix::new("GB/s", MatrixSource::Derived, bw),
                contended: Some(Matrix::new("GB/s", MatrixSource::Derived, contended)),
                latency: Some(Matrix::new("ns", MatrixSource::Derived, lat)),
            }),
            costs: MigrationCosts::default(),
            clock_ghz: None,
            sampler: None,
            notes: vec!["synthetic machine: every number is made up for tests".into()],
        }
    }
}

/// Build a synthetic machine from its text spec.
pub fn synthetic(spec: &str) -> Result<Machine, TopologyError> {
    Ok(SyntheticSpec::parse(spec)?.build(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_four_nodes_with_dies_and_a_memory_node() {
        let m = synthetic("nodes=4,cpus=8,dies=2,memonly=1").unwrap();
        assert_eq!(m.n_nodes(), 5);
        assert_eq!(m.n_cpus(), 32);
        assert_eq!(m.groups.len(), 8);
        assert!(!m.nodes[4].has_cpus() && m.nodes[4].has_memory());
        assert_eq!(m.routes.len(), 8 * 5);
        crate::validate::validate(&m, "test").unwrap();
    }

    #[test]
    fn refuses_bad_specs() {
        assert!(synthetic("nodes=0").is_err());
        assert!(synthetic("cpus=7,dies=2").is_err());
        assert!(synthetic("foo=1").is_err());
        assert!(synthetic("local=-1").is_err());
    }
}

#[cfg(test)]
mod file_tests {
    #[test]
    fn machine_files_round_trip() {
        let m = super::synthetic("nodes=2,cpus=4,dies=2,memonly=1").unwrap();
        let dir = tempfile::tempdir().unwrap();
        for name in ["m.toml", "m.json"] {
            let p = dir.path().join(name);
            crate::file::save(&m, &p).unwrap();
            assert_eq!(crate::file::load(&p).unwrap(), m);
        }
    }
}

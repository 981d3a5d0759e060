//! `cxl-1s`: one socket plus a CXL memory expander seen as a CPU-less NUMA node
//! (machines.md section 3, published Intel MLC figures).

use super::build::{grp, mem, nodes_and_groups, AddressSampler, GroupSpec, LinkSet, NodeSpec, Parts};
use crate::error::TopologyError;
use crate::machine::{Machine, MigrationCosts};
use crate::matrix::{Matrix, MatrixSource};

pub const NAME: &str = "cxl-1s";
pub const DESCRIPTION: &str =
    "one socket + a CPU-less CXL memory node (published MLC: 84.5 vs 564.5 ns, 30.6 vs 4.8 GB/s)";

/// Published (s3): local DRAM idle latency, ns.
pub const LOCAL_NS: f64 = 84.5;
/// Published (s3): CXL node idle latency, ns.
pub const CXL_NS: f64 = 564.5;
/// Published (s3): local DRAM read bandwidth, GB/s.
pub const LOCAL_GBPS: f64 = 30.6;
/// Published (s3): CXL node read bandwidth, GB/s.
pub const CXL_GBPS: f64 = 4.8;
/// Assumed: host cores (not published with these figures).
pub const CORES: u32 = 16;
/// Assumed: host DRAM and CXL capacity, GiB (not published).
pub const HOST_MEM_GIB: u64 = 64;
pub const CXL_MEM_GIB: u64 = 64;

/// Build the preset.
pub fn machine() -> Result<Machine, TopologyError> {
    let nodes = [NodeSpec { id: 0, mem_gib: HOST_MEM_GIB }, NodeSpec { id: 1, mem_gib: CXL_MEM_GIB }];
    let groups = [GroupSpec { name: "socket0".into(), node: 0, first_cpu: 0, n_cpus: CORES }];
    let (nodes, groups) = nodes_and_groups(&nodes, &groups);
    let mut links = LinkSet::default();
    // a = the socket, b = the expander's memory; both directions at the published read figure.
    links.add(grp(0), mem(1), CXL_GBPS, CXL_GBPS, "CXL");
    let lat = Matrix::new("ns", MatrixSource::Published, vec![vec![LOCAL_NS, CXL_NS]]);
    let distances = super::build::slit_from_latency(&nodes, &lat);
    Parts {
        name: NAME,
        description: DESCRIPTION,
        nodes,
        groups,
        distances,
        links,
        routes: vec![(0, 0, vec![grp(0)], None), (0, 1, vec![mem(1), grp(0)], None)],
        controller_gbps: vec![LOCAL_GBPS, CXL_GBPS],
        uncontended: Matrix::new("GB/s", MatrixSource::Published, vec![vec![LOCAL_GBPS, CXL_GBPS]]),
        contended: None,
        latency: lat,
        costs: MigrationCosts::default(),
        clock_ghz: 2.0,
        // An Intel host (MLC figures): PEBS load latency and precise stores, Intel SDM vol. 3B.
        sampler: AddressSampler::PebsLoads { stores: true },
        notes: vec![
            "source: published Intel MLC measurements of a CXL memory expander seen as a CPU-less node \
             (single-socket host): latency 84.5 / 564.5 ns and bandwidth 30.6 / 4.8 GB/s are published"
                .into(),
            "CPUs: 16 cores (assumed; not published with these figures); memory 64 GiB DRAM + 64 GiB CXL \
             (assumed)"
                .into(),
            "node 1 has memory and no CPUs: pages can go there, threads cannot".into(),
            "link: CXL, 4.8 GB/s each way (derived: the published read figure; write figure not published)".into(),
            "controller_gbps: derived: the published read bandwidth of each node".into(),
            "distances: derived from the latency matrix: round(10 x 564.5 / 84.5) = 67".into(),
            "migration costs: defaults (published move_pages measurements on a 2-socket AMD Zen 3 machine: 1.1 us per 4 KiB page)".into(),
        ],
    }
    .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GroupIdx, NodeIdx};

    #[test]
    fn cxl_node_has_memory_and_no_cpus() {
        let m = machine().unwrap();
        assert_eq!(m.cpu_nodes(), vec![NodeIdx(0)]);
        assert_eq!(m.memory_nodes(), vec![NodeIdx(0), NodeIdx(1)]);
        assert!(!m.nodes[1].has_cpus() && m.nodes[1].has_memory());
        assert_eq!(m.bg(GroupIdx(0), NodeIdx(1)), Some(4.8));
        assert_eq!(m.latency_ns(GroupIdx(0), NodeIdx(1)), Some(564.5));
        assert!(matches!(m.links[0].b, crate::End::Memory(NodeIdx(1))));
        assert_eq!(m.distance(NodeIdx(1), NodeIdx(0)), Some(67.0));
    }
}

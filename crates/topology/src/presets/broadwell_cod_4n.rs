//! `broadwell-cod-4n`: 2 x Intel Xeon E5-2680 v4 (Broadwell, 14 cores per socket) in
//! cluster-on-die mode: 2 nodes per socket of 7 cores each, 4 nodes. Latency and bandwidth
//! matrices are the published Intel MLC matrices of machines.md section 3, verbatim.
//!
//! Interconnect (chosen to match the published matrices' structure): the two COD halves of
//! a socket share the on-die ring (one link per socket); the sockets are joined by QPI between
//! node 0 and node 2, because node 0 -> node 2 (185.7 ns) is nearer than node 0 -> node 3
//! (196.0) and node 2 -> node 0 (185.3) nearer than node 2 -> node 1 (195.0).

use super::build::{grp, nodes_and_groups, AddressSampler, GroupSpec, LinkSet, NodeSpec, Parts};
use crate::error::TopologyError;
use crate::machine::{End, Machine, MigrationCosts};
use crate::matrix::{Matrix, MatrixSource};

pub const NAME: &str = "broadwell-cod-4n";
pub const DESCRIPTION: &str =
    "2 x Xeon E5-2680 v4 (Broadwell) in cluster-on-die mode: 4 nodes x 7 cores, published MLC matrices";

/// Published (s3): idle latency ns, row = CPU node, column = memory node.
pub const LATENCY_NS: [[f64; 4]; 4] = [
    [73.8, 151.1, 185.7, 196.0],
    [141.1, 76.5, 184.6, 194.2],
    [185.3, 195.0, 73.7, 150.9],
    [184.8, 194.6, 141.1, 76.4],
];
/// Published (s3): read bandwidth MB/s, row = CPU node, column = memory node.
pub const BANDWIDTH_MBPS: [[f64; 4]; 4] = [
    [36482.0, 18910.0, 16039.0, 15128.0],
    [20194.0, 36376.0, 15813.0, 14947.0],
    [16091.0, 15191.0, 36507.0, 18850.0],
    [15776.0, 14940.0, 20152.0, 36348.0],
];
/// Published model core count: the E5-2680 v4 has 14 cores; cluster-on-die splits them 7 + 7.
pub const CORES_PER_NODE: u32 = 7;
/// Assumed: 4 DDR4 channels x 16 GiB per socket, 2 channels per COD node (not published).
pub const MEM_GIB: u64 = 32;

const N: usize = 4;

/// The node that carries QPI in socket `s`.
fn qpi_node(s: usize) -> usize {
    2 * s
}

/// Nodes crossed by data from memory node `from` to CPU node `to`.
fn path(from: usize, to: usize) -> Vec<usize> {
    let mut p = vec![from];
    if from / 2 != to / 2 {
        for hop in [qpi_node(from / 2), qpi_node(to / 2)] {
            if p.last() != Some(&hop) {
                p.push(hop);
            }
        }
    }
    if p.last() != Some(&to) {
        p.push(to);
    }
    p
}

/// Build the preset.
pub fn machine() -> Result<Machine, TopologyError> {
    let nodes: Vec<NodeSpec> = (0..N).map(|k| NodeSpec { id: k as u32, mem_gib: MEM_GIB }).collect();
    let groups: Vec<GroupSpec> = (0..N)
        .map(|k| GroupSpec {
            name: format!("s{}.cod{}", k / 2, k % 2),
            node: k,
            first_cpu: CORES_PER_NODE * k as u32,
            n_cpus: CORES_PER_NODE,
        })
        .collect();
    let (nodes, groups) = nodes_and_groups(&nodes, &groups);
    let gb: Vec<Vec<f64>> = BANDWIDTH_MBPS.iter().map(|r| r.iter().map(|v| v / 1000.0).collect()).collect();

    // Each link direction gets the largest published pair bandwidth whose data crosses it.
    let carried = |a: usize, b: usize| -> f64 {
        let mut best: f64 = 0.0;
        for (cpu, row) in gb.iter().enumerate() {
            for (memn, v) in row.iter().enumerate() {
                if path(memn, cpu).windows(2).any(|w| w == [a, b]) {
                    best = best.max(*v);
                }
            }
        }
        best
    };
    let mut links = LinkSet::default();
    links.add(grp(0), grp(1), carried(0, 1), carried(1, 0), "on-die ring (COD)");
    links.add(grp(2), grp(3), carried(2, 3), carried(3, 2), "on-die ring (COD)");
    links.add(grp(0), grp(2), carried(0, 2), carried(2, 0), "QPI");

    let mut routes = Vec::new();
    for g in 0..N {
        for n in 0..N {
            routes.push((g, n, path(n, g).into_iter().map(grp).collect::<Vec<End>>(), None));
        }
    }
    let lat = Matrix::new("ns", MatrixSource::Published, LATENCY_NS.iter().map(|r| r.to_vec()).collect());
    let distances = super::build::slit_from_latency(&nodes, &lat);
    let controller: Vec<f64> = (0..N).map(|k| gb[k][k]).collect();

    Parts {
        name: NAME,
        description: DESCRIPTION,
        nodes,
        groups,
        distances,
        links,
        routes,
        controller_gbps: controller,
        uncontended: Matrix::new("GB/s", MatrixSource::Published, gb),
        contended: None,
        latency: lat,
        costs: MigrationCosts::default(),
        clock_ghz: 2.4,
        // Broadwell: PEBS load latency (MEM_TRANS_RETIRED.LOAD_LATENCY) and precise stores
        // (MEM_UOPS_RETIRED.ALL_STORES, perf's `mem-stores`): Intel SDM vol. 3B.
        sampler: AddressSampler::PebsLoads { stores: true },
        notes: vec![
            "source: published Intel Memory Latency Checker (MLC) latency and bandwidth matrices of a 4-node \
             2 x Xeon E5-2680 v4 cluster-on-die machine (verbatim; MB/s / 1000 = GB/s)"
                .into(),
            "CPUs: 14 cores per socket (the E5-2680 v4's count), 7 per COD node, one CPU per core (SMT siblings \
             not modelled); node k = CPUs 7k..7k+6; memory 32 GiB per node (assumed)"
                .into(),
            "links: chosen from the matrices' structure: ring between the COD halves of each socket, QPI between \
             nodes 0 and 2 (node 0 is nearest to node 2 and vice versa); each direction's GB/s is derived as \
             the largest published pair bandwidth whose data crosses it (a lower bound)"
                .into(),
            "controller_gbps: derived: each node's published local bandwidth (the all-reads peak is not \
             published for this machine; on the Skylake and Ice Lake rows it equals the local figure)"
                .into(),
            "distances: derived from the latency matrix: round(10 x lat / local)".into(),
            "asymmetry kept as published: node 1 -> node 0 20194 MB/s vs node 0 -> node 1 18910 MB/s".into(),
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
    fn matrices_equal_the_published_numbers() {
        let m = machine().unwrap();
        assert_eq!((m.n_nodes(), m.n_cpus(), m.groups.len()), (4, 28, 4));
        for (c, row) in LATENCY_NS.iter().enumerate() {
            for (n, v) in row.iter().enumerate() {
                assert_eq!(m.latency_ns(GroupIdx(c as u16), NodeIdx(n as u16)), Some(*v));
                let bw = m.bg(GroupIdx(c as u16), NodeIdx(n as u16)).unwrap();
                assert!((bw * 1000.0 - BANDWIDTH_MBPS[c][n]).abs() < 1e-6);
            }
        }
        assert_eq!(m.bg(GroupIdx(1), NodeIdx(0)), Some(20.194));
        assert_eq!(m.bg(GroupIdx(0), NodeIdx(1)), Some(18.910));
        let bw = m.bandwidth.as_ref().unwrap();
        assert_eq!(bw.uncontended.source, MatrixSource::Published);
        assert_eq!(bw.latency.as_ref().unwrap().source, MatrixSource::Published);
        // Node 1 reaches node 3 over ring, QPI and ring.
        assert_eq!(m.route(GroupIdx(1), NodeIdx(3)).unwrap().hops.len(), 3);
    }
}

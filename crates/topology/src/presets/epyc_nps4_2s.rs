//! `epyc-nps4-2s`: 2 x AMD EPYC 7763-like (64 Zen 3 cores per socket) in NPS4 mode: 4 nodes
//! per socket, 16 cores (2 CCDs of 8) per node, 8 nodes.
//!
//! Only the latency ratios are published (machines.md s3: same-package node ~1.7x local,
//! other package ~3.3x); everything else is derived from the part's interfaces and marked.
//! The memory of a node sits on a quadrant of the I/O die, not next to a CCD, so the fabric
//! is modelled between memory ends: an Infinity Fabric link between every two quadrants of a
//! socket, and one xGMI link between quadrant q of socket 0 and quadrant q of socket 1. Both
//! CCDs of a node reach their own quadrant's memory locally (empty route).

use super::build::{mem, nodes_and_groups, r3, AddressSampler, GroupSpec, LinkSet, NodeSpec, Parts};
use crate::error::TopologyError;
use crate::machine::{End, Machine, MigrationCosts};
use crate::matrix::{Matrix, MatrixSource};

pub const NAME: &str = "epyc-nps4-2s";
pub const DESCRIPTION: &str =
    "2 x AMD EPYC 7763-like (64 cores each) in NPS4: 8 nodes x 16 cores, 2 CCDs per node; latency ratios published";

/// Published (s3): a node in the same package is about 1.7x local latency.
pub const SAME_PACKAGE_RATIO: f64 = 1.7;
/// Published (s3): a node in the other package is about 3.3x local latency.
pub const OTHER_PACKAGE_RATIO: f64 = 3.3;
/// Derived (assumed): idle local latency of a Zen 3 NPS4 node, ns (not published).
pub const LAT_LOCAL_NS: f64 = 90.0;
/// Derived: 2 DDR4-3200 channels per NPS4 node = 51.2 GB/s peak, 80% sustained.
pub const CONTROLLER_GBPS: f64 = 0.8 * 51.2;
/// Derived: one CCD reading local memory: its GMI link reads 32 B per fabric clock at
/// 1.6 GHz = 51.2 GB/s, 80% sustained; remote figures scale with latency (fixed MLP).
pub const BW_CCD_LOCAL: f64 = 0.8 * 51.2;
/// Derived (assumed): Infinity Fabric bandwidth between two quadrants of one I/O die, GB/s
/// per direction.
pub const IF_GBPS: f64 = 64.0;
/// Derived: one xGMI-2 x16 link at 16 GT/s = 32 GB/s per direction raw, 80% sustained.
pub const XGMI_GBPS: f64 = 0.8 * 32.0;
/// Assumed: 2 channels x 32 GiB per node.
pub const MEM_GIB: u64 = 64;

const N: usize = 8;

fn socket(n: usize) -> usize {
    n / 4
}

/// Memory ends crossed by data from node `from`'s memory to node `to`'s quadrant: on the
/// memory's I/O die to the quadrant paired with `to`, then over xGMI.
fn path(from: usize, to: usize) -> Vec<usize> {
    if from == to {
        return vec![from];
    }
    if socket(from) == socket(to) {
        return vec![from, to];
    }
    let partner = (to + 4) % 8;
    if partner == from {
        vec![from, to]
    } else {
        vec![from, partner, to]
    }
}

/// Build the preset.
pub fn machine() -> Result<Machine, TopologyError> {
    let nodes: Vec<NodeSpec> = (0..N).map(|k| NodeSpec { id: k as u32, mem_gib: MEM_GIB }).collect();
    let groups: Vec<GroupSpec> = (0..2 * N)
        .map(|i| GroupSpec {
            name: format!("n{}.ccd{}", i / 2, i % 2),
            node: i / 2,
            first_cpu: 8 * i as u32,
            n_cpus: 8,
        })
        .collect();
    let (nodes, groups) = nodes_and_groups(&nodes, &groups);
    let mut links = LinkSet::default();
    for s in 0..2 {
        for a in 4 * s..4 * s + 4 {
            for b in a + 1..4 * s + 4 {
                links.add(mem(a), mem(b), IF_GBPS, IF_GBPS, "Infinity Fabric (I/O die)");
            }
        }
    }
    for q in 0..4 {
        links.add(mem(q), mem(q + 4), XGMI_GBPS, XGMI_GBPS, "xGMI x16");
    }
    let mut routes = Vec::new();
    let mut unc = vec![vec![0.0; N]; 2 * N];
    let mut lat = vec![vec![0.0; N]; 2 * N];
    for g in 0..2 * N {
        let home = g / 2;
        for n in 0..N {
            let ratio = if n == home {
                1.0
            } else if socket(n) == socket(home) {
                SAME_PACKAGE_RATIO
            } else {
                OTHER_PACKAGE_RATIO
            };
            let p = path(n, home);
            let ends: Vec<End> = if p.len() == 1 { vec![mem(n)] } else { p.iter().map(|k| mem(*k)).collect() };
            let bottleneck = p
                .windows(2)
                .filter_map(|w| links.dir(mem(w[0]), mem(w[1])))
                .map(|h| super::build::hop_gbps(&links.links, &h))
                .fold(CONTROLLER_GBPS, f64::min);
            lat[g][n] = r3(LAT_LOCAL_NS * ratio);
            unc[g][n] = r3(bottleneck.min(BW_CCD_LOCAL / ratio));
            routes.push((g, n, ends, None));
        }
    }
    let latency = Matrix::new("ns", MatrixSource::Derived, lat);
    let distances = super::build::slit_from_latency(&nodes, &latency);
    Parts {
        name: NAME,
        description: DESCRIPTION,
        nodes,
        groups,
        distances,
        links,
        routes,
        controller_gbps: vec![r3(CONTROLLER_GBPS); N],
        uncontended: Matrix::new("GB/s", MatrixSource::Derived, unc),
        contended: None,
        latency,
        costs: MigrationCosts::default(),
        clock_ghz: 2.45,
        // EPYC 7763 (Zen 3): IBS op with op counting, no last-level-miss filter (Zen 4 added
        // l3missonly): AMD's PPR for family 19h model 01h.
        sampler: AddressSampler::IbsOp { op_count: true, miss_filter: false },
        notes: vec![
            "source: one published report on 2-socket AMD EPYC in NPS4 mode (same-package node ~1.7x local \
             latency, other package ~3.3x); the part is assumed EPYC 7763-like"
                .into(),
            "CPUs: 64 cores per socket, 16 per NPS4 node, 2 CCDs of 8 cores per node (Zen 3: one CCX per CCD); \
             node k = CPUs 16k..16k+15; one CPU per core (SMT not modelled); 64 GiB per node (assumed)"
                .into(),
            "latency ns: derived: 90 ns local (assumed) x the published ratios 1.0 / 1.7 / 3.3".into(),
            "uncontended GB/s: derived: one CCD reads local memory at 41 GB/s (80% of its 51.2 GB/s GMI read \
             path), remote at 41 / latency ratio, capped by the route's slowest link"
                .into(),
            "controller_gbps: derived: 2 x DDR4-3200 channels (51.2 GB/s) x 80% = 41 GB/s per node".into(),
            "links: derived: Infinity Fabric between quadrants 64 GB/s each way (assumed); xGMI x16 at 16 GT/s \
             25.6 GB/s each way (80% of 32); memory of quadrant n reaches socket-mates directly and the other \
             socket over its own-socket fabric to the paired quadrant, then xGMI"
                .into(),
            "distances: derived from the latency matrix: round(10 x lat / local) (firmware on such machines \
             typically reports 10/12/32)"
                .into(),
            "migration costs: defaults (published move_pages measurements on a 2-socket AMD Zen 3 machine: 1.1 us per 4 KiB page, 3.73 GB/s)"
                .into(),
        ],
    }
    .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GroupIdx, NodeIdx};

    #[test]
    fn epyc_shape_and_published_ratios() {
        let m = machine().unwrap();
        assert_eq!((m.n_nodes(), m.n_cpus(), m.groups.len()), (8, 128, 16));
        assert!(m.nodes.iter().all(|n| n.groups.len() == 2 && n.cpus.len() == 16));
        let l = |g: u16, n: u16| m.latency_ns(GroupIdx(g), NodeIdx(n)).unwrap();
        assert!((l(0, 1) / l(0, 0) - 1.7).abs() < 1e-6 && (l(0, 5) / l(0, 0) - 3.3).abs() < 1e-6);
        assert_eq!(m.bandwidth.as_ref().unwrap().uncontended.source, MatrixSource::Derived);
        assert!(m.bg(GroupIdx(0), NodeIdx(0)).unwrap() > m.bg(GroupIdx(0), NodeIdx(1)).unwrap());
    }
}

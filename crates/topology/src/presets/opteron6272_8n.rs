//! `opteron6272-8n`: the asymmetric 8-node AMD Opteron 6272 ("machine A" of AsymSched,
//! machines.md section 2): 4 packages x 2 dies = 8 nodes of 8 cores, DRAM on every node.
//!
//! The link map is not published, so it is built from the published firmware distance table
//! of a 4-socket Opteron 6272 server (16 = one hop: 18 links; nodes 2 and 4 have six
//! neighbours) plus the one-way route that is published for machine A. Choices, each made so
//! that a published effect appears:
//!
//! - **Packages** (a perfect matching of the adjacency): {0,1}, {2,5}, {3,4}, {6,7}. The
//!   intra-package links are 16-bit. 3-4 is intra-package, which is why "link 4-3 carries only
//!   nodes 4 and 3" (no 2-hop route is sent over it).
//! - **Cross-package 16-bit**: 0-6 and 1-7, whose dies have four neighbours and so free HT
//!   ports; with the two intra-package links they close a 16-bit ring 0-1-7-6-0 that has no
//!   triangle. Subsets such as {0,1,7} (a 2-hop pair 0-7 routed over 6) therefore have the
//!   most bandwidth between their nodes although they are not all one hop apart: "the best
//!   subset is the one with the most total bandwidth, not the fewest hops".
//! - **16/8-bit** (asymmetric, published kind: one direction at 3/4 of a 16-bit link, the other
//!   at 8-bit speed): 2-4 (fast 2->4) and 5-7 (fast 7->5).
//! - **8-bit**: the other ten links, including 2-3, which carries the routes of nodes
//!   0, 1, 2, 3, 6, 7 as published; subsets whose routes share it (e.g. {0,3,6}) are the worst.
//! - **One-way route** (published): node 7 sends to node 3 directly, node 3 answers through
//!   node 2. The firmware table has no 3-7 link, so a 19th link 7-3 (8-bit) is added and only
//!   its 7->3 direction is routed: reads by node 3 from node 7 and writes by node 7 to node 3
//!   use it; reads by node 7 from node 3 come back 3->2->7 (write path of group 3 to node 7 too).
//! - **2-hop routes** (chosen where not published): 0-3 via 2, 1-2 via 3, 3-6 via 2 and
//!   3->7 via 2 (published: they load link 2-3); 0-5 via 4, 0-7 via 6, 1-5 via 7, 1-6 via 0,
//!   4-7 via 6, 5-6 via 7.

use super::build::{grp, nodes_and_groups, r3, AddressSampler, GroupSpec, LinkSet, NodeSpec, Parts};
use crate::error::TopologyError;
use crate::machine::{End, Machine, MigrationCosts};
use crate::matrix::{Matrix, MatrixSource};

pub const NAME: &str = "opteron6272-8n";
pub const DESCRIPTION: &str =
    "AMD Opteron 6272, 8 nodes x 8 cores (AsymSched machine A): 16-bit, 8-bit and 16/8-bit links, one-way route 7->3";

/// Memory per node, GiB. Published: s2 "DRAM on every node (256 GB)" / 8.
pub const MEM_GIB: u64 = 32;

/// Published firmware SLIT of a 4-socket Opteron 6272 server (machines.md s2; a different
/// machine than machine A, firmware values).
pub const SLIT: [[f64; 8]; 8] = [
    [10., 16., 16., 22., 16., 22., 16., 22.],
    [16., 10., 22., 16., 16., 22., 22., 16.],
    [16., 22., 10., 16., 16., 16., 16., 16.],
    [22., 16., 16., 10., 16., 16., 22., 22.],
    [16., 16., 16., 16., 10., 16., 16., 22.],
    [22., 22., 16., 16., 16., 10., 22., 16.],
    [16., 22., 16., 22., 16., 22., 10., 16.],
    [22., 16., 16., 22., 22., 16., 16., 10.],
];

/// Derived: effective GB/s per direction of an 8-bit HT3 link = the published "node 7 writes
/// to node 3 at 4 GB/s" over the direct (8-bit) route.
pub const LINK_8BIT_GBPS: f64 = 4.0;
/// Derived: a 16-bit link = 2 x 8-bit (12.8 vs 6.4 GB/s raw at 6.4 GT/s, published s2).
pub const LINK_16BIT_GBPS: f64 = 2.0 * LINK_8BIT_GBPS;
/// Derived: fast direction of a 16/8-bit link = 3/4 of a 16-bit link (published ratio).
pub const LINK_16_8_FAST_GBPS: f64 = 0.75 * LINK_16BIT_GBPS;

/// Derived (assumed): one node's 8 cores reading local memory with a streaming kernel, GB/s.
/// Not published for machine A; the thesis' 4 GB/s is for a random-access kernel. Sets the
/// latency-bound part of the uncontended matrix: bw = BW_LOCAL x LAT_LOCAL / latency.
pub const BW_LOCAL: f64 = 8.0;
/// Published (s2): "node 7 ... reads [from node 3] at 2 GB/s" (one-way route via node 2).
pub const BW_7_READS_3: f64 = 2.0;
/// Derived (assumed): memory-controller capacity of one die, GB/s: ~62% of DDR3-1600
/// dual-channel peak (25.6 GB/s). Above the links so that links, not controllers, decide
/// which node subsets are fast (the AsymSched observation). Fitted value welcome.
pub const CONTROLLER_GBPS: f64 = 16.0;

/// Derived (assumed): idle local latency, ns (not published; typical of DDR3 Opterons).
pub const LAT_LOCAL_NS: f64 = 100.0;
/// Derived: ns per link crossed = 80 cycles / 2.1 GHz = 38.1 ns (published: "an idle 2-hop
/// access costs ~80 cycles more than a 1-hop one"; 2.1 GHz is the 6272's base clock).
pub const LAT_HOP_NS: f64 = 80.0 / 2.1;

/// Derived from s4: stock migrate_pages on this 2015 AMD machine, ~5 s per GB
/// (19.07 us per 4 KiB page, 0.2 GB/s). AsymSched's parallel migration (0.3 s/GB) is the
/// policy's own mechanism and is not the machine's default.
pub const PAGE_US: f64 = 5.0e6 / 262_144.0;
/// Derived: 1 GB / 5 s.
pub const COPY_GBPS: f64 = 0.2;

const N: usize = 8;

/// Link kinds of the 18 SLIT links (a < b), with the fast direction of 16/8 links.
#[derive(Clone, Copy)]
enum Kind {
    W16,
    W8,
    /// 16/8-bit, fast from the first node to the second.
    W16_8 {
        fast_from: usize,
    },
}

const LINKS: [(usize, usize, Kind); 18] = [
    (0, 1, Kind::W16),
    (2, 5, Kind::W16),
    (3, 4, Kind::W16),
    (6, 7, Kind::W16),
    (0, 6, Kind::W16),
    (1, 7, Kind::W16),
    (2, 4, Kind::W16_8 { fast_from: 2 }),
    (5, 7, Kind::W16_8 { fast_from: 7 }),
    (0, 2, Kind::W8),
    (0, 4, Kind::W8),
    (1, 3, Kind::W8),
    (1, 4, Kind::W8),
    (2, 3, Kind::W8),
    (2, 6, Kind::W8),
    (2, 7, Kind::W8),
    (3, 5, Kind::W8),
    (4, 5, Kind::W8),
    (4, 6, Kind::W8),
];

/// Intermediate node of each 2-hop pair (both directions unless overridden by the one-way
/// route 7->3).
const VIA: [((usize, usize), usize); 10] = [
    ((0, 3), 2),
    ((0, 5), 4),
    ((0, 7), 6),
    ((1, 2), 3),
    ((1, 5), 7),
    ((1, 6), 0),
    ((3, 6), 2),
    ((3, 7), 2),
    ((4, 7), 6),
    ((5, 6), 7),
];

/// Nodes crossed by data going from node `src` to node `dst`.
fn data_path(src: usize, dst: usize) -> Vec<usize> {
    if src == dst {
        return vec![src];
    }
    if (src, dst) == (7, 3) {
        return vec![7, 3]; // published one-way direct route
    }
    if SLIT[src][dst] == 16.0 {
        return vec![src, dst];
    }
    let key = (src.min(dst), src.max(dst));
    let via = VIA.iter().find(|(k, _)| *k == key).map_or(src, |(_, v)| *v);
    vec![src, via, dst]
}

/// Build the preset.
pub fn machine() -> Result<Machine, TopologyError> {
    let nodes: Vec<NodeSpec> = (0..N).map(|j| NodeSpec { id: j as u32, mem_gib: MEM_GIB }).collect();
    let groups: Vec<GroupSpec> =
        (0..N).map(|k| GroupSpec { name: format!("die{k}"), node: k, first_cpu: 8 * k as u32, n_cpus: 8 }).collect();
    let (nodes, groups) = nodes_and_groups(&nodes, &groups);

    let mut links = LinkSet::default();
    for (a, b, kind) in LINKS {
        match kind {
            Kind::W16 => links.add(grp(a), grp(b), LINK_16BIT_GBPS, LINK_16BIT_GBPS, "16-bit"),
            Kind::W8 => links.add(grp(a), grp(b), LINK_8BIT_GBPS, LINK_8BIT_GBPS, "8-bit"),
            Kind::W16_8 { fast_from } => {
                let (ab, ba) = if fast_from == a {
                    (LINK_16_8_FAST_GBPS, LINK_8BIT_GBPS)
                } else {
                    (LINK_8BIT_GBPS, LINK_16_8_FAST_GBPS)
                };
                links.add(grp(a), grp(b), ab, ba, "16/8-bit");
            }
        }
    }
    links.add(grp(7), grp(3), LINK_8BIT_GBPS, LINK_8BIT_GBPS, "8-bit (routed 7->3 only)");

    let ends = |p: Vec<usize>| p.into_iter().map(grp).collect::<Vec<End>>();
    let mut routes = Vec::new();
    let mut unc = vec![vec![0.0; N]; N];
    let mut lat = vec![vec![0.0; N]; N];
    for g in 0..N {
        for n in 0..N {
            let read = data_path(n, g);
            let write = data_path(g, n);
            let mut rev = write.clone();
            rev.reverse();
            let write_route = (rev != read).then(|| ends(write.clone()));
            let hops = read.len() - 1;
            let latency = LAT_LOCAL_NS + hops as f64 * LAT_HOP_NS;
            let bottleneck = read
                .windows(2)
                .filter_map(|w| links.dir(grp(w[0]), grp(w[1])))
                .map(|h| super::build::hop_gbps(&links.links, &h))
                .fold(f64::INFINITY, f64::min);
            unc[g][n] =
                if (g, n) == (7, 3) { BW_7_READS_3 } else { r3(bottleneck.min(BW_LOCAL * LAT_LOCAL_NS / latency)) };
            lat[g][n] = r3(latency);
            routes.push((g, n, ends(read), write_route));
        }
    }
    let latency = Matrix::new("ns", MatrixSource::Derived, lat);

    Parts {
        name: NAME,
        description: DESCRIPTION,
        nodes,
        groups,
        distances: Matrix::new("SLIT", MatrixSource::Published, SLIT.iter().map(|r| r.to_vec()).collect()),
        links,
        routes,
        controller_gbps: vec![CONTROLLER_GBPS; N],
        uncontended: Matrix::new("GB/s", MatrixSource::Derived, unc),
        contended: None,
        latency,
        costs: MigrationCosts { page_us: PAGE_US, copy_gbps: COPY_GBPS, ..MigrationCosts::default() },
        clock_ghz: 2.1,
        // Opteron 6272 (family 15h): IBS op with op counting (cnt_ctl, family 10h revision C on),
        // no last-level-miss filter (l3missonly came with Zen 4): AMD's BKDG for family 15h.
        sampler: AddressSampler::IbsOp { op_count: true, miss_filter: false },
        notes: vec![
            "source: machine A of Lepers, Quema, Fedorova, \"Thread and Memory Placement on NUMA Systems: \
             Asymmetry Matters\", USENIX ATC 2015 (AsymSched)"
                .into(),
            "nodes: 8 x 8 cores (CPUs 8k..8k+7 on node k), 32 GiB each (published: 256 GB total)".into(),
            "distances: published firmware SLIT of a 4-socket Opteron 6272 server (a different machine)".into(),
            "links: the 18 one-hop pairs of that SLIT + a 19th 8-bit link 7-3 routed only 7->3 (published \
             one-way route). Widths chosen (map not published): 16-bit 0-1, 2-5, 3-4, 6-7 (packages) and 0-6, \
             1-7; 16/8-bit 2-4 (fast 2->4), 5-7 (fast 7->5); 8-bit the rest, incl. the busy 2-3 link"
                .into(),
            "link GB/s: derived: 8-bit = 4 (published 4 GB/s write 7->3 over one link), 16-bit = 8, 16/8 = 6 \
             (3/4 of 16-bit, published ratio) / 4"
                .into(),
            "routes: 0-3, 1-2, 3-6 and 3->7 via node 2 or 3 over link 2-3 (published: it carries nodes \
             0,1,2,3,6,7); link 3-4 carries no 2-hop route (published); other 2-hop routes chosen"
                .into(),
            "latency ns: derived: 100 ns local (assumed) + 38.1 ns per hop (published ~80 cycles per extra \
             hop at 2.1 GHz)"
                .into(),
            "uncontended GB/s: derived: min(8 GB/s x 100 ns / latency, slowest link of the route); \
             node 7 reading node 3 = 2.0 (published: reads at 2 GB/s, writes at 4 GB/s)"
                .into(),
            "controller_gbps: derived (assumed): 16 GB/s, ~62% of DDR3-1600 dual-channel peak".into(),
            "published effects to reproduce: choosing 3 of 8 nodes changes a link-heavy program's speed by \
             2x or more; the best subset has the most total bandwidth, not the fewest hops"
                .into(),
            "migration: derived from a published figure, 10 GB by stock migrate_pages in ~51 s on a 2015 AMD Opteron \
             machine (~5 s per GB); AsymSched's \
             parallel migration 0.3 s per GB is not the default here"
                .into(),
        ],
    }
    .finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GroupIdx, NodeIdx};
    use crate::presets::build::fair_share;

    #[test]
    fn eight_nodes_sixty_four_cpus_and_asymmetric_links() {
        let m = machine().unwrap();
        assert_eq!((m.n_nodes(), m.n_cpus()), (8, 64));
        assert!(m.links.iter().any(|l| l.gbps_ab != l.gbps_ba));
        assert_eq!(m.links.len(), 19);
        // The SLIT adjacency has 18 one-hop pairs and every one of them is a link.
        let pairs = (0..8).flat_map(|a| (a + 1..8).map(move |b| (a, b))).filter(|(a, b)| SLIT[*a][*b] == 16.0);
        assert_eq!(pairs.clone().count(), 18);
        for (a, b) in pairs {
            assert!(m.links.iter().any(|l| (l.a, l.b) == (grp(a), grp(b))), "{a}-{b}");
        }
    }

    #[test]
    fn one_way_route_between_7_and_3() {
        let m = machine().unwrap();
        let r = m.route(GroupIdx(7), NodeIdx(3)).unwrap();
        assert_eq!(r.hops.len(), 2, "node 7 reads node 3 through node 2");
        assert_eq!(r.write_hops.as_ref().map(Vec::len), Some(1), "node 7 writes node 3 directly");
        assert_eq!(m.route(GroupIdx(3), NodeIdx(7)).unwrap().hops.len(), 1);
        assert_eq!(m.bg(GroupIdx(7), NodeIdx(3)), Some(2.0));
        // Idle 2-hop costs ~80 cycles (38 ns) more than 1-hop.
        let l = |g: u16, n: u16| m.latency_ns(GroupIdx(g), NodeIdx(n)).unwrap();
        assert!(((l(0, 3) - l(0, 1)) - 38.1).abs() < 0.1);
    }

    /// Total bandwidth among a node subset under a link-heavy load: every node reads every
    /// other node of the subset as fast as the links and controllers allow (fair share).
    fn subset_bandwidth(m: &Machine, s: &[usize]) -> f64 {
        let flows: Vec<_> = s
            .iter()
            .flat_map(|g| {
                s.iter()
                    .filter(move |n| *n != g)
                    .map(move |n| (GroupIdx(*g as u16), NodeIdx(*n as u16), f64::INFINITY, 1.0))
            })
            .collect();
        fair_share(m, &flows).iter().sum()
    }

    #[test]
    fn node_subsets_differ_twofold_and_the_best_is_not_all_one_hop() {
        let m = machine().unwrap();
        let mut all = Vec::new();
        for a in 0..8 {
            for b in a + 1..8 {
                for c in b + 1..8 {
                    let s = [a, b, c];
                    let one_hop = [(a, b), (a, c), (b, c)]
                        .iter()
                        .all(|(x, y)| m.distance(NodeIdx(*x as u16), NodeIdx(*y as u16)) == Some(16.0));
                    all.push((subset_bandwidth(&m, &s), one_hop, s));
                }
            }
        }
        all.sort_by(|x, y| y.0.total_cmp(&x.0));
        // 56 subsets of 3 nodes (the paper's 336 = 8 x 7 x 6 counts them ordered).
        assert_eq!(all.len(), 56);
        let (best, worst) = (all[0], all[all.len() - 1]);
        assert!(best.0 >= 2.0 * worst.0, "best {best:?} worst {worst:?}");
        assert!(!best.1, "best subset {best:?} is all one hop");
        // With these widths: best {0,1,7} 48 GB/s, worst {0,2,3} 12 GB/s (all 56 subsets computed).
        let best_triangle = all.iter().find(|x| x.1).unwrap();
        assert!(best_triangle.0 < best.0, "{best_triangle:?} vs {best:?}");
    }
}

//! Where the part of a private chunk that leaves its home node goes.
//!
//! Problem: when every node's threads stream their own data, the local path and controller of
//! each node saturate, and ptb serves part of each private chunk from other nodes ([`super::home`]).
//! Spread evenly over every node, that part crosses narrow and multi-hop links (on the 8-node
//! Opteron, data two hops away crosses a link twice, and some 8-bit links carry the routes of
//! several pairs) and saturates them while wide one-hop links idle; sent only to each home's
//! best-connected neighbours, it piles up on the nodes that are many homes' neighbours.
//!
//! Approach: one small linear program over the machine file, for the case the spill is for
//! (every node with CPUs reading its own private data, in proportion to its CPUs): choose the
//! share `x[h][d]` of home `h`'s data on each memory node `d` that minimises the highest
//! utilisation of any memory controller, any path from a node's CPUs to a node's memory
//! ([`super::model::path_capacity_bytes`]: the Bandwidth Graph) and any directed link on the
//! routes, with the idle latency as a tie-break toward closer nodes:
//!
//! ```text
//! minimise   t + eps * sum_h s_h sum_d lat_hd x_hd
//! subject to sum_d x_hd = 1 (every home h),  x >= 0
//!            controller d:  sum_h s_h x_hd / C_d <= t
//!            path h -> d:   s_h x_hd / P_hd <= t
//!            link l:        sum_h sum_d s_h x_hd [share of h's groups whose route from d crosses l] / C_l <= t
//! ```
//!
//! A home's spill row is its `x[h]` without the home's own share, normalised; a home whose
//! optimum keeps everything at home (or a machine without bandwidth figures) gets an empty row
//! and spills evenly.

use super::model::{capacity_bytes, idle_ns, path_capacity_bytes};
use ptb_topology::{Machine, NodeIdx};
use std::collections::BTreeMap;

/// Per home node (row, dense index): shares of the spilled part of its private chunks over the
/// other memory nodes, summing to 1; an empty row where no node is preferred.
pub fn spill_rows(m: &Machine, mem_nodes: &[NodeIdx]) -> Vec<Vec<f64>> {
    let nn = m.n_nodes();
    let homes: Vec<NodeIdx> =
        mem_nodes.iter().copied().filter(|n| m.nodes.get(n.ix()).is_some_and(|x| x.has_cpus())).collect();
    let mut out = vec![vec![]; nn];
    let Some(x) = solve_placement(m, &homes, mem_nodes) else { return out };
    for (i, h) in homes.iter().enumerate() {
        let mut row = vec![0.0; nn];
        for (j, d) in mem_nodes.iter().enumerate() {
            if d != h {
                row[d.ix()] = x[i * mem_nodes.len() + j];
            }
        }
        let s: f64 = row.iter().sum();
        if s > 1e-6 {
            out[h.ix()] = row.iter().map(|v| v / s).collect();
        }
    }
    out
}

/// The linear program of the module docs; `x[i * mem_nodes.len() + j]`: share of home `i`'s
/// data on memory node `j`.
fn solve_placement(m: &Machine, homes: &[NodeIdx], mem: &[NodeIdx]) -> Option<Vec<f64>> {
    let (nh, k) = (homes.len(), mem.len());
    if nh == 0 || k < 2 {
        return None;
    }
    let cpus: Vec<f64> = homes.iter().map(|h| m.node(*h).cpus.len().max(1) as f64).collect();
    let total: f64 = cpus.iter().sum();
    let s: Vec<f64> = cpus.iter().map(|c| c / total).collect();
    let var = |i: usize, j: usize| i * k + j;
    // Resource rows: (variable, coefficient / capacity in GB/s).
    let mut rows: Vec<Vec<(usize, f64)>> = Vec::new();
    let caps = capacity_bytes(m);
    for (j, d) in mem.iter().enumerate() {
        let c = caps[d.ix()] / 1e9;
        if c > 0.0 {
            rows.push((0..nh).map(|i| (var(i, j), s[i] / c)).collect());
        }
    }
    let paths = path_capacity_bytes(m);
    for (i, h) in homes.iter().enumerate() {
        for (j, d) in mem.iter().enumerate() {
            let p = paths[h.ix()][d.ix()] / 1e9;
            if p.is_finite() && p > 0.0 {
                rows.push(vec![(var(i, j), s[i] / p)]);
            }
        }
    }
    let mut links: BTreeMap<(usize, bool), BTreeMap<usize, f64>> = BTreeMap::new();
    for (i, h) in homes.iter().enumerate() {
        let groups = &m.node(*h).groups;
        for g in groups {
            for (j, d) in mem.iter().enumerate() {
                let Some(route) = m.route(*g, *d) else { continue };
                for hop in &route.hops {
                    *links.entry((hop.link.ix(), hop.forward)).or_default().entry(var(i, j)).or_default() +=
                        s[i] / groups.len() as f64;
                }
            }
        }
    }
    for ((l, fwd), coef) in links {
        let Some(link) = m.links.get(l) else { continue };
        let cap = if fwd { link.gbps_ab } else { link.gbps_ba };
        if cap > 0.0 {
            rows.push(coef.into_iter().map(|(v, c)| (v, c / cap)).collect());
        }
    }
    // Without any resource that spilling relieves (no path figures), nothing to solve.
    if rows.is_empty() {
        return None;
    }
    let lat: Vec<f64> = homes
        .iter()
        .enumerate()
        .flat_map(|(i, h)| mem.iter().map(move |d| (i, *h, *d)))
        .map(|(i, h, d)| s[i] * idle_ns(m, h, d))
        .collect();
    super::spread::minimax(nh, k, &rows, &lat, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_8_node_opteron_spills_over_one_hop_links_and_balances_the_controllers() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let mem = m.memory_nodes();
        let rows = spill_rows(&m, &mem);
        let nn = m.n_nodes();
        let mut column = vec![0.0; nn];
        for (h, row) in rows.iter().enumerate() {
            assert_eq!(row.len(), nn, "home {h}");
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6 && row[h] == 0.0, "{row:?}");
            for (d, &x) in row.iter().enumerate() {
                column[d] += x;
                // Nothing goes where the home node's CPUs read over two links.
                let hops = m.route(m.nodes[h].groups[0], NodeIdx::from_ix(d)).map_or(0, |r| r.hops.len());
                assert!(hops < 2 || x < 0.02, "home {h} -> {d}: {x} over {hops} links");
            }
        }
        // Every node receives about one home's worth of spill (an even spread also would; the
        // best-connected neighbours alone would not).
        assert!(column.iter().all(|c| (c - 1.0).abs() < 0.25), "{column:?}");
    }

    #[test]
    fn a_machine_without_bandwidth_figures_has_no_preference() {
        let mut m = ptb_topology::synthetic::synthetic("nodes=4,cpus=2").unwrap();
        m.bandwidth = None;
        m.links.clear();
        m.routes.clear();
        assert!(spill_rows(&m, &m.memory_nodes()).iter().all(|r| r.is_empty()));
    }
}

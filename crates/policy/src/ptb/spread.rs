//! Link-aware spread weights for `ptb`'s shared data.
//!
//! Problem: spreading shared data in proportion to each node's memory bandwidth balances the
//! controllers but not the interconnect. On a machine with narrow or asymmetric links (the
//! 8-node Opteron) the data of a well-connected node reaches every reader over fast links,
//! while the data of a poorly connected one saturates its few slow links first.
//!
//! Approach: given where the shared data's accesses come from (share of accesses issued by
//! each node's CPUs, split evenly over the node's CPU groups), choose the share `w_d` of the
//! data on each memory node `d` that minimises the highest utilisation of any memory
//! controller or directed link:
//!
//! ```text
//! minimise   t + eps * sum_d lat_d w_d
//! subject to sum_d w_d = 1,  w >= 0
//!            controller d:  w_d / C_d <= t
//!            link l:        sum_d (sum_g src_g [l on route(g <- d)]) w_d / C_l <= t
//! ```
//!
//! (capacities normalised so the total traffic cancels out; `lat_d` is the mean idle latency
//! from the sources, a tie-break toward the closer nodes). It is a small linear program
//! (memory nodes + 1 variables), solved with clarabel. Machines without links or routes get
//! `None`, and the caller falls back to bandwidth-proportional weights.

use super::model::{capacity_bytes, idle_ns};
use clarabel::algebra::CscMatrix;
use clarabel::solver::{DefaultSettingsBuilder, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus, ZeroConeT};
use ptb_topology::{Machine, NodeIdx};
use std::collections::BTreeMap;

/// True when the machine's directed links differ in bandwidth by more than 1.5x (narrow and
/// wide links, as on the 8-node Opteron): balancing the links then matters more than
/// matching the controllers' bandwidth. With similar links (two-socket Intel) the
/// bandwidth-proportional spread was as good or better in the simulated suite.
pub fn links_differ(m: &Machine) -> bool {
    let caps: Vec<f64> = m.links.iter().flat_map(|l| [l.gbps_ab, l.gbps_ba]).filter(|c| *c > 0.0).collect();
    let (lo, hi) = caps.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &c| (lo.min(c), hi.max(c)));
    !caps.is_empty() && hi > 1.5 * lo
}

/// Integer weights (out of about 100; nodes with a negligible share left out) for spreading
/// data read with source shares `src` (by node, dense index) over `mem_nodes`.
pub fn link_aware_weights(m: &Machine, mem_nodes: &[NodeIdx], src: &[f64]) -> Option<Vec<(NodeIdx, u32)>> {
    if m.links.is_empty() || m.routes.is_empty() || mem_nodes.len() < 2 || src.iter().sum::<f64>() <= 0.0 {
        return None;
    }
    let total: f64 = src.iter().sum();
    // Source share of every CPU group.
    let mut group_src: Vec<(usize, f64)> = Vec::new();
    for (n, &s) in src.iter().enumerate() {
        let gs = &m.nodes.get(n)?.groups;
        for g in gs {
            group_src.push((g.ix(), s / total / gs.len() as f64));
        }
    }
    let k = mem_nodes.len();
    let caps = capacity_bytes(m);
    // Resource rows: coefficient of each w_d, already divided by the capacity (GB/s).
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for (j, d) in mem_nodes.iter().enumerate() {
        let mut r = vec![0.0; k];
        r[j] = 1.0 / (caps[d.ix()] / 1e9).max(1e-3);
        rows.push(r);
    }
    let mut links: BTreeMap<(usize, bool), Vec<f64>> = BTreeMap::new();
    for &(g, s) in &group_src {
        for (j, d) in mem_nodes.iter().enumerate() {
            let Some(route) = m.route(ptb_topology::GroupIdx::from_ix(g), *d) else { continue };
            for h in &route.hops {
                links.entry((h.link.ix(), h.forward)).or_insert_with(|| vec![0.0; k])[j] += s;
            }
        }
    }
    for ((l, fwd), coef) in links {
        let link = m.links.get(l)?;
        let cap = if fwd { link.gbps_ab } else { link.gbps_ba };
        if cap > 0.0 {
            rows.push(coef.iter().map(|c| c / cap).collect());
        }
    }
    let lat: Vec<f64> = mem_nodes
        .iter()
        .map(|d| {
            src.iter()
                .enumerate()
                .filter(|x| *x.1 > 0.0)
                .map(|(s, &v)| v / total * idle_ns(m, NodeIdx::from_ix(s), *d))
                .sum()
        })
        .collect();
    let w = solve(&rows, &lat)?;
    let max = w.iter().cloned().fold(0.0, f64::max);
    let out: Vec<(NodeIdx, u32)> =
        mem_nodes.iter().zip(&w).map(|(n, x)| (*n, (x / max * 100.0).round() as u32)).filter(|x| x.1 > 0).collect();
    (out.len() >= 2).then_some(out)
}

/// min t + eps lat.w  s.t.  sum w = 1, w >= 0, row . w <= t for every row.
fn solve(rows: &[Vec<f64>], lat: &[f64]) -> Option<Vec<f64>> {
    let sparse: Vec<Vec<(usize, f64)>> =
        rows.iter().map(|r| r.iter().copied().enumerate().filter(|x| x.1 != 0.0).collect()).collect();
    let w = minimax(1, lat.len(), &sparse, lat, 100)?;
    let s: f64 = w.iter().sum();
    (s > 0.0).then(|| w.iter().map(|x| x / s).collect())
}

/// The small linear program behind ptb's spreads (here and in [`super::spill`]): over `groups`
/// sets of `k` shares each (variable `i * k + j`: share `j` of set `i`),
///
/// ```text
/// minimise   t + 1e-3 * sum_v lat_v x_v / max(lat)
/// subject to sum_j x_ij = 1 (every set i),  x >= 0,  row . x <= t (every row)
/// ```
///
/// `rows` are sparse (variable, coefficient) lists, scaled together so the solver sees numbers
/// near 1. Returns the shares, those under 1e-3 set to 0, or `None` when the solver fails.
pub(super) fn minimax(
    groups: usize,
    k: usize,
    rows: &[Vec<(usize, f64)>],
    lat: &[f64],
    max_iter: u32,
) -> Option<Vec<f64>> {
    let t = groups * k;
    let nvar = t + 1;
    let scale = rows.iter().flatten().map(|x| x.1).fold(0.0, f64::max).max(1e-12);
    let lat_max = lat.iter().cloned().fold(0.0, f64::max).max(1e-12);
    let mut q = vec![0.0; nvar];
    q[t] = 1.0;
    for (v, l) in lat.iter().enumerate().take(t) {
        q[v] = 1e-3 * l / lat_max;
    }
    let (mut ri, mut ci, mut vv, mut b) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..groups {
        for j in 0..k {
            ri.push(i);
            ci.push(i * k + j);
            vv.push(1.0);
        }
        b.push(1.0);
    }
    let mut row = groups;
    for r in rows {
        for &(v, c) in r {
            ri.push(row);
            ci.push(v);
            vv.push(c / scale);
        }
        ri.push(row);
        ci.push(t);
        vv.push(-1.0);
        b.push(0.0);
        row += 1;
    }
    for v in 0..t {
        ri.push(row);
        ci.push(v);
        vv.push(-1.0);
        b.push(0.0);
        row += 1;
    }
    let a = CscMatrix::new_from_triplets(row, nvar, ri, ci, vv);
    let p = CscMatrix::<f64>::zeros((nvar, nvar));
    let cones = vec![ZeroConeT(groups), NonnegativeConeT(row - groups)];
    let settings = DefaultSettingsBuilder::default().verbose(false).max_iter(max_iter).build().ok()?;
    let mut solver = DefaultSolver::new(&p, &q, &a, &b, &cones, settings).ok()?;
    solver.solve();
    if !matches!(solver.solution.status, SolverStatus::Solved | SolverStatus::AlmostSolved) {
        return None;
    }
    Some(solver.solution.x[..t].iter().map(|x| if *x < 1e-3 { 0.0 } else { *x }).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_8_node_opteron_keeps_shared_data_off_its_poorly_linked_nodes() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let nodes = m.memory_nodes();
        let w = link_aware_weights(&m, &nodes, &vec![1.0; m.n_nodes()]).unwrap();
        let of = |i: usize| w.iter().find(|x| x.0 == nodes[i]).map_or(0, |x| x.1);
        // Not plain interleave: some nodes get clearly less than others.
        let (lo, hi) = (w.iter().map(|x| x.1).min().unwrap(), w.iter().map(|x| x.1).max().unwrap());
        assert!(w.len() < nodes.len() || lo * 2 < hi, "{w:?}");
        assert!((0..nodes.len()).map(of).sum::<u32>() > 0);
    }

    #[test]
    fn a_symmetric_machine_is_spread_evenly_and_link_widths_are_told_apart() {
        let s = ptb_topology::synthetic::synthetic("nodes=4,cpus=2").unwrap();
        let w = link_aware_weights(&s, &s.memory_nodes(), &[1.0; 4]).unwrap();
        assert!(w.len() == 4 && w.iter().all(|x| x.1 == w[0].1), "{w:?}");
        let differ = |n: &str| links_differ(&ptb_topology::presets::get(n).unwrap());
        assert!(differ("opteron6272-8n") && !differ("broadwell-cod-4n") && !differ("skylake-2s"));
    }

    #[test]
    fn readers_on_one_node_pull_the_data_toward_them() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let nodes = m.memory_nodes();
        let mut src = vec![0.0; m.n_nodes()];
        src[0] = 1.0;
        let w = link_aware_weights(&m, &nodes, &src).unwrap();
        let w0 = w.iter().find(|x| x.0 == nodes[0]).map_or(0, |x| x.1);
        assert_eq!(w0, w.iter().map(|x| x.1).max().unwrap(), "{w:?}");
    }
}

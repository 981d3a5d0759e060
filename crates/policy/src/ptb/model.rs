//! The load model behind `ptb`'s decisions.
//!
//! Resources: each node's memory controller (capacity: `controller_gbps`, else the best
//! Bandwidth Graph entry into the node) and each path from the CPUs of node s to the memory
//! of node d (capacity: the sum of the uncontended Bandwidth Graph over s's CPU groups — what
//! those CPUs reach when they alone use that memory). Loads are accesses per second estimated
//! from samples x period. A resource at utilisation u adds a queueing delay `svc * u/(1-u)`
//! (capped at 10 svc), svc being half the idle local latency, so latency roughly doubles at
//! 2/3 load and rises steeply after — the shape of published loaded-latency curves. The
//! loaded latency from s to d is idle(s, d) + the delays of d's controller and of path (s, d).
//! A move's saving is the drop in its accesses' mean loaded latency (now vs after all chosen
//! moves) divided by the memory-level parallelism, over a horizon; its cost is the per-page
//! CPU time plus the copy time.

use super::chunks::{normalise, ChunkState, Range, Target};
use crate::snapshot::Snapshot;
use ptb_topology::{Machine, NodeIdx};

/// Estimated memory traffic this cycle.
#[derive(Clone, Debug)]
pub struct Demand {
    /// Accesses per second served by each node's memory.
    pub per_node: Vec<f64>,
    /// Accesses per second from threads on node s (row) to memory on node d (column).
    pub per_path: Vec<Vec<f64>>,
    /// Total traffic as a share of the machine's memory bandwidth.
    pub share: f64,
}

/// Capacity of each node's memory in bytes per second.
pub fn capacity_bytes(m: &Machine) -> Vec<f64> {
    (0..m.n_nodes())
        .map(|n| {
            if !m.nodes[n].has_memory() {
                return 0.0;
            }
            let gbps = m
                .controller_gbps
                .as_ref()
                .map(|c| c[n])
                .or_else(|| {
                    let b = m.bandwidth.as_ref()?;
                    (0..m.groups.len()).map(|g| b.uncontended.get(g, n)).reduce(f64::max)
                })
                .unwrap_or(10.0);
            gbps.max(0.1) * 1e9
        })
        .collect()
}

/// Capacity of the way from the CPUs of node s to the memory of node d, bytes per second:
/// the sum of the uncontended Bandwidth Graph over s's CPU groups (unbounded when unknown).
pub fn path_capacity_bytes(m: &Machine) -> Vec<Vec<f64>> {
    let nn = m.n_nodes();
    (0..nn)
        .map(|s| {
            (0..nn)
                .map(|d| match &m.bandwidth {
                    Some(b) if !m.nodes[s].groups.is_empty() => {
                        m.nodes[s].groups.iter().map(|g| b.uncontended.get(g.ix(), d)).sum::<f64>() * 1e9
                    }
                    _ => f64::INFINITY,
                })
                .collect()
        })
        .collect()
}

/// Traffic per node and per path from the cycle's sampled traffic matrix (samples from
/// node s to pages on node d), scaled by the sampling period to accesses per second.
pub fn demand(snap: &Snapshot, traffic: &[Vec<f64>], period: u64) -> Demand {
    let m = snap.machine;
    let w = period as f64 / snap.cycle.as_secs_f64().max(1e-6);
    let per_path: Vec<Vec<f64>> = traffic.iter().map(|r| r.iter().map(|x| x * w).collect()).collect();
    let per_node: Vec<f64> = (0..m.n_nodes()).map(|d| per_path.iter().map(|r| r[d]).sum()).collect();
    let cap: f64 = capacity_bytes(m).iter().sum();
    let total_bytes: f64 = per_node.iter().sum::<f64>() * m.line_size as f64;
    Demand { per_node, per_path, share: if cap > 0.0 { total_bytes / cap } else { 0.0 } }
}

/// Node-level idle latency in ns (mean over the source node's CPU groups; from the SLIT
/// when no latency matrix is known: 10 -> 80 ns, scaled linearly).
pub fn idle_ns(m: &Machine, src: NodeIdx, dst: NodeIdx) -> f64 {
    let groups = &m.node(src).groups;
    let from_lat: Option<f64> = if groups.is_empty() {
        None
    } else {
        groups.iter().map(|g| m.latency_ns(*g, dst)).sum::<Option<f64>>().map(|s| s / groups.len() as f64)
    };
    from_lat.or_else(|| m.distance(src, dst).map(|d| d * 8.0)).unwrap_or(100.0)
}

/// Per-node residency shares of a chunk: from its sampled pages, else from its region.
pub fn resident_shares(snap: &Snapshot, range: &Range, nn: usize) -> Vec<f64> {
    let r = snap.regions.iter().find(|r| r.start_vpn <= range.start_vpn && range.start_vpn < r.start_vpn + r.npages);
    match r {
        Some(r) if r.resident.len() == nn => normalise(&r.resident.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        _ => vec![0.0; nn],
    }
}

/// Node shares a target puts the chunk's pages on.
pub fn target_shares(t: Target, weights: &[(NodeIdx, u32)], nn: usize) -> Vec<f64> {
    let mut v = vec![0.0; nn];
    match t {
        Target::Node(n) => v[n.ix()] = 1.0,
        Target::Spread => {
            let s: f64 = weights.iter().map(|w| w.1 as f64).sum();
            for (n, w) in weights {
                v[n.ix()] = *w as f64 / s.max(1.0);
            }
        }
    }
    v
}

/// Best estimate of where the chunk's pages are now.
pub fn current_shares(c: &ChunkState, resident: &[f64]) -> Vec<f64> {
    if c.by_home.iter().any(|&x| x > 0.0) {
        normalise(&c.by_home.iter().map(|&x| x as f64).collect::<Vec<_>>())
    } else {
        resident.to_vec()
    }
}

/// Cost of moving a chunk of `npages` from `resident` shares to the target, in ns.
pub fn cost_ns(m: &Machine, npages: u64, resident: &[f64], t: Target, weights: &[(NodeIdx, u32)]) -> f64 {
    let tgt = target_shares(t, weights, m.n_nodes());
    let stay: f64 = resident.iter().zip(&tgt).map(|(a, b)| a.min(*b)).sum();
    let moved = npages as f64 * (1.0 - stay).max(0.0);
    moved * (m.costs.page_us * 1e3 + m.page_size as f64 / m.costs.copy_gbps.max(0.01))
}

/// Controller and path loads and the loaded latencies they imply.
pub struct LoadModel {
    /// Accesses per second per memory node.
    pub acc: Vec<f64>,
    /// Accesses per second per (source node, memory node).
    pub path: Vec<Vec<f64>>,
    cap: Vec<f64>,
    path_cap: Vec<Vec<f64>>,
    service: Vec<f64>,
    idle: Vec<Vec<f64>>,
}

/// A queueing delay factor u / (1 - u), capped at 10.
fn qf(acc: f64, cap: f64) -> f64 {
    if cap <= 0.0 || !cap.is_finite() {
        return 0.0;
    }
    let u = (acc / cap).min(0.999);
    (u / (1.0 - u)).min(10.0)
}

impl LoadModel {
    pub fn new(snap: &Snapshot, d: &Demand) -> Self {
        let m = snap.machine;
        let nn = m.n_nodes();
        let line = m.line_size as f64;
        let cap: Vec<f64> = capacity_bytes(m).iter().map(|b| b / line).collect();
        let path_cap = path_capacity_bytes(m).into_iter().map(|r| r.into_iter().map(|b| b / line).collect()).collect();
        let idle: Vec<Vec<f64>> =
            (0..nn).map(|a| (0..nn).map(|b| idle_ns(m, NodeIdx::from_ix(a), NodeIdx::from_ix(b))).collect()).collect();
        let service = (0..nn).map(|n| 0.5 * if m.nodes[n].has_cpus() { idle[n][n] } else { 100.0 }).collect();
        LoadModel { acc: d.per_node.clone(), path: d.per_path.clone(), cap, path_cap, service, idle }
    }

    /// Loaded latency matrix (source node x memory node) for the given loads.
    pub fn loaded(&self, acc: &[f64], path: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let nn = acc.len();
        (0..nn)
            .map(|s| {
                (0..nn)
                    .map(|d| {
                        self.idle[s][d]
                            + self.service[d] * qf(acc[d], self.cap[d])
                            + self.service[d] * qf(path[s][d], self.path_cap[s][d])
                    })
                    .collect()
            })
            .collect()
    }

    /// Is node `n`'s controller, or the local path of its CPUs, above `limit` of capacity?
    pub fn over(&self, acc: &[f64], path: &[Vec<f64>], n: usize, limit: f64) -> bool {
        self.cap[n] <= 0.0 || acc[n] > limit * self.cap[n] || path[n][n] > limit * self.path_cap[n][n]
    }

    /// Move `a` accesses/s issued with source shares `src` from page shares `from` to `to`.
    pub fn shift(acc: &mut [f64], path: &mut [Vec<f64>], a: f64, src: &[f64], from: &[f64], to: &[f64]) {
        for d in 0..acc.len() {
            acc[d] = (acc[d] - a * from[d] + a * to[d]).max(0.0);
            for s in 0..acc.len() {
                path[s][d] = (path[s][d] + a * src[s] * (to[d] - from[d])).max(0.0);
            }
        }
    }

    /// Highest utilisation of any controller or path that the chunk's accesses cross.
    pub fn max_util(&self, acc: &[f64], path: &[Vec<f64>], src: &[f64], pages: &[f64]) -> f64 {
        let mut u: f64 = 0.0;
        for (s, _) in src.iter().enumerate().filter(|x| *x.1 > 0.0) {
            for (d, _) in pages.iter().enumerate().filter(|x| *x.1 > 0.0) {
                let c = if self.cap[d] > 0.0 { acc[d] / self.cap[d] } else { 1.0 };
                let p = if self.path_cap[s][d].is_finite() { path[s][d] / self.path_cap[s][d] } else { 0.0 };
                u = u.max(c).max(p);
            }
        }
        u
    }

    /// Loaded latency minus idle latency: the queueing part only.
    pub fn queueing(&self, lat: &[Vec<f64>]) -> Vec<Vec<f64>> {
        lat.iter().zip(&self.idle).map(|(l, i)| l.iter().zip(i).map(|(a, b)| a - b).collect()).collect()
    }

    /// Mean latency of the chunk's accesses (ns) for its source shares and page shares.
    pub fn mean_latency(lat: &[Vec<f64>], src: &[f64], pages: &[f64]) -> f64 {
        let mut s = 0.0;
        for (i, si) in src.iter().enumerate().filter(|x| *x.1 > 0.0) {
            for (j, pj) in pages.iter().enumerate().filter(|x| *x.1 > 0.0) {
                s += si * pj * lat[i][j];
            }
        }
        s
    }
}

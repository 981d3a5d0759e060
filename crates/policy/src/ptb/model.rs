//! The controller-load model behind `ptb`'s decisions.
//!
//! Per memory node n: accesses per second A[n] (estimated from samples x period), capacity
//! C[n] in accesses per second (controller GB/s / line size), utilisation u = A/C, and a
//! queueing delay q(n) = s_n * u / (1 - u), capped at 10 s_n, where s_n is half the node's
//! idle local latency (so that latency roughly doubles at 2/3 load and rises steeply after,
//! the shape of published loaded-latency curves). The cost of a placement is
//! `sum_n A[n] * q(n)` (queueing) plus, for one chunk, `a * sum_src share_src * sum_dst
//! frac_dst * idle(src, dst)` (distance). A move's gain is the drop in that cost over a
//! horizon; its cost is the per-page CPU time plus the copy time.

use super::chunks::{normalise, ChunkState, Range, Target};
use crate::snapshot::Snapshot;
use ptb_topology::{Machine, NodeIdx};
use std::time::Duration;

/// Estimated memory traffic this cycle.
#[derive(Clone, Debug)]
pub struct Demand {
    /// Accesses per second served by each node's memory.
    pub per_node: Vec<f64>,
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

/// Traffic per node from this cycle's samples (pages of unknown location are counted where
/// the accessing thread runs).
pub fn demand(snap: &Snapshot, period: u64) -> Demand {
    let m = snap.machine;
    let nn = m.n_nodes();
    let secs = snap.cycle.as_secs_f64().max(1e-6);
    let mut per_node = vec![0.0; nn];
    for s in snap.samples {
        let home = snap.pages.get(s.page(m.page_size)).or_else(|| m.node_of_cpu(s.cpu));
        if let Some(h) = home {
            per_node[h.ix()] += period as f64 / secs;
        }
    }
    let cap: f64 = capacity_bytes(m).iter().sum();
    let total_bytes: f64 = per_node.iter().sum::<f64>() * m.line_size as f64;
    Demand { per_node, share: if cap > 0.0 { total_bytes / cap } else { 0.0 } }
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
    if c.by_home.iter().sum::<f64>() > 0.0 {
        normalise(&c.by_home)
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

/// Controller loads, updated as moves are chosen.
pub struct LoadModel<'a> {
    m: &'a Machine,
    acc: Vec<f64>,
    cap: Vec<f64>,
    service: Vec<f64>,
}

impl<'a> LoadModel<'a> {
    pub fn new(snap: &'a Snapshot, d: &Demand) -> Self {
        let m = snap.machine;
        let cap: Vec<f64> = capacity_bytes(m).iter().map(|b| b / m.line_size as f64).collect();
        let service = (0..m.n_nodes())
            .map(|n| {
                let nid = NodeIdx::from_ix(n);
                0.5 * if m.node(nid).has_cpus() { idle_ns(m, nid, nid) } else { 100.0 }
            })
            .collect();
        LoadModel { m, acc: d.per_node.clone(), cap, service }
    }

    fn queue_ns(&self, n: usize, acc: f64) -> f64 {
        if self.cap[n] <= 0.0 {
            return 0.0;
        }
        let u = (acc / self.cap[n]).min(0.999);
        self.service[n] * (u / (1.0 - u)).min(10.0)
    }

    fn queue_cost(&self, acc: &[f64]) -> f64 {
        (0..acc.len()).map(|n| acc[n] * self.queue_ns(n, acc[n])).sum()
    }

    /// Would adding `bytes_s` to node `n` push it past 90% of its capacity?
    pub fn would_saturate(&self, n: NodeIdx, bytes_s: f64) -> bool {
        let add = bytes_s / self.m.line_size as f64;
        self.cap[n.ix()] <= 0.0 || (self.acc[n.ix()] + add) / self.cap[n.ix()] > 0.9
    }

    fn moved_acc(&self, a: f64, from: &[f64], to: &[f64]) -> Vec<f64> {
        self.acc.iter().enumerate().map(|(n, x)| (x - a * from[n] + a * to[n]).max(0.0)).collect()
    }

    fn distance_cost(&self, a: f64, src: &[f64], dst: &[f64]) -> f64 {
        let mut s = 0.0;
        for (i, si) in src.iter().enumerate().filter(|x| *x.1 > 0.0) {
            for (j, dj) in dst.iter().enumerate().filter(|x| *x.1 > 0.0) {
                s += si * dj * idle_ns(self.m, NodeIdx::from_ix(i), NodeIdx::from_ix(j));
            }
        }
        a * s
    }

    /// Predicted saving (ns of access time over `horizon_s`) of moving the chunk to `t`.
    #[allow(clippy::too_many_arguments)]
    pub fn gain_ns(
        &self,
        c: &ChunkState,
        resident: &[f64],
        t: Target,
        weights: &[(NodeIdx, u32)],
        period: u64,
        cycle: Duration,
        horizon_s: f64,
    ) -> f64 {
        let a = c.accesses_per_s(period, cycle);
        let from = current_shares(c, resident);
        let to = target_shares(t, weights, self.m.n_nodes());
        let src = c.src_shares();
        let before = self.queue_cost(&self.acc) + self.distance_cost(a, &src, &from);
        let after = self.queue_cost(&self.moved_acc(a, &from, &to)) + self.distance_cost(a, &src, &to);
        (before - after) * horizon_s
    }

    /// Record a chosen move in the loads.
    pub fn apply(
        &mut self,
        c: &ChunkState,
        resident: &[f64],
        t: Target,
        weights: &[(NodeIdx, u32)],
        period: u64,
        cycle: Duration,
    ) {
        let a = c.accesses_per_s(period, cycle);
        let from = current_shares(c, resident);
        let to = target_shares(t, weights, self.m.n_nodes());
        self.acc = self.moved_acc(a, &from, &to);
    }
}

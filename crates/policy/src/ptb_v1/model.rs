//! The load model behind `ptb`'s decisions.
//!
//! Resources: each node's memory controller (capacity: `controller_gbps`, else the best
//! Bandwidth Graph entry into the node), each path from the CPUs of node s to the memory
//! of node d (capacity: the sum of the uncontended Bandwidth Graph over s's CPU groups — what
//! those CPUs reach when they alone use that memory), and, where the machine's links and
//! routes are known, every directed interconnect link (a read's data crosses the links of its
//! route from the memory to the reading group; a node's traffic is split evenly over its
//! groups' routes). Loads are accesses per second estimated
//! from samples x period. A resource at utilisation u adds a queueing delay `svc * u/(1-u)`
//! (capped at 10 svc), svc being half the idle local latency, so latency roughly doubles at
//! 2/3 load and rises steeply after — the shape of published loaded-latency curves. The
//! loaded latency from s to d is idle(s, d) + the delays of d's controller, of path (s, d)
//! and of the links on the way (each weighted by the share of s's groups routed over it).
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

/// Per-node residency shares of a chunk of `app` over `range`, from the program's own regions
/// ([`crate::ptb::resident_shares_over`]).
pub fn resident_shares(snap: &Snapshot, app: ptb_profile::AppId, range: &Range, nn: usize) -> Vec<f64> {
    crate::ptb::resident_shares_over(snap, app, range.start_vpn, range.npages, nn)
}

/// Node shares a target puts the chunk's pages on.
pub fn target_shares(t: Target, weights: &[(NodeIdx, u32)], nn: usize) -> Vec<f64> {
    let mut v = vec![0.0; nn];
    match t {
        Target::Node(n, pct) => {
            let h = f64::from(pct.min(100)) / 100.0;
            if h < 1.0 && !weights.is_empty() {
                for (m, _) in weights {
                    v[m.ix()] = (1.0 - h) / weights.len() as f64;
                }
            }
            v[n.ix()] += h;
        }
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

/// Controller, path and link loads and the loaded latencies they imply.
pub struct LoadModel {
    /// Accesses per second per memory node.
    pub acc: Vec<f64>,
    /// Accesses per second per (source node, memory node).
    pub path: Vec<Vec<f64>>,
    pub(super) cap: Vec<f64>,
    pub(super) path_cap: Vec<Vec<f64>>,
    service: Vec<f64>,
    pub(super) idle: Vec<Vec<f64>>,
    /// Directed links crossed by the data of a read from node s's CPUs to node d's memory:
    /// `(link, share of s's CPU groups whose route uses it)`.
    pub(super) links_of: RouteLinks,
    /// Capacity of every directed link, accesses per second (index: 2 * link + direction).
    pub(super) link_cap: Vec<f64>,
    link_service: f64,
}

/// Per (source node, memory node): the directed links crossed, with the share of the source's
/// CPU groups whose route uses each.
type RouteLinks = Vec<Vec<Vec<(usize, f64)>>>;

/// `(directed link, share of the source's groups)` for every (source node, memory node), and
/// the directed links' capacities in accesses per second; empty where links are unknown.
fn route_links(m: &Machine) -> (RouteLinks, Vec<f64>) {
    let nn = m.n_nodes();
    let line = m.line_size as f64;
    let cap: Vec<f64> = m.links.iter().flat_map(|l| [l.gbps_ab * 1e9 / line, l.gbps_ba * 1e9 / line]).collect();
    let mut of = vec![vec![Vec::new(); nn]; nn];
    if m.routes.is_empty() {
        return (of, cap);
    }
    for (s, row) in of.iter_mut().enumerate() {
        let groups = &m.nodes[s].groups;
        for (d, cell) in row.iter_mut().enumerate() {
            let mut acc: std::collections::BTreeMap<usize, f64> = std::collections::BTreeMap::new();
            for g in groups {
                if let Some(r) = m.route(*g, NodeIdx::from_ix(d)) {
                    for h in &r.hops {
                        *acc.entry(2 * h.link.ix() + usize::from(!h.forward)).or_default() += 1.0 / groups.len() as f64;
                    }
                }
            }
            *cell = acc.into_iter().collect();
        }
    }
    (of, cap)
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
        Self::for_machine(snap.machine, d)
    }

    pub fn for_machine(m: &Machine, d: &Demand) -> Self {
        let nn = m.n_nodes();
        let line = m.line_size as f64;
        let cap: Vec<f64> = capacity_bytes(m).iter().map(|b| b / line).collect();
        let path_cap = path_capacity_bytes(m).into_iter().map(|r| r.into_iter().map(|b| b / line).collect()).collect();
        let idle: Vec<Vec<f64>> =
            (0..nn).map(|a| (0..nn).map(|b| idle_ns(m, NodeIdx::from_ix(a), NodeIdx::from_ix(b))).collect()).collect();
        let service: Vec<f64> = (0..nn).map(|n| 0.5 * if m.nodes[n].has_cpus() { idle[n][n] } else { 100.0 }).collect();
        let (links_of, link_cap) = route_links(m);
        let link_service = service.iter().sum::<f64>() / nn.max(1) as f64;
        LoadModel {
            acc: d.per_node.clone(),
            path: d.per_path.clone(),
            cap,
            path_cap,
            service,
            idle,
            links_of,
            link_cap,
            link_service,
        }
    }

    /// Accesses per second over every directed link for the given path loads.
    pub fn link_loads(&self, path: &[Vec<f64>]) -> Vec<f64> {
        let mut load = vec![0.0; self.link_cap.len()];
        for (s, row) in path.iter().enumerate() {
            for (d, &a) in row.iter().enumerate() {
                for &(l, share) in &self.links_of[s][d] {
                    load[l] += a * share;
                }
            }
        }
        load
    }

    /// Loaded latency matrix (source node x memory node) for the given loads.
    pub fn loaded(&self, acc: &[f64], path: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let nn = acc.len();
        let links = self.link_loads(path);
        let link_delay: Vec<f64> =
            links.iter().zip(&self.link_cap).map(|(a, c)| self.link_service * qf(*a, *c)).collect();
        (0..nn)
            .map(|s| {
                (0..nn)
                    .map(|d| {
                        self.idle[s][d]
                            + self.service[d] * qf(acc[d], self.cap[d])
                            + self.service[d] * qf(path[s][d], self.path_cap[s][d])
                            + self.links_of[s][d].iter().map(|&(l, share)| share * link_delay[l]).sum::<f64>()
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

    /// Highest utilisation of any controller, path or link that the chunk's accesses cross;
    /// `links` are the link loads of `path` ([`Self::link_loads`]).
    pub fn max_util(&self, acc: &[f64], path: &[Vec<f64>], links: &[f64], src: &[f64], pages: &[f64]) -> f64 {
        let mut u: f64 = 0.0;
        for (s, _) in src.iter().enumerate().filter(|x| *x.1 > 0.0) {
            for (d, _) in pages.iter().enumerate().filter(|x| *x.1 > 0.0) {
                let c = if self.cap[d] > 0.0 { acc[d] / self.cap[d] } else { 1.0 };
                let p = if self.path_cap[s][d].is_finite() { path[s][d] / self.path_cap[s][d] } else { 0.0 };
                u = u.max(c).max(p);
                for &(l, _) in &self.links_of[s][d] {
                    if self.link_cap[l] > 0.0 {
                        u = u.max(links[l] / self.link_cap[l]);
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_over_a_link_delays_the_paths_that_cross_it_and_no_other() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let nn = m.n_nodes();
        let idle = Demand { per_node: vec![0.0; nn], per_path: vec![vec![0.0; nn]; nn], share: 0.0 };
        let quiet = LoadModel::for_machine(&m, &idle);
        // A pair of nodes whose reads cross at least one link, and a pair whose reads do not
        // share any of those links.
        let (s, d) = (0..nn)
            .flat_map(|s| (0..nn).map(move |d| (s, d)))
            .find(|&(s, d)| !quiet.links_of[s][d].is_empty())
            .unwrap();
        let busy: Vec<usize> = quiet.links_of[s][d].iter().map(|x| x.0).collect();
        let (s2, d2) = (0..nn)
            .flat_map(|s| (0..nn).map(move |d| (s, d)))
            .find(|&(a, b)| a != b && (a, b) != (s, d) && quiet.links_of[a][b].iter().all(|x| !busy.contains(&x.0)))
            .unwrap();
        // Load (s, d) to 90% of its first link, with its controller and path kept out of it.
        let l = busy[0];
        let mut per_path = vec![vec![0.0; nn]; nn];
        per_path[s][d] = 0.9 * quiet.link_cap[l] / quiet.links_of[s][d][0].1;
        let load = LoadModel::for_machine(&m, &Demand { per_node: vec![0.0; nn], per_path, share: 0.0 });
        let (lq, ll) = (quiet.loaded(&quiet.acc, &quiet.path), load.loaded(&vec![0.0; nn], &load.path));
        // Beyond what the (s, d) path itself adds: the link's queueing (90% busy: 9x its service).
        let path_delay = load.service[d] * qf(load.path[s][d], load.path_cap[s][d]);
        assert!(ll[s][d] - lq[s][d] - path_delay > 4.0 * load.link_service, "{} vs {}", ll[s][d], lq[s][d]);
        assert!((ll[s2][d2] - lq[s2][d2]).abs() < 1e-9);
        assert!(
            load.max_util(&vec![0.0; nn], &load.path, &load.link_loads(&load.path), &[1.0; 8], &{
                let mut v = vec![0.0; nn];
                v[d] = 1.0;
                v
            }) >= 0.89
        );
    }
}

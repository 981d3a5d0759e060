//! The load model behind `ptb`'s decisions.
//!
//! Resources: each node's memory controller (capacity: `controller_gbps`, else the best
//! Bandwidth Graph entry into the node), each path from the CPUs of node s to the memory
//! of node d (capacity: the sum of the uncontended Bandwidth Graph over s's CPU groups — what
//! those CPUs reach when they alone use that memory), and, where the machine's links and
//! routes are known, every directed interconnect link (a read's data crosses the links of its
//! route from the memory to the reading group; a node's traffic is split evenly over its
//! groups' routes). Loads are accesses per second estimated
//! from samples x period. A resource at utilisation u adds a queueing delay
//! [`queue_ns`] `= s u / (1 - u)` with `s` = 4 ns (u at most 0.99): machines.md gives Skylake
//! 6140's latency as ~90 ns idle and ~166 ns at its bandwidth ceiling, 76 ns of queueing at
//! ~95%, and loaded-latency curves stay nearly flat to ~70% of the ceiling. The loaded latency
//! from s to d is idle(s, d) + the delays of d's controller, of path (s, d) and of the links
//! on the way (each weighted by the share of s's groups routed over it). The closed model
//! ([`super::closed`]) uses the same queue for controllers and links and holds the paths to
//! their capacity instead.
//!
//! Whether a CPU-to-memory path queues below its capacity is not in the machine file: a
//! group's bandwidth to a node may be capped by the requests its cores can keep in flight
//! (Little's law: no queue, the threads just wait once it is reached) or by a queue in the
//! fabric. The samples tell: the path queue of each source node is scaled, between none and
//! the nominal `s u / (1 - u)`, to the part of its measured mean latency (PEBS/IBS/SPE) that
//! idle latencies, controllers and links do not explain ([`LoadModel::calibrate_paths`]).
//! A move's saving is the drop in its accesses' mean loaded latency (now vs after all chosen
//! moves) divided by the memory-level parallelism, over a horizon; its cost is the per-page
//! CPU time plus the copy time.

use super::chunks::{normalise, ChunkState, Range, Target};
use crate::snapshot::Snapshot;
use ptb_profile::AppId;
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

/// Per-node residency shares of a chunk of `app` over `range`: the residency of the program's
/// regions that hold the range, each in proportion to the part of it the range covers (other
/// programs' regions may use the same addresses).
pub fn resident_shares(snap: &Snapshot, app: AppId, range: &Range, nn: usize) -> Vec<f64> {
    resident_shares_over(snap, app, range.start_vpn, range.npages, nn)
}

/// [`resident_shares`] over the `npages` pages from `start_vpn`.
pub(crate) fn resident_shares_over(snap: &Snapshot, app: AppId, start_vpn: u64, npages: u64, nn: usize) -> Vec<f64> {
    let end = start_vpn.saturating_add(npages);
    let mut sum = vec![0.0; nn];
    for r in snap.regions.iter().filter(|r| r.app == app && r.resident.len() == nn && r.npages > 0) {
        let covered = end.min(r.start_vpn.saturating_add(r.npages)).saturating_sub(start_vpn.max(r.start_vpn));
        if covered == 0 {
            continue;
        }
        let part = covered as f64 / r.npages as f64;
        for (s, &x) in sum.iter_mut().zip(&r.resident) {
            *s += part * x as f64;
        }
    }
    normalise(&sum)
}

/// Node shares a target puts the chunk's pages on. At home `pct` of a chunk stays on its node
/// and the rest goes to the other nodes of `weights`: in the shares of the home node's row of
/// `spill` ([`super::spill::spill_rows`]: where its threads reach the most bandwidth), evenly
/// where that row names none of them.
pub fn target_shares(t: Target, weights: &[(NodeIdx, u32)], spill: &[Vec<f64>], nn: usize) -> Vec<f64> {
    let mut v = vec![0.0; nn];
    match t {
        Target::Node(n, pct) => {
            let mut h = f64::from(pct.min(100)) / 100.0;
            let away: Vec<NodeIdx> = weights.iter().map(|w| w.0).filter(|&m| m != n).collect();
            let row = spill.get(n.ix()).filter(|r| r.len() == nn);
            let pref: f64 = row.map_or(0.0, |r| away.iter().map(|m| r[m.ix()]).sum());
            if away.is_empty() {
                h = 1.0;
            }
            for m in &away {
                v[m.ix()] = (1.0 - h)
                    * if pref > 0.0 { row.map_or(0.0, |r| r[m.ix()]) / pref } else { 1.0 / away.len() as f64 };
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

/// The spread weights of every program: its own where programs run on nodes of their own
/// ([`super::layout`]), else one set for all.
#[derive(Clone, Debug, Default)]
pub struct Weights {
    pub global: Vec<(NodeIdx, u32)>,
    /// Where each home node's private chunks spill ([`super::spill::spill_rows`]).
    pub spill: Vec<Vec<f64>>,
    pub per_app: Option<std::collections::BTreeMap<ptb_profile::AppId, Vec<(NodeIdx, u32)>>>,
}

impl Weights {
    /// The weights a chunk of `app` is spread with.
    pub fn of(&self, app: ptb_profile::AppId) -> &[(NodeIdx, u32)] {
        self.per_app.as_ref().and_then(|m| m.get(&app)).map_or(&self.global, |w| w.as_slice())
    }
}

/// Best estimate of where the chunk's pages are now: where ptb moved them, else the sampled
/// homes, else `resident` (the region's).
pub fn current_shares(c: &ChunkState, resident: &[f64]) -> Vec<f64> {
    if let Some(m) = &c.moved_to {
        return m.iter().map(|&x| f64::from(x)).collect();
    }
    if c.by_home.iter().any(|&x| x > 0.0) {
        normalise(&c.by_home.iter().map(|&x| x as f64).collect::<Vec<_>>())
    } else {
        resident.to_vec()
    }
}

/// The share of a chunk's pages that must move to go from the node shares `from` to `to`: what
/// does not stay where both put it.
pub fn moved_share(from: &[f64], to: &[f64]) -> f64 {
    1.0 - from.iter().zip(to).map(|(a, b)| a.min(*b)).sum::<f64>()
}

/// Cost of moving a chunk of `npages` from `resident` shares to the target, in ns.
pub fn cost_ns(
    m: &Machine,
    npages: u64,
    resident: &[f64],
    t: Target,
    weights: &[(NodeIdx, u32)],
    spill: &[Vec<f64>],
) -> f64 {
    let tgt = target_shares(t, weights, spill, m.n_nodes());
    let moved = npages as f64 * moved_share(resident, &tgt).max(0.0);
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
    pub(super) idle: Vec<Vec<f64>>,
    /// Directed links crossed by the data of a read from node s's CPUs to node d's memory:
    /// `(link, share of s's CPU groups whose route uses it)`.
    pub(super) links_of: RouteLinks,
    /// Capacity of every directed link, accesses per second (index: 2 * link + direction).
    pub(super) link_cap: Vec<f64>,
    /// Per source node, the share of the nominal path queue its samples show (1 until
    /// [`Self::calibrate_paths`] says otherwise).
    pub(super) path_scale: Vec<f64>,
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

/// Queueing service time of a controller, path or link, ns (see the module docs).
const SERVICE_NS: f64 = 4.0;
/// Highest utilisation the delay formula is evaluated at.
const U_MAX: f64 = 0.99;

/// Queueing delay (ns) of a resource carrying `load` of its capacity `cap` (same units; 0
/// where the capacity is unknown).
pub fn queue_ns(load: f64, cap: f64) -> f64 {
    if cap <= 0.0 || !cap.is_finite() {
        return 0.0;
    }
    let u = (load / cap).min(U_MAX);
    SERVICE_NS * u / (1.0 - u)
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
        let (links_of, link_cap) = route_links(m);
        LoadModel {
            acc: d.per_node.clone(),
            path: d.per_path.clone(),
            cap,
            path_cap,
            idle,
            links_of,
            link_cap,
            path_scale: vec![1.0; nn],
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

    /// Scale each source node's path queue to what its measured mean latency (`measured`, ns,
    /// per node of the accessing threads; `None`: no latency samples) shows: the part of it
    /// that idle latencies, controllers and links at the current loads do not explain, as a
    /// share of the nominal path queue at those loads, between none and all of it. A node
    /// without latency samples keeps the nominal queue. NPB SP with 16 threads keeps its local
    /// paths at ~90% of their capacity and its samples show no wait there (the scale stays
    /// at 0.01-0.02): spreading the boundary chunks of its slabs off them saves nothing,
    /// which the nominal queue (36 ns at 90%) had credited with 10-16 times their migration
    /// cost.
    pub fn calibrate_paths(&mut self, measured: &[Option<f64>]) {
        let without = self.loaded_with(&self.acc, &self.path, false);
        for (s, scale) in self.path_scale.iter_mut().enumerate() {
            let Some(m) = measured.get(s).copied().flatten() else { continue };
            let x: f64 = self.path[s].iter().sum();
            let queue: f64 = self.path[s].iter().zip(&self.path_cap[s]).map(|(a, c)| a * queue_ns(*a, *c)).sum::<f64>();
            if x <= 0.0 || queue <= 0.0 || !m.is_finite() {
                continue;
            }
            let explained: f64 = self.path[s].iter().zip(&without[s]).map(|(a, l)| a * l).sum::<f64>() / x;
            *scale = ((m - explained) / (queue / x)).clamp(0.0, 1.0);
        }
    }

    /// Loaded latency matrix (source node x memory node) for the given loads.
    pub fn loaded(&self, acc: &[f64], path: &[Vec<f64>]) -> Vec<Vec<f64>> {
        self.loaded_with(acc, path, true)
    }

    /// [`Self::loaded`], with the CPU-to-memory paths queueing (`path_queue`) or left out (the
    /// closed model holds them to their capacity instead).
    pub(super) fn loaded_with(&self, acc: &[f64], path: &[Vec<f64>], path_queue: bool) -> Vec<Vec<f64>> {
        let nn = acc.len();
        let links = self.link_loads(path);
        let link_delay: Vec<f64> = links.iter().zip(&self.link_cap).map(|(a, c)| queue_ns(*a, *c)).collect();
        (0..nn)
            .map(|s| {
                (0..nn)
                    .map(|d| {
                        self.idle[s][d]
                            + queue_ns(acc[d], self.cap[d])
                            + if path_queue {
                                self.path_scale[s] * queue_ns(path[s][d], self.path_cap[s][d])
                            } else {
                                0.0
                            }
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

    /// Per (source node, memory node): the highest utilisation of the controller, path and
    /// links its accesses cross; `links` are the link loads of `path`.
    pub fn path_utils(&self, acc: &[f64], path: &[Vec<f64>], links: &[f64]) -> Vec<Vec<f64>> {
        let nn = acc.len();
        (0..nn)
            .map(|s| {
                (0..nn)
                    .map(|d| {
                        let c = if self.cap[d] > 0.0 { acc[d] / self.cap[d] } else { 1.0 };
                        let p = if self.path_cap[s][d].is_finite() { path[s][d] / self.path_cap[s][d] } else { 0.0 };
                        self.links_of[s][d]
                            .iter()
                            .filter(|(l, _)| self.link_cap[*l] > 0.0)
                            .map(|&(l, _)| links[l] / self.link_cap[l])
                            .fold(c.max(p), f64::max)
                    })
                    .collect()
            })
            .collect()
    }

    /// The highest of `utils` ([`Self::path_utils`]) over the paths from the nodes of `src` to
    /// those of `pages` (shares; a zero share is no path).
    pub fn max_on(utils: &[Vec<f64>], src: &[f64], pages: &[f64]) -> f64 {
        let mut u: f64 = 0.0;
        for (s, _) in src.iter().enumerate().filter(|x| *x.1 > 0.0) {
            for (d, _) in pages.iter().enumerate().filter(|x| *x.1 > 0.0) {
                u = u.max(utils[s][d]);
            }
        }
        u
    }

    /// Loaded latency minus idle latency: the queueing part only.
    pub fn queueing(&self, lat: &[Vec<f64>]) -> Vec<Vec<f64>> {
        lat.iter().zip(&self.idle).map(|(l, i)| l.iter().zip(i).map(|(a, b)| a - b).collect()).collect()
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
        let path_delay = queue_ns(load.path[s][d], load.path_cap[s][d]);
        assert!(ll[s][d] - lq[s][d] - path_delay > 4.0 * SERVICE_NS, "{} vs {}", ll[s][d], lq[s][d]);
        assert!((ll[s2][d2] - lq[s2][d2]).abs() < 1e-9);
        assert!(
            LoadModel::max_on(
                &load.path_utils(&vec![0.0; nn], &load.path, &load.link_loads(&load.path)),
                &[1.0; 8],
                &{
                    let mut v = vec![0.0; nn];
                    v[d] = 1.0;
                    v
                }
            ) >= 0.89
        );
    }

    #[test]
    fn a_path_queues_only_as_far_as_the_measured_latency_shows() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let nn = m.n_nodes();
        let quiet = LoadModel::for_machine(
            &m,
            &Demand { per_node: vec![0.0; nn], per_path: vec![vec![0.0; nn]; nn], share: 0.0 },
        );
        // Node 0's threads read their own memory at 90% of the local path (its controller is
        // wider, so it queues little); node 1's read node 1's at 20%.
        let mut per_path = vec![vec![0.0; nn]; nn];
        per_path[0][0] = 0.9 * quiet.path_cap[0][0];
        per_path[1][1] = 0.2 * quiet.path_cap[1][1];
        let per_node: Vec<f64> = (0..nn).map(|d| per_path.iter().map(|r| r[d]).sum()).collect();
        let demand = Demand { per_node, per_path, share: 0.0 };
        let nominal = LoadModel::for_machine(&m, &demand);
        let lat = |l: &LoadModel| l.loaded(&l.acc, &l.path)[0][0];
        let without = nominal.loaded_with(&nominal.acc, &nominal.path, false)[0][0];
        let path_q = queue_ns(nominal.path[0][0], nominal.path_cap[0][0]);
        assert!(path_q > 8.0 * SERVICE_NS, "{path_q}");
        // Samples that show no wait beyond controller and idle latency: no path queue.
        let mut none = LoadModel::for_machine(&m, &demand);
        none.calibrate_paths(&[Some(without), None]);
        assert!((lat(&none) - without).abs() < 1e-9, "{} vs {without}", lat(&none));
        // Node 1 has no latency samples: its nominal queue stands.
        assert_eq!(none.path_scale[1], 1.0);
        // Samples showing half the nominal queue, all of it, and more than all of it.
        for (shown, scale) in [(0.5, 0.5), (1.0, 1.0), (3.0, 1.0)] {
            let mut l = LoadModel::for_machine(&m, &demand);
            l.calibrate_paths(&[Some(without + shown * path_q)]);
            assert!((l.path_scale[0] - scale).abs() < 1e-9, "{shown}: {}", l.path_scale[0]);
        }
        // Samples faster than the file's idle latency (a file that is off): no path queue,
        // never a negative one.
        let mut fast = LoadModel::for_machine(&m, &demand);
        fast.calibrate_paths(&[Some(0.5 * without)]);
        assert_eq!(fast.path_scale[0], 0.0);
        assert!(lat(&fast) >= without - 1e-9);
        // A move off the busy path saves latency only where the queue is shown.
        let mut relieved = demand.per_path.clone();
        relieved[0][0] *= 0.5;
        relieved[0][1] += demand.per_path[0][0] * 0.5;
        let acc: Vec<f64> = (0..nn).map(|d| relieved.iter().map(|r| r[d]).sum()).collect();
        let saving = |l: &LoadModel| lat(l) - l.loaded(&acc, &relieved)[0][0];
        assert!(saving(&nominal) > 8.0 * SERVICE_NS);
        assert!(saving(&none) < SERVICE_NS, "{}", saving(&none));
    }

    proptest::proptest! {
        #[test]
        fn path_scales_stay_between_none_and_all_and_latencies_stay_finite(
            loads in proptest::collection::vec(0.0f64..4e8, 64),
            measured in proptest::collection::vec(proptest::option::of(0.0f64..10_000.0), 8),
        ) {
            let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
            let nn = m.n_nodes();
            let per_path: Vec<Vec<f64>> = loads.chunks(nn).map(|r| r.to_vec()).collect();
            let per_node: Vec<f64> = (0..nn).map(|d| per_path.iter().map(|r| r[d]).sum()).collect();
            let mut l = LoadModel::for_machine(&m, &Demand { per_node, per_path, share: 0.0 });
            let nominal = l.loaded(&l.acc, &l.path);
            l.calibrate_paths(&measured);
            let scaled = l.loaded(&l.acc, &l.path);
            for s in 0..nn {
                proptest::prop_assert!((0.0..=1.0).contains(&l.path_scale[s]), "{:?}", l.path_scale);
                for d in 0..nn {
                    let x = scaled[s][d];
                    proptest::prop_assert!(x.is_finite() && x >= l.idle[s][d] - 1e-9 && x <= nominal[s][d] + 1e-9, "{x}");
                }
            }
        }
    }
}

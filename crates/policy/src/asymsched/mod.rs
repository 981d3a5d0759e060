//! `asymsched`: thread clusters on the best-connected nodes of an asymmetric fabric
//! (Lepers, Quéma, Fedorova, USENIX ATC 2015).
//!
//! Problem: on machines whose interconnect links differ in width and direction, the *choice
//! of nodes* for a group of communicating threads changes performance by more than 2x; the
//! best set is the one with the greatest bandwidth between its nodes, not the fewest hops.
//!
//! Approach (../shared/spec/asymsched.md), every cycle (1 s):
//!
//! ```text
//! samples ─▶ clusters (threads of an app on a node, packed by sharing), weight = ln(1 + remote MB/s)
//!         ─▶ search placements of clusters onto nodes, score Σ weight x bandwidth to app's other
//!            nodes (machine model's node-to-node GB/s); prune + symmetry hashing
//!         ─▶ keep ≥ 90% of best, pick the one moving least resident memory
//!         ─▶ budget: skip when migration time spent + predicted > 5% of the run so far
//!         ─▶ threads: affinity to the cluster's node
//!         ─▶ pages: sampled pages used by one node go there; shared pages spread over their users
//!         ─▶ full migration: 2 s after a move, if > 90% of an app's accesses still go to nodes
//!            it left, move all its memory (RangeAction) to its new node(s)
//! ```
//!
//! Migration cost per GB comes from the machine model (`costs.page_us` per page plus
//! `1/costs.copy_gbps`), unless `s_per_gb` is set (the paper measured 0.3 s/GB). Several
//! applications are placed together: clusters of all of them share the nodes, one cluster per
//! node; with more clusters than nodes the threads stay put and only pages move.

mod clusters;
pub mod search;

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, PageMove, Plan, RangeAction, RangeOp, SamplingMode, SamplingRequest, StartPlan};
use crate::plan::{ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use clusters::{clusters, Cluster, Measure};
use ptb_profile::SampledEvent;
use ptb_profile::{AppId, Tid};
use ptb_topology::{Machine, NodeIdx};
use search::{search, Item, Problem};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { key: "cycle_ms", default: "1000", doc: "time between decisions, ms (the paper: 1 s)" },
    ParamDoc {
        key: "sample_period",
        default: "131072",
        doc: "IBS op sampling period in core cycles (one op tagged every N cycles of each core; the paper \
              measured about 2% overhead for its IBS sampling)",
    },
    ParamDoc { key: "keep", default: "0.9", doc: "placements scoring at least this fraction of the best are kept" },
    ParamDoc {
        key: "budget",
        default: "0.05",
        doc: "migration time (spent + predicted) may not exceed this fraction of the run time so far",
    },
    ParamDoc {
        key: "s_per_gb",
        default: "from machine",
        doc: "seconds to migrate 1 GB; default from the machine's page_us and copy_gbps (paper: 0.3)",
    },
    ParamDoc { key: "full_after_ms", default: "2000", doc: "wait after a move before checking for full migration, ms" },
    ParamDoc {
        key: "full_threshold",
        default: "0.9",
        doc: "full migration when more than this share of an app's accesses go to nodes it left",
    },
    ParamDoc {
        key: "max_placements",
        default: "200000",
        doc: "stop the placement search after this many complete placements",
    },
];

/// Parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub cycle: Duration,
    pub sample_period: u64,
    pub keep: f64,
    pub budget: f64,
    pub s_per_gb: Option<f64>,
    pub full_after: Duration,
    pub full_threshold: f64,
    pub max_placements: u64,
}

impl Config {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let s = p.section("asymsched");
        let spg = s.f64_in("s_per_gb", 0.0, 0.0, 1000.0)?;
        let c = Config {
            cycle: Duration::from_millis(s.get::<u64>("cycle_ms", 1000)?.max(1)),
            sample_period: s.get::<u64>("sample_period", 131_072)?.max(1),
            keep: s.f64_in("keep", 0.9, 0.0, 1.0)?,
            budget: s.f64_in("budget", 0.05, 0.0, 1.0)?,
            s_per_gb: (spg > 0.0).then_some(spg),
            full_after: Duration::from_millis(s.get("full_after_ms", 2000)?),
            full_threshold: s.f64_in("full_threshold", 0.9, 0.0, 1.0)?,
            max_placements: s.get::<u64>("max_placements", 200_000)?.max(1),
        };
        s.finish()?;
        Ok(c)
    }
}

/// A placement change waiting for its full-migration check.
#[derive(Clone, Debug)]
struct Moved {
    at: Duration,
    left: BTreeSet<NodeIdx>,
    to: BTreeSet<NodeIdx>,
}

#[derive(Debug)]
pub struct AsymSched {
    cfg: Config,
    /// Estimated seconds spent migrating so far (A_tm).
    spent_s: f64,
    pending: BTreeMap<AppId, Moved>,
}

impl AsymSched {
    pub fn new(cfg: Config) -> Self {
        AsymSched { cfg, spent_s: 0.0, pending: BTreeMap::new() }
    }
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        Ok(AsymSched::new(Config::from_params(p)?))
    }

    fn s_per_byte(&self, m: &Machine) -> f64 {
        let per_gb = self.cfg.s_per_gb.unwrap_or_else(|| {
            let pages_per_gb = 1e9 / m.page_size.max(1) as f64;
            pages_per_gb * m.costs.page_us * 1e-6 + 1.0 / m.costs.copy_gbps.max(1e-3)
        });
        per_gb / 1e9
    }
}

/// Node-to-node bandwidth (GB/s) from CPUs of `a` to memory of `b`: the machine model's
/// Bandwidth Graph, else 100/SLIT distance, else 1.
fn bandwidth(m: &Machine, a: NodeIdx, b: NodeIdx) -> f64 {
    m.node_bg(a, b).or_else(|| m.distance(a, b).map(|d| 100.0 / d.max(1.0))).unwrap_or(1.0)
}

impl Policy for AsymSched {
    fn name(&self) -> String {
        "asymsched".into()
    }
    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest {
            mode: SamplingMode::Address { event: SampledEvent::Cycles, period: self.cfg.sample_period },
            cycle: self.cfg.cycle,
        }
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let m = snap.machine;
        let nn = m.n_nodes();
        let mut plan = Plan::default();
        let meas = Measure::from_snapshot(snap);
        let nodes = snap.cpu_nodes();
        let capacity = nodes.iter().map(|n| m.node(*n).cpus.len()).min().unwrap_or(1);
        let cls = clusters(snap, &meas, capacity);
        let budget_s = self.cfg.budget * snap.now.as_secs_f64();
        let s_per_byte = self.s_per_byte(m);

        // Resident pages per app and node (regions; else the sampled pages).
        let mut resident: BTreeMap<AppId, Vec<u64>> = BTreeMap::new();
        for r in snap.regions {
            let v = resident.entry(r.app).or_insert_with(|| vec![0; nn]);
            r.resident.iter().take(nn).enumerate().for_each(|(i, c)| v[i] += c);
        }
        if snap.regions.is_empty() {
            for (p, (_, n)) in &meas.pages {
                if let Some(n) = n {
                    resident.entry(p.app).or_insert_with(|| vec![0; nn])[n.ix()] += 1;
                }
            }
        }

        // 1. Placement search.
        let mut target: BTreeMap<Tid, NodeIdx> = snap.threads.iter().map(|t| (t.tid, t.node)).collect();
        let decided = self.place(snap, &cls, &nodes, &resident, budget_s, s_per_byte, &mut plan);
        if let Some(assign) = decided {
            for (c, &node) in cls.iter().zip(&assign) {
                for &t in &c.threads {
                    target.insert(t, node);
                }
            }
            // Remember which apps left which nodes, for the full-migration check.
            let mut before: BTreeMap<AppId, BTreeSet<NodeIdx>> = BTreeMap::new();
            let mut after: BTreeMap<AppId, BTreeSet<NodeIdx>> = BTreeMap::new();
            for t in snap.threads {
                before.entry(t.app).or_default().insert(t.node);
                after.entry(t.app).or_default().insert(target[&t.tid]);
            }
            for (app, to) in after {
                let left: BTreeSet<NodeIdx> = before[&app].difference(&to).copied().collect();
                if !left.is_empty() {
                    self.pending.insert(app, Moved { at: snap.now, left, to });
                }
            }
        }
        for t in snap.threads {
            if target[&t.tid] != t.node {
                plan.threads.push(ThreadMove { tid: t.tid, to: ThreadTarget::Node(target[&t.tid]) });
            }
        }

        // 2. Full migration of apps that still mostly use the nodes they left.
        let mut room: Vec<u64> = (0..nn).map(|i| snap.free_bytes.get(i).copied().unwrap_or(0) / m.page_size).collect();
        let mem_ok = |n: NodeIdx| snap.allowed.contains_idx(n) && m.node(n).has_memory();
        let mut full_apps = BTreeSet::new();
        let due: Vec<AppId> =
            self.pending.iter().filter(|(_, mv)| snap.now >= mv.at + self.cfg.full_after).map(|(a, _)| *a).collect();
        for app in due {
            let mv = self.pending[&app].clone();
            let acc = meas.by_app_mem.get(&app);
            let total: u64 = acc.map_or(0, |v| v.iter().sum());
            let on_left: u64 = acc.map_or(0, |v| mv.left.iter().map(|n| v[n.ix()]).sum());
            if total == 0 || (on_left as f64) <= self.cfg.full_threshold * total as f64 {
                self.pending.remove(&app);
                continue;
            }
            let dest: Vec<NodeIdx> = mv.to.iter().copied().filter(|n| mem_ok(*n)).collect();
            if dest.is_empty() {
                self.pending.remove(&app);
                continue;
            }
            let moving: u64 = resident.get(&app).map_or(0, |v| mv.left.iter().map(|n| v[n.ix()]).sum());
            let cost = moving as f64 * m.page_size as f64 * s_per_byte;
            if self.spent_s + cost > budget_s {
                plan.stats.insert("full_migration_deferred".into(), 1.0);
                continue; // try again next cycle
            }
            let mut ranges = Vec::new();
            let mut need = vec![0u64; nn];
            for r in snap.regions.iter().filter(|r| r.app == app) {
                let on_left: u64 = mv.left.iter().map(|n| r.resident.get(n.ix()).copied().unwrap_or(0)).sum();
                if on_left == 0 {
                    continue;
                }
                let op = if dest.len() == 1 {
                    need[dest[0].ix()] += r.npages;
                    RangeOp::MoveTo(dest[0])
                } else {
                    RangeOp::Interleave(dest.clone())
                };
                ranges.push(RangeAction { app, start_vpn: r.start_vpn, npages: r.npages, op });
            }
            if need.iter().zip(&room).any(|(n, r)| n > r) {
                continue;
            }
            need.iter().enumerate().for_each(|(i, n)| room[i] -= n);
            self.spent_s += cost;
            self.pending.remove(&app);
            full_apps.insert(app);
            plan.ranges.extend(ranges);
        }

        // 3. Dynamic migration of actively used pages, within the budget.
        let page_s = m.page_size as f64 * s_per_byte;
        let mut sent = vec![0u64; nn];
        let mut budget_pages =
            if page_s > 0.0 { ((budget_s - self.spent_s).max(0.0) / page_s).floor() as u64 } else { u64::MAX };
        for (page, (tids, cur)) in &meas.pages {
            if budget_pages == 0 {
                break;
            }
            let Some(cur) = *cur else { continue };
            if full_apps.contains(&page.app) {
                continue;
            }
            let users: BTreeSet<NodeIdx> =
                tids.iter().filter_map(|t| target.get(t)).copied().filter(|n| mem_ok(*n)).collect();
            if users.is_empty() || users.contains(&cur) {
                continue;
            }
            // One user: move there. Shared: spread over the users (least sent so far).
            let to = *users.iter().min_by_key(|n| (sent[n.ix()], **n)).expect("non-empty");
            if room[to.ix()] == 0 {
                continue;
            }
            room[to.ix()] -= 1;
            sent[to.ix()] += 1;
            budget_pages -= 1;
            self.spent_s += page_s;
            plan.pages.push(PageMove { page: *page, to });
        }

        let st = &mut plan.stats;
        st.insert("clusters".into(), cls.len() as f64);
        st.insert("migration_spent_s".into(), self.spent_s);
        st.insert("pages_planned".into(), plan.pages.len() as f64);
        st.insert("full_migrations".into(), full_apps.len() as f64);
        plan
    }
}

impl AsymSched {
    /// Search placements and pick one; None keeps the current placement.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        snap: &Snapshot,
        cls: &[Cluster],
        nodes: &[NodeIdx],
        resident: &BTreeMap<AppId, Vec<u64>>,
        budget_s: f64,
        s_per_byte: f64,
        plan: &mut Plan,
    ) -> Option<Vec<NodeIdx>> {
        let m = snap.machine;
        if cls.is_empty() || cls.len() > nodes.len() || cls.iter().all(|c| c.accesses == 0) {
            return None;
        }
        // Weights: ln(1 + remote MB/s) (plain remote samples when the period is unknown).
        let secs = snap.cycle.as_secs_f64().max(1e-9);
        let scale =
            if snap.sampling_period > 0 { snap.sampling_period as f64 * m.line_size as f64 / 1e6 / secs } else { 1.0 };
        let apps: Vec<AppId> = cls.iter().map(|c| c.app).collect::<BTreeSet<_>>().into_iter().collect();
        let items: Vec<Item> = cls
            .iter()
            .map(|c| Item {
                app: apps.binary_search(&c.app).unwrap_or(0),
                weight: (1.0 + c.remote as f64 * scale).ln(),
            })
            .collect();
        let bw: Vec<Vec<f64>> = nodes.iter().map(|&a| nodes.iter().map(|&b| bandwidth(m, a, b)).collect()).collect();
        let out = search(&Problem { bw, items, keep: self.cfg.keep, max_leaves: self.cfg.max_placements });
        let st = &mut plan.stats;
        st.insert("placements_total".into(), out.total);
        st.insert("placements_evaluated".into(), out.evaluated as f64);
        st.insert("placements_skipped".into(), (out.total - out.evaluated as f64).max(0.0));
        st.insert("placements_pruned".into(), out.pruned);
        st.insert("placements_symmetric".into(), out.symmetric as f64);
        st.insert("placements_kept".into(), out.kept.len() as f64);
        st.insert("search_truncated".into(), if out.truncated { 1.0 } else { 0.0 });
        st.insert("best_weighted_gbps".into(), out.best);

        // Cost of a placement: resident pages of each app on nodes it would leave; then
        // threads moved; then the higher score; then the node order (determinism).
        // Precomputed per cluster: how many of its threads sit on each candidate node; per
        // app: the nodes it uses now and its resident pages there.
        let on_node: Vec<Vec<usize>> = cls
            .iter()
            .map(|c| {
                let mut v = vec![0usize; nodes.len()];
                for t in &c.threads {
                    let now = snap.thread(*t).map_or(c.node, |t| t.node);
                    if let Some(i) = nodes.iter().position(|n| *n == now) {
                        v[i] += 1;
                    }
                }
                v
            })
            .collect();
        let app_ix: Vec<usize> = cls.iter().map(|c| apps.binary_search(&c.app).unwrap_or(0)).collect();
        let mut before = vec![vec![0u64; nodes.len()]; apps.len()];
        for (ci, (c, v)) in cls.iter().zip(&on_node).enumerate() {
            let res = resident.get(&c.app);
            for (i, &k) in v.iter().enumerate() {
                if k > 0 {
                    before[app_ix[ci]][i] = res.map_or(0, |r| r[nodes[i].ix()]);
                }
            }
        }
        let cost = |a: &[usize], score: f64| -> (u64, usize, std::cmp::Reverse<i64>, Vec<usize>) {
            let mut threads = 0;
            let mut kept_nodes = vec![vec![false; nodes.len()]; apps.len()];
            for (ci, &i) in a.iter().enumerate() {
                threads += cls[ci].threads.len() - on_node[ci][i];
                kept_nodes[app_ix[ci]][i] = true;
            }
            let pages = before
                .iter()
                .zip(&kept_nodes)
                .map(|(b, k)| b.iter().zip(k).filter(|(_, kept)| !**kept).map(|(p, _)| p).sum::<u64>())
                .sum();
            (pages, threads, std::cmp::Reverse((score * 1000.0).round() as i64), a.to_vec())
        };
        let (pages, threads, _, best) = out.kept.iter().map(|(a, s)| cost(a, *s)).min()?;
        if threads == 0 {
            return None;
        }
        let predicted = pages as f64 * m.page_size as f64 * s_per_byte;
        plan.stats.insert("predicted_migration_s".into(), predicted);
        if self.spent_s + predicted > budget_s {
            plan.stats.insert("budget_skipped".into(), 1.0);
            return None;
        }
        Some(best.iter().map(|&i| nodes[i]).collect())
    }
}

#[cfg(test)]
mod tests;

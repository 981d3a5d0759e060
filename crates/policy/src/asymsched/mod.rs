//! `asymsched`: thread clusters on the best-connected nodes of an asymmetric fabric
//! (Lepers, Quéma, Fedorova, USENIX ATC 2015).
//!
//! Problem: on machines whose interconnect links differ in width and direction, the *choice
//! of nodes* for a group of communicating threads changes performance by more than 2x; the
//! best set is the one with the greatest bandwidth between its nodes, not the fewest hops.
//!
//! Approach (../shared/spec/asymsched.md), every cycle (1 s), IBS op samples in cycle mode:
//!
//! ```text
//! samples ─▶ clusters: an app's threads on a node, packed onto ceil(threads / CPUs per node)
//!            nodes by sharing; weight = ln(1 + remote MB/s)                      (clusters.rs)
//!         ─▶ node sets: each app gets as many nodes as it has clusters; a set's bandwidth
//!            from the machine file's links and routes, all its nodes exchanging at once
//!            (fabric.rs); score Σ weight x bandwidth; one evaluation per node set
//!            (symmetry hashing), branch-and-bound pruning                        (search.rs)
//!         ─▶ keep ≥ 90% of best, pick the one leaving the least resident memory, then
//!            moving the fewest threads
//!         ─▶ budget: do not apply when migration time spent + predicted > 5% of the run so far
//!         ─▶ threads: affinity to a node of their app's set, by where their data is (clusters.rs)
//!         ─▶ memory: full migration 2 s after a move if > 90% of the app's accesses still go
//!            to nodes it left; else the sampled pages in use follow their users, shared pages
//!            spread over the app's nodes, within the budget                       (memory.rs)
//! ```
//!
//! Before AsymSched has placed an application (its first cycle, or while the budget blocks the
//! placement) its threads stay in Linux's hands and its pages do not move. With more clusters
//! than nodes (an oversubscribed machine) nothing is placed.

mod clusters;
mod fabric;
mod memory;
pub mod search;

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, SamplingMode, SamplingRequest, StartPlan};
use crate::plan::{ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use clusters::{assign, clusters, Cluster, Measure};
use memory::AppNodes;
use ptb_profile::histogram::FxBuild;
use ptb_profile::SampledEvent;
use ptb_profile::{AppId, PageKey};
use ptb_topology::NodeIdx;
use search::{search, AppReq, Problem};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
        doc: "seconds to migrate 1 GB; default: the machine's cost per page (larger of page_us and page size / \
              copy_gbps) spread over the CPUs of the destination nodes, as the paper's parallel migration \
              runs one worker per CPU there (the paper measured 0.3 on its machine)",
    },
    ParamDoc { key: "full_after_ms", default: "2000", doc: "wait after a move before checking for full migration, ms" },
    ParamDoc {
        key: "full_threshold",
        default: "0.9",
        doc: "full migration when more than this share of an app's accesses go to nodes it left",
    },
    ParamDoc {
        key: "private_min",
        default: "2",
        doc: "samples (since the app's threads last moved) before a page used by one node only moves there",
    },
    ParamDoc {
        key: "spread_slack",
        default: "0.25",
        doc: "a shared page leaves a node serving more than 1 + this times the app's mean sampled traffic per node",
    },
    ParamDoc {
        key: "max_placements",
        default: "200000",
        doc: "stop the placement search after this many complete placements (or node sets to score)",
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
    pub private_min: u32,
    pub spread_slack: f64,
    pub max_placements: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cycle: Duration::from_millis(1000),
            sample_period: 131_072,
            keep: 0.9,
            budget: 0.05,
            s_per_gb: None,
            full_after: Duration::from_millis(2000),
            full_threshold: 0.9,
            private_min: 2,
            spread_slack: 0.25,
            max_placements: 200_000,
        }
    }
}

impl Config {
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let s = p.section("asymsched");
        let d = Config::default();
        let spg = s.f64_in("s_per_gb", 0.0, 0.0, 1000.0)?;
        let c = Config {
            cycle: Duration::from_millis(s.u64_in("cycle_ms", 1000, 1, 3_600_000)?),
            sample_period: s.u64_in("sample_period", d.sample_period, 1, u64::MAX)?,
            keep: s.f64_in("keep", d.keep, 0.0, 1.0)?,
            budget: s.f64_in("budget", d.budget, 0.0, 1.0)?,
            s_per_gb: (spg > 0.0).then_some(spg),
            full_after: Duration::from_millis(s.get("full_after_ms", 2000)?),
            full_threshold: s.f64_in("full_threshold", d.full_threshold, 0.0, 1.0)?,
            private_min: s.get::<u32>("private_min", d.private_min)?.max(1),
            spread_slack: s.f64_in("spread_slack", d.spread_slack, 0.0, 100.0)?,
            max_placements: s.u64_in("max_placements", d.max_placements, 1, u64::MAX)?,
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

/// What the samples said about one page since its application's threads last changed node.
#[derive(Clone, Copy, Debug)]
struct Hist {
    /// Nodes (bit per node index) whose threads used it.
    on: u64,
    count: u32,
    epoch: u32,
}

#[derive(Debug)]
pub struct AsymSched {
    cfg: Config,
    /// Estimated seconds spent migrating so far (A_tm).
    spent_s: f64,
    pending: BTreeMap<AppId, Moved>,
    /// Apps whose threads AsymSched has placed.
    placed: BTreeSet<AppId>,
    history: HashMap<PageKey, Hist, FxBuild>,
    epochs: BTreeMap<AppId, u32>,
}

impl AsymSched {
    pub fn new(cfg: Config) -> Self {
        AsymSched {
            cfg,
            spent_s: 0.0,
            pending: BTreeMap::new(),
            placed: BTreeSet::new(),
            history: HashMap::default(),
            epochs: BTreeMap::new(),
        }
    }
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        Ok(AsymSched::new(Config::from_params(p)?))
    }
}

/// One application as the search sees it.
struct AppView {
    app: AppId,
    /// Indices into `snap.threads`.
    threads: Vec<usize>,
    k: usize,
    weight: f64,
}

impl Policy for AsymSched {
    fn name(&self) -> String {
        "asymsched".into()
    }
    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(
            SamplingMode::Address { event: SampledEvent::Cycles, period: self.cfg.sample_period },
            self.cfg.cycle,
        )
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let m = snap.machine;
        let nn = m.n_nodes();
        let mut plan = Plan::default();
        if nn > 64 {
            plan.stats.insert("unsupported_over_64_nodes".into(), 1.0);
            return plan;
        }
        let meas = Measure::from_snapshot(snap);
        let nodes = snap.cpu_nodes();
        let capacity = nodes.iter().map(|n| m.node(*n).cpus.len()).min().unwrap_or(1);
        let cls = clusters(snap, &meas, capacity);
        let budget_s = self.cfg.budget * snap.now.as_secs_f64();
        let resident = resident_pages(snap, &meas);
        let apps = self.apps(snap, &cls);

        // 1. Node sets and threads.
        let mut target: Vec<NodeIdx> = snap.threads.iter().map(|t| t.node).collect();
        if let Some(sets) = self.place(snap, &apps, &nodes, &resident, budget_s, &mut plan) {
            let mut room: Vec<usize> = m.nodes.iter().map(|n| n.cpus.len()).collect();
            for (a, set) in apps.iter().zip(&sets) {
                let to = assign(snap, &meas, &a.threads, set, &mut room);
                let before: BTreeSet<NodeIdx> = a.threads.iter().map(|&t| snap.threads[t].node).collect();
                let after: BTreeSet<NodeIdx> = to.iter().copied().collect();
                if a.threads.iter().zip(&to).any(|(&t, n)| snap.threads[t].node != *n) {
                    self.epoch_bump(a.app);
                }
                let left: BTreeSet<NodeIdx> = before.difference(&after).copied().collect();
                if !left.is_empty() {
                    self.pending.insert(a.app, Moved { at: snap.now, left, to: after });
                }
                for (&t, n) in a.threads.iter().zip(to) {
                    target[t] = n;
                }
                self.placed.insert(a.app);
            }
            for (t, th) in snap.threads.iter().enumerate() {
                let pinned = th.affinity.as_ref() == Some(&m.node(target[t]).cpus);
                if target[t] != th.node || !pinned {
                    plan.threads.push(ThreadMove { tid: th.tid, to: ThreadTarget::Node(target[t]) });
                }
            }
        }

        // 2. Memory, for the apps AsymSched has placed.
        let mut room: Vec<u64> = (0..nn).map(|i| snap.free_bytes.get(i).copied().unwrap_or(0) / m.page_size).collect();
        let full = self.full_migrations(snap, &meas, &resident, &mut room, budget_s, &mut plan);
        let mut placed: BTreeMap<AppId, AppNodes> = BTreeMap::new();
        for a in apps.iter().filter(|a| self.placed.contains(&a.app)) {
            let mut to = vec![0u64; nn];
            for &t in &a.threads {
                to[snap.threads[t].node.ix()] |= 1u64 << target[t].ix();
            }
            let mem: Vec<NodeIdx> = a
                .threads
                .iter()
                .map(|&t| target[t])
                .collect::<BTreeSet<_>>()
                .into_iter()
                .filter(|n| snap.allowed.contains_idx(*n) && m.node(*n).has_memory())
                .collect();
            let cpus = mem.iter().map(|n| m.node(*n).cpus.len()).sum();
            placed.insert(a.app, AppNodes { mem, to, cpus });
        }
        self.dynamic_moves(snap, &meas, &placed, &full, &mut room, budget_s, &mut plan);

        let st = &mut plan.stats;
        st.insert("clusters".into(), cls.len() as f64);
        st.insert("apps_placed".into(), placed.len() as f64);
        st.insert("migration_spent_s".into(), self.spent_s);
        st.insert("pages_planned".into(), plan.pages.len() as f64);
        st.insert("full_migrations".into(), full.len() as f64);
        st.insert("memory_samples".into(), meas.memory_samples as f64);
        plan
    }
}

/// Resident pages per app and node: the regions' counts; else the sampled pages.
fn resident_pages(snap: &Snapshot, meas: &Measure) -> BTreeMap<AppId, Vec<u64>> {
    let nn = snap.machine.n_nodes();
    let mut out: BTreeMap<AppId, Vec<u64>> = BTreeMap::new();
    for r in snap.regions {
        let v = out.entry(r.app).or_insert_with(|| vec![0; nn]);
        r.resident.iter().take(nn).enumerate().for_each(|(i, c)| v[i] += c);
    }
    if snap.regions.is_empty() {
        for p in &meas.pages {
            if let Some(n) = p.node {
                out.entry(p.key.app).or_insert_with(|| vec![0; nn])[n.ix()] += 1;
            }
        }
    }
    out
}

impl AsymSched {
    /// Applications with their threads, node count and weight.
    fn apps(&self, snap: &Snapshot, cls: &[Cluster]) -> Vec<AppView> {
        // Weights: ln(1 + remote MB/s), one sample standing for `period` events of one line.
        let secs = snap.cycle.as_secs_f64().max(1e-9);
        let line = snap.machine.line_size as f64;
        let scale = if snap.sampling_period > 0 { snap.sampling_period as f64 * line / 1e6 / secs } else { 1.0 };
        let mut out: Vec<AppView> = Vec::new();
        for c in cls {
            let w = (1.0 + c.remote as f64 * scale).ln();
            match out.last_mut() {
                Some(a) if a.app == c.app => {
                    a.threads.extend(&c.threads);
                    a.k += 1;
                    a.weight += w;
                }
                _ => out.push(AppView { app: c.app, threads: c.threads.clone(), k: 1, weight: w }),
            }
        }
        out
    }

    /// Search node sets for the apps; None keeps the threads where they are.
    fn place(
        &self,
        snap: &Snapshot,
        apps: &[AppView],
        nodes: &[NodeIdx],
        resident: &BTreeMap<AppId, Vec<u64>>,
        budget_s: f64,
        plan: &mut Plan,
    ) -> Option<Vec<Vec<NodeIdx>>> {
        let m = snap.machine;
        if apps.is_empty() || nodes.is_empty() || nodes.len() > 64 {
            return None;
        }
        let reqs: Vec<AppReq> = apps.iter().map(|a| AppReq { k: a.k, weight: a.weight }).collect();
        let set_of =
            |mask: u64| -> Vec<NodeIdx> { (0..nodes.len()).filter(|i| mask >> i & 1 == 1).map(|i| nodes[i]).collect() };
        // Cost of moving an app onto a set: its resident pages outside the set, then its
        // threads outside the set.
        let cost = |a: usize, mask: u64| -> (u64, u64) {
            let inside = |n: NodeIdx| nodes.iter().position(|x| *x == n).is_some_and(|i| mask >> i & 1 == 1);
            let pages = resident.get(&apps[a].app).map_or(0, |v| {
                v.iter().enumerate().filter(|(i, _)| !inside(NodeIdx::from_ix(*i))).map(|(_, c)| c).sum()
            });
            let threads = apps[a].threads.iter().filter(|&&t| !inside(snap.threads[t].node)).count() as u64;
            (pages, threads)
        };
        let out = search(
            &Problem { n: nodes.len(), apps: &reqs, keep: self.cfg.keep, max_leaves: self.cfg.max_placements },
            |mask| fabric::cluster_bandwidth(m, &set_of(mask)),
            cost,
        );
        let st = &mut plan.stats;
        st.insert("placements_total".into(), out.total);
        st.insert("placements_evaluated".into(), out.evaluated as f64);
        st.insert("placements_skipped".into(), (out.total - out.evaluated as f64).max(0.0));
        st.insert("placements_pruned".into(), out.pruned);
        st.insert("placements_symmetric".into(), out.symmetric as f64);
        st.insert("search_truncated".into(), if out.truncated { 1.0 } else { 0.0 });
        st.insert("best_weighted_gbps".into(), out.best);
        let sets = out.sets?;
        // Budget: the resident memory the chosen sets leave behind (beyond what the nodes the
        // app runs on now already leave out) must be movable in time.
        let mut predicted = 0.0;
        for (a, &mask) in sets.iter().enumerate() {
            let now: u64 = apps[a]
                .threads
                .iter()
                .filter_map(|&t| nodes.iter().position(|n| *n == snap.threads[t].node))
                .fold(0, |acc, i| acc | 1u64 << i);
            let pages = cost(a, mask).0.saturating_sub(cost(a, now).0);
            let cpus = set_of(mask).iter().map(|n| m.node(*n).cpus.len()).sum();
            predicted += self.migration_s(m, pages, cpus);
        }
        st.insert("predicted_migration_s".into(), predicted);
        if self.spent_s + predicted > budget_s {
            st.insert("budget_skipped".into(), 1.0);
            return None;
        }
        Some(sets.into_iter().map(set_of).collect())
    }
}

#[cfg(test)]
mod tests;

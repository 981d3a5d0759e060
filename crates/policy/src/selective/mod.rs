//! `selective`: selective migration of recurring sampled regions (Yook and Egger).
//!
//! Problem: sampling sees one large object as scattered fragments, and data touched once (a
//! stream) looks just like hot data within one sample window. Moving every remotely sampled
//! page wastes migration bandwidth and can pile pages onto one memory controller.
//!
//! Approach (../shared/spec/selective-migration.md), once per epoch (= cycle, 100 ms):
//!
//! ```text
//! samples ─▶ region inference (ptb_profile::regions: average-stride gap filling, per mapping)
//!         ─▶ history table (occurrence counters, ageing) ─▶ recurring regions, highest count first
//!         ─▶ destination = node whose threads access the region most (clearly more than the
//!            holder's: `min_gain`), unless that would make it the new hot spot (share of sampled
//!            accesses > balance / #memory nodes and above today's busiest node); a region on a
//!            node above that share may also move to a node left less loaded than it was
//!         ─▶ RangeAction::MoveTo of the whole filled-in region
//! ```
//!
//! A region seen in one epoch only is never moved. The same history also works as a filter in
//! front of another policy (`POLICY+selective`, [`SelectiveFilter`]): thread moves and range
//! actions pass through, page moves survive only inside recurring regions.

mod filter;
pub mod history;

pub use filter::SelectiveFilter;

use crate::params::{ParamDoc, Params, Section};
use crate::plan::{AllocPolicy, Plan, RangeAction, RangeOp, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use history::History;
use ptb_profile::SampledEvent;
use ptb_profile::{infer_regions, InferredRegion, PageKey};
use ptb_topology::NodeIdx;
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { key: "epoch_ms", default: "100", doc: "length of one epoch (the decision cycle), ms; the paper uses 100" },
    ParamDoc {
        key: "sample_period",
        default: "4096",
        doc: "one address sample every N memory accesses (standalone policy only)",
    },
    ParamDoc {
        key: "min_count",
        default: "2",
        doc: "epochs a region must be seen in before it may move (1 would move regions seen once)",
    },
    ParamDoc { key: "max_age", default: "8", doc: "epochs after which an unseen region leaves the history table" },
    ParamDoc {
        key: "balance",
        default: "1.5",
        doc: "a move may not raise a node above balance/#memory-nodes of the sampled accesses unless it stays below today's busiest node",
    },
    ParamDoc { key: "max_pages", default: "65536", doc: "most pages moved per epoch (256 MiB at 4 KiB pages)" },
    ParamDoc {
        key: "min_gain",
        default: "0.1",
        doc: "a region moves for locality only if the destination's threads make this share of its accesses more than the holder's",
    },
];

/// Parameters shared by the policy and the filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub epoch: Duration,
    pub sample_period: u64,
    pub min_count: u32,
    pub max_age: u64,
    pub balance: f64,
    pub max_pages: u64,
    pub min_gain: f64,
}

impl Config {
    fn read(s: &Section) -> Result<Self, PolicyError> {
        let c = Config {
            epoch: Duration::from_millis(s.u64_in("epoch_ms", 100, 1, 3_600_000)?),
            sample_period: s.u64_in("sample_period", 4096, 1, u64::MAX)?,
            min_count: s.u64_in("min_count", 2, 1, u64::from(u32::MAX))? as u32,
            max_age: s.get("max_age", 8)?,
            balance: s.f64_in("balance", 1.5, 1.0, 1000.0)?,
            max_pages: s.get("max_pages", 65536)?,
            min_gain: s.f64_in("min_gain", 0.1, 0.0, 1.0)?,
        };
        Ok(c)
    }
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let s = p.section("selective");
        let c = Config::read(&s)?;
        s.finish()?;
        Ok(c)
    }
}

/// One inferred region of this epoch with its access counts.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub region: InferredRegion,
    /// Sampled accesses per node of the accessing CPU.
    pub by_cpu_node: Vec<u64>,
    /// Sampled accesses per node holding the page (None: page location unknown).
    pub by_mem_node: Vec<u64>,
    pub count: u32,
}

/// The shared per-epoch step: infer regions from the snapshot's samples and update history.
pub(crate) fn observe(history: &mut History, epoch: u64, max_age: u64, snap: &Snapshot) -> Vec<Seen> {
    let m = snap.machine;
    let nn = m.n_nodes();
    let pages: Vec<PageKey> = snap.samples.iter().map(|s| s.page(m.page_size)).collect();
    let segs: Vec<_> = snap.regions.iter().map(|r| (r.app, r.start_vpn, r.npages)).collect();
    let regions = infer_regions(&pages, &segs);
    let mut seen: Vec<Seen> = regions
        .iter()
        .map(|r| Seen { region: *r, by_cpu_node: vec![0; nn], by_mem_node: vec![0; nn], count: 0 })
        .collect();
    for (s, p) in snap.samples.iter().zip(&pages) {
        let i = regions.partition_point(|r| (r.app, r.end_vpn()) <= (p.app, p.vpn));
        let Some(x) = seen.get_mut(i).filter(|x| x.region.contains(*p)) else { continue };
        if let Some(n) = m.node_of_cpu(s.cpu).or_else(|| snap.thread(s.tid).map(|t| t.node)) {
            x.by_cpu_node[n.ix()] += 1;
        }
        if let Some(n) = snap.pages.get(*p).filter(|n| n.ix() < nn) {
            x.by_mem_node[n.ix()] += 1;
        }
    }
    let counts = history.observe(epoch, &regions);
    seen.iter_mut().zip(counts).for_each(|(s, c)| s.count = c);
    history.age(epoch, max_age);
    seen
}

#[derive(Debug)]
pub struct Selective {
    cfg: Config,
    history: History,
    epoch: u64,
}

impl Selective {
    pub fn new(cfg: Config) -> Self {
        Selective { cfg, history: History::default(), epoch: 0 }
    }
    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        Ok(Selective::new(Config::from_params(p)?))
    }
}

impl Policy for Selective {
    fn name(&self) -> String {
        "selective".into()
    }
    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(
            SamplingMode::Address { event: SampledEvent::SlowLoads, period: self.cfg.sample_period },
            self.cfg.epoch,
        )
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        self.epoch += 1;
        let m = snap.machine;
        let nn = m.n_nodes();
        let seen = observe(&mut self.history, self.epoch, self.cfg.max_age, snap);
        let mut plan = Plan::default();

        // Controller load: sampled accesses served by each node's memory.
        let mut load = vec![0u64; nn];
        seen.iter().for_each(|s| s.by_mem_node.iter().enumerate().for_each(|(n, c)| load[n] += c));
        let total: u64 = load.iter().sum();
        let mem_nodes = snap.memory_nodes();
        let share_cap = (self.cfg.balance / mem_nodes.len().max(1) as f64 * total as f64).ceil() as u64;

        // Candidates: history entries touched this epoch that recur, moved whole (the largest
        // extent seen from that start), highest counter first, then most accessed.
        let mut cand: std::collections::BTreeMap<(u32, u64), Seen> = Default::default();
        for s in seen.iter().filter(|s| s.count >= self.cfg.min_count) {
            let r = s.region;
            let start = r.start_vpn;
            let Some(e) = self.history.get(r.app, start) else { continue };
            let c = cand.entry((r.app, start)).or_insert_with(|| Seen {
                region: InferredRegion { app: r.app, start_vpn: start, npages: e.npages, sampled_pages: 0 },
                by_cpu_node: vec![0; nn],
                by_mem_node: vec![0; nn],
                count: e.count,
            });
            c.region.sampled_pages += r.sampled_pages;
            c.by_cpu_node.iter_mut().zip(&s.by_cpu_node).for_each(|(a, b)| *a += b);
            c.by_mem_node.iter_mut().zip(&s.by_mem_node).for_each(|(a, b)| *a += b);
        }
        let mut cand: Vec<Seen> = cand.into_values().collect();
        cand.sort_by_key(|s| (std::cmp::Reverse(s.count), std::cmp::Reverse(s.by_cpu_node.iter().sum::<u64>())));
        let once = seen.iter().filter(|s| s.count < self.cfg.min_count).count();
        let mut room: Vec<u64> = (0..nn).map(|i| snap.free_bytes.get(i).copied().unwrap_or(0) / m.page_size).collect();
        let mut budget = self.cfg.max_pages;
        let mut unbalanced = 0u32;
        for s in &cand {
            let acc: u64 = s.by_mem_node.iter().sum();
            // Destinations in order of how much the node's threads access the region.
            let mut dests: Vec<NodeIdx> = mem_nodes.iter().copied().filter(|n| s.by_cpu_node[n.ix()] > 0).collect();
            dests.sort_by_key(|n| (std::cmp::Reverse(s.by_cpu_node[n.ix()]), *n));
            // Already with its main user, and not on a hot spot (or no known user): stay.
            if dests.first().is_none_or(|d| s.by_mem_node[d.ix()] == acc && load[d.ix()] <= share_cap) {
                continue;
            }
            let busiest = load.iter().copied().max().unwrap_or(0);
            // The node holding most of the region now, and how much its threads use it.
            let holder = (0..nn).max_by_key(|&n| (s.by_mem_node[n], std::cmp::Reverse(n))).unwrap_or(0);
            let users: u64 = s.by_cpu_node.iter().sum();
            let pick = dests.into_iter().find(|d| {
                let already = s.by_mem_node[d.ix()];
                let after = load[d.ix()] + acc - already;
                // Worth it: the destination's threads use the region clearly more than the
                // holder's (no ping-pong of evenly shared data) and no new hot spot appears;
                // or the region leaves a node above the cap for one that ends up less loaded
                // than the holder is now (the peak drops; strictly, so it cannot bounce back).
                let gain = s.by_cpu_node[d.ix()] as f64 - s.by_cpu_node[holder] as f64;
                let local = gain >= self.cfg.min_gain * users as f64 && (after <= share_cap || after <= busiest);
                let relieve = load[holder] > share_cap && after < load[holder];
                already < acc && (local || relieve) && room[d.ix()] >= s.region.npages
            });
            let Some(d) = pick else {
                unbalanced += 1;
                continue;
            };
            if s.region.npages > budget {
                continue;
            }
            budget -= s.region.npages;
            room[d.ix()] -= s.region.npages;
            // Shift the region's sampled load to its new node.
            for (n, c) in s.by_mem_node.iter().enumerate() {
                load[n] -= c;
            }
            load[d.ix()] += acc;
            plan.ranges.push(RangeAction {
                app: s.region.app,
                start_vpn: s.region.start_vpn,
                npages: s.region.npages,
                op: RangeOp::MoveTo(d),
            });
        }
        let st = &mut plan.stats;
        st.insert("regions_seen".into(), seen.len() as f64);
        st.insert("regions_not_recurring".into(), once as f64);
        st.insert("regions_moved".into(), plan.ranges.len() as f64);
        st.insert("regions_held_for_balance".into(), unbalanced as f64);
        st.insert("pages_moved".into(), plan.ranges.iter().map(|r| r.npages).sum::<u64>() as f64);
        st.insert("history_entries".into(), self.history.len() as f64);
        plan
    }
}

#[cfg(test)]
mod tests;

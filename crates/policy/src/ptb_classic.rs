//! `ptb-classic`: the published PTB algorithm, faithfully (spec `ptb.md`).
//!
//! Problem: place threads and pages so that threads sharing pages sit together and no memory
//! controller or link is overloaded, exactly as the published PTB did, so that ptb's own policy
//! can be measured against it.
//!
//! Approach, once per cycle (tau, 1 s by default):
//!
//! ```text
//! samples ─▶ histogram (classic table | exact)  ─▶ Profile (pages x threads)
//!   thread phase: cosine similarity (C1) ─▶ recursive Kernighan-Lin into one part per CPU node
//!                 ─▶ greedy cluster -> node (keep threads where most are) ─▶ ThreadMove::Node
//!   page phase:   b_n[p] on the new placement, budgets B = optimistic BG, NodeScore (C2),
//!                 Min_Acc, hottest pages first, interleave when budgets run out ─▶ PageMove
//! ```
//!
//! Submodules: [`profile`] (flattening), [`similarity`], [`kl`], [`threads`], [`pages`]; each
//! documents the choices it makes where the spec is open. Plan stats: `hash_collisions`,
//! `samples`, `pages_seen`, `pages_considered`, `pages_skipped_min_acc`, `interleaved`,
//! `pages_moved`, `threads_moved`, `thread_pins`, `budget_exhausted`, `cut_weight`.

mod kl;
mod pages;
mod profile;
mod similarity;
mod threads;

#[cfg(test)]
mod tests;

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, PageMove, Plan, SamplingMode, SamplingRequest, StartPlan, ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use ptb_profile::histogram::{self, Histogram, HistogramKind};
use ptb_profile::SampledEvent;
use ptb_profile::Tid;
use ptb_topology::NodeIdx;
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { key: "tau", default: "1.0", doc: "cycle length in seconds (profiling period); published 1 s" },
    ParamDoc {
        key: "c1",
        default: "1.0",
        doc: "thread hysteresis: similarity of threads already on one node is multiplied by C1",
    },
    ParamDoc {
        key: "c2",
        default: "1.5",
        doc: "page hysteresis: NodeScore of a page's current node is multiplied by C2",
    },
    ParamDoc {
        key: "min_acc",
        default: "16",
        doc: "pages with fewer sampled accesses in a cycle are left where they are",
    },
    ParamDoc { key: "hash_slots", default: "15000", doc: "slots of the classic profiling table (published 15000)" },
    ParamDoc {
        key: "histogram",
        default: "classic",
        doc: "classic (published fixed table, with collisions) or exact (sparse map)",
    },
    ParamDoc {
        key: "period",
        default: "131072",
        doc: "IBS op sampling period in core cycles: every core tags one op every PERIOD cycles (IBS op's \
              default mode), memory ops of every kind, cache hits included; 131072 gives canneal the \
              thesis' ~30,000 DRAM samples/s on the 4-node Opteron",
    },
    ParamDoc {
        key: "scale_by_period",
        default: "true",
        doc: "page demand b_n[p] = samples * period * ls / tau: a sample stands for PERIOD sampler events, \
              which puts b on the scale of the Bandwidth Graph budgets; false uses the formula as printed \
              (samples * ls / tau), whose budgets are never used up, so C2 keeps every page home",
    },
];

/// The parameters of `ptb-classic`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassicConfig {
    pub tau: Duration,
    pub c1: f64,
    pub c2: f64,
    pub min_acc: u64,
    pub hash_slots: usize,
    pub histogram: HistogramKind,
    pub period: u64,
    pub scale_by_period: bool,
}

impl Default for ClassicConfig {
    /// The published values (spec: tau 1 s, C1 1.0, C2 1.5, Min_Acc 16, 15,000 slots).
    fn default() -> Self {
        ClassicConfig {
            tau: Duration::from_secs(1),
            c1: 1.0,
            c2: 1.5,
            min_acc: 16,
            hash_slots: 15000,
            histogram: HistogramKind::Classic,
            period: 131_072,
            scale_by_period: true,
        }
    }
}

/// The published PTB policy.
pub struct PtbClassic {
    cfg: ClassicConfig,
    hist: Option<Box<dyn Histogram>>,
}

impl std::fmt::Debug for PtbClassic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtbClassic").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl PtbClassic {
    pub fn new(cfg: ClassicConfig) -> Self {
        PtbClassic { cfg, hist: None }
    }

    pub fn config(&self) -> &ClassicConfig {
        &self.cfg
    }

    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let s = p.section("ptb-classic");
        let d = ClassicConfig::default();
        let tau = s.f64_in("tau", 1.0, 0.001, 3600.0)?;
        let hash_slots = s.get::<usize>("hash_slots", d.hash_slots)?;
        let period = s.get::<u64>("period", d.period)?;
        let bad = |key: &str, reason: &str| PolicyError::Param {
            origin: s.origin(key),
            policy: "ptb-classic".into(),
            key: key.into(),
            reason: reason.into(),
        };
        if hash_slots == 0 || hash_slots > 1 << 26 {
            return Err(bad("hash_slots", "must be 1..=67108864"));
        }
        if period == 0 {
            return Err(bad("period", "must be at least 1"));
        }
        let histogram = match s.get::<String>("histogram", "classic".into())?.parse::<HistogramKind>() {
            Ok(h) => h,
            Err(e) => return Err(bad("histogram", &e)),
        };
        let cfg = ClassicConfig {
            tau: Duration::from_secs_f64(tau),
            c1: s.f64_in("c1", d.c1, 0.0, 1000.0)?,
            c2: s.f64_in("c2", d.c2, 0.0, 1000.0)?,
            min_acc: s.get::<u64>("min_acc", d.min_acc)?,
            hash_slots,
            histogram,
            period,
            scale_by_period: s.get::<bool>("scale_by_period", d.scale_by_period)?,
        };
        s.finish()?;
        Ok(PtbClassic::new(cfg))
    }
}

impl Policy for PtbClassic {
    fn name(&self) -> String {
        "ptb-classic".into()
    }

    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        // PTB leaves initial allocation to Linux (first touch) and acts from the first cycle on.
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }

    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(
            SamplingMode::Address { event: SampledEvent::Cycles, period: self.cfg.period },
            self.cfg.tau,
        )
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let m = snap.machine;
        let cpu_slots = m.cpus().last().map_or(1, |c| c.0 as usize + 1);
        let cfg = &self.cfg;
        let hist =
            self.hist.get_or_insert_with(|| histogram::build(cfg.histogram, cfg.hash_slots, cpu_slots, m.page_size));
        hist.clear();
        hist.record_all(snap.samples);
        let hstats = hist.stats();
        let tids: Vec<Tid> = snap.threads.iter().map(|t| t.tid).collect();
        let prof = profile::Profile::build(hist.as_ref(), &tids);
        let mut plan = Plan::default();

        // Thread phase.
        let nodes = snap.cpu_nodes();
        let cur_node: Vec<usize> = snap.threads.iter().map(|t| t.node.ix()).collect();
        let mut new_node = cur_node.clone();
        let mut cut_weight = 0.0;
        if !nodes.is_empty() && !tids.is_empty() {
            let sim = similarity::similarity(tids.len(), &prof, &cur_node, cfg.c1);
            let cpus: Vec<usize> = nodes.iter().map(|n| m.node(*n).cpus.len()).collect();
            let sizes = threads::part_sizes(tids.len(), &cpus);
            // Position of each thread's current node in `nodes` (MAX when outside).
            let pos: Vec<usize> =
                cur_node.iter().map(|&n| nodes.iter().position(|x| x.ix() == n).unwrap_or(usize::MAX)).collect();
            let clusters = kl::recursive(&sim, (0..tids.len()).collect(), &sizes, &|t| pos[t]);
            for (a, ca) in clusters.iter().enumerate() {
                for cb in &clusters[a + 1..] {
                    cut_weight += kl::cut(&sim, ca, cb);
                }
            }
            let home = threads::place(&clusters, &sizes, &pos);
            for (c, members) in clusters.iter().enumerate() {
                for &t in members {
                    new_node[t] = nodes[home[c]].ix();
                }
            }
            for (i, ts) in snap.threads.iter().enumerate() {
                let n = NodeIdx::from_ix(new_node[i]);
                let node_cpus = &m.node(n).cpus;
                let pinned = ts.affinity.as_ref().is_some_and(|a| !a.is_empty() && a.is_subset(node_cpus));
                if new_node[i] != cur_node[i] || !pinned {
                    plan.threads.push(ThreadMove { tid: ts.tid, to: ThreadTarget::Node(n) });
                }
            }
        }
        let threads_moved = (0..tids.len()).filter(|&i| new_node[i] != cur_node[i]).count();

        // Page phase.
        let secs = if snap.cycle.is_zero() { cfg.tau.as_secs_f64() } else { snap.cycle.as_secs_f64() };
        let period = if cfg.scale_by_period { snap.sampling_period.max(1) as f64 } else { 1.0 };
        let mem_nodes = snap.memory_nodes();
        let current = |p| snap.pages.get(p);
        let inp = pages::PageInputs {
            machine: m,
            mem_nodes: &mem_nodes,
            thread_node: &new_node,
            gbps_per_sample: m.line_size as f64 / secs / 1e9 * period,
            c2: cfg.c2,
            min_acc: cfg.min_acc,
            current: &current,
            free_bytes: snap.free_bytes,
        };
        let dec = pages::decide(&prof, &inp);
        for &(page, to) in &dec.homes {
            if snap.pages.get(page) != Some(to) {
                plan.pages.push(PageMove { page, to });
            }
        }

        let st = &mut plan.stats;
        st.insert("hash_collisions".into(), hstats.collisions as f64);
        st.insert("samples".into(), hstats.samples as f64);
        st.insert("pages_seen".into(), prof.pages.len() as f64);
        st.insert("pages_considered".into(), dec.considered as f64);
        st.insert("pages_skipped_min_acc".into(), dec.skipped_min_acc as f64);
        st.insert("interleaved".into(), dec.interleaved as f64);
        st.insert("pages_moved".into(), plan.pages.len() as f64);
        st.insert("threads_moved".into(), threads_moved as f64);
        st.insert("thread_pins".into(), plan.threads.len() as f64);
        st.insert("budget_exhausted".into(), if dec.budget_exhausted { 1.0 } else { 0.0 });
        st.insert("cut_weight".into(), cut_weight);
        plan
    }
}

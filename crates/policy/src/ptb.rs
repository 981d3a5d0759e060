//! `ptb`: ptb's own placement controller.
//!
//! Problem: the published PTB algorithm (`ptb-classic`) moves many pages every cycle, mixes
//! pages up in a colliding hash table, ignores how nodes are connected, has fixed thresholds
//! and never switches itself off. Related work supplies the cures: balance controller load
//! rather than chase locality (Carrefour, Colloid), move only what recurs (selective
//! migration), spread shared data in proportion to bandwidth (weighted interleave), and pay
//! for a migration only when it pays back (AsymSched's budget).
//!
//! Approach, every cycle:
//! 1. **Evidence** ([`chunks`]): samples are aggregated per *chunk* (a run of `chunk_pages`
//!    pages of one application, 2 MiB by default) into per-node access counts (node of the
//!    accessing thread), with exponential decay across cycles. Chunks make a few samples per
//!    region enough (a sampled address stands for its neighbours, as in selective
//!    migration's region inference), and their history filters out one-off accesses.
//! 2. **Gate** ([`model::demand`]): the estimated memory traffic (samples x period x line)
//!    is compared with the machine's memory bandwidth; a program that uses less than
//!    `gate` of it is compute-bound and is left alone (no moves at all).
//! 3. **Targets**: a chunk accessed mostly (`private_share`) from one node is *private* and
//!    belongs on that node; any other chunk is *shared* and is spread over the memory nodes
//!    in proportion to their bandwidth (weighted interleave).
//! 4. **Load check** ([`model`]): a loaded-latency model of each memory controller (idle
//!    latency x queueing factor at the predicted utilisation) decides, per candidate move,
//!    the predicted saving in access time over a horizon; a move happens only when that
//!    saving exceeds its cost (per-page CPU time + copy) by `payback`. Private chunks whose
//!    home would saturate are spread instead (congestion before locality).
//! 5. **Hysteresis**: a chunk's target must be the same for `confirm` cycles before it
//!    moves, and a placed chunk is not moved again unless its target changes.
//! 6. **Quiet mode**: after `quiet_after` cycles without moves the sampling period grows
//!    (4x) to cut overhead; it returns to normal as soon as moves are needed again.
//!
//! Threads are left where the scheduler put them: in the simulated suite they already run
//! one per CPU, and moving pages to threads is cheaper than the reverse for the programs
//! whose data was placed by first touch.

mod chunks;
mod model;

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, Plan, RangeAction, RangeOp, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use chunks::{ChunkKey, ChunkTable, Target};
use ptb_topology::NodeIdx;
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { key: "cycle_ms", default: "1000", doc: "cycle length in milliseconds" },
    ParamDoc { key: "period", default: "8192", doc: "sampling period: one address sample per N accesses" },
    ParamDoc { key: "chunk_pages", default: "512", doc: "pages per chunk (power of two; 512 x 4 KiB = 2 MiB)" },
    ParamDoc { key: "decay", default: "0.5", doc: "weight of the previous cycles' counts (0 = no history)" },
    ParamDoc {
        key: "private_share",
        default: "0.7",
        doc: "share of a chunk's accesses from one node that makes it private",
    },
    ParamDoc { key: "min_samples", default: "3", doc: "decayed samples a chunk needs before it is placed" },
    ParamDoc { key: "confirm", default: "2", doc: "cycles a chunk's target must hold before it moves" },
    ParamDoc {
        key: "gate",
        default: "0.02",
        doc: "minimum memory traffic, as a share of machine bandwidth, to act at all",
    },
    ParamDoc { key: "payback", default: "2.0", doc: "predicted saving must exceed the move's cost by this factor" },
    ParamDoc { key: "horizon_s", default: "5", doc: "seconds over which a move's saving is counted" },
    ParamDoc { key: "quiet_after", default: "3", doc: "cycles without moves before sampling slows down 4x" },
];

/// Tunables of the `ptb` policy (see [`PARAMS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PtbParams {
    pub cycle: Duration,
    pub period: u64,
    pub chunk_pages: u64,
    pub decay: f64,
    pub private_share: f64,
    pub min_samples: f64,
    pub confirm: u32,
    pub gate: f64,
    pub payback: f64,
    pub horizon_s: f64,
    pub quiet_after: u32,
}

impl Default for PtbParams {
    fn default() -> Self {
        PtbParams {
            cycle: Duration::from_secs(1),
            period: 8192,
            chunk_pages: 512,
            decay: 0.5,
            private_share: 0.7,
            min_samples: 3.0,
            confirm: 2,
            gate: 0.02,
            payback: 2.0,
            horizon_s: 5.0,
            quiet_after: 3,
        }
    }
}

/// The `ptb` policy.
#[derive(Debug)]
pub struct Ptb {
    p: PtbParams,
    table: ChunkTable,
    quiet: u32,
    period: u64,
}

impl Ptb {
    pub fn new(p: PtbParams) -> Self {
        let period = p.period;
        Ptb { table: ChunkTable::new(p.chunk_pages), p, quiet: 0, period }
    }

    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let s = params.section("ptb");
        let d = PtbParams::default();
        let chunk_pages: u64 = s.get("chunk_pages", d.chunk_pages)?;
        if !chunk_pages.is_power_of_two() {
            return Err(PolicyError::Param {
                origin: "parameters".into(),
                policy: "ptb".into(),
                key: "chunk_pages".into(),
                reason: format!("{chunk_pages} is not a power of two"),
            });
        }
        let p = PtbParams {
            cycle: Duration::from_millis(s.get("cycle_ms", 1000u64)?.clamp(10, 3_600_000)),
            period: s.get::<u64>("period", d.period)?.max(1),
            chunk_pages,
            decay: s.f64_in("decay", d.decay, 0.0, 0.99)?,
            private_share: s.f64_in("private_share", d.private_share, 0.5, 1.0)?,
            min_samples: s.f64_in("min_samples", d.min_samples, 0.0, 1e9)?,
            confirm: s.get("confirm", d.confirm)?,
            gate: s.f64_in("gate", d.gate, 0.0, 1.0)?,
            payback: s.f64_in("payback", d.payback, 0.0, 1e6)?,
            horizon_s: s.f64_in("horizon_s", d.horizon_s, 0.0, 1e6)?,
            quiet_after: s.get("quiet_after", d.quiet_after)?,
        };
        s.finish()?;
        Ok(Ptb::new(p))
    }

    fn sampling_now(&self) -> SamplingRequest {
        SamplingRequest { mode: SamplingMode::Address { period: self.period }, cycle: self.p.cycle }
    }
}

impl Policy for Ptb {
    fn name(&self) -> String {
        "ptb".into()
    }

    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        // New pages stay where first touched: moving them later costs less than guessing
        // wrong now, and private data initialised in parallel is already local.
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }

    fn sampling(&self) -> SamplingRequest {
        self.sampling_now()
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let mut plan = Plan::default();
        let mem_nodes = snap.memory_nodes();
        if mem_nodes.len() < 2 || snap.threads.is_empty() {
            plan.stats.insert("single_memory_node".into(), 1.0);
            return plan;
        }
        let period = if snap.sampling_period > 0 { snap.sampling_period } else { self.period };
        self.table.ingest(snap, self.p.decay);
        let demand = model::demand(snap, period);
        plan.stats.insert("demand_share".into(), demand.share);
        plan.stats.insert("chunks".into(), self.table.len() as f64);
        if demand.share < self.p.gate {
            plan.stats.insert("gated_compute_bound".into(), 1.0);
            self.after_cycle(&mut plan, 0);
            return plan;
        }
        let moves = self.choose_moves(snap, &demand, period, &mem_nodes);
        let n_moves = moves.len();
        plan.ranges = moves;
        plan.stats.insert("chunk_moves".into(), n_moves as f64);
        self.after_cycle(&mut plan, n_moves);
        plan
    }
}

impl Ptb {
    /// Quiet-mode bookkeeping: slow sampling down after `quiet_after` idle cycles.
    fn after_cycle(&mut self, plan: &mut Plan, moves: usize) {
        let before = self.period;
        if moves == 0 {
            self.quiet = self.quiet.saturating_add(1);
            if self.quiet >= self.p.quiet_after {
                self.period = self.p.period * 4;
            }
        } else {
            self.quiet = 0;
            self.period = self.p.period;
        }
        if self.period != before {
            plan.sampling = Some(self.sampling_now());
        }
        plan.stats.insert("sampling_period".into(), self.period as f64);
    }

    /// Pick the chunk moves of this cycle.
    fn choose_moves(
        &mut self,
        snap: &Snapshot,
        demand: &model::Demand,
        period: u64,
        mem_nodes: &[NodeIdx],
    ) -> Vec<RangeAction> {
        let m = snap.machine;
        let weights = crate::interleave::bandwidth_weights(m, mem_nodes);
        let mut load = model::LoadModel::new(snap, demand);
        let mut out = Vec::new();
        let p = self.p.clone();
        let keys: Vec<ChunkKey> = self.table.keys_by_weight();
        for key in keys {
            let Some(c) = self.table.get_mut(key) else { continue };
            if c.total() < p.min_samples {
                continue;
            }
            let (top, share) = c.top_node();
            let mut want = if share >= p.private_share && mem_nodes.contains(&top) && m.node(top).has_memory() {
                Target::Node(top)
            } else {
                Target::Spread
            };
            // Congestion before locality: a private chunk whose home would saturate is spread.
            if let Target::Node(n) = want {
                if load.would_saturate(n, c.rate(period, snap.cycle, m.line_size)) {
                    want = Target::Spread;
                }
            }
            if c.placed == Some(want) {
                c.pending = None;
                continue;
            }
            let confirmed = match c.pending {
                Some((t, k)) if t == want => k + 1,
                _ => 1,
            };
            c.pending = Some((want, confirmed));
            if confirmed < p.confirm.max(1) {
                continue;
            }
            let Some(range) = self.table.range_of(key, snap.regions) else { continue };
            let c = self.table.get_mut(key).expect("key exists");
            let resident = model::resident_shares(snap, &range, m.n_nodes());
            let current = model::current_shares(c, &resident);
            let cost = model::cost_ns(m, range.npages, &current, want, &weights);
            if cost <= 0.0 {
                // Already where it should be: nothing to move.
                c.placed = Some(want);
                c.pending = None;
                continue;
            }
            let gain = load.gain_ns(c, &resident, want, &weights, period, snap.cycle, p.horizon_s);
            if gain < p.payback * cost {
                continue;
            }
            load.apply(c, &resident, want, &weights, period, snap.cycle);
            c.placed = Some(want);
            c.pending = None;
            let op = match want {
                Target::Node(n) => RangeOp::MoveTo(n),
                Target::Spread => RangeOp::Weighted(weights.clone()),
            };
            out.push(RangeAction { app: key.app, start_vpn: range.start_vpn, npages: range.npages, op });
        }
        out
    }
}

#[cfg(test)]
mod tests;

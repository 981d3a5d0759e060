//! `ptb-v1`: ptb's first placement controller, kept for comparison with `ptb` (v2).
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
//!    belongs on that node; so is a *mixed* chunk whose top node's share is confidently
//!    (Wilson bound) above an even share by `mixed_home` and steady from one cycle to the
//!    next. Any other chunk is *shared* and is spread over the memory nodes
//!    in proportion to their bandwidth (weighted interleave). On a machine whose local
//!    bandwidth is close to remote (`home_moves = auto`), private chunks are spread too: home
//!    buys little latency there, and a node full of private chunks becomes a hot spot.
//! 4. **Home share** ([`home`], [`closed`]): how much of each private chunk goes to its
//!    node (100% down to 40%, the rest spread evenly), from a closed model of the threads
//!    calibrated on the measured access rates and sampled latencies: where a node's local path
//!    saturates, part of its data served from the other nodes adds their bandwidth. The
//!    first move of data off a hot spot, before the model has evidence, hedges
//!    ([`first_home_share`]): midway between 100% and what the local path carries.
//! 5. **Load check** ([`model`]): a loaded-latency model of each memory controller (idle
//!    latency x queueing factor at the predicted utilisation) decides, per candidate move,
//!    the predicted saving in access time over a horizon (`horizon_s`, shortened for a chunk
//!    whose target has alternated before to how long its past periods with a target of this
//!    kind lasted: data whose accessors alternate with the program's phases must pay back
//!    within the phase that wants it there; a one-cycle flicker between a node and spread is
//!    noise, not a phase); a move happens only when that
//!    saving exceeds its cost (per-page CPU time + copy) by `payback`. Private chunks whose
//!    home would saturate are spread instead (congestion before locality).
//! 6. **Hysteresis**: a chunk's target must be the same for `confirm` cycles before it
//!    moves, and a placed chunk is not moved again unless its target changes. The exception
//!    is hot data on a hot spot (a node serving over 1.5x the mean load, as after a master
//!    thread's first touch): it moves on first sight if it pays back within `urgent_s`.
//! 7. **Quick start, quiet mode**: the first `start_cycles` cycles last `start_cycle_ms` and
//!    take one sample every `start_period` accesses, so that data a master thread
//!    first-touched on one node is seen whole and moved after 25 ms rather than 100 ms (not
//!    where ptb spreads new pages itself). Quick cycles come back at a new phase (the
//!    traffic more than doubles, or most evidence loses its dominant user: [`PHASE_SHIFT`]).
//!    After `quiet_after` cycles without moves (and not under the gate) the sampling period
//!    grows (4x) to cut overhead; it returns to normal as soon as moves are needed again.
//! 8. **Link-aware spreading** ([`spread`]): where the machine's links differ in width, the
//!    spread weights come from a small LP that balances controllers and directed links for
//!    where the shared accesses come from, instead of from node bandwidth alone.
//!
//! With only fault samples (the software page-fault source on a machine without a PMU) the
//! access rate is unknown: the gate and the payback test are skipped and placement follows
//! locality and sharing alone, still with evidence thresholds and hysteresis.
//!
//! Threads ([`threads`]): every managed thread is pinned to a node, in contiguous blocks of
//! (program, tid) order sized by each allowed node's CPUs, so that the scheduler cannot carry
//! it away from its data; two threads each of whose data is on the other's node swap. A cycle
//! that moves threads moves no pages: its evidence of who uses what predates the swap.

mod chunks;
mod closed;
mod home;
mod model;
mod params;
// The same as v2's: one module serves both.
use crate::ptb::spread;
// The helpers v2 kept as they were in v1 (same code: one copy).
pub use crate::ptb::local_path_is_narrow;
use crate::ptb::{fault_driven, measured_latency_ns, spread_weights, threads_per_node, wilson_lower};
mod threads;

pub use params::{PtbParams, Switch, PARAMS};

use crate::params::Params;
use crate::plan::{AllocPolicy, Plan, RangeAction, RangeOp, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use chunks::{ChunkKey, ChunkTable, Target};
use ptb_profile::SampledEvent;
use ptb_topology::NodeIdx;
use std::time::Duration;

/// The home share (percent, one of [`home::SHARES`]) of a private chunk's first move off a hot
/// spot, before the home-share model has evidence: midway between 100 and the share of a
/// node's traffic its local path carries when the controller runs at full bandwidth (local
/// path / controller, mean over CPU groups). On the 8-node Opteron the local path is half the
/// controller (75 -> 70); where it is as wide as the controller (Broadwell), 100. A hedge:
/// whichever share the model later picks, each chunk re-moves only part of its pages.
pub fn first_home_share(m: &ptb_topology::Machine) -> u8 {
    let (Some(b), Some(ctrl)) = (&m.bandwidth, &m.controller_gbps) else { return 100 };
    let ratios: Vec<f64> = m
        .groups
        .iter()
        .filter_map(|g| {
            let c = *ctrl.get(g.node.ix())?;
            let local = b.uncontended.get(g.idx.ix(), g.node.ix());
            (c > 0.0 && local > 0.0).then(|| (local / c).min(1.0))
        })
        .collect();
    if ratios.is_empty() {
        return 100;
    }
    let mid = 50.0 * (1.0 + ratios.iter().sum::<f64>() / ratios.len() as f64);
    home::SHARES
        .iter()
        .copied()
        .min_by(|a, b| (f64::from(*a) - mid).abs().total_cmp(&(f64::from(*b) - mid).abs()))
        .unwrap_or(100)
}

/// Share of the evidence on chunks that lost their dominant user in one cycle (another top
/// node, or a top share fallen by a quarter: [`chunks::ChunkTable::shifted_share`]) above
/// which the program is in a new phase (Metis pca: private means, then a covariance reading
/// every block).
pub const PHASE_SHIFT: f64 = 0.5;

/// The `ptb-v1` policy.
#[derive(Debug)]
pub struct PtbV1 {
    p: PtbParams,
    table: ChunkTable,
    quiet: u32,
    period: u64,
    /// Cycles decided so far.
    cycles: u32,
    /// Whether the first cycles are short: not where ptb spreads new pages itself (nothing
    /// then piles up on one node).
    quick_start: bool,
    /// Cycles before this index are quick (`start_cycle_ms`, `start_period`): the first
    /// `start_cycles`, and as many again at a new phase ([`PtbV1::after_cycle`]).
    quick_until: u32,
    /// The previous cycle's memory traffic, as a share of machine bandwidth.
    last_demand: f64,
    /// Percent of a private chunk's pages placed on its home node ([`home`]).
    home: home::HomeShare,
    /// The node of each managed thread, and where its data lives ([`threads`]).
    pins: threads::ThreadPins,
}

impl PtbV1 {
    pub fn new(p: PtbParams) -> Self {
        let period = p.period;
        PtbV1 {
            table: ChunkTable::new(p.chunk_pages),
            quick_until: p.start_cycles,
            last_demand: 0.0,
            p,
            quiet: 0,
            period,
            cycles: 0,
            quick_start: true,
            home: Default::default(),
            pins: Default::default(),
        }
    }

    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        Ok(PtbV1::new(PtbParams::from_params(params)?))
    }

    fn sampling_now(&self) -> SamplingRequest {
        let quick = self.quick_start && self.cycles < self.quick_until;
        let (cycle, period) = if quick {
            (self.p.start_cycle, self.p.start_period.min(self.period))
        } else {
            (self.p.cycle, self.period)
        };
        SamplingRequest::new(SamplingMode::Address { event: SampledEvent::Misses, period }, cycle)
    }
}

impl Policy for PtbV1 {
    fn name(&self) -> String {
        "ptb-v1".into()
    }

    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        // New pages are spread over the memory nodes (in proportion to bandwidth where the
        // nodes differ): before anything is known, spreading is the placement that is best
        // on average (ptb.md) and it never concentrates a program on one controller; the
        // cycles then bring private chunks home where that pays.
        let nodes: Vec<NodeIdx> =
            ctx.machine.memory_nodes().into_iter().filter(|n| ctx.allowed.contains_idx(*n)).collect();
        let spread = self.p.spread_at_start.on(|| local_path_is_narrow(ctx.machine));
        self.quick_start = !spread;
        let alloc = match spread_weights(ctx.machine, &nodes) {
            _ if nodes.len() < 2 || !spread => AllocPolicy::FirstTouch,
            None => AllocPolicy::Interleave(nodes),
            Some(w) => AllocPolicy::Weighted(w),
        };
        let threads = if self.p.pin_threads { self.pins.start(ctx.machine, ctx.allowed, ctx.threads) } else { vec![] };
        StartPlan { alloc, threads }
    }

    fn sampling(&self) -> SamplingRequest {
        self.sampling_now()
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        // Samples a source marks as cache hits load no memory (as in `ptb`).
        let memory = snap.cache_hits_dropped();
        let snap = if let Some(m) = &memory { &Snapshot { samples: m, ..*snap } } else { snap };
        let mut plan = Plan::default();
        if self.p.pin_threads {
            plan.threads = self.pins.observe(snap, self.p.decay);
        }
        let mem_nodes = snap.memory_nodes();
        if mem_nodes.len() < 2 || snap.threads.is_empty() {
            plan.stats.insert("single_memory_node".into(), 1.0);
            return plan;
        }
        let period = if snap.sampling_period > 0 { snap.sampling_period } else { self.period };
        let traffic = self.table.ingest(snap, self.p.decay);
        let demand = model::demand(snap, &traffic, period);
        plan.stats.insert("demand_share".into(), demand.share);
        plan.stats.insert("chunks".into(), self.table.len() as f64);
        // Page-fault and hinting-fault samples say who touched a page, not how often: the
        // memory intensity is unknown, so neither the gate nor the payback test can be priced.
        let unpriced = fault_driven(snap);
        if unpriced {
            plan.stats.insert("fault_samples_unpriced".into(), 1.0);
        } else if demand.share < self.p.gate {
            plan.stats.insert("gated_compute_bound".into(), 1.0);
            self.after_cycle(&mut plan, 0, demand.share);
            return plan;
        }
        if self.p.pin_threads {
            let swaps = self.pins.swaps(snap.allowed, self.p.private_share);
            if !swaps.is_empty() {
                plan.stats.insert("thread_swaps".into(), (swaps.len() / 2) as f64);
                plan.threads.extend(swaps);
                self.after_cycle(&mut plan, 1, demand.share);
                return plan;
            }
        }
        let moves = self.choose_moves(snap, &demand, period, &mem_nodes, unpriced, &mut plan.stats);
        let n_moves = moves.len();
        plan.ranges = moves;
        plan.stats.insert("chunk_moves".into(), n_moves as f64);
        self.after_cycle(&mut plan, n_moves, demand.share);
        plan
    }
}

impl PtbV1 {
    /// Sampling for the next cycle. Quiet mode: slow sampling down after `quiet_after` cycles
    /// without moves, but not while the program is under the gate (a compute-bound phase
    /// issues few samples anyway, and the phase after it must be seen whole). Quick cycles
    /// again at a new phase, whose data is then found sooner: the traffic more than doubled,
    /// or more than [`PHASE_SHIFT`] of the evidence sits on chunks whose users changed.
    fn after_cycle(&mut self, plan: &mut Plan, moves: usize, demand: f64) {
        let before = self.sampling_now();
        self.cycles = self.cycles.saturating_add(1);
        let shifted = self.table.shifted_share() > PHASE_SHIFT;
        if self.cycles > 1 && demand >= self.p.gate && (demand > 2.0 * self.last_demand || shifted) {
            self.quick_until = self.quick_until.max(self.cycles.saturating_add(self.p.start_cycles));
        }
        self.last_demand = demand;
        if moves == 0 && demand < self.p.gate {
            self.quiet = 0;
            self.period = self.p.period;
        } else if moves == 0 {
            self.quiet = self.quiet.saturating_add(1);
            if self.quiet >= self.p.quiet_after {
                self.period = self.p.period * 4;
            }
        } else {
            self.quiet = 0;
            self.period = self.p.period;
        }
        if self.sampling_now() != before {
            plan.sampling = Some(self.sampling_now());
        }
        plan.stats.insert("sampling_period".into(), self.period as f64);
    }

    /// The weights shared chunks are spread with this cycle: link-aware (the interconnect's
    /// utilisation balanced for where the shared accesses come from) where the machine's
    /// links are known, else in proportion to node bandwidth, else even.
    fn spread_weights_now(
        &self,
        m: &ptb_topology::Machine,
        mem_nodes: &[NodeIdx],
        homes: bool,
        period: u64,
        cycle: Duration,
        stats: &mut std::collections::BTreeMap<String, f64>,
    ) -> Vec<(NodeIdx, u32)> {
        let mut src = vec![0.0; m.n_nodes()];
        if self.p.link_aware.on(|| spread::links_differ(m)) {
            for c in self.table.states().filter(|c| c.total() >= self.p.min_samples) {
                if homes && private_home(c, &self.p, mem_nodes).is_some() {
                    continue;
                }
                let a = c.accesses_per_s(period, cycle);
                for (s, x) in src.iter_mut().zip(c.src_shares()) {
                    *s += a * x;
                }
            }
        }
        if let Some(w) = spread::link_aware_weights(m, mem_nodes, &src) {
            stats.insert("link_aware_spread".into(), 1.0);
            return w;
        }
        spread_weights(m, mem_nodes).unwrap_or_else(|| mem_nodes.iter().map(|&n| (n, 1)).collect())
    }

    /// Whether private chunks go to their accessors' node on this machine.
    fn home_moves_on(&self, m: &ptb_topology::Machine) -> bool {
        self.p.home_moves.on(|| !local_path_is_narrow(m))
    }

    /// Pick the chunk moves of this cycle.
    ///
    /// 1. every chunk with enough evidence gets a target (private -> its node, else spread),
    ///    which must hold for `confirm` cycles;
    /// 2. the loads after all candidate moves are predicted together (moving every private
    ///    chunk home is load-neutral even though one move alone is not); where a node would
    ///    exceed 90% of its capacity, its lightest private candidates are spread instead;
    /// 3. each remaining move is kept only if its access-time saving at the predicted loaded
    ///    latencies, over the horizon, pays back its cost `payback` times.
    fn choose_moves(
        &mut self,
        snap: &Snapshot,
        demand: &model::Demand,
        period: u64,
        mem_nodes: &[NodeIdx],
        unpriced: bool,
        stats: &mut std::collections::BTreeMap<String, f64>,
    ) -> Vec<RangeAction> {
        let m = snap.machine;
        let nn = m.n_nodes();
        let load = model::LoadModel::new(snap, demand);
        let p = self.p.clone();
        // Where local bandwidth is close to remote, a private chunk gains little at home and a
        // node full of them becomes a hot spot: every chunk is spread instead.
        let homes = self.home_moves_on(m);
        let weights = self.spread_weights_now(m, mem_nodes, homes, period, snap.cycle, stats);
        struct Cand {
            key: ChunkKey,
            range: chunks::Range,
            want: Target,
            a: f64,
            src: Vec<f64>,
            from: Vec<f64>,
            /// Seconds the move has to pay back in.
            horizon_s: f64,
        }
        let mean_load = mem_nodes.iter().map(|n| load.acc[n.ix()]).sum::<f64>() / mem_nodes.len().max(1) as f64;
        let hot_spot = |from: &[f64]| {
            let (i, _) = from.iter().enumerate().fold((0, 0.0), |b, (i, &x)| if x > b.1 { (i, x) } else { b });
            load.acc[i] > 1.5 * mean_load
        };
        let keys = self.table.keys_by_weight(p.min_samples);
        let first_home = p.first_home.unwrap_or_else(|| first_home_share(m));
        if homes {
            let predicted = self.predict_home_shares(snap, &keys, &load, &weights, mem_nodes, period);
            if let Some(pred) = &predicted {
                for (p, r) in pred {
                    stats.insert(format!("home_{p}_gain"), r - 1.0);
                }
            }
            let pct = self.home.update(predicted.as_deref(), self.p.decay, self.p.home_confirm);
            stats.insert("home_pct".into(), f64::from(pct));
        }
        // Where a chunk's pages are now (sampled homes, else the region's residency).
        let shares_now = |c: &chunks::ChunkState, app: ptb_profile::AppId, r: &chunks::Range| {
            model::current_shares(c, &model::resident_shares(snap, app, r, nn))
        };
        let mut cands: Vec<Cand> = Vec::new();
        for key in keys {
            let range = self.table.range_of(key, snap.regions);
            // Computed by the hedge's check, then reused by the candidate below.
            let mut from_now: Option<Vec<f64>> = None;
            let Some(c) = self.table.get_mut(key) else { continue };
            if c.total() < p.min_samples {
                continue;
            }
            let want = match private_home(c, &p, mem_nodes) {
                // The first move off a hot spot (a master thread's first touch) happens before
                // the home-share model has seen the program anywhere but there: hedge. Not for
                // data already at home (threads that first-touched their own slices).
                Some(top) if homes && self.home.updates <= 1 && c.placed.is_none() => {
                    from_now = range.as_ref().map(|r| shares_now(c, key.app, r));
                    let off_hot_spot = from_now.as_ref().is_some_and(|from| from[top.ix()] < 0.5 && hot_spot(from));
                    Target::Node(top, if off_hot_spot { self.home.pct.min(first_home) } else { self.home.pct })
                }
                Some(top) if homes => Target::Node(top, self.home.pct),
                _ => Target::Spread,
            };
            let lasts_s = c.observe_target(want, snap.now.as_secs_f64(), p.confirm);
            if c.placed == Some(want) {
                c.pending = None;
                continue;
            }
            let confirmed = match c.pending {
                Some((t, k)) if t == want => k + 1,
                _ => 1,
            };
            c.pending = Some((want, confirmed));
            let Some(range) = range else { continue };
            // Before confirmation a move must pay back within `urgent_s` instead of the whole
            // horizon: only hot data far from where it belongs (a master thread's first touch
            // of shared data) moves on first sight.
            let unconfirmed = confirmed < p.confirm.max(1);
            if unconfirmed && p.urgent_s <= 0.0 {
                continue;
            }
            let from = from_now.unwrap_or_else(|| shares_now(c, key.app, &range));
            let to = model::target_shares(want, &weights, nn);
            let off: f64 = from.iter().zip(&to).map(|(a, b)| (a - b).abs()).sum::<f64>() / 2.0;
            if off <= p.tolerance {
                c.placed = Some(want); // already there
                c.pending = None;
                continue;
            }
            // ... and only off a hot spot: a node serving over 1.5x the mean load of the
            // memory nodes (data a program spread itself, then shares, is not urgent).
            if unconfirmed && !hot_spot(&from) {
                continue;
            }
            let horizon_s = p.horizon_s.min(lasts_s).min(if unconfirmed { p.urgent_s } else { f64::INFINITY });
            cands.push(Cand {
                key,
                range,
                want,
                a: c.accesses_per_s(period, snap.cycle),
                src: c.src_shares(),
                from,
                horizon_s,
            });
        }
        // Predicted loads with every candidate applied; spread private chunks off overloaded nodes.
        let mut after = load.acc.clone();
        let mut after_path = load.path.clone();
        for c in &cands {
            let to = model::target_shares(c.want, &weights, nn);
            model::LoadModel::shift(&mut after, &mut after_path, c.a, &c.src, &c.from, &to);
        }
        for n in 0..nn {
            let mut onto: Vec<usize> =
                (0..cands.len()).filter(|&i| cands[i].want.node() == Some(NodeIdx::from_ix(n))).collect();
            onto.sort_by(|&x, &y| cands[x].a.total_cmp(&cands[y].a).then(cands[x].key.cmp(&cands[y].key)));
            for i in onto {
                if !load.over(&after, &after_path, n, 0.9) {
                    break;
                }
                let c = &mut cands[i];
                let spread = model::target_shares(Target::Spread, &weights, nn);
                let was = model::target_shares(c.want, &weights, nn);
                model::LoadModel::shift(&mut after, &mut after_path, c.a, &c.src, &was, &spread);
                c.want = Target::Spread;
            }
        }
        let lat_now = load.loaded(&load.acc, &load.path);
        let lat_after = load.loaded(&after, &after_path);
        let (q_now, q_after) = (load.queueing(&lat_now), load.queueing(&lat_after));
        let after_links = load.link_loads(&after_path);
        let mut out = Vec::new();
        for c in cands {
            let to = model::target_shares(c.want, &weights, nn);
            // Where the chunk's accesses would still cross a resource near saturation, they are
            // bandwidth-bound: a shorter distance does not make them faster, only less queueing
            // does. Elsewhere they are latency-bound and the whole loaded latency counts.
            let bound = load.max_util(&after, &after_path, &after_links, &c.src, &to) >= 0.75;
            let (now, later) = if bound { (&q_now, &q_after) } else { (&lat_now, &lat_after) };
            let saving_ns_per_s = c.a
                * (model::LoadModel::mean_latency(now, &c.src, &c.from)
                    - model::LoadModel::mean_latency(later, &c.src, &to))
                / p.mlp;
            let cost = model::cost_ns(m, c.range.npages, &c.from, c.want, &weights);
            if !unpriced && cost > 0.0 && saving_ns_per_s * c.horizon_s < p.payback * cost {
                continue;
            }
            *stats.entry(if bound { "moves_bandwidth_bound" } else { "moves_latency_bound" }.into()).or_default() +=
                1.0;
            *stats
                .entry(if matches!(c.want, Target::Spread) { "moves_spread" } else { "moves_home" }.into())
                .or_default() += 1.0;
            if let Some(st) = self.table.get_mut(c.key) {
                st.placed = Some(c.want);
                st.pending = None;
            }
            let op = match c.want {
                Target::Node(n, pct) if pct >= 100 => RangeOp::MoveTo(n),
                Target::Node(..) => RangeOp::Weighted(home::weights_of(&to)),
                Target::Spread => RangeOp::Weighted(weights.clone()),
            };
            out.push(RangeAction { app: c.key.app, start_vpn: c.range.start_vpn, npages: c.range.npages, op });
        }
        out
    }
}

impl PtbV1 {
    /// This cycle's predicted throughput of each home share ([`home::predict`]), from the
    /// private chunks' traffic and where their pages are now.
    #[allow(clippy::too_many_arguments)]
    fn predict_home_shares(
        &self,
        snap: &Snapshot,
        keys: &[ChunkKey],
        load: &model::LoadModel,
        weights: &[(NodeIdx, u32)],
        mem_nodes: &[NodeIdx],
        period: u64,
    ) -> Option<Vec<(u8, f64)>> {
        let nn = snap.machine.n_nodes();
        let private: Vec<home::Private> = keys
            .iter()
            .filter_map(|&key| {
                let c = self.table.get(key)?;
                let top = private_home(c, &self.p, mem_nodes)?;
                let resident =
                    || self.table.range_of(key, snap.regions).map(|r| model::resident_shares(snap, key.app, &r, nn));
                let from = if c.by_home.iter().any(|&x| x > 0.0) { model::current_shares(c, &[]) } else { resident()? };
                Some(home::Private { node: top, a: c.accesses_per_s(period, snap.cycle), src: c.src_shares(), from })
            })
            .collect();
        let closed = closed::Closed::new(load, threads_per_node(snap), &measured_latency_ns(snap), self.p.mlp);
        home::predict(&closed, load, &private, weights, self.home.pct)
    }
}

/// The node a chunk belongs on when it is private: at least `private_share` of its accesses
/// come from one node, which has memory, or (a mixed chunk) that node's share is confidently
/// at least `mixed_home` times an even share and steady.
fn private_home(c: &chunks::ChunkState, p: &PtbParams, mem_nodes: &[NodeIdx]) -> Option<NodeIdx> {
    let (top, share) = c.top_node();
    let even = 1.0 / mem_nodes.len().max(1) as f64;
    // A share that fell by more than a quarter since the last cycle is a private phase ending
    // (its evidence decays through the mixed band), not a chunk that is mixed for good.
    let steady = !c.lost_top();
    let mixed = p.mixed_home > 0.0 && steady && wilson_lower(share, c.total(), 2.0) >= p.mixed_home * even;
    ((share >= p.private_share || mixed) && mem_nodes.contains(&top)).then_some(top)
}

#[cfg(test)]
mod tests;

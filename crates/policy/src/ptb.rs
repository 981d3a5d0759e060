//! `ptb`: ptb's own placement controller (v2; its first version is kept as `ptb-v1`).
//!
//! Problem: placing threads and pages on a NUMA machine trades locality against bandwidth, in
//! a way that depends on the machine (controllers, paths, links, latencies) and on the program
//! (how much it accesses, from where, how much it computes). The first controller grew 24
//! parameters and rules (horizons, flicker rules, confirm counts, urgent moves, a hedge) that
//! no user could predict on a program it had never seen.
//!
//! Approach: eight parameters ([`PARAMS`]), one evidence rule, one model, one move rule.
//! Every cycle:
//! 1. **Evidence** ([`chunks`]): samples are aggregated per *chunk* (`chunk_pages` pages of one
//!    program, 2 MiB by default): decayed counts of the nodes whose threads access it and of
//!    the nodes its sampled pages live on, and a decayed access rate. Evidence ages with
//!    observation: a node whose threads were stalled for a cycle keeps what was seen of it.
//! 2. **Gate** ([`model::demand`]): a program whose memory traffic (samples x period x line) is
//!    below `gate` of the machine's memory bandwidth is compute-bound and left alone.
//! 3. **Who uses a chunk** ([`dominant`]): one statistical rule. A chunk is private to a node
//!    when that node confidently (Wilson bound) issues at least twice the accesses of any
//!    other node; else it is shared and spread. Only sure verdicts change its users in the
//!    residency rule (step 5): private, shared where the samples rule a private user out
//!    ([`surely_shared`]) or the private node lost its hold; not an open first verdict.
//! 4. **Layout** ([`layout`], [`closed`], [`nodesets`], [`threads`]): threads are pinned to
//!    nodes in blocks; a program with fewer threads than CPUs starts on the best-connected
//!    nodes that hold it. One objective, the throughput of all threads predicted by a closed
//!    model calibrated on the measured access rates and sampled latencies (with the accesses
//!    each program's threads overlap estimated from the same samples: [`mlp`]), chooses together
//!    how many nodes each program runs on, whether its shared data is spread over its own
//!    nodes or (where links differ in width) over all with link-aware weights ([`spread`]), and
//!    how much of each private chunk stays home (100% down to 40%, the rest where the home
//!    node's threads reach the most bandwidth: [`spill`]).
//! 5. **Moves that pay** ([`model`]): a load model of controllers, paths and links predicts
//!    every candidate move's saving in access time; private chunks whose home would saturate
//!    are spread instead; a move happens when its saving over the chunk's expected residency
//!    pays back `payback` times its migration cost, at the loads that the moves which pay make
//!    ([`settle`]). The saving is priced at the loads of the
//!    moments the chunk is used ([`bins`]: the cycle's samples in time bins, a bin's loads kept
//!    where they vary more than sampling noise): a node busy half the time queues more than its
//!    mean load says. A saving counts where it shortens the
//!    program's run ([`pace`]): its threads meet at barriers, so a saving on the node whose
//!    threads the sampled latencies show to be the slowest counts for all of them. The
//!    residency is one change-point rule ([`chunks::ChunkState::observe_target`]): the mean
//!    length of the periods between sure changes of the chunk's users, after a prior of
//!    `horizon_s`.
//!    Chunks never sampled ahead of a sweep ([`sweep`]: one thread's consecutive chunks) are
//!    judged like the chunks it just swept and move with them.
//! 6. **Sampling**: the first cycles, and those after a phase change (the traffic more than
//!    doubles, or most evidence loses its dominant user: [`PHASE_SHIFT`]), last a quarter of
//!    `cycle_ms` and sample twice as often; after 3 cycles without moves the period grows 4x.
//!    A source that keeps fewer samples than asked (IBS op without a miss filter, thinned to a
//!    miss sampler's interrupts) is asked for as many more as it thins, except for a program
//!    under the gate ([`density`]); samples the source marks as cache hits are set aside.
//!
//! One rule keyed to the machine file remains: where a CPU group's local bandwidth is under
//! 1.5x its mean bandwidth to the other nodes ([`local_path_is_narrow`], the 4-node Opteron),
//! pages are spread from the start and private data is not brought home. Programs ptb does not
//! pin (more threads than CPUs, `pin_threads = false`) share one home share ([`home`]).
//!
//! With only fault samples (the software page-fault source on a machine without a PMU) the
//! access rate is unknown: the gate and the payback test are skipped and placement follows
//! locality and sharing alone.

mod bins;
mod busy;
mod chunks;
mod closed;
mod density;
mod externality;
mod groups;
mod home;
mod layout;
mod mlp;
mod model;
mod neighbours;
mod nodesets;
mod pace;
mod params;
mod settle;
mod spill;
pub(crate) mod spread;
mod sweep;
mod threads;

pub(crate) use chunks::chunk_range;
pub(crate) use model::resident_shares_over;
pub use params::{PtbParams, PARAMS};
use params::{DECAY, HOME_CONFIRM, MIN_SAMPLES, QUICK_CYCLES, QUIET_AFTER, TOLERANCE};

use crate::params::Params;
use crate::plan::{AllocPolicy, Plan, RangeAction, RangeOp, SamplingMode, SamplingRequest, StartPlan};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use chunks::{ChunkKey, ChunkTable, Target};
use ptb_profile::{AppId, SampledEvent};
use ptb_topology::NodeIdx;

/// How far apart two placements of a chunk are: the share of its pages that would have to move
/// to turn one into the other (half the L1 distance of the node shares).
fn share_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / 2.0
}

/// True when the CPU groups' local bandwidth is less than 1.5x the mean of what they reach
/// on each other memory node (mean over groups): remote memory is then nearly as good as
/// local, and spreading multiplies the bandwidth a group can use at little cost in locality
/// (the 4-node Opteron). With a clear local advantage (2-socket Intel, the 8-node Opteron)
/// first touch loses less than spreading private data would.
pub fn local_path_is_narrow(m: &ptb_topology::Machine) -> bool {
    let Some(b) = &m.bandwidth else { return false };
    let mut ratios = Vec::new();
    for g in &m.groups {
        let local = b.uncontended.get(g.idx.ix(), g.node.ix());
        let others: Vec<f64> = (0..m.n_nodes())
            .filter(|&n| n != g.node.ix() && m.nodes[n].has_memory())
            .map(|n| b.uncontended.get(g.idx.ix(), n))
            .collect();
        let mean = others.iter().sum::<f64>() / others.len().max(1) as f64;
        if local > 0.0 && mean > 0.0 {
            ratios.push(local / mean);
        }
    }
    !ratios.is_empty() && ratios.iter().sum::<f64>() / (ratios.len() as f64) < 1.5
}

/// Share of the evidence on chunks that lost their dominant user in one cycle (another top
/// node, or a top share fallen by a quarter: [`chunks::ChunkTable::shifted_share`]) above
/// which the program is in a new phase (Metis pca: private means, then a covariance reading
/// every block).
pub const PHASE_SHIFT: f64 = 0.5;

/// A program's nodes, the percent of its shared data spread wide, and the memory nodes.
type WeightKey = (Vec<NodeIdx>, u8, Vec<NodeIdx>);

/// The `ptb` policy.
#[derive(Debug)]
pub struct Ptb {
    p: PtbParams,
    table: ChunkTable,
    quiet: u32,
    period: u64,
    /// Cycles decided so far.
    cycles: u32,
    /// Whether the first cycles are short: not where ptb spreads new pages itself (nothing
    /// then piles up on one node).
    quick_start: bool,
    /// Cycles before this index are quick (a quarter of the cycle, half the period): the
    /// first [`QUICK_CYCLES`], and as many again at a new phase ([`Ptb::after_cycle`]).
    quick_until: u32,
    /// The previous cycle's memory traffic, as a share of machine bandwidth.
    last_demand: f64,
    /// Percent of a private chunk's pages placed on its home node ([`home`]).
    home: home::HomeShare,
    /// The node of each managed thread, and where its data lives ([`threads`]).
    pins: threads::ThreadPins,
    /// Each program's layout ([`layout`]).
    layout: std::collections::BTreeMap<ptb_profile::AppId, layout::AppLayout>,
    /// Spread weights of the layouts seen (node set, wide, memory nodes).
    weight_cache: std::collections::BTreeMap<WeightKey, Vec<(NodeIdx, u32)>>,
    /// Where private chunks spill from each home node, for the memory nodes they were
    /// computed for ([`spill::spill_rows`]).
    spill_cache: Option<(Vec<NodeIdx>, Vec<Vec<f64>>)>,
    /// The owner threads' loss weights ([`pace::LossWeights`]), one table per thread count
    /// (built when first needed; a program's thread count rarely changes).
    loss_cache: Option<(f64, pace::LossWeights)>,
    /// Per program and node, the history of sampled latencies behind the pace weights.
    pace: pace::PaceTracker,
    /// Per program, the accesses its threads overlap ([`mlp`]).
    mlp: mlp::MlpTracker,
    /// What the source's samples stood for, for the period to ask ([`density`]).
    density: density::Density,
    /// The sampling the driver runs now (the last one asked).
    sent: SamplingRequest,
    /// The last cycle's traffic was under the gate (compute-bound).
    gated: bool,
    /// The last cycle's accesses per second from each node's threads to each memory node
    /// (where [`groups`] weighs a node's CPU groups).
    node_rows: Vec<Vec<f64>>,
    /// Per source node, how far its CPUs' paths queue as the samples' latency shows it
    /// ([`model::LoadModel::calibrate_paths`]; 1: the nominal queue), for [`groups`].
    path_scale: Vec<f64>,
}

impl Ptb {
    pub fn new(p: PtbParams) -> Self {
        let period = p.period;
        let prior_mlp = p.mlp;
        let mut ptb = Ptb {
            table: ChunkTable::new(p.chunk_pages),
            quick_until: QUICK_CYCLES,
            last_demand: 0.0,
            p,
            quiet: 0,
            period,
            cycles: 0,
            quick_start: true,
            home: Default::default(),
            pins: Default::default(),
            layout: Default::default(),
            weight_cache: Default::default(),
            spill_cache: None,
            loss_cache: None,
            pace: Default::default(),
            mlp: mlp::MlpTracker::new(prior_mlp),
            density: Default::default(),
            sent: SamplingRequest::new(SamplingMode::None, std::time::Duration::ZERO),
            gated: false,
            node_rows: vec![],
            path_scale: vec![],
        };
        ptb.sent = ptb.sampling_now();
        ptb
    }

    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        Ok(Ptb::new(PtbParams::from_params(params)?))
    }

    fn sampling_now(&self) -> SamplingRequest {
        let quick = self.quick_start && self.cycles < self.quick_until;
        let (cycle, period) = if quick {
            (self.p.quick_cycle(), self.p.quick_period().min(self.period))
        } else {
            (self.p.cycle, self.period)
        };
        // A compute-bound program is sampled at the period as the source thins it: ptb only
        // watches its traffic for the next phase, and a thinned source keeps more samples of
        // itself as the share of ops that are memory accesses rises.
        let base = period;
        let period = if self.gated { period } else { self.density.period_for(period) };
        // What the samples may cost follows their density, as a miss sampler's would: a source
        // that thins (and so meets the driver's interrupt cap sooner) is held to the same
        // share of the cap as the density asked is of the usual one (a quarter in quiet cycles).
        let cap = ptb_profile::thinning::MAX_INTERRUPTS_PER_S;
        let budget = cap * self.p.period as f64 / base.max(1) as f64;
        let max_interrupts_per_s = (budget < cap).then_some(budget);
        SamplingRequest {
            mode: SamplingMode::Address { event: SampledEvent::Misses, period },
            cycle,
            max_interrupts_per_s,
        }
    }
}

impl Policy for Ptb {
    fn name(&self) -> String {
        "ptb".into()
    }

    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        // New pages are spread over the memory nodes (in proportion to bandwidth where the
        // nodes differ): before anything is known, spreading is the placement that is best
        // on average (ptb.md) and it never concentrates a program on one controller; the
        // cycles then bring private chunks home where that pays.
        let nodes: Vec<NodeIdx> =
            ctx.machine.memory_nodes().into_iter().filter(|n| ctx.allowed.contains_idx(*n)).collect();
        let spread = local_path_is_narrow(ctx.machine);
        self.quick_start = !spread;
        let alloc = match spread_weights(ctx.machine, &nodes) {
            _ if nodes.len() < 2 || !spread => AllocPolicy::FirstTouch,
            None => AllocPolicy::Interleave(nodes.clone()),
            Some(w) => AllocPolicy::Weighted(w),
        };
        let threads = if self.p.pin_threads {
            let moves = self.pins.start(ctx.machine, ctx.allowed, ctx.threads);
            self.pins.place_in_groups(ctx.machine, &[], &[], &nodes, moves)
        } else {
            vec![]
        };
        StartPlan { alloc, threads }
    }

    fn sampling(&self) -> SamplingRequest {
        self.sampling_now()
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let mut plan = self.decide_nodes(snap);
        if self.p.pin_threads {
            let moves = std::mem::take(&mut plan.threads);
            let mem = snap.memory_nodes();
            plan.threads = self.pins.place_in_groups(snap.machine, &self.node_rows, &self.path_scale, &mem, moves);
        }
        plan
    }
}

impl Ptb {
    /// The cycle's plan with every thread's move to a node ([`Policy::decide`] then places
    /// each node's threads on its CPU groups).
    fn decide_nodes(&mut self, snap: &Snapshot) -> Plan {
        // A source that samples every memory op (IBS op, SPE) tags cache hits as such; they load
        // no memory, so ptb's traffic, its evidence of who uses a page and its overlap estimate
        // are the other samples' (each still stands for `period` ops: their count times the
        // period estimates the memory accesses).
        let memory = snap.cache_hits_dropped();
        let snap = if let Some(m) = &memory { &Snapshot { samples: m, ..*snap } } else { snap };
        if let SamplingMode::Address { period: asked, .. } = self.sent.mode {
            self.density.observe(snap, asked);
        }
        let mut plan = Plan::default();
        let homes = chunks::homes_of(snap);
        if self.p.pin_threads {
            plan.threads = self.pins.observe_with(snap, &homes, DECAY);
        }
        let mem_nodes = snap.memory_nodes();
        if mem_nodes.len() < 2 || snap.threads.is_empty() {
            plan.stats.insert("single_memory_node".into(), 1.0);
            return plan;
        }
        let period = if snap.sampling_period > 0 { snap.sampling_period } else { self.period };
        let traffic = self.table.ingest_with(snap, &homes, DECAY, period);
        let demand = model::demand(snap, &traffic, period);
        self.node_rows.clone_from(&demand.per_path);
        // The cycle's load model, its paths' queue as far as the samples' latency shows it
        // ([`model`]): one for the layouts, the moves and (its path scales) the CPU groups.
        let load = {
            let mut load = model::LoadModel::new(snap, &demand);
            load.calibrate_paths(&measured_latency_ns(snap));
            load
        };
        self.path_scale.clone_from(&load.path_scale);
        plan.stats.insert("demand_share".into(), demand.share);
        plan.stats.insert("chunks".into(), self.table.len() as f64);
        // Page-fault and hinting-fault samples say who touched a page, not how often: the
        // memory intensity is unknown, so neither the gate nor the payback test can be priced.
        let unpriced = fault_driven(snap);
        let by_node = app_nodes(snap);
        if unpriced {
            plan.stats.insert("fault_samples_unpriced".into(), 1.0);
        } else {
            let per_sample_s = period as f64 / snap.cycle.as_secs_f64().max(1e-6);
            self.mlp.observe(&by_node, per_sample_s);
            for app in by_node.keys() {
                plan.stats.insert(format!("mlp_app{app}"), self.mlp.mlp(*app));
            }
        }
        if !unpriced && demand.share < self.p.gate {
            plan.stats.insert("gated_compute_bound".into(), 1.0);
            self.after_cycle(&mut plan, 0, demand.share);
            return plan;
        }
        if self.p.pin_threads {
            // Without access rates (fault samples) the model cannot price a layout: the
            // threads stay on their nodes.
            let moved = if unpriced {
                vec![]
            } else {
                let homes = self.home_moves_on(snap.machine);
                self.choose_layout(snap, &load, &mem_nodes, homes, &mut plan.stats)
            };
            if !moved.is_empty() {
                plan.stats.insert("layout_thread_moves".into(), moved.len() as f64);
                plan.threads.extend(moved);
                // The moved threads' data is seen anew: quick cycles, so that it is seen soon.
                self.quick_until = self.quick_until.max(self.cycles.saturating_add(QUICK_CYCLES));
                self.after_cycle(&mut plan, 1, demand.share);
                return plan;
            }
            let swaps = self.pins.swaps(snap.allowed);
            if !swaps.is_empty() {
                plan.stats.insert("thread_swaps".into(), (swaps.len() / 2) as f64);
                plan.threads.extend(swaps);
                self.after_cycle(&mut plan, 1, demand.share);
                return plan;
            }
        }
        let moves = self.choose_moves(snap, &by_node, &load, &mem_nodes, unpriced, &mut plan.stats);
        let n_moves = moves.len();
        plan.ranges = moves;
        plan.stats.insert("chunk_moves".into(), n_moves as f64);
        self.after_cycle(&mut plan, n_moves, demand.share);
        plan
    }
}

impl Ptb {
    /// Sampling for the next cycle. Quiet mode: slow sampling down after `quiet_after` cycles
    /// without moves, but not while the program is under the gate (a compute-bound phase
    /// issues few samples anyway, and the phase after it must be seen whole). Quick cycles
    /// again at a new phase, whose data is then found sooner: the traffic more than doubled,
    /// or more than [`PHASE_SHIFT`] of the evidence sits on chunks whose users changed.
    fn after_cycle(&mut self, plan: &mut Plan, moves: usize, demand: f64) {
        self.cycles = self.cycles.saturating_add(1);
        let shifted = self.table.shifted_share() > PHASE_SHIFT;
        if self.cycles > 1 && demand >= self.p.gate && (demand > 2.0 * self.last_demand || shifted) {
            self.quick_until = self.quick_until.max(self.cycles.saturating_add(QUICK_CYCLES));
            // A new phase: which node sets the pace, and how much the threads overlap, are
            // seen anew.
            self.pace.reset();
            self.mlp.reset();
        }
        self.last_demand = demand;
        self.gated = demand < self.p.gate;
        if moves == 0 && demand < self.p.gate {
            self.quiet = 0;
            self.period = self.p.period;
        } else if moves == 0 {
            self.quiet = self.quiet.saturating_add(1);
            if self.quiet >= QUIET_AFTER {
                self.period = self.p.period * 4;
            }
        } else {
            self.quiet = 0;
            self.period = self.p.period;
        }
        let now = self.sampling_now();
        if now != self.sent {
            plan.sampling = Some(now);
            self.sent = now;
        }
        plan.stats.insert("sampling_period".into(), self.period as f64);
        if let SamplingMode::Address { period, .. } = now.mode {
            plan.stats.insert("sampling_period_asked".into(), period as f64);
        }
    }

    /// The weights shared chunks are spread with this cycle: link-aware (the interconnect's
    /// utilisation balanced for where the shared accesses come from) where the machine's
    /// links are known, else in proportion to node bandwidth, else even.
    fn spread_weights_now(
        &self,
        m: &ptb_topology::Machine,
        mem_nodes: &[NodeIdx],
        homes: bool,
        stats: &mut std::collections::BTreeMap<String, f64>,
    ) -> Vec<(NodeIdx, u32)> {
        let mut src = vec![0.0; m.n_nodes()];
        if spread::links_differ(m) {
            for c in self.table.states().filter(|c| c.total() >= MIN_SAMPLES) {
                if homes && private_home(c, &self.p, mem_nodes).is_some() {
                    continue;
                }
                let a = c.accesses_per_s();
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

    /// Where each home node's private chunks spill ([`spill::spill_rows`]), computed once per
    /// set of memory nodes.
    fn spill(&mut self, m: &ptb_topology::Machine, mem_nodes: &[NodeIdx]) -> &[Vec<f64>] {
        if self.spill_cache.as_ref().is_none_or(|c| c.0 != mem_nodes) {
            self.spill_cache = Some((mem_nodes.to_vec(), spill::spill_rows(m, mem_nodes)));
        }
        self.spill_cache.as_ref().map_or(&[], |c| c.1.as_slice())
    }

    /// Whether private chunks go to their accessors' node on this machine.
    fn home_moves_on(&self, m: &ptb_topology::Machine) -> bool {
        !local_path_is_narrow(m)
    }

    /// Pick the chunk moves of this cycle.
    ///
    /// 1. every chunk with enough evidence gets a target (private -> its node at its program's
    ///    home share, else spread) and an expected residency;
    /// 2. the loads after all candidate moves are predicted together (moving every private
    ///    chunk home is load-neutral even though one move alone is not); where a node would
    ///    exceed 90% of its capacity, its lightest private candidates are spread instead;
    /// 3. each remaining move is kept only if its access-time saving at the predicted loaded
    ///    latencies (its own accesses', and the queueing it takes off or puts on everyone
    ///    else's at the controllers, [`externality`]), over the chunk's expected residency,
    ///    pays back its cost `payback` times; the moves that do not are taken out and the
    ///    rest priced again at the loads they alone make, until the set settles ([`settle`]).
    fn choose_moves(
        &mut self,
        snap: &Snapshot,
        by_node: &AppNodes,
        load: &model::LoadModel,
        mem_nodes: &[NodeIdx],
        unpriced: bool,
        stats: &mut std::collections::BTreeMap<String, f64>,
    ) -> Vec<RangeAction> {
        let m = snap.machine;
        let nn = m.n_nodes();
        let p = self.p.clone();
        // Where local bandwidth is close to remote, a private chunk gains little at home and a
        // node full of them becomes a hot spot: every chunk is spread instead.
        let homes = self.home_moves_on(m);
        let weights = model::Weights {
            global: self.spread_weights_now(m, mem_nodes, homes, stats),
            per_app: self.app_weights(m, mem_nodes),
            spill: self.spill(m, mem_nodes).to_vec(),
        };
        struct Cand {
            key: ChunkKey,
            range: chunks::Range,
            want: Target,
            a: f64,
            src: Vec<f64>,
            from: Vec<f64>,
            /// Seconds the move has to pay back in.
            residency_s: f64,
            /// Not yet seen: ahead of a sweep ([`sweep`]). Its accesses are the sweep's, which
            /// the loads already count where the sweep is now.
            ahead: bool,
            /// The node of the thread making most of its accesses, and that thread's share.
            owner: Option<(usize, f64)>,
            /// Samples behind `src` (decayed).
            n: f64,
        }
        // Each thread's node (the first of a tid listed twice, as `Snapshot::thread` finds).
        let thread_node: std::collections::HashMap<ptb_profile::Tid, usize> =
            snap.threads.iter().rev().map(|t| (t.tid, t.node.ix())).collect();
        let keys = self.table.keys_by_weight(MIN_SAMPLES);
        if homes && weights.per_app.is_none() {
            let predicted = self.predict_home_shares(snap, &keys, load, &weights, mem_nodes);
            if let Some(pred) = &predicted {
                for (p, r) in pred {
                    stats.insert(format!("home_{p}_gain"), r - 1.0);
                }
            }
            let pct = self.home.update(predicted.as_deref(), DECAY, HOME_CONFIRM);
            stats.insert("home_pct".into(), f64::from(pct));
        }
        // Chunks with too few samples of their own, where their neighbourhood is sure who uses
        // them ([`neighbours`]).
        let by_neighbours: std::collections::BTreeMap<ChunkKey, neighbours::Neighbourhood> = if homes {
            self.table
                .keys_below(MIN_SAMPLES)
                .filter_map(|k| Some((k, neighbours::verdict(&self.table, k, snap.regions, mem_nodes, MIN_SAMPLES)?)))
                .collect()
        } else {
            Default::default()
        };
        let keys: Vec<ChunkKey> = keys.into_iter().chain(by_neighbours.keys().copied()).collect();
        // Where a chunk's pages are now (sampled homes, else the region's residency).
        let shares_now = |c: &chunks::ChunkState, app: AppId, r: &chunks::Range| {
            model::current_shares(c, &model::resident_shares(snap, app, r, nn))
        };
        let mut cands: Vec<Cand> = Vec::new();
        for key in keys {
            let range = self.table.range_of(key, snap.regions);
            let app_pct = self.pct_of(key.app);
            let Some(c) = self.table.get_mut(key) else { continue };
            let nb = by_neighbours.get(&key);
            if c.total() < MIN_SAMPLES && nb.is_none() {
                continue;
            }
            // A move that did not take: where the chunk lies comes from its samples again, and
            // it is planned anew, up to [`MOVE_TRIES`] times.
            if c.move_failed() {
                c.moved_to = None;
                c.since_move = [0.0; 2];
                *stats.entry("moves_not_taken".into()).or_default() += 1.0;
                if c.failed_moves < MOVE_TRIES {
                    c.failed_moves += 1;
                    c.placed = None;
                }
            }
            // The evidence rule's verdict: private to a node, or shared. Shared is sure where the
            // samples rule a private user out, or where the node the chunk was surely private to
            // lost its hold (its users changed); else the verdict is open (too few samples to
            // say): spread for now, but no change of its users (step 5's residency). A chunk with
            // too few samples of its own is judged by its neighbourhood, where that is sure.
            let (want, sure) = match (nb, private_home(c, &p, mem_nodes)) {
                (Some(v), _) => (Target::Node(v.node, app_pct), true),
                (None, Some(top)) if homes => (Target::Node(top, app_pct), true),
                _ => {
                    let was_private = matches!(c.last_sure, Some(Target::Node(..)));
                    (Target::Spread, !homes || surely_shared(&c.by_src) || (was_private && c.lost_top()))
                }
            };
            // How long this target is expected to hold: the one change-point rule.
            let residency_s = c.observe_target(want, sure, snap.now.as_secs_f64(), p.horizon_s);
            if c.placed == Some(want) {
                continue;
            }
            let Some(range) = range else { continue };
            let from = shares_now(c, key.app, &range);
            let to = model::target_shares(want, weights.of(key.app), &weights.spill, nn);
            let off = share_distance(&from, &to);
            // The tolerance absorbs the noise of sampled homes ([`sampling_tolerance`]); where
            // ptb moved the chunk it knows where its pages are, and the payback test alone
            // decides (a chunk spread evenly is 21% away from the 8-node Opteron's link-aware
            // spread: a move that pays).
            let tolerance = if c.moved_to.is_some() {
                0.0
            } else {
                sampling_tolerance(&to, c.by_home.iter().map(|&x| f64::from(x)).sum())
            };
            if off <= tolerance {
                c.placed = Some(want); // already there
                continue;
            }
            let owner = c.owner().and_then(|(tid, share)| thread_node.get(&tid).map(|&n| (n, share)));
            cands.push(Cand {
                key,
                range,
                want,
                a: nb.map_or_else(|| c.accesses_per_s(), |v| v.rate),
                src: nb.map_or_else(|| c.src_shares(), |v| v.src.clone()),
                from,
                residency_s,
                ahead: false,
                owner,
                n: nb.map_or_else(|| c.total(), |v| v.n),
            });
        }
        // Chunks a sweep has not reached yet: priced like the chunks it just swept (whose loads
        // already count the sweep's accesses, so the predicted loads below leave them out).
        if homes && !unpriced {
            let now_s = snap.now.as_secs_f64();
            let home_of = |c: &chunks::ChunkState| private_home(c, &p, mem_nodes);
            for s in sweep::ahead(&self.table, snap.regions, snap.threads, MIN_SAMPLES, home_of) {
                if self.table.moved_ahead(s.key) {
                    continue;
                }
                let (Some(f), Some(range)) = (self.table.get(s.front), self.table.range_of(s.key, snap.regions)) else {
                    continue;
                };
                let want = Target::Node(s.home, self.pct_of(s.key.app));
                let from: Vec<f64> = match self.table.origin(s.front) {
                    Some(o) => o.iter().map(|&x| f64::from(x)).collect(),
                    None => shares_now(f, s.key.app, &range),
                };
                let to = model::target_shares(want, weights.of(s.key.app), &weights.spill, nn);
                let off = share_distance(&from, &to);
                if off <= TOLERANCE {
                    continue;
                }
                cands.push(Cand {
                    key: s.key,
                    range,
                    want,
                    a: f.accesses_per_s(),
                    src: f.src_shares(),
                    from,
                    residency_s: f.residency_s(now_s, p.horizon_s),
                    ahead: true,
                    owner: None,
                    n: f.total(),
                });
            }
        }
        // Predicted loads with every candidate applied; spread private chunks off overloaded nodes.
        let mut after = load.acc.clone();
        let mut after_path = load.path.clone();
        for c in cands.iter().filter(|c| !c.ahead) {
            let to = model::target_shares(c.want, weights.of(c.key.app), &weights.spill, nn);
            model::LoadModel::shift(&mut after, &mut after_path, c.a, &c.src, &c.from, &to);
        }
        for n in 0..nn {
            let mut onto: Vec<usize> = (0..cands.len())
                .filter(|&i| !cands[i].ahead && cands[i].want.node() == Some(NodeIdx::from_ix(n)))
                .collect();
            onto.sort_by(|&x, &y| cands[x].a.total_cmp(&cands[y].a).then(cands[x].key.cmp(&cands[y].key)));
            for i in onto {
                if !load.over(&after, &after_path, n, 0.9) {
                    break;
                }
                let c = &mut cands[i];
                let spread = model::target_shares(Target::Spread, weights.of(c.key.app), &weights.spill, nn);
                let was = model::target_shares(c.want, weights.of(c.key.app), &weights.spill, nn);
                model::LoadModel::shift(&mut after, &mut after_path, c.a, &c.src, &was, &spread);
                c.want = Target::Spread;
            }
        }
        let lat_now = load.loaded(&load.acc, &load.path);
        let means_now = node_mean_latency(&lat_now, &load.path);
        let delta = |path: &[Vec<f64>]| -> Vec<f64> {
            node_mean_latency(&load.loaded(&column_sums(path), path), path)
                .iter()
                .zip(&means_now)
                .map(|(a, b)| a - b)
                .collect()
        };
        let pace = pace_weights(&mut self.pace, snap, by_node, load, &delta(&after_path), &self.mlp);
        let (src_weight, paced) = externality::source_weights(snap, by_node, &pace, &self.mlp);
        // The same per part of the cycle ([`bins`]): each bin's loads, with the candidates'
        // accesses in that bin moved.
        let period = if snap.sampling_period > 0 { snap.sampling_period } else { self.period };
        let targets: Vec<Vec<f64>> =
            cands.iter().map(|c| model::target_shares(c.want, weights.of(c.key.app), &weights.spill, nn)).collect();
        let bins = bins::Bins::of(&self.table, snap, period);
        let shares: Vec<Vec<f64>> =
            bins.as_ref().map_or_else(Vec::new, |b| cands.iter().map(|c| b.shares(self.table.get(c.key))).collect());
        let q_now = load.queueing(&lat_now);
        // Each bin's latencies and queueing now, whatever moves are priced.
        let bins_now: Vec<(Matrix, Matrix)> = bins.as_ref().map_or_else(Vec::new, |b| {
            (0..b.len())
                .map(|k| {
                    let now = load.loaded(&b.acc[k], &b.path[k]);
                    let q = load.queueing(&now);
                    (now, q)
                })
                .collect()
        });
        // Which moves pay, priced at the loads that the moves which pay make ([`settle`]):
        // round 0 at the loads after every candidate, each next one at the loads after the
        // candidates kept.
        let mut bound_of = vec![false; cands.len()];
        let (pays, rounds) = settle::settle(cands.len(), settle::ROUNDS, |round, pays| {
            let (after, after_path) = if round == 0 {
                (after.clone(), after_path.clone())
            } else {
                let (mut acc, mut path) = (load.acc.clone(), load.path.clone());
                for ((c, to), _) in cands.iter().zip(&targets).zip(pays).filter(|((c, _), &p)| p && !c.ahead) {
                    model::LoadModel::shift(&mut acc, &mut path, c.a, &c.src, &c.from, to);
                }
                (acc, path)
            };
            let lat_after = load.loaded(&after, &after_path);
            let binned = bins.as_ref().map(|b| {
                let n = b.len();
                // Each candidate's change of the loads, per (source, memory) node, once; each bin
                // takes it in the share of the chunk's accesses made in that bin.
                let mut delta = vec![vec![vec![0.0; nn]; nn]; n];
                for (((c, sh), to), _) in
                    cands.iter().zip(&shares).zip(&targets).zip(pays).filter(|(((c, _), _), &p)| p && !c.ahead)
                {
                    for s in (0..nn).filter(|&s| c.src[s] > 0.0) {
                        for d in 0..nn {
                            let x = c.a * c.src[s] * (to[d] - c.from[d]) * n as f64;
                            if x != 0.0 {
                                delta.iter_mut().zip(sh).for_each(|(dl, f)| dl[s][d] += f * x);
                            }
                        }
                    }
                }
                (0..n)
                    .map(|k| {
                        let path: Vec<Vec<f64>> = b.path[k]
                            .iter()
                            .zip(&delta[k])
                            .map(|(r, dr)| r.iter().zip(dr).map(|(x, y)| (x + y).max(0.0)).collect())
                            .collect();
                        let acc: Vec<f64> = (0..nn).map(|d| path.iter().map(|r| r[d]).sum()).collect();
                        let later = load.loaded(&acc, &path);
                        let utils = load.path_utils(&acc, &path, &load.link_loads(&path));
                        BinLoads {
                            q_later: load.queueing(&later),
                            later,
                            utils,
                            ext: externality::controllers(&load.cap, &b.acc[k], &acc, &b.path[k], &src_weight, &paced),
                        }
                    })
                    .collect::<Vec<BinLoads>>()
            });
            // Where there are no bins, one externality for the whole cycle (else each bin's, as
            // the savings are).
            let whole = binned
                .is_none()
                .then(|| externality::controllers(&load.cap, &load.acc, &after, &load.path, &src_weight, &paced));
            let q_after = load.queueing(&lat_after);
            let after_utils = load.path_utils(&after, &after_path, &load.link_loads(&after_path));
            let mut next = vec![false; cands.len()];
            'priced: for (i, (c, to)) in cands.iter().zip(&targets).enumerate() {
                if !pays[i] {
                    continue;
                }
                // A move that would move less than a page is no move: the chunk is already where
                // its target puts it (a private chunk spread off its overloaded home, spread
                // again). Planned anyway, it was asked for every cycle and kept the sampling from
                // quieting.
                if model::moved_share(&c.from, to) * (c.range.npages as f64) < 1.0 {
                    continue 'priced;
                }
                // Where the chunk's accesses would still cross a resource near saturation, they are
                // bandwidth-bound: a shorter distance does not make them faster, only less queueing
                // does. Elsewhere they are latency-bound and the whole loaded latency counts.
                let bound = model::LoadModel::max_on(&after_utils, &c.src, to) >= 0.75;
                let (now, later) = if bound { (&q_now, &q_after) } else { (&lat_now, &lat_after) };
                // Weighted by the program's pace: a saving counts where it shortens its run.
                let w = pace.of(c.key.app);
                let saving = |now: &[Vec<f64>], later: &[Vec<f64>], src: &[f64]| {
                    pace::Pace::weighted_latency(w, now, src, &c.from) - pace::Pace::weighted_latency(w, later, src, to)
                };
                // Over the cycle's bins where there are samples enough: each bin's saving, weighted
                // by the share of the chunk's accesses made in it (which resources bind is judged
                // on the chunk's sampled sources).
                let bin_bound: Vec<bool> = binned.as_ref().map_or_else(Vec::new, |per_bin| {
                    per_bin.iter().map(|b| model::LoadModel::max_on(&b.utils, &c.src, to) >= 0.75).collect()
                });
                let per_access_of = |src: &[f64]| -> f64 {
                    match &binned {
                        Some(per_bin) => per_bin
                            .iter()
                            .zip(&bins_now)
                            .zip(&shares[i])
                            .zip(&bin_bound)
                            .map(|(((b, (now, q_now)), f), &bound)| {
                                f * if bound { saving(q_now, &b.q_later, src) } else { saving(now, &b.later, src) }
                            })
                            .sum(),
                        None => saving(now, later, src),
                    }
                };
                // What the saving is surely worth: the source shares are a sample, and of the many
                // chunks priced every cycle the ones whose few samples happen to come from where
                // the move helps most look best (the winner's curse). The saving is linear in the
                // shares, so its sampling variance is the multinomial one of the per-source savings
                // (`(sum p x^2 - (sum p x)^2) / n`); it is priced [`EVIDENCE_Z`] standard errors
                // below its estimate, as the evidence rule judges shares.
                let mut unit = vec![0.0; nn];
                let per_source: Vec<f64> = (0..nn)
                    .map(|s| {
                        if c.src[s] <= 0.0 {
                            return 0.0;
                        }
                        unit[s] = 1.0;
                        let x = per_access_of(&unit);
                        unit[s] = 0.0;
                        x
                    })
                    .collect();
                let per_access_sure =
                    sure_mean(&c.src, &per_source, c.n, EVIDENCE_Z).unwrap_or_else(|| per_access_of(&c.src));
                let mlp = self.mlp.mlp(c.key.app);
                let mut saving_ns_per_s = c.a * per_access_sure / mlp;
                // The other accesses on the controllers the chunk leaves queue less, and those on
                // the ones it joins more ([`externality`]).
                let external = |e: &externality::Externality| e.saving(c.a, &c.src, &c.from, to, &src_weight);
                saving_ns_per_s += match &binned {
                    Some(per_bin) => per_bin.iter().zip(&shares[i]).map(|(b, f)| f * external(&b.ext)).sum(),
                    None => whole.as_ref().map_or(0.0, external),
                };
                // The owner's accesses: a loss that falls on one thread holds the whole program back
                // once it exceeds the spread of its threads' times (they meet at barriers). The
                // thread making most of the chunk's accesses is priced on its own: at the full
                // loaded latency (the distance slows that thread whatever queue the move relieves),
                // weighted as much as it then sets the program's pace
                // ([`pace::LossWeights`]), in place of the share of its node's pricing
                // above. Priced as its node's mean, at the queueing alone where the path is busy,
                // spreading one of a thread's three chunks over eight nodes to relieve its local
                // path looked like a gain, and NPB SP's owner threads became the ones every
                // barrier waited for.
                if let Some((s, share)) = c.owner {
                    let mean =
                        |lat: &[Vec<f64>], to: &[f64]| -> f64 { to.iter().zip(&lat[s]).map(|(f, l)| f * l).sum() };
                    let (own, dl) = (c.a * share, mean(&lat_after, to) - mean(&lat_now, &c.from));
                    if dl > 0.0 {
                        let n = by_node.get(&c.key.app).map_or(1.0, |v| v.iter().map(|x| x.threads).sum());
                        let w_s = pace.of(c.key.app).and_then(|w| w.get(s)).copied().unwrap_or(1.0);
                        if self.loss_cache.as_ref().is_none_or(|c| c.0 != n) {
                            self.loss_cache = Some((n, pace::LossWeights::new(n)));
                        }
                        let w_t = self.loss_cache.as_ref().map_or(1.0, |c| c.1.weight(own * dl / mlp / 1e9));
                        let counted = mean(later, to) - mean(now, &c.from);
                        saving_ns_per_s -= (w_t * dl - w_s * counted) * own / mlp;
                    }
                }
                let cost = model::cost_ns(m, c.range.npages, &c.from, c.want, weights.of(c.key.app), &weights.spill);
                if !unpriced && cost > 0.0 && saving_ns_per_s * c.residency_s < p.payback * cost {
                    continue 'priced;
                }
                next[i] = true;
                bound_of[i] = bound;
            }
            next
        });
        if !cands.is_empty() {
            *stats.entry("price_rounds".into()).or_default() += rounds as f64;
        }
        // The loads after the moves made (`done_acc` only as the shift's scratch).
        let (mut done, mut done_acc) = (load.path.clone(), load.acc.clone());
        let mut out = Vec::new();
        for ((c, to), (_, bound)) in
            cands.into_iter().zip(targets).zip(pays.into_iter().zip(bound_of)).filter(|(_, (p, _))| *p)
        {
            *stats.entry(if bound { "moves_bandwidth_bound" } else { "moves_latency_bound" }.into()).or_default() +=
                1.0;
            *stats
                .entry(if matches!(c.want, Target::Spread) { "moves_spread" } else { "moves_home" }.into())
                .or_default() += 1.0;
            let (to32, from32): (chunks::Counts, chunks::Counts) =
                (to.iter().map(|&x| x as f32).collect(), c.from.iter().map(|&x| x as f32).collect());
            if c.ahead {
                *stats.entry("moves_ahead".into()).or_default() += 1.0;
                self.table.record_ahead(c.key, c.want, to32, from32);
            } else {
                model::LoadModel::shift(&mut done_acc, &mut done, c.a, &c.src, &c.from, &to);
                if let Some(st) = self.table.get_mut(c.key) {
                    st.placed = Some(c.want);
                    st.moved_to = Some(to32);
                    st.since_move = [0.0; 2];
                }
                self.table.note_origin(c.key, from32);
            }
            let op = match c.want {
                Target::Node(n, pct) if pct >= 100 => RangeOp::MoveTo(n),
                Target::Node(..) => RangeOp::Weighted(home::weights_of(&to)),
                Target::Spread => RangeOp::Weighted(weights.of(c.key.app).to_vec()),
            };
            out.push(RangeAction { app: c.key.app, start_vpn: c.range.start_vpn, npages: c.range.npages, op });
        }
        // The pace history describes the placement in force: moved on by the moves made.
        if !out.is_empty() {
            self.pace.shift(&delta(&done));
        }
        out
    }
}

/// A (source node x memory node) table.
type Matrix = Vec<Vec<f64>>;

/// One time bin's loads ([`bins`]) with the candidates of a pricing round moved: latencies,
/// queueing and the paths' utilisation (the bin's latencies now, the same in every round, are
/// computed once per cycle beside these).
struct BinLoads {
    /// What a move does to everyone else's accesses on the controllers in this bin
    /// ([`externality`]).
    ext: externality::Externality,
    later: Vec<Vec<f64>>,
    q_later: Vec<Vec<f64>>,
    /// Highest utilisation on each (source, memory) path after the moves.
    utils: Vec<Vec<f64>>,
}

impl Ptb {
    /// The accesses each node's threads overlap: the mean of their programs' `1 / mlp` over the
    /// node's threads (the prior on a node without threads).
    fn mlp_per_node(&self, snap: &Snapshot) -> Vec<f64> {
        let nn = snap.machine.n_nodes();
        let (mut inv, mut n) = (vec![0.0; nn], vec![0.0; nn]);
        for t in snap.threads {
            inv[t.node.ix()] += 1.0 / self.mlp.mlp(t.app);
            n[t.node.ix()] += 1.0;
        }
        inv.iter().zip(&n).map(|(i, &k)| if k > 0.0 { k / i } else { self.mlp.prior() }).collect()
    }

    /// The home share of `app`'s private chunks: its layout's ([`layout`]) where every program
    /// runs on nodes of its own, else (programs sharing nodes, or unpinned) the one share of
    /// all programs ([`home`]).
    fn pct_of(&self, app: ptb_profile::AppId) -> u8 {
        match (self.pins.own(), self.layout.get(&app)) {
            (Some(_), Some(l)) => l.pct,
            _ => self.home.pct,
        }
    }
}

impl Ptb {
    /// This cycle's predicted throughput of each home share ([`home::predict`]), from the
    /// private chunks' traffic and where their pages are now.
    #[allow(clippy::too_many_arguments)]
    fn predict_home_shares(
        &self,
        snap: &Snapshot,
        keys: &[ChunkKey],
        load: &model::LoadModel,
        weights: &model::Weights,
        mem_nodes: &[NodeIdx],
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
                Some(home::Private { app: key.app, node: top, a: c.accesses_per_s(), src: c.src_shares(), from })
            })
            .collect();
        let closed = closed::Closed::for_snapshot(load, snap, self.mlp_per_node(snap));
        home::predict(&closed, load, &private, weights, self.home.pct)
    }
}

/// The node a chunk belongs on when it is private: the node issuing most of its accesses, which
/// has memory, when it confidently issues at least twice as many as any other node
/// ([`dominant`]). Any other chunk is shared. A chunk held private to a node last cycle stays so
/// while its samples cannot rule that out ([`dominant_held`]), unless its users changed since
/// (its top node lost its hold, [`chunks::ChunkState::lost_top`]).
fn private_home(c: &chunks::ChunkState, _p: &PtbParams, mem_nodes: &[NodeIdx]) -> Option<NodeIdx> {
    let held = c.last_want.and_then(|w| w.node()).filter(|_| !c.lost_top());
    dominant_held(&c.by_src, held).filter(|n| mem_nodes.contains(n))
}

/// [`dominant`] with a memory: where `held` names the node the data was judged to belong to
/// last time, it keeps belonging there while the Wilson *upper* bound of that node's share of
/// its own and the busiest other node's samples is at least 2/3 (the samples do not rule out
/// that it uses the data twice as much as any other node); only then is the data judged anew.
/// Data whose users' true share lies near the threshold (SPECjbb's heap on two nodes: three
/// quarters of a chunk's accesses from its owner's node) otherwise flips between private and
/// shared with the sampling noise, and every flip counts as a change of its users in the
/// change-point rule: the expected residency shrank to a second and the moves to the owners'
/// nodes stopped paying (a quarter of the heap stayed on the initialising node; 16 threads:
/// 9.84 s, with the memory 9.79 s, oracle-moved 9.65 s; seed 1, simulated). The held node's
/// share is not the largest of noisy counts, so data every node reads alike loses the hold.
pub(crate) fn dominant_held<T: Copy + Into<f64>>(counts: &[T], held: Option<NodeIdx>) -> Option<NodeIdx> {
    if let Some(h) = held.filter(|h| h.ix() < counts.len()) {
        let (mine, other) = against_busiest_other(counts, h.ix());
        let n = mine + other;
        if mine > 0.0 && 1.0 - wilson_lower(other / n, n, EVIDENCE_Z) >= 2.0 / 3.0 {
            return Some(h);
        }
    }
    dominant(counts)
}

/// The one statistical evidence rule of who uses data (a chunk, or the pages a thread reads):
/// the node with the most samples, when the Wilson lower bound (one standard error) of its
/// share of its own and the runner-up's samples is at least 2/3 (it uses the data at least
/// twice as much as any other node). A uniform chunk's top node in a few samples is often
/// ahead by chance; data a thread shares with everyone but uses most (SPECjbb's heap) passes
/// however many nodes share it.
pub(crate) fn dominant<T: Copy + Into<f64>>(counts: &[T]) -> Option<NodeIdx> {
    let (top, first, second) = top_and_runner_up(counts);
    let n = first + second;
    (n > 0.0 && wilson_lower(first / n, n, EVIDENCE_Z) >= 2.0 / 3.0).then(|| NodeIdx::from_ix(top))
}

/// Whether the samples rule out that any node uses the data twice as much as every other: the
/// Wilson *upper* bound of the top node's share of its own and the runner-up's samples is under
/// 2/3 ([`dominant`]'s test from the other side). Data between the two bounds is open.
pub(crate) fn surely_shared<T: Copy + Into<f64>>(counts: &[T]) -> bool {
    let (_, first, second) = top_and_runner_up(counts);
    let n = first + second;
    n > 0.0 && 1.0 - wilson_lower(second / n, n, EVIDENCE_Z) < 2.0 / 3.0
}

/// The first node with the most samples, its samples and those of the busiest other node.
fn top_and_runner_up<T: Copy + Into<f64>>(counts: &[T]) -> (usize, f64, f64) {
    let top = counts
        .iter()
        .enumerate()
        .fold((0, 0.0f64), |best, (i, &x)| if x.into() > best.1 { (i, x.into()) } else { best })
        .0;
    let (first, second) = against_busiest_other(counts, top);
    (top, first, second)
}

/// Node `i`'s samples and those of the busiest other node (0 where there is none).
fn against_busiest_other<T: Copy + Into<f64>>(counts: &[T], i: usize) -> (f64, f64) {
    let other = counts.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &x)| x.into()).fold(0.0f64, f64::max);
    (counts.get(i).map_or(0.0, |&x| x.into()), other)
}

/// The mean of `x` over sources drawn with the shares `p` (summing to 1), `z` standard errors
/// below its estimate from `n` samples: the multinomial variance `(sum p x^2 - (sum p x)^2) / n`.
/// `None` without samples.
fn sure_mean(p: &[f64], x: &[f64], n: f64, z: f64) -> Option<f64> {
    if n <= 0.0 {
        return None;
    }
    let mean: f64 = p.iter().zip(x).map(|(p, x)| p * x).sum();
    let second: f64 = p.iter().zip(x).map(|(p, x)| p * x * x).sum();
    Some(mean - z * ((second - mean * mean).max(0.0) / n).sqrt())
}

/// Wilson score lower bound of a proportion `p` seen in `n` trials, `z` standard errors below:
/// a share seen in few samples says little (a uniform chunk's top node in 4 samples often
/// has half of them).
pub(crate) fn wilson_lower(p: f64, n: f64, z: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let margin = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - margin) / (1.0 + z2 / n)).clamp(0.0, 1.0)
}

/// How far (half the L1 distance) a chunk's sampled homes may lie from its target shares `to`
/// by sampling noise alone, with `n` (decayed) samples of its homes: the expected distance of `n`
/// draws from `to` (per node `sqrt(2 p (1 - p) / (pi n))`, the mean absolute deviation of a
/// share), times the evidence rule's z ([`EVIDENCE_Z`]), at most [`TOLERANCE`] (and that where no
/// home was sampled: the shares then come from the region's residency). A chunk whose samples
/// all say one node is 15% away from a target that keeps 85% of it there, whatever the noise
/// allows for an even spread: a fixed 25% left the layouts' home shares of 85% unrealised where
/// first touch had put every private page at home (NPB IS with 16 threads: the local paths
/// saturated: 4.83 s, against 4.55 s with this tolerance; oracle-moved 4.43 s; seed 1, simulated).
fn sampling_tolerance(to: &[f64], n: f64) -> f64 {
    if n <= 0.0 {
        return TOLERANCE;
    }
    let expected: f64 =
        to.iter().map(|&p| (2.0 * p * (1.0 - p) / (std::f64::consts::PI * n)).max(0.0).sqrt()).sum::<f64>() / 2.0;
    (EVIDENCE_Z * expected).min(TOLERANCE)
}

/// Plans ptb makes again for a chunk whose move did not take ([`chunks::ChunkState::move_failed`]):
/// the kernel may refuse a page for a while (under `PROT_NONE`, busy); one it keeps refusing
/// stays where it is, as the Linux actuator gives a failed page up after three retries.
const MOVE_TRIES: u8 = 3;

/// The z of ptb's evidence rule: the Wilson bound of who uses a chunk ([`private_home`]) and the
/// noise a chunk's sampled homes may show ([`sampling_tolerance`]).
const EVIDENCE_Z: f64 = 1.0;

/// Threads on each node.
pub(crate) fn threads_per_node(snap: &Snapshot) -> Vec<f64> {
    let mut threads = vec![0.0; snap.machine.n_nodes()];
    for t in snap.threads {
        threads[t.node.ix()] += 1.0;
    }
    threads
}

/// Mean sampled latency of each node's accesses (node of the accessing thread), ns, where at
/// least [`pace::MIN_LATENCY_SAMPLES`] samples carry one.
pub(crate) fn measured_latency_ns(snap: &Snapshot) -> Vec<Option<f64>> {
    let nn = snap.machine.n_nodes();
    // The node of each thread (the first of a tid listed twice, as `Snapshot::thread` finds),
    // looked up once per sample.
    let mut node_of = std::collections::HashMap::with_capacity(snap.threads.len());
    for t in snap.threads {
        node_of.entry(t.tid).or_insert(t.node.ix());
    }
    let (mut sum, mut n) = (vec![0.0; nn], vec![0u32; nn]);
    // Samples come thread after thread (a ring per thread): one lookup of the thread per run.
    for run in snap.samples.chunk_by(|a, b| a.tid == b.tid) {
        let Some(&node) = node_of.get(&run[0].tid) else { continue };
        for l in run.iter().filter_map(|s| s.latency_ns) {
            sum[node] += f64::from(l);
            n[node] += 1;
        }
    }
    sum.iter().zip(&n).map(|(s, &k)| (f64::from(k) >= pace::MIN_LATENCY_SAMPLES).then(|| s / f64::from(k))).collect()
}

/// The pace weights of every program's source nodes ([`pace`]): the cycle's latency samples
/// folded into `tracker`, and `delta`, the change of each node's mean latency from now to
/// after the cycle's candidate moves.
fn pace_weights(
    tracker: &mut pace::PaceTracker,
    snap: &Snapshot,
    by_node: &AppNodes,
    load: &model::LoadModel,
    delta: &[f64],
    mlp: &mlp::MlpTracker,
) -> pace::Pace {
    use std::collections::BTreeMap;
    let nn = snap.machine.n_nodes();
    let threads: BTreeMap<ptb_profile::AppId, Vec<f64>> =
        by_node.iter().map(|(&app, v)| (app, v.iter().map(|c| c.threads).collect())).collect();
    let lat: BTreeMap<ptb_profile::AppId, Vec<pace::LatencyStats>> = by_node
        .iter()
        .map(|(&app, v)| (app, v.iter().map(|c| pace::LatencyStats::new(c.lat_n, c.lat_sum)).collect()))
        .collect();
    tracker.observe(&threads, &lat);
    // Each program's time per access (thread-ns), over its nodes: N / X.
    let all = threads_per_node(snap);
    let floor = threads
        .iter()
        .map(|(&app, thr)| {
            let (n, x) = (0..nn)
                .filter(|&s| thr[s] > 0.0 && all[s] > 0.0)
                .map(|s| (thr[s], load.path[s].iter().sum::<f64>() * thr[s] / all[s]))
                .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
            let t_ns = if x > 0.0 { n * 1e9 / x } else { 0.0 };
            (app, (pace::IMBALANCE * t_ns * mlp.mlp(app)).powi(2))
        })
        .collect();
    tracker.weights(&threads, delta, &floor)
}

/// Per program, what the cycle's samples say of its threads on each node.
type AppNodes = std::collections::BTreeMap<ptb_profile::AppId, Vec<mlp::NodeCycle>>;

/// What the cycle's samples say of every program's threads on each node, for the pace weights
/// ([`pace`]) and the overlap estimate ([`mlp`]): their number, their samples and the latencies
/// those carry (node of the sampled thread), in one pass over the samples.
fn app_nodes(snap: &Snapshot) -> AppNodes {
    use std::collections::HashMap;
    let nn = snap.machine.n_nodes();
    let mut out = AppNodes::new();
    let mut of: HashMap<ptb_profile::Tid, (ptb_profile::AppId, usize)> = HashMap::with_capacity(snap.threads.len());
    for t in snap.threads {
        out.entry(t.app).or_insert_with(|| vec![Default::default(); nn])[t.node.ix()].threads += 1.0;
        of.insert(t.tid, (t.app, t.node.ix()));
    }
    for s in snap.samples {
        let Some(&(app, n)) = of.get(&s.tid) else { continue };
        let Some(c) = out.get_mut(&app).and_then(|v| v.get_mut(n)) else { continue };
        c.samples += 1.0;
        if let Some(l) = s.latency_ns {
            c.add_latency(f64::from(l));
        }
    }
    out
}

/// Accesses per second served by each memory node for the per-path loads `path`.
fn column_sums(path: &[Vec<f64>]) -> Vec<f64> {
    (0..path.len()).map(|d| path.iter().map(|r| r[d]).sum()).collect()
}

/// Mean loaded latency (ns) of each source node's accesses: the loaded latencies `lat`
/// weighted by the per-path loads `path` (0 for a node without accesses).
fn node_mean_latency(lat: &[Vec<f64>], path: &[Vec<f64>]) -> Vec<f64> {
    path.iter()
        .zip(lat)
        .map(|(row, l)| {
            let x: f64 = row.iter().sum();
            if x > 0.0 {
                row.iter().zip(l).map(|(a, b)| a * b).sum::<f64>() / x
            } else {
                0.0
            }
        })
        .collect()
}

/// Every sample of the cycle is a page fault or a hinting fault (a software source without a
/// PMU): evidence of which node touches a page, with no access rate behind it.
pub(crate) fn fault_driven(snap: &Snapshot) -> bool {
    use ptb_profile::SampleKind;
    !snap.samples.is_empty()
        && snap.samples.iter().all(|s| matches!(s.kind, SampleKind::PageFault | SampleKind::HintFault))
}

/// Bandwidth-proportional weights when the memory nodes differ by more than 25% in
/// bandwidth (e.g. a CXL node); `None` (plain interleave) when they are alike.
pub(crate) fn spread_weights(m: &ptb_topology::Machine, nodes: &[NodeIdx]) -> Option<Vec<(NodeIdx, u32)>> {
    let w = crate::interleave::bandwidth_weights(m, nodes);
    let max = w.iter().map(|x| x.1).max()?;
    let min = w.iter().map(|x| x.1).min()?;
    (min > 0 && max as f64 / min as f64 > 1.25).then_some(w)
}

#[cfg(test)]
mod tests;

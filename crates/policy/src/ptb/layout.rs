//! How many nodes each program runs on, over which nodes its shared data is spread, and how
//! much of its private data stays home.
//!
//! Problem: a program with fewer threads than CPUs can run packed on the best-connected nodes
//! that hold its threads (short distances, few controllers) or spread over more of them (more
//! controllers and local paths, longer distances); its shared data can be spread over its own
//! nodes only (close by) or over every memory node (balancing controllers and links); its
//! private data can stay whole at home or spill part of each chunk to the other nodes. Data
//! read at random by latency-bound threads (canneal, graph500) wants the first of each;
//! bandwidth-bound threads (NPB MG, CG) the second.
//!
//! Approach: one objective, the throughput of all threads predicted by the closed model
//! ([`super::closed`]), for every candidate layout of a program: its first `k` nodes
//! ([`super::nodesets`]) for every `k` from the fewest that hold its threads to every node no
//! other program uses, each with its shared data on its own nodes or on all, and each home
//! share; and, for each `k`, the set of `k` of those nodes that the same model rates fastest
//! (every set that splits the threads evenly is scored each cycle, at most [`SET_SEARCH`] a
//! size, each rated one standard error of its decayed mean below the mean: the best of many
//! carries the pick's upward bias), at the spread and home share in force. The first `k` nodes
//! are the ones with the most Bandwidth Graph inside; under traffic between every pair the
//! links the pairs' routes share decide, which the model's routes see (16 threads on the
//! 8-node Opteron: the order's 0, 1, 6, 7 are 12th of the 70 four-node sets for GAP PageRank,
//! simulated). A candidate's threads are spread over its nodes by their CPUs, each computing per
//! access what the program's threads compute now; its private chunks sit at home at the
//! candidate's share (their home node's accesses local, the other nodes' remote, as sampled) and
//! its shared chunks are spread. The current layout is evaluated the same
//! way, so that the model's errors cancel. The scores are decayed means over cycles of the log
//! of each candidate's throughput relative to the layout in force (programs whose phases want
//! different layouts keep one that is good on average); of the candidates ahead by more than
//! [`super::home::SWITCH_GAIN`], the one whose saving over the layout's expected residency (the
//! chunks' change-point rule: the mean period between the program's layout changes, after a
//! prior of `horizon_s`), less `payback` times the pages it moves (data at home that its
//! threads leave, or whose placement changes), is largest. After a move to other nodes the
//! layouts are not scored for [`super::params::QUICK_CYCLES`] cycles: those describe the move
//! (data where the threads left it, users seen anew), not the program.

use super::chunks::{ChunkKey, Target};
use super::closed::Closed;
use super::model::{self, LoadModel};
use super::threads::quotas_on;
use super::Ptb;
use crate::plan::ThreadMove;
use crate::snapshot::Snapshot;
use ptb_profile::AppId;
use ptb_topology::{Machine, NodeIdx};
use std::collections::BTreeMap;

/// A candidate layout: the nodes used (sorted), percent of the shared data spread over every
/// memory node (the rest over its own), percent of each private chunk at home.
type Candidate = (Vec<NodeIdx>, u8, u8);

/// Node sets of one size scored to find the one the model predicts fastest, at most (all of
/// them on machines of up to 8 nodes); beyond, the size's candidate is the program's
/// best-connected growth alone ([`super::nodesets`]). A bound on the decision's work.
const SET_SEARCH: u64 = 128;

/// Percent of a program's shared data spread over every memory node with link-aware weights,
/// the rest over its own nodes (candidates where the machine's links differ in width): from
/// none, through a spill beside the program's own controllers, to all of it.
pub const WIDE_SHARES: [u8; 4] = [0, 15, 30, 100];

/// How far a candidate layout is from the one in force: nodes first, then the shared data's
/// spread, then the home share.
fn change(c: &Candidate, cur: &Candidate) -> (usize, u8, u8) {
    let moved = c.0.iter().filter(|n| !cur.0.contains(n)).count() + cur.0.iter().filter(|n| !c.0.contains(n)).count();
    (moved, c.1.abs_diff(cur.1), c.2.abs_diff(cur.2))
}

/// What ptb keeps about each program's layout.
#[derive(Clone, Debug, Default)]
pub struct AppLayout {
    /// Percent of the shared data over every memory node (the rest over the program's own
    /// nodes: [`WIDE_SHARES`]).
    pub wide: u8,
    /// Percent of each private chunk at home ([`super::home::SHARES`]).
    pub pct: u8,
    /// When (seconds of management) the program's layout was first evaluated, and how many
    /// times it changed since (its expected residency, as for chunks).
    pub first_s: f64,
    pub changes: u16,
    /// Cycles the layouts were evaluated in.
    pub evals: u32,
    /// Cycles left before the layouts are evaluated again after the program moved to other
    /// nodes (its chunks' evidence of who uses them starts over).
    settle: u32,
    /// Per candidate: decayed mean of the log of its predicted throughput relative to the
    /// layout in force, over the cycles since the last change.
    pub(super) scores: BTreeMap<Candidate, f64>,
    /// Per node set of the sizes searched (at most [`SET_SEARCH`] of them): decayed means of the
    /// log of its predicted throughput at the spread and home share in force, relative to the
    /// layout in force, and of its square.
    sets: BTreeMap<Vec<NodeIdx>, (f64, f64)>,
}

impl AppLayout {
    fn new(wide: u8) -> Self {
        AppLayout {
            wide,
            pct: 100,
            first_s: f64::NAN,
            changes: 0,
            evals: 0,
            settle: 0,
            scores: BTreeMap::new(),
            sets: BTreeMap::new(),
        }
    }
}

/// Memory nodes of `nodes` (all of `mem_nodes` when none has memory).
fn own_memory(nodes: &[NodeIdx], mem_nodes: &[NodeIdx]) -> Vec<NodeIdx> {
    let own: Vec<NodeIdx> = mem_nodes.iter().copied().filter(|n| nodes.contains(n)).collect();
    if own.is_empty() {
        mem_nodes.to_vec()
    } else {
        own
    }
}

/// Spread weights of a layout: over its own memory nodes, in proportion to their bandwidth
/// where they differ (else evenly); `wide` percent of it instead with the link-aware weights
/// for readers on its nodes (in proportion to their CPUs) where the machine's links are known,
/// else in proportion to bandwidth over every memory node.
pub fn weights(m: &Machine, mem_nodes: &[NodeIdx], nodes: &[NodeIdx], wide: u8) -> Vec<(NodeIdx, u32)> {
    let even = |v: &[NodeIdx]| super::spread_weights(m, v).unwrap_or_else(|| v.iter().map(|&n| (n, 1)).collect());
    let own = even(&own_memory(nodes, mem_nodes));
    if wide == 0 {
        return own;
    }
    let mut src = vec![0.0; m.n_nodes()];
    for n in nodes {
        src[n.ix()] = m.node(*n).cpus.len() as f64;
    }
    let all = super::spread::link_aware_weights(m, mem_nodes, &src).unwrap_or_else(|| even(mem_nodes));
    if wide >= 100 {
        return all;
    }
    let shares = |w: &[(NodeIdx, u32)]| model::target_shares(Target::Spread, w, &[], m.n_nodes());
    let b = f64::from(wide) / 100.0;
    let blend: Vec<f64> = shares(&own).iter().zip(shares(&all)).map(|(o, a)| (1.0 - b) * o + b * a).collect();
    super::home::weights_of(&blend)
}

/// Shares of a program's accesses: to private chunks from their home node, to private chunks
/// from other nodes (a chunk is private where its home issues twice any other node's accesses,
/// not all of them: NPB LU's planes, a third of whose accesses are their owner's), and to shared
/// chunks.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mix {
    own: f64,
    foreign: f64,
}

/// Per source node `s` of the node set `set`, the shares of its accesses on each memory node
/// when `mix.own` of them go to its own private chunks (`pct` percent of each at home, the rest
/// on the other nodes of `w` in the home's `spill` shares), `mix.foreign` to the private chunks
/// of the set's other nodes (placed alike at their homes) and the rest to shared chunks spread
/// with `w`.
fn row(
    s: NodeIdx,
    set: &[NodeIdx],
    mix: Mix,
    pct: u8,
    w: &[(NodeIdx, u32)],
    spill: &[Vec<f64>],
    nn: usize,
) -> Vec<f64> {
    let home = model::target_shares(Target::Node(s, pct), w, spill, nn);
    let spread = model::target_shares(Target::Spread, w, spill, nn);
    let others: Vec<NodeIdx> = set.iter().copied().filter(|&u| u != s).collect();
    let mut away = vec![0.0; nn];
    if others.is_empty() {
        away.clone_from(&home);
    } else {
        for &u in &others {
            let t = model::target_shares(Target::Node(u, pct), w, spill, nn);
            away.iter_mut().zip(t).for_each(|(a, x)| *a += x / others.len() as f64);
        }
    }
    let shared = (1.0 - mix.own - mix.foreign).max(0.0);
    (0..nn).map(|n| mix.own * home[n] + mix.foreign * away[n] + shared * spread[n]).collect()
}

/// A program's compute time per access (ns), calibrated as its layouts are scored: the model
/// runs the program at the pace of its slowest node (its threads share the work evenly and meet
/// at barriers), so the compute time is the one with which that pace reproduces what the program
/// was measured to do: its time per access over all its threads (`threads / rate`, over its nodes
/// that issued accesses) less its slowest node's latency over `mlp`. Calibrated per node on each
/// node's own latency, the time the other nodes' threads waited at barriers counted as compute:
/// NPB CG with 32 threads on four of the 8-node Opteron's nodes ran at 67 ns per access on every
/// node while their latencies were 118-174 ns, the compute time so inferred was 45 ns (38 from
/// the slowest node's latency), and the model gave eight nodes 2% where they gave 34% (seed 2,
/// 3.39 s on four nodes, 2.53 s after moving to eight at once; simulated). `None` when no node of
/// the program issued accesses.
fn app_compute_ns(own: &[NodeIdx], thr: &[f64], path: &[Vec<f64>], lat: &[f64], mlp: f64) -> Option<f64> {
    let (mut n, mut x, mut slowest) = (0.0, 0.0, 0.0f64);
    for s in own.iter().map(|n| n.ix()) {
        let xs: f64 = path.get(s).map_or(0.0, |r| r.iter().sum());
        let ns = thr.get(s).copied().unwrap_or(0.0);
        if xs > 0.0 && ns > 0.0 {
            n += ns;
            x += xs;
            slowest = slowest.max(lat.get(s).copied().unwrap_or(0.0));
        }
    }
    (x > 0.0).then(|| (n * 1e9 / x - slowest / mlp.max(1.0)).max(0.0))
}

/// The sets of `k` nodes of `pool` that split the threads evenly (`even`), each sorted; none
/// where `pool` has more than [`SET_SEARCH`] sets of `k`.
pub(super) fn sets_of(pool: &[NodeIdx], k: usize, even: &dyn Fn(&[NodeIdx]) -> bool) -> Vec<Vec<NodeIdx>> {
    if super::nodesets::choose(pool.len() as u64, k as u64) > SET_SEARCH {
        return vec![];
    }
    super::nodesets::subsets(pool, k).filter(|set| even(set)).map(|set| sorted(&set)).collect()
}

fn sorted(v: &[NodeIdx]) -> Vec<NodeIdx> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s
}

impl Ptb {
    /// Each program's spread weights this cycle, by its layout; `None` when the programs do
    /// not run on nodes of their own (the global weights then apply).
    pub(super) fn app_weights(
        &mut self,
        m: &Machine,
        mem_nodes: &[NodeIdx],
    ) -> Option<BTreeMap<AppId, Vec<(NodeIdx, u32)>>> {
        let apps = self.pins.own()?.clone();
        let mut out = BTreeMap::new();
        for (app, an) in apps {
            let wide = self.layout.entry(app).or_insert_with(|| AppLayout::new(0)).wide;
            let w = self.cached_weights(m, mem_nodes, an.nodes(), wide);
            out.insert(app, w);
        }
        Some(out)
    }

    fn cached_weights(
        &mut self,
        m: &Machine,
        mem_nodes: &[NodeIdx],
        nodes: &[NodeIdx],
        wide: u8,
    ) -> Vec<(NodeIdx, u32)> {
        self.weight_cache
            .entry((sorted(nodes), wide, mem_nodes.to_vec()))
            .or_insert_with(|| weights(m, mem_nodes, nodes, wide))
            .clone()
    }

    /// Accesses per second to `app`'s private chunks from their home nodes, to its private
    /// chunks from other nodes, and to its shared chunks.
    fn app_traffic(&self, app: AppId, mem_nodes: &[NodeIdx], homes: bool) -> (f64, f64, f64) {
        let (mut own, mut foreign, mut shared) = (0.0, 0.0, 0.0);
        for key in self.table.keys_by_weight(super::params::MIN_SAMPLES).into_iter().filter(|k| k.app == app) {
            let Some(c) = self.table.get(key) else { continue };
            match super::private_home(c, &self.p, mem_nodes).filter(|_| homes) {
                Some(h) => {
                    let at_home = c.src_shares().get(h.ix()).copied().unwrap_or(1.0);
                    own += c.accesses_per_s() * at_home;
                    foreign += c.accesses_per_s() * (1.0 - at_home);
                }
                None => shared += c.accesses_per_s(),
            }
        }
        (own, foreign, shared)
    }

    /// Choose every program's layout (see the module docs); returns the thread moves of the
    /// programs whose nodes change (their chunks' evidence of who uses them is forgotten: it
    /// names the nodes the threads leave).
    pub(super) fn choose_layout(
        &mut self,
        snap: &Snapshot,
        load: &LoadModel,
        mem_nodes: &[NodeIdx],
        homes: bool,
        stats: &mut BTreeMap<String, f64>,
    ) -> Vec<ThreadMove> {
        let Some(apps) = self.pins.own().cloned() else { return vec![] };
        let m = snap.machine;
        let nn = m.n_nodes();
        let closed = Closed::for_snapshot(load, snap, self.mlp_per_node(snap));
        let (thr, comp, mlps) = {
            let (a, b, c) = closed.calibration();
            (a.to_vec(), b.to_vec(), c.to_vec())
        };
        let base_shape: Vec<Vec<f64>> = load
            .path
            .iter()
            .map(|r| {
                let t: f64 = r.iter().sum();
                r.iter().map(|x| if t > 0.0 { x / t } else { 0.0 }).collect()
            })
            .collect();
        let used: Vec<NodeIdx> = apps.values().flat_map(|a| a.nodes().iter().copied()).collect();
        let now_s = snap.now.as_secs_f64();
        let mut moves = Vec::new();
        for (&app, an) in &apps {
            let (own_a, foreign_a, shared_a) = self.app_traffic(app, mem_nodes, homes);
            let total_a = own_a + foreign_a + shared_a;
            if total_a <= 0.0 {
                continue;
            }
            let mix = Mix { own: own_a / total_a, foreign: foreign_a / total_a };
            let own = an.nodes().to_vec();
            let n_threads = snap.threads.iter().filter(|t| t.app == app).count();
            if n_threads == 0 {
                continue;
            }
            // Compute time per access, over the program's nodes whose threads issued accesses
            // this cycle (a node stalled for the whole cycle says nothing); none: nothing to
            // calibrate on.
            let mlp_app = self.mlp.mlp(app);
            let Some(c_app) = app_compute_ns(&own, &thr, &load.path, closed.latency_ns(), mlp_app) else { continue };
            // Candidate node sets: its own nodes first, then the nodes of its order that no other
            // program uses, in that order.
            let mut order: Vec<NodeIdx> = own.clone();
            order.extend(an.order.iter().copied().filter(|n| !own.contains(n) && !used.contains(n)));
            let lay = self.layout.entry(app).or_insert_with(|| AppLayout::new(0)).clone();
            // Right after a move to other nodes the threads' data is still where they left it
            // and who uses which chunk is being seen anew: a cycle then scores the candidates
            // on a transition, not on the program (LULESH with 16 threads went from 2 nodes to
            // 4 and, on the next cycle's prediction, to 8: its pages moved twice).
            if lay.settle > 0 {
                self.layout.get_mut(&app).expect("inserted above").settle -= 1;
                continue;
            }
            let eval = |me: &mut Ptb, nodes: &[NodeIdx], wide: u8, pct: u8| -> f64 {
                let w = me.cached_weights(m, mem_nodes, nodes, wide);
                let spill = me.spill(m, mem_nodes).to_vec();
                let set = sorted(nodes);
                let q = quotas_on(m, &set, n_threads);
                let (mut t2, mut c2, mut m2, mut sh2) = (thr.clone(), comp.clone(), mlps.clone(), base_shape.clone());
                for n in &own {
                    t2[n.ix()] = 0.0;
                    sh2[n.ix()] = vec![0.0; nn];
                }
                for (n, k) in set.iter().zip(&q) {
                    t2[n.ix()] = *k as f64;
                    c2[n.ix()] = c_app;
                    m2[n.ix()] = mlp_app;
                    sh2[n.ix()] = row(*n, &set, mix, pct, &w, &spill, nn);
                }
                // The program's threads share its work evenly (its node sets split them
                // evenly), so it runs at the pace of its slowest node's threads: a layout that
                // leaves one node's threads behind (their data behind a saturated link) is as
                // slow as if all its threads were that slow. Other programs' threads count
                // as they run.
                let x = closed.rates_for(&t2, &c2, &m2, &sh2);
                let pace = set
                    .iter()
                    .filter(|n| t2[n.ix()] > 0.0)
                    .map(|n| x[n.ix()] / t2[n.ix()])
                    .fold(f64::INFINITY, f64::min);
                let others: f64 = (0..nn).filter(|&s| !set.iter().any(|n| n.ix() == s)).map(|s| x[s]).sum();
                others + if pace.is_finite() { pace * n_threads as f64 } else { 0.0 }
            };
            let now = eval(self, &own, lay.wide, lay.pct);
            if now <= 0.0 {
                continue;
            }
            // Every home share is scored in every cycle, alike while no chunk is private: the
            // scores are means over cycles, and a share first scored once a chunk was judged
            // private entered at face value against others that carried the first, sparser
            // cycles' scores.
            let pcts: &[u8] = if homes { &super::home::SHARES } else { &[100] };
            let mut scores = BTreeMap::new();
            // Node sets beyond the fewest are candidates only where they split the threads
            // evenly: a program whose threads meet at barriers runs at the pace of its busiest
            // node, which the throughput model does not see.
            let even = |set: &[NodeIdx]| {
                let q = quotas_on(m, &sorted(set), n_threads);
                q.iter().max() == q.iter().min()
            };
            // The node sets scored: for each size, the program's best-connected growth (its own
            // nodes, then the next of its order) and the set of that size the model predicts
            // fastest at the spread and home share in force (the 8-node Opteron's 16-bit links
            // join pairs whose all-to-all routes share links: summing the Bandwidth Graph over
            // a set's pairs does not see that, the model's routes do).
            // Every set of a size searched is scored in every cycle (a set first scored in a
            // later cycle would enter at face value against sets that carry the means of
            // several), and the best by its mean is a candidate at the spread and home share in
            // force.
            let mut sets: Vec<Vec<NodeIdx>> = vec![];
            let mut searched: Vec<Vec<NodeIdx>> = vec![];
            let mut set_scores: BTreeMap<Vec<NodeIdx>, (f64, f64)> = BTreeMap::new();
            // A set picked as the best of many by its score carries the pick's upward bias (the
            // winner's curse, as for the chunks' savings): each is rated one standard error of
            // its decayed mean below the mean, the error from its scores' spread over cycles
            // (a decayed mean with weights d^i has the variance (1 - d) / (1 + d) of one score).
            let d = super::params::DECAY;
            let lower = |(m, q): (f64, f64)| {
                let var = (q - m * m).max(0.0) * (1.0 - d) / (1.0 + d);
                m - var.sqrt()
            };
            for k in (an.k_min.min(order.len()).max(1)..=order.len()).filter(|&k| k == own.len() || even(&order[..k])) {
                let grown = sorted(&order[..k]);
                if !sets.contains(&grown) {
                    sets.push(grown);
                }
                let mut best: Option<(f64, Vec<NodeIdx>)> = None;
                for set in sets_of(&order, k, &even) {
                    let r = (eval(self, &set, lay.wide, lay.pct) / now).max(1e-9).ln();
                    let ms = match lay.sets.get(&set) {
                        Some(&(m, q)) if lay.evals > 0 => (d * m + (1.0 - d) * r, d * q + (1.0 - d) * r * r),
                        _ => (r, r * r),
                    };
                    set_scores.insert(set.clone(), ms);
                    let sc = lower(ms);
                    if best.as_ref().is_none_or(|b| sc > b.0 + 1e-12) {
                        best = Some((sc, set));
                    }
                }
                if let Some((_, b)) = best {
                    if !searched.contains(&b) {
                        searched.push(b);
                    }
                }
            }
            searched.retain(|s| !sets.contains(s));
            for set in &searched {
                scores.insert((set.clone(), lay.wide, lay.pct), lower(set_scores[set]));
            }
            for set in &sets {
                // Spreading over every memory node with link-aware weights is a candidate where
                // the machine's links differ in width (the 8-node Opteron's 8- and 16-bit links):
                // elsewhere the bandwidth-proportional spread over the program's nodes was as
                // good or better (broadwell-cod-4n, simulated).
                let wides: &[u8] = if super::spread::links_differ(m) { &WIDE_SHARES } else { &[0] };
                for &wide in wides {
                    for &pct in pcts {
                        let r = (eval(self, set, wide, pct) / now).max(1e-9).ln();
                        let key = (set.clone(), wide, pct);
                        let sc = match lay.scores.get(&key) {
                            Some(&prev) if lay.evals > 0 => {
                                super::params::DECAY * prev + (1.0 - super::params::DECAY) * r
                            }
                            _ => r,
                        };
                        scores.insert(key, sc);
                    }
                }
            }
            let cur: Candidate = (sorted(&own), lay.wide, lay.pct);
            {
                let l = self.layout.get_mut(&app).expect("inserted above");
                l.scores = scores.clone();
                l.sets = set_scores.clone();
                if l.first_s.is_nan() {
                    l.first_s = now_s;
                }
                l.evals = l.evals.saturating_add(1);
            }
            stats.insert(format!("layout_nodes_app{app}"), own.len() as f64);
            stats.insert(format!("layout_wide_app{app}"), f64::from(lay.wide));
            stats.insert(format!("home_pct_app{app}"), f64::from(lay.pct));
            // Expected residency, the change-point rule of the chunks: the mean period between
            // layout changes so far, after a prior of `horizon_s`.
            let first_s = if lay.first_s.is_nan() { now_s } else { lay.first_s };
            let residency = ((now_s - first_s).max(0.0) + self.p.horizon_s) / (f64::from(lay.changes) + 1.0);
            let mut pick: Option<(Candidate, f64, f64)> = None;
            for (c, &sc) in &scores {
                // The first evaluation takes the best spread and home share outright (nothing was
                // placed for the ones in force yet); other nodes, and later changes, need the
                // margin (moving threads costs more than the model sees: caches, and the
                // evidence of who uses what starts over).
                let margin = if lay.evals == 0 && c.0 == cur.0 { 0.0 } else { (1.0 + super::home::SWITCH_GAIN).ln() };
                if *c == cur || sc <= margin {
                    continue;
                }
                let to = &c.0;
                let cost = self.layout_cost_ns(snap, app, &own, (to, c.1, c.2), mem_nodes, homes, n_threads);
                let net = n_threads as f64 * 1e9 * (1.0 - (-sc).exp()) * residency - self.p.payback * cost;
                // Candidates the model cannot tell apart (equal scores: a home share while no
                // chunk is known to be private, a spread while no chunk is known to be shared)
                // keep what is in force: of equal ones, the nearest to it, whatever each would
                // move (at stream-serial's first evaluation with 64 threads the spreads scored
                // alike, and the one its serially initialised data was nearer to ran 3.6% slower,
                // seed 1, simulated).
                let better = |p: &(Candidate, f64, f64)| {
                    if (sc - p.2).abs() <= 1e-9 * sc.abs().max(p.2.abs()) {
                        return change(c, &cur) < change(&p.0, &cur);
                    }
                    net > p.1 * (1.0 + 1e-9) || (net >= p.1 * (1.0 - 1e-9) && change(c, &cur) < change(&p.0, &cur))
                };
                if net > 0.0 && pick.as_ref().is_none_or(better) {
                    pick = Some((c.clone(), net, sc));
                }
            }
            let Some(((set, wide, pct), _, _)) = pick else { continue };
            stats.insert(format!("layout_changed_app{app}"), set.len() as f64);
            let evals = lay.evals + 1;
            let changes = lay.changes.saturating_add(1);
            // The scores are relative to the layout in force: re-based on the new one, not
            // forgotten, so that one cycle's prediction right after a change (noisy: the moved
            // data is not seen yet) cannot undo it against the margin.
            let base = scores.get(&(set.clone(), wide, pct)).copied().unwrap_or(0.0);
            let scores = scores.iter().map(|(c, v)| (c.clone(), v - base)).collect();
            // Re-based as the scores: the log ratios shift by `base`, their spread stays.
            let sets = set_scores
                .iter()
                .map(|(c, &(m, q))| (c.clone(), (m - base, q - 2.0 * base * m + base * base)))
                .collect();
            let relayout = set != cur.0;
            let settle = if relayout { super::params::QUICK_CYCLES } else { 0 };
            self.layout.insert(app, AppLayout { wide, pct, first_s, changes, evals, settle, scores, sets });
            if relayout {
                // In the program's order (its own nodes first), so that growth keeps them.
                let to: Vec<NodeIdx> = order.iter().copied().filter(|n| set.contains(n)).collect();
                moves.extend(self.pins.relayout(m, snap.threads, app, &to));
                self.table.forget_users(app);
            } else if wide != lay.wide {
                // The same nodes with other spread weights: chunks spread with the old ones
                // are re-placed (a spread chunk's target names no weights).
                self.table.forget_placed(app);
            }
        }
        moves
    }

    /// Migration cost (ns) of the pages a layout's targets move from where they are now: the
    /// private chunks at home whose node loses threads (from `from_nodes`, the nodes in force),
    /// and every chunk as far as its pages are off the layout's target. Not net of what the
    /// layout in force would still move: that layout's targets are not what its chunks will get
    /// (a chunk moves only where the move pays), so they credit no candidate with moves it
    /// avoids, nor hide the moves it makes (on `opteron6272-4n`, whose data ptb interleaves from
    /// the start, Metis wc with 16 threads on one node scored two nodes and four alike at its
    /// first evaluation; net of the one-node layout's targets, which would gather every page on
    /// that node, taking two cost nothing, and ptb then moved 42,093 pages for it, simulated).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn layout_cost_ns(
        &self,
        snap: &Snapshot,
        app: AppId,
        from_nodes: &[NodeIdx],
        (to_nodes, to_wide, to_pct): (&[NodeIdx], u8, u8),
        mem_nodes: &[NodeIdx],
        homes: bool,
        n_threads: usize,
    ) -> f64 {
        let m = snap.machine;
        let nn = m.n_nodes();
        let Some(w_to) = self.weight_cache.get(&(sorted(to_nodes), to_wide, mem_nodes.to_vec())).cloned() else {
            return 0.0;
        };
        let spill = self.spill_cache.as_ref().filter(|c| c.0 == mem_nodes).map_or(&[][..], |c| c.1.as_slice());
        let q_from = quotas_on(m, &sorted(from_nodes), n_threads);
        let q_to = quotas_on(m, &sorted(to_nodes), n_threads);
        let share = |set: &[NodeIdx], q: &[usize], n: NodeIdx| {
            sorted(set).iter().zip(q).find(|x| *x.0 == n).map_or(0.0, |x| *x.1 as f64)
        };
        // Chunks with too few samples to be judged move, on average, as the judged ones do: with
        // a thinned sampler most of a program's chunks have fewer than MIN_SAMPLES in its first
        // cycles, and counting the judged ones alone made moving its threads away from their
        // data look cheap (NPB FT with 16 threads went from 2 nodes to 8 on 128 samples, where
        // its data made 4 the cheaper of two layouts it scored alike).
        let (mut pages, mut judged, mut unjudged) = (0.0, 0.0, 0.0);
        let keys: Vec<ChunkKey> = self.table.keys_by_weight(0.0).into_iter().filter(|k| k.app == app).collect();
        for key in keys {
            let (Some(c), Some(r)) = (self.table.get(key), self.table.range_of(key, snap.regions)) else { continue };
            if c.total() < super::params::MIN_SAMPLES {
                unjudged += r.npages as f64;
                continue;
            }
            judged += r.npages as f64;
            let from = model::current_shares(c, &model::resident_shares(snap, app, &r, nn));
            let (target, stay) = match super::private_home(c, &self.p, mem_nodes).filter(|_| homes) {
                Some(top) => {
                    let before = share(from_nodes, &q_from, top);
                    let stay = if before > 0.0 { (share(to_nodes, &q_to, top) / before).min(1.0) } else { 1.0 };
                    (Target::Node(top, to_pct), stay)
                }
                None => (Target::Spread, 1.0),
            };
            let moved =
                stay * model::moved_share(&from, &model::target_shares(target, &w_to, spill, nn)) + (1.0 - stay);
            pages += moved * r.npages as f64;
        }
        if judged > 0.0 {
            pages *= 1.0 + unjudged / judged;
        }
        pages * (m.costs.page_us * 1e3 + m.page_size as f64 / m.costs.copy_gbps.max(0.01))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_share_spills_that_part_of_the_shared_data_beyond_the_programs_nodes() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let mem: Vec<NodeIdx> = (0..m.n_nodes()).map(NodeIdx::from_ix).collect();
        let nodes = [NodeIdx::from_ix(0), NodeIdx::from_ix(1)];
        let on_own = |w: &[(NodeIdx, u32)]| {
            let t: f64 = w.iter().map(|x| f64::from(x.1)).sum();
            w.iter().filter(|x| nodes.contains(&x.0)).map(|x| f64::from(x.1)).sum::<f64>() / t
        };
        let own = weights(&m, &mem, &nodes, 0);
        let all = weights(&m, &mem, &nodes, 100);
        assert_eq!(on_own(&own), 1.0);
        assert!(on_own(&all) < 0.9, "{all:?}");
        // 30% wide: 70% by the own weights plus 30% of what the wide ones put there.
        let want = 0.7 + 0.3 * on_own(&all);
        let got = on_own(&weights(&m, &mem, &nodes, 30));
        assert!((got - want).abs() < 0.03, "{got} vs {want}");
    }

    #[test]
    fn a_private_chunks_accesses_from_other_nodes_go_to_its_home() {
        // Four nodes, even spread weights, no spill: a node whose accesses are a third to its
        // own private chunks, two thirds to the other nodes' private chunks (NPB LU's planes)
        // and none shared reads a third locally and the rest evenly from the three others.
        let set: Vec<NodeIdx> = (0..4).map(NodeIdx::from_ix).collect();
        let w: Vec<(NodeIdx, u32)> = set.iter().map(|&n| (n, 1)).collect();
        let r = row(set[1], &set, Mix { own: 1.0 / 3.0, foreign: 2.0 / 3.0 }, 100, &w, &[], 4);
        let want = [2.0 / 9.0, 1.0 / 3.0, 2.0 / 9.0, 2.0 / 9.0];
        assert!(r.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9), "{r:?}");
        // All of them to its own private chunks: all local; shared ones: spread evenly.
        assert_eq!(row(set[1], &set, Mix { own: 1.0, foreign: 0.0 }, 100, &w, &[], 4), vec![0.0, 1.0, 0.0, 0.0]);
        let spread = row(set[1], &set, Mix { own: 0.0, foreign: 0.0 }, 100, &w, &[], 4);
        assert!(spread.iter().all(|x| (x - 0.25).abs() < 1e-9), "{spread:?}");
        // On one node the other nodes' private chunks are its own.
        let one = [set[2]];
        assert_eq!(row(set[2], &one, Mix { own: 0.5, foreign: 0.5 }, 100, &w[2..3], &[], 4), vec![0.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn the_compute_time_is_what_the_slowest_nodes_pace_leaves() {
        // Two nodes of 8 threads at one pace (67 ns per access: 119.4 M accesses/s each), one
        // at 174 ns, the other at 120: with 6 accesses in flight the compute time is what the
        // slowest leaves, 67 - 174 / 6 = 38 ns, not the 47.5 of their per-node mean.
        let own = [NodeIdx::from_ix(0), NodeIdx::from_ix(1)];
        let x = 8e9 / 67.0;
        let path = vec![vec![x, 0.0, 0.0], vec![0.0, x, 0.0], vec![0.0; 3]];
        let c = app_compute_ns(&own, &[8.0, 8.0, 0.0], &path, &[174.0, 120.0, 0.0], 6.0).unwrap();
        assert!((c - 38.0).abs() < 0.01, "{c}");
        // Threads that do not wait: the pace of all of them over the slowest's latency.
        let slow = 8e9 / (20.0 + 180.0 / 4.0);
        let fast = 8e9 / (20.0 + 100.0 / 4.0);
        let path = vec![vec![slow, 0.0], vec![0.0, fast]];
        let c = app_compute_ns(&own, &[8.0, 8.0], &path, &[180.0, 100.0], 4.0).unwrap();
        assert!(c < 20.0 && c > 0.0, "{c}");
        // Nothing measured: no calibration; a latency beyond the pace: no compute time.
        assert_eq!(app_compute_ns(&own, &[8.0, 8.0], &[vec![0.0; 2], vec![0.0; 2]], &[0.0; 2], 4.0), None);
        assert_eq!(app_compute_ns(&own[..1], &[8.0], &[vec![8e9 / 50.0]], &[400.0], 4.0), Some(0.0));
    }
}

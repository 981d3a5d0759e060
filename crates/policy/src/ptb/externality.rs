//! What a move does to everyone else's accesses: the queueing it takes off the controllers its
//! chunk leaves and puts on the ones it joins.
//!
//! Problem: a move priced by its own accesses alone misses what it does to the others on the
//! same controllers. NPB CG with 32 threads on four of the 8-node Opteron's nodes kept 40% of
//! its traffic on the node where its master had initialised the matrix: that controller queued
//! 44 ns, its node's threads set the program's pace, yet the other nodes' row blocks left there
//! were worth little to move by their own accesses (their threads waited at barriers either
//! way): it moved 60,548 pages where the other nodes' blocks alone were 73,728, and 0.78 of its
//! accesses stayed local (0.97 where it had moved to eight nodes early; simulated).
//!
//! Approach: the marginal cost a congestion charge prices. One more access a second on memory
//! node `d`'s controller delays each access already there by the slope of its queueing delay;
//! what that costs is the accesses there, each source node's weighted as the program's pace
//! weighs its time ([`super::pace`], over its overlap [`super::mlp`]). The slope is the secant
//! from the loads now to those after all the cycle's candidate moves, so that the moves judged
//! together share the change they make rather than each claiming the relief at the steepest
//! point. A move's external saving is, per controller, the accesses a second it takes off
//! (negative where it adds them) times that cost, the chunk's own accesses left out (its own
//! saving counts them).
//!
//! Controllers only: a controller's queue is common to every node reading that memory, so it
//! is what the samples of all its readers attribute alike. The same charge on the links and
//! the CPU-to-memory paths was measured and left out: with links it moved 5-14% more pages for
//! figures within 0.1% on the 8-node suite and with 16 or 32 threads (held-out PageRank with 64
//! threads moved about 230,000 pages a run against 160,000, chunks of its score arrays flipping
//! home and spread with its phases) and lost on `--perturb 1` and `3` (1.8492x -> 1.8472x,
//! 1.7995x -> 1.7969x); with paths too, NPB SP's boundary
//! chunks were spread again to relieve their owners' paths (`--threads 32` SP 88% -> 84% of
//! oracle-moved's gain; a path's queue is the part of its node's latency the other resources do
//! not explain, [`LoadModel::calibrate_paths`], not a measured resource). Simulated, 3 seeds.

use super::mlp::MlpTracker;
use super::model::queue_ns;
#[cfg(doc)]
use super::model::LoadModel;
use super::pace::Pace;
use super::AppNodes;
use crate::snapshot::Snapshot;

/// Per source node, how much a nanosecond of one of its accesses counts: its programs' pace
/// weights over their overlap, averaged over the node's threads (1 over the prior's overlap on
/// a node without threads); and its threads weighted by their programs' pace weights
/// ([`super::pace`]): whose time counts, and how much, when the node's accesses are displaced
/// ([`controllers`]' `paced`).
pub fn source_weights(snap: &Snapshot, by_node: &AppNodes, pace: &Pace, mlp: &MlpTracker) -> (Vec<f64>, Vec<f64>) {
    let nn = snap.machine.n_nodes();
    let (mut w, mut n, mut paced) = (vec![0.0; nn], vec![0.0; nn], vec![0.0; nn]);
    for (&app, nodes) in by_node {
        let pw = pace.of(app);
        for (s, nc) in nodes.iter().enumerate().take(nn) {
            if nc.threads > 0.0 {
                let ws = pw.and_then(|v| v.get(s)).copied().unwrap_or(1.0);
                w[s] += nc.threads * ws / mlp.mlp(app);
                n[s] += nc.threads;
                paced[s] += nc.threads * ws;
            }
        }
    }
    let w = w.iter().zip(&n).map(|(x, &k)| if k > 0.0 { x / k } else { 1.0 / mlp.prior() }).collect();
    (w, paced)
}

/// Per memory node, the slope of its controller's queueing delay (ns per access a second), the
/// weighted accesses a second on it (of one part of the cycle where its loads come and go,
/// [`super::bins`], as the moves' own savings are priced), and the most one access a second
/// more or less there can cost or save its other users (ns a second).
pub struct Externality {
    slope: Vec<f64>,
    weighted: Vec<f64>,
    displaced: Vec<f64>,
}

/// The controllers' externality (capacities `cap`, accesses a second) for the loads `now` and
/// `after` every candidate moved (accesses a second per memory node) and the accesses a second
/// per (source, memory) node `path` now, each source node's weighted by `src_weight`, its
/// threads by `paced` ([`source_weights`]).
///
/// The slope of an open queue grows without bound as its load nears capacity, but a controller
/// at capacity delays nobody further: it serves what it can, and an access a second more there
/// is one less for its other users, whose threads then progress by one access a second less.
/// So one access a second costs them at most their time per access (threads over their access
/// rate, as the sampled traffic shows it, each node's threads weighted by `paced`), averaged
/// over the controller's accesses. Near saturation the slope is a difference of sampled loads
/// that all sit just under capacity: NPB MG with 64 threads on `opteron6272-4n` with home moves
/// on (a build not committed), every controller saturated, saw external savings of 1.6-5.2e8 ns
/// a second for chunks whose own latency a move raised by 56-125 ns, in both directions (home in
/// one phase, spread in the next), and moved 1,700,992 pages where oracle-moved moves 86,016
/// (simulated, seed 1).
pub fn controllers(
    cap: &[f64],
    now: &[f64],
    after: &[f64],
    path: &[Vec<f64>],
    src_weight: &[f64],
    paced: &[f64],
) -> Externality {
    let nn = now.len();
    // Each source node's thread time per access (ns), weighted by whose time counts.
    let per_access: Vec<f64> = path
        .iter()
        .enumerate()
        .map(|(s, row)| {
            let x: f64 = row.iter().sum();
            if x > 0.0 {
                paced.get(s).copied().unwrap_or(0.0) * 1e9 / x
            } else {
                0.0
            }
        })
        .collect();
    let displaced = (0..nn)
        .map(|d| {
            let on: f64 = path.iter().map(|r| r.get(d).copied().unwrap_or(0.0)).sum();
            if on <= 0.0 {
                return 0.0;
            }
            path.iter().zip(&per_access).map(|(r, t)| r.get(d).copied().unwrap_or(0.0) * t).sum::<f64>() / on
        })
        .collect();
    let slope = (0..nn)
        .map(|d| {
            let (now, cap) = (now[d], cap.get(d).copied().unwrap_or(0.0));
            if cap <= 0.0 || !cap.is_finite() {
                return 0.0;
            }
            let later = after.get(d).copied().unwrap_or(now);
            let h = if (later - now).abs() > 1e-3 * cap { later - now } else { 1e-3 * cap };
            (queue_ns(now + h, cap) - queue_ns(now, cap)) / h
        })
        .collect();
    let weighted = (0..nn)
        .map(|d| path.iter().zip(src_weight).map(|(row, w)| w * row.get(d).copied().unwrap_or(0.0)).sum())
        .collect();
    Externality { slope, weighted, displaced }
}

impl Externality {
    /// The external saving (ns a second, as the move's own) of moving a chunk of `a` accesses a
    /// second from `src` (shares per source node) from the page shares `from` to `to`.
    pub fn saving(&self, a: f64, src: &[f64], from: &[f64], to: &[f64], src_weight: &[f64]) -> f64 {
        let own_w: f64 = src.iter().zip(src_weight).map(|(f, w)| f * w).sum();
        (0..self.slope.len())
            .map(|d| {
                let (f, t) = (from.get(d).copied().unwrap_or(0.0), to.get(d).copied().unwrap_or(0.0));
                let others = (self.weighted[d] - own_w * a * f).max(0.0);
                a * (f - t) * (self.slope[d] * others).min(self.displaced[d])
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptb::model::{Demand, LoadModel};

    /// The 8-node Opteron with `hot` accesses a second on node 0's memory from every node
    /// alike and `cool` on each other node's from its own.
    fn load(hot: f64, cool: f64) -> LoadModel {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let nn = m.n_nodes();
        let path: Vec<Vec<f64>> = (0..nn)
            .map(|s| {
                (0..nn)
                    .map(|d| {
                        if d == 0 {
                            hot / nn as f64
                        } else if d == s {
                            cool
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect();
        let per_node = (0..nn).map(|d| path.iter().map(|r| r[d]).sum()).collect();
        LoadModel::for_machine(&m, &Demand { per_node, per_path: path, share: 0.5 })
    }

    /// All of a chunk's accesses (or pages) on node `n` of eight.
    fn unit(n: usize) -> [f64; 8] {
        let mut v = [0.0; 8];
        v[n] = 1.0;
        v
    }

    #[test]
    fn leaving_a_busy_controller_saves_the_others_time_and_joining_one_costs_it() {
        let l = load(0.8 * 250e6, 0.2 * 250e6);
        let w = vec![1.0; 8];
        let e = controllers(&l.cap, &l.acc, &l.acc, &l.path, &w, &[8.0; 8]);
        let (src, on0, on3, on5) = (unit(3), unit(0), unit(3), unit(5));
        let off = e.saving(2e6, &src, &on0, &on3, &w);
        let onto = e.saving(2e6, &src, &on3, &on0, &w);
        assert!(off > 0.0 && onto < 0.0, "{off} {onto}");
        // Between two quiet controllers a move does next to nothing to the others.
        let quiet = e.saving(2e6, &src, &on3, &on5, &w);
        assert!(quiet.abs() < 0.1 * off, "{quiet} {off}");
        // Weighted by whose time counts: nothing when no source's time does.
        let none = controllers(&l.cap, &l.acc, &l.acc, &l.path, &[0.0; 8], &[8.0; 8]);
        assert_eq!(none.saving(2e6, &src, &on0, &on3, &w), 0.0);
        // A move that stays: nothing.
        assert_eq!(e.saving(2e6, &src, &on0, &on0, &w), 0.0);
    }

    #[test]
    fn a_saturated_controller_costs_its_other_users_at_most_the_accesses_it_takes_from_them() {
        // Node 0's controller at 97% of its capacity: the open queue's slope there is steep,
        // but an access a second moved off it gives its other users one access a second, worth
        // their mean time per access there (8 threads on every node over its access rate).
        let l = load(0.97 * 250e6, 0.2 * 250e6);
        let w = vec![1.0; 8];
        let e = controllers(&l.cap, &l.acc, &l.acc, &l.path, &w, &[8.0; 8]);
        let open = controllers(&l.cap, &l.acc, &l.acc, &l.path, &w, &[1e12; 8]);
        let (src, on0, on3) = (unit(3), unit(0), unit(3));
        let a = 2e6;
        // Every node reads node 0's memory alike; node 0's threads read nothing else, the
        // others their own memory too.
        let hot = 0.97 * 250e6 / 8.0;
        let per_access = (8e9 / hot + 7.0 * 8e9 / (hot + 0.2 * 250e6)) / 8.0;
        let off = e.saving(a, &src, &on0, &on3, &w);
        assert!(off <= a * per_access * (1.0 + 1e-9) && off > 0.9 * a * per_access, "{off} {}", a * per_access);
        // Where it binds: the open slope priced the same move ten times higher and more.
        assert!(open.saving(a, &src, &on0, &on3, &w) > 10.0 * off);
        // Below saturation the slope decides, as before (node 0 at 80%).
        let l = load(0.8 * 250e6, 0.2 * 250e6);
        let (e, open) = (
            controllers(&l.cap, &l.acc, &l.acc, &l.path, &w, &[8.0; 8]),
            controllers(&l.cap, &l.acc, &l.acc, &l.path, &w, &[1e12; 8]),
        );
        assert_eq!(e.saving(a, &src, &on0, &on3, &w), open.saving(a, &src, &on0, &on3, &w));
    }

    proptest::proptest! {
        /// Any loads (idle to past capacity), traffic, weights and paced threads: what a move does
        /// to the others on a controller is finite and never more, per access a second it moves
        /// on or off, than the users' mean time per access there.
        #[test]
        fn a_move_never_counts_more_than_it_displaces(
            util in proptest::collection::vec(0.0f64..1.5, 8),
            after in proptest::collection::vec(0.0f64..1.5, 8),
            rows in proptest::collection::vec(0.0f64..1.0, 64),
            paced in proptest::collection::vec(0.0f64..16.0, 8),
            weight in 0.0f64..2.0,
            from in 0usize..8,
            to in 0usize..8,
            a in 0.0f64..1e8,
        ) {
            let cap = vec![250e6; 8];
            let now: Vec<f64> = util.iter().map(|u| u * 250e6).collect();
            let after: Vec<f64> = after.iter().map(|u| u * 250e6).collect();
            // Each memory node's load shared over the source nodes as `rows` says.
            let path: Vec<Vec<f64>> = (0..8)
                .map(|s| {
                    (0..8)
                        .map(|d| {
                            let col: f64 = (0..8).map(|k| rows[k * 8 + d]).sum();
                            if col > 0.0 { now[d] * rows[s * 8 + d] / col } else { 0.0 }
                        })
                        .collect()
                })
                .collect();
            let w = vec![weight; 8];
            let e = controllers(&cap, &now, &after, &path, &w, &paced);
            let (src, on_from, on_to) = (unit(from), unit(from), unit(to));
            let got = e.saving(a, &src, &on_from, &on_to, &w);
            proptest::prop_assert!(got.is_finite());
            let bound: f64 = [from, to].iter().map(|&d| e.displaced[d]).sum::<f64>() * a;
            proptest::prop_assert!(got.abs() <= bound * (1.0 + 1e-9) + 1e-6, "{} > {}", got, bound);
        }
    }

    #[test]
    fn the_slope_is_the_secant_to_the_loads_after_the_moves() {
        // All the cycle's moves take node 0 from 80% to 40%: each is priced at the mean slope
        // over that way, below the slope at 80%.
        let l = load(0.8 * 250e6, 0.2 * 250e6);
        let mut after = l.acc.clone();
        after[0] = 0.4 * l.cap[0];
        let w = vec![1.0; 8];
        let (at, along) = (
            controllers(&l.cap, &l.acc, &l.acc, &l.path, &w, &[8.0; 8]),
            controllers(&l.cap, &l.acc, &after, &l.path, &w, &[8.0; 8]),
        );
        assert!(along.slope[0] > 0.0 && along.slope[0] < at.slope[0], "{} {}", along.slope[0], at.slope[0]);
        let want = (queue_ns(after[0], l.cap[0]) - queue_ns(l.acc[0], l.cap[0])) / (after[0] - l.acc[0]);
        assert!((along.slope[0] - want).abs() < 1e-12 * want.abs().max(1.0));
    }
}

//! Which nodes' threads set a program's pace.
//!
//! Problem: the threads of a parallel program share its work evenly and meet at barriers
//! (OpenMP's static schedules, PARSEC's thread pools), so it runs at the pace of its slowest
//! threads ([`super::layout`] judges node sets by that pace). A saving judged by the mean
//! latency of all threads misses it: a program whose shared data sits on one of its two nodes
//! is held by the other node's threads, yet the mean latency over all its threads is the same
//! whether the data sits on one node or is spread over both, so spreading it looks worthless.
//!
//! Approach: a node's threads take `c + L_s / mlp` per access, `c` the same on every node
//! (the same code on an even share of the work) and `L_s` the mean sampled latency of the
//! node's accesses. The program runs at the pace of the node with the largest `L_s`; which
//! one that is, is known only as well as the cycles tell, so each node gets the probability
//! that it is the slowest (normal approximation: `c` and `mlp` cancel out). A move pays back
//! over many cycles, so what counts is the node's latency over the run of the placement in
//! force: the mean of its cycles' sampled means since the program last changed nodes or phase,
//! each cycle weighted [`DECAY`] times less than the next (a cycle describes the placement of
//! its time; ptb's moves change it), the older ones shifted by the change the load model
//! predicts for every move ptb made since, with the standard error of that mean (the spread
//! from cycle to cycle, over the cycles the weights count). Counted alike, the cycles of a
//! hot spot ptb has since relieved kept its node the slowest long after (SPECjbb on the
//! 8-node Opteron: its threads finished first while their savings were credited five times
//! over, and the other nodes' data never went home; simulated). A program whose nodes take
//! turns being the slowest gets weights near even (the last turns lean), and no node is known
//! to be the slowest before its second cycle. Latency is not all that sets a thread's pace:
//! threads given equal shares of a loop still finish a phase a few percent apart (cache
//! contents, interrupts, the hardware threads they share a core with), so each node's time
//! also carries an uncertainty of [`IMBALANCE`] of the program's time per access (`N / X`
//! for `X` accesses a second), in latency terms times `mlp`: a node slower by a few ns out of
//! a hundred does not hold the program back for sure. A saving on node s's accesses shortens
//! the program's run when s is the slowest node, and then for all `N` threads rather than
//! s's `n_s`: its weight is `N / n_s * P(s slowest)`. The cycle's moves are judged together,
//! so the weights are averaged along the way from the latencies now to those the load model
//! predicts after all of them (an Aumann-Shapley share of each move in the change of the
//! slowest node's time: where the slowest node is known for sure, the shares add up to that
//! change). A program whose moves leave one node the slowest all along credits the savings on
//! that node only; one that is balanced all along keeps the mean (the weights average 1 over
//! the threads).

use super::params::DECAY;
use ptb_profile::AppId;
use std::collections::BTreeMap;

/// Latency samples of one node's accesses: count and sum (ns).
#[derive(Clone, Copy, Debug, Default)]
pub struct LatencyStats {
    n: f64,
    sum: f64,
}

impl LatencyStats {
    /// `n` samples whose latencies sum to `sum` ns.
    pub fn new(n: f64, sum: f64) -> Self {
        LatencyStats { n, sum }
    }

    #[cfg(test)]
    pub fn add(&mut self, ns: f64) {
        self.n += 1.0;
        self.sum += ns;
    }

    /// Mean, with at least [`MIN_LATENCY_SAMPLES`] samples.
    fn mean(&self) -> Option<f64> {
        (self.n >= MIN_LATENCY_SAMPLES).then(|| self.sum / self.n)
    }
}

/// Spread of the threads' times through a barrier phase beside their latencies, as a share
/// of the time per access (see the module docs).
pub const IMBALANCE: f64 = 0.05;

/// Steps of the path from the latencies now to those after the cycle's moves.
const PATH_STEPS: usize = 8;

/// Latency samples a node needs before its mean is used (as for the closed model's measured
/// latencies).
pub const MIN_LATENCY_SAMPLES: f64 = 16.0;

/// Per program and node, the mean of the cycles' sampled mean latencies and their squared
/// deviations (Welford), kept while the program's threads stay on the same nodes and its phase
/// holds.
#[derive(Clone, Debug, Default)]
pub struct PaceTracker {
    apps: BTreeMap<AppId, (Vec<usize>, Vec<Track>)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Track {
    /// Weighted mean of the cycles' means.
    mean: f64,
    /// Weighted sum of squared deviations of the cycles' means from `mean`.
    m2: f64,
    /// Sum of the cycles' weights and of their squares.
    w: f64,
    w2: f64,
    cycles: u32,
}

impl PaceTracker {
    /// Forget every program's history (a new phase).
    pub fn reset(&mut self) {
        self.apps.clear();
    }

    /// Shift every tracked mean by `delta[s]` (ns): the change ptb's moves are predicted to
    /// bring to node s's latency.
    pub fn shift(&mut self, delta: &[f64]) {
        for (_, tr) in self.apps.values_mut() {
            for (t, d) in tr.iter_mut().zip(delta) {
                t.mean += d;
            }
        }
    }

    /// Fold in one cycle: `threads[app][s]` the program's threads on node s, `lat[app][s]` the
    /// latency samples of its accesses from node s. A program whose node set changed starts
    /// over.
    pub fn observe(&mut self, threads: &BTreeMap<AppId, Vec<f64>>, lat: &BTreeMap<AppId, Vec<LatencyStats>>) {
        self.apps.retain(|a, _| threads.contains_key(a));
        for (&app, thr) in threads {
            let nodes: Vec<usize> = (0..thr.len()).filter(|&s| thr[s] > 0.0).collect();
            let e = self.apps.entry(app).or_default();
            if e.0 != nodes || e.1.len() != thr.len() {
                *e = (nodes.clone(), vec![Track::default(); thr.len()]);
            }
            let Some(st) = lat.get(&app).filter(|st| st.len() == thr.len()) else { continue };
            for &s in &nodes {
                let Some(m) = st[s].mean() else { continue };
                let t = &mut e.1[s];
                // The weighted form of Welford's update: the earlier cycles' weights shrink by
                // DECAY, the new one enters with weight 1.
                t.cycles = t.cycles.saturating_add(1);
                t.w = t.w * DECAY + 1.0;
                t.w2 = t.w2 * DECAY * DECAY + 1.0;
                t.m2 *= DECAY;
                let d = m - t.mean;
                t.mean += d / t.w;
                t.m2 += d * (m - t.mean);
            }
        }
    }

    /// The weights of this cycle's savings, with `delta[s]` the change of node s's mean
    /// latency (ns) the cycle's moves are predicted to bring. A program gets weights only where
    /// every node it has threads on has been seen for two cycles. `floor[app]`: the variance
    /// (ns²) every node's latency estimate carries beside its own ([`IMBALANCE`]).
    pub fn weights(&self, threads: &BTreeMap<AppId, Vec<f64>>, delta: &[f64], floor: &BTreeMap<AppId, f64>) -> Pace {
        let est = self
            .apps
            .iter()
            .filter_map(|(&app, (nodes, tr))| {
                let f = floor.get(&app).copied().unwrap_or(0.0);
                let e: Option<Vec<(f64, f64)>> = (0..tr.len())
                    .map(|s| {
                        if !nodes.contains(&s) {
                            return Some((0.0, 0.0));
                        }
                        let t = tr[s];
                        // Unbiased variance of weighted cycles, over their effective number.
                        let var = t.m2 / (t.w - t.w2 / t.w).max(1e-12);
                        let n_eff = t.w * t.w / t.w2.max(1e-12);
                        (t.cycles >= 2).then(|| (t.mean, var / n_eff + f))
                    })
                    .collect();
                Some((app, e?))
            })
            .collect();
        Pace::new(threads, &est, delta)
    }
}

/// Per program, the weight of an access-time saving on each source node (none: all 1).
#[derive(Clone, Debug, Default)]
pub struct Pace {
    by_app: BTreeMap<AppId, Vec<f64>>,
}

impl Pace {
    /// `threads[app][s]`: the program's threads on node s; `est[app][s]`: the estimated mean
    /// latency of its accesses from node s and its variance; `delta[s]`: the change of node
    /// s's mean latency (ns) that the cycle's moves are predicted to bring.
    pub fn new(threads: &BTreeMap<AppId, Vec<f64>>, est: &BTreeMap<AppId, Vec<(f64, f64)>>, delta: &[f64]) -> Self {
        let mut by_app = BTreeMap::new();
        for (&app, thr) in threads {
            let Some(e) = est.get(&app).filter(|e| e.len() == thr.len()) else { continue };
            let nodes: Vec<usize> = (0..thr.len()).filter(|&s| thr[s] > 0.0).collect();
            let est: Vec<(f64, f64)> = nodes.iter().map(|&s| e[s]).collect();
            if nodes.len() < 2 {
                continue;
            }
            // Midpoints of PATH_STEPS equal steps from now (t = 0) to after the moves (t = 1).
            let mut p = vec![0.0; nodes.len()];
            for k in 0..PATH_STEPS {
                let t = (k as f64 + 0.5) / PATH_STEPS as f64;
                let at: Vec<(f64, f64)> = nodes
                    .iter()
                    .zip(&est)
                    .map(|(&s, &(m, v))| (m + t * delta.get(s).copied().unwrap_or(0.0), v))
                    .collect();
                for (acc, x) in p.iter_mut().zip(slowest_probabilities(&at)) {
                    *acc += x / PATH_STEPS as f64;
                }
            }
            let total: f64 = nodes.iter().map(|&s| thr[s]).sum();
            let mut w = vec![1.0; thr.len()];
            for (i, &s) in nodes.iter().enumerate() {
                w[s] = total / thr[s] * p[i];
            }
            by_app.insert(app, w);
        }
        Pace { by_app }
    }

    /// The weights of `app`'s savings by source node (`None`: all 1).
    pub fn of(&self, app: AppId) -> Option<&[f64]> {
        self.by_app.get(&app).map(|v| v.as_slice())
    }

    /// Mean latency of a chunk's accesses (ns) for its source shares and page shares, each
    /// source node's weighted by `w` (all 1 when `None`).
    pub fn weighted_latency(w: Option<&[f64]>, lat: &[Vec<f64>], src: &[f64], pages: &[f64]) -> f64 {
        let mut sum = 0.0;
        for (i, si) in src.iter().enumerate().filter(|x| *x.1 > 0.0) {
            let k = w.and_then(|w| w.get(i)).copied().unwrap_or(1.0);
            for (j, pj) in pages.iter().enumerate().filter(|x| *x.1 > 0.0) {
                sum += k * si * pj * lat[i][j];
            }
        }
        sum
    }
}

/// Probability that each estimate (mean, squared standard error) is the largest: the product
/// of its pairwise probabilities of exceeding each other one (normal approximation),
/// normalised to sum to 1.
fn slowest_probabilities(est: &[(f64, f64)]) -> Vec<f64> {
    let raw: Vec<f64> = est
        .iter()
        .enumerate()
        .map(|(i, &(m, v))| {
            est.iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, &(m2, v2))| {
                    let sd = (v + v2).sqrt();
                    if sd > 0.0 {
                        normal_cdf((m - m2) / sd)
                    } else if m > m2 {
                        1.0
                    } else if m < m2 {
                        0.0
                    } else {
                        0.5
                    }
                })
                .product()
        })
        .collect();
    let t: f64 = raw.iter().sum();
    if t > 0.0 {
        raw.iter().map(|x| x / t).collect()
    } else {
        vec![1.0 / est.len() as f64; est.len()]
    }
}

/// The weight of a loss that falls on one thread of a program's `n` threads, whose time per
/// access it raises by the share `r`: `n` times the probability that this thread then sets the
/// program's pace, averaged along the way from no loss to all of it (as the node weights are).
/// Every thread's time carries the [`IMBALANCE`] spread; with the others alike, the thread
/// slowed by `d` spreads is the slowest with probability `P(d) = integral of phi(x) Phi(x +
/// d)^(n - 1) dx` (1 / n for no loss). So the weight is 1 for no loss (each thread sets the
/// pace alike, the plain mean) and near `n` for a loss well above the spread (the whole program
/// waits for that thread at every barrier). A cycle prices hundreds of moves, so `P` is
/// tabulated once per thread count: at every `d` from 0 to [`LossWeights::D_MAX`] spreads, with
/// its running integral, and the average along the way to a loss of `D` spreads is the
/// integral of `P` from 0 to `D`, over `D`.
#[derive(Clone, Debug)]
pub struct LossWeights {
    n: f64,
    /// `cum[k]`: the integral of `P` from 0 to `k * STEP` spreads.
    cum: Vec<f64>,
}

impl LossWeights {
    /// Spreads between the table's points, and the last point (where the slowed thread is the
    /// slowest for sure, for any thread count this side of a million).
    const STEP: f64 = 0.05;
    const D_MAX: f64 = 10.0;

    /// The table for a program of `n` threads.
    pub fn new(n: f64) -> Self {
        if n <= 1.0 || !n.is_finite() {
            return LossWeights { n: 1.0, cum: vec![0.0] };
        }
        // P(d) by the midpoint rule over +-6 standard deviations.
        const POINTS: usize = 60;
        const SPAN: f64 = 6.0;
        let h = 2.0 * SPAN / POINTS as f64;
        let xs: Vec<(f64, f64)> = (0..POINTS)
            .map(|i| {
                let x = -SPAN + (i as f64 + 0.5) * h;
                (x, (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt() * h)
            })
            .collect();
        let p = |d: f64| -> f64 {
            xs.iter().map(|&(x, w)| w * ((n - 1.0) * normal_cdf(x + d).max(1e-300).ln()).exp()).sum::<f64>().min(1.0)
        };
        let k_max = (Self::D_MAX / Self::STEP).round() as usize;
        let mut cum = Vec::with_capacity(k_max + 1);
        let (mut acc, mut prev) = (0.0, p(0.0));
        cum.push(0.0);
        for k in 1..=k_max {
            let next = p(k as f64 * Self::STEP);
            acc += 0.5 * (prev + next) * Self::STEP;
            cum.push(acc);
            prev = next;
        }
        LossWeights { n, cum }
    }

    /// The weight of a loss of the share `r` of one thread's time.
    pub fn weight(&self, r: f64) -> f64 {
        if self.n <= 1.0 || r <= 0.0 || !r.is_finite() {
            return 1.0;
        }
        let d = r / IMBALANCE;
        let last = self.cum.len() - 1;
        let f = if d >= last as f64 * Self::STEP {
            // Beyond the table the thread is the slowest for sure.
            self.cum[last] + (d - last as f64 * Self::STEP)
        } else {
            let x = d / Self::STEP;
            let k = x.floor() as usize;
            self.cum[k] + (x - k as f64) * (self.cum[k + 1] - self.cum[k])
        };
        (self.n * f / d).clamp(1.0, self.n)
    }
}

/// Standard normal distribution function (Abramowitz and Stegun 7.1.26, error under 1.5e-7).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One cycle of a program on two nodes: 400 latency samples on each, spread 40 ns.
    fn two_nodes(app: AppId, a: f64, b: f64) -> BTreeMap<AppId, Vec<LatencyStats>> {
        BTreeMap::from([(app, vec![stats(a, 40.0, 400), stats(b, 40.0, 400)])])
    }

    fn stats(mean: f64, sd: f64, n: usize) -> LatencyStats {
        let mut s = LatencyStats::default();
        for i in 0..n {
            s.add(mean + if i % 2 == 0 { sd } else { -sd });
        }
        s
    }

    #[test]
    fn the_slower_node_carries_the_weight_and_a_balanced_program_keeps_the_mean() {
        let app: AppId = 0;
        let thr = BTreeMap::from([(app, vec![8.0, 8.0, 0.0])]);
        let lat = |a: f64, b: f64| BTreeMap::from([(app, vec![(a, 4.0), (b, 4.0), (0.0, 0.0)])]);
        let p = Pace::new(&thr, &lat(100.0, 160.0), &[0.0; 3]);
        let w = p.of(app).unwrap();
        assert!(w[1] > 1.99 && w[0] < 0.01, "{w:?}");
        assert_eq!(w[2], 1.0);
        let even = Pace::new(&thr, &lat(120.0, 120.0), &[0.0; 3]);
        assert!(even.of(app).unwrap()[..2].iter().all(|x| (x - 1.0).abs() < 1e-9));
        // Means apart by less than their noise: both nodes may be the slowest.
        let close = Pace::new(&thr, &lat(120.0, 121.0), &[0.0; 3]);
        let w = close.of(app).unwrap();
        assert!(w[0] > 0.3 && w[1] > 1.0 && w[1] < 1.7, "{w:?}");
        // Spreading a chunk used evenly by both nodes from node 0 over both: the mean latency
        // is unchanged, the paced one drops.
        let l = vec![vec![100.0, 160.0, 0.0], vec![160.0, 100.0, 0.0], vec![0.0; 3]];
        let src = [0.5, 0.5, 0.0];
        let (from, to) = ([1.0, 0.0, 0.0], [0.5, 0.5, 0.0]);
        let plain = |p: &[f64]| Pace::weighted_latency(None, &l, &src, p);
        assert!((plain(&from) - plain(&to)).abs() < 1e-9);
        let w = p.of(app);
        assert!(Pace::weighted_latency(w, &l, &src, &from) > Pace::weighted_latency(w, &l, &src, &to) + 10.0);
    }

    #[test]
    fn moves_that_reach_balance_are_credited_as_the_slowest_node_gains() {
        let app: AppId = 0;
        let thr = BTreeMap::from([(app, vec![8.0, 8.0])]);
        let lat = BTreeMap::from([(app, vec![(100.0, 4.0), (160.0, 4.0)])]);
        // Spreading shared data evenly: node 0 slows by 30 ns, node 1 gains 30 ns; node 1 is
        // the slowest all the way, so its gain counts for all threads.
        let w = Pace::new(&thr, &lat, &[30.0, -30.0]).of(app).unwrap().to_vec();
        assert!(w[1] > 1.9 && w[0] < 0.1, "{w:?}");
        // Moves that overshoot (node 1 ends 40 ns faster than node 0): each node is the
        // slowest for part of the way.
        let w = Pace::new(&thr, &lat, &[50.0, -50.0]).of(app).unwrap().to_vec();
        assert!(w[0] > 0.3 && w[1] > 1.0 && w[1] < 1.7, "{w:?}");
    }

    #[test]
    fn a_node_is_known_slowest_after_two_steady_cycles_and_not_when_the_nodes_take_turns() {
        let app: AppId = 0;
        let thr = BTreeMap::from([(app, vec![8.0, 8.0])]);
        let cycle = |a: f64, b: f64| two_nodes(app, a, b);
        let mut steady = PaceTracker::default();
        steady.observe(&thr, &cycle(100.0, 160.0));
        assert!(steady.weights(&thr, &[0.0; 2], &BTreeMap::new()).of(app).is_none());
        steady.observe(&thr, &cycle(101.0, 159.0));
        let w = steady.weights(&thr, &[0.0; 2], &BTreeMap::new()).of(app).unwrap().to_vec();
        assert!(w[1] > 1.9, "{w:?}");
        let mut turns = PaceTracker::default();
        for k in 0..8 {
            let (a, b) = if k % 2 == 0 { (100.0, 160.0) } else { (160.0, 100.0) };
            turns.observe(&thr, &cycle(a, b));
        }
        // Neither is known to be the slowest; the last cycles count more, so node 0, the slower
        // in the last cycle, leans ahead (1.52 against 0.48 after eight cycles).
        let w = turns.weights(&thr, &[0.0; 2], &BTreeMap::new()).of(app).unwrap().to_vec();
        assert!(w.iter().all(|x| (x - 1.0).abs() < 0.6) && w[0] > w[1], "{w:?}");
        // Nodes 2 ns apart where the threads' own spread is 15 ns: either may be the slowest.
        let mut near = PaceTracker::default();
        near.observe(&thr, &cycle(100.0, 102.0));
        near.observe(&thr, &cycle(100.0, 102.0));
        let w = near.weights(&thr, &[0.0; 2], &BTreeMap::from([(app, 225.0)])).of(app).unwrap().to_vec();
        assert!(w.iter().all(|x| (x - 1.0).abs() < 0.2), "{w:?}");
        // ptb's moves are predicted to make node 1 59 ns faster: the nodes are level.
        steady.shift(&[0.0, -59.0]);
        let w = steady.weights(&thr, &[0.0; 2], &BTreeMap::new()).of(app).unwrap().to_vec();
        assert!(w.iter().all(|x| (x - 1.0).abs() < 0.5), "{w:?}");
        steady.shift(&[0.0, 59.0]);
        // Threads moved to other nodes: the history starts over.
        let moved = BTreeMap::from([(app, vec![16.0, 0.0])]);
        steady.observe(&moved, &cycle(100.0, 0.0));
        assert!(steady.weights(&moved, &[0.0; 2], &BTreeMap::new()).of(app).is_none());
    }

    #[test]
    fn a_loss_on_one_thread_weighs_as_much_as_it_holds_the_program_back() {
        let table = LossWeights::new(64.0);
        let w64 = |r: f64| table.weight(r);
        // No loss: the plain mean; a loss within the threads' 5% spread: a little more; a loss
        // of half its time: most of the way to the whole program waiting for it (the average
        // along the way counts the first part of the loss, within the spread, at less).
        assert!((w64(0.0) - 1.0).abs() < 1e-9);
        let small = w64(0.01);
        assert!(small > 1.0 && small < 2.0, "{small}");
        let big = w64(0.5);
        assert!(big > 45.0 && big <= 64.0, "{big}");
        // Rising with the loss, and one thread alone always sets its own pace.
        assert!(w64(0.05) > small && w64(0.05) < big);
        assert_eq!(LossWeights::new(1.0).weight(0.2), 1.0);
    }

    #[test]
    fn a_hot_spot_relieved_stops_setting_the_pace() {
        // Node 0's threads waited on a hot controller for three cycles, then ran at 120 ns for
        // four, while node 1's stayed at 150 ns: node 1 now sets the pace. (Each cycle counted
        // alike, node 0's mean was still 197 ns, and ptb kept crediting its threads' savings.)
        let app: AppId = 0;
        let thr = BTreeMap::from([(app, vec![8.0, 8.0])]);
        let cycle = |a: f64, b: f64| two_nodes(app, a, b);
        let mut t = PaceTracker::default();
        for k in 0..7 {
            t.observe(&thr, &cycle(if k < 3 { 300.0 } else { 120.0 }, 150.0));
        }
        let w = t.weights(&thr, &[0.0; 2], &BTreeMap::new()).of(app).unwrap().to_vec();
        assert!(w[1] > 1.5 && w[0] < 0.5, "{w:?}");
    }

    #[test]
    fn the_normal_distribution_function_is_right_where_it_matters() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((normal_cdf(-2.0) - 0.022_750_1).abs() < 1e-6);
    }
}

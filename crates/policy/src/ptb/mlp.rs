//! How many memory accesses a program's threads overlap (memory-level parallelism), from its
//! samples.
//!
//! Problem: the closed model ([`super::closed`]) and the pace weights ([`super::pace`]) turn a
//! latency into time with `c + L / mlp`, `mlp` the accesses a thread keeps in flight. Programs
//! differ by four times and more: pointer chasing (canneal's netlist walk) overlaps one or two
//! misses, streaming loops six to ten. One figure for all of them misprices every move: with 6
//! for a program that overlaps 1.5, a latency saving is worth a quarter of what it is, and
//! canneal with 16 threads on the 8-node Opteron kept 79% of what the oracle gained (mlp 1.5
//! set by hand: all of it).
//!
//! Approach: the samples measure both sides of `T_s = c + L_s / mlp` for each node `s` a
//! program has threads on: `T_s` the thread-time per access (`n_s / X_s`, `X_s` the sampled
//! access rate of its `n_s` threads) and `L_s` the mean latency the samples report. Within one
//! cycle `c` is the same on every node (the same code on an even share of the work), so the
//! slope of `T` over `L` across the program's nodes is `1 / mlp`, whatever `c` is. Each cycle
//! with two or more such nodes gives a slope and its variance: the Poisson noise of the rates,
//! the few percent by which threads given equal work differ beside their latencies, and the
//! sampling noise of the latencies, over the spread of the nodes' latencies. A program whose
//! nodes see the same latency says nothing and keeps the prior. The estimate is the median of
//! the slopes since the program's phase last changed, each weighted by its precision (a cycle
//! broken by threads moving in it, a rate off by four, cannot pull it), averaged with the prior
//! (`1 / mlp` of the `mlp` parameter, as uncertain as its own value) by their precisions, the
//! slopes' summed.
//!
//! Threads that finish a barrier phase early and wait look slower than they are, which flattens
//! the slope: a program whose threads meet at a barrier every few milliseconds (NPB CG with 64
//! threads on the 8-node Opteron) runs every node at its slowest node's pace, and its slope is
//! near 0 whatever its overlap (taken at face value, the estimate went to the bound and cg fell
//! from 6.22x to 5.95x of first touch, simulated). So a slope can show that a program overlaps
//! less than the prior, never more: each cycle's slope is held at or above the prior's and the
//! estimate between the prior's and 1 (at least one access in flight while a thread waits on
//! memory), i.e. the `mlp` parameter is an upper bound. The estimate is computed once a cycle,
//! when the cycle's slope is folded in.

use ptb_profile::AppId;
use std::collections::BTreeMap;

/// Per node, what one cycle's samples say about one program's threads there.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeCycle {
    /// The program's threads on the node.
    pub threads: f64,
    /// Samples of their accesses (each stands for `period` accesses).
    pub samples: f64,
    /// Latency samples among them: count, sum and sum of squares (ns).
    pub lat_n: f64,
    pub lat_sum: f64,
    pub lat_sq: f64,
}

impl NodeCycle {
    pub fn add_latency(&mut self, ns: f64) {
        self.lat_n += 1.0;
        self.lat_sum += ns;
        self.lat_sq += ns * ns;
    }
}

/// Slopes kept per program (the oldest are dropped beyond it).
const HISTORY: usize = 256;
/// The largest slope `1 / mlp`: one access in flight.
const B_MAX: f64 = 1.0;

/// Per program, the slopes of the cycles since its phase last changed, and the prior.
#[derive(Clone, Debug)]
pub struct MlpTracker {
    prior_b: f64,
    apps: BTreeMap<AppId, Vec<(f64, f64)>>,
    /// Each program's estimate `1 / mlp`, computed once a cycle (read for every candidate).
    estimates: BTreeMap<AppId, f64>,
}

impl MlpTracker {
    /// A tracker whose prior is `mlp` (the parameter).
    pub fn new(mlp: f64) -> Self {
        MlpTracker { prior_b: (1.0 / mlp.max(1.0)).min(B_MAX), apps: BTreeMap::new(), estimates: BTreeMap::new() }
    }

    /// Forget every program's slopes (a new phase).
    pub fn reset(&mut self) {
        self.apps.clear();
        self.estimates.clear();
    }

    /// Fold in one cycle: `cycle[app][s]` what its samples say of node s; one sample stands for
    /// `per_sample_s` accesses per second (the period over the cycle's length).
    pub fn observe(&mut self, cycle: &BTreeMap<AppId, Vec<NodeCycle>>, per_sample_s: f64) {
        self.apps.retain(|a, _| cycle.contains_key(a));
        if per_sample_s <= 0.0 || !per_sample_s.is_finite() {
            return;
        }
        for (&app, nodes) in cycle {
            if let Some((b, w)) = slope(nodes, per_sample_s, self.estimate_b(app)) {
                let h = self.apps.entry(app).or_default();
                if h.len() >= HISTORY {
                    h.remove(0);
                }
                // Barrier waits only flatten a slope: one below the prior's says nothing more.
                h.push((b.max(self.prior_b), w));
            }
        }
        self.estimates = self.apps.keys().map(|&a| (a, self.estimate(a))).collect();
    }

    /// The current estimate of `1 / mlp` (the prior's for a program without slopes).
    fn estimate_b(&self, app: AppId) -> f64 {
        self.estimates.get(&app).copied().unwrap_or(self.prior_b)
    }

    /// The program's estimated memory-level parallelism (the prior until its samples say more).
    pub fn mlp(&self, app: AppId) -> f64 {
        1.0 / self.estimate_b(app)
    }

    /// The prior's memory-level parallelism (the parameter).
    pub fn prior(&self) -> f64 {
        1.0 / self.prior_b
    }

    /// The prior and the weighted median of the program's slopes, weighted by their precisions
    /// (computed from the slopes kept).
    fn estimate(&self, app: AppId) -> f64 {
        let w0 = 1.0 / (self.prior_b * self.prior_b);
        let mut v: Vec<(f64, f64)> = self.apps.get(&app).cloned().unwrap_or_default();
        v.retain(|(b, w)| b.is_finite() && w.is_finite() && *w > 0.0);
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let wd: f64 = v.iter().map(|x| x.1).sum();
        let mut acc = 0.0;
        let Some(median) = v.iter().find(|(_, w)| {
            acc += w;
            acc >= wd / 2.0
        }) else {
            return self.prior_b;
        };
        ((w0 * self.prior_b + wd * median.0) / (w0 + wd)).clamp(self.prior_b, B_MAX)
    }
}

/// One cycle's least-squares slope of `T` over `L` across the nodes with enough latency
/// samples, and its precision (1 / variance): each node's `T` carries the Poisson noise of its
/// sample count and the spread of thread times through a phase ([`super::pace::IMBALANCE`]),
/// its `L` the noise of its latency samples (priced at `b`, the current estimate).
fn slope(nodes: &[NodeCycle], per_sample_s: f64, b: f64) -> Option<(f64, f64)> {
    // (L, T, variance of T + b^2 variance of L) per node.
    let pts: Vec<(f64, f64, f64)> = nodes
        .iter()
        .filter(|n| n.threads > 0.0 && n.samples > 0.0 && n.lat_n >= super::pace::MIN_LATENCY_SAMPLES)
        .map(|n| {
            let l = n.lat_sum / n.lat_n;
            let var_l = ((n.lat_sq / n.lat_n - l * l).max(0.0)) / n.lat_n;
            let t = n.threads * 1e9 / (n.samples * per_sample_s);
            let spread = super::pace::IMBALANCE * t;
            (l, t, t * t / n.samples + spread * spread + b * b * var_l)
        })
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let k = pts.len() as f64;
    let (ml, mt) = (pts.iter().map(|p| p.0).sum::<f64>() / k, pts.iter().map(|p| p.1).sum::<f64>() / k);
    let sxx: f64 = pts.iter().map(|p| (p.0 - ml).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - ml) * (p.1 - mt)).sum();
    let noise = pts.iter().map(|p| p.2).sum::<f64>() / k;
    if sxx <= 0.0 || noise <= 0.0 {
        return None;
    }
    let s = (sxy / sxx, sxx / noise);
    (s.0.is_finite() && s.1.is_finite()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node whose `threads` threads each take `c + l * b` ns per access, sampled with `samples`
    /// samples of `period` accesses over one second, every latency sample `l`.
    fn node(threads: f64, c: f64, l: f64, b: f64, period: f64) -> NodeCycle {
        let rate = threads * 1e9 / (c + l * b);
        let samples = (rate / period).round();
        let mut n = NodeCycle { threads, samples, ..Default::default() };
        for i in 0..samples as usize {
            n.add_latency(l + if i % 2 == 0 { 5.0 } else { -5.0 });
        }
        n
    }

    #[test]
    fn nodes_at_different_latencies_reveal_the_overlap() {
        let mut t = MlpTracker::new(6.0);
        for cycle in 0..30 {
            let mut c = BTreeMap::new();
            let b = 1.0 / 1.5;
            c.insert(0, vec![node(8.0, 20.0, 110.0 + cycle as f64, b, 1e4), node(8.0, 20.0, 140.0, b, 1e4)]);
            t.observe(&c, 1e4);
        }
        // The prior weighs as much as a few cycles.
        assert!((t.mlp(0) - 1.5).abs() < 0.25, "{}", t.mlp(0));
        // Another program is unknown: the prior.
        assert_eq!(t.mlp(1), 6.0);
        t.reset();
        assert_eq!(t.mlp(0), 6.0);
    }

    #[test]
    fn nodes_at_one_latency_keep_the_prior() {
        let mut t = MlpTracker::new(6.0);
        for _ in 0..20 {
            let mut c = BTreeMap::new();
            let b = 1.0 / 2.0;
            c.insert(0, vec![node(8.0, 20.0, 110.0, b, 1e4), node(8.0, 20.0, 110.0, b, 1e4)]);
            t.observe(&c, 1e4);
        }
        assert_eq!(t.mlp(0), 6.0);
    }

    #[test]
    fn a_flat_slope_never_raises_the_overlap_above_the_prior() {
        // Barrier-bound: every node runs at the slowest node's pace whatever its latency.
        let mut t = MlpTracker::new(6.0);
        for _ in 0..20 {
            let mut c = BTreeMap::new();
            let mut near = node(8.0, 20.0, 100.0, 0.0, 1e4);
            near.samples = node(8.0, 20.0, 180.0, 1.0 / 6.0, 1e4).samples;
            c.insert(0, vec![near, node(8.0, 20.0, 180.0, 1.0 / 6.0, 1e4)]);
            t.observe(&c, 1e4);
        }
        assert_eq!(t.mlp(0), 6.0);
    }

    #[test]
    fn a_broken_cycle_does_not_pull_the_estimate() {
        let mut t = MlpTracker::new(6.0);
        let b = 1.0 / 3.0;
        for cycle in 0..9 {
            let mut c = BTreeMap::new();
            let mut far = node(8.0, 30.0, 160.0, b, 1e4);
            if cycle == 4 {
                // Threads moved in the cycle: the far node's rate is a quarter of its own.
                far.samples /= 4.0;
            }
            c.insert(0, vec![node(8.0, 30.0, 100.0, b, 1e4), far]);
            t.observe(&c, 1e4);
        }
        assert!((t.mlp(0) - 3.0).abs() < 0.3, "{}", t.mlp(0));
    }

    proptest::proptest! {
        #[test]
        fn the_estimate_is_always_within_bounds(
            raw in proptest::collection::vec((0.0f64..64.0, 0.0f64..1e6, 0.0f64..1e4, 0.0f64..1e7, 0.0f64..1e10), 0..8),
            per in 0.0f64..1e9,
            prior in 1.0f64..1000.0,
        ) {
            let mut t = MlpTracker::new(prior);
            let nodes: Vec<NodeCycle> = raw
                .iter()
                .map(|&(threads, samples, lat_n, lat_sum, lat_sq)| NodeCycle { threads, samples, lat_n, lat_sum, lat_sq })
                .collect();
            let mut c = BTreeMap::new();
            c.insert(0, nodes);
            t.observe(&c, per);
            let m = t.mlp(0);
            proptest::prop_assert!(m.is_finite() && (1.0..=prior * (1.0 + 1e-9)).contains(&m), "{m}");
        }
    }
}

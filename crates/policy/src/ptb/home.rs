//! How much of a private chunk goes to its home node.
//!
//! Problem: a private chunk is fastest on its accessors' node only while that node's
//! controller and the local path of its CPUs have headroom. When every thread of a node
//! streams its own data, the local path saturates while the paths to other nodes idle;
//! serving part of each chunk from the other nodes adds their bandwidth (ptb.md: moving part
//! of the pages off a saturated home node raises bandwidth until roughly 60-70% of the
//! memory is remote).
//!
//! Approach: every cycle a closed model of the threads ([`Closed`]) predicts, for each
//! candidate home share, the program's memory throughput once every private chunk sits at that
//! share (the rest on the other nodes where the home node's threads reach the most bandwidth,
//! [`super::spill`]). The predictions are averaged over cycles with the evidence's decay
//! ([`HomeShare`]); the share changes only when another one is predicted faster, on average,
//! by more than [`SWITCH_GAIN`]: a change re-moves part of every private chunk, and a
//! program's phases may want different shares.

use super::chunks::Target;
use super::closed::Closed;
use super::model::{target_shares, LoadModel, Weights};
use ptb_topology::NodeIdx;

/// Home shares tried, in percent of a chunk's pages.
pub const SHARES: [u8; 5] = [100, 85, 70, 55, 40];

/// Relative improvement of the predicted throughput needed to change the share.
pub const SWITCH_GAIN: f64 = 0.10;

/// A private chunk's traffic and where its pages are now.
pub struct Private {
    pub app: ptb_profile::AppId,
    pub node: NodeIdx,
    /// Accesses per second.
    pub a: f64,
    /// Shares of the accesses by issuing node.
    pub src: Vec<f64>,
    /// Shares of the chunk's pages by node now.
    pub from: Vec<f64>,
}

/// Per-source access shares once every private chunk sits at `pct` of its home node.
pub fn shape(load: &LoadModel, private: &[Private], pct: u8, weights: &Weights) -> Vec<Vec<f64>> {
    let nn = load.acc.len();
    let (mut acc, mut path) = (load.acc.clone(), load.path.clone());
    for c in private {
        let to = target_shares(Target::Node(c.node, pct), weights.of(c.app), &weights.spill, nn);
        LoadModel::shift(&mut acc, &mut path, c.a, &c.src, &c.from, &to);
    }
    path.iter()
        .map(|r| {
            let t: f64 = r.iter().sum();
            r.iter().map(|x| if t > 0.0 { x / t } else { 0.0 }).collect()
        })
        .collect()
}

/// The predicted throughput of each share tried, relative to the share in force (1: the
/// same), in the order of [`SHARES`].
pub fn predict(
    closed: &Closed,
    load: &LoadModel,
    private: &[Private],
    weights: &Weights,
    current: u8,
) -> Option<Vec<(u8, f64)>> {
    if private.is_empty() {
        return None;
    }
    let x = |p: u8| closed.throughput(&shape(load, private, p, weights));
    let tried: Vec<(u8, f64)> = SHARES.iter().map(|&p| (p, x(p))).collect();
    // The share in force is one of SHARES (it only ever changes to one of them).
    let now = tried.iter().find(|t| t.0 == current).map_or_else(|| x(current), |t| t.1);
    (now > 0.0).then(|| tried.into_iter().map(|(p, t)| (p, t / now)).collect())
}

/// The home share in force, and the evidence for the others.
#[derive(Clone, Debug, PartialEq)]
pub struct HomeShare {
    pub pct: u8,
    /// Per share of [`SHARES`]: decayed mean of the log of its predicted throughput relative
    /// to the share in force.
    score: [f64; SHARES.len()],
    /// Cycles that contributed since the share in force was taken.
    seen: u32,
    /// Cycles with predictions, in all.
    pub updates: u32,
}

impl Default for HomeShare {
    fn default() -> Self {
        HomeShare { pct: 100, score: [0.0; SHARES.len()], seen: 0, updates: 0 }
    }
}

impl HomeShare {
    /// Add one cycle's predictions (`None`: nothing to predict this cycle); switch to the share
    /// whose decayed mean gain exceeds [`SWITCH_GAIN`] once at least `confirm` cycles have
    /// contributed. Programs whose phases want different shares (NPB FT's private FFTs and
    /// all-to-all transposes) make the per-cycle predictions swing; a change re-moves part of
    /// every private chunk, so only a gain that holds on average is taken.
    pub fn update(&mut self, predicted: Option<&[(u8, f64)]>, decay: f64, confirm: u32) -> u8 {
        let Some(pred) = predicted else { return self.pct };
        for (sc, (_, r)) in self.score.iter_mut().zip(pred) {
            *sc = decay * *sc + (1.0 - decay) * r.max(1e-9).ln();
        }
        self.seen += 1;
        self.updates = self.updates.saturating_add(1);
        if self.seen < confirm.max(1) {
            return self.pct;
        }
        let (best, gain) =
            SHARES.iter().zip(&self.score).fold((self.pct, 0.0), |b, (&p, &g)| if g > b.1 { (p, g) } else { b });
        if best != self.pct && gain > (1.0 + SWITCH_GAIN).ln() {
            self.pct = best;
            self.score = [0.0; SHARES.len()];
            self.seen = 0;
        }
        self.pct
    }
}

/// Small integer weights (largest 50) that put `shares` of a range on each node, for a
/// weighted range move.
pub fn weights_of(shares: &[f64]) -> Vec<(NodeIdx, u32)> {
    let max = shares.iter().cloned().fold(0.0, f64::max);
    if max <= 0.0 {
        return vec![];
    }
    shares
        .iter()
        .enumerate()
        .map(|(i, &s)| (NodeIdx::from_ix(i), (s / max * 50.0).round() as u32))
        .filter(|x| x.1 > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pred(gain_at_55: f64) -> Vec<(u8, f64)> {
        SHARES.iter().map(|&p| (p, if p == 55 { gain_at_55 } else { 1.0 })).collect()
    }

    #[test]
    fn a_share_is_taken_only_when_its_gain_holds_over_cycles() {
        let mut h = HomeShare::default();
        // Fewer cycles than `confirm`: no change, however large the gain.
        assert_eq!(h.update(Some(&pred(1.5)), 0.5, 3), 100);
        assert_eq!(h.update(Some(&pred(1.5)), 0.5, 3), 100);
        // Cycles with nothing to predict neither count nor reset.
        assert_eq!(h.update(None, 0.5, 3), 100);
        assert_eq!(h.update(Some(&pred(1.5)), 0.5, 3), 55);
        // Swinging predictions (a phase for, a phase against) average out below the bar.
        let mut h = HomeShare::default();
        for i in 0..12 {
            let g = if i % 2 == 0 { 1.25 } else { 0.8 };
            assert_eq!(h.update(Some(&pred(g)), 0.5, 3), 100, "cycle {i}");
        }
        // A small steady gain is not worth re-moving every private chunk.
        let mut h = HomeShare::default();
        for _ in 0..12 {
            assert_eq!(h.update(Some(&pred(1.05)), 0.5, 3), 100);
        }
    }

    #[test]
    fn weights_put_each_node_its_share_of_a_range() {
        let w = weights_of(&[0.6, 0.2, 0.2, 0.0]);
        assert_eq!(w, vec![(NodeIdx(0), 50), (NodeIdx(1), 17), (NodeIdx(2), 17)]);
        assert!(weights_of(&[0.0, 0.0]).is_empty());
        // Home share 55 over 4 nodes, no spill preference: 55% at home, 15% on each other node.
        let w4 = [(NodeIdx(0), 3), (NodeIdx(1), 1), (NodeIdx(2), 1), (NodeIdx(3), 1)];
        let sh = target_shares(Target::Node(NodeIdx(2), 55), &w4, &[], 4);
        assert!((sh[2] - 0.55).abs() < 1e-9 && (sh[0] - 0.15).abs() < 1e-9, "{sh:?}");
        assert!((sh.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // With node 2's spill row: the 45% away in its shares, over the nodes of the weights.
        let mut spill = vec![vec![]; 4];
        spill[2] = vec![0.6, 0.0, 0.0, 0.4];
        let sh = target_shares(Target::Node(NodeIdx(2), 55), &w4, &spill, 4);
        assert!((sh[0] - 0.27).abs() < 1e-9 && sh[1] == 0.0 && (sh[3] - 0.18).abs() < 1e-9, "{sh:?}");
        // A home alone in its weights keeps the whole chunk.
        assert_eq!(
            target_shares(Target::Node(NodeIdx(1), 55), &[(NodeIdx(1), 1)], &spill, 4),
            vec![0.0, 1.0, 0.0, 0.0]
        );
        assert_eq!(
            target_shares(Target::Node(NodeIdx(1), 100), &[(NodeIdx(0), 1), (NodeIdx(1), 1)], &[], 2),
            vec![0.0, 1.0]
        );
    }
}

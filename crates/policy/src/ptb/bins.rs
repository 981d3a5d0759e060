//! The cycle's traffic over time: the loads of each part of the cycle, from the samples' times.
//!
//! Problem: the load model predicts queueing from a cycle's mean traffic. A program whose
//! accesses move over its data within a cycle (NPB LU's pipelined sweeps: at any moment its
//! threads work on a window of consecutive planes) loads the nodes holding the current part
//! of its data far above their mean while the others idle. A placement that keeps each part
//! whole on one node (planes at their owners' nodes) then queues at whichever node the window
//! is on, which the mean cannot show: the mean load is even over the nodes. A resource's
//! queueing delay grows faster than its load, so its mean delay is that of its loads over time,
//! not that of its mean load.
//!
//! Approach: the cycle is cut into equal time bins, and each sample counts in its bin's traffic
//! (source node, memory node), as it does in the cycle's. A move is priced with the loads of
//! each bin, weighted by the share of the chunk's own samples in that bin: a chunk accessed
//! while its node is busy saves more by leaving it, and costs more by moving onto a node that is
//! busy at the same time. The bins need samples: a bin's count is Poisson-distributed, so at
//! least [`SAMPLES_PER_BIN`] a bin on average keep its relative noise under 1/8; with fewer
//! samples than two bins need the cycle is one bin (the mean), as before. A queue's delay grows
//! faster than its load, so noise in the bins' loads alone would make every move off a node look
//! better than at the mean: a (source, memory) pair's counts keep their bins only where they vary
//! more than Poisson noise (a variance equal to the mean count) would one time in 100, and then
//! shrunk towards their mean by the share of their variance that noise explains. Traffic that
//! keeps its level keeps the mean; traffic that comes and goes keeps its bins; a cycle whose
//! traffic all keeps its level is priced on the mean alone.

use super::chunks::{ChunkState, ChunkTable};
use crate::snapshot::Snapshot;

/// Most bins a cycle is cut into.
pub const MAX_BINS: usize = 8;
/// Samples a bin needs on average (relative noise of its count at most 1 / 8).
pub const SAMPLES_PER_BIN: usize = 64;
/// The 99th percentile of the chi-squared distribution with k degrees of freedom (index k, 1..7):
/// the dispersion `(n - 1) var / mean` of n Poisson counts exceeds it by chance one time in 100.
const CHI2_99: [f64; MAX_BINS] = [0.0, 6.635, 9.210, 11.345, 13.277, 15.086, 16.812, 18.475];

/// How a cycle's samples fall into bins: `n` equal bins over the span of their times.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub n: usize,
    lo: u64,
    span: u64,
}

impl Clock {
    /// The bins of a cycle's `count` samples (those from CPUs of the machine), taken from `lo`
    /// to `hi` ns: `None` with too few samples for two bins, or one time for all.
    pub fn of(count: usize, lo: u64, hi: u64) -> Option<Clock> {
        let n = (count / SAMPLES_PER_BIN).min(MAX_BINS);
        (n >= 2 && hi > lo).then(|| Clock { n, lo, span: hi - lo })
    }

    /// The bin of a sample taken at `t` (ns).
    pub fn bin(&self, t: u64) -> usize {
        let x = t.saturating_sub(self.lo) as f64 / self.span as f64;
        ((x * self.n as f64) as usize).min(self.n - 1)
    }
}

/// The cycle's traffic per time bin.
pub struct Bins {
    /// Per bin, accesses per second from threads on node s (row) to memory on node d.
    pub path: Vec<Vec<Vec<f64>>>,
    /// Per bin, accesses per second served by each node's memory.
    pub acc: Vec<Vec<f64>>,
}

impl Bins {
    /// The latest cycle's traffic per bin as `table` ingested it ([`ChunkTable::ingest`]: each
    /// sample from its CPU's node to its page's node), at `period` events per sample; `None`
    /// where the cycle had too few samples for two bins.
    pub fn of(table: &ChunkTable, snap: &Snapshot, period: u64) -> Option<Bins> {
        let mut path = table.cycle_bins.clone()?;
        let n = path.len();
        let nn = path.first().map_or(0, |p| p.len());
        if n < 2 {
            return None;
        }
        // Each bin is 1/n of the cycle: its samples are n times the rate of the cycle's.
        let w = n as f64 * period as f64 / snap.cycle.as_secs_f64().max(1e-6);
        // Each (source, memory) pair's counts over the bins: where they vary more than Poisson
        // noise would (dispersion test at the 1% level), shrunk towards their mean by the share
        // of their variance that noise explains; else their mean. Then as rates.
        let mut varies = false;
        for sd in 0..nn * nn {
            let (src, dst) = (sd / nn, sd % nn);
            let mean = (0..n).map(|b| path[b][src][dst]).sum::<f64>() / n as f64;
            let var = (0..n).map(|b| (path[b][src][dst] - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let keep =
                if mean > 0.0 && (n - 1) as f64 * var / mean > CHI2_99[n - 1] { (var - mean) / var } else { 0.0 };
            varies |= keep > 0.0;
            for p in path.iter_mut() {
                p[src][dst] = w * (mean + keep * (p[src][dst] - mean));
            }
        }
        // Traffic steady over the cycle: its mean is all there is (and the mean prices alone).
        if !varies {
            return None;
        }
        let acc = path.iter().map(|p| (0..nn).map(|d| p.iter().map(|r| r[d]).sum()).collect()).collect();
        Some(Bins { path, acc })
    }

    /// Number of bins.
    pub fn len(&self) -> usize {
        self.path.len()
    }

    /// The share of a chunk's samples of the latest cycle in each bin; even where it had none.
    pub fn shares(&self, c: Option<&ChunkState>) -> Vec<f64> {
        let n = self.len();
        let counts = c.map(|c| &c.bins[..n]).unwrap_or(&[]);
        let t: f64 = counts.iter().map(|&x| f64::from(x)).sum();
        if t > 0.0 {
            counts.iter().map(|&x| f64::from(x) / t).collect()
        } else {
            vec![1.0 / n as f64; n]
        }
    }
}

//! How densely `ptb` asks its source to sample, and what it lets that cost.
//!
//! Problem: `period` says one sample per N memory accesses, and a miss sampler (a last-level
//! miss event, IBS with a miss filter) delivers just that, one interrupt per sample. A sampler
//! of every op (IBS op without a miss filter: the Opteron, EPYC before Zen 4) interrupts on
//! every op it samples and keeps the memory accesses among them; the daemon thins its period so
//! that it costs no more interrupts than the miss sampler would at the period asked, and so
//! keeps only that share of the samples (cg: 2.45 memory accesses per 100 ops, 41 times fewer
//! samples). ptb with its miss period there fell from 1.84x to 1.34x of first touch on
//! opteron6272-8n (one seed, simulated, the preset's IBS op serving it), cg from 5.30x to 1.05x.
//!
//! Approach: the snapshot says what one kept sample stands for (`sampling_period`); over the
//! period ptb asked, that is the thinning `k` (1 for a miss sampler). To keep one sample per
//! `period` memory accesses ptb asks for `period / k`: the source then interrupts `k` times as
//! often as a miss sampler would, on a program whose memory accesses are `1 / k` of its ops.
//! What that may cost is the source's to hold: `ptb run` keeps every address sampler under
//! 20,000 interrupts a second per thread (and the simulator its model of IBS), so a program
//! that makes almost no memory accesses is not sampled op by op. A source that does not thin
//! gets exactly the period asked.

use crate::snapshot::Snapshot;
use crate::SamplingMode;

/// What the last cycle's samples said about the source.
#[derive(Clone, Copy, Debug)]
pub struct Density {
    /// What one kept sample stood for, over the period asked (at least 1).
    thinning: f64,
}

impl Default for Density {
    fn default() -> Self {
        Density { thinning: 1.0 }
    }
}

impl Density {
    /// Read a cycle's snapshot, taken while the source sampled at the period `asked`.
    pub fn observe(&mut self, snap: &Snapshot, asked: u64) {
        let SamplingMode::Address { .. } = snap.sampling else { return };
        if asked == 0 || snap.sampling_period == 0 {
            return;
        }
        self.thinning =
            (snap.sampling_period as f64 / asked as f64).clamp(1.0, ptb_profile::thinning::MAX_THINNING as f64);
    }

    /// The period to ask for one sample per `period` memory accesses.
    pub fn period_for(&self, period: u64) -> u64 {
        ((period as f64 / self.thinning).round() as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_sampler_gets_the_period_asked_a_thinned_one_a_shorter_one() {
        assert_eq!(Density::default().period_for(8192), 8192);
        assert_eq!(Density { thinning: 40.0 }.period_for(8192), 205);
        assert_eq!(Density { thinning: 1e5 }.period_for(8192), 1);
    }
}

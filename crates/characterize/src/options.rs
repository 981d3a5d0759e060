//! How much to measure: buffer sizes, sample durations and repeats, sized from the LLC.
//!
//! Budget (full run): each bandwidth sample is 40 ms (+10 ms warm-up) and each latency sample
//! 20 ms, with 3 repeats. An 8-node machine with 8 groups of 8 CPUs is 64 pairs x (about 5
//! sweep steps + 2 repeats) x 50 ms + 64 x 3 x 25 ms latency + 8 x 3 contended runs: roughly
//! 30 s of sampling plus buffer set-up, inside the one-minute target. `--quick` samples for
//! 8 ms once per step.

use serde::Serialize;
use std::time::Duration;

#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// Bytes per triad array (A, B, C) for one group at a time; rounded up to a power of two.
    pub array_bytes: u64,
    /// Bytes per triad array when every group runs at once (each group's share must still
    /// exceed its LLC).
    pub contended_array_bytes: u64,
    /// Bytes of the pointer-chase cycle.
    pub chase_bytes: u64,
    /// Length of one timed bandwidth sample (a warm-up of a quarter of it comes first).
    #[serde(with = "millis")]
    pub bw_time: Duration,
    /// Length of one timed latency sample.
    #[serde(with = "millis")]
    pub lat_time: Duration,
    /// Samples per entry; the entry is their median and its spread their range.
    pub repeats: usize,
    /// Most threads per group in the sweep (a group uses min(its CPUs, this)).
    pub max_threads: usize,
    /// Relative gain below which one more thread counts as "no better" (plateau).
    pub plateau_gain: f64,
    /// Seed of the pointer-chase shuffle.
    pub seed: u64,
}

mod millis {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }
}

impl Options {
    /// The full measurement for a machine with `groups` CPU groups and last-level cache `llc`.
    pub fn full(llc: u64, groups: usize) -> Self {
        Options {
            array_bytes: 4 * llc,
            contended_array_bytes: (2 * llc * groups as u64).div_ceil(3),
            chase_bytes: 4 * llc,
            bw_time: Duration::from_millis(40),
            lat_time: Duration::from_millis(20),
            repeats: 3,
            max_threads: usize::MAX,
            plateau_gain: 0.03,
            seed: 0x5eed_b0a7,
        }
    }

    /// A much shorter run: buffers just above the LLC, one short sample per step.
    pub fn quick(llc: u64) -> Self {
        Options {
            array_bytes: llc,
            contended_array_bytes: llc,
            chase_bytes: 2 * llc,
            bw_time: Duration::from_millis(8),
            lat_time: Duration::from_millis(5),
            repeats: 1,
            ..Options::full(llc, 1)
        }
    }

    /// Tiny buffers and samples for tests: checks the machinery, not the machine.
    pub fn tiny() -> Self {
        Options {
            array_bytes: 256 << 10,
            contended_array_bytes: 256 << 10,
            chase_bytes: 256 << 10,
            bw_time: Duration::from_millis(2),
            lat_time: Duration::from_millis(1),
            repeats: 2,
            max_threads: 2,
            plateau_gain: 0.03,
            seed: 1,
        }
    }

    /// Doubles per array, one group at a time (a power of two).
    pub fn array_len(&self) -> usize {
        ((self.array_bytes / 8).max(1024) as usize).next_power_of_two()
    }

    /// Doubles per array with every group active (a power of two, at least [`Self::array_len`]).
    pub fn contended_len(&self) -> usize {
        ((self.contended_array_bytes / 8) as usize).next_power_of_two().max(self.array_len())
    }

    /// One line for notes: what was measured with what.
    pub fn describe(&self) -> String {
        format!(
            "arrays {} MiB (contended {} MiB) x3, chase {} MiB, samples {} ms bandwidth / {} ms latency, {} repeat(s)",
            (self.array_len() * 8) >> 20,
            (self.contended_len() * 8) >> 20,
            self.chase_bytes >> 20,
            self.bw_time.as_millis(),
            self.lat_time.as_millis(),
            self.repeats
        )
    }
}

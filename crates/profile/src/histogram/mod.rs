//! Per-cycle access histograms: how often each thread touched each page.
//!
//! Problem: every sampling policy (and the daemon) turns a stream of [`Sample`]s into "thread t
//! accessed page p A_t[p] times this cycle", and the published PTB did so with a fixed-size,
//! collision-prone table whose behaviour we must be able to reproduce.
//!
//! Approach: one trait, [`Histogram`], with two implementations:
//!
//! ```text
//!   Sample ──record──▶ ClassicTable   (fixed slots, per-CPU counters, overwrite on collision)
//!                  └─▶ ExactHistogram (sparse page -> [(tid, count)], exact)
//!   for_each_page(|page, &[(tid, count)]|)  ──▶ policy;   per_node(counts, node_of) ──▶ b_n[p]
//! ```
//!
//! Both iterate pages in a deterministic order (identical samples give identical iteration), and
//! both count per cycle: [`Histogram::clear`] starts the next cycle.

mod classic;
mod exact;

pub use classic::ClassicTable;
pub use exact::ExactHistogram;

use crate::sample::{PageKey, Sample, Tid};
use std::fmt;
use std::str::FromStr;

/// Counters of one cycle of a histogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistStats {
    /// Samples recorded since the last clear.
    pub samples: u64,
    /// Samples that landed in a slot holding another page (classic table only; 0 for exact).
    pub collisions: u64,
    /// Distinct pages (or occupied slots) held now.
    pub pages: u64,
}

/// A callback receiving one page and its per-thread counts `(tid, count)`, tids ascending.
pub type PageVisitor<'a> = dyn FnMut(PageKey, &[(Tid, u32)]) + 'a;

/// A per-cycle histogram of sampled accesses per page and thread.
pub trait Histogram: Send {
    /// Count one sample.
    fn record(&mut self, s: &Sample);
    /// Count many samples.
    fn record_all(&mut self, samples: &[Sample]) {
        for s in samples {
            self.record(s);
        }
    }
    /// Forget everything (start of a new cycle).
    fn clear(&mut self);
    /// Counters of the current cycle.
    fn stats(&self) -> HistStats;
    /// Visit every page with its per-thread counts (tids ascending, counts > 0), in a
    /// deterministic order that depends only on the samples recorded since the last clear.
    fn for_each_page(&self, f: &mut PageVisitor<'_>);
}

/// Add the counts of one page into per-node totals: `out[node_of(tid)] += count`. Threads
/// for which `node_of` returns `None` (or a node beyond `out`) are ignored.
pub fn per_node(counts: &[(Tid, u32)], node_of: impl Fn(Tid) -> Option<usize>, out: &mut [u64]) {
    for &(t, c) in counts {
        if let Some(slot) = node_of(t).and_then(|n| out.get_mut(n)) {
            *slot += u64::from(c);
        }
    }
}

/// Which histogram a policy uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HistogramKind {
    /// The published fixed-size table (collisions and all).
    Classic,
    /// The exact sparse map.
    Exact,
}

impl FromStr for HistogramKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "classic" => Ok(HistogramKind::Classic),
            "exact" => Ok(HistogramKind::Exact),
            other => Err(format!("unknown histogram `{other}` (known: classic, exact)")),
        }
    }
}

impl fmt::Display for HistogramKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HistogramKind::Classic => "classic",
            HistogramKind::Exact => "exact",
        })
    }
}

/// Build a histogram. `slots` and `cpu_slots` (counters per slot: one per CPU id) only matter
/// for the classic table; `page_size` is a power of two.
pub fn build(kind: HistogramKind, slots: usize, cpu_slots: usize, page_size: u64) -> Box<dyn Histogram> {
    match kind {
        HistogramKind::Classic => Box::new(ClassicTable::new(slots, cpu_slots, page_size)),
        HistogramKind::Exact => Box::new(ExactHistogram::new(page_size)),
    }
}

/// A fast, deterministic hasher for page keys (Fx-style multiply-rotate). Std's SipHash is
/// DoS-resistant but several times slower, and samples are not attacker-chosen keys.
#[derive(Clone, Copy, Default)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Builds [`FxHasher`]s (for `HashMap<K, V, FxBuild>`).
pub type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::SampleKind;
    use proptest::prelude::*;
    use ptb_topology::CpuId;
    use std::collections::BTreeMap;

    pub(crate) fn sample(tid: Tid, cpu: u32, addr: u64) -> Sample {
        Sample {
            app: 1,
            tid,
            cpu: CpuId(cpu),
            addr,
            kind: SampleKind::Load,
            time_ns: 0,
            data_src: None,
            latency_ns: None,
            phys: None,
        }
    }

    fn dump(h: &dyn Histogram) -> Vec<(PageKey, Vec<(Tid, u32)>)> {
        let mut v = Vec::new();
        h.for_each_page(&mut |p, c| v.push((p, c.to_vec())));
        v
    }

    #[test]
    fn per_node_sums_by_node_and_ignores_unknown_threads() {
        let mut out = vec![0u64; 2];
        per_node(&[(1, 3), (2, 4), (3, 5), (9, 7)], |t| if t == 9 { None } else { Some((t % 2) as usize) }, &mut out);
        assert_eq!(out, vec![4, 8]);
    }

    #[test]
    fn kind_parses_and_refuses_unknown() {
        assert_eq!("classic".parse::<HistogramKind>().unwrap(), HistogramKind::Classic);
        assert_eq!(" exact".parse::<HistogramKind>().unwrap(), HistogramKind::Exact);
        assert!("fancy".parse::<HistogramKind>().unwrap_err().contains("classic, exact"));
    }

    proptest! {
        /// With one thread per CPU and no collisions, the classic table and the exact map agree,
        /// and both agree with a reference count.
        #[test]
        fn classic_matches_exact_without_collisions(raw in proptest::collection::vec((0u32..4, 0u64..64), 0..400)) {
            let samples: Vec<Sample> = raw.iter().map(|&(t, p)| sample(t + 10, t, p * 4096 + 17)).collect();
            let mut c = ClassicTable::new(1000, 4, 4096);
            let mut e = ExactHistogram::new(4096);
            c.record_all(&samples);
            e.record_all(&samples);
            let mut reference: BTreeMap<PageKey, BTreeMap<Tid, u32>> = BTreeMap::new();
            for s in &samples {
                *reference.entry(s.page(4096)).or_default().entry(s.tid).or_default() += 1;
            }
            let want: Vec<(PageKey, Vec<(Tid, u32)>)> =
                reference.into_iter().map(|(p, m)| (p, m.into_iter().collect())).collect();
            let mut got_c = dump(&c);
            got_c.sort();
            prop_assert_eq!(&dump(&e), &want);
            prop_assert_eq!(&got_c, &want);
            prop_assert_eq!(c.stats().collisions, 0);
            prop_assert_eq!(e.stats().samples, samples.len() as u64);
        }

        /// Whatever the collisions, the classic table never loses or invents a sample: the
        /// counts it reports add up to the samples recorded (per thread too, when each thread has
        /// its own CPU).
        #[test]
        fn classic_conserves_samples(raw in proptest::collection::vec((0u32..8, 0u64..5000), 0..600), slots in 1usize..50) {
            let samples: Vec<Sample> = raw.iter().map(|&(t, p)| sample(t, t, p * 4096)).collect();
            let mut c = ClassicTable::new(slots, 8, 4096);
            c.record_all(&samples);
            let mut per_thread = [0u64; 8];
            let mut total = 0u64;
            c.for_each_page(&mut |_, counts| {
                for &(t, n) in counts {
                    per_thread[t as usize] += u64::from(n);
                    total += u64::from(n);
                }
            });
            prop_assert_eq!(total, samples.len() as u64);
            for t in 0..8u32 {
                prop_assert_eq!(per_thread[t as usize], samples.iter().filter(|s| s.tid == t).count() as u64);
            }
            prop_assert!(c.stats().pages <= slots as u64);
            c.clear();
            prop_assert_eq!(c.stats(), HistStats::default());
            prop_assert!(dump(&c).is_empty());
        }
    }
}

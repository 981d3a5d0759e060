//! How an op sampler asked for memory accesses is thinned, and the cap on sample interrupts.
//!
//! Problem: `ptb run`'s perf sources and the simulator's model of them must open IBS op the
//! same way, or a policy's simulated figures would come from a sampler the daemon never runs.
//!
//! Approach: one rule, used by both. A sampler of every op that keeps only the memory accesses
//! among its samples (IBS op without a last-level-miss filter; Intel PEBS load latency with
//! precise stores, every retired store sampled and those that hit the L1 data cache dropped)
//! is programmed at the period asked divided by the share of its samples that are memory
//! accesses, so that it interrupts as often as a miss sampler at the period asked; no source
//! interrupts a thread more than
//! [`MAX_INTERRUPTS_PER_S`] times a second. What a sampler serves for a request is one rule
//! too ([`served`]).

use crate::SampledEvent;
use ptb_topology::AddressSampler;

/// Share of the sampled ops that are memory accesses before any has been seen: a memory-bound
/// program's few percent (the first measurement replaces it).
pub const KEPT_SHARE_PRIOR: f64 = 1.0 / 32.0;

/// Most thinning: the period asked times this at most.
pub const MAX_THINNING: u64 = 1 << 20;

/// Most sample interrupts a second per sampled thread, whatever a policy asks: about 2% of a
/// thread's time at a microsecond each, a fifth of the kernel's default
/// `perf_event_max_sample_rate` (100,000 a second per CPU, above which it throttles).
pub const MAX_INTERRUPTS_PER_S: f64 = 20_000.0;

/// The period to program for `asked`: thinned by `kept_share` (the share of the samples that
/// are memory accesses) where the source drops the others (`Some`), and never under
/// `min_period` ([`min_period`]).
pub fn period(asked: u64, kept_share: Option<f64>, min_period: u64) -> u64 {
    let q = match kept_share {
        None => asked,
        Some(share) => {
            let q = asked as f64 / share.clamp(1.0 / MAX_THINNING as f64, 1.0);
            (q.round() as u64).clamp(asked, asked.saturating_mul(MAX_THINNING))
        }
    };
    q.max(min_period)
}

/// The shortest period that keeps a thread counting `events_per_s` sampled events a second
/// under [`MAX_INTERRUPTS_PER_S`], or under a policy's own lower budget (`budget`, interrupts
/// a second per thread; at least one).
pub fn min_period(events_per_s: f64, budget: Option<f64>) -> u64 {
    let cap = budget.map_or(MAX_INTERRUPTS_PER_S, |b| b.clamp(1.0, MAX_INTERRUPTS_PER_S));
    (events_per_s / cap).ceil() as u64
}

/// What a hardware sampler delivers for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// What one kept sample stands for.
    pub event: SampledEvent,
    /// Op samples whose cache hits are dropped, at a period thinned by [`period`].
    pub thinned: bool,
}

/// What `sampler` delivers when a policy asks for `asked`, as `ptb run` opens it: IBS op counts
/// cycles where asked (or where it cannot count ops), ops where asked, and for memory accesses
/// (misses or slow loads) its last-level-miss filter or, without one, its op samples with the
/// cache hits dropped at a thinned period. PEBS load latency delivers slow loads; asked for
/// misses (loads and stores) where the CPU has precise stores, its slow loads and its store
/// samples, the stores that hit the L1 data cache dropped, both counters at one period thinned
/// by the share of their samples kept (a store that missed L1 counts as a memory access: the
/// hardware says no more of it); else slow loads whatever is asked.
pub fn served(sampler: AddressSampler, asked: SampledEvent) -> Served {
    let plain = |event| Served { event, thinned: false };
    match sampler {
        AddressSampler::IbsOp { op_count: false, .. } => plain(SampledEvent::Cycles),
        AddressSampler::IbsOp { miss_filter, .. } => match asked {
            SampledEvent::Cycles | SampledEvent::Ops => plain(asked),
            SampledEvent::Misses | SampledEvent::SlowLoads => {
                Served { event: SampledEvent::Misses, thinned: !miss_filter }
            }
        },
        AddressSampler::PebsLoads { stores: true } if asked == SampledEvent::Misses => {
            Served { event: SampledEvent::Misses, thinned: true }
        }
        AddressSampler::PebsLoads { .. } => plain(SampledEvent::SlowLoads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sampler_serves_what_it_has() {
        use SampledEvent::*;
        let ibs = |op_count, miss_filter| AddressSampler::IbsOp { op_count, miss_filter };
        assert_eq!(served(ibs(true, false), Misses), Served { event: Misses, thinned: true });
        assert_eq!(served(ibs(true, false), SlowLoads), Served { event: Misses, thinned: true });
        assert_eq!(served(ibs(true, true), Misses), Served { event: Misses, thinned: false });
        assert_eq!(served(ibs(true, false), Ops), Served { event: Ops, thinned: false });
        assert_eq!(served(ibs(true, false), Cycles), Served { event: Cycles, thinned: false });
        assert_eq!(served(ibs(false, true), Misses), Served { event: Cycles, thinned: false });
        for asked in [Cycles, Ops, SlowLoads, Misses] {
            let pebs = AddressSampler::PebsLoads { stores: false };
            assert_eq!(served(pebs, asked), Served { event: SlowLoads, thinned: false });
        }
        // With precise stores, misses are slow loads and stores, thinned; the rest slow loads.
        let pebs = AddressSampler::PebsLoads { stores: true };
        assert_eq!(served(pebs, Misses), Served { event: Misses, thinned: true });
        for asked in [Cycles, Ops, SlowLoads] {
            assert_eq!(served(pebs, asked), Served { event: SlowLoads, thinned: false });
        }
    }

    #[test]
    fn thinned_by_the_kept_share_within_its_bounds_and_the_cap() {
        assert_eq!(period(8192, None, 0), 8192);
        assert_eq!(period(8192, Some(0.05), 0), 8192 * 20);
        assert_eq!(period(8192, Some(2.0), 0), 8192, "a share above 1 is 1");
        assert_eq!(period(8192, Some(0.0), 0), 8192 << 20);
        assert_eq!(period(8192, None, 40_960), 40_960);
        assert_eq!(min_period(8192.0 * 100_000.0, None), 8192 * 5);
        assert_eq!(min_period(8192.0 * 100_000.0, Some(5_000.0)), 8192 * 20, "a lower budget");
        assert_eq!(min_period(8192.0 * 100_000.0, Some(1e9)), 8192 * 5, "never above the cap");
    }
}

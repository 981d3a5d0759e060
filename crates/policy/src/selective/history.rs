//! The history table of selective migration: regions seen in past epochs, with occurrence
//! counters and ageing.
//!
//! A region seen for the first time is recorded *inactive*; each later epoch in which a region
//! with the same logical address (application and first page) is seen again increments its
//! counter (it is then a migration candidate); an entry not seen for `max_age` epochs is
//! dropped.
//!
//! The paper keeps "a hash table keyed by the region's logical address": a region recurs when
//! the same start comes back, not when some fragment overlaps an old one. Data touched at
//! random (or streamed) yields regions whose inferred starts shift from epoch to epoch, so it
//! does not recur; an object whose sampled extent is stable does.

use ptb_profile::{AppId, InferredRegion};
use std::collections::BTreeMap;

/// One remembered region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub npages: u64,
    /// Epochs in which the region was seen (1 = seen once: inactive).
    pub count: u32,
    pub last_epoch: u64,
}

/// Regions keyed by (application, first page).
#[derive(Clone, Debug, Default)]
pub struct History {
    map: BTreeMap<(AppId, u64), Entry>,
}

impl History {
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Record the regions of one epoch and return each one's occurrence count (in input order).
    /// A region whose first page is a remembered entry's continues it (counting this epoch
    /// once); its extent is the larger of the two.
    pub fn observe(&mut self, epoch: u64, regions: &[InferredRegion]) -> Vec<u32> {
        let mut counts = Vec::with_capacity(regions.len());
        for r in regions {
            let e = self.map.entry((r.app, r.start_vpn)).or_insert(Entry { npages: 0, count: 0, last_epoch: 0 });
            if e.count == 0 || e.last_epoch < epoch {
                e.count = e.count.saturating_add(1);
            }
            e.npages = e.npages.max(r.npages);
            e.last_epoch = epoch;
            counts.push(e.count);
        }
        counts
    }

    /// Drop entries not seen for more than `max_age` epochs.
    pub fn age(&mut self, epoch: u64, max_age: u64) {
        self.map.retain(|_, e| epoch.saturating_sub(e.last_epoch) <= max_age);
    }

    /// The entry of the region starting at page `start` of `app`.
    pub fn get(&self, app: AppId, start: u64) -> Option<Entry> {
        self.map.get(&(app, start)).copied()
    }

    /// The entry holding page `vpn` of `app` with the highest count (entries of different
    /// starts may overlap): its first page and the entry. Looks at the `LOOKBACK` entries
    /// starting at or before `vpn`.
    pub fn entry_at(&self, app: AppId, vpn: u64) -> Option<(u64, Entry)> {
        self.map
            .range((app, 0)..=(app, vpn))
            .rev()
            .take(LOOKBACK)
            .filter(|((_, s), e)| vpn < s + e.npages)
            .max_by_key(|((_, s), e)| (e.count, std::cmp::Reverse(*s)))
            .map(|(k, e)| (k.1, *e))
    }

    /// The occurrence count of the best entry holding page `vpn` of `app` (0: unknown).
    pub fn count_at(&self, app: AppId, vpn: u64) -> u32 {
        self.entry_at(app, vpn).map_or(0, |(_, e)| e.count)
    }
}

/// How many entries before a page [`History::entry_at`] looks at (bounded work per lookup).
const LOOKBACK: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(start: u64, n: u64) -> InferredRegion {
        InferredRegion { app: 1, start_vpn: start, npages: n, sampled_pages: 1 }
    }

    #[test]
    fn counts_recurrences_of_a_logical_address_once_per_epoch_and_ages_out() {
        let mut h = History::default();
        assert_eq!(h.observe(1, &[reg(10, 5), reg(100, 1)]), vec![1, 1]);
        // Epoch 2: the object at page 10 again, longer; a shifted fragment (12) is new.
        assert_eq!(h.observe(2, &[reg(10, 8), reg(30, 1)]), vec![2, 1]);
        assert_eq!(h.observe(2, &[reg(12, 1)]), vec![1]);
        assert_eq!(h.count_at(1, 17), 2, "the entry spans the larger extent");
        assert_eq!(h.count_at(1, 100), 1);
        assert_eq!(h.count_at(1, 50), 0);
        assert_eq!(h.count_at(2, 10), 0);
        h.age(5, 2);
        assert_eq!(h.count_at(1, 100), 0, "unseen since epoch 1: aged out");
        assert_eq!(h.count_at(1, 10), 0, "last seen epoch 2, age 3 > 2");
        assert!(h.is_empty());
    }
}

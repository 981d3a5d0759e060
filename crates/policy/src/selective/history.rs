//! The history table of selective migration: regions seen in past epochs, with occurrence
//! counters and ageing.
//!
//! A region seen for the first time is recorded *inactive*; each later epoch in which an
//! overlapping region is seen again increments its counter (it is then a migration
//! candidate); an entry not seen for `max_age` epochs is dropped.

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

    /// Keys of the entries overlapping pages `start..end` of `app` (entries are disjoint).
    fn overlaps(&self, app: AppId, start: u64, end: u64) -> Vec<(AppId, u64)> {
        self.map
            .range((app, 0)..(app, end))
            .rev()
            .take_while(|((_, s), e)| s + e.npages > start)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Record the regions of one epoch and return each one's occurrence count (in input order).
    /// A region that overlaps remembered ones continues them: they merge into one entry over
    /// the union of the extents (fragments of one object join), counting this epoch once.
    pub fn observe(&mut self, epoch: u64, regions: &[InferredRegion]) -> Vec<u32> {
        let mut counts = Vec::with_capacity(regions.len());
        for r in regions {
            let (mut start, mut end) = (r.start_vpn, r.end_vpn());
            let mut count = 1u32;
            let mut keys = self.overlaps(r.app, start, end);
            while !keys.is_empty() {
                for k in keys {
                    let e = self.map.remove(&k).expect("key just listed");
                    start = start.min(k.1);
                    end = end.max(k.1 + e.npages);
                    let this_epoch = u32::from(e.last_epoch < epoch);
                    count = count.max(e.count.saturating_add(this_epoch));
                }
                keys = self.overlaps(r.app, start, end);
            }
            self.map.insert((r.app, start), Entry { npages: end - start, count, last_epoch: epoch });
            counts.push(count);
        }
        counts
    }

    /// Drop entries not seen for more than `max_age` epochs.
    pub fn age(&mut self, epoch: u64, max_age: u64) {
        self.map.retain(|_, e| epoch.saturating_sub(e.last_epoch) <= max_age);
    }

    /// The entry holding page `vpn` of `app`: its first page and the entry.
    pub fn entry_at(&self, app: AppId, vpn: u64) -> Option<(u64, Entry)> {
        self.map
            .range(..=(app, vpn))
            .next_back()
            .filter(|((a, s), e)| *a == app && vpn < s + e.npages)
            .map(|(k, e)| (k.1, *e))
    }

    /// The occurrence count of the entry holding page `vpn` of `app` (0: unknown).
    pub fn count_at(&self, app: AppId, vpn: u64) -> u32 {
        self.map
            .range(..=(app, vpn))
            .next_back()
            .filter(|((a, s), e)| *a == app && vpn < s + e.npages)
            .map_or(0, |(_, e)| e.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(start: u64, n: u64) -> InferredRegion {
        InferredRegion { app: 1, start_vpn: start, npages: n, sampled_pages: 1 }
    }

    #[test]
    fn counts_recurrences_once_per_epoch_and_ages_out() {
        let mut h = History::default();
        assert_eq!(h.observe(1, &[reg(10, 5), reg(100, 1)]), vec![1, 1]);
        // Epoch 2: a shifted fragment of the first object, seen twice; the second not seen.
        assert_eq!(h.observe(2, &[reg(12, 6), reg(13, 1)]), vec![2, 2]);
        assert_eq!(h.count_at(1, 17), 2);
        assert_eq!(h.count_at(1, 100), 1);
        assert_eq!(h.count_at(1, 50), 0);
        assert_eq!(h.count_at(2, 12), 0);
        h.age(5, 2);
        assert_eq!(h.count_at(1, 100), 0, "unseen since epoch 1: aged out");
        assert_eq!(h.count_at(1, 12), 0, "last seen epoch 2, age 3 > 2");
        assert!(h.is_empty());
    }

    #[test]
    fn a_region_bridging_two_entries_merges_them() {
        let mut h = History::default();
        h.observe(1, &[reg(0, 4), reg(10, 4)]);
        h.observe(2, &[reg(2, 10)]);
        assert_eq!(h.len(), 1);
        assert_eq!(h.count_at(1, 13), 2);
    }
}

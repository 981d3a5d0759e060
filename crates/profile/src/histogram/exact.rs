//! The exact sparse histogram: page -> [(thread, count)].
//!
//! Problem: the classic table merges pages that collide; policies that want the true per-page,
//! per-thread counts (and the comparison with the classic table) need an exact map whose cost
//! grows with the pages actually sampled, not with a fixed table.
//!
//! Approach: a hash map (fast Fx-style hash) from page to a short vector of (tid, count) kept
//! sorted by tid (pages are shared by few threads, so a sorted small vector beats a nested map).
//! The first two threads of a page are stored inline (no allocation), so recording and
//! clearing millions of pages does not go through the allocator per page.
//! Iteration sorts the pages by key, so its order depends only on the samples recorded.

use super::{FxBuild, HistStats, Histogram, PageVisitor};
use crate::sample::{PageKey, Sample, Tid};
use smallvec::SmallVec;
use std::collections::HashMap;

/// The threads of one page: up to two inline.
type Row = SmallVec<[(Tid, u32); 2]>;

/// Exact per-page, per-thread sample counts.
#[derive(Clone, Debug, Default)]
pub struct ExactHistogram {
    page_shift: u32,
    map: HashMap<PageKey, Row, FxBuild>,
    samples: u64,
}

impl ExactHistogram {
    /// An empty histogram for pages of `page_size` bytes (a power of two).
    pub fn new(page_size: u64) -> Self {
        ExactHistogram { page_shift: page_size.max(1).trailing_zeros(), map: HashMap::default(), samples: 0 }
    }

    /// The counts of one page (tids ascending), if it was sampled.
    pub fn page(&self, p: PageKey) -> Option<&[(Tid, u32)]> {
        self.map.get(&p).map(|r| r.as_slice())
    }
}

impl Histogram for ExactHistogram {
    fn record(&mut self, s: &Sample) {
        let page = PageKey { app: s.app, vpn: s.addr >> self.page_shift };
        let row = self.map.entry(page).or_default();
        match row.binary_search_by_key(&s.tid, |x| x.0) {
            Ok(i) => row[i].1 = row[i].1.saturating_add(1),
            Err(i) => row.insert(i, (s.tid, 1)),
        }
        self.samples += 1;
    }

    fn clear(&mut self) {
        self.map.clear();
        self.samples = 0;
    }

    fn stats(&self) -> HistStats {
        HistStats { samples: self.samples, collisions: 0, pages: self.map.len() as u64 }
    }

    /// Pages in ascending key order.
    fn for_each_page(&self, f: &mut PageVisitor<'_>) {
        // Keys copied next to the row pointers: the sort never chases a pointer.
        let mut pages: Vec<(PageKey, &Row)> = self.map.iter().map(|(k, r)| (*k, r)).collect();
        pages.sort_unstable_by_key(|x| x.0);
        for (p, row) in pages {
            f(p, row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn counts_exactly_in_page_order() {
        let mut h = ExactHistogram::new(4096);
        for (t, a) in [(2, 5 * 4096), (1, 5 * 4096 + 100), (2, 5 * 4096), (3, 4096), (1, 1 << 40)] {
            h.record(&sample(t, 0, a));
        }
        let mut v = Vec::new();
        h.for_each_page(&mut |p, c| v.push((p.vpn, c.to_vec())));
        assert_eq!(v, vec![(1, vec![(3, 1)]), (5, vec![(1, 1), (2, 2)]), ((1 << 40) / 4096, vec![(1, 1)])]);
        assert_eq!(h.stats(), HistStats { samples: 5, collisions: 0, pages: 3 });
        assert_eq!(h.page(PageKey { app: 1, vpn: 5 }), Some(&[(1, 1), (2, 2)][..]));
        h.clear();
        assert_eq!(h.stats().pages, 0);
    }
}

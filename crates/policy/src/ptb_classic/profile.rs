//! The cycle's histogram flattened for the two phases: threads as dense indices, pages as rows
//! of (thread index, count) cells.

use ptb_profile::histogram::FxBuild;
use ptb_profile::{Histogram, PageKey, Tid};
use std::collections::HashMap;

/// One sampled page: its key, its cells `cells[start..end]`, and its total sampled accesses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PageRow {
    pub key: PageKey,
    pub start: u32,
    pub end: u32,
    pub total: u64,
}

/// Per-page, per-thread counts over dense thread indices (the snapshot's thread order).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Profile {
    pub pages: Vec<PageRow>,
    /// (thread index, count), grouped by page, thread indices ascending within a page.
    pub cells: Vec<(u32, u32)>,
}

impl Profile {
    /// Flatten a histogram. Counts of threads not in `tids` (exited, or not managed) are dropped.
    pub fn build(h: &dyn Histogram, tids: &[Tid]) -> Profile {
        let ix: HashMap<Tid, u32, FxBuild> = tids.iter().enumerate().map(|(i, t)| (*t, i as u32)).collect();
        let mut p = Profile::default();
        h.for_each_page(&mut |key, counts| {
            let start = p.cells.len();
            let mut total = 0u64;
            for &(t, c) in counts {
                if let Some(&i) = ix.get(&t) {
                    p.cells.push((i, c));
                    total += u64::from(c);
                }
            }
            if total == 0 {
                return;
            }
            p.cells[start..].sort_unstable_by_key(|x| x.0);
            p.pages.push(PageRow { key, start: start as u32, end: p.cells.len() as u32, total });
        });
        p
    }

    /// The cells of one page.
    pub fn cells(&self, r: &PageRow) -> &[(u32, u32)] {
        &self.cells[r.start as usize..r.end as usize]
    }
}

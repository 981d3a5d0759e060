//! Region inference: turn sampled page addresses into contiguous memory regions.
//!
//! Problem: sampling sees only every n-th access, so one large memory object shows up as a
//! scatter of sampled pages with holes between them. Treating each sampled page on its own
//! makes a policy move fragments of an object and miss the pages next to them.
//!
//! Approach (selective migration, Yook and Egger): per address-space segment, compute the
//! *average stride* between sampled pages, `(largest - smallest) / number of sampled pages`.
//! Walk the sorted pages; while the gap to the next sampled page is smaller than the average
//! stride (or the pages are adjacent), the run is one region and the unsampled pages in
//! between are filled in. A larger gap starts a new region. The unit is one page.
//!
//! ```text
//! sampled:  x.x..x.x............x..x.x      avg stride ~ 4
//! regions:  [xxxxxxx]            [xxxxx]
//! ```
//!
//! Output regions are sorted by (app, start), disjoint, and together cover every sampled
//! page; each begins and ends on a sampled page.

use crate::sample::{AppId, PageKey};

/// A contiguous run of pages inferred from samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InferredRegion {
    pub app: AppId,
    /// First page (virtual page number).
    pub start_vpn: u64,
    /// Number of pages, sampled or filled in (>= 1).
    pub npages: u64,
    /// Distinct sampled pages inside the region.
    pub sampled_pages: u64,
}

impl InferredRegion {
    /// One past the last page.
    pub fn end_vpn(&self) -> u64 {
        self.start_vpn + self.npages
    }
    /// True when page `vpn` of `app` is inside the region.
    pub fn contains(&self, p: PageKey) -> bool {
        p.app == self.app && p.vpn >= self.start_vpn && p.vpn < self.end_vpn()
    }
}

/// Infer regions from the sampled pages of one segment of one application. `vpns` may be
/// unsorted and hold duplicates.
pub fn infer_segment(app: AppId, vpns: &[u64]) -> Vec<InferredRegion> {
    let mut v: Vec<u64> = vpns.to_vec();
    v.sort_unstable();
    v.dedup();
    let (Some(&first), Some(&last)) = (v.first(), v.last()) else {
        return Vec::new();
    };
    let stride = (last - first) as f64 / v.len() as f64;
    let mut out = Vec::new();
    let mut start = first;
    let mut prev = first;
    let mut count = 1u64;
    for &p in &v[1..] {
        let gap = p - prev;
        if gap == 1 || (gap as f64) < stride {
            count += 1;
        } else {
            out.push(InferredRegion { app, start_vpn: start, npages: prev - start + 1, sampled_pages: count });
            start = p;
            count = 1;
        }
        prev = p;
    }
    out.push(InferredRegion { app, start_vpn: start, npages: prev - start + 1, sampled_pages: count });
    out
}

/// Infer regions from sampled pages, with `segments` as boundaries that no region crosses
/// (e.g. the mappings of each application: `(app, start_vpn, npages)`; segments of one
/// application must not overlap). Pages outside every segment are grouped by the gap between
/// segments they fall in, so no region crosses a segment edge either. The result is sorted
/// by (app, start).
pub fn infer_regions(pages: &[PageKey], segments: &[(AppId, u64, u64)]) -> Vec<InferredRegion> {
    let mut segs: Vec<(AppId, u64, u64)> = segments.iter().copied().filter(|s| s.2 > 0).collect();
    segs.sort_unstable();
    // Key: (app, number of segments starting at or before the page, inside that segment?).
    // Segments and the gaps between them partition each address space, so buckets with
    // different keys cover disjoint address ranges.
    let mut buckets: std::collections::BTreeMap<(AppId, usize, bool), Vec<u64>> = Default::default();
    for p in pages {
        let i = segs.partition_point(|s| (s.0, s.1) <= (p.app, p.vpn));
        let inside = i.checked_sub(1).map(|j| segs[j]).is_some_and(|s| s.0 == p.app && p.vpn - s.1 < s.2);
        buckets.entry((p.app, i, inside)).or_default().push(p.vpn);
    }
    let mut out: Vec<InferredRegion> = buckets.iter().flat_map(|((app, _, _), v)| infer_segment(*app, v)).collect();
    out.sort_unstable_by_key(|r| (r.app, r.start_vpn));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pk(app: AppId, vpn: u64) -> PageKey {
        PageKey { app, vpn }
    }

    #[test]
    fn fills_gaps_smaller_than_the_average_stride() {
        // 6 samples over 0..=100: stride 100/6 ~ 16.7. Gaps 2,3,2 join; 83 splits; 3,7 join... no:
        // pages 0,2,5,7 | 90,93,100 -> gaps 2,3,2,83,3,7.
        let r = infer_segment(1, &[7, 0, 2, 5, 90, 93, 100, 5]);
        assert_eq!(
            r,
            vec![
                InferredRegion { app: 1, start_vpn: 0, npages: 8, sampled_pages: 4 },
                InferredRegion { app: 1, start_vpn: 90, npages: 11, sampled_pages: 3 },
            ]
        );
        assert!(infer_segment(1, &[]).is_empty());
        assert_eq!(
            infer_segment(2, &[42]),
            vec![InferredRegion { app: 2, start_vpn: 42, npages: 1, sampled_pages: 1 }]
        );
    }

    #[test]
    fn segments_are_boundaries() {
        // Two adjacent mappings 0..10 and 10..20: pages 8, 9 | 10, 11 stay apart.
        let pages = [pk(1, 8), pk(1, 9), pk(1, 10), pk(1, 11)];
        let r = infer_regions(&pages, &[(1, 0, 10), (1, 10, 10)]);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[0].start_vpn, r[0].npages), (8, 2));
        assert_eq!((r[1].start_vpn, r[1].npages), (10, 2));
        // Without segments they are one region.
        assert_eq!(infer_regions(&pages, &[]).len(), 1);
        // Apps never mix.
        assert_eq!(infer_regions(&[pk(1, 1), pk(2, 2)], &[]).len(), 2);
    }

    proptest! {
        #[test]
        fn regions_sorted_disjoint_and_cover_every_sampled_page(
            raw in proptest::collection::vec((0u32..3, 0u64..5000), 0..300),
            segs in proptest::collection::vec((0u32..3, 0u64..5000, 0u64..800), 0..6),
        ) {
            let pages: Vec<PageKey> = raw.iter().map(|&(a, v)| pk(a, v)).collect();
            // Segments of one app must not overlap (mappings don't): drop overlapping ones.
            let mut clean: Vec<(AppId, u64, u64)> = Vec::new();
            for s in segs {
                if !clean.iter().any(|c| c.0 == s.0 && c.1 < s.1 + s.2 && s.1 < c.1 + c.2) {
                    clean.push(s);
                }
            }
            let r = infer_regions(&pages, &clean);
            for w in r.windows(2) {
                prop_assert!((w[0].app, w[0].end_vpn()) <= (w[1].app, w[1].start_vpn), "overlap/unsorted {:?}", w);
            }
            for p in &pages {
                prop_assert_eq!(r.iter().filter(|x| x.contains(*p)).count(), 1, "page {:?} not covered once", p);
            }
            let total: u64 = r.iter().map(|x| x.sampled_pages).sum();
            let mut uniq = pages.clone();
            uniq.sort_unstable();
            uniq.dedup();
            prop_assert_eq!(total, uniq.len() as u64);
            for x in &r {
                prop_assert!(x.npages >= 1);
                prop_assert!(uniq.binary_search(&pk(x.app, x.start_vpn)).is_ok());
                prop_assert!(uniq.binary_search(&pk(x.app, x.end_vpn() - 1)).is_ok());
                // No region crosses a segment boundary.
                for s in &clean {
                    let inside = |v: u64| x.app == s.0 && v >= s.1 && v < s.1 + s.2;
                    prop_assert_eq!(inside(x.start_vpn), inside(x.end_vpn() - 1), "{:?} crosses {:?}", x, s);
                }
            }
        }
    }
}

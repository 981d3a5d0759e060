//! The memory objects of a model: the sampled mappings of the program.
//!
//! Problem: a trace lists mappings (from `/proc/PID/maps` via numa_maps) that may be far larger
//! than what the program uses (thread stacks, malloc arenas reserving 64 MiB), and perf input
//! lists no mapping at all. Approach: an object is a mapping that holds enough samples, or a
//! cluster of sampled pages (gaps larger than 1 MiB, or 16 times the typical gap, split
//! clusters) where no mapping is known. An object whose samples sit in a small part of it
//! (97% of them within half of it) is trimmed to that part, and so are ends that hold at most
//! 0.5% of its samples over at least 2% of its pages: the model's access patterns are relative
//! to an object's extent (slice j of t), and an untouched rest would shift them.

use crate::recording::Recording;

/// At most this many objects; the rest (fewest samples) are left out and listed.
pub const MAX_OBJECTS: usize = 16;

/// One object: a range of the program's virtual pages.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectSpan {
    /// Unique name: what the mapping is, and its start address.
    pub name: String,
    pub start_vpn: u64,
    pub npages: u64,
    /// Samples that fall in it.
    pub samples: usize,
    /// Index of the recorded region it came from (None: a cluster of samples).
    pub region: Option<usize>,
    /// Pages of the mapping it was cut from (equal to `npages` unless trimmed).
    pub mapping_pages: u64,
}

impl ObjectSpan {
    /// Page index of `vpn` inside the object.
    pub fn page_of(&self, vpn: u64) -> Option<u64> {
        vpn.checked_sub(self.start_vpn).filter(|k| *k < self.npages)
    }
}

/// The object holding `vpn` (objects sorted by start, not overlapping).
pub fn locate(objs: &[ObjectSpan], vpn: u64) -> Option<usize> {
    let i = objs.partition_point(|o| o.start_vpn <= vpn);
    (i > 0 && objs[i - 1].page_of(vpn).is_some()).then(|| i - 1)
}

fn label(name: &str) -> String {
    let n = name.trim();
    let base = match n {
        "" | "[anon]" => "anon",
        _ if n.starts_with('[') => n.trim_matches(|c| c == '[' || c == ']'),
        _ => n.rsplit('/').next().unwrap_or(n),
    };
    let clean: String =
        base.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_' || *c == '.').take(24).collect();
    if clean.is_empty() {
        "anon".into()
    } else {
        clean
    }
}

/// Split sorted distinct pages into clusters at large gaps.
fn clusters(vpns: &[u64]) -> Vec<(u64, u64)> {
    if vpns.is_empty() {
        return vec![];
    }
    let mut gaps: Vec<u64> = vpns.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let typical = gaps.get(gaps.len() / 2).copied().unwrap_or(1);
    let cut = typical.saturating_mul(16).max(256);
    let mut out = Vec::new();
    let mut start = vpns[0];
    for w in vpns.windows(2) {
        if w[1] - w[0] > cut {
            out.push((start, w[0] + 1));
            start = w[1];
        }
    }
    out.push((start, vpns[vpns.len() - 1] + 1));
    out
}

/// Most pages between two unnamed objects that are still one object.
const TOUCH_PAGES: u64 = 16;

/// Unnamed memory (anonymous mappings, clusters of samples outside every recorded mapping)
/// that touches: one object. A program that re-protects parts of a buffer (as NUMA hinting
/// scans do) shows it as fragments that change between placement records, so some samples
/// fall where no record had a mapping; the kernel merges touching anonymous mappings with
/// equal flags, so the program cannot tell them apart either. `objs` sorted by start.
fn merge_touching(objs: Vec<ObjectSpan>, notes: &mut Vec<String>) -> Vec<ObjectSpan> {
    let unnamed = |o: &ObjectSpan| o.name.starts_with("anon@") || o.name.starts_with("mem@");
    let mut out: Vec<ObjectSpan> = Vec::with_capacity(objs.len());
    let mut best: Vec<usize> = Vec::new();
    for o in objs {
        if let Some(prev) = out.last_mut() {
            let end = prev.start_vpn.saturating_add(prev.npages);
            if unnamed(prev) && unnamed(&o) && o.start_vpn >= end && o.start_vpn - end <= TOUCH_PAGES {
                notes.push(format!("{} and {} touch: one object", prev.name, o.name));
                let top = best.last_mut().expect("one per object");
                if o.samples > *top {
                    *top = o.samples;
                    prev.region = o.region.or(prev.region);
                }
                prev.npages = o.start_vpn.saturating_add(o.npages) - prev.start_vpn;
                prev.mapping_pages = prev.npages;
                prev.samples += o.samples;
                prev.name = format!("anon@{}", prev.name.split('@').nth(1).unwrap_or("0"));
                continue;
            }
        }
        best.push(o.samples);
        out.push(o);
    }
    out
}

/// The objects of a recording, sorted by start; `notes` gets what was trimmed or left out.
pub fn find(rec: &Recording, notes: &mut Vec<String>) -> Vec<ObjectSpan> {
    let ps = rec.page_size.max(1);
    let mut regions: Vec<(usize, u64, u64)> =
        rec.regions.iter().enumerate().map(|(i, r)| (i, r.start_vpn, r.start_vpn.saturating_add(r.npages))).collect();
    regions.sort_by_key(|r| r.1);
    // Drop overlapping regions (a hostile or inconsistent trace): keep the first of each overlap.
    let mut kept: Vec<(usize, u64, u64)> = Vec::new();
    for r in regions {
        if kept.last().is_none_or(|k| r.1 >= k.2) {
            kept.push(r);
        }
    }
    let mut in_region: Vec<Vec<u64>> = vec![Vec::new(); kept.len()];
    let mut outside = Vec::new();
    for s in &rec.samples {
        let i = kept.partition_point(|r| r.1 <= s.vpn);
        if i > 0 && s.vpn < kept[i - 1].2 {
            in_region[i - 1].push(s.vpn);
        } else {
            outside.push(s.vpn);
        }
    }
    let mut cands: Vec<ObjectSpan> = Vec::new();
    for (k, (ri, start, end)) in kept.iter().enumerate() {
        if in_region[k].is_empty() {
            continue;
        }
        let r = &rec.regions[*ri];
        cands.push(ObjectSpan {
            name: format!("{}@{:x}", label(&r.name), start.saturating_mul(ps)),
            start_vpn: *start,
            npages: end - start,
            samples: in_region[k].len(),
            region: Some(*ri),
            mapping_pages: end - start,
        });
    }
    outside.sort_unstable();
    let all_outside = outside.clone();
    outside.dedup();
    for (a, b) in clusters(&outside) {
        let n = all_outside.partition_point(|v| *v < b) - all_outside.partition_point(|v| *v < a);
        cands.push(ObjectSpan {
            name: format!("mem@{:x}", a.saturating_mul(ps)),
            start_vpn: a,
            npages: b - a,
            samples: n,
            region: None,
            mapping_pages: b - a,
        });
    }
    let total = rec.samples.len().max(1);
    let min = (total / 200).max(5);
    cands.sort_by_key(|o| std::cmp::Reverse(o.samples));
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    for o in cands {
        if o.samples >= min && out.len() < MAX_OBJECTS {
            out.push(o);
        } else {
            dropped.push(o);
        }
    }
    if !dropped.is_empty() {
        let n: usize = dropped.iter().map(|o| o.samples).sum();
        notes.push(format!(
            "left out {} mapping(s) with few samples ({n} samples, {:.1}% of all; fewer than {min} each or beyond {MAX_OBJECTS} objects)",
            dropped.len(),
            100.0 * n as f64 / total as f64
        ));
    }
    out.sort_by_key(|o| o.start_vpn);
    let mut out = merge_touching(out, notes);
    // Trim objects whose samples sit in a small part of them.
    for o in &mut out {
        let mut pos: Vec<u64> = rec.samples.iter().filter_map(|s| o.page_of(s.vpn)).collect();
        pos.sort_unstable();
        let n = pos.len();
        let m = ((n as f64 * 0.97).ceil() as usize).clamp(1, n.max(1));
        if n < 20 {
            continue;
        }
        let (mut best, mut at) = (u64::MAX, 0usize);
        for i in 0..=(n - m) {
            let w = pos[i + m - 1] - pos[i] + 1;
            if w < best {
                best = w;
                at = i;
            }
        }
        let (a, b) = if best.saturating_mul(2) <= o.npages {
            (pos[at], pos[at + m - 1] + 1)
        } else {
            // Sparse ends: at most 0.5% of the samples below a / above b, and the dense part
            // extended over samples as close together as in it.
            let k = n / 200;
            let (mut i, mut j) = (k, n - 1 - k);
            let close = ((pos[j] - pos[i]) * 4 / n as u64).max(1);
            while i > 0 && pos[i] - pos[i - 1] <= close {
                i -= 1;
            }
            while j + 1 < n && pos[j + 1] - pos[j] <= close {
                j += 1;
            }
            (pos[i], pos[j] + 1)
        };
        let cut = o.npages - (b - a);
        if best.saturating_mul(2) <= o.npages || cut.saturating_mul(50) >= o.npages {
            notes.push(format!(
                "{}: its samples lie in pages {a}..{b} of its {} (the rest holds at most 3%): trimmed to them",
                o.name, o.npages
            ));
            o.start_vpn += a;
            o.npages = b - a;
            let label = o.name.split('@').next().unwrap_or("mem").to_string();
            o.name = format!("{label}@{:x}", o.start_vpn.saturating_mul(ps));
            o.samples = rec.samples.iter().filter(|s| o.page_of(s.vpn).is_some()).count();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, start: u64, npages: u64, samples: usize, region: Option<usize>) -> ObjectSpan {
        ObjectSpan { name: name.into(), start_vpn: start, npages, samples, region, mapping_pages: npages }
    }

    #[test]
    fn touching_unnamed_fragments_are_one_object_and_named_ones_stay_apart() {
        let mut notes = vec![];
        let objs = vec![
            span("anon@1000", 1, 100, 50, Some(0)),
            span("mem@65000", 101, 8, 5, None),
            span("anon@6e000", 110, 30, 90, Some(1)),
            span("libc.so@200000", 140, 10, 40, Some(2)),
            span("anon@300000", 300, 10, 40, Some(3)),
        ];
        let o = merge_touching(objs, &mut notes);
        assert_eq!(o.len(), 3, "{o:?}");
        assert_eq!((o[0].start_vpn, o[0].npages, o[0].samples, o[0].region), (1, 139, 145, Some(1)));
        assert!(o[0].name.starts_with("anon@"));
        assert_eq!(o[1].name, "libc.so@200000");
        assert_eq!(o[2].start_vpn, 300, "a gap of more than {TOUCH_PAGES} pages keeps objects apart");
        assert_eq!(notes.len(), 2);
    }
    use crate::recording::{RecRegion, RecSample};
    use ptb_profile::SampleKind;

    fn rec(vpns: &[u64], regions: Vec<RecRegion>) -> Recording {
        Recording {
            origin: "t".into(),
            source: "test".into(),
            period: None,
            page_size: 4096,
            machine: None,
            pid: 1,
            samples: vpns
                .iter()
                .enumerate()
                .map(|(i, v)| RecSample { tid: 1, cpu: 0, vpn: *v, time_ns: i as u64, kind: SampleKind::Load })
                .collect(),
            regions,
            page_nodes: vec![],
            notes: vec![],
        }
    }

    #[test]
    fn regions_with_samples_become_objects_and_sparse_ones_are_trimmed() {
        let reg = |s, n, name: &str| RecRegion { start_vpn: s, npages: n, name: name.into(), resident: vec![] };
        let mut v: Vec<u64> = (0..1000).map(|i| 1000 + i % 100).collect(); // 100 pages of a 1000-page mapping
        v.extend((0..500).map(|i| 5000 + i)); // a mapping used whole
        v.extend((0..10).map(|i| 90_000_000 + i)); // outside any mapping: a cluster
        let mut notes = vec![];
        let o = find(
            &rec(&v, vec![reg(1000, 1000, "[anon]"), reg(5000, 500, "/usr/lib/x.so"), reg(70000, 10, "")]),
            &mut notes,
        );
        assert_eq!(o.len(), 3, "{o:?}");
        // 97% of the samples lie in 97 of its pages.
        assert_eq!((o[0].start_vpn, o[0].npages, o[0].samples), (1000, 97, 970));
        assert!(o[0].name.starts_with("anon@"));
        assert_eq!((o[1].start_vpn, o[1].npages, o[1].samples), (5000, 500, 500));
        assert!(o[1].name.starts_with("x.so@"));
        assert_eq!((o[2].region, o[2].npages, o[2].samples), (None, 10, 10));
        assert!(notes.iter().any(|n| n.contains("trimmed")), "{notes:?}");
        assert_eq!(locate(&o, 1050), Some(0));
        assert_eq!(locate(&o, 1150), None);
        assert_eq!(locate(&o, 90_000_009), Some(2));
    }

    #[test]
    fn clusters_split_at_large_gaps() {
        assert_eq!(clusters(&[1, 2, 3, 10_000, 10_001]), vec![(1, 4), (10_000, 10_002)]);
        assert_eq!(clusters(&[5]), vec![(5, 6)]);
        assert!(clusters(&[]).is_empty());
    }
}

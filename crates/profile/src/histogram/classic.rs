//! The published PTB profiling table, collisions and all.
//!
//! Problem: reproduce the fixed-size, lock-free table of the original implementation so that
//! its effect (pages merged by collisions) can be shown and compared with an exact map.
//!
//! Approach (as published, spec "1. Profiling"):
//! - `slots` slots (15,000 by default); a page goes to slot `hash(page) % slots`, where the hash
//!   is the virtual page number plus a per-application offset (`vpn + app * 0x9E37_79B9_7F4A_7C15`,
//!   wrapping). The source only says "a hash of the page base address"; this keeps the
//!   modulo behaviour of a simple address hash: a dense range of up to `slots` pages never
//!   collides, strided or scattered pages do.
//! - each slot holds the last page that hit it and one counter per CPU (`cpu_slots` counters,
//!   indexed by CPU id modulo `cpu_slots`; the original had 64 for its 64 cores);
//! - on a collision the slot's page is overwritten and the counters are kept: the two pages
//!   look like one page (the last one recorded). Each overwrite counts as one collision.
//!
//! Per-CPU counters to per-thread counts: the table remembers, for each CPU slot, the thread
//! of the last sample taken on that CPU. When a page is read out, the counter of CPU c is
//! reported as accesses of that thread; if a thread ran on several CPUs during the cycle its
//! counters are summed. Two threads sharing one CPU in one cycle are merged under the last
//! one, exactly as the per-core table of the original could not tell them apart (PTB pins
//! threads one per core, so this is rare once it has run one cycle).
//!
//! Lost updates: the original table was written from every core's sampling interrupt without
//! locks, so a concurrent overwrite of a slot's address could attribute or drop an increment.
//! Here samples are recorded in one batch per cycle by one thread, so no increment is lost;
//! the parts of the design that change decisions (fixed slots, shared counters, overwrite on
//! collision) are kept. Counters saturate at `u32::MAX` instead of wrapping.

use super::{HistStats, Histogram, PageVisitor};
use crate::sample::{PageKey, Sample, Tid};

/// The published fixed-size access table.
#[derive(Clone, Debug)]
pub struct ClassicTable {
    slots: usize,
    cpu_slots: usize,
    page_shift: u32,
    /// Last page recorded in each slot.
    tags: Vec<Option<PageKey>>,
    /// `slots * cpu_slots` counters, row per slot.
    counts: Vec<u32>,
    /// Thread of the last sample taken on each CPU slot.
    owner: Vec<Option<Tid>>,
    /// Slots occupied since the last clear, in first-use order (to clear cheaply).
    used: Vec<u32>,
    samples: u64,
    collisions: u64,
}

impl ClassicTable {
    /// A table of `slots` slots (at least 1) with `cpu_slots` counters each (at least 1; use
    /// the machine's highest CPU id + 1). `page_size` is a power of two.
    pub fn new(slots: usize, cpu_slots: usize, page_size: u64) -> Self {
        let slots = slots.max(1);
        let cpu_slots = cpu_slots.max(1);
        ClassicTable {
            slots,
            cpu_slots,
            page_shift: page_size.max(1).trailing_zeros(),
            tags: vec![None; slots],
            counts: vec![0; slots * cpu_slots],
            owner: vec![None; cpu_slots],
            used: Vec::new(),
            samples: 0,
            collisions: 0,
        }
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The slot of a page.
    pub fn slot_of(&self, p: PageKey) -> usize {
        let h = p.vpn.wrapping_add(u64::from(p.app).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        (h % self.slots as u64) as usize
    }
}

impl ClassicTable {
    /// Sample `s` lands in `slot`: the slot takes its page (a conflict when another page held
    /// it) and its CPU's counter grows.
    fn count(&mut self, slot: usize, s: &Sample) {
        let page = PageKey { app: s.app, vpn: s.addr >> self.page_shift };
        match self.tags[slot] {
            Some(p) if p == page => {}
            Some(_) => {
                self.collisions += 1;
                self.tags[slot] = Some(page);
            }
            None => {
                self.tags[slot] = Some(page);
                self.used.push(slot as u32);
            }
        }
        let c = &mut self.counts[slot * self.cpu_slots + s.cpu.0 as usize % self.cpu_slots];
        *c = c.saturating_add(1);
    }
}

impl Histogram for ClassicTable {
    fn record(&mut self, s: &Sample) {
        let slot = self.slot_of(PageKey { app: s.app, vpn: s.addr >> self.page_shift });
        self.count(slot, s);
        self.owner[s.cpu.0 as usize % self.cpu_slots] = Some(s.tid);
        self.samples += 1;
    }

    /// The same table as recording the samples one by one, built slot by slot: a slot's state
    /// depends only on the order of its own samples, and a CPU's owner on the order of that CPU's
    /// samples, so the samples are grouped by slot with a stable counting sort first. The
    /// counters of one slot are then written together instead of one cache miss per sample.
    fn record_all(&mut self, samples: &[Sample]) {
        if samples.len() < 4096 {
            for s in samples {
                self.record(s);
            }
            return;
        }
        let slot_of: Vec<u32> = samples
            .iter()
            .map(|s| {
                self.owner[s.cpu.0 as usize % self.cpu_slots] = Some(s.tid);
                self.slot_of(PageKey { app: s.app, vpn: s.addr >> self.page_shift }) as u32
            })
            .collect();
        let mut start = vec![0u32; self.slots + 1];
        for &sl in &slot_of {
            start[sl as usize + 1] += 1;
        }
        for i in 0..self.slots {
            start[i + 1] += start[i];
        }
        let mut order = vec![0u32; samples.len()];
        let mut next = start.clone();
        for (i, &sl) in slot_of.iter().enumerate() {
            order[next[sl as usize] as usize] = i as u32;
            next[sl as usize] += 1;
        }
        for slot in 0..self.slots {
            let (a, b) = (start[slot] as usize, start[slot + 1] as usize);
            if a == b {
                continue;
            }
            for &i in &order[a..b] {
                self.count(slot, &samples[i as usize]);
            }
        }
        self.samples += samples.len() as u64;
    }

    fn clear(&mut self) {
        for &slot in &self.used {
            let slot = slot as usize;
            self.tags[slot] = None;
            self.counts[slot * self.cpu_slots..(slot + 1) * self.cpu_slots].fill(0);
        }
        self.used.clear();
        self.owner.fill(None);
        self.samples = 0;
        self.collisions = 0;
    }

    fn stats(&self) -> HistStats {
        HistStats { samples: self.samples, collisions: self.collisions, pages: self.used.len() as u64 }
    }

    /// Slots in index order; per slot, the CPU counters mapped to threads (see module doc).
    fn for_each_page(&self, f: &mut PageVisitor<'_>) {
        let mut row: Vec<(Tid, u32)> = Vec::with_capacity(self.cpu_slots);
        for (slot, tag) in self.tags.iter().enumerate() {
            let Some(page) = tag else { continue };
            row.clear();
            let counters = &self.counts[slot * self.cpu_slots..(slot + 1) * self.cpu_slots];
            for (cpu, &n) in counters.iter().enumerate() {
                if n > 0 {
                    // A non-zero counter always has an owner: the sample that raised it set one.
                    if let Some(t) = self.owner[cpu] {
                        row.push((t, n));
                    }
                }
            }
            row.sort_unstable_by_key(|x| x.0);
            row.dedup_by(|b, a| {
                if a.0 == b.0 {
                    a.1 = a.1.saturating_add(b.1);
                    true
                } else {
                    false
                }
            });
            if !row.is_empty() {
                f(*page, &row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    fn dump(h: &ClassicTable) -> Vec<(PageKey, Vec<(Tid, u32)>)> {
        let mut v = Vec::new();
        h.for_each_page(&mut |p, c| v.push((p, c.to_vec())));
        v
    }

    #[test]
    fn collision_overwrites_the_page_and_shares_counters() {
        // 10 slots: pages 3 and 13 share slot 3.
        let mut t = ClassicTable::new(10, 2, 4096);
        let p3 = PageKey { app: 1, vpn: 3 };
        let p13 = PageKey { app: 1, vpn: 13 };
        assert_eq!(t.slot_of(p3), t.slot_of(p13));
        t.record(&sample(100, 0, 3 * 4096));
        t.record(&sample(100, 0, 3 * 4096 + 8));
        t.record(&sample(200, 1, 13 * 4096));
        let s = t.stats();
        assert_eq!((s.samples, s.collisions, s.pages), (3, 1, 1));
        // Both pages' counts now belong to page 13, the last one recorded.
        assert_eq!(dump(&t), vec![(p13, vec![(100, 2), (200, 1)])]);
        // Back to page 3: another collision.
        t.record(&sample(100, 0, 3 * 4096));
        assert_eq!(t.stats().collisions, 2);
        assert_eq!(dump(&t), vec![(p3, vec![(100, 3), (200, 1)])]);
    }

    #[test]
    fn cpu_counters_map_to_the_last_thread_and_merge_a_migrated_thread() {
        let mut t = ClassicTable::new(100, 4, 4096);
        // Thread 7 runs on CPU 0 then CPU 1; thread 8 then takes CPU 0.
        t.record(&sample(7, 0, 4096));
        t.record(&sample(7, 1, 4096));
        t.record(&sample(8, 0, 4096));
        // CPU 0's two samples go to thread 8 (last on CPU 0); CPU 1's one to thread 7.
        assert_eq!(dump(&t), vec![(PageKey { app: 1, vpn: 1 }, vec![(7, 1), (8, 2)])]);
        let mut t = ClassicTable::new(100, 4, 4096);
        t.record(&sample(7, 0, 4096));
        t.record(&sample(7, 1, 4096));
        assert_eq!(dump(&t), vec![(PageKey { app: 1, vpn: 1 }, vec![(7, 2)])]);
    }

    proptest::proptest! {
        #[test]
        fn recording_in_a_batch_equals_recording_one_by_one(
            raw in proptest::collection::vec((0u32..6, 0u32..5, 0u64..400), 4096..6000),
        ) {
            let samples: Vec<Sample> =
                raw.iter().map(|&(t, cpu, vpn)| sample(100 + t, cpu, vpn * 4096 + 64)).collect();
            let mut one = ClassicTable::new(97, 4, 4096);
            for s in &samples {
                one.record(s);
            }
            let mut batch = ClassicTable::new(97, 4, 4096);
            batch.record_all(&samples);
            proptest::prop_assert_eq!(one.stats(), batch.stats());
            proptest::prop_assert_eq!(dump(&one), dump(&batch));
        }
    }

    #[test]
    fn dense_pages_up_to_the_slot_count_do_not_collide_and_clear_resets() {
        let mut t = ClassicTable::new(16, 1, 4096);
        for vpn in 100..116 {
            t.record(&sample(1, 0, vpn * 4096));
        }
        assert_eq!(t.stats().collisions, 0);
        assert_eq!(t.stats().pages, 16);
        t.record(&sample(1, 0, 116 * 4096));
        assert_eq!(t.stats().collisions, 1);
        t.clear();
        assert_eq!(t.stats(), HistStats::default());
        assert!(dump(&t).is_empty());
        // CPU ids beyond the counter array wrap around instead of panicking.
        t.record(&sample(1, 99, 4096));
        assert_eq!(dump(&t), vec![(PageKey { app: 1, vpn: 1 }, vec![(1, 1)])]);
    }
}

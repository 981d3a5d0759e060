//! Page placement state of one memory object.
//!
//! Problem: objects can have a million pages and the driver needs, every step, the node
//! histogram of arbitrary page ranges (a thread's slice, a streaming window), and policies move
//! single pages or whole ranges.
//! Approach: one byte per page (the node, or [`UNALLOCATED`]) plus node counts per chunk
//! (`CHUNK` pages), per group of [`CHUNKS_PER_BLOCK`] chunks, and per-node totals. A range
//! histogram adds whole blocks and chunks from the counts and scans only the partial chunks at
//! the ends; a move updates four counters. A million pages cost ~1 MiB plus ~17 KiB of counts
//! per node.
//!
//! The node bytes are shared ([`NodeReader`]) with the thread that draws address samples, which
//! reads them while the run's own thread does not move pages (moves happen only in a policy
//! cycle, after the samples drawn so far are handed over); relaxed atomics make that sharing
//! safe and cost what plain byte loads and stores cost.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

/// Marker for a page that no one has touched yet.
pub const UNALLOCATED: u8 = u8::MAX;
/// Pages per chunk of the count arrays.
pub const CHUNK: usize = 256;
/// Chunks per block of the coarser count array.
pub const CHUNKS_PER_BLOCK: usize = 16;
const BLOCK: usize = CHUNK * CHUNKS_PER_BLOCK;

/// Placement of the pages of one object.
#[derive(Debug)]
pub struct PageTable {
    n_nodes: usize,
    node: Arc<[AtomicU8]>,
    chunk_counts: Vec<u32>,
    block_counts: Vec<u32>,
    totals: Vec<u64>,
    /// Bumped on every change (lets callers cache histograms).
    pub version: u64,
}

/// A read-only view of where an object's pages live, for another thread.
#[derive(Clone, Debug)]
pub struct NodeReader(Arc<[AtomicU8]>);

impl NodeReader {
    /// The node byte of page `p` (in range): a node, or [`UNALLOCATED`].
    pub fn raw(&self, p: usize) -> u8 {
        self.0[p].load(Relaxed)
    }

    /// Node of page `p`, or `None` when unallocated or out of range.
    pub fn get(&self, p: usize) -> Option<usize> {
        match self.0.get(p)?.load(Relaxed) {
            UNALLOCATED => None,
            n => Some(n as usize),
        }
    }
}

impl Clone for PageTable {
    /// A copy of its own (not a second view of the same pages).
    fn clone(&self) -> Self {
        PageTable {
            n_nodes: self.n_nodes,
            node: self.node.iter().map(|n| AtomicU8::new(n.load(Relaxed))).collect(),
            chunk_counts: self.chunk_counts.clone(),
            block_counts: self.block_counts.clone(),
            totals: self.totals.clone(),
            version: self.version,
        }
    }
}

impl PageTable {
    pub fn new(npages: usize, n_nodes: usize) -> Self {
        let chunks = npages.div_ceil(CHUNK);
        PageTable {
            n_nodes,
            node: (0..npages).map(|_| AtomicU8::new(UNALLOCATED)).collect(),
            chunk_counts: vec![0; chunks * n_nodes],
            block_counts: vec![0; npages.div_ceil(BLOCK) * n_nodes],
            totals: vec![0; n_nodes],
            version: 0,
        }
    }

    /// A view of the page nodes another thread can read.
    pub fn reader(&self) -> NodeReader {
        NodeReader(Arc::clone(&self.node))
    }

    pub fn len(&self) -> usize {
        self.node.len()
    }

    pub fn is_empty(&self) -> bool {
        self.node.is_empty()
    }

    /// Node of page `p`, or `None` when unallocated.
    pub fn get(&self, p: usize) -> Option<usize> {
        match self.node[p].load(Relaxed) {
            UNALLOCATED => None,
            n => Some(n as usize),
        }
    }

    /// Place (or move) page `p` on node `n`. Returns the previous node.
    pub fn set(&mut self, p: usize, n: usize) -> Option<usize> {
        let old = self.get(p);
        if old == Some(n) {
            return old;
        }
        let (c, b) = (p / CHUNK, p / BLOCK);
        if let Some(o) = old {
            self.chunk_counts[c * self.n_nodes + o] -= 1;
            self.block_counts[b * self.n_nodes + o] -= 1;
            self.totals[o] -= 1;
        }
        self.chunk_counts[c * self.n_nodes + n] += 1;
        self.block_counts[b * self.n_nodes + n] += 1;
        self.totals[n] += 1;
        self.node[p].store(n as u8, Relaxed);
        self.version += 1;
        old
    }

    /// Place every page of `[start, end)`, none of them placed yet, on node `n` (what `set` on
    /// each would do, in one pass over the counts). Returns false, changing nothing, when some
    /// page of the range is already placed.
    pub fn fill(&mut self, start: usize, end: usize, n: usize) -> bool {
        let end = end.min(self.node.len());
        if start >= end {
            return true;
        }
        if self.node[start..end].iter().any(|x| x.load(Relaxed) != UNALLOCATED) {
            return false;
        }
        for x in &self.node[start..end] {
            x.store(n as u8, Relaxed);
        }
        let nn = self.n_nodes;
        let mut p = start;
        while p < end {
            let q = ((p / CHUNK + 1) * CHUNK).min(end);
            self.chunk_counts[p / CHUNK * nn + n] += (q - p) as u32;
            p = q;
        }
        let mut p = start;
        while p < end {
            let q = ((p / BLOCK + 1) * BLOCK).min(end);
            self.block_counts[p / BLOCK * nn + n] += (q - p) as u32;
            p = q;
        }
        self.totals[n] += (end - start) as u64;
        self.version += (end - start) as u64;
        true
    }

    /// Resident pages per node.
    pub fn totals(&self) -> &[u64] {
        &self.totals
    }

    /// Add the node histogram of pages `[start, end)` to `out` (length n_nodes).
    pub fn histogram(&self, start: usize, end: usize, out: &mut [u64]) {
        let end = end.min(self.node.len());
        if start >= end {
            return;
        }
        if start == 0 && end == self.node.len() {
            for (o, t) in out.iter_mut().zip(&self.totals) {
                *o += t;
            }
            return;
        }
        let first_full = start.div_ceil(CHUNK);
        let last_full = end / CHUNK;
        if first_full >= last_full {
            self.scan(start, end, out);
            return;
        }
        self.scan(start, first_full * CHUNK, out);
        // Whole chunks up to the first block boundary, whole blocks, whole chunks after.
        let first_block = first_full.div_ceil(CHUNKS_PER_BLOCK);
        let last_block = last_full / CHUNKS_PER_BLOCK;
        if first_block < last_block {
            self.add_rows(&self.chunk_counts, first_full..first_block * CHUNKS_PER_BLOCK, out);
            self.add_rows(&self.block_counts, first_block..last_block, out);
            self.add_rows(&self.chunk_counts, last_block * CHUNKS_PER_BLOCK..last_full, out);
        } else {
            self.add_rows(&self.chunk_counts, first_full..last_full, out);
        }
        self.scan(last_full * CHUNK, end, out);
    }

    /// Add rows `rows` of a count array (one row of `n_nodes` counts each) to `out`.
    fn add_rows(&self, counts: &[u32], rows: std::ops::Range<usize>, out: &mut [u64]) {
        let nn = self.n_nodes;
        for row in counts[rows.start * nn..rows.end * nn].chunks_exact(nn.max(1)) {
            for (o, v) in out.iter_mut().zip(row) {
                *o += *v as u64;
            }
        }
    }

    fn scan(&self, start: usize, end: usize, out: &mut [u64]) {
        for n in &self.node[start..end] {
            let n = n.load(Relaxed);
            if n != UNALLOCATED {
                out[n as usize] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Ranges over chunks, blocks of chunks and their partial ends count what a plain scan
        /// counts; the reader and a clone see the same pages.
        #[test]
        fn histogram_matches_a_plain_count(
            moves in proptest::collection::vec((0usize..20_000, 0usize..4), 0..600),
            fill in 0usize..20_000,
            a in 0usize..20_000, b in 0usize..20_000,
        ) {
            let mut t = PageTable::new(20_000, 4);
            for p in 0..fill { t.set(p, p % 3); }
            for (p, n) in &moves { t.set(*p, *n); }
            let (s, e) = (a.min(b), a.max(b));
            let mut h = vec![0u64; 4];
            t.histogram(s, e, &mut h);
            let mut want = vec![0u64; 4];
            for p in s..e { if let Some(n) = t.get(p) { want[n] += 1; } }
            prop_assert_eq!(h, want);
            let total: u64 = t.totals().iter().sum();
            prop_assert_eq!(total as usize, (0..20_000).filter(|p| t.get(*p).is_some()).count());
            // Filling a fresh range is setting each of its pages.
            let (f0, f1) = (fill.min(a), fill.max(a));
            let mut bulk = PageTable::new(20_000, 4);
            let mut each = PageTable::new(20_000, 4);
            prop_assert!(bulk.fill(f0, f1, 2));
            for p in f0..f1 { each.set(p, 2); }
            prop_assert_eq!(bulk.version, each.version);
            for (x, y) in [(0, 20_000), (s, e), (f0, f1)] {
                let (mut hb, mut he) = (vec![0u64; 4], vec![0u64; 4]);
                bulk.histogram(x, y, &mut hb);
                each.histogram(x, y, &mut he);
                prop_assert_eq!(hb, he);
            }
            prop_assert!((0..20_000).all(|p| bulk.get(p) == each.get(p)));
            prop_assert!(f0 == f1 || !bulk.fill(f0, f1, 1), "a placed page is never filled over");
            let (r, c) = (t.reader(), t.clone());
            prop_assert!((0..20_000).all(|p| r.get(p) == t.get(p) && c.get(p) == t.get(p)));
            prop_assert_eq!(r.get(20_000), None);
        }
    }
}

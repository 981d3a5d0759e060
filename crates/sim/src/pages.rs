//! Page placement state of one memory object.
//!
//! Problem: objects can have a million pages and the driver needs, every step, the node
//! histogram of arbitrary page ranges (a thread's slice, a streaming window), and policies move
//! single pages or whole ranges.
//! Approach: one byte per page (the node, or [`UNALLOCATED`]) plus per-chunk node counts
//! (`CHUNK` pages per chunk) and per-node totals. A range histogram adds whole chunks from the
//! counts and scans only the partial chunks at the ends; a move updates three counters.
//! A million pages cost ~1 MiB plus ~32 KiB of counts per node.
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

/// Placement of the pages of one object.
#[derive(Debug)]
pub struct PageTable {
    n_nodes: usize,
    node: Arc<[AtomicU8]>,
    chunk_counts: Vec<u32>,
    totals: Vec<u64>,
    /// Bumped on every change (lets callers cache histograms).
    pub version: u64,
}

/// A read-only view of where an object's pages live, for another thread.
#[derive(Clone, Debug)]
pub struct NodeReader(Arc<[AtomicU8]>);

impl NodeReader {
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
        let c = p / CHUNK;
        if let Some(o) = old {
            self.chunk_counts[c * self.n_nodes + o] -= 1;
            self.totals[o] -= 1;
        }
        self.chunk_counts[c * self.n_nodes + n] += 1;
        self.totals[n] += 1;
        self.node[p].store(n as u8, Relaxed);
        self.version += 1;
        old
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
        for c in first_full..last_full {
            let row = &self.chunk_counts[c * self.n_nodes..(c + 1) * self.n_nodes];
            for (o, v) in out.iter_mut().zip(row) {
                *o += *v as u64;
            }
        }
        self.scan(last_full * CHUNK, end, out);
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
        #[test]
        fn histogram_matches_a_plain_count(
            moves in proptest::collection::vec((0usize..3000, 0usize..4), 0..400),
            a in 0usize..3000, b in 0usize..3000,
        ) {
            let mut t = PageTable::new(3000, 4);
            for (p, n) in &moves { t.set(*p, *n); }
            let (s, e) = (a.min(b), a.max(b));
            let mut h = vec![0u64; 4];
            t.histogram(s, e, &mut h);
            let mut want = vec![0u64; 4];
            for p in s..e { if let Some(n) = t.get(p) { want[n] += 1; } }
            prop_assert_eq!(h, want);
            let total: u64 = t.totals().iter().sum();
            prop_assert_eq!(total as usize, (0..3000).filter(|p| t.get(*p).is_some()).count());
        }
    }
}

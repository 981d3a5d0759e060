//! Chunks a sequential sweep is about to reach.
//!
//! Problem: a thread that sweeps its own slice of an array (an OpenMP `parallel for` with the
//! static schedule) is sampled only where it has been. Where the slice was first touched
//! elsewhere (a serial initialisation on the master thread), its data is found and moved a
//! few chunks at a time as the sweep passes it, and every access before that pays the remote
//! latency and the crowded controller of the node that holds it all.
//!
//! Approach: like readahead and the hardware prefetchers, which take consecutive accesses for
//! a sequential stream and fetch ahead of it, one thread alone sampling two consecutive chunks
//! in a cycle, the later one never sampled before and the one after it never either, is taken
//! to sweep. The chunks after its front that were never sampled are expected to be used by the
//! node the run it swept is private to, and to lie where that run lay before ptb moved it. No
//! sweep reaches past a chunk already seen or out of the static schedule's slice that holds
//! its front (its region cut into one run of chunks per thread of the program), so sparse or
//! randomly used data is not moved on a guess, nor one thread's data to another's node. The
//! cost is a few operations per chunk first sampled.

use super::chunks::{ChunkKey, ChunkState, ChunkTable};
use crate::snapshot::{Region, ThreadState};
use ptb_topology::NodeIdx;

/// A chunk never sampled, ahead of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ahead {
    /// The chunk expected to be reached.
    pub key: ChunkKey,
    /// The last chunk of the sweep's run with enough samples (its evidence stands for the
    /// chunk's).
    pub front: ChunkKey,
    /// The node whose threads sweep.
    pub home: NodeIdx,
}

/// The chunks ahead of every sweep that reached new chunks in the latest cycle. `min`: samples
/// a chunk needs to count as seen; `home_of`: the node a seen chunk is private to, if any.
pub fn ahead(
    table: &ChunkTable,
    regions: &[Region],
    threads: &[ThreadState],
    min: f64,
    home_of: impl Fn(&ChunkState) -> Option<NodeIdx>,
) -> Vec<Ahead> {
    let cp = table.chunk_pages();
    let seen = |k: ChunkKey| table.get(k).filter(|c| c.total() >= min);
    let mut out = Vec::new();
    for &f in table.first_seen() {
        let key = |chunk| ChunkKey { app: f.app, chunk };
        // One thread alone swept both chunks in this cycle, and nothing after them was seen.
        let tid = table.get(f).and_then(|c| c.sole_tid());
        let before = f.chunk.checked_sub(1).map(key);
        if tid.is_none() || before.and_then(|b| table.get(b)).and_then(|c| c.sole_tid()) != tid {
            continue;
        }
        if table.ever_seen(key(f.chunk + 1)) {
            continue;
        }
        let Some(r) = regions.iter().find(|r| {
            r.app == f.app && r.npages > 0 && r.start_vpn / cp < f.chunk && f.chunk < (r.start_vpn + r.npages - 1) / cp
        }) else {
            continue; // a sweep needs the chunk before and the one after in the region
        };
        // The run is private to one node: its last chunk with enough samples, and both chunks
        // were sampled most from that node.
        let last = if seen(f).is_some() { f } else { key(f.chunk - 1) };
        let Some(h) = seen(last).and_then(&home_of) else { continue };
        if [f.chunk - 1, f.chunk].iter().any(|&c| table.get(key(c)).is_none_or(|s| s.top_node().0 != h)) {
            continue;
        }
        let hi = (r.start_vpn + r.npages - 1) / cp;
        let n_threads = threads.iter().filter(|t| t.app == f.app).count().max(1) as u64;
        // The slice of a static schedule that holds the front: the region's pages cut into one
        // run per thread; the sweep ends with the last chunk wholly inside it.
        let first_page = (f.chunk * cp).max(r.start_vpn) - r.start_vpn;
        let k = u128::from(first_page) * u128::from(n_threads) / u128::from(r.npages);
        let slice_end = r.start_vpn + ((k + 1) * u128::from(r.npages) / u128::from(n_threads)) as u64;
        let end = (slice_end / cp).min(hi + 1);
        for next in (f.chunk + 1)..end {
            if table.ever_seen(key(next)) {
                break; // the sweep, or another, reached it already
            }
            out.push(Ahead { key: key(next), front: last, home: h });
        }
    }
    out.sort_unstable_by_key(|a| a.key);
    out.dedup_by_key(|a| a.key);
    out
}

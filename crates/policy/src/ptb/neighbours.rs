//! A chunk's neighbours as evidence of who uses it.
//!
//! Problem: the evidence rule ([`super::dominant`]) needs a few samples of a chunk before it
//! names its user, and a program's samples are spread over all its chunks. LULESH with 16
//! threads on the 8-node Opteron (a held-out model) gets about 220 DRAM samples a cycle
//! (IBS op, its interrupt budget) over 448 chunks of 2 MiB: half a sample per chunk and cycle,
//! so a chunk's decayed count settles near 1 and reaches the rule's three samples only when a
//! burst of them lands on it. Its serially initialised fields, private by slices to the
//! threads that update them, came home over 2.5 s (and a trickle to 7 s), while oracle-moved
//! moved them at 25 ms (simulated, seed 1).
//!
//! Approach: data is laid out in slices. A parallel loop with the static schedule (OpenMP's
//! default), a domain decomposition and a per-thread arena each give a thread a contiguous run
//! of pages, many chunks long in the programs that move most, so a chunk's user is, before its
//! own samples say so, most likely its neighbours'. A chunk with too few samples of its own for
//! the rule (under `MIN_SAMPLES`, decayed) takes the verdict of its neighbourhood, itself and
//! the chunk on each side within its program's mapped range, when (1) a neighbour is sure on
//! its own samples that a node uses it, and no neighbour is sure of another node; (2) the
//! neighbourhood's summed samples pass the same rule for that node; (3) the chunk's own
//! samples, if any, have that node on top. Its access rate is then the neighbourhood's mean
//! (its own, from a sample or two, says little). Only a private verdict is taken this way: at
//! a slice's edge the neighbourhood mixes two users, which the rule reads as open, never as one
//! user that is wrong.
//!
//! Why a sure neighbour: the sum of a few thin chunks is as likely to pass the rule by chance
//! as one chunk's own few samples are, and there are many more such sums than chunks with
//! samples enough. Data every node reads alike, sampled once or twice per chunk, then looks
//! private here and there: in the first 25 ms of streamcluster with 16 threads on two nodes
//! (32 samples in all) sums of three samples from one node sent four chunks of its shared
//! points to node 1; the changed latencies moved the first layout evaluation's overlap
//! estimate from 4.7 to 3.2, the program stayed on its two nodes and ran 3.088 s instead of
//! 2.996 s (seed 1, simulated). A sure neighbour extends only a verdict the rule already made.
//!
//! A chunk with samples enough keeps its own verdict, open or not: its neighbours' samples are
//! not its own, and near the rule's two-to-one line they can tip it. Letting the neighbourhood
//! decide those too took NPB LU (64 threads, 8-node Opteron, seed 1, simulated) from 1.01x to
//! 0.95x of first touch, with 433,398 pages moved against 377,986.

use super::chunks::{normalise, ChunkKey, ChunkTable, Counts};
use crate::snapshot::Region;
use ptb_topology::NodeIdx;

/// What a chunk's neighbourhood says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Neighbourhood {
    /// The node the neighbourhood's samples are sure uses it.
    pub node: NodeIdx,
    /// The neighbourhood's mean accesses per second per chunk.
    pub rate: f64,
    /// Shares of its samples by node of the accessing thread.
    pub src: Vec<f64>,
    /// Its samples (decayed).
    pub n: f64,
}

/// The neighbourhood verdict of chunk `key` (see the module docs), `None` where the chunk's
/// neighbours within its program's mapped range say nothing sure or contradict its own top
/// node. `mem_nodes`: nodes a private chunk may live on; `min`: the samples a chunk needs for
/// the rule on its own.
pub fn verdict(
    table: &ChunkTable,
    key: ChunkKey,
    regions: &[Region],
    mem_nodes: &[NodeIdx],
    min: f64,
) -> Option<Neighbourhood> {
    let own = table.get(key)?;
    // The node a neighbour is sure of on its own samples.
    let sure_of = |k: ChunkKey| table.get(k).filter(|c| c.total() >= min).and_then(|c| super::dominant(&c.by_src));
    let before = key.chunk.checked_sub(1).map(|chunk| ChunkKey { chunk, ..key });
    let after = key.chunk.checked_add(1).map(|chunk| ChunkKey { chunk, ..key });
    // Most chunks with few samples have no sure neighbour: that is known before the regions
    // are read.
    if before.and_then(sure_of).is_none() && after.and_then(sure_of).is_none() {
        return None;
    }
    let me = table.range_of(key, regions)?;
    let end = me.start_vpn.saturating_add(me.npages);
    // A neighbour counts where its mapped range meets the chunk's end to end.
    let before = before
        .filter(|&b| table.range_of(b, regions).is_some_and(|r| r.start_vpn.saturating_add(r.npages) == me.start_vpn));
    let after = after.filter(|&a| table.range_of(a, regions).is_some_and(|r| r.start_vpn == end));
    let mut sum = Counts::new();
    let (mut rate, mut chunks) = (0.0, 0.0);
    for k in std::iter::once(key).chain(before).chain(after) {
        if let Some(c) = table.get(k) {
            if sum.len() < c.by_src.len() {
                sum.resize(c.by_src.len(), 0.0);
            }
            for (s, &x) in sum.iter_mut().zip(&c.by_src) {
                *s += x;
            }
            rate += c.accesses_per_s();
        }
        chunks += 1.0;
    }
    // The neighbours sure on their own samples, and of which node.
    let sure: Vec<NodeIdx> = before.into_iter().chain(after).filter_map(sure_of).collect();
    let node = super::dominant(&sum).filter(|n| mem_nodes.contains(n))?;
    if sure.is_empty() || sure.iter().any(|&n| n != node) {
        return None;
    }
    if own.total() > 0.0 && own.top_node().0 != node {
        return None;
    }
    let n: f64 = sum.iter().map(|&x| f64::from(x)).sum();
    let src = normalise(&sum.iter().map(|&x| f64::from(x)).collect::<Vec<_>>());
    Some(Neighbourhood { node, rate: rate / chunks, src, n })
}

//! Per-chunk access evidence with exponential decay: who accesses each chunk (node of the
//! accessing CPU) and where its sampled pages live.

use crate::snapshot::{Region, Snapshot};
use ptb_profile::AppId;
use ptb_topology::NodeIdx;
use std::collections::HashMap;

/// Per-node counts (inline up to 8 nodes: no allocation per chunk on common machines).
pub type Counts = smallvec::SmallVec<[f32; 8]>;

/// A chunk: `chunk_pages` consecutive pages of one application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    pub app: AppId,
    pub chunk: u64,
}

/// Where a chunk should live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// On the node of its accessors: this percentage of its pages there, the rest spread
    /// like a shared chunk (100: all of it; less where the home node's controller or local
    /// path is the bottleneck, see the `home` module).
    Node(NodeIdx, u8),
    /// Spread over the memory nodes in proportion to their bandwidth.
    Spread,
}

impl Target {
    /// The chunk's home node, `None` for spread chunks.
    pub fn node(self) -> Option<NodeIdx> {
        match self {
            Target::Node(n, _) => Some(n),
            Target::Spread => None,
        }
    }
}

/// Decayed evidence about one chunk.
#[derive(Clone, Debug)]
pub struct ChunkState {
    /// Decayed sample counts by node of the accessing thread.
    pub by_src: Counts,
    /// Decayed sample counts by node holding the sampled page.
    pub by_home: Counts,
    /// Target the chunk was last moved to.
    pub placed: Option<Target>,
    /// Target seen in the last cycles and for how many cycles in a row.
    pub pending: Option<(Target, u32)>,
    /// The target of the chunk's current period, and since when (seconds of management) the
    /// chunk has had a target of that node.
    pub last_want: Option<Target>,
    pub since_s: f64,
    /// Another node (or spread) seen since: since when, and for how many cycles in a row.
    /// It starts a new period only once it has held `confirm` cycles; a shorter flicker is
    /// sampling noise and the current period goes on.
    pub flip: Option<(Target, f64, u32)>,
    /// Total seconds and number of past periods with a node target [0] and a spread target [1].
    pub held_s: [f32; 2],
    pub held_n: [u16; 2],
    /// The top node and its share before this cycle's samples (a share that just fell is a
    /// phase ending, not a mixed chunk).
    pub prev_top: (NodeIdx, f32),
    decay: f64,
}

impl ChunkState {
    /// A chunk with no evidence yet, over `nodes` nodes.
    pub fn new(nodes: usize, decay: f64) -> Self {
        ChunkState {
            by_src: smallvec::smallvec![0.0; nodes],
            by_home: smallvec::smallvec![0.0; nodes],
            placed: None,
            pending: None,
            last_want: None,
            since_s: 0.0,
            flip: None,
            held_s: [0.0; 2],
            held_n: [0; 2],
            prev_top: (NodeIdx(0), 0.0),
            decay,
        }
    }

    pub fn total(&self) -> f64 {
        self.by_src.iter().map(|&x| x as f64).sum()
    }

    /// The node issuing most accesses and its share.
    pub fn top_node(&self) -> (NodeIdx, f64) {
        let total = self.total();
        let (i, v) =
            self.by_src
                .iter()
                .enumerate()
                .fold((0, f64::MIN), |best, (i, &v)| if v as f64 > best.1 { (i, v as f64) } else { best });
        (NodeIdx::from_ix(i), if total > 0.0 { v / total } else { 0.0 })
    }

    /// Whether the top node lost its hold since the last cycle: another node is on top now, or
    /// its share fell by more than a quarter (a phase ending, whose evidence decays). A chunk
    /// first seen this cycle has lost nothing.
    pub fn lost_top(&self) -> bool {
        let (top, share) = self.top_node();
        self.prev_top.1 > 0.0 && (top != self.prev_top.0 || (share as f32) < 0.75 * self.prev_top.1)
    }

    /// Estimated accesses per second (steady state of the decayed sum).
    pub fn accesses_per_s(&self, period: u64, cycle: std::time::Duration) -> f64 {
        let secs = cycle.as_secs_f64().max(1e-6);
        self.total() * (1.0 - self.decay) * period as f64 / secs
    }

    /// Record this cycle's target; returns how long (seconds) this target is expected to
    /// last: unbounded (`f64::INFINITY`) while the chunk has never held a target of this kind
    /// (a node, or spread) before, else the longer of the mean length of its past periods of
    /// this kind and the current period so far. A chunk whose accessors alternate with the
    /// program's phases thus gets the length of the phase that wants this target as its
    /// horizon: a move toward the placement of a short phase must pay back within it, while
    /// the placement of the long phase is still taken. Another node on top ends a period at
    /// once (another user); between a node and spread, the new target must hold `confirm`
    /// cycles in a row (the new period then dates from its first cycle): a chunk near the
    /// mixed threshold whose target flickers for a cycle with sampling noise keeps its period,
    /// and its horizon, rather than counting a string of short "phases".
    pub fn observe_target(&mut self, want: Target, now_s: f64, confirm: u32) -> f64 {
        let kind = |t: Target| usize::from(matches!(t, Target::Spread));
        let mut since = self.since_s;
        match self.last_want {
            None => {
                self.last_want = Some(want);
                self.since_s = now_s;
                since = now_s;
            }
            Some(w) if w.node() == want.node() => {
                self.last_want = Some(want);
                self.flip = None;
            }
            Some(w) => {
                let (t0, n) = match self.flip {
                    Some((f, t0, n)) if f.node() == want.node() => (t0, n.saturating_add(1)),
                    _ => (now_s, 1),
                };
                since = t0;
                // Another node on top is another user: a new period at once. Between a
                // node and spread (the same user near the mixed threshold), wait.
                let other_node = w.node().is_some() && want.node().is_some();
                if other_node || n >= confirm.max(1) {
                    let k = kind(w);
                    self.held_s[k] += (t0 - self.since_s).max(0.0) as f32;
                    self.held_n[k] = self.held_n[k].saturating_add(1);
                    self.last_want = Some(want);
                    self.since_s = t0;
                    self.flip = None;
                } else {
                    self.flip = Some((want, t0, n));
                }
            }
        }
        let k = kind(want);
        if self.held_n[k] == 0 {
            f64::INFINITY
        } else {
            (self.held_s[k] as f64 / self.held_n[k] as f64).max(now_s - since)
        }
    }

    /// Shares of the accesses by issuing node.
    pub fn src_shares(&self) -> Vec<f64> {
        normalise(&self.by_src.iter().map(|&x| x as f64).collect::<Vec<_>>())
    }
}

/// Dense node index of every CPU id (u16::MAX for ids that are no CPU of the machine).
pub fn cpu_to_node(m: &ptb_topology::Machine) -> Vec<u16> {
    let max_cpu = m.cpus().last().map_or(0, |c| c.0 as usize);
    let mut v = vec![u16::MAX; max_cpu + 1];
    for n in &m.nodes {
        for c in n.cpus.iter() {
            v[c.0 as usize] = n.idx.0;
        }
    }
    v
}

/// Normalise to shares (all zero stays all zero).
pub fn normalise(v: &[f64]) -> Vec<f64> {
    let s: f64 = v.iter().sum();
    if s > 0.0 {
        v.iter().map(|x| x / s).collect()
    } else {
        vec![0.0; v.len()]
    }
}

/// A page range of one application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub start_vpn: u64,
    pub npages: u64,
}

/// All chunks with evidence.
#[derive(Debug)]
pub struct ChunkTable {
    chunk_pages: u64,
    map: HashMap<ChunkKey, ChunkState, ptb_profile::histogram::FxBuild>,
}

impl ChunkTable {
    pub fn new(chunk_pages: u64) -> Self {
        ChunkTable { chunk_pages: chunk_pages.max(1), map: HashMap::default() }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Decay old evidence, add this cycle's samples, drop chunks whose evidence faded.
    /// Returns the sampled traffic matrix: samples from threads on node s (row) to pages on
    /// node d (column); pages of unknown location count on the thread's node. One pass over
    /// the samples does both.
    pub fn ingest(&mut self, snap: &Snapshot, decay: f64) -> Vec<Vec<f64>> {
        let m = snap.machine;
        let nn = m.n_nodes();
        for c in self.map.values_mut() {
            let (top, share) = c.top_node();
            c.prev_top = (top, share as f32);
            let d = decay as f32;
            c.by_src.iter_mut().for_each(|x| *x *= d);
            c.by_home.iter_mut().for_each(|x| *x *= d);
        }
        let cpu_node = cpu_to_node(m);
        let mut traffic = vec![vec![0.0; nn]; nn];
        let shift = m.page_size.trailing_zeros();
        for s in snap.samples {
            let Some(&src) = cpu_node.get(s.cpu.0 as usize) else { continue };
            if src == u16::MAX {
                continue;
            }
            let page = ptb_profile::PageKey { app: s.app, vpn: s.addr >> shift };
            let key = ChunkKey { app: s.app, chunk: page.vpn / self.chunk_pages };
            let home = snap.pages.get(page);
            traffic[src as usize][home.map_or(src as usize, |h| h.ix())] += 1.0;
            let c = self.map.entry(key).or_insert_with(|| ChunkState::new(nn, decay));
            c.by_src[src as usize] += 1.0;
            if let Some(h) = home {
                c.by_home[h.ix()] += 1.0;
            }
        }
        self.map.retain(|_, c| c.total() >= 0.05);
        traffic
    }

    /// Keys of chunks with at least `min` decayed samples, heaviest first (ties by key, so
    /// the order is deterministic).
    pub fn keys_by_weight(&self, min: f64) -> Vec<ChunkKey> {
        let mut v: Vec<(ChunkKey, f64)> =
            self.map.iter().map(|(k, c)| (*k, c.total())).filter(|(_, t)| *t >= min).collect();
        v.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter().map(|(k, _)| k).collect()
    }

    /// Share of the evidence (decayed samples) on chunks that one node used most (half their
    /// accesses or more) and that lost it since the last cycle: another top node, or a top
    /// share fallen by more than a quarter. A high share is a new phase. Chunks without a
    /// dominant user do not count: their top node changes with sampling noise.
    pub fn shifted_share(&self) -> f64 {
        let (mut all, mut moved) = (0.0, 0.0);
        for c in self.map.values() {
            if c.prev_top.1 <= 0.0 {
                continue;
            }
            let t = c.total();
            all += t;
            if c.prev_top.1 >= 0.5 && c.lost_top() {
                moved += t;
            }
        }
        if all > 0.0 {
            moved / all
        } else {
            0.0
        }
    }

    /// Every chunk's state, in no particular order.
    pub fn states(&self) -> impl Iterator<Item = &ChunkState> {
        self.map.values()
    }

    pub fn get(&self, k: ChunkKey) -> Option<&ChunkState> {
        self.map.get(&k)
    }

    pub fn get_mut(&mut self, k: ChunkKey) -> Option<&mut ChunkState> {
        self.map.get_mut(&k)
    }

    /// The chunk's page range within its program's regions (None: in none of them), over the
    /// pieces of a mapping cut by `mprotect` ([`crate::ptb::chunk_range`]).
    pub fn range_of(&self, k: ChunkKey, regions: &[Region]) -> Option<Range> {
        let lo = k.chunk * self.chunk_pages;
        crate::ptb::chunk_range(k.app, lo, lo + self.chunk_pages, regions)
            .map(|(s, e)| Range { start_vpn: s, npages: e - s })
    }
}

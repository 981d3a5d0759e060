//! Per-chunk access evidence with exponential decay: who accesses each chunk (node of the
//! accessing CPU) and where its sampled pages live.

use crate::snapshot::{Region, Snapshot};
use ptb_profile::{AppId, Tid};
use ptb_topology::NodeIdx;
use std::collections::HashMap;

/// Per-node counts (inline up to 8 nodes: no allocation per chunk on common machines).
pub type Counts = smallvec::SmallVec<[f32; 8]>;

/// No thread sampled the chunk in the latest cycle.
const NO_TID: Tid = Tid::MAX;
/// Several threads did.
const SEVERAL_TIDS: Tid = Tid::MAX - 1;
/// Counters of the owner sketch ([`ChunkState::owner`]): every thread making more than a
/// quarter of a chunk's accesses holds one.
const OWNER_COUNTERS: usize = 3;

/// A chunk: `chunk_pages` consecutive pages of one application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    pub app: AppId,
    pub chunk: u64,
}

/// Where a chunk should live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// On the node of its accessors: this percentage of its pages there, the rest over the
    /// other nodes in the home node's spill shares (100: all of it; less where the home node's
    /// controller or local path is the bottleneck, see the `home` and `spill` modules).
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
    /// Shares of the chunk's pages by node where ptb last moved it (known exactly, unlike the
    /// sampled homes); `None` until it moves one.
    pub moved_to: Option<Counts>,
    /// Samples since ptb last moved the chunk whose page lay on a node the move put some of
    /// the chunk on (`[0]`) or none of it (`[1]`): whether the move took
    /// ([`ChunkState::move_failed`]).
    pub since_move: [f32; 2],
    /// Moves of the chunk that did not take, as its samples showed.
    pub failed_moves: u8,
    /// The thread that sampled the chunk in the latest cycle when one thread alone did
    /// ([`super::sweep`]), else [`NO_TID`] or [`SEVERAL_TIDS`] (Linux tids stay below 2^22).
    sole: Tid,
    /// The threads that sample the chunk most (Misra-Gries with [`OWNER_COUNTERS`] counters,
    /// over the decayed samples: a thread's counter rises with its samples, and a sample of a
    /// thread without one, when all are taken, lowers them all), and the decayed number of
    /// samples they ran over ([`ChunkState::owner`]).
    owners: [(Tid, f32); OWNER_COUNTERS],
    owner_n: f32,
    /// Target seen in the last cycle, when the chunk was first seen (seconds of management)
    /// and how many times its target's node changed since ([`ChunkState::observe_target`]).
    pub last_want: Option<Target>,
    /// The last target the evidence rule was sure of: a node that confidently uses the chunk
    /// twice as much as any other, or spread, where the samples rule that out
    /// ([`ChunkState::observe_target`]).
    pub last_sure: Option<Target>,
    pub first_s: f64,
    pub changes: u16,
    /// Targets that held for one cycle only (the next cycle wanted another node, or a node and
    /// spread): each lengthens the chunk's memory ([`ChunkTable::ingest`]). `held`: cycles the
    /// current target has held.
    pub blips: u16,
    held: u16,
    /// The top node and its share before this cycle's samples (a share that just fell is a
    /// phase ending, not a mixed chunk).
    pub prev_top: (NodeIdx, f32),
    /// Whether the evidence rule was sure of that top node ([`super::dominant`]).
    prev_sure: bool,
    /// Decayed accesses per second ([`ChunkState::accesses_per_s`]).
    rate: f32,
    /// Samples of the cycle being ingested.
    fresh: f32,
    /// The latest cycle's samples of the chunk per time bin ([`super::bins`]).
    pub bins: [f32; super::bins::MAX_BINS],
    decay: f64,
}

impl ChunkState {
    /// A chunk with no evidence yet, over `nodes` nodes.
    pub fn new(nodes: usize, decay: f64) -> Self {
        ChunkState {
            by_src: smallvec::smallvec![0.0; nodes],
            by_home: smallvec::smallvec![0.0; nodes],
            placed: None,
            moved_to: None,
            since_move: [0.0; 2],
            failed_moves: 0,
            sole: NO_TID,
            owners: [(NO_TID, 0.0); OWNER_COUNTERS],
            owner_n: 0.0,
            last_want: None,
            last_sure: None,
            first_s: f64::NAN,
            changes: 0,
            blips: 0,
            held: 0,
            prev_top: (NodeIdx(0), 0.0),
            prev_sure: false,
            rate: 0.0,
            bins: [0.0; super::bins::MAX_BINS],
            fresh: 0.0,
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

    /// Estimated accesses per second: the decayed mean of each cycle's samples x period /
    /// cycle length (cycles of other lengths and periods weigh alike).
    pub fn accesses_per_s(&self) -> f64 {
        f64::from(self.rate)
    }

    /// Record this cycle's target (at `now_s`, seconds of management; `sure`: the evidence
    /// rule decided it rather than fell back on the last sure target) and return how long it
    /// is expected to hold: the one change-point rule. With a prior of one period of `prior_s`,
    /// the mean length of the periods between changes of the chunk's users (another node, or a
    /// node and spread) seen so far: `(time watched + prior_s) / (changes + 1)`. Data whose
    /// users never changed is expected to keep them as long as it has been watched, plus the
    /// prior; data whose users alternate with the program's phases (a transpose after local
    /// work), for about one phase, so that a move toward one phase's placement must pay back
    /// within it. A change counts when the evidence is sure of it: sampling noise that leaves
    /// the verdict open changes no user.
    pub fn observe_target(&mut self, want: Target, sure: bool, now_s: f64, prior_s: f64) -> f64 {
        if self.first_s.is_nan() {
            self.first_s = now_s;
        }
        if sure {
            if self.last_sure.is_some_and(|w| w.node() != want.node()) {
                self.changes = self.changes.saturating_add(1);
            }
            self.last_sure = Some(want);
        }
        if self.last_want.is_some_and(|w| w.node() != want.node()) {
            if self.held == 1 {
                self.blips = self.blips.saturating_add(1);
            }
            self.held = 0;
        }
        self.held = self.held.saturating_add(1);
        self.last_want = Some(want);
        self.residency_s(now_s, prior_s)
    }

    /// The expected residency of the chunk's present target ([`ChunkState::observe_target`]).
    pub fn residency_s(&self, now_s: f64, prior_s: f64) -> f64 {
        let first = if self.first_s.is_nan() { now_s } else { self.first_s };
        ((now_s - first).max(0.0) + prior_s) / (f64::from(self.changes) + 1.0)
    }

    /// Whether the chunk's samples since ptb moved it say the move did not take: most of them
    /// (the Wilson lower bound of their share, one standard error) found their page on a node
    /// the move put none of the chunk on. The kernel may refuse a move for a while or for good
    /// (pages under `PROT_NONE` on Linux 6.1, pinned or busy pages, a full node) and the
    /// actuator gives up after its retries; ptb's model of where the chunk lies would then be
    /// wrong from that cycle on. Samples taken while the move was still being carried out count
    /// against it, so a move that took shows at most that part of them.
    pub fn move_failed(&self) -> bool {
        let [on, off] = self.since_move.map(f64::from);
        let n = on + off;
        self.moved_to.is_some() && n > 0.0 && super::wilson_lower(off / n, n, super::EVIDENCE_Z) > 0.5
    }

    /// The thread that makes most of the chunk's accesses, and its share of them: the highest
    /// counter `c` of `k` over `n` samples undercounts its thread by at most `n / (k + 1)`, so
    /// the share lies in `[c / n, c / n + 1 / (k + 1)]`, taken at the middle. Every thread above
    /// a quarter of the samples holds a counter. One counter (the majority vote before) found
    /// only a thread above half, and gave whatever thread held it at least half: Metis wc's
    /// table chunks, 31% their writer's and about 1% each other thread's, were priced as their
    /// node's share, and spreading one made its writer the thread the reduce phase waited for.
    pub fn owner(&self) -> Option<(Tid, f64)> {
        let &(tid, c) = self.owners.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let n = f64::from(self.owner_n);
        (tid < SEVERAL_TIDS && c > 0.0 && n > 0.0)
            .then(|| (tid, (f64::from(c) / n + 0.5 / (OWNER_COUNTERS as f64 + 1.0)).min(1.0)))
    }

    /// Fold one sample of thread `tid` into the owners' counters.
    fn count_owner(&mut self, tid: Tid) {
        self.owner_n += 1.0;
        if let Some(o) = self.owners.iter_mut().find(|o| o.0 == tid && o.1 > 0.0) {
            o.1 += 1.0;
        } else if let Some(o) = self.owners.iter_mut().find(|o| o.1 < 1.0) {
            *o = (tid, 1.0);
        } else {
            for o in self.owners.iter_mut() {
                o.1 -= 1.0;
            }
        }
    }

    /// The thread that alone sampled the chunk in the latest cycle, if one did.
    pub fn sole_tid(&self) -> Option<Tid> {
        (self.sole < SEVERAL_TIDS).then_some(self.sole)
    }

    /// Shares of the accesses by issuing node.
    pub fn src_shares(&self) -> Vec<f64> {
        normalise(&self.by_src.iter().map(|&x| x as f64).collect::<Vec<_>>())
    }
}

/// The node of every sample's page (in the order of `snap.samples`; `None` where the page's
/// node is not known or names no node of the machine), looked up once a cycle for everything
/// that reads it: the page table is the largest structure a cycle reads (a million pages at
/// the bench's goal case), and each lookup is a cache miss. Consecutive samples of one page
/// (a thread's ring holds its samples in order) share one lookup.
pub fn homes_of(snap: &Snapshot) -> Vec<Option<NodeIdx>> {
    let shift = snap.machine.page_size.trailing_zeros();
    let nn = snap.machine.n_nodes();
    let mut last: Option<(ptb_profile::PageKey, Option<NodeIdx>)> = None;
    snap.samples
        .iter()
        .map(|s| {
            let page = ptb_profile::PageKey { app: s.app, vpn: s.addr >> shift };
            match last {
                Some((p, h)) if p == page => h,
                _ => {
                    let h = snap.pages.get(page).filter(|h| h.ix() < nn);
                    last = Some((page, h));
                    h
                }
            }
        })
        .collect()
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
    /// The latest cycle's samples per time bin ([`super::bins`]): how many bins, and per bin
    /// the count from threads on node s (row) to pages on node d (column); `None` with too few
    /// samples for two bins.
    pub cycle_bins: Option<Vec<Vec<Vec<f64>>>>,
    map: HashMap<ChunkKey, Box<ChunkState>, ptb_profile::histogram::FxBuild>,
    /// Chunks ptb moved ahead of a sweep before any sample of them ([`super::sweep`]): the
    /// target and the shares it put their pages on, handed to the chunk when it is first seen
    /// (where they were before is in `origins`).
    ahead: HashMap<ChunkKey, (Target, Counts), ptb_profile::histogram::FxBuild>,
    /// Shares of each moved chunk's pages by node before ptb first moved it (where the data a
    /// sweep has not reached lies: [`super::sweep`]).
    origins: HashMap<ChunkKey, Counts, ptb_profile::histogram::FxBuild>,
    /// Chunks sampled once whose evidence faded (they left `map`): with `map`, every chunk ever
    /// sampled (that a chunk was used is not forgotten).
    faded: std::collections::HashSet<ChunkKey, ptb_profile::histogram::FxBuild>,
    /// Chunks sampled for the first time in the latest cycle.
    first_seen: Vec<ChunkKey>,
    /// The programs with threads in the latest cycle, sorted.
    apps: Vec<AppId>,
}

impl ChunkTable {
    pub fn new(chunk_pages: u64) -> Self {
        ChunkTable {
            chunk_pages: chunk_pages.max(1),
            cycle_bins: None,
            map: HashMap::default(),
            ahead: HashMap::default(),
            origins: HashMap::default(),
            faded: Default::default(),
            first_seen: Vec::new(),
            apps: Vec::new(),
        }
    }

    pub fn chunk_pages(&self) -> u64 {
        self.chunk_pages
    }

    /// Whether the chunk was ever sampled.
    pub fn ever_seen(&self, k: ChunkKey) -> bool {
        self.map.contains_key(&k) || self.faded.contains(&k)
    }

    /// The chunks sampled for the first time in the latest cycle.
    pub fn first_seen(&self) -> &[ChunkKey] {
        &self.first_seen
    }

    /// Whether ptb moved this unseen chunk ahead of a sweep.
    pub fn moved_ahead(&self, k: ChunkKey) -> bool {
        self.ahead.contains_key(&k)
    }

    /// Record a move of a chunk never sampled, ahead of a sweep (`origin`: where its pages
    /// were thought to be): handed to the chunk when it is first sampled.
    pub fn record_ahead(&mut self, k: ChunkKey, t: Target, to: Counts, origin: Counts) {
        self.ahead.insert(k, (t, to));
        self.note_origin(k, origin);
    }

    /// Record where a chunk's pages were before ptb first moved it.
    pub fn note_origin(&mut self, k: ChunkKey, origin: Counts) {
        self.origins.entry(k).or_insert(origin);
    }

    /// Where a chunk's pages were before ptb first moved it, if it did.
    pub fn origin(&self, k: ChunkKey) -> Option<&Counts> {
        self.origins.get(&k)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Decay old evidence, add this cycle's samples, drop chunks whose evidence faded.
    /// Returns the sampled traffic matrix: samples from threads on node s (row) to pages on
    /// node d (column); pages of unknown location count on the thread's node. One pass over
    /// the samples does both.
    #[cfg(test)]
    pub fn ingest(&mut self, snap: &Snapshot, decay: f64, period: u64) -> Vec<Vec<f64>> {
        self.ingest_with(snap, &homes_of(snap), decay, period)
    }

    /// [`Self::ingest`] with the node of every sample's page already looked up ([`homes_of`]).
    pub fn ingest_with(
        &mut self,
        snap: &Snapshot,
        homes: &[Option<NodeIdx>],
        decay: f64,
        period: u64,
    ) -> Vec<Vec<f64>> {
        let m = snap.machine;
        let nn = m.n_nodes();
        let cpu_node = cpu_to_node(m);
        self.forget_gone_apps(snap);
        // Evidence ages with observation, not with time: a node whose threads issued fewer
        // samples per thread this cycle than the others (stalled by page copies, waiting at a
        // barrier) keeps more of what was seen of it. Else a node silent for a cycle would make
        // data every node reads look like the other nodes' own.
        let (mut seen, threads) = (vec![0.0f64; nn], super::threads_per_node(snap));
        // The same pass finds the span of the samples' times for the time bins.
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for s in snap.samples {
            if let Some(&n) = cpu_node.get(s.cpu.0 as usize).filter(|&&n| n != u16::MAX) {
                seen[n as usize] += 1.0;
                lo = lo.min(s.time_ns);
                hi = hi.max(s.time_ns);
            }
        }
        let per_thread = |n: usize| if threads[n] > 0.0 { seen[n] / threads[n] } else { 0.0 };
        let best = (0..nn).map(per_thread).fold(0.0, f64::max);
        let node_decay: Counts = (0..nn)
            .map(
                |n| if best > 0.0 && threads[n] > 0.0 { decay.powf(per_thread(n) / best) as f32 } else { decay as f32 },
            )
            .collect();
        for c in self.map.values_mut() {
            let (top, share) = c.top_node();
            c.prev_top = (top, share as f32);
            c.prev_sure = super::dominant(&c.by_src).is_some();
            c.sole = NO_TID;
            // The memory of who uses a chunk lengthens with every target it held for one cycle
            // only: after k such blips its evidence halves over k + 1 observed cycles, not one.
            // Users seen in one cycle and gone in the next changed faster than ptb decides, so
            // no move can follow them: a burst shorter than a cycle that recurs (one node's
            // short sweep in each iteration of a loop that otherwise shares the data) must count
            // for the share of the accesses it is, and a chunk that looked private by chance
            // needs more evidence to look so again. Users that held for several cycles (phases)
            // are judged on the recent cycles as before.
            let k = 1.0 / (f32::from(c.blips) + 1.0);
            c.by_src.iter_mut().zip(&node_decay).for_each(|(x, d)| *x *= if k < 1.0 { d.powf(k) } else { *d });
            let d = decay as f32;
            c.by_home.iter_mut().for_each(|x| *x *= d);
            c.owners.iter_mut().for_each(|o| o.1 *= d);
            c.owner_n *= d;
            c.bins = [0.0; super::bins::MAX_BINS];
        }
        let bins = super::bins::Clock::of(seen.iter().sum::<f64>() as usize, lo, hi);
        let mut per_bin = vec![vec![vec![0.0; nn]; nn]; bins.map_or(0, |b| b.n)];
        self.first_seen.clear();
        let mut traffic = vec![vec![0.0; nn]; nn];
        let shift = m.page_size.trailing_zeros();
        for (s, &home) in snap.samples.iter().zip(homes) {
            let Some(&src) = cpu_node.get(s.cpu.0 as usize) else { continue };
            if src == u16::MAX {
                continue;
            }
            let key = ChunkKey { app: s.app, chunk: (s.addr >> shift) / self.chunk_pages };
            let dst = home.map_or(src as usize, |h| h.ix());
            traffic[src as usize][dst] += 1.0;
            let bin = bins.map(|b| b.bin(s.time_ns));
            if let Some(b) = bin {
                per_bin[b][src as usize][dst] += 1.0;
            }
            let (ahead, faded, first_seen) = (&mut self.ahead, &mut self.faded, &mut self.first_seen);
            let c = self.map.entry(key).or_insert_with(|| {
                if faded.is_empty() || !faded.remove(&key) {
                    first_seen.push(key);
                }
                let mut c = Box::new(ChunkState::new(nn, decay));
                if let Some((t, to)) = if ahead.is_empty() { None } else { ahead.remove(&key) } {
                    c.placed = Some(t);
                    c.moved_to = Some(to);
                }
                c
            });
            c.by_src[src as usize] += 1.0;
            c.fresh += 1.0;
            if let Some(b) = bin {
                c.bins[b] += 1.0;
            }
            c.sole = if c.sole == NO_TID || c.sole == s.tid { s.tid } else { SEVERAL_TIDS };
            c.count_owner(s.tid);
            if let Some(h) = home {
                c.by_home[h.ix()] += 1.0;
                if let Some(to) = &c.moved_to {
                    c.since_move[usize::from(to.get(h.ix()).is_none_or(|&x| x <= 0.0))] += 1.0;
                }
            }
        }
        self.cycle_bins = bins.map(|_| per_bin);
        let scale = period as f64 / snap.cycle.as_secs_f64().max(1e-6);
        for c in self.map.values_mut() {
            let now = (f64::from(c.fresh) * scale) as f32;
            c.rate =
                if c.rate == 0.0 && c.fresh > 0.0 { now } else { decay as f32 * c.rate + (1.0 - decay as f32) * now };
            c.fresh = 0.0;
        }
        // (A program that went leaves nothing behind: its chunks fade from `map` and are not
        // remembered.)
        let (faded, apps) = (&mut self.faded, &self.apps);
        self.map.retain(|k, c| {
            let keep = c.total() >= 0.05;
            if !keep && apps.binary_search(&k.app).is_ok() {
                faded.insert(*k);
            }
            keep
        });
        traffic
    }

    /// Forget which chunks were ever sampled, which were moved ahead of a sweep and where
    /// moved chunks came from, for the programs that have no thread any more (the daemon
    /// outlives the programs it manages; their evidence fades on its own, and is then not
    /// remembered as faded). Runs only when a program went.
    fn forget_gone_apps(&mut self, snap: &Snapshot) {
        let mut live: Vec<AppId> = snap.threads.iter().map(|t| t.app).collect();
        live.sort_unstable();
        live.dedup();
        if self.apps.iter().any(|a| live.binary_search(a).is_err()) {
            self.faded.retain(|k| live.binary_search(&k.app).is_ok());
            self.ahead.retain(|k, _| live.binary_search(&k.app).is_ok());
            self.origins.retain(|k, _| live.binary_search(&k.app).is_ok());
        }
        self.apps = live;
    }

    /// Keys of chunks with at least `min` decayed samples, heaviest first (ties by key, so
    /// the order is deterministic).
    pub fn keys_by_weight(&self, min: f64) -> Vec<ChunkKey> {
        let mut v: Vec<(ChunkKey, f64)> =
            self.map.iter().map(|(k, c)| (*k, c.total())).filter(|(_, t)| *t >= min).collect();
        v.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter().map(|(k, _)| k).collect()
    }

    /// Keys of chunks with evidence under `min` decayed samples, in no particular order.
    pub fn keys_below(&self, min: f64) -> impl Iterator<Item = ChunkKey> + '_ {
        self.map.iter().filter(move |(_, c)| c.total() < min).map(|(k, _)| *k)
    }

    /// Share of the evidence (decayed samples) on chunks whose dominant user the evidence rule
    /// was sure of ([`super::dominant`]) and that lost it since the last cycle: another top
    /// node, or a top share fallen by more than a quarter. A high share is a new phase. Chunks
    /// without a sure dominant user do not count: their top node changes with sampling noise.
    /// (Counted from a top share of half, a few samples of data every node reads, such as
    /// canneal's netlist, made one node the top by chance and lost it the next cycle: half of
    /// the evidence "shifted" in a steady phase, and each such false phase threw away the
    /// overlap estimate: canneal with 16 threads on the 8-node Opteron went from 2.2 back to
    /// the prior of 6 after 0.25 s, simulated.)
    pub fn shifted_share(&self) -> f64 {
        let (mut all, mut moved) = (0.0, 0.0);
        for c in self.map.values() {
            if c.prev_top.1 <= 0.0 {
                continue;
            }
            let t = c.total();
            all += t;
            if c.prev_sure && c.lost_top() {
                moved += t;
            }
        }
        if all > 0.0 {
            moved / all
        } else {
            0.0
        }
    }

    /// Forget who uses the chunks of `app` (its threads moved: the evidence names the nodes
    /// they left) and the history of their targets; where their pages are (sampled, and where
    /// ptb moved them) is kept.
    pub fn forget_users(&mut self, app: AppId) {
        for (k, c) in self.map.iter_mut() {
            if k.app == app {
                let nn = c.by_src.len();
                **c = ChunkState {
                    by_home: std::mem::take(&mut c.by_home),
                    moved_to: c.moved_to.take(),
                    ..ChunkState::new(nn, c.decay)
                };
            }
        }
    }

    /// Forget where the chunks of `app` were last moved to (its spread weights changed: a chunk
    /// spread with the old ones is not where its target now says); each is then compared with
    /// its target again, and left alone where it is within the tolerance of it.
    pub fn forget_placed(&mut self, app: AppId) {
        for (k, c) in self.map.iter_mut() {
            if k.app == app {
                c.placed = None;
            }
        }
        self.ahead.retain(|k, _| k.app != app);
    }

    /// Every chunk's state, in no particular order.
    pub fn states(&self) -> impl Iterator<Item = &ChunkState> {
        self.map.values().map(|c| &**c)
    }

    pub fn get(&self, k: ChunkKey) -> Option<&ChunkState> {
        self.map.get(&k).map(|c| &**c)
    }

    pub fn get_mut(&mut self, k: ChunkKey) -> Option<&mut ChunkState> {
        self.map.get_mut(&k).map(|c| &mut **c)
    }

    /// The chunk's page range within its program's regions (None: in none of them). A mapping
    /// split into pieces (by `mprotect` of part of it, or neighbouring mappings) covers the chunk
    /// in pieces that meet end to end; the range spans the longest run of such pieces, so that a
    /// move takes the whole chunk, not whichever piece comes first (a program that re-protects a
    /// quarter of its buffer at a time had a 512-page chunk moved as 5 to 313 pages, whatever
    /// its mappings were at that instant).
    pub fn range_of(&self, k: ChunkKey, regions: &[Region]) -> Option<Range> {
        let lo = k.chunk * self.chunk_pages;
        chunk_range(k.app, lo, lo + self.chunk_pages, regions).map(|(s, e)| Range { start_vpn: s, npages: e - s })
    }
}

/// The part `[start, end)` of the pages `[lo, hi)` of program `app` that its regions hold: the
/// longest run of the regions' pieces of it that meet end to end ([`ChunkTable::range_of`]).
pub(crate) fn chunk_range(app: AppId, lo: u64, hi: u64, regions: &[Region]) -> Option<(u64, u64)> {
    let mut pieces = regions
        .iter()
        .filter(|r| r.app == app && r.start_vpn < hi && lo < r.start_vpn.saturating_add(r.npages))
        .map(|r| (lo.max(r.start_vpn), hi.min(r.start_vpn.saturating_add(r.npages))));
    let first = pieces.next()?;
    let mut all: Vec<(u64, u64)> = pieces.collect();
    if all.is_empty() {
        return Some(first);
    }
    all.push(first);
    all.sort_unstable();
    let (mut best, mut run) = (all[0], all[0]);
    for &(s, e) in &all[1..] {
        if s <= run.1 {
            run.1 = run.1.max(e);
        } else {
            run = (s, e);
        }
        if run.1 - run.0 > best.1 - best.0 {
            best = run;
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk whose samples come from `tids` in turn (interleaved, as the threads run).
    fn sampled(tids: impl Iterator<Item = Tid>) -> ChunkState {
        let mut c = ChunkState::new(2, 0.5);
        tids.for_each(|t| c.count_owner(t));
        c
    }

    #[test]
    fn the_owner_sketch_finds_a_thread_above_a_quarter_and_prices_its_share() {
        // A private chunk: its thread, all of it.
        assert_eq!(sampled(std::iter::repeat_n(7, 40)).owner(), Some((7, 1.0)));
        // Metis wc's table chunk in reduce: its writer 31 of every 100 samples, the other 69
        // from 63 other threads in turn. The writer is found, its share within the bound.
        let wc = (0..1000u32).map(|i| if i % 100 < 31 { 5 } else { 100 + (i * 7) % 63 });
        let (tid, share) = sampled(wc).owner().expect("an owner");
        assert_eq!(tid, 5);
        assert!((0.31 - 0.25..=0.31 + 0.01).contains(&share), "{share}");
        // Read by 64 threads alike: no owner, or whatever thread holds the top counter gets a
        // share near the bound's slack, not the half the majority vote gave it.
        for n in [1000u32, 1001, 1002, 1003] {
            let owner = sampled((0..n).map(|i| i % 64)).owner();
            assert!(owner.is_none_or(|(_, share)| share < 0.15), "{owner:?}");
        }
    }
}

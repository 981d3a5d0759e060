//! AsymSched measurement: per-thread and per-application accesses by memory node, the pages
//! sampled this cycle, clusters of threads that share data, and where each thread goes.
//!
//! Problem: the paper counts, per CPU, the accesses to each node (cache and DRAM traffic of
//! other nodes, not the CPU's own cache hits), groups an application's threads into clusters
//! that share data (threads of one application on one node are assumed to share, and so does
//! a CPU with heavy traffic to a node with that application's threads there), packs each
//! application onto as few nodes as it needs, and weights each cluster by its remote traffic.
//! An IBS op sampler tags cache hits too (most of its samples), so the raw samples overstate
//! traffic where the data sits in a cache; and this runs every second on up to a million
//! samples, so it must be one pass with no per-sample allocation.
//!
//! Approach:
//! - [`Measure`]: one pass over the samples that went to memory (the data source says so;
//!   all samples when the source gives none), counting per thread and per application by
//!   memory node, and per sampled page its count and the mask of the nodes its sampling
//!   threads run on (hash map keyed by page, pages kept in arrival order).
//! - [`clusters`]: the threads of an application on one node form a cluster; an application
//!   spread over more nodes than it needs (`ceil(threads / CPUs per node)`) is packed by
//!   merging its smallest cluster into the one it shares the most sampled pages with (while
//!   that has room). Weight of a cluster: `ln(1 + remote MB/s)` (the paper's `log(C_rbw)`).
//! - [`assign`]: once the search gave an application its node set, each thread gets a node of
//!   the set, at most a node's CPUs per node: pairs (thread, node) are taken by decreasing
//!   preference, where the preference is the thread's sampled accesses to memory on that node,
//!   doubled plus a small bonus for the node it runs on now (a thread moves to its data only
//!   on clear evidence, and otherwise stays). Threads of one node that share data thus stay
//!   together, and a thread whose data lives on another node of the set joins the threads
//!   there.

use crate::snapshot::Snapshot;
use ptb_profile::histogram::FxBuild;
use ptb_profile::{AppId, PageKey};
use ptb_topology::NodeIdx;
use std::collections::{BTreeMap, HashMap};

/// One sampled page: how many samples hit it this cycle (cache hits included: IBS tags
/// every memory op, and a hit is a use of the page too), the nodes its sampling threads run on
/// (bit per node index), and the node it lives on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PageUse {
    pub key: PageKey,
    pub count: u32,
    /// Bit `i`: a thread running on node `i` sampled it.
    pub on: u64,
    pub node: Option<NodeIdx>,
}

/// What the samples of one cycle say.
#[derive(Clone, Debug, Default)]
pub struct Measure {
    /// Per thread (index into `snap.threads`): memory samples by memory node.
    pub by_thread: Vec<Vec<u64>>,
    /// Per application: memory samples by memory node.
    pub by_app: BTreeMap<AppId, Vec<u64>>,
    /// Sampled pages, in the order of their first sample.
    pub pages: Vec<PageUse>,
    /// Samples that went to memory (the others hit a cache).
    pub memory_samples: u64,
    /// Samples of managed threads in all.
    pub samples: u64,
}

impl Measure {
    pub fn from_snapshot(snap: &Snapshot) -> Self {
        let m = snap.machine;
        let nn = m.n_nodes();
        let mut out = Measure { by_thread: vec![vec![0; nn]; snap.threads.len()], ..Measure::default() };
        let ix: HashMap<u32, usize, FxBuild> = snap.threads.iter().enumerate().map(|(i, t)| (t.tid, i)).collect();
        // Sized once for the cycle's samples (a page per sample at most): no rehash while
        // counting.
        let room = snap.samples.len().min(1 << 22);
        let mut page_ix: HashMap<PageKey, u32, FxBuild> = HashMap::with_capacity_and_hasher(room, FxBuild::default());
        out.pages.reserve(room);
        let mut app_ix: Vec<(AppId, Vec<u64>)> = Vec::new();
        for s in snap.samples {
            let Some(&t) = ix.get(&s.tid) else { continue };
            let th = &snap.threads[t];
            if s.app != th.app {
                continue;
            }
            out.samples += 1;
            let key = s.page(m.page_size);
            let node = snap.pages.get(key).filter(|n| n.ix() < nn);
            if s.is_memory_access() {
                out.memory_samples += 1;
                if let Some(n) = node {
                    out.by_thread[t][n.ix()] += 1;
                    let a = match app_ix.iter().position(|(a, _)| *a == th.app) {
                        Some(a) => a,
                        None => {
                            app_ix.push((th.app, vec![0; nn]));
                            app_ix.len() - 1
                        }
                    };
                    app_ix[a].1[n.ix()] += 1;
                }
            }
            let bit = if th.node.ix() < 64 { 1u64 << th.node.ix() } else { 0 };
            let i = *page_ix.entry(key).or_insert_with(|| {
                out.pages.push(PageUse { key, count: 0, on: 0, node });
                (out.pages.len() - 1) as u32
            });
            let p = &mut out.pages[i as usize];
            p.count = p.count.saturating_add(1);
            p.on |= bit;
        }
        out.by_app = app_ix.into_iter().collect();
        out
    }
}

/// A group of threads of one application that share data, placed together on one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub app: AppId,
    /// Indices into `snap.threads`.
    pub threads: Vec<usize>,
    /// Node it runs on now (of its largest part, after packing).
    pub node: NodeIdx,
    /// Nodes its threads run on now (more than one after packing).
    pub parts: Vec<NodeIdx>,
    /// Memory samples to other nodes than `node`.
    pub remote: u64,
    /// Memory samples in all.
    pub accesses: u64,
}

/// Build the clusters: threads of an app on one node, then packed onto as few nodes as the
/// app needs (`capacity` threads per node). Sorted by (app, node).
pub fn clusters(snap: &Snapshot, meas: &Measure, capacity: usize) -> Vec<Cluster> {
    let nn = snap.machine.n_nodes();
    let mut by: BTreeMap<(AppId, NodeIdx), Vec<usize>> = BTreeMap::new();
    for (i, t) in snap.threads.iter().enumerate() {
        by.entry((t.app, t.node)).or_default().push(i);
    }
    let mut per_app: BTreeMap<AppId, Vec<Cluster>> = BTreeMap::new();
    for ((app, node), threads) in by {
        per_app.entry(app).or_default().push(Cluster { app, threads, node, parts: vec![node], remote: 0, accesses: 0 });
    }
    // Sampled pages shared between the threads of an app on two nodes (node pairs per page).
    let mut share: BTreeMap<AppId, Vec<u64>> = BTreeMap::new();
    for p in &meas.pages {
        if p.on.count_ones() < 2 {
            continue;
        }
        let v = share.entry(p.key.app).or_insert_with(|| vec![0; nn * nn]);
        let nodes: Vec<usize> = (0..nn.min(64)).filter(|i| p.on >> i & 1 == 1).collect();
        for (i, &a) in nodes.iter().enumerate() {
            for &b in &nodes[i + 1..] {
                v[a * nn + b] += 1;
            }
        }
    }
    let cap = capacity.max(1);
    let mut out = Vec::new();
    for (app, mut cs) in per_app {
        let sh = share.get(&app);
        let shared = |a: &Cluster, b: &Cluster| -> u64 {
            let Some(v) = sh else { return 0 };
            a.parts
                .iter()
                .flat_map(|&x| b.parts.iter().map(move |&y| (x.ix().min(y.ix()), x.ix().max(y.ix()))))
                .map(|(x, y)| v[x * nn + y])
                .sum()
        };
        let total: usize = cs.iter().map(|c| c.threads.len()).sum();
        let needed = total.div_ceil(cap);
        // Merge the smallest cluster into the best-sharing one with room, while the app uses
        // more nodes than it needs.
        while cs.len() > needed {
            cs.sort_by_key(|c| (std::cmp::Reverse(c.threads.len()), c.node));
            let small = cs.pop().expect("len > needed >= 1");
            let target = cs
                .iter()
                .enumerate()
                .filter(|(_, c)| c.threads.len() + small.threads.len() <= cap)
                .max_by_key(|(i, c)| (shared(c, &small), c.threads.len(), std::cmp::Reverse(*i)))
                .map(|(i, _)| i);
            match target {
                Some(i) => {
                    cs[i].threads.extend(small.threads);
                    cs[i].parts.extend(small.parts);
                }
                None => {
                    // No cluster has room for it whole (greedy packing fragmented the
                    // room): split it, thread by thread, into the best-sharing clusters with
                    // room. The others hold at most `total - small` threads in at least
                    // `needed` clusters, so their room is at least `small`'s size.
                    let probe = Cluster { threads: vec![], ..small.clone() };
                    let mut left = Vec::new();
                    for t in small.threads {
                        let best = cs
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| c.threads.len() < cap)
                            .max_by_key(|(i, c)| (shared(c, &probe), c.threads.len(), std::cmp::Reverse(*i)))
                            .map(|(i, _)| i);
                        match best {
                            Some(i) => {
                                cs[i].threads.push(t);
                                for p in &probe.parts {
                                    if !cs[i].parts.contains(p) {
                                        cs[i].parts.push(*p);
                                    }
                                }
                            }
                            None => left.push(t),
                        }
                    }
                    if !left.is_empty() {
                        cs.push(Cluster { threads: left, ..probe });
                        break;
                    }
                }
            }
        }
        out.extend(cs);
    }
    // Remote traffic of each cluster relative to the node it is judged from.
    for c in &mut out {
        c.threads.sort_unstable();
        for &t in &c.threads {
            let v = &meas.by_thread[t];
            let all: u64 = v.iter().sum();
            c.accesses += all;
            c.remote += all - v.get(c.node.ix()).copied().unwrap_or(0);
        }
    }
    out.sort_by_key(|c| (c.app, c.node));
    out
}

/// Place the threads `threads` (indices into `snap.threads`) on the nodes of `set`, at most
/// `room[node]` per node (see the module docs). Returns the node of each, in order.
pub fn assign(snap: &Snapshot, meas: &Measure, threads: &[usize], set: &[NodeIdx], room: &mut [usize]) -> Vec<NodeIdx> {
    /// Samples a thread's data must show on another node before it leaves its own.
    const STAY_BONUS: u64 = 4;
    let mut pairs: Vec<(u64, usize, NodeIdx)> = Vec::with_capacity(threads.len() * set.len());
    for (k, &t) in threads.iter().enumerate() {
        let here = snap.threads[t].node;
        for &n in set {
            let acc = meas.by_thread[t].get(n.ix()).copied().unwrap_or(0);
            let pref = if n == here { 2 * acc + STAY_BONUS } else { acc };
            pairs.push((pref, k, n));
        }
    }
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut out: Vec<Option<NodeIdx>> = vec![None; threads.len()];
    for (pref, k, n) in pairs {
        if pref == 0 || out[k].is_some() || room[n.ix()] == 0 {
            continue;
        }
        room[n.ix()] -= 1;
        out[k] = Some(n);
    }
    // The rest: the node of the set with the most room left (node order on ties).
    for o in out.iter_mut().filter(|o| o.is_none()) {
        let n = *set.iter().max_by_key(|n| (room[n.ix()], std::cmp::Reverse(**n))).expect("set is not empty");
        room[n.ix()] = room[n.ix()].saturating_sub(1);
        *o = Some(n);
    }
    out.into_iter().map(|o| o.expect("every thread placed")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autonuma::test_world::World;
    use ptb_profile::SampleKind::Load;

    #[test]
    fn fragmented_room_still_packs_onto_the_nodes_needed() {
        // 24 threads spread by Linux as 2,3,3,4,6,1,3,2 over 8 nodes of 8 CPUs: whole-cluster
        // merging alone can strand clusters (6+2, 4+3, 3+3, then 2 and 1 fit nowhere); the app
        // still gets 3 clusters of at most 8 threads, every thread in exactly one.
        let mut w = World::synthetic("nodes=8,cpus=8");
        let mut tid = 1;
        for (node, n) in [2u32, 3, 3, 4, 6, 1, 3, 2].iter().enumerate() {
            for k in 0..*n {
                w.add_thread(tid, 0, node as u32 * 8 + k);
                tid += 1;
            }
        }
        let snap = w.snap();
        let cs = clusters(&snap, &Measure::from_snapshot(&snap), 8);
        assert_eq!(cs.len(), 3, "{cs:?}");
        assert!(cs.iter().all(|c| c.threads.len() <= 8));
        let mut all: Vec<usize> = cs.iter().flat_map(|c| c.threads.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..24).collect::<Vec<_>>());
    }

    #[test]
    fn packs_an_app_onto_as_few_nodes_as_it_needs_following_sharing() {
        // One thread per node on 4 nodes; 2 CPUs per node, so 2 clusters suffice. Threads on
        // nodes 0 and 2 share pages, and so do those on nodes 1 and 3.
        let mut w = World::synthetic("nodes=4,cpus=2");
        for n in 0..4u32 {
            w.add_thread(n + 1, 0, n * 2);
        }
        w.place(0, 0..20, 0);
        for v in 0..10 {
            w.touch(1, v, Load);
            w.touch(3, v, Load);
            w.touch(2, 10 + v, Load);
            w.touch(4, 10 + v, Load);
        }
        let snap = w.snap();
        let meas = Measure::from_snapshot(&snap);
        let cs = clusters(&snap, &meas, 2);
        let mut groups: Vec<Vec<usize>> = cs.iter().map(|c| c.threads.clone()).collect();
        groups.sort();
        assert_eq!(groups, vec![vec![0, 2], vec![1, 3]]);
        let total: u64 = cs.iter().map(|c| c.accesses).sum();
        assert_eq!(total, 40);
        // Two apps never share a cluster.
        w.add_thread(9, 1, 1);
        let snap = w.snap();
        let cs = clusters(&snap, &Measure::from_snapshot(&snap), 2);
        assert!(cs.iter().all(|c| c.threads.iter().all(|&t| (snap.threads[t].tid == 9) == (c.app == 1))));
    }

    #[test]
    fn cache_hits_are_not_memory_traffic() {
        let mut w = World::synthetic("nodes=2,cpus=2");
        w.add_thread(1, 0, 0);
        w.place(0, 0..4, 1);
        for v in 0..4 {
            w.touch(1, v, Load);
        }
        w.samples[0].data_src = Some(ptb_profile::datasrc::encode(ptb_profile::datasrc::MemLevel::Cache, false));
        w.samples[1].data_src = Some(ptb_profile::datasrc::encode(ptb_profile::datasrc::MemLevel::RemoteDram, false));
        let meas = Measure::from_snapshot(&w.snap());
        assert_eq!(meas.memory_samples, 3);
        assert_eq!(meas.samples, 4);
        assert_eq!(meas.by_thread[0], vec![0, 3]);
        assert_eq!(meas.by_app[&0], vec![0, 3]);
        // The hit still says the page is in use.
        assert_eq!(meas.pages.len(), 4);
        assert!(meas.pages.iter().all(|p| p.on == 1 && p.node == Some(NodeIdx(1))));
    }

    #[test]
    fn threads_join_their_data_within_the_set_and_respect_room() {
        // Nodes 0 and 1, 2 CPUs each. Thread a (on node 0) reads node 1 heavily; b and c (on
        // node 1) read nothing; d (on node 0) reads node 0.
        let mut w = World::synthetic("nodes=2,cpus=2");
        w.add_thread(1, 0, 0);
        w.add_thread(2, 0, 2);
        w.add_thread(3, 0, 3);
        w.add_thread(4, 0, 1);
        w.place(0, 0..10, 1);
        w.place(0, 10..20, 0);
        (0..10).for_each(|v| w.touch(1, v, Load));
        (10..15).for_each(|v| w.touch(4, v, Load));
        let snap = w.snap();
        let meas = Measure::from_snapshot(&snap);
        let set = [NodeIdx(0), NodeIdx(1)];
        let mut room = vec![2, 2];
        let got = assign(&snap, &meas, &[0, 1, 2, 3], &set, &mut room);
        assert_eq!(got[0], NodeIdx(1), "a goes to its data");
        assert_eq!(got[3], NodeIdx(0), "d stays by its data");
        assert_eq!(got.iter().filter(|n| **n == NodeIdx(0)).count(), 2);
        assert_eq!(got.iter().filter(|n| **n == NodeIdx(1)).count(), 2);
        assert_eq!(room, vec![0, 0]);
        // Weak evidence does not move a thread: 3 samples elsewhere vs none here.
        let mut w2 = World::synthetic("nodes=2,cpus=2");
        w2.add_thread(1, 0, 0);
        w2.place(0, 0..3, 1);
        (0..3).for_each(|v| w2.touch(1, v, Load));
        let snap = w2.snap();
        let meas = Measure::from_snapshot(&snap);
        assert_eq!(assign(&snap, &meas, &[0], &set, &mut [2, 2]), vec![NodeIdx(0)]);
    }
}

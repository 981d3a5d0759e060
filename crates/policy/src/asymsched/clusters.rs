//! AsymSched measurement: per-application access counts by node, and clusters of threads
//! that share data.
//!
//! A cluster starts as the threads of one application on one node (the paper assumes they
//! share). An application spread over more nodes than its threads need is then packed:
//! its smallest clusters merge into the cluster they share the most sampled pages with
//! (while it has room for them), so that each application uses as few nodes as possible.

use crate::snapshot::Snapshot;
use ptb_profile::{AppId, PageKey, Tid};
use ptb_topology::NodeIdx;
use std::collections::{BTreeMap, BTreeSet};

/// A group of threads of one application placed together on one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub app: AppId,
    pub threads: Vec<Tid>,
    /// Node it runs on now (of its largest part, after packing).
    pub node: NodeIdx,
    /// Nodes its threads run on now (more than one after packing).
    pub parts: Vec<NodeIdx>,
    /// Sampled accesses to memory on other nodes than `node`.
    pub remote: u64,
    /// Sampled accesses in all.
    pub accesses: u64,
}

/// The threads that touched a sampled page (sorted, unique) and the page's node.
pub type PageUse = (Vec<Tid>, Option<NodeIdx>);

/// What the samples of one cycle say.
#[derive(Clone, Debug, Default)]
pub struct Measure {
    /// Per application: sampled accesses by memory node.
    pub by_app_mem: BTreeMap<AppId, Vec<u64>>,
    /// Per sampled page: the threads that touched it (sorted, unique) and its node.
    pub pages: BTreeMap<PageKey, PageUse>,
    /// Per thread: sampled accesses by memory node.
    pub by_thread_mem: BTreeMap<Tid, Vec<u64>>,
}

impl Measure {
    pub fn from_snapshot(snap: &Snapshot) -> Self {
        let m = snap.machine;
        let nn = m.n_nodes();
        let mut out = Measure::default();
        let app_of: std::collections::HashMap<Tid, AppId> = snap.threads.iter().map(|t| (t.tid, t.app)).collect();
        // (page, tid) pairs, sorted and unique: one entry per page with its threads.
        let mut pairs: Vec<(PageKey, Tid)> = Vec::with_capacity(snap.samples.len());
        for s in snap.samples {
            let Some(&app) = app_of.get(&s.tid) else { continue };
            let page = s.page(m.page_size);
            pairs.push((page, s.tid));
            if let Some(n) = snap.pages.get(page).filter(|n| n.ix() < nn) {
                out.by_app_mem.entry(app).or_insert_with(|| vec![0; nn])[n.ix()] += 1;
                out.by_thread_mem.entry(s.tid).or_insert_with(|| vec![0; nn])[n.ix()] += 1;
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        let mut grouped: Vec<(PageKey, PageUse)> = Vec::new();
        for (page, tid) in pairs {
            match grouped.last_mut() {
                Some((p, (ts, _))) if *p == page => ts.push(tid),
                _ => grouped.push((page, (vec![tid], snap.pages.get(page).filter(|n| n.ix() < nn)))),
            }
        }
        out.pages = grouped.into_iter().collect();
        out
    }
}

/// Build the clusters: threads of an app on one node, then packed onto as few nodes as the
/// app needs (`capacity` threads per node).
pub fn clusters(snap: &Snapshot, meas: &Measure, capacity: usize) -> Vec<Cluster> {
    let mut by: BTreeMap<(AppId, NodeIdx), Vec<Tid>> = BTreeMap::new();
    for t in snap.threads {
        by.entry((t.app, t.node)).or_default().push(t.tid);
    }
    let mut per_app: BTreeMap<AppId, Vec<Cluster>> = BTreeMap::new();
    for ((app, node), threads) in by {
        per_app.entry(app).or_default().push(Cluster { app, threads, node, parts: vec![node], remote: 0, accesses: 0 });
    }
    // Which nodes' threads of an app share sampled pages (node pairs counted per page; at
    // most N(N-1)/2 pairs per page however many threads touch it).
    let node_of: BTreeMap<Tid, (AppId, NodeIdx)> = snap.threads.iter().map(|t| (t.tid, (t.app, t.node))).collect();
    let mut share: BTreeMap<(AppId, NodeIdx, NodeIdx), u64> = BTreeMap::new();
    for (ts, _) in meas.pages.values() {
        let on: BTreeSet<(AppId, NodeIdx)> = ts.iter().filter_map(|t| node_of.get(t)).copied().collect();
        let on: Vec<(AppId, NodeIdx)> = on.into_iter().collect();
        for (i, &(app, a)) in on.iter().enumerate() {
            for &(app2, b) in &on[i + 1..] {
                if app2 == app {
                    *share.entry((app, a, b)).or_default() += 1;
                }
            }
        }
    }
    let shared = |a: &Cluster, b: &Cluster| -> u64 {
        a.parts
            .iter()
            .flat_map(|&x| b.parts.iter().map(move |&y| (a.app, x.min(y), x.max(y))))
            .map(|k| share.get(&k).copied().unwrap_or(0))
            .sum()
    };
    let cap = capacity.max(1);
    let mut out = Vec::new();
    for (_, mut cs) in per_app {
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
                    cs.push(small);
                    break;
                }
            }
        }
        out.extend(cs);
    }
    // Remote traffic of each cluster relative to the node it will be judged from.
    let members: BTreeSet<Tid> = snap.threads.iter().map(|t| t.tid).collect();
    for c in &mut out {
        c.threads.sort_unstable();
        for t in c.threads.iter().filter(|t| members.contains(t)) {
            if let Some(v) = meas.by_thread_mem.get(t) {
                let all: u64 = v.iter().sum();
                c.accesses += all;
                c.remote += all - v[c.node.ix()];
            }
        }
    }
    out.sort_by_key(|c| (c.app, c.node));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autonuma::test_world::World;
    use ptb_profile::SampleKind::Load;

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
        let mut groups: Vec<Vec<Tid>> = cs.iter().map(|c| c.threads.clone()).collect();
        groups.sort();
        assert_eq!(groups, vec![vec![1, 3], vec![2, 4]]);
        // All pages are on node 0: a cluster judged from node 0 has its part there local.
        let total: u64 = cs.iter().map(|c| c.accesses).sum();
        assert_eq!(total, 40);
        // Two apps never share a cluster.
        w.add_thread(9, 1, 1);
        let snap = w.snap();
        let cs = clusters(&snap, &Measure::from_snapshot(&snap), 2);
        assert!(cs.iter().all(|c| c.threads.iter().all(|&t| (t == 9) == (c.app == 1))));
    }
}

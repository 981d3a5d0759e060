//! Where `ptb` runs its threads.
//!
//! Problem: Linux's scheduler moves threads nobody pinned between nodes (wake-up placement,
//! load balancing), so a thread soon runs far from the data it first touched, and pages moved
//! to a thread are left behind at its next migration: locality does not hold without pins.
//!
//! Approach: every managed thread is pinned to one node (a node, not a CPU: the kernel still
//! balances within it); the number of threads on a node changes only when the model moves a
//! program to other nodes ([`super::layout`]).
//! - **Nodes of their own** ([`app_nodes`]): each program, largest first, gets the
//!   best-connected set of free nodes whose CPUs hold its threads ([`super::nodesets`]); the
//!   nodes no program needs are every program's to grow into. When the programs do not fit on
//!   nodes of their own they share every allowed node with CPUs; when the threads outnumber
//!   the CPUs every program runs on every node (each node's CPUs time-shared by a block of
//!   each program): a program that ends early then leaves no node idle, and each keeps its
//!   data local, which unpinned threads the scheduler carries between nodes do not.
//! - **Blocks** ([`blocks_with`]): a program's threads, in tid order, are cut into contiguous
//!   blocks over its nodes, sized by their CPUs. Threads with neighbouring ids (which share the
//!   edges of their slices in a domain decomposition, as OpenMP's `proc_bind(close)` assumes)
//!   run together. A thread first seen later stays on its node if that is one of its program's
//!   with a CPU free of pins, else goes to its program's node with the fewest pinned threads
//!   per CPU; a program whose nodes are full grows by its next free node.
//! - **Re-layout** ([`ThreadPins::relayout`]): when the model moves a program to other nodes,
//!   each node keeps as many of its threads as its new share allows; only the others move.
//! - **Swaps** ([`ThreadPins::swaps`]): a thread whose sampled accesses go to pages on another
//!   node by the evidence rule ([`super::dominant`]) trades places with a thread of that node
//!   whose data is, in the same sense, on the first one's node: both come home, and no node
//!   gains a thread. Data no swap can serve is brought to its thread by the page moves.

use crate::plan::{ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, ThreadState};
use ptb_profile::{AppId, Tid};
use ptb_topology::{GroupIdx, Machine, NodeIdx, NodeSet};
use std::collections::BTreeMap;

/// Allowed nodes with CPUs, with their CPU counts.
fn cpu_nodes(m: &Machine, allowed: &NodeSet) -> Vec<(NodeIdx, usize)> {
    m.nodes.iter().filter(|n| n.has_cpus() && allowed.contains_idx(n.idx)).map(|n| (n.idx, n.cpus.len())).collect()
}

/// How many of `n` threads each node gets: in proportion to its CPUs, largest remainders first
/// (ties to the lower node).
fn quotas(nodes: &[(NodeIdx, usize)], n: usize) -> Vec<usize> {
    let cpus: Vec<usize> = nodes.iter().map(|x| x.1).collect();
    by_cpus(&cpus, n)
}

/// How many of `n` threads each of some CPU sets with `cpus` CPUs gets: in proportion to its
/// CPUs, largest remainders first (ties to the earlier set).
pub fn by_cpus(cpus: &[usize], n: usize) -> Vec<usize> {
    let total: usize = cpus.iter().sum();
    if total == 0 {
        return vec![0; cpus.len()];
    }
    let mut q: Vec<usize> = cpus.iter().map(|c| n * c / total).collect();
    let mut rest: Vec<(usize, usize)> = cpus.iter().enumerate().map(|(i, c)| (n * c % total, i)).collect();
    rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = n - q.iter().sum::<usize>();
    for &(_, i) in rest.iter().take(left) {
        q[i] += 1;
    }
    q
}

/// Where each program's threads may run: its nodes in the order it takes them
/// ([`super::nodesets::order`]) and how many of them it uses now.
#[derive(Clone, Debug, PartialEq)]
pub struct AppNodes {
    pub order: Vec<NodeIdx>,
    /// Nodes in use: the first `k` of `order`.
    pub k: usize,
    /// Fewest nodes whose CPUs hold the program's threads.
    pub k_min: usize,
}

impl AppNodes {
    pub fn nodes(&self) -> &[NodeIdx] {
        &self.order[..self.k.min(self.order.len())]
    }
}

/// Every program's nodes, or `None` when the programs do not fit on nodes of their own
/// (they then share every allowed node in contiguous blocks, [`blocks`]). Programs are placed
/// largest first, each on the best-connected set of free nodes that holds its threads; the
/// nodes no program needs are every program's to grow into.
pub fn app_nodes(m: &Machine, allowed: &NodeSet, threads: &[ThreadState]) -> Option<BTreeMap<AppId, AppNodes>> {
    let nodes = cpu_nodes(m, allowed);
    let mut count: BTreeMap<AppId, usize> = BTreeMap::new();
    for t in threads {
        *count.entry(t.app).or_default() += 1;
    }
    if count.is_empty() || nodes.is_empty() {
        return None;
    }
    if count.values().sum::<usize>() > nodes.iter().map(|x| x.1).sum() {
        // The threads outnumber the CPUs: every program runs on every node, each node's CPUs
        // time-shared by every program's block there, so that a program that ends early
        // leaves no node without threads.
        let (order, _) = super::nodesets::order(m, &nodes, usize::MAX);
        let k = order.len();
        return Some(count.into_keys().map(|app| (app, AppNodes { order: order.clone(), k, k_min: k })).collect());
    }
    let mut apps: Vec<(AppId, usize)> = count.into_iter().collect();
    apps.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut free = nodes.clone();
    let mut own: Vec<(AppId, Vec<NodeIdx>)> = Vec::new();
    for &(app, n) in &apps {
        let (order, k) = super::nodesets::order(m, &free, n);
        if free.iter().filter(|x| order[..k].contains(&x.0)).map(|x| x.1).sum::<usize>() < n {
            return None;
        }
        free.retain(|x| !order[..k].contains(&x.0));
        own.push((app, order[..k].to_vec()));
    }
    let spare: Vec<(NodeIdx, usize)> = free;
    let spare_ids: Vec<NodeIdx> = spare.iter().map(|x| x.0).collect();
    Some(
        own.into_iter()
            .map(|(app, set)| {
                let k = set.len();
                let mut order = set.clone();
                order.extend(super::nodesets::growth(m, &set, &spare_ids));
                (app, AppNodes { order, k, k_min: k })
            })
            .collect(),
    )
}

/// How many of `n` threads each node of `nodes` gets when they run on them.
pub fn quotas_on(m: &Machine, nodes: &[NodeIdx], n: usize) -> Vec<usize> {
    let with: Vec<(NodeIdx, usize)> = nodes.iter().map(|&x| (x, m.node(x).cpus.len())).collect();
    quotas(&with, n)
}

/// The node of every thread: for programs on nodes of their own ([`app_nodes`]), contiguous
/// blocks of tid order over the program's nodes (in node order), sized by their CPUs; else
/// contiguous blocks of (program, tid) order over every allowed node with CPUs. Empty when no
/// allowed node has CPUs, and when the threads outnumber the CPUs without programs' nodes
/// (where they do, [`app_nodes`] gives every program every node).
pub fn blocks_with(
    m: &Machine,
    allowed: &NodeSet,
    threads: &[ThreadState],
    apps: Option<&BTreeMap<AppId, AppNodes>>,
) -> Vec<(Tid, NodeIdx)> {
    let nodes = cpu_nodes(m, allowed);
    let mut order: Vec<(u32, Tid)> = threads.iter().map(|t| (t.app, t.tid)).collect();
    order.sort_unstable();
    order.dedup();
    if apps.is_none() && order.len() > nodes.iter().map(|x| x.1).sum() {
        return vec![];
    }
    let mut out = Vec::with_capacity(order.len());
    if let Some(apps) = apps {
        for (app, an) in apps {
            let mut set = an.nodes().to_vec();
            set.sort_unstable();
            let tids: Vec<Tid> = order.iter().filter(|x| x.0 == *app).map(|x| x.1).collect();
            let q = quotas_on(m, &set, tids.len());
            let mut it = tids.into_iter();
            for (&node, &k) in set.iter().zip(&q) {
                out.extend(it.by_ref().take(k).map(|tid| (tid, node)));
            }
        }
        return out;
    }
    let q = quotas(&nodes, order.len());
    let mut it = order.into_iter();
    for (&(node, _), &k) in nodes.iter().zip(&q) {
        out.extend(it.by_ref().take(k).map(|(_, tid)| (tid, node)));
    }
    out
}

/// The pins ptb has given, and the evidence of where each thread's data lives.
#[derive(Debug, Default)]
pub struct ThreadPins {
    /// Node each managed thread is pinned to.
    pub node: BTreeMap<Tid, NodeIdx>,
    /// Decayed sampled accesses of each thread, per node of the page.
    data: BTreeMap<Tid, Vec<f64>>,
    /// Each program's nodes, when the programs run on nodes of their own.
    pub apps: Option<BTreeMap<AppId, AppNodes>>,
    /// Which threads run and which wait, from the driver's CPU times ([`super::busy`]).
    busy: super::busy::Busy,
    /// The CPU group a thread is pinned to, where its node's threads run on some of its groups
    /// only ([`super::groups`]); absent: any CPU of its node.
    group: BTreeMap<Tid, GroupIdx>,
}

impl ThreadPins {
    /// Each program's nodes when every program runs on nodes of its own (its layout is then
    /// its own to choose, [`super::layout`]); `None` when the programs share nodes (the
    /// threads outnumber the CPUs) or do not run on programs' nodes.
    pub fn own(&self) -> Option<&BTreeMap<AppId, AppNodes>> {
        let apps = self.apps.as_ref()?;
        let mut seen: Vec<NodeIdx> = Vec::new();
        for an in apps.values() {
            if an.nodes().iter().any(|n| seen.contains(n)) {
                return None;
            }
            seen.extend_from_slice(an.nodes());
        }
        Some(apps)
    }

    /// Pin every thread in contiguous blocks ([`blocks`]): the start plan's moves.
    pub fn start(&mut self, m: &Machine, allowed: &NodeSet, threads: &[ThreadState]) -> Vec<ThreadMove> {
        self.apps = app_nodes(m, allowed, threads);
        let b = blocks_with(m, allowed, threads, self.apps.as_ref());
        self.node = b.iter().copied().collect();
        b.into_iter().map(|(tid, n)| ThreadMove { tid, to: ThreadTarget::Node(n) }).collect()
    }

    /// Forget threads that are gone, pin the threads not seen before (see the module docs) and
    /// record where the cycle's samples found each thread's data (`decay`: weight of the
    /// earlier cycles).
    #[cfg(test)]
    pub fn observe(&mut self, snap: &Snapshot, decay: f64) -> Vec<ThreadMove> {
        self.observe_with(snap, &super::chunks::homes_of(snap), decay)
    }

    /// [`Self::observe`] with the node of every sample's page already looked up
    /// ([`super::chunks::homes_of`]).
    pub fn observe_with(&mut self, snap: &Snapshot, homes: &[Option<NodeIdx>], decay: f64) -> Vec<ThreadMove> {
        let live: std::collections::BTreeSet<Tid> = snap.threads.iter().map(|t| t.tid).collect();
        self.node.retain(|t, _| live.contains(t));
        self.data.retain(|t, _| live.contains(t));
        let nodes = cpu_nodes(snap.machine, snap.allowed);
        self.busy.observe(snap, decay);
        let mut moves = Vec::new();
        if !nodes.is_empty() {
            // Threads that wait take no CPU of their own: they are neither counted nor pinned.
            // Where the driver reports CPU times, a thread first seen now is pinned once its
            // share is known, a cycle later.
            let known = |t: &&ThreadState| snap.thread_cpu.is_empty() || self.busy.known(t.tid);
            let running: Vec<ThreadState> = snap.threads.iter().filter(|t| self.busy.running(t.tid)).cloned().collect();
            let mut new: Vec<&ThreadState> =
                running.iter().filter(|t| !self.node.contains_key(&t.tid)).filter(known).collect();
            new.sort_by_key(|t| (t.app, t.tid));
            let cpus: usize = nodes.iter().map(|x| x.1).sum();
            if self.apps.is_none() && running.len() > cpus {
                new.clear();
            }
            if self.apps.is_none() && self.node.is_empty() && !new.is_empty() {
                // Nothing pinned yet (a program attached, or launched with no threads at the
                // start): place the programs as at the start.
                self.apps = app_nodes(snap.machine, snap.allowed, &running);
            }
            for t in new {
                let n = self.place_new(&nodes, t);
                self.node.insert(t.tid, n);
                moves.push(ThreadMove { tid: t.tid, to: ThreadTarget::Node(n) });
            }
        }
        let nn = snap.machine.n_nodes();
        for v in self.data.values_mut() {
            v.iter_mut().for_each(|x| *x *= decay);
        }
        // Samples come thread after thread (a ring per thread): one lookup of the thread per run.
        let mut at = 0;
        for run in snap.samples.chunk_by(|a, b| a.tid == b.tid) {
            let (tid, from) = (run[0].tid, at);
            at += run.len();
            if !self.node.contains_key(&tid) {
                continue;
            }
            let mut homes = homes.get(from..at).unwrap_or_default().iter().filter_map(|h| *h);
            let Some(first) = homes.next() else { continue };
            let row = self.data.entry(tid).or_insert_with(|| vec![0.0; nn]);
            // One at a time, as the counts have always been added (the same sums to the bit).
            for home in std::iter::once(first).chain(homes) {
                row[home.ix()] += 1.0;
            }
        }
        moves
    }

    /// Pinned threads per node.
    fn count(&self, n: NodeIdx) -> usize {
        self.node.iter().filter(|&(t, &x)| x == n && self.busy.running(*t)).count()
    }

    /// The node of a thread first seen now. Where it runs, if that node is one of its program's
    /// and has a CPU no pinned thread holds; else its program's node with the fewest pinned
    /// threads per CPU, if one has a free CPU; else the program grows by its next node no
    /// other program uses; else (programs sharing nodes) the allowed node with the fewest
    /// pinned threads per CPU.
    fn place_new(&mut self, nodes: &[(NodeIdx, usize)], t: &ThreadState) -> NodeIdx {
        let cpus = |n: NodeIdx| nodes.iter().find(|x| x.0 == n).map_or(0, |x| x.1);
        let least = |cands: &[NodeIdx], me: &Self| {
            cands
                .iter()
                .copied()
                .filter(|&n| me.count(n) < cpus(n))
                .min_by(|&a, &b| (me.count(a) * cpus(b)).cmp(&(me.count(b) * cpus(a))).then(a.cmp(&b)))
        };
        if let Some(apps) = &self.apps {
            let used: Vec<NodeIdx> = apps.values().flat_map(|a| a.nodes().iter().copied()).collect();
            if let Some(an) = apps.get(&t.app) {
                let own = an.nodes().to_vec();
                if own.contains(&t.node) && self.count(t.node) < cpus(t.node) {
                    return t.node;
                }
                if let Some(n) = least(&own, self) {
                    return n;
                }
                let next = an.order[an.k.min(an.order.len())..].iter().copied().find(|n| !used.contains(n));
                if let (Some(n), Some(apps)) = (next, self.apps.as_mut()) {
                    if let Some(an) = apps.get_mut(&t.app) {
                        let at = an.order.iter().position(|&x| x == n).unwrap_or(an.k);
                        an.order.swap(an.k, at);
                        an.k += 1;
                        an.k_min = an.k_min.max(an.k);
                    }
                    return n;
                }
            }
        }
        let here = nodes.iter().find(|x| x.0 == t.node && self.count(x.0) < x.1).map(|x| x.0);
        let all: Vec<NodeIdx> = nodes.iter().map(|x| x.0).collect();
        here.or_else(|| least(&all, self))
            .or_else(|| {
                nodes
                    .iter()
                    .min_by(|a, b| (self.count(a.0) * b.1).cmp(&(self.count(b.0) * a.1)).then(a.0.cmp(&b.0)))
                    .map(|x| x.0)
            })
            .unwrap_or(t.node)
    }

    /// Run program `app` on `nodes` (which come first in its order from now on): each node
    /// keeps as many of the threads it has as its new share allows (the lowest tids), the rest
    /// move, in tid order, to the nodes short of their share. Returns the moves.
    pub fn relayout(&mut self, m: &Machine, threads: &[ThreadState], app: AppId, nodes: &[NodeIdx]) -> Vec<ThreadMove> {
        let Some(an) = self.apps.as_mut().and_then(|a| a.get_mut(&app)) else { return vec![] };
        if nodes.is_empty() {
            return vec![];
        }
        let mut order = nodes.to_vec();
        order.extend(an.order.iter().copied().filter(|n| !nodes.contains(n)));
        an.order = order;
        an.k = nodes.len();
        let mut set = nodes.to_vec();
        set.sort_unstable();
        let mut tids: Vec<Tid> =
            threads.iter().filter(|t| t.app == app && self.node.contains_key(&t.tid)).map(|t| t.tid).collect();
        tids.sort_unstable();
        let q = quotas_on(m, &set, tids.len());
        let mut kept = vec![0usize; set.len()];
        let mut moving = Vec::new();
        for tid in tids {
            let at = self.node[&tid];
            match set.iter().position(|&n| n == at) {
                Some(i) if kept[i] < q[i] => kept[i] += 1,
                _ => moving.push(tid),
            }
        }
        let mut moves = Vec::new();
        for tid in moving {
            let Some(i) = (0..set.len()).find(|&i| kept[i] < q[i]) else { break };
            kept[i] += 1;
            self.node.insert(tid, set[i]);
            self.data.remove(&tid);
            moves.push(ThreadMove { tid, to: ThreadTarget::Node(set[i]) });
        }
        moves
    }

    /// Pin the threads of each node they do not fill to its best CPU groups
    /// ([`super::groups`]), and the threads of the other nodes back to their whole node.
    /// `rows[n]`: node n's accesses per second to each memory node (empty: none sampled);
    /// `mem`: the memory nodes. `moves` are this cycle's moves so far (node targets); returns
    /// them with their targets made groups where so chosen, followed by the moves of threads
    /// that change group only.
    pub fn place_in_groups(
        &mut self,
        m: &Machine,
        rows: &[Vec<f64>],
        path_scale: &[f64],
        mem: &[NodeIdx],
        moves: Vec<ThreadMove>,
    ) -> Vec<ThreadMove> {
        self.group.retain(|t, _| self.node.contains_key(t));
        for mv in &moves {
            self.group.remove(&mv.tid);
        }
        let mut target: BTreeMap<Tid, ThreadTarget> = BTreeMap::new();
        let mut by_node: BTreeMap<NodeIdx, Vec<Tid>> = BTreeMap::new();
        for (&tid, &n) in &self.node {
            if self.busy.running(tid) {
                by_node.entry(n).or_default().push(tid);
            }
        }
        for (n, tids) in by_node {
            let row = rows.get(n.ix()).map_or(&[][..], |r| r.as_slice());
            let scale = path_scale.get(n.ix()).copied().unwrap_or(1.0);
            match super::groups::choose(m, n, tids.len(), row, scale, mem) {
                None => {
                    for tid in tids {
                        if self.group.remove(&tid).is_some() {
                            target.insert(tid, ThreadTarget::Node(n));
                        }
                    }
                }
                Some(set) => {
                    let q = super::groups::quotas(m, &set, tids.len());
                    let mut kept = vec![0usize; set.len()];
                    let mut moving = Vec::new();
                    for tid in tids {
                        match self.group.get(&tid).and_then(|g| set.iter().position(|x| x == g)) {
                            Some(i) if kept[i] < q[i] => kept[i] += 1,
                            _ => moving.push(tid),
                        }
                    }
                    for tid in moving {
                        let Some(i) = (0..set.len()).find(|&i| kept[i] < q[i]) else { break };
                        kept[i] += 1;
                        self.group.insert(tid, set[i]);
                        target.insert(tid, ThreadTarget::Group(set[i]));
                    }
                }
            }
        }
        let mut out: Vec<ThreadMove> = moves
            .into_iter()
            .map(|mv| match target.remove(&mv.tid) {
                Some(to) => ThreadMove { tid: mv.tid, to },
                None => mv,
            })
            .collect();
        out.extend(target.into_iter().map(|(tid, to)| ThreadMove { tid, to }));
        out
    }

    /// The node holding a thread's data, when its sampled accesses go there confidently more
    /// than to any other node ([`super::dominant`]).
    fn data_node(&self, tid: Tid) -> Option<NodeIdx> {
        super::dominant(self.data.get(&tid)?)
    }

    /// Swap threads each of whose data is on the other's node (see the module docs). Threads
    /// are paired in tid order; a thread moves at most once a cycle.
    pub fn swaps(&mut self, allowed: &NodeSet) -> Vec<ThreadMove> {
        let mut away: Vec<(Tid, NodeIdx, NodeIdx)> = self
            .node
            .iter()
            .filter_map(|(&tid, &at)| {
                let want = self.data_node(tid)?;
                (want != at && allowed.contains_idx(want)).then_some((tid, at, want))
            })
            .collect();
        let mut moves = Vec::new();
        let mut i = 0;
        while i < away.len() {
            let (tid, at, want) = away[i];
            if let Some(j) = (i + 1..away.len()).find(|&j| away[j].1 == want && away[j].2 == at) {
                let other = away.remove(j).0;
                self.node.insert(tid, want);
                self.node.insert(other, at);
                moves.push(ThreadMove { tid, to: ThreadTarget::Node(want) });
                moves.push(ThreadMove { tid: other, to: ThreadTarget::Node(at) });
            }
            i += 1;
        }
        moves
    }
}

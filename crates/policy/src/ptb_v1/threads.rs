//! Where `ptb` runs its threads.
//!
//! Problem: Linux's scheduler moves threads nobody pinned between nodes (wake-up placement,
//! load balancing), so a thread soon runs far from the data it first touched, and pages moved
//! to a thread are left behind at its next migration: locality does not hold without pins.
//!
//! Approach: every managed thread is pinned to one node (a node, not a CPU: the kernel still
//! balances within it), and ptb never changes how many threads a node runs once it has placed
//! them, so the spread over memory controllers is kept whatever the data says.
//! - **Blocks** ([`blocks`]): threads, in order of program then tid, are cut into contiguous
//!   blocks, one per allowed node with CPUs, sized in proportion to the node's CPUs. Threads
//!   with neighbouring ids (which share the edges of their slices in a domain decomposition,
//!   as OpenMP's `proc_bind(close)` assumes) run together; a program with fewer threads than
//!   CPUs is spread over every controller; programs run together get nodes of their own. When the threads
//!   outnumber the CPUs none is pinned: the scheduler time-shares the CPUs better than fixed
//!   pins (a program that ends early would leave its nodes' CPUs idle). A thread first seen later stays on its node if a CPU there is free of
//!   pins, else goes to the node with the fewest pinned threads per CPU.
//! - **Swaps** ([`ThreadPins::swaps`]): a thread whose sampled accesses go confidently
//!   (Wilson bound, two standard errors) at least `private_share` to pages on another node
//!   trades places with a thread of that node whose data is, in the same sense, on the first
//!   one's node: both come home, and no node gains a thread. Data no swap can serve is
//!   brought to its thread by the page model instead.

use crate::plan::{ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, ThreadState};
use ptb_profile::Tid;
use ptb_topology::{Machine, NodeIdx, NodeSet};
use std::collections::BTreeMap;

/// Allowed nodes with CPUs, with their CPU counts.
fn cpu_nodes(m: &Machine, allowed: &NodeSet) -> Vec<(NodeIdx, usize)> {
    m.nodes.iter().filter(|n| n.has_cpus() && allowed.contains_idx(n.idx)).map(|n| (n.idx, n.cpus.len())).collect()
}

/// How many of `n` threads each node gets: in proportion to its CPUs, largest remainders first
/// (ties to the lower node).
fn quotas(nodes: &[(NodeIdx, usize)], n: usize) -> Vec<usize> {
    let cpus: usize = nodes.iter().map(|x| x.1).sum();
    if cpus == 0 {
        return vec![0; nodes.len()];
    }
    let mut q: Vec<usize> = nodes.iter().map(|x| n * x.1 / cpus).collect();
    let mut rest: Vec<(usize, usize)> = nodes.iter().enumerate().map(|(i, x)| (n * x.1 % cpus, i)).collect();
    rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = n - q.iter().sum::<usize>();
    for &(_, i) in rest.iter().take(left) {
        q[i] += 1;
    }
    q
}

/// The node of every thread: contiguous blocks of (program, tid) order, one block per allowed
/// node with CPUs, sized in proportion to its CPUs. Empty when no allowed node has CPUs, and
/// when the threads outnumber the CPUs: the scheduler then time-shares the CPUs, and pins
/// would keep a node's threads queued while another node's CPUs idle (a program that ends
/// early).
pub fn blocks(m: &Machine, allowed: &NodeSet, threads: &[ThreadState]) -> Vec<(Tid, NodeIdx)> {
    let nodes = cpu_nodes(m, allowed);
    let mut order: Vec<(u32, Tid)> = threads.iter().map(|t| (t.app, t.tid)).collect();
    order.sort_unstable();
    order.dedup();
    if order.len() > nodes.iter().map(|x| x.1).sum() {
        return vec![];
    }
    let q = quotas(&nodes, order.len());
    let mut out = Vec::with_capacity(order.len());
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
}

impl ThreadPins {
    /// Pin every thread in contiguous blocks ([`blocks`]): the start plan's moves.
    pub fn start(&mut self, m: &Machine, allowed: &NodeSet, threads: &[ThreadState]) -> Vec<ThreadMove> {
        let b = blocks(m, allowed, threads);
        self.node = b.iter().copied().collect();
        b.into_iter().map(|(tid, n)| ThreadMove { tid, to: ThreadTarget::Node(n) }).collect()
    }

    /// Forget threads that are gone, pin the threads not seen before (see the module docs) and
    /// record where the cycle's samples found each thread's data (`decay`: weight of the
    /// earlier cycles).
    pub fn observe(&mut self, snap: &Snapshot, decay: f64) -> Vec<ThreadMove> {
        let live: std::collections::BTreeSet<Tid> = snap.threads.iter().map(|t| t.tid).collect();
        self.node.retain(|t, _| live.contains(t));
        self.data.retain(|t, _| live.contains(t));
        let nodes = cpu_nodes(snap.machine, snap.allowed);
        let mut moves = Vec::new();
        if !nodes.is_empty() {
            let mut new: Vec<&ThreadState> = snap.threads.iter().filter(|t| !self.node.contains_key(&t.tid)).collect();
            new.sort_by_key(|t| (t.app, t.tid));
            let cpus: usize = nodes.iter().map(|x| x.1).sum();
            if snap.threads.len() > cpus {
                new.clear();
            }
            for t in new {
                let count = |n: NodeIdx| self.node.values().filter(|&&x| x == n).count();
                // Where it runs, if that node has a CPU no pinned thread holds; else the node
                // with the fewest pinned threads per CPU.
                let here = nodes.iter().find(|x| x.0 == t.node && count(x.0) < x.1);
                let Some(&(n, _)) = here.or_else(|| {
                    nodes.iter().min_by(|a, b| (count(a.0) * b.1).cmp(&(count(b.0) * a.1)).then(a.0.cmp(&b.0)))
                }) else {
                    break;
                };
                self.node.insert(t.tid, n);
                moves.push(ThreadMove { tid: t.tid, to: ThreadTarget::Node(n) });
            }
        }
        let nn = snap.machine.n_nodes();
        for v in self.data.values_mut() {
            v.iter_mut().for_each(|x| *x *= decay);
        }
        let shift = snap.machine.page_size.trailing_zeros();
        for s in snap.samples {
            let page = ptb_profile::PageKey { app: s.app, vpn: s.addr >> shift };
            let Some(home) = snap.pages.get(page).filter(|h| h.ix() < nn) else { continue };
            if !self.node.contains_key(&s.tid) {
                continue;
            }
            self.data.entry(s.tid).or_insert_with(|| vec![0.0; nn])[home.ix()] += 1.0;
        }
        moves
    }

    /// The node holding a thread's data, when its sampled accesses go there confidently
    /// (Wilson lower bound at two standard errors) at least `share` of the time.
    fn data_node(&self, tid: Tid, share: f64) -> Option<NodeIdx> {
        let v = self.data.get(&tid)?;
        let total: f64 = v.iter().sum();
        let (i, top) = v.iter().enumerate().fold((0, 0.0), |b, (i, &x)| if x > b.1 { (i, x) } else { b });
        (total > 0.0 && super::wilson_lower(top / total, total, 2.0) >= share).then(|| NodeIdx::from_ix(i))
    }

    /// Swap threads each of whose data is on the other's node (see the module docs). Threads
    /// are paired in tid order; a thread moves at most once a cycle.
    pub fn swaps(&mut self, allowed: &NodeSet, share: f64) -> Vec<ThreadMove> {
        let mut away: Vec<(Tid, NodeIdx, NodeIdx)> = self
            .node
            .iter()
            .filter_map(|(&tid, &at)| {
                let want = self.data_node(tid, share)?;
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

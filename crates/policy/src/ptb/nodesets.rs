//! Which nodes a program runs on when it has fewer threads than the CPUs allowed to it.
//!
//! Problem: a program with 16 threads on a 64-CPU, 8-node machine fits on two nodes. Spread
//! over all eight it has every memory controller but most of its accesses cross the
//! interconnect; packed on two it reads mostly close by but has two controllers. Which wins
//! depends on the program, and which two (or four) nodes depends on the links: on the 8-node
//! Opteron, nodes joined by 16-bit links move twice the data of nodes joined by 8-bit ones
//! (AsymSched: the choice of nodes alone changes a program's speed by up to 2x).
//!
//! Approach: for each number of nodes `k`, the candidate set is the one with the most
//! bandwidth inside it (the machine file's uncontended Bandwidth Graph summed over ordered
//! pairs of distinct nodes; without one, the inverse SLIT distance). The smallest set that
//! holds the program's threads is searched exhaustively (few nodes) or grown greedily (many),
//! and the larger sets grow from it one node at a time, each adding the node best connected
//! to those already in, so that a program growing from `k` to `k + 1` nodes keeps its threads
//! and data where they are. Which `k` a program uses is the model's choice (`layout`), as is
//! whether another set of `k` nodes serves it better than this one.

use ptb_topology::{Machine, NodeIdx};

/// Connection strength from the CPUs of `a` to the memory of `b` (GB/s where the machine has a
/// Bandwidth Graph, else 10 / SLIT distance, else 1).
pub fn link(m: &Machine, a: NodeIdx, b: NodeIdx) -> f64 {
    if let Some(bw) = m.node_bg(a, b) {
        return bw;
    }
    m.distance(a, b).filter(|d| *d > 0.0).map_or(1.0, |d| 10.0 / d)
}

/// Bandwidth inside a set: the connection strength summed over its ordered pairs of distinct nodes.
pub fn inside(m: &Machine, set: &[NodeIdx]) -> f64 {
    set.iter().flat_map(|&a| set.iter().filter(move |&&b| b != a).map(move |&b| link(m, a, b))).sum()
}

/// Sets of `k` of `n` items tried exhaustively up to this many; beyond it the set is grown greedily.
const EXHAUSTIVE: u64 = 5000;

pub fn choose(n: u64, k: u64) -> u64 {
    (0..k.min(n)).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

/// Every set of `k` nodes of `from` (in `from`'s order within a set), in lexicographic order
/// of positions: `choose(from.len(), k)` of them; none when `k` is 0 or above `from.len()`.
pub fn subsets(from: &[NodeIdx], k: usize) -> impl Iterator<Item = Vec<NodeIdx>> + '_ {
    let mut idx: Option<Vec<usize>> = (k > 0 && k <= from.len()).then(|| (0..k).collect());
    std::iter::from_fn(move || {
        let cur = idx.as_mut()?;
        let set: Vec<NodeIdx> = cur.iter().map(|&i| from[i]).collect();
        // Next combination in lexicographic order.
        match (0..k).rev().find(|&i| cur[i] < from.len() - k + i) {
            Some(i) => {
                cur[i] += 1;
                for j in i + 1..k {
                    cur[j] = cur[j - 1] + 1;
                }
            }
            None => idx = None,
        }
        Some(set)
    })
}

/// The `k` nodes of `from` with the most bandwidth inside them (ties: the lower node ids).
pub fn best_set(m: &Machine, from: &[NodeIdx], k: usize) -> Vec<NodeIdx> {
    let k = k.min(from.len());
    if k == 0 {
        return vec![];
    }
    if choose(from.len() as u64, k as u64) <= EXHAUSTIVE {
        let mut best: Option<(f64, Vec<NodeIdx>)> = None;
        for set in subsets(from, k) {
            let s = inside(m, &set);
            if best.as_ref().is_none_or(|b| s > b.0 + 1e-9) {
                best = Some((s, set));
            }
        }
        return best.map(|b| b.1).unwrap_or_default();
    }
    // Many nodes: grow from every seed and keep the best.
    from.iter()
        .map(|&seed| {
            let mut set = vec![seed];
            set.extend(growth(m, &set, from).into_iter().take(k - 1));
            set
        })
        .fold(None::<(f64, Vec<NodeIdx>)>, |b, set| {
            let s = inside(m, &set);
            if b.as_ref().is_none_or(|b| s > b.0 + 1e-9) {
                Some((s, set))
            } else {
                b
            }
        })
        .map(|b| b.1)
        .unwrap_or_default()
}

/// The nodes of `from` outside `set`, in the order a growing set takes them: each the node with
/// the most bandwidth to and from the nodes taken before it (ties: the lower node id).
pub fn growth(m: &Machine, set: &[NodeIdx], from: &[NodeIdx]) -> Vec<NodeIdx> {
    let mut have: Vec<NodeIdx> = set.to_vec();
    let mut left: Vec<NodeIdx> = from.iter().copied().filter(|n| !set.contains(n)).collect();
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let gain = |c: NodeIdx| have.iter().map(|&h| link(m, c, h) + link(m, h, c)).sum::<f64>();
        let (i, _) = left
            .iter()
            .enumerate()
            .fold((0, f64::MIN), |b, (i, &c)| if gain(c) > b.1 + 1e-9 { (i, gain(c)) } else { b });
        let n = left.remove(i);
        have.push(n);
        out.push(n);
    }
    out
}

/// Nodes in the order a program with `threads` threads takes them: the best-connected set
/// holding its threads (by the nodes' CPU counts, `cpus`), then the others as it grows.
/// Returns the order and how many of its nodes the threads need.
pub fn order(m: &Machine, from: &[(NodeIdx, usize)], threads: usize) -> (Vec<NodeIdx>, usize) {
    let nodes: Vec<NodeIdx> = from.iter().map(|x| x.0).collect();
    // Fewest nodes whose CPUs hold the threads: the nodes with the most CPUs first.
    let mut cpus: Vec<usize> = from.iter().map(|x| x.1).collect();
    cpus.sort_unstable_by(|a, b| b.cmp(a));
    let mut k = 0;
    let mut have = 0;
    while have < threads && k < cpus.len() {
        have += cpus[k];
        k += 1;
    }
    let k = k.max(1).min(nodes.len());
    let set = best_set(m, &nodes, k);
    let mut out = set.clone();
    out.extend(growth(m, &set, &nodes));
    (out, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[NodeIdx]) -> Vec<u16> {
        v.iter().map(|n| n.0).collect()
    }

    #[test]
    fn the_8_node_opteron_packs_on_nodes_joined_by_wide_links() {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let all: Vec<(NodeIdx, usize)> = m.nodes.iter().map(|n| (n.idx, n.cpus.len())).collect();
        // 16 threads: two nodes joined by a 16-bit link.
        let (o, k) = order(&m, &all, 16);
        assert_eq!(k, 2);
        let pair = &o[..2];
        assert!(link(&m, pair[0], pair[1]) >= 5.0 && link(&m, pair[1], pair[0]) >= 5.0, "{:?}", ids(&o));
        // 32 threads: four nodes, more bandwidth inside than the first four.
        let (o, k) = order(&m, &all, 32);
        assert_eq!(k, 4);
        let first4: Vec<NodeIdx> = (0..4).map(NodeIdx).collect();
        assert!(inside(&m, &o[..4]) > inside(&m, &first4), "{:?}", ids(&o));
        // Every node once; the set grows from the packed one.
        let mut s = ids(&o);
        s.sort_unstable();
        assert_eq!(s, (0..8).collect::<Vec<u16>>());
        let (o2, _) = order(&m, &all, 16);
        assert_eq!(best_set(&m, &o2[..2], 2).len(), 2);
    }

    #[test]
    fn many_nodes_are_grown_greedily_and_every_thread_count_gets_enough_cpus() {
        let m = ptb_topology::synthetic::synthetic("nodes=16,cpus=2").unwrap();
        let all: Vec<(NodeIdx, usize)> = m.nodes.iter().map(|n| (n.idx, n.cpus.len())).collect();
        for t in [1, 2, 3, 15, 16, 17, 32, 40] {
            let (o, k) = order(&m, &all, t);
            assert_eq!(o.len(), 16);
            assert!(2 * k >= t.min(32), "{t} threads, {k} nodes");
        }
        assert!(choose(16, 8) > EXHAUSTIVE);
    }
}

//! AsymSched's bandwidth between the nodes of a set, from the machine file.
//!
//! Problem: the paper scores a placement by the bandwidth each cluster gets from the other
//! nodes of its application. A Bandwidth Graph entry is measured one pair of nodes at a time,
//! so it cannot see that the routes *inside* a node set share a link: on `opteron6272-8n`,
//! {1, 5, 7} sums 29.9 GB/s of pairwise bandwidth (rank 4 of 56 three-node sets) but its
//! routes 1->5 and 7->5 share the slow direction of link 5-7, and a program spread over it runs
//! about twice as long as on the best set (simulated sweep, streamcluster with 24 threads).
//!
//! Approach: when the machine file has links and a route for every (CPU group, memory node)
//! pair of the set, every group of every node of the set reads from every node of the set at
//! once, at one common rate `x` (data spread evenly over the set, as an application's shared
//! data is once its pages are spread; the barriers of a parallel program make the slowest
//! flow set the pace). Each direction of each link and each memory controller (when its
//! capacity is known) carries the flows routed through it, so
//! `x = min over resources (capacity / flows through it)`. A cluster on one of the set's nodes
//! then gets `(nodes - 1) x` from the application's other nodes. A one-node set gets its
//! local bandwidth (controller capacity, else the Bandwidth Graph's local entry). Without
//! links or routes: the paper's form, the sum of the Bandwidth Graph from the node to the
//! set's other nodes (averaged over the set), else 100 / SLIT distance.
//!
//! Only the machine file is read (links, routes, controller capacities, Bandwidth Graph,
//! distances), never a simulator constant.

use ptb_topology::{Machine, NodeIdx};

/// Uncontended GB/s from the CPUs of node `a` to memory of node `b`: the Bandwidth Graph,
/// else 100 / SLIT distance, else 1.
pub fn pair_bandwidth(m: &Machine, a: NodeIdx, b: NodeIdx) -> f64 {
    m.node_bg(a, b).or_else(|| m.distance(a, b).map(|d| 100.0 / d.max(1.0))).unwrap_or(1.0)
}

/// Local bandwidth of one node: the smaller of its controller capacity and the sum of its
/// groups' local Bandwidth Graph entries, whichever are known.
fn local_bandwidth(m: &Machine, n: NodeIdx) -> f64 {
    let groups: f64 = m.node(n).groups.iter().filter_map(|g| m.bg(*g, n)).sum();
    let bg = if groups > 0.0 { Some(groups) } else { None };
    let ctrl = m.controller_gbps.as_ref().and_then(|c| c.get(n.ix()).copied()).filter(|c| *c > 0.0);
    match (bg, ctrl) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => pair_bandwidth(m, n, n),
    }
}

/// GB/s a cluster on one node of `set` gets from the set's other nodes when all of them
/// exchange data at once (see the module docs). `set` holds distinct nodes with CPUs.
pub fn cluster_bandwidth(m: &Machine, set: &[NodeIdx]) -> f64 {
    match set {
        [] => 0.0,
        [n] => local_bandwidth(m, *n),
        _ => shared_links(m, set).unwrap_or_else(|| pairwise(m, set)),
    }
}

/// The paper's form: mean over the set's nodes of the summed pairwise bandwidth to the others.
fn pairwise(m: &Machine, set: &[NodeIdx]) -> f64 {
    let total: f64 = set
        .iter()
        .flat_map(|&a| set.iter().filter(move |&&b| b != a).map(move |&b| (a, b)))
        .map(|(a, b)| pair_bandwidth(m, a, b))
        .sum();
    total / set.len() as f64
}

/// The link-sharing form; None when a link or route it needs is missing.
fn shared_links(m: &Machine, set: &[NodeIdx]) -> Option<f64> {
    if m.links.is_empty() || m.routes.is_empty() {
        return None;
    }
    let nl = m.links.len();
    // Flows through each resource: link directions (2 per link), then controllers.
    let mut flows = vec![0u32; 2 * nl + m.n_nodes()];
    let mut groups = 0usize;
    let mems: Vec<NodeIdx> = set.iter().copied().filter(|n| m.node(*n).has_memory()).collect();
    if mems.is_empty() {
        return None;
    }
    for &a in set {
        for &g in &m.node(a).groups {
            groups += 1;
            for &b in &mems {
                let r = m.route(g, b)?;
                for h in &r.hops {
                    let i = h.link.ix();
                    if i >= nl {
                        return None;
                    }
                    flows[2 * i + usize::from(!h.forward)] += 1;
                }
                flows[2 * nl + b.ix()] += 1;
            }
        }
    }
    let mut x = f64::INFINITY;
    for (i, &f) in flows.iter().enumerate() {
        if f == 0 {
            continue;
        }
        let cap = if i < 2 * nl {
            let l = &m.links[i / 2];
            if i % 2 == 0 {
                l.gbps_ab
            } else {
                l.gbps_ba
            }
        } else {
            match m.controller_gbps.as_ref().and_then(|c| c.get(i - 2 * nl).copied()) {
                Some(c) => c,
                None => continue,
            }
        };
        x = x.min(cap.max(0.0) / f as f64);
    }
    if !x.is_finite() {
        return None;
    }
    // Per cluster (node): its groups' flows from the other memory nodes of the set.
    let per_node_groups = groups as f64 / set.len() as f64;
    // Memory nodes other than its own, on average over the set's nodes.
    let others = mems.len() as f64 * (set.len() - 1) as f64 / set.len() as f64;
    Some(x * per_node_groups * others)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ix(v: &[u16]) -> Vec<NodeIdx> {
        v.iter().map(|&n| NodeIdx(n)).collect()
    }

    #[test]
    fn shared_slow_link_makes_a_set_worse_than_its_pairs_say() {
        // On opteron6272-8n, {1,5,7} has more pairwise bandwidth than {2,4,5}, but its routes
        // share the slow direction of link 5-7; the link-sharing score ranks it below.
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let (a, b) = (ix(&[1, 5, 7]), ix(&[2, 4, 5]));
        assert!(pairwise(&m, &a) > pairwise(&m, &b));
        assert!(cluster_bandwidth(&m, &a) < cluster_bandwidth(&m, &b));
    }

    #[test]
    fn best_set_has_the_most_bandwidth_not_the_fewest_hops() {
        // {0,1,7}: 0-7 is two hops (via 6), but every route is on a 16-bit link; it beats every
        // set of three nodes one hop apart.
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let all: Vec<u16> = (0..8).collect();
        let mut best = (0.0, vec![]);
        let mut best_one_hop: f64 = 0.0;
        for i in 0..8u16 {
            for j in i + 1..8 {
                for k in j + 1..8 {
                    let s = ix(&[all[i as usize], all[j as usize], all[k as usize]]);
                    let bw = cluster_bandwidth(&m, &s);
                    let one_hop = [(i, j), (i, k), (j, k)]
                        .iter()
                        .all(|&(a, b)| m.distance(NodeIdx(a), NodeIdx(b)).unwrap() <= 16.0);
                    if one_hop {
                        best_one_hop = best_one_hop.max(bw);
                    }
                    if bw > best.0 {
                        best = (bw, s);
                    }
                }
            }
        }
        assert!(best.0 > best_one_hop, "{best:?} vs one-hop {best_one_hop}");
        assert!(m.distance(best.1[0], best.1[2]).unwrap() > 16.0 || m.distance(best.1[0], best.1[1]).unwrap() > 16.0);
    }

    #[test]
    fn without_links_the_pairwise_bandwidth_decides_and_nothing_panics() {
        let mut m = ptb_topology::synthetic::synthetic("nodes=4,cpus=2,remote=3").unwrap();
        m.links.clear();
        m.routes.clear();
        let s = ix(&[0, 1]);
        assert!((cluster_bandwidth(&m, &s) - pairwise(&m, &s)).abs() < 1e-12);
        let bw = cluster_bandwidth(&m, &s);
        assert!(bw > 0.0 && bw.is_finite());
        assert!(cluster_bandwidth(&m, &ix(&[2])) > 0.0);
        assert_eq!(cluster_bandwidth(&m, &[]), 0.0);
        let mut bare = m.clone();
        bare.bandwidth = None;
        bare.distances = None;
        assert!(cluster_bandwidth(&bare, &s).is_finite());
    }
}

//! AsymSched's placement search: which nodes each application's clusters get.
//!
//! Problem: the placements of k clusters on N nodes number N!/(N-k)! (336 for 3 clusters on
//! 8 nodes, 5040 for four 2-node applications); scoring every one is wasteful, because most
//! placements are equivalent or clearly bad.
//!
//! Approach: a placement's score (the paper's `P_wbw = sum over clusters of C_weight x C_bw`)
//! depends only on the *set* of nodes each application gets: the bandwidth a cluster gets
//! from its application's other nodes is a property of that set ([`super::fabric`]), and the
//! clusters of one application are interchangeable. So
//! - *symmetry hashing*: a placement hashes to its per-application node sets (a bit mask each);
//!   the bandwidth of a node set is computed once per cycle (dynamic programming over
//!   application sub-placements) and reused by every placement that contains it: the k!
//!   orders of an application's clusters on its nodes, and every other application of the
//!   same size. `evaluated` counts the sets scored, `symmetric` the reuses;
//! - *pruning*: applications are placed heaviest first, and a branch whose score so far plus
//!   the best each remaining application could get cannot reach `keep` x the best score is cut
//!   (a communication-heavy application is only tried on sets joined by wide links).
//!
//! Two passes: the best score, then, among the placements scoring at least `keep` x best, the
//! cheapest one (the paper: fewest page migrations; then fewest thread moves; then the higher
//! score; then the first in node order, for determinism). Costs add up over applications, so a
//! branch already costlier than the cheapest kept placement is cut too.

use std::collections::HashMap;

/// One application to place: how many nodes it needs and its weight (sum of its clusters'
/// `C_weight`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppReq {
    pub k: usize,
    pub weight: f64,
}

/// What moving an application to a node set costs: resident pages on nodes it would leave,
/// then threads that would change node.
pub type Cost = (u64, u64);

/// The search problem over candidate nodes `0..n` (bit i = candidate node i).
pub struct Problem<'a> {
    pub n: usize,
    pub apps: &'a [AppReq],
    /// Keep placements scoring at least this fraction of the best.
    pub keep: f64,
    /// Stop after visiting this many complete placements (both passes together).
    pub max_leaves: u64,
}

/// What the search found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The chosen node set (mask) of each application, in the problem's order.
    pub sets: Option<Vec<u64>>,
    pub score: f64,
    pub best: f64,
    /// Size of the full enumeration of cluster placements, N!/(N-k)!.
    pub total: f64,
    /// Node sets whose bandwidth was computed.
    pub evaluated: u64,
    /// Set scores taken from the table instead.
    pub symmetric: u64,
    /// Complete placements (counted as cluster placements) cut by the bounds.
    pub pruned: f64,
    /// Complete set placements visited.
    pub leaves: u64,
    pub truncated: bool,
}

/// Number of ordered selections of `k` out of `n`, as a float (it overflows integers fast).
pub fn perms(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).map(|i| (n - i) as f64).product()
}

/// Number of `k`-subsets of `n`, as a float.
fn choose(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
}

/// Every `k`-subset (as a mask) of the nodes in `free` (a mask over `0..n`).
fn subsets(n: usize, free: u64, k: usize, out: &mut Vec<u64>) {
    fn go(nodes: &[usize], k: usize, start: usize, cur: u64, out: &mut Vec<u64>) {
        if k == 0 {
            out.push(cur);
            return;
        }
        for i in start..nodes.len() {
            if nodes.len() - i < k {
                break;
            }
            go(nodes, k - 1, i + 1, cur | (1u64 << nodes[i]), out);
        }
    }
    let nodes: Vec<usize> = (0..n).filter(|i| free >> i & 1 == 1).collect();
    go(&nodes, k, 0, 0, out);
}

struct Dfs<'a, B, C> {
    p: &'a Problem<'a>,
    /// Apps in visiting order (heaviest first).
    order: Vec<usize>,
    /// Per visiting depth: the sum of the remaining apps' upper bounds.
    rest_ub: Vec<f64>,
    bw: B,
    cost: C,
    memo: HashMap<u64, f64>,
    out: Outcome,
    sets: Vec<u64>,
    chosen_cost: Option<(Cost, f64)>,
}

impl<B: FnMut(u64) -> f64, C: Fn(usize, u64) -> Cost> Dfs<'_, B, C> {
    fn set_bw(&mut self, mask: u64) -> f64 {
        if let Some(&v) = self.memo.get(&mask) {
            self.out.symmetric += 1;
            return v;
        }
        self.out.evaluated += 1;
        let v = (self.bw)(mask);
        self.memo.insert(mask, v);
        v
    }

    fn out_of_leaves(&mut self) -> bool {
        if self.out.leaves >= self.p.max_leaves {
            self.out.truncated = true;
        }
        self.out.truncated
    }

    fn pruned(&mut self, depth: usize, used: u64) {
        let rest: usize = self.order[depth..].iter().map(|&a| self.p.apps[a].k).sum();
        self.out.pruned += perms(self.p.n - used.count_ones() as usize, rest);
    }

    /// Pass 1: the best score.
    fn best(&mut self, depth: usize, used: u64, score: f64) {
        if self.out_of_leaves() {
            return;
        }
        if depth == self.order.len() {
            self.out.leaves += 1;
            self.out.best = self.out.best.max(score);
            return;
        }
        if self.out.leaves > 0 && score + self.rest_ub[depth] <= self.out.best {
            self.pruned(depth, used);
            return;
        }
        let (_, cands) = self.children(depth, used);
        for (s, v) in cands {
            self.best(depth + 1, used | s, score + v);
        }
    }

    /// The app placed at `depth`, and every set of its size among the nodes not `used` with
    /// the score it adds there.
    fn children(&mut self, depth: usize, used: u64) -> (usize, Vec<(u64, f64)>) {
        let app = self.order[depth];
        let AppReq { k, weight } = self.p.apps[app];
        let mut sets = Vec::new();
        subsets(self.p.n, !used, k, &mut sets);
        (app, sets.into_iter().map(|s| (s, weight * self.set_bw(s))).collect())
    }

    /// Pass 2: the cheapest placement within `keep` of the best.
    fn choose(&mut self, depth: usize, used: u64, score: f64, cost: Cost) {
        if self.out_of_leaves() {
            return;
        }
        let floor = self.p.keep * self.out.best - 1e-9 * self.out.best.abs();
        if let Some((c, _)) = self.chosen_cost {
            if cost > c {
                self.pruned(depth, used);
                return;
            }
        }
        if depth == self.order.len() {
            self.out.leaves += 1;
            if score < floor {
                return;
            }
            let better = match self.chosen_cost {
                None => true,
                Some((c, s)) => cost < c || (cost == c && score > s + 1e-12),
            };
            if better {
                self.chosen_cost = Some((cost, score));
                let mut sets = vec![0; self.p.apps.len()];
                for (d, &a) in self.order.iter().enumerate() {
                    sets[a] = self.sets[d];
                }
                self.out.sets = Some(sets);
                self.out.score = score;
            }
            return;
        }
        if score + self.rest_ub[depth] < floor {
            self.pruned(depth, used);
            return;
        }
        let (app, cands) = self.children(depth, used);
        for (s, v) in cands {
            let c = (self.cost)(app, s);
            self.sets.push(s);
            self.choose(depth + 1, used | s, score + v, (cost.0 + c.0, cost.1 + c.1));
            self.sets.pop();
        }
    }
}

/// Run the search. `bw(mask)`: the bandwidth a cluster on a node of the set gets from the
/// set's other nodes (GB/s); `cost(app, mask)`: what moving `app` onto the set costs.
pub fn search(p: &Problem, bw: impl FnMut(u64) -> f64, cost: impl Fn(usize, u64) -> Cost) -> Outcome {
    let clusters: usize = p.apps.iter().map(|a| a.k).sum();
    let mut out = Outcome { total: perms(p.n, clusters), ..Outcome::default() };
    if p.apps.is_empty() || clusters > p.n || p.n > 64 || p.apps.iter().any(|a| a.k == 0) {
        return out;
    }
    // Upper bound of each app: its weight times the best set of its size (every set of that
    // size is scored once here and reused below).
    let mut sizes: Vec<usize> = p.apps.iter().map(|a| a.k).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let sets_needed: f64 = sizes.iter().map(|&k| choose(p.n, k)).sum();
    if sets_needed > p.max_leaves as f64 {
        out.truncated = true;
        return out;
    }
    let mut order: Vec<usize> = (0..p.apps.len()).collect();
    order.sort_by(|&a, &b| p.apps[b].weight.total_cmp(&p.apps[a].weight).then(a.cmp(&b)));
    let mut d = Dfs { p, order, rest_ub: vec![], bw, cost, memo: HashMap::new(), out, sets: vec![], chosen_cost: None };
    let mut best_of_size: HashMap<usize, f64> = HashMap::new();
    for &k in &sizes {
        let mut all = Vec::new();
        subsets(p.n, u64::MAX, k, &mut all);
        let b = all.into_iter().map(|s| d.set_bw(s)).fold(0.0, f64::max);
        best_of_size.insert(k, b);
    }
    let ub: Vec<f64> = d.order.iter().map(|&a| p.apps[a].weight * best_of_size[&p.apps[a].k]).collect();
    d.rest_ub = (0..=ub.len()).map(|i| ub[i..].iter().sum()).collect();
    d.best(0, 0, 0.0);
    if !d.out.truncated {
        d.choose(0, 0, 0.0, (0, 0));
    }
    let mut out = d.out;
    if out.truncated {
        out.sets = None;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bandwidth of a set from a symmetric pair table: mean over nodes of the sum to the others.
    fn pair_sum(bw: &[Vec<f64>], mask: u64) -> f64 {
        let nodes: Vec<usize> = (0..bw.len()).filter(|i| mask >> i & 1 == 1).collect();
        if nodes.len() == 1 {
            return bw[nodes[0]][nodes[0]];
        }
        let s: f64 = nodes.iter().flat_map(|&a| nodes.iter().filter(move |&&b| b != a).map(move |&b| bw[a][b])).sum();
        s / nodes.len() as f64
    }

    fn grid(n: usize, base: f64, fast: &[(usize, usize)], fast_bw: f64) -> Vec<Vec<f64>> {
        let mut bw = vec![vec![base; n]; n];
        for (i, row) in bw.iter_mut().enumerate() {
            row[i] = 10.0;
        }
        for &(a, b) in fast {
            bw[a][b] = fast_bw;
            bw[b][a] = fast_bw;
        }
        bw
    }

    #[test]
    fn finds_the_best_connected_triple_scoring_each_set_once() {
        let bw = grid(8, 3.0, &[(2, 5), (5, 7), (2, 7)], 6.0);
        let apps = [AppReq { k: 3, weight: 1.0 }];
        let o =
            search(&Problem { n: 8, apps: &apps, keep: 0.9, max_leaves: 1 << 20 }, |m| pair_sum(&bw, m), |_, _| (0, 0));
        assert_eq!(o.total, 336.0);
        assert_eq!(o.sets, Some(vec![(1 << 2) | (1 << 5) | (1 << 7)]));
        assert!((o.best - 12.0).abs() < 1e-9, "{}", o.best);
        // 56 sets of 3 scored once each; every later use comes from the table.
        assert_eq!(o.evaluated, 56);
        assert!(o.symmetric > 0);
        assert!(!o.truncated);
    }

    #[test]
    fn among_good_enough_placements_the_cheapest_wins() {
        // Two sets within 90%: {2,5,7} (best) and {0,1,2} at 95%; moving to the best costs
        // pages, staying costs nothing.
        let mut bw = grid(8, 3.0, &[(2, 5), (5, 7), (2, 7)], 6.0);
        for (a, b) in [(0, 1), (1, 2), (0, 2)] {
            bw[a][b] = 5.7;
            bw[b][a] = 5.7;
        }
        let stay: u64 = 0b111;
        let apps = [AppReq { k: 3, weight: 2.0 }];
        let p = Problem { n: 8, apps: &apps, keep: 0.9, max_leaves: 1 << 20 };
        let o = search(&p, |m| pair_sum(&bw, m), |_, m| if m == stay { (0, 0) } else { (100, 0) });
        assert_eq!(o.sets, Some(vec![stay]));
        assert!(o.score >= 0.9 * o.best && o.score < o.best);
        let strict = Problem { keep: 1.0, ..p };
        let o = search(&strict, |m| pair_sum(&bw, m), |_, m| if m == stay { (0, 0) } else { (100, 0) });
        assert_eq!(o.sets, Some(vec![(1 << 2) | (1 << 5) | (1 << 7)]));
    }

    proptest::proptest! {
        #[test]
        fn pruning_and_hashing_lose_nothing(
            vals in proptest::collection::vec(1u32..12, 36),
            w in proptest::collection::vec(0.0f64..5.0, 2),
            costs in proptest::collection::vec(0u64..4, 64),
        ) {
            // 6 nodes, apps of 2 and 3 nodes: the best score and the chosen placement's cost
            // equal the brute force over all disjoint set pairs.
            let mut bw = vec![vec![0.0; 6]; 6];
            for i in 0..6 { for j in 0..6 { bw[i][j] = (vals[i * 6 + j] + vals[j * 6 + i]) as f64; } }
            let apps = [AppReq { k: 2, weight: w[0] }, AppReq { k: 3, weight: w[1] }];
            let cost = |a: usize, m: u64| (costs[(m as usize * 7 + a * 13) % 64], 0u64);
            let o = search(&Problem { n: 6, apps: &apps, keep: 0.9, max_leaves: 1 << 20 }, |m| pair_sum(&bw, m), cost);
            let mut all = Vec::new();
            for a in 0u64..64 { for b in 0u64..64 {
                if a.count_ones() != 2 || b.count_ones() != 3 || a & b != 0 { continue; }
                let s = w[0] * pair_sum(&bw, a) + w[1] * pair_sum(&bw, b);
                all.push((a, b, s, cost(0, a).0 + cost(1, b).0));
            }}
            let best = all.iter().map(|x| x.2).fold(0.0, f64::max);
            proptest::prop_assert!((o.best - best).abs() <= 1e-9 * best.max(1.0));
            let cheapest = all.iter().filter(|x| x.2 >= 0.9 * best - 1e-9 * best).map(|x| x.3).min().unwrap();
            let sets = o.sets.clone().unwrap();
            let got = all.iter().find(|x| x.0 == sets[0] && x.1 == sets[1]).unwrap();
            proptest::prop_assert_eq!(got.3, cheapest);
            proptest::prop_assert!(got.2 >= 0.9 * best - 1e-9 * best.max(1.0));
            proptest::prop_assert_eq!(o.total, 720.0);
        }
    }

    #[test]
    fn impossible_or_huge_problems_give_no_placement() {
        let bw = grid(2, 3.0, &[], 0.0);
        let f = |m: u64| pair_sum(&bw, m);
        let three = [AppReq { k: 3, weight: 1.0 }];
        assert!(search(&Problem { n: 2, apps: &three, keep: 0.9, max_leaves: 10 }, f, |_, _| (0, 0)).sets.is_none());
        assert!(search(&Problem { n: 2, apps: &[], keep: 0.9, max_leaves: 10 }, f, |_, _| (0, 0)).sets.is_none());
        // 40 nodes, 20 per app: C(40,20) sets is far beyond the cap.
        let big = [AppReq { k: 20, weight: 1.0 }];
        let o = search(&Problem { n: 40, apps: &big, keep: 0.9, max_leaves: 1000 }, |_| 1.0, |_, _| (0, 0));
        assert!(o.truncated && o.sets.is_none());
        assert_eq!(perms(8, 3), 336.0);
    }
}

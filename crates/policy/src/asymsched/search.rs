//! AsymSched's placement search: clusters onto distinct nodes, scored by weighted bandwidth.
//!
//! Problem: the placements of k clusters on N nodes number N!/(N-k)! (336 for 3 clusters on
//! 8 nodes, 40320 for 8); scoring every one is wasteful, because a machine's fabric has
//! symmetries and most placements are clearly bad.
//!
//! Approach: depth-first over clusters (grouped by application), with
//! - *pruning*: a branch whose score so far plus an upper bound for the clusters still to
//!   place cannot reach `keep` x the best score found is cut;
//! - *symmetry hashing*: an application's score depends only on, for each of its clusters,
//!   its weight and the bandwidth from its node to the application's other nodes. That
//!   multiset (quantised to 0.01 GB/s) is the placement's hash; each class is scored once
//!   and every placement equivalent to it by the fabric's symmetry reuses the score
//!   (dynamic programming over application sub-placements).
//!
//! Score (the paper's P_wbw): for each cluster C, weight x C_bw, where C_bw is the sum of the
//! bandwidths from C's node to its application's other nodes (for a one-cluster application,
//! the node's local bandwidth), summed over clusters.

use std::collections::HashMap;

/// One cluster to place: its application (index into a contiguous run) and weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Item {
    pub app: usize,
    pub weight: f64,
}

/// The search problem. `bw[i][j]`: GB/s from CPUs of candidate node i to memory of node j.
#[derive(Clone, Debug)]
pub struct Problem {
    pub bw: Vec<Vec<f64>>,
    /// Clusters, with the clusters of one application next to each other.
    pub items: Vec<Item>,
    /// Keep placements scoring at least this fraction of the best.
    pub keep: f64,
    /// Stop after visiting this many complete placements.
    pub max_leaves: u64,
}

/// What the search found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Placements (candidate-node index per cluster) within `keep` of the best, with scores.
    pub kept: Vec<(Vec<usize>, f64)>,
    pub best: f64,
    /// Size of the full enumeration, N!/(N-k)!.
    pub total: f64,
    /// Application sub-placements actually scored (distinct symmetry classes).
    pub evaluated: u64,
    /// Complete placements cut by the bound.
    pub pruned: f64,
    /// Application sub-placements whose score came from the hash table.
    pub symmetric: u64,
    pub truncated: bool,
}

/// Number of ordered selections of `k` out of `n`, as a float (it overflows integers fast).
pub fn perms(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).map(|i| (n - i) as f64).product()
}

/// Symmetry class of an application's sub-placement: per cluster, its exact weight and its
/// quantised bandwidth to the application's other nodes, sorted.
type ClassKey = Vec<(u64, i64)>;

fn q(x: f64) -> i64 {
    (x * 100.0).round() as i64
}

struct Dfs<'a> {
    p: &'a Problem,
    /// Per app: first and one-past-last item index.
    spans: Vec<(usize, usize)>,
    /// Per app: an upper bound of its score.
    ub: Vec<f64>,
    /// Per app: score of each symmetry class seen.
    memo: Vec<HashMap<ClassKey, f64>>,
    /// Scratch buffers reused by every scoring.
    cbw_buf: Vec<f64>,
    key_buf: ClassKey,
    assign: Vec<usize>,
    used: Vec<bool>,
    out: Outcome,
    leaves: u64,
}

impl Dfs<'_> {
    fn app_score(&mut self, app: usize) -> f64 {
        let (a, b) = self.spans[app];
        let nodes = &self.assign[a..b];
        let bw = &self.p.bw;
        // C_bw of each cluster: the app's score depends on the placement only through the
        // (weight, C_bw) pairs, so their sorted list is an exact symmetry class.
        let mut cbw = std::mem::take(&mut self.cbw_buf);
        let mut key = std::mem::take(&mut self.key_buf);
        cbw.clear();
        key.clear();
        for i in a..b {
            let n = self.assign[i];
            cbw.push(if b - a == 1 { bw[n][n] } else { nodes.iter().filter(|&&m| m != n).map(|&m| bw[n][m]).sum() });
            key.push((self.p.items[i].weight.to_bits(), q(cbw[i - a])));
        }
        key.sort_unstable();
        let s = match self.memo[app].get(key.as_slice()) {
            Some(&s) => {
                self.out.symmetric += 1;
                s
            }
            None => {
                self.out.evaluated += 1;
                let s = (a..b).map(|i| self.p.items[i].weight * cbw[i - a]).sum();
                self.memo[app].insert(key.clone(), s);
                s
            }
        };
        self.cbw_buf = cbw;
        self.key_buf = key;
        s
    }

    /// Upper bound of the score of `app`, whose clusters before `depth` are placed: placed
    /// clusters get their bandwidth to the placed partners plus the best links to free nodes
    /// for the partners still to come; unplaced ones the best any node could give.
    fn open_bound(&self, app: usize, depth: usize) -> f64 {
        let (a, b) = self.spans[app];
        let size = b - a;
        if depth == a {
            return self.ub[app];
        }
        let bw = &self.p.bw;
        let placed = &self.assign[a..depth];
        let missing = b - depth;
        let mut total = 0.0;
        for (i, &n) in placed.iter().enumerate() {
            let mut free: Vec<f64> = (0..bw.len()).filter(|&m| !self.used[m]).map(|m| bw[n][m]).collect();
            free.sort_by(|x, y| y.total_cmp(x));
            let cbw: f64 = placed.iter().filter(|&&m| m != n).map(|&m| bw[n][m]).sum::<f64>()
                + free.iter().take(missing).sum::<f64>();
            total += self.p.items[a + i].weight * cbw;
        }
        let per_open = if size <= 1 {
            0.0
        } else {
            self.ub[app] / self.p.items[a..b].iter().map(|i| i.weight).sum::<f64>().max(1e-12)
        };
        total + self.p.items[depth..b].iter().map(|i| i.weight * per_open).sum::<f64>()
    }

    fn go(&mut self, depth: usize, score: f64) {
        let k = self.p.items.len();
        let n = self.p.bw.len();
        if self.leaves >= self.p.max_leaves {
            self.out.truncated = true;
            return;
        }
        if depth == k {
            self.leaves += 1;
            if score > self.out.best {
                self.out.best = score;
            }
            if score >= self.p.keep * self.out.best {
                self.out.kept.push((self.assign.clone(), score));
            }
            return;
        }
        let app = self.p.items[depth].app;
        let bound = score + self.open_bound(app, depth) + self.ub[app + 1..].iter().sum::<f64>();
        if self.out.best > 0.0 && bound < self.p.keep * self.out.best {
            self.out.pruned += perms(n - depth, k - depth);
            return;
        }
        for node in 0..n {
            if self.used[node] {
                continue;
            }
            self.used[node] = true;
            self.assign[depth] = node;
            let next = if self.spans[app].1 == depth + 1 { score + self.app_score(app) } else { score };
            self.go(depth + 1, next);
            self.used[node] = false;
        }
    }
}

/// Run the search.
pub fn search(p: &Problem) -> Outcome {
    let n = p.bw.len();
    let k = p.items.len();
    let mut out = Outcome { total: perms(n, k), ..Outcome::default() };
    if k == 0 || k > n {
        return out;
    }
    let napps = p.items.iter().map(|i| i.app).max().map_or(0, |a| a + 1);
    let mut spans = vec![(usize::MAX, 0); napps];
    for (i, it) in p.items.iter().enumerate() {
        spans[it.app].0 = spans[it.app].0.min(i);
        spans[it.app].1 = i + 1;
    }
    // Upper bound per app: each cluster gets the best C_bw any node could give it.
    let best_local = (0..n).map(|i| p.bw[i][i]).fold(0.0, f64::max);
    let best_out = |m: usize| -> f64 {
        (0..n)
            .map(|i| {
                let mut row: Vec<f64> = (0..n).filter(|&j| j != i).map(|j| p.bw[i][j]).collect();
                row.sort_by(|a, b| b.total_cmp(a));
                row.iter().take(m).sum::<f64>()
            })
            .fold(0.0, f64::max)
    };
    let ub: Vec<f64> = spans
        .iter()
        .map(|&(a, b)| {
            let size = b.saturating_sub(a);
            let cbw = if size <= 1 { best_local } else { best_out(size - 1) };
            p.items.get(a..b).map_or(0.0, |its| its.iter().map(|i| i.weight * cbw).sum())
        })
        .collect();
    // Suffix sums are taken per call from `ub[app..]`: apps are visited in index order.
    let mut d = Dfs {
        p,
        spans,
        ub,
        memo: vec![HashMap::new(); napps],
        cbw_buf: Vec::new(),
        key_buf: Vec::new(),
        assign: vec![0; k],
        used: vec![false; n],
        out,
        leaves: 0,
    };
    d.go(0, 0.0);
    out = d.out;
    let best = out.best;
    out.kept.retain(|(_, s)| *s >= p.keep * best);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn finds_the_best_connected_triple_and_skips_symmetric_work() {
        let bw = grid(8, 3.0, &[(2, 5), (5, 7), (2, 7)], 6.0);
        let items = vec![Item { app: 0, weight: 1.0 }; 3];
        let o = search(&Problem { bw, items, keep: 0.9, max_leaves: 1 << 20 });
        assert_eq!(o.total, 336.0);
        assert!(o.best > 35.9 && o.best < 36.1, "{}", o.best);
        assert!(!o.kept.is_empty());
        for (a, _) in &o.kept {
            let mut s = a.clone();
            s.sort_unstable();
            assert_eq!(s, vec![2, 5, 7]);
        }
        assert!((o.evaluated as f64) < o.total / 10.0, "evaluated {} of {}", o.evaluated, o.total);
        assert!(!o.truncated);
    }

    #[test]
    fn matches_brute_force_on_an_asymmetric_fabric() {
        // Two apps (2 + 1 clusters) on 5 nodes with distinct bandwidths: the best score found
        // equals the best of the full enumeration.
        let bw: Vec<Vec<f64>> = (0..5).map(|i| (0..5).map(|j| 1.0 + ((i * 7 + j * 3) % 11) as f64).collect()).collect();
        let items = vec![Item { app: 0, weight: 2.0 }, Item { app: 0, weight: 1.0 }, Item { app: 1, weight: 0.5 }];
        let o = search(&Problem { bw: bw.clone(), items: items.clone(), keep: 0.9, max_leaves: 1 << 20 });
        let mut brute: f64 = 0.0;
        for a in 0..5 {
            for b in 0..5 {
                for c in 0..5 {
                    if a == b || b == c || a == c {
                        continue;
                    }
                    let s = 2.0 * bw[a][b] + 1.0 * bw[b][a] + 0.5 * bw[c][c];
                    brute = brute.max(s);
                }
            }
        }
        assert!((o.best - brute).abs() < 1e-9, "{} vs {brute}", o.best);
        assert!(o.kept.iter().all(|(_, s)| *s >= 0.9 * brute));
        assert!(o.evaluated as f64 + o.pruned <= o.total + o.symmetric as f64 + 1e-9);
    }

    proptest::proptest! {
        #[test]
        fn pruning_and_hashing_lose_no_placement_within_keep(
            vals in proptest::collection::vec(1u32..12, 36),
            w in proptest::collection::vec(0.0f64..5.0, 4),
        ) {
            // 6 nodes, apps of 3 and 1 clusters: every placement within `keep` of the best
            // (by brute force) is found, with the right best score.
            let bw: Vec<Vec<f64>> = (0..6).map(|i| (0..6).map(|j| vals[i * 6 + j] as f64).collect()).collect();
            let items = vec![
                Item { app: 0, weight: w[0] },
                Item { app: 0, weight: w[1] },
                Item { app: 0, weight: w[2] },
                Item { app: 1, weight: w[3] },
            ];
            let o = search(&Problem { bw: bw.clone(), items, keep: 0.9, max_leaves: 1 << 20 });
            let mut all = Vec::new();
            for a in 0..6 { for b in 0..6 { for c in 0..6 { for d in 0..6 {
                let v = [a, b, c, d];
                if (0..4).any(|i| (i + 1..4).any(|j| v[i] == v[j])) { continue; }
                let s = w[0] * (bw[a][b] + bw[a][c]) + w[1] * (bw[b][a] + bw[b][c]) + w[2] * (bw[c][a] + bw[c][b]) + w[3] * bw[d][d];
                all.push((v.to_vec(), s));
            }}}}
            let best = all.iter().map(|x| x.1).fold(0.0, f64::max);
            proptest::prop_assert!((o.best - best).abs() < 1e-6 * best.max(1.0));
            let want = all.iter().filter(|x| x.1 >= 0.9 * best).count();
            proptest::prop_assert_eq!(o.kept.len(), want);
            proptest::prop_assert_eq!(o.total, 360.0);
        }
    }

    #[test]
    fn too_many_clusters_or_none_gives_nothing() {
        let bw = grid(2, 3.0, &[], 0.0);
        assert!(search(&Problem {
            bw: bw.clone(),
            items: vec![Item { app: 0, weight: 1.0 }; 3],
            keep: 0.9,
            max_leaves: 10
        })
        .kept
        .is_empty());
        assert!(search(&Problem { bw, items: vec![], keep: 0.9, max_leaves: 10 }).kept.is_empty());
        assert_eq!(perms(8, 3), 336.0);
    }
}

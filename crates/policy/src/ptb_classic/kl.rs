//! Recursive Kernighan-Lin bisection of the thread similarity graph (spec "Clustering").
//!
//! Problem: split T threads into one part per CPU node, with prescribed part sizes, so that the
//! total similarity between parts (the cut) is small. k-way min cut is NP-hard; PTB bisects
//! with Kernighan-Lin and recurses.
//!
//! Approach:
//! - `recursive(parts)`: with k part sizes, split them floor(k/2) : ceil(k/2) (the first
//!   floor(k/2) sizes go left), bisect the threads into (sum of left sizes, sum of right
//!   sizes), recurse on each side. With k a power of two and equal sizes this is exactly the
//!   published recursion; otherwise it is the floor:ceil variant the spec suggests, and part
//!   sizes are whatever the caller asks (proportional to CPUs, see `threads`).
//! - `bisect`: classic KL with pair swaps, so unequal sides keep their sizes. Each pass locks
//!   min(|A|, |B|) best-gain pairs (gain D_a + D_b - 2 w(a, b)), then applies the prefix of
//!   swaps with the largest positive total gain; passes repeat until no positive gain or
//!   [`MAX_PASSES`]. Weights are non-negative, so a pair's gain is at most D_a + D_b; with both
//!   sides sorted by D the pair search stops early (exact, not a heuristic cut-off).
//! - The starting partition is the caller's vertex order (the policy orders threads by their
//!   current node), so KL only moves threads when that lowers the cut: it keeps threads where
//!   they are when similarity gives no reason to move them. Ties go to the first pair found.

use super::similarity::Sim;

/// Passes of one bisection at most (each pass is O(n^2) to O(n^2 log n)); KL usually converges
/// in a handful.
pub(crate) const MAX_PASSES: usize = 16;

/// Split `verts` (in order) into parts of the given sizes (`sizes` sums to `verts.len()`).
/// `key` orders vertices before each bisection (smaller keys start on the left).
pub(crate) fn recursive(w: &Sim, verts: Vec<usize>, sizes: &[usize], key: &dyn Fn(usize) -> usize) -> Vec<Vec<usize>> {
    debug_assert_eq!(sizes.iter().sum::<usize>(), verts.len());
    if sizes.len() <= 1 {
        return vec![verts];
    }
    let k_left = sizes.len() / 2;
    let a: usize = sizes[..k_left].iter().sum();
    let mut verts = verts;
    verts.sort_by_key(|&v| (key(v), v));
    let (left, right) = bisect(w, &verts, a);
    let mut out = recursive(w, left, &sizes[..k_left], key);
    out.extend(recursive(w, right, &sizes[k_left..], key));
    out
}

/// The cut weight between two sets.
pub(crate) fn cut(w: &Sim, a: &[usize], b: &[usize]) -> f64 {
    a.iter().map(|&i| b.iter().map(|&j| w.get(i, j)).sum::<f64>()).sum()
}

/// KL bisection: the first `a` vertices start on the left; returns (left, right) with
/// |left| = a.
pub(crate) fn bisect(w: &Sim, verts: &[usize], a: usize) -> (Vec<usize>, Vec<usize>) {
    let n = verts.len();
    let a = a.min(n);
    let mut left: Vec<bool> = (0..n).map(|i| i < a).collect();
    if a == 0 || a == n {
        return split(verts, &left);
    }
    let wl = |i: usize, j: usize| w.get(verts[i], verts[j]);
    let steps = a.min(n - a);
    for _ in 0..MAX_PASSES {
        // D = external - internal weight.
        let mut d: Vec<f64> = (0..n)
            .map(|i| (0..n).filter(|&j| j != i).map(|j| if left[j] == left[i] { -wl(i, j) } else { wl(i, j) }).sum())
            .collect();
        let mut locked = vec![false; n];
        let mut swaps: Vec<(usize, usize, f64)> = Vec::with_capacity(steps);
        for _ in 0..steps {
            let mut la: Vec<usize> = (0..n).filter(|&i| !locked[i] && left[i]).collect();
            let mut lb: Vec<usize> = (0..n).filter(|&i| !locked[i] && !left[i]).collect();
            la.sort_unstable_by(|&x, &y| d[y].total_cmp(&d[x]).then(x.cmp(&y)));
            lb.sort_unstable_by(|&x, &y| d[y].total_cmp(&d[x]).then(x.cmp(&y)));
            let mut best: Option<(usize, usize, f64)> = None;
            'outer: for &i in &la {
                for (k, &j) in lb.iter().enumerate() {
                    if let Some((_, _, g)) = best {
                        if d[i] + d[j] <= g {
                            if k == 0 {
                                break 'outer;
                            }
                            break;
                        }
                    }
                    let g = d[i] + d[j] - 2.0 * wl(i, j);
                    match best {
                        Some(b) if g <= b.2 => {}
                        _ => best = Some((i, j, g)),
                    }
                }
            }
            let Some((i, j, g)) = best else { break };
            locked[i] = true;
            locked[j] = true;
            swaps.push((i, j, g));
            // Update D as if i and j had swapped sides.
            for x in 0..n {
                if locked[x] {
                    continue;
                }
                let (wi, wj) = (wl(x, i), wl(x, j));
                if left[x] {
                    d[x] += 2.0 * wi - 2.0 * wj;
                } else {
                    d[x] += 2.0 * wj - 2.0 * wi;
                }
            }
        }
        // Best prefix of swaps.
        let (mut best_k, mut best_g, mut acc) = (0, 0.0f64, 0.0f64);
        for (k, s) in swaps.iter().enumerate() {
            acc += s.2;
            if acc > best_g + 1e-12 {
                best_g = acc;
                best_k = k + 1;
            }
        }
        if best_k == 0 {
            break;
        }
        for &(i, j, _) in &swaps[..best_k] {
            left[i] = false;
            left[j] = true;
        }
    }
    split(verts, &left)
}

fn split(verts: &[usize], left: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let mut l = Vec::new();
    let mut r = Vec::new();
    for (i, &v) in verts.iter().enumerate() {
        if left[i] {
            l.push(v);
        } else {
            r.push(v);
        }
    }
    (l, r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sim(n: usize, edges: &[(usize, usize, f64)]) -> Sim {
        let mut w = vec![0.0; n * n];
        for &(i, j, x) in edges {
            w[i * n + j] = x;
            w[j * n + i] = x;
        }
        Sim { n, w }
    }

    #[test]
    fn bisect_finds_the_two_cliques_from_a_bad_start() {
        // {0,2} and {1,3} are tightly linked; the start puts {0,1} left.
        let w = sim(4, &[(0, 2, 1.0), (1, 3, 1.0), (0, 1, 0.1), (2, 3, 0.1)]);
        let (mut l, mut r) = bisect(&w, &[0, 1, 2, 3], 2);
        l.sort();
        r.sort();
        assert!((l == vec![0, 2] && r == vec![1, 3]) || (l == vec![1, 3] && r == vec![0, 2]), "{l:?} {r:?}");
        assert!((cut(&w, &l, &r) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn unequal_sides_and_four_way_recursion_keep_sizes() {
        // Three groups: {0,1,2}, {3,4}, {5}; 3:3 split, then 1:2 on the right side.
        let w = sim(6, &[(0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0), (3, 4, 1.0), (4, 5, 0.01)]);
        let parts = recursive(&w, vec![5, 3, 0, 4, 1, 2], &[3, 1, 2], &|v| v);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 1, 2]);
        let mut p0 = parts[0].clone();
        p0.sort();
        assert_eq!(p0, vec![0, 1, 2]);
        let mut p2 = parts[2].clone();
        p2.sort();
        assert_eq!(p2, vec![3, 4]);
    }

    #[test]
    fn no_similarity_keeps_the_start() {
        let w = sim(4, &[]);
        assert_eq!(bisect(&w, &[3, 1, 2, 0], 2), (vec![3, 1], vec![2, 0]));
    }

    proptest! {
        /// KL never makes the cut worse than the start, keeps sizes, and loses no vertex.
        #[test]
        fn bisect_improves_and_preserves(n in 2usize..14, a_frac in 0.0f64..1.0,
                                         ws in proptest::collection::vec(0.0f64..1.0, 14 * 14)) {
            let mut w = vec![0.0; n * n];
            for i in 0..n { for j in i + 1..n { w[i * n + j] = ws[i * 14 + j]; w[j * n + i] = ws[i * 14 + j]; } }
            let w = Sim { n, w };
            let a = ((n as f64) * a_frac) as usize;
            let verts: Vec<usize> = (0..n).collect();
            let (l, r) = bisect(&w, &verts, a);
            prop_assert_eq!(l.len(), a);
            prop_assert_eq!(r.len(), n - a);
            let mut all: Vec<usize> = l.iter().chain(&r).copied().collect();
            all.sort();
            prop_assert_eq!(all, verts.clone());
            prop_assert!(cut(&w, &l, &r) <= cut(&w, &verts[..a], &verts[a..]) + 1e-9);
        }
    }
}

//! Thread phase: part sizes per node, and the greedy cluster -> node placement
//! (spec "Placing clusters on nodes").
//!
//! Part sizes (open in the spec; our choice): one part per allowed node that has CPUs, sized
//! in proportion to the node's CPU count, `T * cpus(n) / total CPUs`, rounded by largest
//! remainder (ties to the lower node index). On equal nodes this is the published "equal-size
//! parts"; when T <= total CPUs no part exceeds its node's CPUs (each size is the floor or ceiling
//! of a number <= cpus(n)); with more threads than CPUs every node gets a share proportional to
//! its CPUs. Nodes without CPUs get no part and no thread.
//!
//! Placement: the published greedy takes each cluster in turn and gives it the available node
//! that holds most of its threads now (ties: the first), then removes *that node* from
//! `available` (the evident intent; the published pseudo-code removed the loop variable). With
//! unequal part sizes a cluster must land on a node whose part size it was cut for, so we take
//! clusters in decreasing size (stable, so equal sizes keep the recursion's order) and only
//! offer nodes whose part size equals the cluster's. With equal nodes every node qualifies and
//! this is exactly the published greedy.

/// Part sizes for `t` threads over nodes with `cpus` CPUs each (all > 0).
pub(crate) fn part_sizes(t: usize, cpus: &[usize]) -> Vec<usize> {
    let total: usize = cpus.iter().sum();
    if cpus.is_empty() || total == 0 {
        return vec![0; cpus.len()];
    }
    let mut sizes: Vec<usize> = cpus.iter().map(|&c| t * c / total).collect();
    let mut left = t - sizes.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..cpus.len()).collect();
    // Largest remainder first; ties to the lower index.
    order.sort_by_key(|&i| (std::cmp::Reverse((t * cpus[i]) % total), i));
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        sizes[i] += 1;
        left -= 1;
    }
    sizes
}

/// Assign clusters to nodes. `clusters[k]` was cut for a part of size `sizes[k]`
/// (`clusters[k].len() == sizes[k]`); `current[t]` is thread t's current node position in the
/// node list (or `usize::MAX` when it is on a node outside the list). Returns, per cluster, the
/// position of its node in the node list.
pub(crate) fn place(clusters: &[Vec<usize>], sizes: &[usize], current: &[usize]) -> Vec<usize> {
    let k = clusters.len();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by_key(|&c| std::cmp::Reverse(clusters[c].len()));
    let mut available = vec![true; sizes.len()];
    let mut out = vec![usize::MAX; k];
    for c in order {
        let len = clusters[c].len();
        let mut here = vec![0usize; sizes.len()];
        for &t in &clusters[c] {
            if let Some(h) = here.get_mut(current[t]) {
                *h += 1;
            }
        }
        let fits = |n: usize| available[n] && sizes[n] == len;
        // Best among nodes cut for this size; if none (cannot happen when clusters come from
        // `part_sizes`), any available node.
        let pick = |ok: &dyn Fn(usize) -> bool| {
            (0..sizes.len()).filter(|&n| ok(n)).fold(None, |b: Option<usize>, n| match b {
                Some(b) if here[b] >= here[n] => Some(b),
                _ => Some(n),
            })
        };
        let best = pick(&fits).or_else(|| pick(&|n| available[n])).unwrap_or(0);
        available[best] = false;
        out[c] = best;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_follow_cpus() {
        assert_eq!(part_sizes(4, &[2, 2]), vec![2, 2]);
        assert_eq!(part_sizes(5, &[2, 2, 2]), vec![2, 2, 1]);
        assert_eq!(part_sizes(6, &[8, 4]), vec![4, 2]);
        assert_eq!(part_sizes(30, &[8, 4]), vec![20, 10]);
        assert_eq!(part_sizes(0, &[8, 4]), vec![0, 0]);
        assert!(part_sizes(3, &[]).is_empty());
    }

    #[test]
    fn greedy_keeps_clusters_where_most_of_their_threads_are() {
        // Cluster 0 = threads {0,1} (now on node 1), cluster 1 = {2,3} (now on node 0).
        let clusters = vec![vec![0, 1], vec![2, 3]];
        assert_eq!(place(&clusters, &[2, 2], &[1, 1, 0, 0]), vec![1, 0]);
        // Both clusters mostly on node 0: the first takes it, the second gets node 1.
        assert_eq!(place(&clusters, &[2, 2], &[0, 0, 0, 1]), vec![0, 1]);
        // Unequal parts: the 1-thread cluster cannot take the 3-slot node.
        let clusters = vec![vec![0, 1, 2], vec![3]];
        assert_eq!(place(&clusters, &[3, 1], &[1, 1, 1, 1]), vec![0, 1]);
    }

    proptest! {
        #[test]
        fn sizes_sum_and_fit(t in 0usize..200, cpus in proptest::collection::vec(1usize..16, 1..8)) {
            let s = part_sizes(t, &cpus);
            prop_assert_eq!(s.iter().sum::<usize>(), t);
            if t <= cpus.iter().sum::<usize>() {
                for (a, c) in s.iter().zip(&cpus) { prop_assert!(a <= c); }
            }
        }
    }
}

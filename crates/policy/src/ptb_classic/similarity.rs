//! Thread similarity: the cosine of the angle between two threads' page histograms, with the
//! C1 hysteresis for threads that already share a node (spec "2. Thread distribution").
//!
//! Problem: the published implementation compared every pair of threads over every slot of
//! its table (O(T^2 * slots)), which dominated its overhead.
//!
//! Approach: sparse dot products. For each page, add `A_i[p] * A_j[p]` to every pair (i, j) of
//! threads that touched it; pages touched by one thread cost nothing. The cost is the sum over
//! pages of (threads on the page)^2 / 2, plus the T x T matrix. A thread with no samples has
//! an undefined cosine; it is 0 to everybody (spec, open question).

use super::profile::Profile;

/// Dense symmetric T x T matrix (row-major) with a zero diagonal.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sim {
    pub n: usize,
    pub w: Vec<f64>,
}

impl Sim {
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.w[i * self.n + j]
    }
}

/// M[i][j] = cos(i, j), times `c1` when threads i and j are on the same node now
/// (`node[i] == node[j]`).
pub(crate) fn similarity(n: usize, prof: &Profile, node: &[usize], c1: f64) -> Sim {
    let mut dot = vec![0.0f64; n * n];
    let mut norm2 = vec![0.0f64; n];
    for row in &prof.pages {
        let cells = prof.cells(row);
        for (k, &(i, a)) in cells.iter().enumerate() {
            let (i, a) = (i as usize, f64::from(a));
            norm2[i] += a * a;
            for &(j, b) in &cells[k + 1..] {
                dot[i * n + j as usize] += a * f64::from(b);
            }
        }
    }
    let norm: Vec<f64> = norm2.iter().map(|x| x.sqrt()).collect();
    let mut w = vec![0.0f64; n * n];
    for i in 0..n {
        for j in i + 1..n {
            let d = dot[i * n + j];
            let c = if d > 0.0 && norm[i] > 0.0 && norm[j] > 0.0 { d / (norm[i] * norm[j]) } else { 0.0 };
            let c = if node[i] == node[j] { c * c1 } else { c };
            w[i * n + j] = c;
            w[j * n + i] = c;
        }
    }
    Sim { n, w }
}

#[cfg(test)]
mod tests {
    use super::super::profile::PageRow;
    use super::*;
    use ptb_profile::PageKey;

    fn prof(pages: &[&[(u32, u32)]]) -> Profile {
        let mut p = Profile::default();
        for (k, cells) in pages.iter().enumerate() {
            let start = p.cells.len() as u32;
            p.cells.extend_from_slice(cells);
            let total = cells.iter().map(|c| u64::from(c.1)).sum();
            p.pages.push(PageRow { key: PageKey { app: 0, vpn: k as u64 }, start, end: p.cells.len() as u32, total });
        }
        p
    }

    #[test]
    fn cosine_by_hand_with_zero_sample_thread_and_c1() {
        // Thread 0: (3, 4) on pages 0,1; thread 1: (4, 3); thread 2: page 2 only; thread 3: none.
        let p = prof(&[&[(0, 3), (1, 4)], &[(0, 4), (1, 3)], &[(2, 5)]]);
        let s = similarity(4, &p, &[0, 1, 0, 1], 1.0);
        assert!((s.get(0, 1) - 24.0 / 25.0).abs() < 1e-12);
        assert_eq!(s.get(1, 0), s.get(0, 1));
        assert_eq!(s.get(0, 2), 0.0);
        assert_eq!(s.get(3, 0), 0.0);
        assert_eq!(s.get(0, 0), 0.0);
        // Same node: multiplied by C1.
        let s = similarity(4, &p, &[0, 0, 0, 1], 2.0);
        assert!((s.get(0, 1) - 48.0 / 25.0).abs() < 1e-12);
    }

    #[test]
    fn magnitude_does_not_matter() {
        let p = prof(&[&[(0, 1), (1, 100)], &[(0, 2), (1, 200)]]);
        let s = similarity(2, &p, &[0, 1], 1.0);
        assert!((s.get(0, 1) - 1.0).abs() < 1e-12);
    }
}

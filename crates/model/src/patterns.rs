//! How one thread's accesses spread over one object: which of the simulator's patterns
//! (docs/workload-file.md) explains its sampled addresses best, and how well.
//!
//! Problem: the samples are few and noisy; several patterns can explain them (a thread reading
//! its own slice looks like `hot` when it is thread 0). Approach: every candidate is a
//! distribution over the object's pages exactly as the simulator lays it out (slice `j` of
//! `t` equal slices, the hot set at the object's start); each gets the log-likelihood of the
//! sampled pages on a grid of buckets (mixed with 1% uniform, so one stray sample does not
//! rule a pattern out) plus a BIC penalty per fitted parameter, and the lowest wins. Two
//! patterns differ only over time or by access kind, and get their own test: `stream` is a
//! private slice whose position follows the phase's progress (correlation > 0.8), and
//! `all-to-all` needs loads spread uniformly and stores in the own slice. The score reported
//! is 1 - the total-variation distance between the sampled and the fitted distribution on a
//! coarser grid (1 = perfect; with n samples even the true pattern scores lower, by about
//! sqrt(buckets / n) / 2).

use ptb_sim::layout::slice;

/// A fitted spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    Private,
    Neighbours {
        share: f64,
    },
    Uniform,
    Hot {
        fraction: f64,
    },
    Stream {
        window: f64,
    },
    AllToAll,
    /// `private` of this share of the accesses, the rest uniform (e.g. a heap that is half a
    /// thread's own and half everyone's).
    PrivateUniform {
        private: f64,
    },
}

impl Spread {
    /// Short text for messages.
    pub fn describe(&self) -> String {
        match self {
            Spread::Private => "private".into(),
            Spread::Neighbours { share } => format!("neighbours ({:.0}% to neighbours)", share * 100.0),
            Spread::Uniform => "uniform".into(),
            Spread::Hot { fraction } => format!("hot (first {:.0}%)", fraction * 100.0),
            Spread::Stream { window } => format!("stream (window {:.1}% of the slice)", window * 100.0),
            Spread::AllToAll => "all-to-all".into(),
            Spread::PrivateUniform { private } => format!("{:.0}% private + uniform", private * 100.0),
        }
    }
}

/// One sampled access as the fitter sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Obs {
    /// Page index inside the object.
    pub page: u64,
    /// How far its phase segment had come (0..1).
    pub progress: f64,
    /// Store (true), load (false), or unknown.
    pub store: Option<bool>,
}

/// The chosen spread with its score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpreadFit {
    pub spread: Spread,
    /// 1 - total-variation distance, 0..1.
    pub score: f64,
    pub samples: usize,
}

/// Pieces `(start, end, mass)` of page ranges, masses summing to 1.
type Pieces = Vec<(f64, f64, f64)>;

fn sl(np: u64, t: usize, j: usize) -> (f64, f64) {
    let (s, e) = slice(np as usize, t, j);
    (s as f64, e as f64)
}

/// The distribution of a spread over the object, as the simulator lays it out.
pub fn pieces(sp: &Spread, np: u64, t: usize, j: usize) -> Pieces {
    let n = np.max(1) as f64;
    let own = sl(np, t, j);
    match *sp {
        Spread::Private | Spread::Stream { .. } => vec![(own.0, own.1, 1.0)],
        Spread::Neighbours { share } if t > 1 => {
            let p = sl(np, t, (j + t - 1) % t);
            let q = sl(np, t, (j + 1) % t);
            vec![(own.0, own.1, 1.0 - share), (p.0, p.1, share / 2.0), (q.0, q.1, share / 2.0)]
        }
        Spread::Neighbours { .. } => vec![(own.0, own.1, 1.0)],
        Spread::Uniform | Spread::AllToAll => vec![(0.0, n, 1.0)],
        Spread::Hot { fraction } => vec![(0.0, (fraction * n).ceil().clamp(1.0, n), 1.0)],
        Spread::PrivateUniform { private } => vec![(own.0, own.1, private), (0.0, n, 1.0 - private)],
    }
}

/// Mass of `p` in each of `b` equal buckets over `[0, np)`.
pub fn bucket_mass(p: &Pieces, np: u64, b: usize) -> Vec<f64> {
    let n = np.max(1) as f64;
    let w = n / b as f64;
    let mut out = vec![0.0; b];
    for &(s, e, m) in p {
        if e <= s || m <= 0.0 {
            continue;
        }
        let first = ((s / w).floor() as usize).min(b - 1);
        let last = (((e / w).ceil() as usize).max(1) - 1).min(b - 1);
        for (k, slot) in out.iter_mut().enumerate().take(last + 1).skip(first) {
            let (a, z) = (k as f64 * w, (k + 1) as f64 * w);
            let ov = e.min(z) - s.max(a);
            if ov > 0.0 {
                *slot += m * ov / (e - s);
            }
        }
    }
    out
}

/// Sample counts per bucket.
fn counts(obs: &[Obs], np: u64, b: usize) -> Vec<f64> {
    let mut c = vec![0.0; b];
    for o in obs {
        let k = (((o.page as f64 + 0.5) * b as f64 / np.max(1) as f64) as usize).min(b - 1);
        c[k] += 1.0;
    }
    c
}

fn loglik(c: &[f64], q: &[f64]) -> f64 {
    let b = q.len() as f64;
    c.iter().zip(q).filter(|(n, _)| **n > 0.0).map(|(n, p)| n * (0.99 * p + 0.01 / b).ln()).sum()
}

/// 1 - total variation between the counts (normalised) and `q`.
fn score(c: &[f64], q: &[f64]) -> f64 {
    let n: f64 = c.iter().sum();
    if n <= 0.0 {
        return 0.0;
    }
    1.0 - 0.5 * c.iter().zip(q).map(|(x, p)| (x / n - p).abs()).sum::<f64>()
}

/// Buckets of the likelihood grid and of the score grid.
fn grids(np: u64, t: usize) -> (usize, usize) {
    let np = np.max(1) as usize;
    let fine = (16 * t).clamp(64, 4096).min(np);
    let coarse = (2 * t).max(8).min(fine);
    (fine.max(1), coarse.max(1))
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    if x.len() < 2 {
        return 0.0;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx <= 0.0 || syy <= 0.0 {
        0.0
    } else {
        sxy / (sxx * syy).sqrt()
    }
}

/// Fit thread `j` of `t` on an object of `np` pages.
pub fn fit(obs: &[Obs], np: u64, t: usize, j: usize) -> SpreadFit {
    let t = t.max(1);
    let np = np.max(1);
    let n = obs.len();
    let (fine, coarse) = grids(np, t);
    if n == 0 {
        return SpreadFit { spread: Spread::Uniform, score: 0.0, samples: 0 };
    }
    let c = counts(obs, np, fine);
    let own = sl(np, t, j);
    let inside = |r: (f64, f64)| obs.iter().filter(|o| (o.page as f64) >= r.0 && (o.page as f64) < r.1).count();
    let f_own = inside(own) as f64 / n as f64;
    let mut cands: Vec<(Spread, usize)> = vec![(Spread::Private, 0), (Spread::Uniform, 0)];
    if t > 1 {
        let p = inside(sl(np, t, (j + t - 1) % t));
        let q = if t > 2 { inside(sl(np, t, (j + 1) % t)) } else { 0 };
        let near = (p + q) as f64;
        let ns = near / (near + inside(own) as f64).max(1.0);
        if ns > 0.01 {
            cands.push((Spread::Neighbours { share: round2(ns.min(1.0)) }, 1));
        }
        let len = (own.1 - own.0) / np as f64;
        let alpha = (f_own - len) / (1.0 - len);
        if alpha > 0.05 && alpha < 0.95 {
            cands.push((Spread::PrivateUniform { private: round2(alpha) }, 1));
        }
    }
    let mut pages: Vec<u64> = obs.iter().map(|o| o.page).collect();
    pages.sort_unstable();
    let q97 = pages[((n as f64 * 0.97).ceil() as usize).clamp(1, n) - 1];
    let h = (q97 + 1) as f64 / np as f64;
    if h <= 0.7 {
        cands.push((Spread::Hot { fraction: round2(h.max(0.01)) }, 1));
    }
    let bic = |sp: &Spread, k: usize| {
        let q = bucket_mass(&pieces(sp, np, t, j), np, fine);
        -2.0 * loglik(&c, &q) + k as f64 * (n as f64).ln()
    };
    let mut best = cands[0].0;
    let mut best_bic = f64::INFINITY;
    for (sp, k) in &cands {
        let v = bic(sp, *k);
        if v < best_bic - 1e-9 {
            best_bic = v;
            best = *sp;
        }
    }
    // Streaming: a private slice swept in step with the phase.
    if best == Spread::Private && n >= 16 {
        let (x, r): (Vec<f64>, Vec<f64>) = obs
            .iter()
            .filter(|o| (o.page as f64) >= own.0 && (o.page as f64) < own.1)
            .map(|o| (o.progress, (o.page as f64 + 0.5 - own.0) / (own.1 - own.0)))
            .unzip();
        if pearson(&x, &r) > 0.8 {
            let res: Vec<f64> = x.iter().zip(&r).map(|(a, b)| b - a).collect();
            let m = res.iter().sum::<f64>() / res.len() as f64;
            let var = res.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / res.len() as f64;
            best = Spread::Stream { window: round2((12.0 * var).sqrt().clamp(1.0 / 64.0, 1.0)) };
        }
    }
    // All-to-all: loads everywhere, stores in the own slice.
    let loads: Vec<Obs> = obs.iter().filter(|o| o.store == Some(false)).copied().collect();
    let stores: Vec<Obs> = obs.iter().filter(|o| o.store == Some(true)).copied().collect();
    if t > 1 && loads.len() >= 5 && stores.len() >= 5 {
        let (lc, stc) = (counts(&loads, np, fine), counts(&stores, np, fine));
        let qu = bucket_mass(&pieces(&Spread::Uniform, np, t, j), np, fine);
        let qp = bucket_mass(&pieces(&Spread::Private, np, t, j), np, fine);
        let a2a = -2.0 * (loglik(&lc, &qu) + loglik(&stc, &qp));
        if loglik(&lc, &qu) > loglik(&lc, &qp) && loglik(&stc, &qp) > loglik(&stc, &qu) && a2a < best_bic {
            let cs = counts(obs, np, coarse);
            let w = stores.len() as f64 / (loads.len() + stores.len()) as f64;
            let q: Vec<f64> = bucket_mass(&pieces(&Spread::Uniform, np, t, j), np, coarse)
                .iter()
                .zip(bucket_mass(&pieces(&Spread::Private, np, t, j), np, coarse))
                .map(|(u, p)| (1.0 - w) * u + w * p)
                .collect();
            return SpreadFit { spread: Spread::AllToAll, score: score(&cs, &q), samples: n };
        }
    }
    let cs = counts(obs, np, coarse);
    let q = bucket_mass(&pieces(&best, np, t, j), np, coarse);
    SpreadFit { spread: best, score: score(&cs, &q), samples: n }
}

/// Two decimals (stable file contents and groupable entries).
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Deterministic pseudo-random pages of a spread (a tiny LCG, no dependency).
    fn draw(sp: &Spread, np: u64, t: usize, j: usize, n: usize, seed: u64) -> Vec<Obs> {
        let p = pieces(sp, np, t, j);
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut rnd = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|i| {
                let mut u = rnd();
                let mut page = 0.0;
                for &(s, e, m) in &p {
                    if u < m {
                        page = s + (e - s) * rnd();
                        break;
                    }
                    u -= m;
                }
                Obs { page: (page as u64).min(np - 1), progress: i as f64 / n as f64, store: None }
            })
            .collect()
    }

    #[test]
    fn each_pattern_is_recovered_from_its_own_samples() {
        let (np, t) = (4096, 8);
        for (sp, j) in [
            (Spread::Private, 3),
            (Spread::Uniform, 5),
            (Spread::Hot { fraction: 0.1 }, 2),
            (Spread::Neighbours { share: 0.4 }, 4),
            (Spread::PrivateUniform { private: 0.5 }, 6),
        ] {
            let f = fit(&draw(&sp, np, t, j, 2000, 7), np, t, j);
            let same = std::mem::discriminant(&f.spread) == std::mem::discriminant(&sp);
            assert!(same, "{sp:?} fitted as {:?}", f.spread);
            assert!(f.score > 0.9, "{sp:?}: score {}", f.score);
        }
    }

    #[test]
    fn parameters_are_estimated() {
        let (np, t) = (10_000, 4);
        match fit(&draw(&Spread::Hot { fraction: 0.2 }, np, t, 1, 3000, 3), np, t, 1).spread {
            Spread::Hot { fraction } => assert!((fraction - 0.2).abs() < 0.02, "{fraction}"),
            other => panic!("{other:?}"),
        }
        match fit(&draw(&Spread::PrivateUniform { private: 0.6 }, np, t, 2, 4000, 5), np, t, 2).spread {
            Spread::PrivateUniform { private } => assert!((private - 0.6).abs() < 0.06, "{private}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn streaming_follows_the_phase_and_all_to_all_needs_kinds() {
        let (np, t, j) = (8000u64, 4, 1);
        let (s, e) = slice(np as usize, t, j);
        let obs: Vec<Obs> = (0..400)
            .map(|i| {
                let prog = i as f64 / 400.0;
                Obs { page: s as u64 + ((e - s) as f64 * prog * 0.95) as u64 + (i % 7), progress: prog, store: None }
            })
            .collect();
        assert!(matches!(fit(&obs, np, t, j).spread, Spread::Stream { .. }));
        let mut mixed = draw(&Spread::Uniform, np, t, j, 600, 1);
        mixed.iter_mut().for_each(|o| o.store = Some(false));
        let mut st = draw(&Spread::Private, np, t, j, 300, 2);
        st.iter_mut().for_each(|o| o.store = Some(true));
        mixed.extend(st);
        assert_eq!(fit(&mixed, np, t, j).spread, Spread::AllToAll);
    }

    #[test]
    fn masses_cover_the_object() {
        for sp in [Spread::Private, Spread::Neighbours { share: 0.3 }, Spread::Hot { fraction: 0.05 }] {
            let m = bucket_mass(&pieces(&sp, 1000, 7, 6), 1000, 64);
            assert!((m.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
        assert_eq!(fit(&[], 10, 2, 0).samples, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_samples_give_a_valid_fit(np in 1u64..100_000, t in 1usize..64, jr in 0usize..64,
                                        pages in proptest::collection::vec(any::<u64>(), 0..200)) {
            let j = jr % t;
            let obs: Vec<Obs> = pages.iter().enumerate()
                .map(|(i, p)| Obs { page: p % np, progress: i as f64 / 200.0, store: Some(i % 3 == 0) })
                .collect();
            let f = fit(&obs, np, t, j);
            prop_assert!((0.0..=1.0 + 1e-9).contains(&f.score));
            prop_assert_eq!(f.samples, obs.len());
            let m: f64 = bucket_mass(&pieces(&f.spread, np, t, j), np, 16.min(np as usize).max(1)).iter().sum();
            prop_assert!((m - 1.0).abs() < 1e-6, "{:?} mass {}", f.spread, m);
        }
    }
}

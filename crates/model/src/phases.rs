//! Phases: where the access mix of a recording changes over time.
//!
//! Problem: a program alternates between, e.g., work on each thread's own data and a step that
//! reads everyone's; one access pattern per thread over the whole run would average them.
//! Approach: cut the recording into equal time windows (about 200 samples each, 4 to 64 of
//! them) and describe each thread in each window by the distribution of its samples over
//! (object, slice of the object): the slices are the model's (one per thread, 2 to 16), so a
//! thread sweeping through its own slice is one mix while the same thread reading everyone's
//! slices is another, and which threads happen to be sampled in a window does not matter. Two
//! windows differ by the mean over threads (weighted by their samples, threads with at least
//! 10 in both) of the total-variation distance between their distributions. A change point
//! lies between windows k and k+1 when the 3 windows up to k and the 3 from k+1 (each with at
//! least 30 samples) differ by more than `max(0.35, 2.5 x the median difference)` and by more
//! than at the neighbouring boundaries (blocks of windows smooth out short-lived structure,
//! such as a thread's sweep through its data within one window). Segments shorter than 3 windows or with fewer than 30 samples join the one
//! before. Segments whose mixes differ by less than that threshold are the same kind of
//! phase, so a program that alternates A B A B gets two phase kinds and a sequence.

/// One sample as the phase finder sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub time_ns: u64,
    pub thread: usize,
    pub object: usize,
    /// Position in the object, 0..1.
    pub pos: f64,
}

/// A stretch of time with one access mix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Phase kind (0.., in order of first appearance).
    pub kind: usize,
    pub samples: usize,
}

/// The phases found.
#[derive(Clone, Debug, PartialEq)]
pub struct Phases {
    pub segments: Vec<Segment>,
    pub kinds: usize,
    /// The difference threshold used (0 when there were too few samples to look).
    pub threshold: f64,
}

const MIN_WINDOW: usize = 30;
/// Shortest segment, in windows.
const MIN_WINDOWS: usize = 3;
/// Windows on each side of a boundary that are compared.
const BLOCK: usize = 3;
/// More kinds than this is noise, not phases: everything becomes one phase.
pub const MAX_KINDS: usize = 8;

fn tv(a: &[f64], b: &[f64]) -> f64 {
    let (sa, sb) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
    if sa <= 0.0 || sb <= 0.0 {
        return 0.0;
    }
    0.5 * a.iter().zip(b).map(|(x, y)| (x / sa - y / sb).abs()).sum::<f64>()
}

/// Per-thread sample counts over (object, slice) cells.
type Mix = Vec<Vec<f64>>;

/// How much two mixes differ: the samples-weighted mean over threads of their distance.
fn dist(a: &Mix, b: &Mix) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let w = x.iter().sum::<f64>().min(y.iter().sum::<f64>());
        if w >= 10.0 {
            num += w * tv(x, y);
            den += w;
        }
    }
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

fn add(a: &mut Mix, b: &Mix) {
    for (x, y) in a.iter_mut().zip(b) {
        x.iter_mut().zip(y).for_each(|(p, q)| *p += q);
    }
}

/// Find the phases of `points` (in time order) over `[t0, t1]`.
pub fn find(points: &[Point], threads: usize, objects: usize, t0: u64, t1: u64) -> Phases {
    let n = points.len();
    let one = |threshold| Phases {
        segments: vec![Segment { start_ns: t0, end_ns: t1.max(t0 + 1), kind: 0, samples: n }],
        kinds: 1,
        threshold,
    };
    let w = (n / 200).clamp(1, 64);
    if w < 4 || t1 <= t0 {
        return one(0.0);
    }
    let nb = threads.clamp(2, 16);
    let nt = threads.max(1);
    let cells = objects.max(1) * nb;
    let span = (t1 - t0) as f64;
    let win_of = |t: u64| (((t.saturating_sub(t0)) as f64 / span * w as f64) as usize).min(w - 1);
    let mut feat: Vec<Mix> = vec![vec![vec![0.0; cells]; nt]; w];
    let mut cnt = vec![0usize; w];
    for p in points {
        let k = win_of(p.time_ns);
        let b = ((p.pos * nb as f64) as usize).min(nb - 1);
        let c = p.object.min(objects.max(1) - 1) * nb + b;
        feat[k][p.thread.min(nt - 1)][c] += 1.0;
        cnt[k] += 1;
    }
    let block = |a: usize, b: usize| -> (Mix, usize) {
        let mut v = vec![vec![0.0; cells]; nt];
        for f in &feat[a..b] {
            add(&mut v, f);
        }
        (v, cnt[a..b].iter().sum())
    };
    let d: Vec<f64> = (0..w - 1)
        .map(|k| {
            let (l, nl) = block((k + 1).saturating_sub(BLOCK), k + 1);
            let (r, nr) = block(k + 1, (k + 1 + BLOCK).min(w));
            if nl >= MIN_WINDOW && nr >= MIN_WINDOW {
                dist(&l, &r)
            } else {
                0.0
            }
        })
        .collect();
    let mut sorted = d.clone();
    sorted.sort_by(f64::total_cmp);
    let theta = (2.5 * sorted[sorted.len() / 2]).max(0.35);
    // Windows -> segments at change points; small segments join the previous one.
    let mut segs: Vec<(usize, usize)> = Vec::new(); // window ranges [a, b)
    let mut a = 0;
    for (k, dk) in d.iter().enumerate() {
        let around = d[k.saturating_sub(2)..(k + 3).min(d.len())].iter().copied().fold(0.0, f64::max);
        if *dk > theta && *dk >= around {
            segs.push((a, k + 1));
            a = k + 1;
        }
    }
    segs.push((a, w));
    let samples = |s: &(usize, usize)| cnt[s.0..s.1].iter().sum::<usize>();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for s in segs {
        match merged.last_mut() {
            Some(last) if samples(&s) < MIN_WINDOW || s.1 - s.0 < MIN_WINDOWS => last.1 = s.1,
            _ => merged.push(s),
        }
    }
    if merged.len() > 1 && (samples(&merged[0]) < MIN_WINDOW || merged[0].1 - merged[0].0 < MIN_WINDOWS) {
        let first = merged.remove(0);
        merged[0].0 = first.0;
    }
    let agg = |s: &(usize, usize)| -> Mix {
        let mut v = vec![vec![0.0; cells]; nt];
        for f in &feat[s.0..s.1] {
            add(&mut v, f);
        }
        v
    };
    let mut kinds: Vec<Mix> = Vec::new();
    let mut out = Vec::new();
    let at = |k: usize| t0 + (span * k as f64 / w as f64) as u64;
    for s in &merged {
        let f = agg(s);
        let kind = match kinds.iter().position(|k| dist(k, &f) <= theta) {
            Some(i) => {
                add(&mut kinds[i], &f);
                i
            }
            None => {
                kinds.push(f);
                kinds.len() - 1
            }
        };
        out.push(Segment { start_ns: at(s.0), end_ns: if s.1 == w { t1 } else { at(s.1) }, kind, samples: samples(s) });
    }
    if kinds.len() > MAX_KINDS {
        return one(theta);
    }
    Phases { segments: out, kinds: kinds.len(), threshold: theta }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 threads; in kind A thread j reads eighth 2j..2j+1, in kind B everyone reads everything.
    fn alternating(periods: usize, per: usize) -> Vec<Point> {
        let mut v = Vec::new();
        let mut t = 0u64;
        for p in 0..periods {
            for i in 0..per {
                let j = i % 4;
                let pos =
                    if p % 2 == 0 { (2 * j) as f64 / 8.0 + (i % 13) as f64 / 52.0 } else { (i % 97) as f64 / 97.0 };
                v.push(Point { time_ns: t, thread: j, object: 0, pos });
                t += 1000;
            }
        }
        v
    }

    #[test]
    fn alternating_mixes_give_two_kinds() {
        let pts = alternating(6, 2000);
        let ph = find(&pts, 4, 1, 0, pts.last().unwrap().time_ns);
        assert_eq!(ph.kinds, 2, "{ph:?}");
        let seq: Vec<usize> = ph.segments.iter().map(|s| s.kind).collect();
        assert_eq!(seq, vec![0, 1, 0, 1, 0, 1]);
        // Change points within one window of the true ones.
        let step = pts.last().unwrap().time_ns / 64 + 1;
        for (k, s) in ph.segments.iter().enumerate().skip(1) {
            let truth = (k * 2000 * 1000) as u64;
            assert!(s.start_ns.abs_diff(truth) <= step, "{k}: {} vs {truth}", s.start_ns);
        }
    }

    #[test]
    fn a_steady_mix_is_one_phase_and_few_samples_are_one_phase() {
        let mut pts = alternating(1, 12_000);
        pts.iter_mut().enumerate().for_each(|(i, p)| p.time_ns = i as u64);
        assert_eq!(find(&pts, 4, 1, 0, 12_000).kinds, 1);
        assert_eq!(find(&pts[..300], 4, 1, 0, 300).segments.len(), 1);
        assert_eq!(find(&[], 4, 1, 0, 0).segments.len(), 1);
    }
}

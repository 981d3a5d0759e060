//! Phases: where the access mix of a recording changes over time, and which stretches alike.
//!
//! Problem: a program alternates between, e.g., work on each thread's own data and a step that
//! reads everyone's; one access pattern per thread over the whole run would average them. The
//! samples that show it are uneven: page-fault samples come in bursts after each re-protect,
//! threads are sampled unevenly from one moment to the next, and threads do not switch at the
//! same instant (in the VM recordings one thread switched up to 0.4 s after the others, in a
//! program whose phases last 1 s), so a stretch around a switch is a blend of two phases.
//! Comparing blocks of equal time windows against a threshold scaled by the median difference
//! made such a blend a phase kind of its own (3 kinds for an A B A B program) in some runs.
//! Approach: cut the recording into windows of equal sample counts (about 200 samples each,
//! 4 to 64 of them: bursts and quiet stretches weigh by their samples, not their duration) and
//! describe each thread in each window by the distribution of its samples over (object, slice
//! of the object): the slices are the model's (one per thread, 2 to 16), so a thread sweeping
//! through its own slice is one mix while the same thread reading everyone's slices is another.
//! Then cluster the windows (k-means with the multinomial likelihood of a window's samples as
//! the cost, the time order ignored), adding a cluster while the new clustering's mixes are
//! all distinct: two mixes differ by the samples-weighted mean over threads of the
//! total-variation distance between their distributions, and a mix is distinct when it
//! differs by at least [`THETA`] from every other and from every per-thread blend of two others
//! (what a switch between them looks like). The clusters are the phase kinds; runs of windows
//! of one kind are the phases, and a run shorter than [`MIN_WINDOWS`] windows joins the
//! neighbour that explains its samples better. Each switch is then placed to the sample, at the
//! likeliest cut (under the two kinds' mixes) within the windows on either side. A steady
//! program's windows differ only by sampling noise, far less than [`THETA`] once pooled, so it
//! stays one phase.

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
    /// The difference two kinds' mixes have at least (0 when there were too few samples to look).
    pub threshold: f64,
}

/// Samples per window (the number of windows is the samples / this, 4 to [`MAX_WINDOWS`]).
const WINDOW_SAMPLES: usize = 200;
const MAX_WINDOWS: usize = 64;
/// Shortest phase, in windows.
pub const MIN_WINDOWS: usize = 3;
/// Two phase kinds differ by at least this: the samples-weighted mean over threads of the
/// share of a thread's accesses that would have to go elsewhere to turn one mix into the other.
pub const THETA: f64 = 0.35;
/// More kinds than this is noise, not phases: everything becomes one phase.
pub const MAX_KINDS: usize = 8;
/// Threads with fewer samples than this in either mix do not count in their difference.
const MIN_THREAD: f64 = 10.0;

/// Per-thread sample counts over (object, slice) cells.
type Mix = Vec<Vec<f64>>;

fn tv(a: &[f64], b: &[f64]) -> f64 {
    let (sa, sb) = (a.iter().sum::<f64>(), b.iter().sum::<f64>());
    if sa <= 0.0 || sb <= 0.0 {
        return 0.0;
    }
    0.5 * a.iter().zip(b).map(|(x, y)| (x / sa - y / sb).abs()).sum::<f64>()
}

/// How much two mixes differ: the samples-weighted mean over threads of their distance.
fn dist(a: &Mix, b: &Mix) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let w = x.iter().sum::<f64>().min(y.iter().sum::<f64>());
        if w >= MIN_THREAD {
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

/// How far `c` is from every per-thread blend of `a` and `b` (each thread's distribution in
/// `c` compared with the nearest mixture of its distributions in `a` and `b`).
fn blend_dist(c: &Mix, a: &Mix, b: &Mix) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for ((z, x), y) in c.iter().zip(a).zip(b) {
        let (sz, sx, sy) = (z.iter().sum::<f64>(), x.iter().sum::<f64>(), y.iter().sum::<f64>());
        let w = sz.min(sx.max(sy));
        if w < MIN_THREAD {
            continue;
        }
        // TV is convex in the blend's weight: a fine grid finds its minimum closely enough.
        let best = (0..=40)
            .map(|i| {
                let al = i as f64 / 40.0;
                let m: Vec<f64> = x
                    .iter()
                    .zip(y)
                    .map(|(p, q)| {
                        let p = if sx > 0.0 { p / sx } else { q / sy.max(1e-300) };
                        let q = if sy > 0.0 { q / sy } else { p };
                        al * p + (1.0 - al) * q
                    })
                    .collect();
                tv(z, &m)
            })
            .fold(f64::INFINITY, f64::min);
        num += w * best;
        den += w;
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

/// Negative log-likelihood of the counts `x` under the distributions of `c` (add-half
/// smoothed, so a cell the centre never saw costs much but not infinitely).
fn cost(x: &Mix, c: &Mix) -> f64 {
    let mut s = 0.0;
    for (xs, cs) in x.iter().zip(c) {
        let tot = cs.iter().sum::<f64>() + 0.5 * cs.len() as f64;
        for (n, m) in xs.iter().zip(cs) {
            if *n > 0.0 {
                s -= n * ((m + 0.5) / tot).ln();
            }
        }
    }
    s
}

/// Every centre differs from every other, and from every blend of two others, by `theta`.
fn distinct(centres: &[Mix], theta: f64) -> bool {
    let k = centres.len();
    for i in 0..k {
        for j in 0..k {
            if j != i && dist(&centres[i], &centres[j]) < theta {
                return false;
            }
            for l in j + 1..k {
                if i != j && i != l && blend_dist(&centres[i], &centres[j], &centres[l]) < theta {
                    return false;
                }
            }
        }
    }
    true
}

/// k-means over the windows from `centres`: (labels, centres), centres pooled from their windows.
fn kmeans(feat: &[Mix], mut centres: Vec<Mix>) -> (Vec<usize>, Vec<Mix>) {
    let mut labels = vec![usize::MAX; feat.len()];
    for _ in 0..50 {
        let new: Vec<usize> = feat
            .iter()
            .map(|f| {
                (0..centres.len()).min_by(|a, b| cost(f, &centres[*a]).total_cmp(&cost(f, &centres[*b]))).unwrap_or(0)
            })
            .collect();
        if new == labels {
            break;
        }
        labels = new;
        let empty = || feat[0].iter().map(|r| vec![0.0; r.len()]).collect::<Mix>();
        let mut next: Vec<Mix> = (0..centres.len()).map(|_| empty()).collect();
        for (f, l) in feat.iter().zip(&labels) {
            add(&mut next[*l], f);
        }
        // A centre that lost every window keeps its place (it will fail `distinct` or stay unused).
        for (c, n) in centres.iter_mut().zip(next) {
            if n.iter().flatten().sum::<f64>() > 0.0 {
                *c = n;
            }
        }
    }
    (labels, centres)
}

/// Find the phases of `points` (in time order) over `[t0, t1]`.
pub fn find(points: &[Point], threads: usize, objects: usize, t0: u64, t1: u64) -> Phases {
    let n = points.len();
    let one = |threshold| Phases {
        segments: vec![Segment { start_ns: t0, end_ns: t1.max(t0 + 1), kind: 0, samples: n }],
        kinds: 1,
        threshold,
    };
    let w = (n / WINDOW_SAMPLES).min(MAX_WINDOWS);
    if w < 4 || t1 <= t0 {
        return one(0.0);
    }
    let nb = threads.clamp(2, 16);
    let nt = threads.max(1);
    let cells = objects.max(1) * nb;
    // Window k holds points[bound[k]..bound[k + 1]].
    let bound: Vec<usize> = (0..=w).map(|k| k * n / w).collect();
    // (thread, cell) of each point.
    let at = |p: &Point| {
        let b = ((p.pos * nb as f64) as usize).min(nb - 1);
        (p.thread.min(nt - 1), p.object.min(objects.max(1) - 1) * nb + b)
    };
    let feat: Vec<Mix> = (0..w)
        .map(|k| {
            let mut m = vec![vec![0.0; cells]; nt];
            for p in &points[bound[k]..bound[k + 1]] {
                let (j, c) = at(p);
                m[j][c] += 1.0;
            }
            m
        })
        .collect();
    // Clusters: k = 2, 3, ... while the k mixes found are distinct and each holds a phase's
    // worth of windows. Seeds: the window farthest from the mix of all, then each time the one
    // farthest from every seed so far (pure phases are the extremes; the mix of all and the
    // switches between phases are blends), refined by k-means.
    let mut all = vec![vec![0.0; cells]; nt];
    feat.iter().for_each(|f| add(&mut all, f));
    let far_from = |cs: &[&Mix]| {
        (0..w).max_by(|a, b| {
            let d = |k: usize| cs.iter().map(|c| dist(&feat[k], c)).fold(f64::INFINITY, f64::min);
            d(*a).total_cmp(&d(*b))
        })
    };
    let mut seeds: Vec<usize> = far_from(&[&all]).into_iter().collect();
    let (mut labels, mut centres) = (vec![0usize; w], vec![all.clone()]);
    while seeds.len() < MAX_KINDS {
        let Some(next) = far_from(&seeds.iter().map(|k| &feat[*k]).collect::<Vec<_>>()) else { break };
        if seeds.contains(&next) {
            break;
        }
        seeds.push(next);
        let (l, c) = kmeans(&feat, seeds.iter().map(|k| feat[*k].clone()).collect());
        let full = (0..c.len()).all(|q| l.iter().filter(|x| **x == q).count() >= MIN_WINDOWS);
        if !full || !distinct(&c, THETA) {
            break;
        }
        (labels, centres) = (l, c);
    }
    // Runs of windows of one kind; a run shorter than MIN_WINDOWS joins the neighbour whose
    // centre explains its samples better (the shortest first).
    let mut runs: Vec<(usize, usize, usize)> = Vec::new(); // [a, b) windows, kind
    for (k, l) in labels.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.2 == *l => r.1 = k + 1,
            _ => runs.push((k, k + 1, *l)),
        }
    }
    let pooled = |a: usize, b: usize| {
        let mut m = vec![vec![0.0; cells]; nt];
        feat[a..b].iter().for_each(|f| add(&mut m, f));
        m
    };
    while runs.len() > 1 {
        let Some(i) =
            (0..runs.len()).filter(|i| runs[*i].1 - runs[*i].0 < MIN_WINDOWS).min_by_key(|i| runs[*i].1 - runs[*i].0)
        else {
            break;
        };
        let m = pooled(runs[i].0, runs[i].1);
        let to = match (i.checked_sub(1), (i + 1 < runs.len()).then_some(i + 1)) {
            (Some(p), Some(q)) => {
                if cost(&m, &centres[runs[p].2]) <= cost(&m, &centres[runs[q].2]) {
                    p
                } else {
                    q
                }
            }
            (Some(p), None) => p,
            (None, Some(q)) => q,
            (None, None) => break,
        };
        runs[i].2 = runs[to].2;
        // Join equal neighbours.
        let mut joined: Vec<(usize, usize, usize)> = Vec::new();
        for r in runs {
            match joined.last_mut() {
                Some(j) if j.2 == r.2 => j.1 = r.1,
                _ => joined.push(r),
            }
        }
        runs = joined;
    }
    // Kinds in order of first appearance; window edges halfway between their samples.
    let mut order: Vec<usize> = Vec::new();
    for r in &runs {
        if !order.contains(&r.2) {
            order.push(r.2);
        }
    }
    // Each switch is placed to the sample: within the window before and the one after the
    // boundary of two runs, the cut that makes the samples before it likeliest under the first
    // run's kind and those after it under the second's (a window that straddles a switch, long
    // where samples are sparse, would otherwise go whole to one side).
    let loglik = |c: &Mix, p: &Point| {
        let (j, k) = at(p);
        let tot = c[j].iter().sum::<f64>() + 0.5 * cells as f64;
        ((c[j][k] + 0.5) / tot).ln()
    };
    let mut cuts: Vec<usize> = vec![0];
    for r in runs.windows(2) {
        // Cut m: points[..m] go to the first run. Runs hold at least MIN_WINDOWS windows, so
        // the ranges searched for neighbouring switches do not overlap.
        let e = r[0].1;
        let (lo, hi) = (bound[e - 1], bound[(e + 1).min(w)]);
        let (ca, cb) = (&centres[r[0].2], &centres[r[1].2]);
        let (mut best, mut best_at, mut gain) = (0.0, lo, 0.0);
        for (i, p) in points[lo..hi].iter().enumerate() {
            gain += loglik(ca, p) - loglik(cb, p);
            if gain > best {
                (best, best_at) = (gain, lo + i + 1);
            }
        }
        cuts.push(best_at);
    }
    cuts.push(n);
    let time_at = |m: usize| match m {
        0 => t0,
        _ if m >= n => t1.max(t0 + 1),
        _ => (points[m - 1].time_ns / 2 + points[m].time_ns / 2).clamp(t0, t1),
    };
    let mut segments: Vec<Segment> = Vec::new();
    for (r, c) in runs.iter().zip(cuts.windows(2)) {
        let start_ns = segments.last().map_or(t0, |s: &Segment| s.end_ns);
        segments.push(Segment {
            start_ns,
            end_ns: time_at(c[1]).max(start_ns),
            kind: order.iter().position(|o| *o == r.2).unwrap_or(0),
            samples: c[1] - c[0],
        });
    }
    Phases { segments, kinds: order.len(), threshold: THETA }
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

//! The true access pattern of a simulated run, read from the workload layout (not sampled):
//! per phase, per thread, the reads and writes sent to each page group of each object.
//!
//! Page groups: object `o` of an application with `T` threads is cut into `T` equal slices, the
//! same slices as the threads' private slices ([`ptb_sim::layout::slice`]), so every pattern
//! (private, neighbours, stream, all-to-all writes) maps onto whole groups; uniform and hot
//! patterns spread over groups in proportion to the pages they cover. Adjacent groups that every
//! thread accesses with the same per-page density are merged for the LP (a uniform object
//! becomes one group) and expanded again afterwards.

use ptb_sim::layout::{slice, CompiledAccess, Layout};
use ptb_sim::workload::Pattern;

/// One thread's traffic in one phase: instructions and `(fine group, reads, writes)`.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadPhase {
    pub thread: usize,
    pub instr: f64,
    pub access: Vec<(usize, f64, f64)>,
}

/// One phase of one application (its repetitions summed).
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseDemand {
    pub ips: f64,
    pub mlp: f64,
    pub threads: Vec<ThreadPhase>,
}

/// The whole run's demand over fine page groups.
#[derive(Clone, Debug, PartialEq)]
pub struct Demand {
    /// `(object, group index, pages)` of every fine group, objects in layout order.
    pub groups: Vec<(usize, usize, usize)>,
    /// Fine groups per object.
    pub per_object: Vec<usize>,
    /// First fine group of each object.
    pub first: Vec<usize>,
    pub phases: Vec<PhaseDemand>,
}

/// Pieces `(start, end, read weight, write weight)` of thread `j` of `n` for one access entry,
/// as the simulator draws them over a whole phase (a stream window covers its slice).
fn pieces(a: &CompiledAccess, np: usize, n: usize, j: usize) -> Vec<(usize, usize, f64, f64)> {
    let w = a.weight;
    match a.pattern {
        Pattern::Private | Pattern::Stream => {
            let (s, e) = slice(np, n, j);
            vec![(s, e, w, w)]
        }
        Pattern::Neighbours if n > 1 => {
            let nb = a.neighbour_share;
            let own = slice(np, n, j);
            let prev = slice(np, n, (j + n - 1) % n);
            let next = slice(np, n, (j + 1) % n);
            vec![
                (own.0, own.1, w * (1.0 - nb), w * (1.0 - nb)),
                (prev.0, prev.1, w * nb / 2.0, w * nb / 2.0),
                (next.0, next.1, w * nb / 2.0, w * nb / 2.0),
            ]
        }
        Pattern::Neighbours => {
            let (s, e) = slice(np, n, j);
            vec![(s, e, w, w)]
        }
        Pattern::Uniform => vec![(0, np, w, w)],
        Pattern::Hot => {
            let end = ((a.hot_fraction * np as f64).ceil() as usize).clamp(1, np);
            vec![(0, end, w, w)]
        }
        Pattern::AllToAll => {
            let (s, e) = slice(np, n, j);
            vec![(0, np, w, 0.0), (s, e, 0.0, w)]
        }
        Pattern::Transposed => {
            let share = w / n.max(1) as f64;
            ptb_sim::layout::transposed(np, n, j).into_iter().map(|(s, e)| (s, e, share, share)).collect()
        }
    }
}

impl Demand {
    /// Build from a simulation's layout.
    pub fn of(l: &Layout) -> Demand {
        let mut groups = Vec::new();
        let mut per_object = Vec::new();
        let mut first = Vec::new();
        for (o, obj) in l.objects.iter().enumerate() {
            let g = l.apps[obj.app].n_threads.clamp(1, obj.npages.max(1));
            first.push(groups.len());
            per_object.push(g);
            for k in 0..g {
                let (s, e) = slice(obj.npages, g, k);
                groups.push((o, k, e - s));
            }
        }
        let mut phases = Vec::new();
        for app in &l.apps {
            let n = app.n_threads;
            for (pi, ph) in app.phases.iter().enumerate() {
                let reps = app.sequence.iter().filter(|&&s| s == pi).count() as f64;
                if reps == 0.0 || ph.work_instr <= 0.0 {
                    continue;
                }
                let mut threads = Vec::new();
                for j in (0..n).filter(|&j| ph.active.get(j).copied().unwrap_or(false)) {
                    let instr = ph.instr_of(j) * reps;
                    let acc = instr * ph.m;
                    let mut ps = Vec::new();
                    for a in ph.access.iter().filter(|a| a.applies(j)) {
                        let np = l.objects[a.object].npages;
                        for (s, e, r, w) in pieces(a, np, n, j) {
                            ps.push((a.object, s, e, r, w));
                        }
                    }
                    let tr: f64 = ps.iter().map(|p| p.3).sum();
                    let tw: f64 = ps.iter().map(|p| p.4).sum();
                    let mut access: Vec<(usize, f64, f64)> = Vec::new();
                    for (o, s, e, r, w) in ps {
                        let reads = if tr > 0.0 { acc * (1.0 - ph.write_share) * r / tr } else { 0.0 };
                        let writes = if tw > 0.0 { acc * ph.write_share * w / tw } else { 0.0 };
                        let g = per_object[o];
                        let np = l.objects[o].npages;
                        let len = (e - s).max(1) as f64;
                        for k in 0..g {
                            let (gs, ge) = slice(np, g, k);
                            let ov = ge.min(e).saturating_sub(gs.max(s)) as f64;
                            if ov > 0.0 {
                                access.push((first[o] + k, reads * ov / len, writes * ov / len));
                            }
                        }
                    }
                    access.sort_by_key(|a| a.0);
                    let mut merged: Vec<(usize, f64, f64)> = Vec::new();
                    for a in access {
                        match merged.last_mut() {
                            Some(m) if m.0 == a.0 => {
                                m.1 += a.1;
                                m.2 += a.2;
                            }
                            _ => merged.push(a),
                        }
                    }
                    threads.push(ThreadPhase { thread: app.first_thread + j, instr, access: merged });
                }
                phases.push(PhaseDemand { ips: ph.ips, mlp: ph.mlp, threads });
            }
        }
        Demand { groups, per_object, first, phases }
    }

    /// Merge adjacent fine groups of the same object that every thread reads and writes with
    /// the same per-page density. Returns `coarse[fine]` and the number of coarse groups.
    pub fn coarsen(&self) -> (Vec<usize>, usize) {
        let nf = self.groups.len();
        // Signature of a fine group: per (phase, thread) density of reads and writes.
        let mut sig: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); nf];
        let mut col = 0usize;
        for ph in &self.phases {
            for th in &ph.threads {
                for &(g, r, w) in &th.access {
                    let pages = self.groups[g].2.max(1) as f64;
                    sig[g].push((col, r / pages, w / pages));
                }
                col += 1;
            }
        }
        let same = |a: &[(usize, f64, f64)], b: &[(usize, f64, f64)]| {
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-300);
            a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.0 == q.0 && close(p.1, q.1) && close(p.2, q.2))
        };
        let mut coarse = vec![0usize; nf];
        let mut next = 0usize;
        for g in 0..nf {
            let new = g == 0 || self.groups[g].0 != self.groups[g - 1].0 || !same(&sig[g], &sig[g - 1]);
            if new && g > 0 {
                next += 1;
            }
            coarse[g] = next;
        }
        (coarse, if nf == 0 { 0 } else { next + 1 })
    }
}

//! Per-thread access distributions: which page ranges a thread touches in its current phase
//! ([`Piece`]s), the resulting share of its reads and writes per memory node, and its demand
//! profile for the contention solver.

use crate::layout::{slice, transposed, wavefront};
use crate::run::{Piece, Run};
use crate::solver::Demand;
use crate::workload::Pattern;

/// Everything a thread's demand profile is computed from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DemandKey {
    cpu_pos: usize,
    load: u32,
    running: bool,
    phase: usize,
    pieces: Vec<Piece>,
    /// Version of each piece's page table (bumped by every page placed or moved).
    versions: Vec<u64>,
}

impl Run<'_> {
    /// Rebuild the pieces of thread `t` for its current phase and progress.
    pub(crate) fn build_pieces(&mut self, t: usize) {
        let l = &self.sim.layout;
        let th = &l.threads[t];
        let app = &l.apps[th.app];
        let st = &self.apps[th.app];
        let mut pieces = std::mem::take(&mut self.threads[t].pieces);
        pieces.clear();
        if st.done_ns.is_none() && st.cur < app.sequence.len() {
            let ph = &app.phases[app.sequence[st.cur]];
            let n = app.n_threads;
            let j = th.index;
            let work = ph.instr_of(j);
            let progress = if work > 0.0 { 1.0 - self.threads[t].remaining / work } else { 0.0 };
            for a in ph.access.iter().filter(|a| a.applies(j)) {
                let np = l.objects[a.object].npages;
                let w = ph.weight_for(a, j);
                let mut push = |(s, e): (usize, usize), r: f64, wr: f64| {
                    pieces.push(Piece { obj: a.object, start: s, end: e, w_read: r, w_write: wr })
                };
                match a.pattern {
                    Pattern::Private => push(slice(np, n, j), w, w),
                    Pattern::Neighbours => {
                        if n == 1 {
                            push(slice(np, n, j), w, w);
                        } else {
                            let nb = a.neighbour_share;
                            push(slice(np, n, j), w * (1.0 - nb), w * (1.0 - nb));
                            push(slice(np, n, (j + n - 1) % n), w * nb / 2.0, w * nb / 2.0);
                            push(slice(np, n, (j + 1) % n), w * nb / 2.0, w * nb / 2.0);
                        }
                    }
                    Pattern::Uniform => push((0, np), w, w),
                    Pattern::Hot => push((0, ((a.hot_fraction * np as f64).ceil() as usize).clamp(1, np)), w, w),
                    Pattern::Stream => {
                        let (s, e) = slice(np, n, j);
                        let len = e - s;
                        let win = ((a.window_fraction * len as f64).ceil() as usize).clamp(1, len);
                        // The window moves in steps of 1/64 of the slice (or one page), so a
                        // streaming thread's distribution changes a few dozen times per phase,
                        // not every step.
                        let quantum = (len / 64).max(1);
                        let off = ((progress.clamp(0.0, 1.0) * len as f64) as usize / quantum * quantum).min(len - win);
                        push((s + off, s + off + win), w, w);
                    }
                    Pattern::AllToAll => {
                        push((0, np), w, 0.0);
                        push(slice(np, n, j), 0.0, w);
                    }
                    Pattern::Transposed => {
                        let front = ph.spin.and_then(|sp| wavefront(np, sp.stages, sp.pipelined, n, j, progress));
                        let parts = front.unwrap_or_else(|| transposed(np, n, j));
                        let share = w / parts.len().max(1) as f64;
                        parts.into_iter().for_each(|r| push(r, share, share));
                    }
                }
            }
        }
        self.threads[t].pieces = pieces;
    }

    /// Recompute thread `t`'s node shares and demand profile from its pieces and placement
    /// (nothing to do when none of its inputs changed since the last time).
    pub(crate) fn build_demand(&mut self, t: usize) {
        let nn = self.sim.sm.n_nodes;
        let l = &self.sim.layout;
        let th = &l.threads[t];
        let app = &l.apps[th.app];
        let st = &self.apps[th.app];
        let rt = &self.threads[t];
        let running = rt.working && !rt.parked && st.done_ns.is_none();
        let load = self.cpu_load[rt.cpu_pos];
        let objs = &self.objs;
        let same = rt.demand_key.as_ref().is_some_and(|k| {
            k.cpu_pos == rt.cpu_pos
                && k.load == load
                && k.running == running
                && k.phase == st.cur
                && k.pieces == rt.pieces
                && k.versions.iter().zip(&rt.pieces).all(|(v, p)| *v == objs[p.obj].version)
        });
        if same {
            return;
        }
        // Reuse the thread's buffers: nothing here allocates once they have grown.
        let rt = &mut self.threads[t];
        let mut key = rt.demand_key.take().unwrap_or_else(|| DemandKey {
            cpu_pos: 0,
            load: 0,
            running: false,
            phase: 0,
            pieces: vec![],
            versions: vec![],
        });
        key.cpu_pos = rt.cpu_pos;
        key.load = load;
        key.running = running;
        key.phase = st.cur;
        key.pieces.clone_from(&rt.pieces);
        key.versions.clear();
        key.versions.extend(rt.pieces.iter().map(|p| self.objs[p.obj].version));
        let mut fr = std::mem::take(&mut rt.f_read);
        let mut fw = std::mem::take(&mut rt.f_write);
        let mut coeffs = std::mem::take(&mut rt.demand.coeffs);
        fr.clear();
        fr.resize(nn, 0.0);
        fw.clear();
        fw.resize(nn, 0.0);
        coeffs.clear();
        let rt = &self.threads[t];
        let hist = &mut self.hist;
        hist.resize(nn, 0);
        let (mut tr, mut tw) = (0.0, 0.0);
        for p in &rt.pieces {
            hist.iter_mut().for_each(|h| *h = 0);
            self.objs[p.obj].histogram(p.start, p.end, hist);
            let sum: u64 = hist.iter().sum();
            if sum == 0 {
                continue;
            }
            for n in 0..nn {
                let s = hist[n] as f64 / sum as f64;
                fr[n] += p.w_read * s;
                fw[n] += p.w_write * s;
            }
            tr += p.w_read;
            tw += p.w_write;
        }
        if tr > 0.0 {
            fr.iter_mut().for_each(|x| *x /= tr);
        }
        if tw > 0.0 {
            fw.iter_mut().for_each(|x| *x /= tw);
        }
        let ph = (st.cur < app.sequence.len()).then(|| &app.phases[app.sequence[st.cur]]);
        let mut d = Demand::default();
        if let (true, Some(ph)) = (running, ph) {
            let g = self.sim.cpu_group[rt.cpu_pos];
            let w = ph.write_share;
            let sm = &self.sim.sm;
            let scratch = &mut self.scratch;
            scratch.resize(sm.resources.len(), 0.0);
            let touched = &mut self.touched;
            touched.clear();
            let mut add = |x: u32, c: f64| {
                if scratch[x as usize] == 0.0 {
                    touched.push(x);
                }
                scratch[x as usize] += c;
            };
            let mut l0 = 0.0;
            for n in 0..nn {
                let r = fr[n] * (1.0 - w);
                let wr = fw[n] * w;
                if r > 0.0 {
                    l0 += r * sm.lat0(g, n);
                    sm.read_res(g, n).iter().for_each(|&x| add(x, r));
                }
                if wr > 0.0 {
                    l0 += wr * sm.lat0(g, n);
                    sm.write_res(g, n).iter().for_each(|&x| add(x, wr));
                }
            }
            // In resource order: sort the touched list, or, when it holds a good share of all
            // resources, read them off the scratch array (same list, no sort).
            if touched.len() * 4 >= scratch.len() {
                for (x, c) in scratch.iter_mut().enumerate() {
                    if *c != 0.0 {
                        coeffs.push((x as u32, *c));
                        *c = 0.0;
                    }
                }
            } else {
                touched.sort_unstable();
                coeffs.extend(touched.iter().map(|&x| {
                    let c = scratch[x as usize];
                    scratch[x as usize] = 0.0;
                    (x, c)
                }));
            }
            let m = if tr + tw > 0.0 { ph.m } else { 0.0 };
            d = Demand {
                l0: if m > 0.0 { l0 } else { 0.0 },
                coeffs,
                speed: 1.0 / self.cpu_load[rt.cpu_pos].max(1) as f64,
                ips: ph.ips,
                m,
                mlp: ph.mlp,
            };
        } else {
            d.coeffs = coeffs;
        }
        let rt = &mut self.threads[t];
        rt.f_read = fr;
        rt.f_write = fw;
        rt.demand = d;
        rt.demand_key = Some(key);
    }
}

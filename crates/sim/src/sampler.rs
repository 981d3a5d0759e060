//! Address sampling (IBS/PEBS-like): one sample every `period` memory accesses of a thread,
//! drawn from the same distribution that drives the thread's memory traffic — read or write
//! by the phase's write share, then a piece by its weight, then a page uniformly in the piece
//! and a cache line uniformly in the page. Each sample costs the sampled thread
//! `costs.sample_us`. A sample carries the latency a load-latency sampler would report: the
//! thread's mean loaded latency, plus, where a saturated resource cut the thread's rate, that
//! wait spread over its accesses (the simulator keeps one latency per thread, not per access).
//! At most `max_samples_per_cycle` samples are kept per cycle; the rest are
//! counted as dropped and the snapshot's `sampling_period` grows to say what one kept sample
//! stands for.

use crate::run::{Piece, Run};
use crate::solver::{Demand, Rate};
use ptb_profile::{Sample, SampleKind};
use rand::Rng;

/// Pick a piece by weight (`write` selects the write weights).
fn pick(pieces: &[Piece], write: bool, x: f64) -> Option<&Piece> {
    let w = |p: &Piece| if write { p.w_write } else { p.w_read };
    let total: f64 = pieces.iter().map(w).sum();
    if total <= 0.0 {
        return None;
    }
    let mut target = x * total;
    for p in pieces {
        target -= w(p);
        if target < 0.0 && w(p) > 0.0 {
            return Some(p);
        }
    }
    pieces.iter().rev().find(|p| w(p) > 0.0)
}

/// The thread's latency as its own stalls show it, ns: with `f` the share of its rate a
/// saturated resource left it, its time per access is `(c + L / mlp) / f` with `c` its compute
/// time per access, which a sampler reads as a latency of `L / f + mlp c (1 / f - 1)`.
pub(crate) fn stall_latency_ns(d: &Demand, r: &Rate) -> f64 {
    if r.lines_per_ns <= 0.0 || d.m <= 0.0 || d.ips <= 0.0 || d.mlp <= 0.0 {
        return r.latency_ns;
    }
    (d.mlp * (d.speed / r.lines_per_ns - 1.0 / (d.ips * d.m))).max(r.latency_ns)
}

impl Run<'_> {
    /// Draw the address samples of a step `[t0, t0 + dt)`.
    #[allow(clippy::needless_range_loop)]
    pub(crate) fn address_samples(&mut self, period: u64, t0: f64, dt: f64, overhead: &mut [f64]) {
        let l = &self.sim.layout;
        let ps = self.sim.machine.page_size;
        let lines_per_page = (ps / self.sim.machine.line_size.max(1)).max(1);
        let sample_ns = self.sim.machine.costs.sample_us * 1e3;
        let first = self.samples.len();
        let cap = self.sim.opts.max_samples_per_cycle;
        for t in 0..self.threads.len() {
            let rt = &mut self.threads[t];
            if !rt.working || rt.stall_ns > 0.0 || rt.rate.lines_per_ns <= 0.0 {
                continue;
            }
            let x = rt.rate.lines_per_ns * dt / period as f64 + rt.sample_carry;
            let k = x.floor();
            rt.sample_carry = x - k;
            let k = k as u64;
            let room = cap.saturating_sub(self.samples.len()) as u64;
            let take = k.min(room);
            self.samples_dropped_cycle += k - take;
            if take == 0 {
                continue;
            }
            let th = &l.threads[t];
            let app = &l.apps[th.app];
            let ws = app.phases[app.sequence[self.apps[th.app].cur]].write_share;
            let cpu = self.sim.cpus[rt.cpu_pos];
            let latency_ns = Some(stall_latency_ns(&rt.demand, &rt.rate) as f32);
            for _ in 0..take {
                let write = self.rng.random::<f64>() < ws;
                let Some(p) = pick(&rt.pieces, write, self.rng.random::<f64>())
                    .or_else(|| pick(&rt.pieces, !write, self.rng.random::<f64>()))
                else {
                    break;
                };
                let page = p.start + self.rng.random_range(0..(p.end - p.start).max(1));
                let o = &l.objects[p.obj];
                let addr =
                    (o.start_vpn + page as u64) * ps + self.rng.random_range(0..lines_per_page) * (ps / lines_per_page);
                let time_ns = (t0 + self.rng.random::<f64>() * dt) as u64;
                self.samples.push(Sample {
                    app: th.app as u32,
                    tid: th.tid,
                    cpu,
                    addr,
                    kind: if write { SampleKind::Store } else { SampleKind::Load },
                    time_ns,
                    data_src: None,
                    latency_ns,
                    phys: None,
                });
            }
            overhead[t] += take as f64 * sample_ns;
            self.acc.samples += take;
            self.acc.sample_overhead_ns += take as f64 * sample_ns;
        }
        self.samples[first..].sort_unstable_by_key(|s| (s.time_ns, s.tid, s.addr));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_not_cut_by_saturation_reports_its_loaded_latency_and_a_cut_one_more() {
        let d = Demand { l0: 90.0, coeffs: vec![], speed: 1.0, ips: 2.0, m: 0.02, mlp: 5.0 };
        // Uncut: cpi = 1/ips + m L / mlp.
        let lat = 120.0;
        let instr = d.speed / (1.0 / d.ips + d.m * lat / d.mlp);
        let free = Rate { instr_per_ns: instr, lines_per_ns: instr * d.m, latency_ns: lat };
        assert!((stall_latency_ns(&d, &free) - lat).abs() < 1e-6);
        // Cut to half its rate: L / f + mlp c (1 / f - 1) with c = 1 / (ips m) = 25 ns.
        let cut = Rate { instr_per_ns: instr / 2.0, lines_per_ns: instr * d.m / 2.0, latency_ns: lat };
        assert!((stall_latency_ns(&d, &cut) - (2.0 * lat + 5.0 * 25.0)).abs() < 1e-6);
        // An idle thread has only its latency.
        assert_eq!(stall_latency_ns(&d, &Rate::default()), 0.0);
    }
}

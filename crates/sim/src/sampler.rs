//! Address sampling (IBS/PEBS-like): one sample every `period` memory accesses of a thread,
//! drawn from the same distribution that drives the thread's memory traffic — read or write
//! by the phase's write share, then a piece by its weight, then a page uniformly in the piece
//! and a cache line uniformly in the page. Each sample costs the sampled thread
//! `costs.sample_us`. At most `max_samples_per_cycle` samples are kept per cycle; the rest are
//! counted as dropped and the snapshot's `sampling_period` grows to say what one kept sample
//! stands for.

use crate::run::{Piece, Run};
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
                    latency: None,
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

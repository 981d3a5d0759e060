//! Address sampling as the hardware delivers it: IBS op / SPE (every op), PEBS load latency
//! (slow loads), last-level-miss sampling.
//!
//! Problem: a policy's view of a program is its samples, and real samplers differ in what they
//! count. AMD IBS op (and Arm SPE without filters) tags one op every `period` ops: most of the
//! memory ops it catches hit a cache, and only the data source says which went to DRAM (the PTB
//! thesis' profiler filled its 15,000-slot table every cycle this way). Intel PEBS load latency
//! samples one of every `period` loads slower than a threshold (in practice the loads that miss
//! the caches) and reports their latency; it never sees a store. A sampler tuned to last-level
//! misses sees loads and stores that go to memory. What a policy can conclude differs by orders
//! of magnitude in density.
//!
//! Approach: per thread and step, the counts follow from what the thread did in the step: ops
//! (= instructions), memory ops (`mops` per instruction, cache hits included), memory
//! accesses (`m` per instruction, the model's last-level misses) and their read/write split.
//! The number of samples is `events / period`, carried over fractionally between steps so no
//! sample is lost to rounding (counts are drawn in aggregate, never one trial per event). Each
//! sample then draws where it went from the same distribution that drives the thread's memory
//! traffic (a piece by weight, a page uniformly in it, a line in the page): for op sampling a
//! memory op is a DRAM access with probability `m / mops`, else a cache hit on the same
//! distribution (spatial locality: a hit falls on a page the thread is working on), or, in a
//! pipelined phase, a load of the spin loop on the page holding its flags with the phase's
//! spin share ([`crate::layout::SpinSite`]). A sample
//! carries the perf data-source word a real sampler would ([`ptb_profile::datasrc`]: cache,
//! local or remote DRAM) and, for DRAM accesses, the latency a load-latency sampler would report
//! for that load: the idle latency from the thread's CPU group to the page's node plus the
//! queueing delays on that path (its controller and links) now, plus, where a saturated
//! resource cut the thread's rate, that wait spread over its accesses. A local load on a quiet
//! controller reports less than a remote one behind a busy link, as IBS and PEBS latencies do;
//! averaged over a thread's loads they give its mean loaded latency.
//!
//! Intel PEBS asked for memory accesses, where the CPU has precise stores, samples its slow
//! loads and every retired store at one period thinned as IBS op's is (the stores that hit L1
//! dropped): a store sample carries only "L1 miss" as its data source and no latency.
//!
//! Costs: every op sample interrupts its thread, memory op or not; each costs
//! `costs.sample_us` of that thread's time. At most `max_samples_per_cycle` samples are kept per
//! cycle; the rest are counted as dropped and the snapshot's `sampling_period` grows to say what
//! one kept sample stands for. Samples come per thread in time order, thread after thread, as a
//! daemon draining one ring buffer per thread delivers them.
//!
//! Counts, costs and what each thread's samples may be are decided here, on the run's thread;
//! the samples themselves are drawn by [`crate::drawer`] (on that thread, or on a second one).

use crate::drawer::{total_weight, yields, HandedOver, Job, Sampler, ToDrawer};
use crate::run::Run;
use crate::solver::{Demand, Rate};
use ptb_profile::thinning::Served;
use ptb_profile::SampledEvent;
use ptb_topology::AddressSampler;

/// The thread's latency as its own stalls show it, ns: with `f` the share of its rate a
/// saturated resource left it, its time per access is `(c + L / mlp) / f` with `c` its compute
/// time per access, which a sampler reads as a latency of `L / f + mlp c (1 / f - 1)`.
pub(crate) fn stall_latency_ns(d: &Demand, r: &Rate) -> f64 {
    if r.lines_per_ns <= 0.0 || d.m <= 0.0 || d.ips <= 0.0 || d.mlp <= 0.0 {
        return r.latency_ns;
    }
    (d.mlp * (d.speed / r.lines_per_ns - 1.0 / (d.ips * d.m))).max(r.latency_ns)
}

/// Samples handed to the drawing thread at a time (fewer hand-offs, fewer wake-ups).
const SEND_SAMPLES: u64 = 4096;

/// Core clock of a machine whose model does not give one, GHz (cycle-counting samplers only).
pub const DEFAULT_CLOCK_GHZ: f64 = 2.0;

/// What `ptb run`'s daemon makes of AMD IBS op without a last-level-miss filter when a policy
/// asks for misses (`ptb_linux::perf::PerfSource::for_event`): IBS counts ops, the samples
/// that hit a cache are dropped, and the op period is the asked one divided by the share of the
/// sampled ops that were memory accesses (the daemon measures it at every drain; here, each
/// cycle's ops and memory accesses set the next cycle's period; 1/32 before the first), so that
/// it interrupts as often as a miss sampler at the period asked, on every op it samples, and
/// keeps that share of the samples, each standing for the period programmed. No address
/// source, thinned or not, interrupts a thread more than the daemon's cap allows (or the
/// policy's lower budget), from the events a second its counter counted per thread in the last
/// cycle, as `ptb run` holds every hardware source. The rule is the daemon's own
/// ([`ptb_profile::thinning`]).
#[derive(Clone, Copy, Debug)]
pub struct Thinning {
    /// Share of the sampled events that are memory accesses, as the last thinned cycle showed
    /// it.
    pub share: f64,
    /// Events a second the counter counted per running thread in the last cycle (0 before):
    /// with the interrupt cap, or the policy's lower budget, the shortest period.
    events_per_s: f64,
    /// This cycle's counted events and thread running time (ns) so far; of a thinned source,
    /// its sampled events and the memory accesses among them.
    counted: f64,
    run_ns: f64,
    thin_events: f64,
    accesses: f64,
    /// The period programmed this cycle (0: none yet).
    pub period: u64,
}

impl Default for Thinning {
    fn default() -> Self {
        let share = ptb_profile::thinning::KEPT_SHARE_PRIOR;
        Thinning { share, events_per_s: 0.0, counted: 0.0, run_ns: 0.0, thin_events: 0.0, accesses: 0.0, period: 0 }
    }
}

impl Thinning {
    /// The period for `asked`: at the share known now where the source thins, and never under
    /// the cap, or the policy's interrupt budget (`None`: the daemon's cap).
    fn period_for(&self, asked: u64, thins: bool, budget: Option<f64>) -> u64 {
        let min_period = ptb_profile::thinning::min_period(self.events_per_s, budget);
        ptb_profile::thinning::period(asked, thins.then_some(self.share), min_period)
    }

    /// The cycle ends: its share and rate set the next cycle's period.
    pub(crate) fn end_cycle(&mut self) {
        if self.thin_events > 0.0 {
            self.share = (self.accesses / self.thin_events).min(1.0);
        }
        if self.run_ns > 0.0 {
            self.events_per_s = self.counted / (self.run_ns * 1e-9);
        }
        (self.counted, self.run_ns, self.thin_events, self.accesses, self.period) = (0.0, 0.0, 0.0, 0.0, 0);
    }
}

/// Per thread and step: how many samples, and what share of them are DRAM accesses / writes.
struct Draw {
    /// Events of the sampled kind in the step.
    events: f64,
    /// Share of the sampled events that are DRAM accesses (the rest hit a cache).
    dram: f64,
    /// Share of the sampled events that are stores.
    writes: f64,
    /// Sampling interrupts per sampled event (op sampling interrupts on non-memory ops too).
    interrupts: f64,
}

/// `instr`: instructions the thread executed in the step; `cycles`: core cycles it ran.
fn draw(event: SampledEvent, instr: f64, cycles: f64, d: &Demand, mops: f64, ws: f64) -> Draw {
    let lines = instr * d.m;
    match event {
        SampledEvent::Cycles => {
            // Each sampled cycle tags one op, a memory op with probability `mops`.
            let mops = mops.max(d.m);
            Draw {
                events: cycles * mops,
                dram: if mops > 0.0 { d.m / mops } else { 0.0 },
                writes: ws,
                interrupts: if mops > 0.0 { 1.0 / mops } else { 0.0 },
            }
        }
        SampledEvent::Ops => {
            let mem = instr * mops.max(d.m);
            Draw {
                events: mem,
                dram: if mem > 0.0 { lines / mem } else { 0.0 },
                writes: ws,
                interrupts: if mem > 0.0 { instr / mem } else { 0.0 },
            }
        }
        SampledEvent::SlowLoads => Draw { events: lines * (1.0 - ws), dram: 1.0, writes: 0.0, interrupts: 1.0 },
        SampledEvent::Misses => Draw { events: lines, dram: 1.0, writes: ws, interrupts: 1.0 },
    }
}

impl Run<'_> {
    /// What the sampler serving this run delivers for `asked` ([`crate::Samplers`]).
    pub(crate) fn served(&self, asked: SampledEvent) -> Served {
        match (self.sim.opts.samplers, self.sim.machine.sampler) {
            (crate::Samplers::Machine, Some(s)) => ptb_profile::thinning::served(s, asked),
            _ => Served { event: asked, thinned: false },
        }
    }

    /// Draw the address samples of a step `[t0, t0 + dt)`: counts and costs here, the samples
    /// themselves by the run's [`crate::drawer::Drawer`].
    #[allow(clippy::needless_range_loop)]
    pub(crate) fn address_samples(&mut self, event: SampledEvent, period: u64, t0: f64, dt: f64, overhead: &mut [f64]) {
        let l = &self.sim.layout;
        let sample_ns = self.sim.costs.sample_us * 1e3;
        let cap = self.sim.opts.max_samples_per_cycle;
        // What the machine's sampler delivers; IBS op asked for memory accesses: its misses at
        // a thinned op period.
        let Served { event, thinned: thin } = self.served(event);
        // Intel PEBS asked for misses: slow loads and precise stores, thinned alike.
        let pebs_stores = thin && matches!(self.sim.machine.sampler, Some(AddressSampler::PebsLoads { .. }));
        let q = self.thinning.period_for(period.max(1), thin, self.sampling.max_interrupts_per_s);
        self.thinning.period = q;
        let (event, period) = if thin { (SampledEvent::Misses, q) } else { (event, q) };
        let period = period.max(1) as f64;
        let clock = self.sim.machine.clock_ghz.unwrap_or(DEFAULT_CLOCK_GHZ);
        let mut batch = std::mem::take(&mut self.batch);
        for t in 0..self.threads.len() {
            let rt = &mut self.threads[t];
            let run_ns = (dt - rt.stall_ns.min(dt)).min(if rt.rate.instr_per_ns > 0.0 {
                rt.remaining / rt.rate.instr_per_ns
            } else {
                0.0
            });
            if !rt.working || rt.parked || run_ns <= 0.0 || rt.rate.instr_per_ns <= 0.0 {
                continue;
            }
            let th = &l.threads[t];
            let app = &l.apps[th.app];
            let ph = &app.phases[app.sequence[self.apps[th.app].cur]];
            let instr = rt.rate.instr_per_ns * run_ns;
            let mut dr = draw(event, instr, run_ns * clock, &rt.demand, ph.mops, ph.write_share);
            if thin {
                // Every event sampled interrupts; the memory accesses among them are kept. IBS op
                // samples every op; PEBS its slow loads (the DRAM reads) and every retired store,
                // the stores being the phase's write share of its memory ops (the model has no
                // store count of its own), of which those that miss L1 (here, its DRAM writes) are
                // kept.
                let accesses = instr * rt.demand.m;
                let sampled = if pebs_stores {
                    let m = rt.demand.m;
                    instr * (m * (1.0 - ph.write_share) + ph.mops.max(m) * ph.write_share)
                } else {
                    instr
                };
                dr.interrupts = if accesses > 0.0 { sampled / accesses } else { 0.0 };
                self.thinning.thin_events += sampled;
                self.thinning.accesses += accesses;
            }
            // What the counter counts (ops, cycles, loads, ...): an interrupt every `period`.
            self.thinning.counted += dr.events * dr.interrupts;
            self.thinning.run_ns += run_ns;
            // An op sampler tags cache hits too (part of the memory ops): the spin loop's loads
            // and the phase's hits on named objects, together at most the ops that are not DRAM
            // accesses.
            let hits0 = batch.hits.len();
            if matches!(event, SampledEvent::Ops | SampledEvent::Cycles) {
                let mut room = (1.0 - dr.dram).max(0.0);
                for mut h in ph.cache_hits() {
                    h.share = h.share.min(room).max(0.0);
                    room -= h.share;
                    if h.share > 0.0 {
                        batch.hits.push(h);
                    }
                }
            }
            let x = dr.events / period + rt.sample_carry;
            let k = x.floor();
            rt.sample_carry = x - k;
            let k = k as u64;
            // Every sampled event interrupts, kept or dropped; op sampling also on non-memory ops.
            let cost = dr.events / period * dr.interrupts * sample_ns;
            overhead[t] += cost;
            self.acc.sample_overhead_ns += cost;
            let room = cap.saturating_sub(self.samples.len() + self.samples_drawn) as u64;
            let take = k.min(room);
            self.samples_dropped_cycle += k - take;
            if take == 0 {
                continue;
            }
            let totals = [total_weight(&rt.pieces, false), total_weight(&rt.pieces, true)];
            self.samples_drawn += yields(&rt.pieces, totals, take) as usize;
            let first = batch.pieces.len();
            batch.pieces.extend_from_slice(&rt.pieces);
            // Each load reports its own latency: the idle latency from the thread's CPU group
            // to the page's node, the queueing on that path now, and the wait a saturated
            // resource adds to each of the thread's accesses (the same for all of them).
            let stall = stall_latency_ns(&rt.demand, &rt.rate);
            let wait = (stall - rt.rate.latency_ns).max(0.0);
            let (sm, g, q) = (&self.sim.sm, self.sim.cpu_group[rt.cpu_pos], self.solver.delays());
            let lat0 = batch.lat.len();
            batch.lat.extend((0..sm.n_nodes).map(|n| {
                let queued: f64 = sm.read_res(g, n).iter().map(|&x| q.get(x as usize).copied().unwrap_or(0.0)).sum();
                (sm.lat0(g, n) + queued + wait) as f32
            }));
            batch.jobs.push(Job {
                app: th.app as u32,
                tid: th.tid,
                cpu: self.sim.cpus[rt.cpu_pos],
                node: self.sim.cpu_node[rt.cpu_pos],
                latency: Some(stall as f32),
                lat: lat0..batch.lat.len(),
                dram: dr.dram,
                writes: dr.writes,
                stores_l1_only: pebs_stores,
                hits: hits0..batch.hits.len(),
                take,
                t0: t0 + (dt - run_ns),
                step: run_ns / take as f64,
                pieces: first..batch.pieces.len(),
                totals,
            });
            self.acc.samples += take;
        }
        self.batch = batch;
        self.draw_samples(false);
    }

    /// Draw the jobs of `self.batch`: at once on the run's thread; on the drawing thread once
    /// they add up to [`SEND_SAMPLES`] samples (each hand-off wakes that thread) or `now`.
    fn draw_samples(&mut self, now: bool) {
        let m = &self.sim.machine;
        match &mut self.sampler {
            Sampler::Inline(d) => {
                d.draw(&self.sim.layout, m.page_size, m.line_size, &self.batch);
                self.batch.jobs.clear();
                self.batch.pieces.clear();
                self.batch.lat.clear();
                self.batch.hits.clear();
            }
            Sampler::Thread { tx, .. } => {
                let pending: u64 = self.batch.jobs.iter().map(|j| j.take).sum();
                if pending > 0 && (now || pending >= SEND_SAMPLES) {
                    // The thread ends only when the run drops its channel.
                    let _ = tx.send(ToDrawer::Batch(std::mem::take(&mut self.batch)));
                }
            }
            Sampler::Moving => {}
        }
    }

    /// Take the samples drawn so far into `self.samples` (before a policy looks at them, and
    /// before pages move).
    pub(crate) fn collect_samples(&mut self) {
        self.draw_samples(true);
        let got = match &mut self.sampler {
            Sampler::Inline(d) => {
                Some(HandedOver { samples: std::mem::take(&mut d.samples), dram: std::mem::take(&mut d.dram) })
            }
            Sampler::Thread { tx, rx } => {
                let empty = std::mem::take(&mut self.spare_samples);
                tx.send(ToDrawer::HandOver(empty)).ok().and_then(|_| rx.recv().ok())
            }
            Sampler::Moving => None,
        };
        let Some(HandedOver { mut samples, dram }) = got else { return };
        self.acc.samples_dram += dram;
        self.samples_drawn = 0;
        if self.samples.is_empty() {
            std::mem::swap(&mut self.samples, &mut samples);
        } else {
            self.samples.append(&mut samples);
        }
        if let Sampler::Inline(d) = &mut self.sampler {
            d.samples = samples;
        } else {
            self.spare_samples = samples;
        }
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

    #[test]
    fn op_sampling_sees_cache_hits_and_interrupts_on_every_op() {
        let d = Demand { l0: 90.0, coeffs: vec![], speed: 1.0, ips: 2.0, m: 0.03, mlp: 2.0 };
        // 1e6 instructions, 350 memory ops per kilo-instruction, 30 of them DRAM accesses.
        let x = draw(SampledEvent::Ops, 1e6, 0.0, &d, 0.35, 0.25);
        assert!((x.events - 350_000.0).abs() < 1e-6);
        assert!((x.dram - 30.0 / 350.0).abs() < 1e-9);
        assert!((x.events * x.interrupts - 1e6).abs() < 1e-3, "one interrupt per sampled op");
        // PEBS load latency: only the DRAM reads.
        let y = draw(SampledEvent::SlowLoads, 1e6, 0.0, &d, 0.35, 0.25);
        assert!((y.events - 30_000.0 * 0.75).abs() < 1e-6);
        assert_eq!((y.dram, y.writes), (1.0, 0.0));
        // Miss sampling: every DRAM access.
        let z = draw(SampledEvent::Misses, 1e6, 0.0, &d, 0.35, 0.25);
        assert!((z.events - 30_000.0).abs() < 1e-6);
        // IBS in cycle mode: 2e6 cycles, one op per sampled cycle.
        let c = draw(SampledEvent::Cycles, 1e6, 2e6, &d, 0.35, 0.25);
        assert!((c.events * c.interrupts - 2e6).abs() < 1e-3, "one interrupt per sampled cycle");
        assert!((c.events * c.dram - 2e6 * 0.03).abs() < 1e-6, "DRAM ops in the op mix");
    }
}

//! The driver loop: advance simulated time step by step, solve contention, advance threads,
//! deliver samples, run policy cycles and apply their plans.
//!
//! A step ends at the earliest of: `max_step` after its start, the next policy cycle, the next
//! hinting-fault scan, the end of a pending stall or page-copy transfer, and the moment a
//! thread finishes its phase work — so phase ends are exact and nothing changes inside a step.
//! The contention solve is skipped when nothing that feeds it changed.

use crate::error::SimError;
use crate::run::Run;
use crate::sim::Simulation;
use ptb_policy::{PageLookup, Policy, Region, SamplingMode, SamplingRequest, Snapshot};
use std::time::{Duration, Instant};

/// A stall longer than this takes the thread out of the contention solve until only this much
/// is left (a page copy of many ms); a shorter one (a thread move's lost cache, a sampling
/// interrupt, a small share of a copy) is paid from the thread's next progress while its memory
/// traffic stays in the solve, so that it costs no solve and no step of its own.
pub(crate) const STALL_EVENT_NS: f64 = 2e6;

/// A thread whose stall exceeds this leaves the solve (and rejoins at [`STALL_EVENT_NS`]).
const PARK_NS: f64 = 3.0 * STALL_EVENT_NS;

/// Thread ends (phase work done, long stall over) this close to the first one share its step:
/// within 2 ms, or 2% of the time the phase has run.
const MERGE_NS: f64 = 2e6;
const MERGE_SHARE: f64 = 0.02;

/// A streaming window that moved changes a thread's node shares; a new contention solve is made
/// when some share moved by more than this (1 point of a thread's traffic).
const SHARE_STEP: f64 = 0.01;

/// Where a run's pages live, looked up in its page tables as a policy asks.
struct SimPages<'r> {
    layout: &'r crate::layout::Layout,
    objs: &'r [crate::pages::PageTable],
}

impl PageLookup for SimPages<'_> {
    fn get(&self, p: ptb_profile::PageKey) -> Option<ptb_topology::NodeIdx> {
        let (o, i) = self.layout.find_page(p.app as usize, p.vpn)?;
        self.objs[o].get(i).map(ptb_topology::NodeIdx::from_ix)
    }
}

/// Longest step when no streaming window moves: nothing changes inside a step, so this only
/// bounds how long rates computed at its start stay in force while nothing else happens.
const IDLE_STEP_NS: f64 = 100e6;

impl Run<'_> {
    /// Put every application in its first phase with work.
    pub(crate) fn start_apps(&mut self) {
        for a in 0..self.apps.len() {
            self.enter_phase(a);
        }
    }

    /// Start the app's current phase (skipping phases without work); finish the app at the end.
    fn enter_phase(&mut self, a: usize) {
        let l = &self.sim.layout;
        let app = &l.apps[a];
        loop {
            let st = &mut self.apps[a];
            if st.cur >= app.sequence.len() {
                self.finish_app(a);
                return;
            }
            st.phase_started_ns = self.now_ns;
            let ph = &app.phases[app.sequence[st.cur]];
            let mut any = false;
            for i in 0..app.n_threads {
                let t = app.first_thread + i;
                let w = ph.active[i] && ph.instr_of(i) > 0.0;
                self.threads[t].working = w;
                self.threads[t].remaining = if w { ph.instr_of(i) } else { 0.0 };
                any |= w;
            }
            if any {
                for i in 0..app.n_threads {
                    self.build_pieces(app.first_thread + i);
                }
                self.dirty = true;
                return;
            }
            self.apps[a].cur += 1;
        }
    }

    fn finish_app(&mut self, a: usize) {
        let app = &self.sim.layout.apps[a];
        self.apps[a].done_ns = Some(self.now_ns);
        for t in app.first_thread..app.first_thread + app.n_threads {
            let rt = &mut self.threads[t];
            if rt.alive {
                rt.alive = false;
                rt.working = false;
                self.cpu_load[rt.cpu_pos] -= 1;
            }
        }
        self.dirty = true;
    }

    fn all_done(&self) -> bool {
        self.apps.iter().all(|a| a.done_ns.is_some())
    }

    /// Use a sampling request from now on.
    pub(crate) fn set_sampling(&mut self, req: SamplingRequest) {
        self.sampling = req;
        match req.mode {
            SamplingMode::HintFaults { scan_period, .. } => {
                if !self.next_scan_ns.is_finite() {
                    self.next_scan_ns = self.now_ns + (scan_period.as_nanos() as f64).max(1e3);
                }
            }
            _ => self.next_scan_ns = f64::INFINITY,
        }
    }

    /// Run to the end. `policy` is called every cycle when given. With
    /// [`crate::SimOptions::sampler_thread`] and address sampling, samples are drawn on a second
    /// thread ([`crate::drawer`]); the results are the same either way.
    pub(crate) fn drive(&mut self, policy: Option<&mut dyn Policy>) -> Result<(), SimError> {
        let threaded = self.sim.opts.sampler_thread && matches!(self.sampling.mode, SamplingMode::Address { .. });
        let crate::drawer::Sampler::Inline(drawer) =
            std::mem::replace(&mut self.sampler, crate::drawer::Sampler::Moving)
        else {
            return Err(SimError::Options("the sampler is already running".into()));
        };
        if !threaded {
            self.sampler = crate::drawer::Sampler::Inline(drawer);
            let r = self.steps_to_end(policy);
            self.collect_samples();
            return r;
        }
        let sim: &Simulation = self.sim;
        std::thread::scope(|s| {
            let (tx, drawer_rx) = std::sync::mpsc::channel();
            let (drawer_tx, rx) = std::sync::mpsc::channel();
            let (ps, line) = (sim.machine.page_size, sim.machine.line_size);
            let worker = s.spawn(move || crate::drawer::serve(drawer, &sim.layout, ps, line, drawer_rx, drawer_tx));
            self.sampler = crate::drawer::Sampler::Thread { tx, rx };
            // A panic (a policy's) must still end the thread, or the scope would wait for ever.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let r = self.steps_to_end(policy);
                self.collect_samples();
                r
            }));
            // Dropping the channel ends the thread, which gives the drawer back.
            self.sampler = crate::drawer::Sampler::Moving;
            let drawer = worker.join();
            let r = r.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            self.sampler =
                crate::drawer::Sampler::Inline(drawer.unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            r
        })
    }

    /// The step loop of [`Self::drive`].
    fn steps_to_end(&mut self, mut policy: Option<&mut dyn Policy>) -> Result<(), SimError> {
        let opts = &self.sim.opts;
        let stream_step = opts.max_step_ms * 1e6;
        let max_ns = opts.max_sim_s * 1e9;
        let cycle_ns = |r: &SamplingRequest| (r.cycle.as_nanos() as f64).max(1e6);
        let mut next_cycle = if policy.is_some() { cycle_ns(&self.sampling) } else { f64::INFINITY };
        let sched_on = opts.linux_migrations_per_s > 0.0;
        let mut next_tick = if sched_on { crate::sched::TICK_NS } else { f64::INFINITY };
        let nt = self.threads.len();
        let mut overhead = vec![0.0f64; nt];
        let res = crate::solver::Resources::of(&self.sim.sm);
        let line = self.sim.machine.line_size as f64;
        self.start_apps();
        while !self.all_done() {
            if self.now_ns > max_ns {
                return Err(SimError::Options(format!(
                    "the run did not finish within {} simulated seconds (raise max_sim_s or lower --duration-scale)",
                    opts.max_sim_s
                )));
            }
            // Expired page copies.
            let before = self.background.len();
            let now = self.now_ns;
            self.background.retain(|b| b.until_ns > now + 1e-3);
            if self.background.len() != before {
                self.dirty = true;
            }
            // Threads whose stall grew long leave the solve until it is nearly paid.
            for rt in self.threads.iter_mut() {
                if !rt.parked && rt.working && rt.stall_ns > PARK_NS {
                    rt.parked = true;
                    self.dirty = true;
                }
            }
            // Streaming windows that moved; a new solve only when a thread's node shares did.
            let streaming = self.streaming_threads();
            let mut moved_shares = false;
            for &t in &streaming {
                let mut old = std::mem::take(&mut self.prev_pieces);
                old.clone_from(&self.threads[t].pieces);
                self.build_pieces(t);
                let changed = self.threads[t].pieces != old;
                self.prev_pieces = old;
                if changed && !self.dirty {
                    let mut prev = std::mem::take(&mut self.prev_shares);
                    prev.clear();
                    prev.extend_from_slice(&self.threads[t].f_read);
                    prev.extend_from_slice(&self.threads[t].f_write);
                    self.build_demand(t);
                    let rt = &self.threads[t];
                    let diff = prev.iter().zip(rt.f_read.iter().chain(&rt.f_write)).map(|(a, b)| (a - b).abs());
                    moved_shares |= diff.fold(0.0, f64::max) > SHARE_STEP;
                    self.prev_shares = prev;
                }
            }
            if self.dirty || moved_shares {
                if self.dirty {
                    for t in 0..nt {
                        self.build_demand(t);
                    }
                }
                self.bg_vec.iter_mut().for_each(|x| *x = 0.0);
                for b in &self.background {
                    for &(r, v) in &b.loads {
                        self.bg_vec[r as usize] += v;
                    }
                }
                let demands: Vec<&crate::solver::Demand> = self.threads.iter().map(|t| &t.demand).collect();
                let rates = self.solver.solve(&demands, &res, &self.bg_vec, line, &self.sim.opts.model);
                for (t, r) in self.threads.iter_mut().zip(rates) {
                    t.rate = r;
                }
                self.solves += 1;
                self.solver_iterations += self.solver.last_iterations as u64;
                self.dirty = false;
            }
            // Step length: up to the next event (a cycle, a scan, a scheduler tick, the end of a
            // stall, a copy or a thread's phase work); streaming windows move every few ms.
            let bound = if streaming.is_empty() { IDLE_STEP_NS } else { stream_step };
            // Scheduler ticks ride on the next step end (at most `bound` late) rather than
            // cutting steps of their own.
            let mut t1 = (self.now_ns + bound).min(next_cycle).min(self.next_scan_ns);
            for b in &self.background {
                t1 = t1.min(b.until_ns);
            }
            // Threads that finish their phase work or end a long stall within a few ms of the
            // first one do so in the same step: each such event changes everyone's contention,
            // and one solve per thread would cost far more than the ms of precision it buys.
            let now = self.now_ns;
            let ends = || {
                self.threads.iter().filter(|r| r.working).filter_map(move |rt| {
                    if rt.parked {
                        Some(now + (rt.stall_ns - STALL_EVENT_NS).max(0.0))
                    } else if rt.rate.instr_per_ns > 0.0 {
                        Some(now + rt.stall_ns + rt.remaining / rt.rate.instr_per_ns)
                    } else {
                        None
                    }
                })
            };
            if let Some(first) = ends().reduce(f64::min) {
                if first < t1 {
                    let phase_start = self
                        .apps
                        .iter()
                        .filter(|a| a.done_ns.is_none())
                        .map(|a| a.phase_started_ns)
                        .fold(self.now_ns, f64::min);
                    let window = first + MERGE_NS.max(MERGE_SHARE * (first - phase_start));
                    t1 = ends().filter(|&e| e <= window).fold(first, f64::max).min(t1.max(first));
                }
            }
            let t1 = t1.max(self.now_ns + 1.0);
            let dt = t1 - self.now_ns;
            // Samples of this step.
            overhead.iter_mut().for_each(|o| *o = 0.0);
            match self.sampling.mode {
                SamplingMode::Address { event, period } => {
                    self.address_samples(event, period, self.now_ns, dt, &mut overhead)
                }
                SamplingMode::HintFaults { .. } => self.deliver_hint_faults(t1, &mut overhead),
                SamplingMode::None | SamplingMode::PageFaults => {}
            }
            self.advance(dt, &overhead);
            self.now_ns = t1;
            self.steps += 1;
            // Barriers.
            for a in 0..self.apps.len() {
                if self.apps[a].done_ns.is_some() {
                    continue;
                }
                let app = &self.sim.layout.apps[a];
                let busy = (app.first_thread..app.first_thread + app.n_threads).any(|t| self.threads[t].working);
                if !busy {
                    let st = &mut self.apps[a];
                    let pi = app.sequence[st.cur];
                    st.phase_ns[pi] += self.now_ns - st.phase_started_ns;
                    st.cur += 1;
                    self.enter_phase(a);
                }
            }
            if self.all_done() {
                break;
            }
            if self.now_ns >= next_tick - 1e-3 {
                self.sched_tick(crate::sched::TICK_NS);
                next_tick = self.now_ns + crate::sched::TICK_NS;
            }
            if self.now_ns >= self.next_scan_ns - 1e-3 {
                if let SamplingMode::HintFaults { scan_bytes, scan_period } = self.sampling.mode {
                    self.scan(scan_bytes, scan_period);
                    self.next_scan_ns = self.now_ns + (scan_period.as_nanos() as f64).max(1e3);
                }
            }
            if self.now_ns >= next_cycle - 1e-3 {
                if let Some(p) = policy.as_deref_mut() {
                    self.collect_samples();
                    self.cycle(p, Duration::from_nanos(cycle_ns(&self.sampling) as u64))?;
                    next_cycle = self.now_ns + cycle_ns(&self.sampling);
                }
            }
        }
        Ok(())
    }

    fn streaming_threads(&self) -> Vec<usize> {
        let l = &self.sim.layout;
        (0..self.threads.len())
            .filter(|&t| {
                let rt = &self.threads[t];
                if !rt.working {
                    return false;
                }
                let a = l.threads[t].app;
                let st = &self.apps[a];
                let app = &l.apps[a];
                st.cur < app.sequence.len() && app.phases[app.sequence[st.cur]].has_stream
            })
            .collect()
    }

    /// Advance every thread by `dt` ns, charging `overhead` (sampling) to the threads.
    #[allow(clippy::needless_range_loop)]
    fn advance(&mut self, dt: f64, overhead: &[f64]) {
        let nn = self.sim.sm.n_nodes;
        let mut unparked = false;
        // Per application, what a time-based sampler's ops see of its phase's cache hits (a
        // pipeline's spin loop on the flags' page, its `hits` over their objects' pages): that
        // share of its threads' time by node, and the share left to its memory accesses.
        let hit_time: Vec<(Vec<f64>, f64)> = (0..self.sim.layout.apps.len())
            .map(|a| {
                let la = &self.sim.layout.apps[a];
                let ph = &la.phases[la.sequence[self.apps[a].cur.min(la.sequence.len() - 1)]];
                let mut time = vec![0.0; if ph.spin.is_none() && ph.hits.is_empty() { 0 } else { nn }];
                let mut room = 1.0f64;
                for h in ph.cache_hits() {
                    let pages = &self.objs[h.object];
                    if h.first_page {
                        // The spin loop's time is the phase's whether or not the page is placed.
                        let share = h.share.min(room.max(0.0));
                        room -= h.share;
                        if let Some(n) = pages.get(0) {
                            time[n] += share;
                        }
                        continue;
                    }
                    let (totals, share) = (pages.totals(), h.share.min(room.max(0.0)));
                    let placed: u64 = totals.iter().take(nn).sum();
                    if placed > 0 && share > 0.0 {
                        room -= share;
                        for (x, &k) in time.iter_mut().zip(totals) {
                            *x += share * k as f64 / placed as f64;
                        }
                    }
                }
                (time, room.max(0.0))
            })
            .collect();
        for t in 0..self.threads.len() {
            let node = self.node_of(t);
            let app = self.sim.layout.threads[t].app;
            let la = &self.sim.layout.apps[app];
            let ph = &la.phases[la.sequence[self.apps[app].cur.min(la.sequence.len() - 1)]];
            let ws = ph.write_share;
            let (hit_time, other) = (&hit_time[app].0, hit_time[app].1);
            let rt = &mut self.threads[t];
            if !rt.working {
                continue;
            }
            // Pay the stall first, then this step's sampling overhead; the rest runs.
            let parked = rt.parked;
            let paid = rt.stall_ns.min(dt);
            rt.stall_ns -= paid;
            if rt.stall_ns < 1e-3 {
                rt.stall_ns = 0.0;
            }
            if parked && rt.stall_ns <= STALL_EVENT_NS {
                rt.parked = false;
                unparked = true;
            }
            let avail = dt - paid;
            let ov = overhead[t].min(avail);
            let run = avail - ov;
            rt.stall_ns += overhead[t] - ov;
            if parked {
                continue;
            }
            // A thread that finishes inside the step (ends are merged) runs only until then.
            let run = if rt.rate.instr_per_ns > 0.0 { run.min(rt.remaining / rt.rate.instr_per_ns) } else { run };
            rt.remaining -= rt.rate.instr_per_ns * run;
            let lines = rt.rate.lines_per_ns * run;
            if lines > 0.0 {
                for n in 0..nn {
                    let share = (1.0 - ws) * rt.f_read[n] + ws * rt.f_write[n];
                    self.acc.access[node * nn + n] += lines * share;
                    self.acc.access_time[node * nn + n] +=
                        run * share * other + hit_time.get(n).map_or(0.0, |h| run * h);
                }
                self.acc.app_lines[app] += lines;
            }
            if rt.remaining <= 0.5 {
                rt.remaining = 0.0;
                rt.working = false;
                self.dirty = true;
            }
        }
        if unparked {
            // The stalls of one plan end within a few ms of each other: let them all rejoin at
            // once (paying the rest of their stall from their progress) rather than one solve each.
            for rt in self.threads.iter_mut() {
                if rt.parked && rt.stall_ns <= PARK_NS {
                    rt.parked = false;
                }
            }
            self.dirty = true;
        }
        for (r, u) in self.solver.u.iter().enumerate() {
            self.acc.util_ns[r] += u * dt;
            self.acc.util_max[r] = self.acc.util_max[r].max(*u);
        }
        self.acc.sim_ns += dt;
    }

    /// One policy cycle: snapshot, then the shared cycle step (decide, validate, apply, sampling).
    fn cycle(&mut self, policy: &mut dyn Policy, cycle: Duration) -> Result<(), SimError> {
        let threads = self.thread_states();
        if threads.is_empty() {
            return Ok(());
        }
        let l = &self.sim.layout;
        let ps = self.sim.machine.page_size;
        // DRAM samples say local or remote already (the sampler looks where their page lives:
        // pages move only here, after the samples of a cycle are consumed). The policy looks
        // pages up in the run's own page tables, only those it asks for.
        let pages = SimPages { layout: l, objs: &self.objs };
        let regions: Vec<Region> = l
            .objects
            .iter()
            .enumerate()
            .filter(|(_, o)| self.apps[o.app].done_ns.is_none())
            .map(|(i, o)| Region {
                app: o.app as u32,
                start_vpn: o.start_vpn,
                npages: o.npages as u64,
                name: o.name.clone(),
                resident: self.objs[i].totals().to_vec(),
                huge: crate::huge::backing(o, ps),
            })
            .collect();
        let free = self.free_bytes();
        // What the samples are: what the machine's sampler delivers for the request at the period
        // programmed (thinned, and never under the interrupt cap: [`crate::sampler::Thinning`]).
        let mode = match self.sampling.mode {
            SamplingMode::Address { event, period } => {
                let served = self.served(event);
                let period = if self.thinning.period > 0 { self.thinning.period } else { period };
                SamplingMode::Address { event: served.event, period }
            }
            m => m,
        };
        self.thinning.end_cycle();
        let period = match mode {
            SamplingMode::Address { period, .. } => {
                let kept = self.samples.len() as u64;
                period.saturating_mul(kept + self.samples_dropped_cycle).checked_div(kept).unwrap_or(period)
            }
            _ => 0,
        };
        let snap = Snapshot::new(&self.sim.machine, &self.sim.allowed, &threads, &free)
            .at(Duration::from_nanos(self.now_ns as u64), cycle)
            .with_samples(&self.samples, mode, period)
            .with_memory(&pages, &regions);
        // The shared cycle (ptb_policy::cycle): decide (timed) and check here, then apply and
        // take the sampling request once the snapshot's borrows of the run are over.
        let started = Instant::now();
        let decision = ptb_policy::cycle::decide(policy, &snap, &mut || started.elapsed());
        let took = decision.decide_time;
        self.acc.decision_ns += took.as_nanos() as f64;
        self.acc.cycles += 1;
        if let Some(e) = &decision.refused {
            return Err(SimError::InvalidPlan {
                policy: policy.name(),
                cycle: self.acc.cycles,
                time_s: self.now_ns / 1e9,
                reason: e.to_string(),
            });
        }
        for (k, v) in &decision.plan.stats {
            *self.acc.policy_stats.entry(k.clone()).or_default() += v;
        }
        decision.carry_out(&mut crate::actuator::SimActuator { run: self });
        if self.sim.opts.charge_decision {
            let ns = took.as_nanos() as f64;
            if let Some(t) =
                (0..self.threads.len()).filter(|&t| self.threads[t].alive).min_by_key(|&t| (self.threads[t].cpu_pos, t))
            {
                self.threads[t].stall_ns += ns;
                self.acc.decision_charged_ns += ns;
                self.dirty = true;
            }
        }
        self.acc.samples_dropped += self.samples_dropped_cycle;
        self.samples.clear();
        self.samples_dropped_cycle = 0;
        Ok(())
    }
}

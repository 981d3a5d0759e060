//! NUMA hinting faults (the sampling of Linux's automatic NUMA balancing, for `autonuma`).
//!
//! Every `scan_period`, the next `scan_bytes` of each application's address space (objects in
//! address order, continuing where the previous scan stopped, wrapping around) is armed. The
//! first access to an armed page yields one `HintFault` sample from the accessing thread and
//! costs that thread `costs.hint_fault_us`. Any access faults, a cache hit too (the page table
//! entry is armed, not the cache line): a phase's memory accesses, its `hits` and its
//! pipeline's `spin` loads.
//!
//! Approach: when a page is armed, the time of its first access and the thread that makes it
//! are drawn at once from the access rates at arming time: every thread touching the page at
//! per-page rate `rho_i` makes the first access after an exponential time with rate
//! `Lambda = sum_i rho_i`, by thread `i` with probability `rho_i / Lambda`. Pages not touched
//! within four scan periods are left unarmed (the next scan round arms them again). Rates are
//! those of the arming moment; a phase change before the fault is not reflected.

use crate::run::Run;
use ptb_profile::{Sample, SampleKind};
use rand::Rng;
use std::cmp::Reverse;
use std::time::Duration;

impl Run<'_> {
    /// Arm the next window of every running application.
    pub(crate) fn scan(&mut self, scan_bytes: u64, scan_period: Duration) {
        let l = &self.sim.layout;
        let ps = self.sim.machine.page_size;
        let horizon = 4.0 * scan_period.as_nanos() as f64;
        for a in 0..l.apps.len() {
            if self.apps[a].done_ns.is_some() {
                continue;
            }
            let app = &l.apps[a];
            let total: usize = (0..app.n_objects).map(|i| l.objects[app.first_object + i].npages).sum();
            let mut budget = ((scan_bytes / ps).max(1) as usize).min(total);
            let (mut oi, mut p) = self.hint_cursor[a];
            while budget > 0 {
                let obj = app.first_object + oi;
                let np = l.objects[obj].npages;
                let take = budget.min(np - p);
                self.arm_range(obj, p, p + take, horizon);
                budget -= take;
                p += take;
                if p >= np {
                    oi = (oi + 1) % app.n_objects;
                    p = 0;
                }
            }
            self.hint_cursor[a] = (oi, p);
        }
    }

    fn arm_range(&mut self, obj: usize, a: usize, b: usize, horizon: f64) {
        let l = &self.sim.layout;
        let app_i = l.objects[obj].app;
        let app = &l.apps[app_i];
        let st = &self.apps[app_i];
        let ph = &app.phases[app.sequence[st.cur.min(app.sequence.len() - 1)]];
        let ws = ph.write_share;
        let np = l.objects[obj].npages;
        // (start, end, thread, per-page rate in accesses per ns)
        let mut entries: Vec<(usize, usize, usize, f64)> = Vec::new();
        for t in app.first_thread..app.first_thread + app.n_threads {
            let rt = &self.threads[t];
            if !rt.working || rt.rate.lines_per_ns <= 0.0 {
                continue;
            }
            for p in rt.pieces.iter().filter(|p| p.obj == obj) {
                let (s, e) = (p.start.max(a), p.end.min(b));
                let share = (1.0 - ws) * p.w_read + ws * p.w_write;
                if s < e && share > 0.0 {
                    entries.push((s, e, t, rt.rate.lines_per_ns * share / (p.end - p.start) as f64));
                }
            }
            // Any access to an armed page faults, a cache hit too: a pipeline's spin on the
            // object's first page, the phase's hits over all its pages.
            let ops_per_ns = rt.rate.instr_per_ns * ph.mops;
            for h in ph.cache_hits().filter(|h| h.object == obj && h.share > 0.0) {
                let (end, pages) = if h.first_page { (1, 1) } else { (np, np) };
                if a < b.min(end) {
                    entries.push((a, b.min(end), t, ops_per_ns * h.share / pages as f64));
                }
            }
        }
        if entries.is_empty() {
            return;
        }
        let mut cuts: Vec<usize> = entries.iter().flat_map(|e| [e.0, e.1]).chain([a, b]).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut who: Vec<usize> = Vec::new();
        let mut prefix: Vec<f64> = Vec::new();
        for w in cuts.windows(2) {
            let (x, y) = (w[0], w[1]);
            who.clear();
            prefix.clear();
            let mut lambda = 0.0;
            for e in entries.iter().filter(|e| e.0 <= x && e.1 >= y) {
                lambda += e.3;
                who.push(e.2);
                prefix.push(lambda);
            }
            if lambda <= 0.0 {
                continue;
            }
            for page in x..y {
                let (word, bit) = (page / 64, 1u64 << (page % 64));
                if self.armed[obj][word] & bit != 0 {
                    continue;
                }
                let u: f64 = self.rng.random();
                let wait = -(1.0 - u).ln() / lambda;
                if wait > horizon {
                    continue;
                }
                let v = self.rng.random::<f64>() * lambda;
                let k = prefix.partition_point(|c| *c <= v).min(who.len() - 1);
                self.armed[obj][word] |= bit;
                self.hint_seq += 1;
                let at = (self.now_ns + wait) as u64;
                self.hint_events.push(Reverse((at, self.hint_seq, who[k] as u32, obj as u32, page as u32)));
            }
        }
    }

    /// Deliver the faults that happen before `t1`.
    pub(crate) fn deliver_hint_faults(&mut self, t1: f64, overhead: &mut [f64]) {
        let l = &self.sim.layout;
        let ps = self.sim.machine.page_size;
        let fault_ns = self.sim.costs.hint_fault_us * 1e3;
        while let Some(Reverse((at, _, t, obj, page))) = self.hint_events.peek().copied() {
            if at as f64 >= t1 {
                break;
            }
            self.hint_events.pop();
            let (t, obj, page) = (t as usize, obj as usize, page as usize);
            let (word, bit) = (page / 64, 1u64 << (page % 64));
            if self.armed[obj][word] & bit == 0 {
                continue;
            }
            self.armed[obj][word] &= !bit;
            if !self.threads[t].alive {
                continue;
            }
            let o = &l.objects[obj];
            self.samples.push(Sample {
                app: o.app as u32,
                tid: l.threads[t].tid,
                cpu: self.sim.cpus[self.threads[t].cpu_pos],
                addr: (o.start_vpn + page as u64) * ps,
                kind: SampleKind::HintFault,
                time_ns: at,
                data_src: None,
                latency_ns: None,
                phys: None,
            });
            overhead[t] += fault_ns;
            self.acc.hint_faults += 1;
            self.acc.samples += 1;
            self.acc.sample_overhead_ns += fault_ns;
        }
    }
}

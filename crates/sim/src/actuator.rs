//! The simulator's [`Actuator`]: applies a validated plan to the run's state and charges what
//! the moves cost.
//!
//! Costs (from the machine's `costs`, machines.md §4):
//! - page migration: each moved page costs `max(page_us, page_bytes / copy_gbps)` of CPU time
//!   (a huge page of a `huge_pages` object moves whole, costing `max(page_us, 2 MiB /
//!   copy_gbps)`: see `huge`).
//!   The CPU time of a plan is charged per application, split evenly over the application's
//!   live threads on the destination node (all its threads when none runs there) — like the
//!   kernel migrating on the faulting/calling threads. The copies also load the source
//!   controller, the destination controller and the links between them (read from the source
//!   on the destination's first CPU group, written locally) for as long as the copying lasts.
//! - thread migration: `thread_us` of stall (lost cache contents) for every thread whose CPU
//!   changes.
//!
//! Pages that cannot move are counted by reason: `ENOENT` (no such page or not yet
//! allocated), `ENOMEM` (destination full).

use crate::run::{Background, Run};
use ptb_policy::{Actuator, ApplyReport, Capabilities, Plan, RangeOp, SampleControl, SamplingRequest, ThreadTarget};
use ptb_topology::CpuSet;
use std::collections::BTreeMap;

pub(crate) struct SimActuator<'r, 'a> {
    pub run: &'r mut Run<'a>,
}

impl Actuator for SimActuator<'_, '_> {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            move_threads: true,
            move_pages: true,
            interleave_ranges: true,
            weighted_interleave: true,
            real: false,
        }
    }

    fn apply(&mut self, plan: &Plan) -> std::io::Result<ApplyReport> {
        Ok(self.run.apply_plan(plan))
    }
}

/// The simulator samples exactly as asked: the cycle length, the mode and its period.
impl SampleControl for SimActuator<'_, '_> {
    fn set_sampling(&mut self, req: SamplingRequest) {
        self.run.set_sampling(req);
    }
}

impl Run<'_> {
    pub(crate) fn apply_plan(&mut self, plan: &Plan) -> ApplyReport {
        let mut rep = ApplyReport::default();
        let costs = self.sim.costs.clone();
        // Threads.
        for mv in &plan.threads {
            let Some(t) = self.thread_by_tid(mv.tid) else { continue };
            let (aff, pos) = match mv.to {
                ThreadTarget::Cpu(c) => {
                    let mut s = CpuSet::new();
                    s.insert(c);
                    (s, self.sim.cpu_pos(c))
                }
                // A thread given the node it runs on as its preferred node stays on its CPU.
                ThreadTarget::Preferred(n) if self.node_of(t) == n.ix() => {
                    (CpuSet::new(), Some(self.threads[t].cpu_pos))
                }
                ThreadTarget::Node(_) | ThreadTarget::Preferred(_) | ThreadTarget::Group(_) => {
                    let cpus = mv.to.cpus(&self.sim.machine).unwrap_or_default();
                    let pos = self.least_loaded(t, &cpus);
                    (cpus, pos)
                }
            };
            let Some(pos) = pos else { continue };
            // A move to a preferred node leaves the thread to the scheduler model afterwards,
            // which keeps it on that node as Linux's balancer does; a pin replaces any
            // preference.
            match mv.to {
                ThreadTarget::Preferred(n) => self.threads[t].preferred = Some(n.ix()),
                _ => {
                    self.threads[t].affinity = Some(aff);
                    self.threads[t].preferred = None;
                }
            }
            if self.place_thread(t, pos) {
                rep.threads_moved += 1;
                if self.now_ns > 0.0 {
                    let ns = costs.thread_us * 1e3;
                    self.threads[t].stall_ns += ns;
                    self.acc.thread_migration_ns += ns;
                    rep.seconds += ns / 1e9;
                }
            }
        }
        // Idle CPUs pull threads that pinning left two to a CPU.
        if !plan.threads.is_empty() && self.balance_idle() > 0 {
            self.dirty = true;
        }
        // Pages: collect (object, page, to).
        let l = &self.sim.layout;
        let mut moves: Vec<(usize, usize, usize)> = Vec::new();
        for pm in &plan.pages {
            match l.find_page(pm.page.app as usize, pm.page.vpn) {
                Some((o, p)) if self.objs[o].get(p).is_some() => moves.push((o, p, pm.to.ix())),
                _ => *rep.pages_failed.entry("ENOENT".into()).or_default() += 1,
            }
        }
        for r in &plan.ranges {
            let targets: Vec<usize> = match &r.op {
                RangeOp::MoveTo(n) => vec![n.ix()],
                RangeOp::Interleave(ns) => ns.iter().map(|n| n.ix()).collect(),
                RangeOp::Weighted(ws) => {
                    ws.iter().flat_map(|(n, w)| std::iter::repeat_n(n.ix(), *w as usize)).collect()
                }
            };
            if targets.is_empty() {
                continue;
            }
            rep.ranges_applied += 1;
            let Some(a) = l.apps.get(r.app as usize) else { continue };
            for o in a.first_object..a.first_object + a.n_objects {
                let obj = &l.objects[o];
                let s = r.start_vpn.max(obj.start_vpn);
                let e = (r.start_vpn + r.npages).min(obj.start_vpn + obj.npages as u64);
                for vpn in s..e {
                    let p = (vpn - obj.start_vpn) as usize;
                    if self.objs[o].get(p).is_some() {
                        moves.push((o, p, targets[(vpn % targets.len() as u64) as usize]));
                    }
                }
            }
        }
        let ps = self.sim.machine.page_size as f64;
        let per_page_ns = (costs.page_us * 1e3).max(ps / costs.copy_gbps.max(1e-6));
        // Pages copied per (app, dest node) and per (src, dst); huge pages in `huge`.
        let mut copies = crate::huge::Copies::new(l.apps.len(), self.sim.sm.n_nodes);
        for (o, p, to) in moves {
            let Some(from) = self.objs[o].get(p) else { continue };
            // A page of a huge page: the whole huge page moves (huge.rs).
            if self.move_huge(o, p, to, &mut rep, &mut copies).is_some() {
                continue;
            }
            if from == to {
                continue;
            }
            if self.used_pages[to] >= self.cap_pages[to] {
                *rep.pages_failed.entry("ENOMEM".into()).or_default() += 1;
                continue;
            }
            self.alloc_page(o, p, to);
            rep.pages_moved += 1;
            copies.page(l.objects[o].app, from, to);
        }
        if rep.pages_moved + rep.huge_pages_moved > 0 {
            self.dirty = true;
            let mut longest: f64 = 0.0;
            for ((app, dst), total) in copies.ns(per_page_ns) {
                let a = &l.apps[app];
                let live: Vec<usize> =
                    (a.first_thread..a.first_thread + a.n_threads).filter(|&t| self.threads[t].alive).collect();
                let on_dst: Vec<usize> = live.iter().copied().filter(|&t| self.node_of(t) == dst).collect();
                let who = if on_dst.is_empty() { live } else { on_dst };
                self.acc.page_migration_ns += total;
                rep.seconds += total / 1e9;
                if who.is_empty() {
                    continue;
                }
                let each = total / who.len() as f64;
                longest = longest.max(each);
                for t in who {
                    self.threads[t].stall_ns += each;
                }
            }
            // Copy traffic over the copying duration. A copy shorter than a stall worth a step of
            // its own (crate::engine::STALL_EVENT_NS) loads the machine for too short a time to
            // matter to anyone's throughput: its cost is the copying threads' stall alone.
            let dur = longest.max(1e3);
            if dur > crate::engine::STALL_EVENT_NS {
                let mut loads: BTreeMap<u32, f64> = BTreeMap::new();
                for ((from, to), n) in copies.pairs() {
                    let g = self.copy_group(from, to);
                    let bytes = n as f64 * ps;
                    for &r in self.sim.sm.read_res(g, from) {
                        *loads.entry(r).or_default() += bytes / dur;
                    }
                    for &r in self.sim.sm.write_res(g, to) {
                        *loads.entry(r).or_default() += bytes / dur;
                    }
                }
                self.background.push(Background { until_ns: self.now_ns + dur, loads: loads.into_iter().collect() });
            }
        }
        self.acc.pages_migrated += rep.pages_moved;
        self.acc.threads_migrated += rep.threads_moved;
        for (k, v) in &rep.pages_failed {
            *self.acc.pages_failed.entry(k.clone()).or_default() += v;
        }
        if rep.threads_moved > 0 {
            self.dirty = true;
        }
        rep
    }

    /// The CPU group that copies pages from `from` to `to`: the destination's first group, else
    /// the source's, else group 0.
    fn copy_group(&self, from: usize, to: usize) -> usize {
        let m = &self.sim.machine;
        m.nodes[to].groups.first().or(m.nodes[from].groups.first()).map_or(0, |g| g.ix())
    }
}

//! `autonuma`: a model of Linux automatic NUMA balancing as kernel 3.13 implements it (the
//! version the published NPB study measured).
//!
//! Problem: the kernel's balancer is the baseline every placement policy is measured
//! against, and it is not a simple one: hinting-fault sampling, a scan rate that adapts per
//! task, a two-fault filter before pages move, numa groups, and task moves/swaps towards a
//! preferred node all shape its results.
//!
//! Approach (kernel/sched/fair.c, mm/mempolicy.c and mm/migrate.c of 3.13; the rules live in
//! [`stats`], [`migrate`] and [`pages`], each citing the kernel function it follows):
//!
//! ```text
//! driver: every scan period, scan_size_mb of each application faults on its next access
//! decide() every min(scan period, 1 s):
//!   new scan pass? ─▶ placement per task that faulted: halve + merge its faults, adapt its
//!                     scan period, preferred node (task's busiest, or task+group weight)
//!   preferred node changed, or 1 s since the last try ─▶ task_numa_migrate: move / swap
//!   every fault, in order ─▶ cpupid (private/shared, numa groups) ─▶ two-stage filter,
//!                     shared-page deferral, 128 MB/100 ms per node ─▶ page to the CPU's node
//!   scan period requested = the shortest of the application's tasks' periods
//! ```
//!
//! - Scan periods are per window, as in the kernel: `scan_period_min/max_ms` are for a pass
//!   over the whole resident memory, divided by the number of `scan_size_mb` windows it spans
//!   (`task_scan_min/max`). The first scan comes `scan_delay_ms` after start.
//! - Placement runs once per scan pass, at a task's first fault of the new pass
//!   (`numa_scan_seq`); the model counts passes from the scan period it requested and each
//!   application's mapped size.
//! - Task moves are retried at most once a second (`numa_migrate_retry = jiffies + HZ`), on
//!   faults: "in case it previously failed, or the scheduler moved us". A moved task's scan
//!   period returns to the minimum.
//! - The kernel moves a task once and leaves it to the scheduler (its affinity unchanged),
//!   whose load balancer then keeps the task on its preferred node (3.13: runqueue classes
//!   that skip well-placed tasks, NUMA_FAVOUR_HIGHER). The plan says the same: a moved task
//!   gets `ThreadTarget::Preferred(node)` (`sched_setnuma` then `migrate_task_to` /
//!   `migrate_swap`), and so does a task whose new preferred node is the one it runs on; the
//!   simulator's scheduler model applies the balancer's bias (`ptb_sim::sched`). On real
//!   Linux no system call sets a task's preferred node: the actuator moves the task once and
//!   the kernel's scheduler decides from then on. `pin_moves=true` pins moved tasks to their
//!   node instead (`ThreadTarget::Node`).
//! - A task moved in this decision had, in the kernel's timeline, moved at its first fault;
//!   its later faults of the cycle would have come from its new node, so they move no page
//!   and the pages remember the new node.
//! - The model does not charge fault costs itself: the driver does, per hinting fault.

pub mod migrate;
pub mod pages;
pub mod stats;
#[cfg(test)]
pub(crate) mod test_world;

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, PageMove, Plan, SamplingMode, SamplingRequest, StartPlan, ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use migrate::{Machine, Migration, Slot};
use pages::{RateLimit, Refused};
use ptb_profile::histogram::FxBuild;
use ptb_profile::{AppId, PageKey, Tid};
use ptb_topology::NodeIdx;
use stats::{Groups, TaskStats, PRIVATE, SHARED};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        key: "scan_delay_ms",
        default: "1000",
        doc: "delay before the first scan (kernel numa_balancing_scan_delay_ms)",
    },
    ParamDoc {
        key: "scan_period_min_ms",
        default: "1000",
        doc: "shortest time to scan a task's whole memory, divided among its scan windows (kernel numa_balancing_scan_period_min_ms)",
    },
    ParamDoc {
        key: "scan_period_max_ms",
        default: "60000",
        doc: "longest time to scan a task's whole memory, divided among its scan windows (kernel numa_balancing_scan_period_max_ms)",
    },
    ParamDoc {
        key: "scan_size_mb",
        default: "256",
        doc: "address space (MB) of each application made to fault per scan (kernel numa_balancing_scan_size_mb)",
    },
    ParamDoc {
        key: "migrate_deferred",
        default: "16",
        doc: "shared-page migrations a task skips after one was refused by the two-fault filter (kernel 3.13 numa_balancing_migrate_deferred)",
    },
    ParamDoc {
        key: "pin_moves",
        default: "false",
        doc: "moved tasks are pinned to their node (true) instead of being given it as their preferred node and left to the scheduler, as the kernel does (false)",
    },
];

/// Kernel tunables of the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tunables {
    pub scan_delay: Duration,
    pub scan_period_min: Duration,
    pub scan_period_max: Duration,
    pub scan_size_mb: u64,
    pub migrate_deferred: u32,
    /// Thread moves pin the task to its node (`ThreadTarget::Node`) instead of leaving it to
    /// the scheduler (`ThreadTarget::Preferred`, what the kernel does).
    pub pin_moves: bool,
}

impl Default for Tunables {
    /// The kernel's defaults (Documentation/sysctl/kernel.txt of 3.13).
    fn default() -> Self {
        Tunables {
            scan_delay: Duration::from_millis(1000),
            scan_period_min: Duration::from_millis(1000),
            scan_period_max: Duration::from_millis(60000),
            scan_size_mb: 256,
            migrate_deferred: 16,
            pin_moves: false,
        }
    }
}

/// `numa_migrate_retry = jiffies + HZ`: one task-migration attempt per second at most.
const RETRY: Duration = Duration::from_secs(1);

/// Where the scanner of one application is (`mm->numa_scan_offset`, `numa_scan_seq`).
#[derive(Clone, Copy, Debug, Default)]
struct ScanClock {
    /// Time since the last scan, ns.
    since_ns: u64,
    /// Pages scanned in the current pass.
    scanned: u64,
    /// Completed passes.
    seq: u64,
}

#[derive(Debug)]
pub struct AutoNuma {
    t: Tunables,
    /// Scan period requested for the cycle now running.
    period: Duration,
    tasks: BTreeMap<Tid, TaskStats>,
    /// Last task and node to fault on each page (the kernel's per-page cpupid).
    last: HashMap<PageKey, (Tid, u16), FxBuild>,
    groups: Groups,
    rate: RateLimit,
    clocks: BTreeMap<AppId, ScanClock>,
}

/// What one decision counted (the plan's statistics).
#[derive(Default)]
struct Counts {
    local: u64,
    remote: u64,
    private: u64,
    shared: u64,
    placements: u64,
    moves: u64,
    swaps: u64,
    filtered: u64,
    deferred: u64,
    rate_limited: u64,
}

impl AutoNuma {
    pub fn new(t: Tunables) -> Self {
        AutoNuma {
            t,
            period: t.scan_delay,
            tasks: BTreeMap::new(),
            last: HashMap::default(),
            groups: Groups::default(),
            rate: RateLimit::default(),
            clocks: BTreeMap::new(),
        }
    }

    pub fn from_params(p: &Params) -> Result<Self, PolicyError> {
        let s = p.section("autonuma");
        let d = Tunables::default();
        let ms = |key: &str, def: Duration| -> Result<Duration, PolicyError> {
            let v: u64 = s.get(key, def.as_millis() as u64)?;
            if v == 0 || v > 3_600_000 {
                return Err(param_err(key, format!("{v} ms is outside 1..=3600000")));
            }
            Ok(Duration::from_millis(v))
        };
        let t = Tunables {
            scan_delay: ms("scan_delay_ms", d.scan_delay)?,
            scan_period_min: ms("scan_period_min_ms", d.scan_period_min)?,
            scan_period_max: ms("scan_period_max_ms", d.scan_period_max)?,
            scan_size_mb: s.get("scan_size_mb", d.scan_size_mb)?,
            migrate_deferred: s.get("migrate_deferred", d.migrate_deferred)?,
            pin_moves: s.get("pin_moves", d.pin_moves)?,
        };
        s.finish()?;
        if t.scan_period_min > t.scan_period_max {
            return Err(param_err("scan_period_min_ms", "must not exceed scan_period_max_ms".into()));
        }
        if t.scan_size_mb == 0 || t.scan_size_mb > 1 << 20 {
            return Err(param_err("scan_size_mb", format!("{} is outside 1..=1048576", t.scan_size_mb)));
        }
        Ok(AutoNuma::new(t))
    }

    fn request(&self) -> SamplingRequest {
        SamplingRequest::new(
            SamplingMode::HintFaults { scan_bytes: self.t.scan_size_mb << 20, scan_period: self.period },
            self.period.min(RETRY),
        )
    }

    /// `task_scan_min` / `task_scan_max` (ms) of an application with `rss` resident pages.
    fn bounds(&self, rss: u64, page_size: u64) -> (u64, u64) {
        let scan_pages = (self.t.scan_size_mb << 20) / page_size.max(1);
        let w = stats::scan_windows(rss, scan_pages);
        stats::scan_bounds(
            self.t.scan_period_min.as_millis() as u64,
            self.t.scan_period_max.as_millis() as u64,
            self.t.scan_size_mb,
            w,
        )
    }
}

fn param_err(key: &str, reason: String) -> PolicyError {
    PolicyError::Param { origin: "parameters".into(), policy: "autonuma".into(), key: key.into(), reason }
}

/// Per-application sizes from the snapshot's regions: (resident pages, mapped pages).
fn app_sizes(snap: &Snapshot) -> BTreeMap<AppId, (u64, u64)> {
    let mut sizes: BTreeMap<AppId, (u64, u64)> = BTreeMap::new();
    for r in snap.regions {
        let e = sizes.entry(r.app).or_default();
        e.0 = e.0.saturating_add(r.resident.iter().sum::<u64>());
        e.1 = e.1.saturating_add(r.npages);
    }
    sizes
}

impl Policy for AutoNuma {
    fn name(&self) -> String {
        "autonuma".into()
    }
    fn start(&mut self, _ctx: &StartContext) -> StartPlan {
        StartPlan { alloc: AllocPolicy::FirstTouch, threads: vec![] }
    }
    fn sampling(&self) -> SamplingRequest {
        self.request()
    }

    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let m = snap.machine;
        let nn = m.n_nodes();
        let ps = m.page_size.max(1);
        let now_ns = snap.now.as_nanos().min(u64::MAX as u128) as u64;
        let mut c = Counts::default();

        // Tasks that are gone are forgotten.
        let alive: HashMap<Tid, usize, FxBuild> = snap.threads.iter().enumerate().map(|(i, t)| (t.tid, i)).collect();
        self.tasks.retain(|t, _| alive.contains_key(t));
        self.groups.retain(&|t| alive.contains_key(&t));
        let sizes = app_sizes(snap);
        let app_bounds: BTreeMap<AppId, (u64, u64)> =
            snap.threads.iter().map(|t| (t.app, self.bounds(sizes.get(&t.app).map_or(0, |s| s.0), ps))).collect();
        let fallback = self.bounds(0, ps);
        let bounds = |app: AppId| app_bounds.get(&app).copied().unwrap_or(fallback);
        let app_of = |t: Tid| alive.get(&t).map(|&i| snap.threads[i].app);

        // The machine as the task search sees it.
        let cpus: Vec<usize> = (0..nn)
            .map(|n| {
                let node = m.node(NodeIdx::from_ix(n));
                if snap.allowed.contains_idx(NodeIdx::from_ix(n)) {
                    node.cpus.iter().count()
                } else {
                    0
                }
            })
            .collect();
        let cpu_ids: Vec<Vec<u32>> = (0..nn)
            .map(|n| if cpus[n] > 0 { m.node(NodeIdx::from_ix(n)).cpus.iter().map(|c| c.0).collect() } else { vec![] })
            .collect();
        // Node of each CPU id (dense index), looked up once per fault.
        let mut cpu_node: Vec<u16> = Vec::new();
        for n in 0..nn {
            for c in m.node(NodeIdx::from_ix(n)).cpus.iter() {
                let c = c.0 as usize;
                if c >= 1 << 20 {
                    continue; // looked up through the machine instead
                }
                if c >= cpu_node.len() {
                    cpu_node.resize(c + 1, u16::MAX);
                }
                cpu_node[c] = n as u16;
            }
        }
        let node_of = |c: ptb_topology::CpuId| {
            cpu_node
                .get(c.0 as usize)
                .copied()
                .filter(|&n| n != u16::MAX)
                .or_else(|| m.node_of_cpu(c).map(|n| n.ix() as u16))
        };
        let mut slots: Vec<Slot> = snap
            .threads
            .iter()
            .map(|t| {
                let allowed = match &t.affinity {
                    None => u64::MAX,
                    Some(set) => set.iter().filter_map(node_of).filter(|&n| n < 64).fold(0u64, |a, n| a | 1 << n),
                };
                Slot { tid: t.tid, node: t.node.ix(), cpu: t.cpu.0, allowed }
            })
            .collect();

        // Which tasks faulted this cycle (placement and migration attempts happen on faults).
        let mut faulted: HashMap<Tid, (), FxBuild> = HashMap::default();
        for s in snap.samples {
            faulted.insert(s.tid, ());
        }

        // Preferred nodes before this decision, to tell the plan which ones changed.
        let pref_before: Vec<Option<usize>> =
            snap.threads.iter().map(|t| self.tasks.get(&t.tid).and_then(|s| s.preferred)).collect();

        // 1. Placement at a task's first fault of a new scan pass (`task_numa_placement`).
        let mut changed: Vec<Tid> = Vec::new();
        let tids: Vec<Tid> = snap.threads.iter().map(|t| t.tid).filter(|t| faulted.contains_key(t)).collect();
        for &tid in &tids {
            let Some(app) = app_of(tid) else { continue };
            let seq = self.clocks.get(&app).map_or(0, |k| k.seq);
            let (smin, smax) = bounds(app);
            let t = self.tasks.entry(tid).or_insert_with(|| TaskStats::new(nn, smin));
            if t.seq == seq {
                continue;
            }
            t.seq = seq;
            let (shared, private) = t.merge_buffer();
            t.period_ms = stats::next_period(t.period_ms, t.local, t.remote, shared, private, smin, smax);
            t.local = 0;
            t.remote = 0;
            c.placements += 1;
            changed.push(tid);
        }
        // Group fault sums after this round's merges (the kernel keeps them as running sums).
        let mut leader_of: BTreeMap<Tid, Tid> = BTreeMap::new();
        let mut group_faults: BTreeMap<Tid, (Vec<u64>, u64)> = BTreeMap::new();
        for (&tid, t) in &self.tasks {
            if !self.groups.grouped(tid) {
                continue;
            }
            let l = self.groups.leader(tid);
            leader_of.insert(tid, l);
            let g = group_faults.entry(l).or_insert_with(|| (vec![0; nn], 0));
            (0..nn).for_each(|n| g.0[n] += t.on(n));
            g.1 += t.total;
        }
        let group_of = |tid: Tid| leader_of.get(&tid).and_then(|l| group_faults.get(l)).map(|g| (&g.0[..], g.1));
        let mut attempt: Vec<Tid> = Vec::new();
        for tid in changed {
            let t = &self.tasks[&tid];
            let Some(mut best) = t.busiest() else { continue };
            if let Some((g, _)) = group_of(tid) {
                let group_best = stats::argmax(g.iter().copied());
                if group_best.is_some_and(|gb| gb != best) {
                    let w = (0..nn).map(|n| migrate::weight_of(Some(t), group_of(tid), n) as u64);
                    best = stats::argmax(w).unwrap_or(best);
                }
            }
            if t.preferred != Some(best) {
                self.tasks.get_mut(&tid).expect("placed above").preferred = Some(best);
                attempt.push(tid);
            }
        }
        // 2. Retry towards the preferred node on a fault, once a second.
        for &tid in &tids {
            if self.tasks.get(&tid).is_some_and(|t| now_ns >= t.retry_ns) && !attempt.contains(&tid) {
                attempt.push(tid);
            }
        }
        let before: Vec<usize> = slots.iter().map(|s| s.node).collect();
        for tid in attempt {
            let Some(&i) = alive.get(&tid) else { continue };
            let Some(t) = self.tasks.get_mut(&tid) else { continue };
            t.retry_ns = now_ns.saturating_add(RETRY.as_nanos() as u64);
            let Some(pref) = t.preferred else { continue };
            if slots[i].node == pref {
                continue;
            }
            let tasks = &self.tasks;
            let weight = |u: Tid, n: usize| migrate::weight_of(tasks.get(&u), group_of(u), n);
            let mut mach = Machine { slots: &mut slots, cpus: &cpus, cpu_ids: &cpu_ids };
            let Some(mv) = migrate::task_numa_migrate(&mach, i, pref, &weight) else { continue };
            migrate::apply(&mut mach, i, mv);
            let (dst, swap) = match mv {
                Migration::Move { node } => (node, false),
                Migration::Swap { node, .. } => (node, true),
            };
            if swap {
                c.swaps += 1;
            } else {
                c.moves += 1;
            }
            let smin = bounds(snap.threads[i].app).0;
            let t = self.tasks.get_mut(&tid).expect("attempted");
            t.preferred = Some(dst);
            t.period_ms = smin;
        }
        // The plan: moved tasks go to their node, pinned there (`pin_moves`) or with it as their
        // preferred node (`sched_setnuma` + `migrate_task_to`/`migrate_swap`); a task whose
        // preferred node changed to the node it runs on gets it too, so the scheduler keeps it
        // there. (A new preferred node the task could not be moved to is not sent: the plan
        // cannot name a preferred node without moving the task there.)
        let mut plan = Plan::default();
        for (i, s) in slots.iter().enumerate() {
            let n = NodeIdx::from_ix(s.node);
            if s.node != before[i] {
                let to = if self.t.pin_moves { ThreadTarget::Node(n) } else { ThreadTarget::Preferred(n) };
                plan.threads.push(ThreadMove { tid: s.tid, to });
            } else if !self.t.pin_moves {
                let pref = self.tasks.get(&s.tid).and_then(|t| t.preferred);
                if pref == Some(s.node) && pref != pref_before[i] {
                    plan.threads.push(ThreadMove { tid: s.tid, to: ThreadTarget::Preferred(n) });
                }
            }
        }

        // 3. Every fault: cpupid, groups, statistics, and the page's fate.
        let mem_ok =
            |n: usize| snap.allowed.contains_idx(NodeIdx::from_ix(n)) && m.node(NodeIdx::from_ix(n)).has_memory();
        let mut room: Vec<u64> = (0..nn).map(|i| snap.free_bytes.get(i).copied().unwrap_or(0) / ps).collect();
        let limit = pages::RATELIMIT_BYTES / ps;
        let mut planned: HashMap<PageKey, usize, FxBuild> = HashMap::default();
        for s in snap.samples {
            let Some(&i) = alive.get(&s.tid) else { continue };
            let th = &snap.threads[i];
            let page = s.page(ps);
            let Some(mem) = planned.get(&page).copied().or_else(|| snap.pages.get(page).map(|n| n.ix())) else {
                continue;
            };
            if mem >= nn {
                continue;
            }
            let moved = slots[i].node != before[i];
            let cpu_node = node_of(s.cpu).map_or(th.node.ix(), usize::from).min(nn - 1);
            let remembered = if moved { slots[i].node } else { cpu_node };
            let prev = self.last.insert(page, (s.tid, remembered as u16)).map(|(t, n)| (t, n as usize));
            let private = prev.is_none_or(|(t, _)| t == s.tid);
            if let Some((other, _)) = prev.filter(|_| !private) {
                // Threads of one process always join (`task_numa_group`).
                if app_of(other) == Some(th.app) {
                    self.groups.join(s.tid, other);
                }
            }
            let (smin, _) = bounds(th.app);
            let t = self.tasks.entry(s.tid).or_insert_with(|| TaskStats::new(nn, smin));
            let local = mem == cpu_node;
            let mut counted = mem;
            if !local && !moved && mem_ok(cpu_node) {
                match pages::misplaced(s.tid, cpu_node, prev, t, self.t.migrate_deferred) {
                    Ok(()) if room[cpu_node] > 0 && self.rate.take(cpu_node, s.time_ns, limit) => {
                        room[cpu_node] -= 1;
                        planned.insert(page, cpu_node);
                        counted = cpu_node;
                    }
                    Ok(()) => c.rate_limited += 1,
                    Err(Refused::Filter) => c.filtered += 1,
                    Err(Refused::Deferred) => c.deferred += 1,
                }
            }
            let kind = if private { PRIVATE } else { SHARED };
            t.buffer[kind][counted] += 1;
            if local {
                t.local += 1;
                c.local += 1;
            } else {
                t.remote += 1;
                c.remote += 1;
            }
            if private {
                c.private += 1;
            } else {
                c.shared += 1;
            }
        }
        let mut moves: Vec<PageMove> =
            planned.into_iter().map(|(page, n)| PageMove { page, to: NodeIdx::from_ix(n) }).collect();
        moves.sort_unstable_by_key(|p| (p.page.app, p.page.vpn));
        plan.pages = moves;

        // 4. The scanner: passes completed during this cycle, and the next period.
        let cycle_ns = snap.cycle.as_nanos().min(u64::MAX as u128) as u64;
        let period_ns = (self.period.as_nanos() as u64).max(1);
        let scan_pages = ((self.t.scan_size_mb << 20) / ps).max(1);
        let apps: std::collections::BTreeSet<AppId> = snap.threads.iter().map(|t| t.app).collect();
        self.clocks.retain(|a, _| apps.contains(a));
        let mut next_ms = u64::MAX;
        for &app in &apps {
            let mapped = sizes.get(&app).map_or(0, |s| s.1).max(1);
            let k = self.clocks.entry(app).or_default();
            k.since_ns = k.since_ns.saturating_add(cycle_ns);
            // At most one pass per cycle: the kernel's scanner stops at the end of the
            // address space (`reset_ptenuma_scan`).
            while k.since_ns >= period_ns {
                k.since_ns -= period_ns;
                k.scanned += scan_pages;
                if k.scanned >= mapped {
                    k.seq += 1;
                    k.scanned = 0;
                }
            }
            // The scanner runs for whichever task's period expires first (`task_tick_numa`).
            let own = snap
                .threads
                .iter()
                .filter(|t| t.app == app)
                .filter_map(|t| self.tasks.get(&t.tid).map(|s| s.period_ms))
                .min()
                .unwrap_or_else(|| bounds(app).0);
            next_ms = next_ms.min(own);
        }
        if next_ms != u64::MAX {
            self.period = Duration::from_millis(next_ms.max(1));
        }
        plan.sampling = Some(self.request());

        let groups = self.groups.count();
        let st = &mut plan.stats;
        st.insert("scan_period_ms".into(), self.period.as_millis() as f64);
        st.insert("faults_local".into(), c.local as f64);
        st.insert("faults_remote".into(), c.remote as f64);
        st.insert("faults_private".into(), c.private as f64);
        st.insert("faults_shared".into(), c.shared as f64);
        st.insert("numa_groups".into(), groups as f64);
        st.insert("placements".into(), c.placements as f64);
        st.insert("task_moves".into(), c.moves as f64);
        st.insert("task_swaps".into(), c.swaps as f64);
        st.insert("pages_planned".into(), plan.pages.len() as f64);
        st.insert("pages_filtered".into(), c.filtered as f64);
        st.insert("pages_deferred".into(), c.deferred as f64);
        st.insert("pages_rate_limited".into(), c.rate_limited as f64);
        plan
    }
}

#[cfg(test)]
mod tests;

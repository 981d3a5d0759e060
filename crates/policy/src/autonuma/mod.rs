//! `autonuma`: a model of Linux automatic NUMA balancing (kernel 3.13 and later).
//!
//! Problem: the kernel's balancer is the baseline every placement policy is measured
//! against, and it is not a simple one: hinting-fault sampling, an adaptive scan rate, a
//! two-fault filter before pages move, numa groups and task moves/swaps towards a preferred
//! node all shape its results.
//!
//! Approach (from ../shared/spec/autonuma.md and the kernel's `kernel/sched/fair.c`):
//!
//! ```text
//! every scan period: driver makes scan_size_mb of each app fault on next access
//! decide(): hint faults ─▶ per-task faults (mem node, cpu node, private/shared) ─▶ numa groups
//!           ├─ scan period: shrink when remote faults dominate, grow when local (Plan.sampling)
//!           ├─ preferred node = node holding most of the task's (group's) faulted memory
//!           ├─ CPU follows memory: move task there, or swap with a task that gains
//!           └─ memory follows CPU: page moves to the faulting node after the two-fault filter
//! ```
//!
//! - The first scan happens `scan_delay_ms` after start (the kernel initialises a task's
//!   scan period to the scan delay); afterwards the cycle is the current scan period.
//! - A fault is *private* when the same task touched the page last (the kernel's cpupid in
//!   the page), *shared* otherwise; a shared fault joins the two tasks' numa groups.
//! - Page filter (`should_numa_migrate_memory`): early in a task's life (first 4 scans or no
//!   preferred node) first and private faults migrate at once; otherwise the page's previous
//!   fault must have come from the same node (two-fault filter); then private faults
//!   migrate, and shared ones only when the group uses the destination node's CPUs much
//!   more than the source's.
//! - "Given the choice, move the thread, not the pages": faults of a task that is moved
//!   this cycle do not migrate pages.
//! - One scan period for all tasks (the kernel keeps one per task); the model does not
//!   charge fault costs itself — the driver does, per hinting fault.

pub mod stats;
#[cfg(test)]
pub(crate) mod test_world;

use crate::params::{ParamDoc, Params};
use crate::plan::{AllocPolicy, PageMove, Plan, SamplingMode, SamplingRequest, StartPlan, ThreadMove, ThreadTarget};
use crate::snapshot::{Snapshot, StartContext};
use crate::{Policy, PolicyError};
use ptb_profile::{PageKey, Tid};
use ptb_topology::NodeIdx;
use stats::{next_scan_period, Groups, TaskFaults};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
        doc: "shortest time between scans (kernel numa_balancing_scan_period_min_ms)",
    },
    ParamDoc {
        key: "scan_period_max_ms",
        default: "60000",
        doc: "longest time between scans (kernel numa_balancing_scan_period_max_ms)",
    },
    ParamDoc {
        key: "scan_size_mb",
        default: "256",
        doc: "address space (MB) of each application made to fault per scan (kernel numa_balancing_scan_size_mb)",
    },
    ParamDoc {
        key: "settle_count",
        default: "4",
        doc: "scans a task stays on a node before it may move again (older kernels' numa_balancing_settle_count)",
    },
];

/// Kernel tunables of the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tunables {
    pub scan_delay: Duration,
    pub scan_period_min: Duration,
    pub scan_period_max: Duration,
    pub scan_size_mb: u64,
    pub settle_count: u32,
}

impl Default for Tunables {
    /// The kernel's defaults (Documentation/admin-guide/sysctl/kernel.rst).
    fn default() -> Self {
        Tunables {
            scan_delay: Duration::from_millis(1000),
            scan_period_min: Duration::from_millis(1000),
            scan_period_max: Duration::from_millis(60000),
            scan_size_mb: 256,
            settle_count: 4,
        }
    }
}

/// Scans during which first and private faults migrate at once (`numa_scan_seq <= 4`).
const EARLY_SCANS: u64 = 4;
/// The kernel's ACTIVE_NODE_FRACTION: a node is active for a group when it has at least a
/// third of the busiest node's faults.
const ACTIVE_NODE_FRACTION: f64 = 3.0;

#[derive(Debug)]
pub struct AutoNuma {
    t: Tunables,
    /// Current scan period (= cycle); starts at the scan delay, as in the kernel.
    period: Duration,
    scans: u64,
    /// Whether any fault has been seen yet.
    seen_faults: bool,
    /// Last task and node to fault on each page (the kernel's per-page cpupid).
    last: HashMap<PageKey, (Tid, NodeIdx)>,
    faults: BTreeMap<Tid, TaskFaults>,
    groups: Groups,
    /// Scan number of each task's last move (for settle_count).
    moved_at: BTreeMap<Tid, u64>,
}

impl AutoNuma {
    pub fn new(t: Tunables) -> Self {
        AutoNuma {
            t,
            period: t.scan_delay,
            scans: 0,
            seen_faults: false,
            last: HashMap::new(),
            faults: BTreeMap::new(),
            groups: Groups::default(),
            moved_at: BTreeMap::new(),
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
            settle_count: s.get("settle_count", d.settle_count)?,
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
        SamplingRequest {
            mode: SamplingMode::HintFaults { scan_bytes: self.t.scan_size_mb << 20, scan_period: self.period },
            cycle: self.period,
        }
    }

    /// The task's preferred node: where most of its faulted memory lives; for a task in a
    /// numa group, the task's busiest node among the group's active nodes.
    fn preferred(&self, tid: Tid, group_mem: Option<&Vec<f64>>, cpu_nodes: &[NodeIdx]) -> Option<NodeIdx> {
        let f = self.faults.get(&tid)?;
        if f.total() <= 0.0 || cpu_nodes.is_empty() {
            return None;
        }
        let argmax = |v: &Vec<f64>, among: &[NodeIdx]| -> Option<NodeIdx> {
            among
                .iter()
                .copied()
                .filter(|n| v[n.ix()] > 0.0)
                .max_by(|a, b| v[a.ix()].total_cmp(&v[b.ix()]).then(b.cmp(a)))
        };
        match group_mem {
            Some(g) => {
                let gmax = cpu_nodes.iter().map(|n| g[n.ix()]).fold(0.0, f64::max);
                let active: Vec<NodeIdx> = cpu_nodes
                    .iter()
                    .copied()
                    .filter(|n| g[n.ix()] * ACTIVE_NODE_FRACTION >= gmax && gmax > 0.0)
                    .collect();
                argmax(&f.mem, &active).or_else(|| argmax(g, &active))
            }
            None => argmax(&f.mem, cpu_nodes),
        }
    }
}

fn param_err(key: &str, reason: String) -> PolicyError {
    PolicyError::Param { origin: "parameters".into(), policy: "autonuma".into(), key: key.into(), reason }
}

/// One hinting fault, as the model records it.
struct Fault {
    tid: Tid,
    page: PageKey,
    mem: NodeIdx,
    cpu_node: NodeIdx,
    private: bool,
    /// The previous fault on the page came from the same task (the kernel's cpupid match).
    same_task: bool,
    /// Node of the previous fault on this page, if any.
    prev_node: Option<NodeIdx>,
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
        let mut plan = Plan::default();
        self.scans += 1;
        // Forget tasks that are gone.
        self.faults.retain(|t, _| snap.thread(*t).is_some());
        self.moved_at.retain(|t, _| snap.thread(*t).is_some());
        self.groups.retain(&|t| snap.thread(t).is_some());
        self.faults.values_mut().for_each(TaskFaults::decay);

        // 1. Record the faults.
        let (mut local, mut remote) = (0u64, 0u64);
        let mut faults = Vec::new();
        for s in snap.samples {
            let Some(th) = snap.thread(s.tid) else { continue };
            let page = s.page(m.page_size);
            let Some(mem) = snap.pages.get(page) else { continue };
            if mem.ix() >= nn {
                continue;
            }
            let cpu_node = m.node_of_cpu(s.cpu).unwrap_or(th.node);
            let prev = self.last.insert(page, (s.tid, cpu_node));
            let private = prev.is_none_or(|(t, _)| t == s.tid);
            if let Some((other, _)) = prev.filter(|_| !private) {
                if snap.thread(other).is_some_and(|o| o.app == th.app) {
                    self.groups.join(s.tid, other);
                }
            }
            let f = self.faults.entry(s.tid).or_insert_with(|| TaskFaults::new(nn));
            f.mem[mem.ix()] += 1.0;
            f.cpu[cpu_node.ix()] += 1.0;
            if private {
                f.private += 1.0;
            } else {
                f.shared += 1.0;
            }
            if mem == cpu_node {
                local += 1;
            } else {
                remote += 1;
            }
            let same_task = prev.is_some_and(|(t, _)| t == s.tid);
            faults.push(Fault { tid: s.tid, page, mem, cpu_node, private, same_task, prev_node: prev.map(|p| p.1) });
        }

        // 2. Adaptive scan period. Until the first faults arrive (the first scan happens at the
        // end of the scan delay, as this first cycle ends), scan at the minimum period; after
        // that, the kernel's rule.
        self.seen_faults |= local + remote > 0;
        self.period = if self.seen_faults {
            next_scan_period(self.period, local, remote, self.t.scan_period_min, self.t.scan_period_max)
        } else {
            self.t.scan_period_min
        };
        plan.sampling = Some(self.request());

        // 3. Group statistics and preferred nodes.
        let members = self.groups.members();
        let mut group_mem: BTreeMap<Tid, Vec<f64>> = BTreeMap::new();
        let mut group_cpu: BTreeMap<Tid, Vec<f64>> = BTreeMap::new();
        for (&lead, ts) in &members {
            let (mut gm, mut gc) = (vec![0.0; nn], vec![0.0; nn]);
            for t in ts {
                if let Some(f) = self.faults.get(t) {
                    gm.iter_mut().zip(&f.mem).for_each(|(a, b)| *a += b);
                    gc.iter_mut().zip(&f.cpu).for_each(|(a, b)| *a += b);
                }
            }
            group_mem.insert(lead, gm);
            group_cpu.insert(lead, gc);
        }
        let cpu_nodes = snap.cpu_nodes();
        let group_of = |t: Tid| -> Option<Tid> {
            let l = self.groups.leader(t);
            members.contains_key(&l).then_some(l)
        };
        let preferred: BTreeMap<Tid, NodeIdx> = snap
            .threads
            .iter()
            .filter_map(|t| {
                let g = group_of(t.tid).and_then(|l| group_mem.get(&l));
                self.preferred(t.tid, g, &cpu_nodes).map(|p| (t.tid, p))
            })
            .collect();

        // 4. CPU follows memory: move or swap tasks towards their preferred node.
        let mut at: BTreeMap<Tid, NodeIdx> = snap.threads.iter().map(|t| (t.tid, t.node)).collect();
        let mut load = vec![0usize; nn];
        at.values().for_each(|n| load[n.ix()] += 1);
        let cap: Vec<usize> = m.nodes.iter().map(|n| n.cpus.len()).collect();
        let mut moved: BTreeSet<Tid> = BTreeSet::new();
        let settled = |t: Tid| self.moved_at.get(&t).is_none_or(|&s| self.scans >= s + self.t.settle_count as u64);
        let frac = |t: Tid, n: NodeIdx| -> f64 {
            self.faults.get(&t).map_or(0.0, |f| if f.total() > 0.0 { f.mem[n.ix()] / f.total() } else { 0.0 })
        };
        let (mut n_moves, mut n_swaps) = (0u32, 0u32);
        for th in snap.threads {
            let (tid, cur) = (th.tid, at[&th.tid]);
            let Some(&pref) = preferred.get(&tid) else { continue };
            if pref == cur || moved.contains(&tid) || !settled(tid) {
                continue;
            }
            if load[pref.ix()] < cap[pref.ix()] {
                load[cur.ix()] -= 1;
                load[pref.ix()] += 1;
                at.insert(tid, pref);
                moved.insert(tid);
                n_moves += 1;
                continue;
            }
            // Node full: swap with the task on it that gains most (or loses least).
            let gain_t = frac(tid, pref) - frac(tid, cur);
            let best = at
                .iter()
                .filter(|(u, n)| **n == pref && !moved.contains(u) && settled(**u))
                .map(|(&u, _)| (u, gain_t + frac(u, cur) - frac(u, pref)))
                .filter(|(_, g)| *g > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            if let Some((u, _)) = best {
                at.insert(tid, pref);
                at.insert(u, cur);
                moved.insert(tid);
                moved.insert(u);
                n_swaps += 1;
            }
        }
        for &t in &moved {
            self.moved_at.insert(t, self.scans);
            plan.threads.push(ThreadMove { tid: t, to: ThreadTarget::Node(at[&t]) });
        }

        // 5. Memory follows CPU: the page filter.
        let mem_ok = |n: NodeIdx| snap.allowed.contains_idx(n) && m.node(n).has_memory();
        let mut room: Vec<u64> = (0..nn).map(|i| snap.free_bytes.get(i).copied().unwrap_or(0) / m.page_size).collect();
        let mut planned: BTreeMap<PageKey, NodeIdx> = BTreeMap::new();
        for f in &faults {
            let dst = f.cpu_node;
            if moved.contains(&f.tid) || dst == f.mem || !mem_ok(dst) || planned.contains_key(&f.page) {
                continue;
            }
            let early = self.scans <= EARLY_SCANS || !preferred.contains_key(&f.tid);
            let first = f.prev_node.is_none();
            let ok = if early && (first || f.same_task) {
                true
            } else if f.prev_node.is_some_and(|p| p != dst) {
                false
            } else if f.same_task {
                true
            } else {
                match group_of(f.tid) {
                    None => true,
                    Some(l) => {
                        let (gc, gm) = (&group_cpu[&l], &group_mem[&l]);
                        let (d, s) = (dst.ix(), f.mem.ix());
                        gc[d] > gc[s] * ACTIVE_NODE_FRACTION || gc[d] * gm[s] * 3.0 > gc[s] * gm[d] * 4.0
                    }
                }
            };
            if ok && room[dst.ix()] > 0 {
                room[dst.ix()] -= 1;
                planned.insert(f.page, dst);
            }
        }
        plan.pages = planned.into_iter().map(|(page, to)| PageMove { page, to }).collect();

        let st = &mut plan.stats;
        st.insert("scan_period_ms".into(), self.period.as_millis() as f64);
        st.insert("faults_local".into(), local as f64);
        st.insert("faults_remote".into(), remote as f64);
        st.insert("faults_private".into(), faults.iter().filter(|f| f.private).count() as f64);
        st.insert("faults_shared".into(), faults.iter().filter(|f| !f.private).count() as f64);
        st.insert("numa_groups".into(), members.len() as f64);
        st.insert("task_moves".into(), n_moves as f64);
        st.insert("task_swaps".into(), n_swaps as f64);
        st.insert("pages_planned".into(), plan.pages.len() as f64);
        plan
    }
}

#[cfg(test)]
mod tests;

//! Actuators: the real one (move_pages(2) + sched_setaffinity(2)), and dry-run and recording
//! ones for tests and `--dry-run`.
//!
//! Problem: a plan may name hundreds of thousands of pages; one move_pages call per page
//! pays the syscall, the page-table walk and the TLB shootdown each time, and a single
//! thread copies at a few GB/s. Nodes must never be filled, and migration must not eat the
//! machine's bandwidth.
//!
//! Approach: pages are grouped per process, cut into batches (default 1024 pages) and the
//! batches are spread over worker threads (std scoped threads). Before any move, pages over
//! the migration budget or over a node's headroom (free memory minus a reserve, read from
//! sysfs) are dropped and counted. Every per-page status from the kernel is counted by name
//! (ENOENT, EBUSY, ENOMEM, EACCES, EFAULT, ...), never fatal; failures that may pass (ENOENT,
//! EBUSY, EAGAIN, left in place) are retried on the next three applies. Range actions (move a range,
//! interleave it, weighted interleave) are expanded into page moves over the resident pages
//! of the range: mbind(2) only acts on the caller's own address space, so for a managed
//! process ranges go through move_pages; mbind is used where ptb owns the memory.
//!
//! Huge pages: the kernel migrates a huge page whole. Before moving, every page asked is
//! looked up in its process's huge pages ([`crate::backing`]); the asks inside one huge page
//! get one node ([`crate::units`]; a range spread gives whole huge pages their nodes by
//! [`ptb_policy::spread_node`], as the policy layer does), the huge page is moved by one
//! entry, and every move is checked by a query afterwards ([`crate::pagemove`]): the report
//! counts base pages and huge pages moved separately, and a page that is not where it was
//! asked is a failure (reason `huge-page` when its huge page went elsewhere).

use crate::backing::{BasePagesOnly, LiveBacking, PageBacking};
use crate::identity::Gate;
use crate::pagemove::{self, Kernel, Prepared};
use crate::procfs::ProcRoot;
use crate::sys;
use crate::thp::{self, ThpCounters};
use crate::units::{self, Ask};
use ptb_policy::{Actuator, ApplyReport, Capabilities, Plan, RangeOp, ThreadTarget};
use ptb_profile::Tid;
use ptb_topology::{CpuSet, Machine, NodeIdx};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// Tuning of the real actuator.
#[derive(Clone, Debug)]
pub struct ActuatorConfig {
    /// Worker threads for large plans.
    pub workers: usize,
    /// Pages per move_pages call.
    pub batch: usize,
    /// Bytes a node keeps free: pages that would eat into it are not moved (`headroom`).
    pub reserve_bytes: u64,
}

impl Default for ActuatorConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        ActuatorConfig { workers: cpus.clamp(1, 8), batch: 1024, reserve_bytes: 64 << 20 }
    }
}

/// True when the kernel has MPOL_WEIGHTED_INTERLEAVE (Linux >= 6.9 exposes its weights here).
pub fn weighted_interleave_supported(root: &ProcRoot) -> bool {
    root.path("sys/kernel/mm/mempolicy/weighted_interleave").is_dir()
}

/// Outcome of moving a set of pages.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MoveCounts {
    pub moved: u64,
    pub failed: BTreeMap<String, u64>,
    /// move_pages calls made.
    pub calls: u64,
    /// Every page that did not move: (address, kernel node wanted, status: -errno, or the
    /// node it stayed on).
    pub failed_pages: Vec<(u64, i32, i32)>,
}

impl MoveCounts {
    fn fail(&mut self, why: &str, n: u64) {
        if n > 0 {
            *self.failed.entry(why.to_string()).or_default() += n;
        }
    }
    fn add(&mut self, o: MoveCounts) {
        self.moved += o.moved;
        self.calls += o.calls;
        self.failed_pages.extend(o.failed_pages);
        for (k, v) in o.failed {
            *self.failed.entry(k).or_default() += v;
        }
    }
}

fn move_batch(pid: u32, addrs: &[u64], nodes: &[i32]) -> MoveCounts {
    let mut c = MoveCounts::default();
    let mut status = vec![0i32; addrs.len()];
    // A positive return is the number of pages the kernel could not migrate (transient:
    // page locked, under writeback, extra references); their status slots still hold the
    // target node, so the batch is queried again and those pages are tried once more.
    let mut todo: Vec<usize> = (0..addrs.len()).collect();
    for attempt in 0..2 {
        let a: Vec<u64> = todo.iter().map(|&i| addrs[i]).collect();
        let n: Vec<i32> = todo.iter().map(|&i| nodes[i]).collect();
        let mut st = vec![0i32; a.len()];
        c.calls += 1;
        match sys::move_pages(pid as i32, &a, Some(&n), &mut st, sys::MPOL_MF_MOVE) {
            Ok(0) => {}
            Ok(_) => {
                c.calls += 1;
                if sys::move_pages(pid as i32, &a, None, &mut st, 0).is_err() {
                    st.iter_mut().for_each(|s| *s = -libc::EAGAIN);
                }
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                st.iter_mut().for_each(|s| *s = -errno);
            }
        }
        for (k, &i) in todo.iter().enumerate() {
            status[i] = st[k];
        }
        todo.retain(|&i| {
            status[i] != nodes[i] && (status[i] >= 0 || status[i] == -libc::EBUSY || status[i] == -libc::EAGAIN)
        });
        if todo.is_empty() || attempt == 1 {
            break;
        }
    }
    for ((s, n), a) in status.iter().zip(nodes).zip(addrs) {
        if *s == *n {
            c.moved += 1;
            continue;
        }
        c.fail(&failure_name(*s), 1);
        c.failed_pages.push((*a, *n, *s));
    }
    c
}

use crate::pagemove::failure_name;

use crate::pagemove::may_pass;

/// Pages retried this many cycles after a failure that may pass are given up.
const RETRY_CYCLES: u8 = 3;

/// Page moves that failed for a reason that may pass, to try again on the next cycles.
#[derive(Clone, Debug, Default, PartialEq)]
struct RetryQueue {
    /// (pid, virtual page number) -> (kernel node, tries so far).
    pages: BTreeMap<(u32, u64), (i32, u8)>,
}

impl RetryQueue {
    /// Take every queued move the new plan does not mention (a page it moves again starts
    /// afresh), appending it to `asks`; returns the tries so far of each one taken.
    fn take_into(&mut self, asks: &mut BTreeMap<u32, Vec<Ask>>) -> BTreeMap<(u32, u64), u8> {
        if self.pages.is_empty() {
            return BTreeMap::new();
        }
        let planned: std::collections::BTreeSet<(u32, u64)> =
            asks.iter().flat_map(|(pid, ms)| ms.iter().map(move |a| (*pid, a.vpn))).collect();
        let mut tries = BTreeMap::new();
        for ((pid, vpn), (node, t)) in std::mem::take(&mut self.pages) {
            if !planned.contains(&(pid, vpn)) {
                asks.entry(pid).or_default().push(Ask { vpn, node });
                tries.insert((pid, vpn), t);
            }
        }
        tries
    }
    /// A move failed with `status`: queue it again while it may pass and tries are left.
    fn failed(&mut self, pid: u32, vpn: u64, node: i32, status: i32, tries_before: u8) {
        let t = tries_before + 1;
        if may_pass(status) && t <= RETRY_CYCLES {
            self.pages.insert((pid, vpn), (node, t));
        }
    }
    fn len(&self) -> usize {
        self.pages.len()
    }
}

/// What the last `apply` tried, page by page (kept only when asked, for plan logs and tests).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Journal {
    /// (pid, virtual page number, kernel node) of every base-page move attempted.
    pub attempted: Vec<(u32, u64, i32)>,
    /// (pid, first virtual page number, kernel node, base pages) of every huge page moved whole.
    pub huge: Vec<(u32, u64, i32, u64)>,
    /// (pid, virtual page number, reason) of every attempted move that failed; a huge page
    /// by its first page.
    pub failed: Vec<(u32, u64, String)>,
    /// The kernel's transparent huge page migration counters (/proc/vmstat, machine-wide)
    /// over the moves: how many huge pages it migrated, failed to, or split to migrate.
    pub thp: Option<ThpCounters>,
    /// Seconds spent before the first move: expanding ranges, finding huge pages, querying
    /// where the pages are (the rest of the apply is moving and checking).
    pub lookup_s: f64,
}

/// Move pages of process `pid` ((address, kernel node) pairs) in batches of `batch`, spread
/// over `workers` threads.
pub fn move_pages_batched(pid: u32, moves: &[(u64, i32)], workers: usize, batch: usize) -> MoveCounts {
    let batch = batch.max(1);
    let chunks: Vec<&[(u64, i32)]> = moves.chunks(batch).collect();
    let workers = workers.clamp(1, chunks.len().max(1));
    let run = |chs: &[&[(u64, i32)]]| {
        let mut c = MoveCounts::default();
        for ch in chs {
            let (a, n): (Vec<u64>, Vec<i32>) = ch.iter().copied().unzip();
            c.add(move_batch(pid, &a, &n));
        }
        c
    };
    if workers == 1 {
        return run(&chunks);
    }
    let per = chunks.len().div_ceil(workers);
    std::thread::scope(|s| {
        let hs: Vec<_> = chunks.chunks(per).map(|part| s.spawn(move || run(part))).collect();
        let mut total = MoveCounts::default();
        for h in hs {
            total.add(h.join().unwrap_or_default());
        }
        total
    })
}

/// Move pages one per call (the baseline of `ptb bench actuator`).
pub fn move_pages_one_by_one(pid: u32, moves: &[(u64, i32)]) -> MoveCounts {
    let mut c = MoveCounts::default();
    for &(a, n) in moves {
        c.add(move_batch(pid, &[a], &[n]));
    }
    c
}

/// Where each page of `addrs` is (kernel node id), or a negative errno.
pub fn query_pages(pid: u32, addrs: &[u64]) -> io::Result<Vec<i32>> {
    let mut st = vec![0i32; addrs.len()];
    for (a, s) in addrs.chunks(4096).zip(st.chunks_mut(4096)) {
        sys::move_pages(pid as i32, a, None, s, 0)?;
    }
    Ok(st)
}

/// The kernel as [`pagemove`] sees it: move_pages(2) batched over worker threads.
struct LiveKernel {
    page_size: u64,
    workers: usize,
    batch: usize,
}

impl Kernel for LiveKernel {
    fn query(&self, pid: u32, vpns: &[u64]) -> Vec<i32> {
        let addrs: Vec<u64> = vpns.iter().map(|v| v * self.page_size).collect();
        query_pages(pid, &addrs).unwrap_or_else(|e| vec![-e.raw_os_error().unwrap_or(libc::ESRCH); vpns.len()])
    }
    fn move_pages(&self, pid: u32, moves: &[(u64, i32)]) -> Vec<i32> {
        let by_addr: Vec<(u64, i32)> = moves.iter().map(|(v, n)| (v * self.page_size, *n)).collect();
        let c = move_pages_batched(pid, &by_addr, self.workers, self.batch);
        let failed: std::collections::HashMap<u64, i32> = c.failed_pages.iter().map(|(a, _, s)| (*a, *s)).collect();
        by_addr.iter().map(|(a, n)| failed.get(a).copied().unwrap_or(*n)).collect()
    }
}

/// The real actuator: changes real processes.
pub struct LinuxActuator {
    machine: Machine,
    root: ProcRoot,
    cfg: ActuatorConfig,
    weighted: bool,
    /// Original affinity of every thread ptb moved (restored on exit).
    saved: BTreeMap<Tid, CpuSet>,
    /// Pages the migration budget still allows this cycle (None: unlimited).
    budget_pages: Option<u64>,
    /// Threads that could not be moved (gone, refused), by reason.
    pub thread_failures: BTreeMap<String, u64>,
    /// Page moves that failed for a reason that may pass.
    retry: RetryQueue,
    /// Page-level record of the last apply, when `keep_journal` was called.
    journal: Option<Journal>,
    /// Asked before every thread and page move and every restore: is this still the process
    /// (thread) ptb took? Closed until the daemon sets it.
    gate: Arc<dyn Gate>,
    /// Plans applied so far.
    applies: u64,
}

/// The gate of a new actuator: nothing passes until [`LinuxActuator::set_gate`].
struct Closed;

impl Gate for Closed {
    fn pid_ok(&self, _pid: u32) -> bool {
        false
    }
    fn tid_ok(&self, _tid: u32) -> bool {
        false
    }
}

impl LinuxActuator {
    /// Refuses a model that was not read from this machine's /sys: a preset or a fixture
    /// must never drive real moves.
    pub fn new(machine: Machine, root: ProcRoot, cfg: ActuatorConfig) -> Result<Self, String> {
        if !machine.source.is_live() {
            return Err(format!(
                "the machine model `{}` comes from {}, not from this machine's /sys: it cannot drive real moves \
                 (use --dry-run, or leave out --machine)",
                machine.name, machine.source
            ));
        }
        let weighted = weighted_interleave_supported(&root);
        Ok(LinuxActuator {
            machine,
            root,
            cfg,
            weighted,
            saved: BTreeMap::new(),
            budget_pages: None,
            thread_failures: BTreeMap::new(),
            retry: RetryQueue::default(),
            journal: None,
            gate: Arc::new(Closed),
            applies: 0,
        })
    }

    /// Who may be touched: every move and restore asks `gate` first (see [`crate::identity`]).
    pub fn set_gate(&mut self, gate: Arc<dyn Gate>) {
        self.gate = gate;
    }

    /// Keep a page-level journal of every apply from now on.
    pub fn keep_journal(&mut self) {
        self.journal.get_or_insert_with(Journal::default);
    }

    /// What the last apply tried and what failed (None unless `keep_journal` was called).
    pub fn journal(&self) -> Option<&Journal> {
        self.journal.as_ref()
    }

    /// Pages waiting to be retried.
    pub fn pending_retries(&self) -> usize {
        self.retry.len()
    }

    /// Set how many pages the next `apply` may move (the daemon refills it every cycle).
    pub fn set_budget(&mut self, pages: Option<u64>) {
        self.budget_pages = pages;
    }

    fn kernel_node(&self, n: NodeIdx) -> i32 {
        self.machine.node(n).id.0 as i32
    }

    fn cpus_of(&self, t: ThreadTarget) -> CpuSet {
        // Validated plans name only nodes, groups and CPUs of this machine.
        t.cpus(&self.machine).unwrap_or_default()
    }

    /// Put back the original affinity of every thread moved so far. Threads that exited, and
    /// thread ids now held by another thread, are skipped. Returns how many were restored.
    pub fn restore_affinities(&mut self) -> usize {
        let mut n = 0;
        for (tid, cpus) in std::mem::take(&mut self.saved) {
            if !self.gate.tid_ok(tid) {
                continue;
            }
            match sys::set_affinity(tid, &cpus) {
                Ok(()) => n += 1,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => tracing::warn!(tid, error = %e, "could not restore affinity"),
            }
        }
        n
    }

    /// Threads whose affinity ptb changed, with their original affinity.
    pub fn saved_affinities(&self) -> &BTreeMap<Tid, CpuSet> {
        &self.saved
    }

    /// Expand a range action into asks over its resident pages that are not on their node.
    /// Base pages follow the op's pattern by page offset (as the kernel interleaves); a page
    /// inside a huge page gets the node [`ptb_policy::spread_node`] gives the whole huge page.
    fn expand_range(&self, pid: u32, start_vpn: u64, npages: u64, op: &RangeOp, b: &mut dyn PageBacking) -> Vec<Ask> {
        let ps = self.machine.page_size;
        let addrs: Vec<u64> = (start_vpn..start_vpn + npages).map(|v| v * ps).collect();
        let Ok(st) = query_pages(pid, &addrs) else { return vec![] };
        let pattern: Vec<i32> = match op {
            RangeOp::MoveTo(n) => vec![self.kernel_node(*n)],
            RangeOp::Interleave(ns) => ns.iter().map(|n| self.kernel_node(*n)).collect(),
            RangeOp::Weighted(ws) => {
                // Weights are small integers (policy contract); cap each at 100 slots.
                ws.iter()
                    .flat_map(|(n, w)| std::iter::repeat_n(self.kernel_node(*n), (*w).clamp(1, 100) as usize))
                    .collect()
            }
        };
        if pattern.is_empty() {
            return vec![];
        }
        let mut out = Vec::new();
        for (i, s) in st.into_iter().enumerate() {
            if s < 0 {
                continue;
            }
            let vpn = start_vpn + i as u64;
            let to = match b.unit_of(vpn) {
                Some(u) => match ptb_policy::spread_node(op, u.head / u.pages.max(1)) {
                    Some(n) => self.kernel_node(n),
                    None => continue,
                },
                // The kernel interleaves by page offset; so do we, so a range looks the same either way.
                None => pattern[(vpn % pattern.len() as u64) as usize],
            };
            if s != to {
                out.push(Ask { vpn, node: to });
            }
        }
        out
    }
}

/// Drop moves over the budget and over each node's headroom; count them (in base pages asked).
/// A huge page weighs the base pages it copies. Returns the pages admitted.
fn admit(
    work: &mut [Prepared],
    budget: Option<u64>,
    headroom_pages: &BTreeMap<i32, u64>,
    report: &mut ApplyReport,
) -> u64 {
    let mut left = budget.unwrap_or(u64::MAX);
    let mut room = headroom_pages.clone();
    let mut used = 0;
    let mut take = |node: i32, weight: u64, asked: u64, report: &mut ApplyReport| -> bool {
        let why = if left < weight {
            "budget"
        } else if room.get(&node).is_some_and(|r| *r < weight) {
            "headroom"
        } else {
            left -= weight;
            if let Some(r) = room.get_mut(&node) {
                *r -= weight;
            }
            used += weight;
            return true;
        };
        *report.pages_failed.entry(why.into()).or_default() += asked;
        false
    };
    for p in work.iter_mut() {
        p.base.retain(|a| take(a.node, 1, 1, report));
        p.huge.retain(|w| take(w.ask.node, w.to_move(), w.ask.winners().count().max(1) as u64, report));
    }
    used
}

impl Actuator for LinuxActuator {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            move_threads: true,
            move_pages: true,
            interleave_ranges: true,
            weighted_interleave: self.weighted,
            real: true,
        }
    }

    fn apply(&mut self, plan: &Plan) -> io::Result<ApplyReport> {
        let mut report = ApplyReport::default();
        // Threads that are gone have nothing to restore: forget them now and then, so a
        // program that keeps starting threads does not grow this table.
        self.applies += 1;
        if self.applies.is_multiple_of(16) {
            let gate = self.gate.clone();
            self.saved.retain(|tid, _| gate.tid_ok(*tid));
        }
        for t in &plan.threads {
            if !self.gate.tid_ok(t.tid) {
                *self.thread_failures.entry("gone".into()).or_default() += 1;
                continue;
            }
            let cpus = self.cpus_of(t.to);
            if let std::collections::btree_map::Entry::Vacant(slot) = self.saved.entry(t.tid) {
                match sys::get_affinity(t.tid) {
                    Ok(orig) => {
                        slot.insert(orig);
                    }
                    Err(e) => {
                        *self.thread_failures.entry(sys::errno_name(e.raw_os_error().unwrap_or(0))).or_default() += 1;
                        continue;
                    }
                }
            }
            match sys::set_affinity(t.tid, &cpus) {
                // A move to a preferred node: the kernel moved the thread when its affinity
                // excluded its CPU; the original affinity goes back at once (best effort: a
                // sleeping thread picks its CPU at wake-up, from the mask it has then). No
                // system call sets the kernel's preferred node (`numa_preferred_nid`): from
                // here the kernel's scheduler (and its own NUMA balancing, if on) decides.
                Ok(()) if matches!(t.to, ThreadTarget::Preferred(_)) => {
                    if let Some(orig) = self.saved.remove(&t.tid) {
                        if let Err(e) = sys::set_affinity(t.tid, &orig) {
                            self.saved.insert(t.tid, orig);
                            tracing::warn!(tid = t.tid, error = %e, "could not restore affinity after an unpinned move");
                        }
                    }
                    report.threads_moved += 1;
                }
                Ok(()) => report.threads_moved += 1,
                Err(e) => {
                    *self.thread_failures.entry(sys::errno_name(e.raw_os_error().unwrap_or(0))).or_default() += 1;
                }
            }
        }
        let ps = self.machine.page_size;
        let mut asks: BTreeMap<u32, Vec<Ask>> = BTreeMap::new();
        for p in &plan.pages {
            asks.entry(p.page.app).or_default().push(Ask { vpn: p.page.vpn, node: self.kernel_node(p.to) });
        }
        // Where no process can hold huge pages, nothing is looked up.
        let t_start = std::time::Instant::now();
        let huge_in_use = thp::huge_pages_possible(&self.root);
        let mut backings: BTreeMap<u32, Box<dyn PageBacking>> = BTreeMap::new();
        let root = self.root.clone();
        let backing = |pid: u32| -> Box<dyn PageBacking> {
            if huge_in_use {
                Box::new(LiveBacking::open(&root, pid, ps))
            } else {
                Box::new(BasePagesOnly)
            }
        };
        for r in &plan.ranges {
            if !self.gate.pid_ok(r.app) {
                continue;
            }
            let b = backings.entry(r.app).or_insert_with(|| backing(r.app));
            let m = self.expand_range(r.app, r.start_vpn, r.npages, &r.op, b.as_mut());
            asks.entry(r.app).or_default().extend(m);
            report.ranges_applied += 1;
        }
        // Earlier failures that may have passed, unless this plan says something new about the
        // page. A page the plan moves again starts its retries afresh.
        let tries = self.retry.take_into(&mut asks);
        report.pages_retried = tries.len() as u64;
        let kernel = LiveKernel { page_size: ps, workers: self.cfg.workers, batch: self.cfg.batch };
        let mut work: Vec<Prepared> = Vec::new();
        for (pid, a) in asks {
            let b = backings.entry(pid).or_insert_with(|| backing(pid));
            work.push(pagemove::prepare(pid, units::group(&a, b.as_mut()), &kernel));
        }
        let mut headroom = BTreeMap::new();
        for n in &self.machine.nodes {
            let free = self.root.node_free_bytes(n.id.0).unwrap_or(0);
            headroom.insert(n.id.0 as i32, free.saturating_sub(self.cfg.reserve_bytes) / ps);
        }
        let used = admit(&mut work, self.budget_pages, &headroom, &mut report);
        let t_looked = t_start.elapsed().as_secs_f64();
        let moving = work.iter().any(|p| !p.base.is_empty() || !p.huge.is_empty());
        let thp_before = if moving && huge_in_use { thp::thp_counters(&self.root).ok() } else { None };
        if let Some(j) = &mut self.journal {
            *j = Journal::default();
        }
        for p in work {
            let pid = p.pid;
            // Checked again just before the moves: the process may have exited meanwhile.
            if !self.gate.pid_ok(pid) {
                *report.pages_failed.entry("gone".into()).or_default() += (p.base.len() + p.huge.len()) as u64;
                continue;
            }
            let o = pagemove::execute(p, &kernel);
            report.pages_moved += o.pages_moved;
            report.huge_pages_moved += o.huge_pages_moved;
            for (k, v) in o.failed {
                *report.pages_failed.entry(k).or_default() += v;
            }
            for (vpn, node, st) in o.retry {
                self.retry.failed(pid, vpn, node, st, tries.get(&(pid, vpn)).copied().unwrap_or(0));
            }
            if let Some(j) = &mut self.journal {
                j.attempted.extend(o.attempted.iter().map(|(v, n)| (pid, *v, *n)));
                j.huge.extend(o.huge.iter().map(|(v, n, k)| (pid, *v, *n, *k)));
                j.failed.extend(o.failures.into_iter().map(|(v, why)| (pid, v, why)));
            }
        }
        if let Some(j) = &mut self.journal {
            j.lookup_s = t_looked;
        }
        if let (Some(before), Some(j)) = (thp_before, &mut self.journal) {
            j.thp = thp::thp_counters(&self.root).ok().map(|after| after.since(&before));
        }
        if let Some(b) = &mut self.budget_pages {
            *b = b.saturating_sub(used);
        }
        Ok(report)
    }
}

impl Drop for LinuxActuator {
    /// Whatever ends the daemon (an error, a panic unwinding), moved threads get their
    /// affinity back.
    fn drop(&mut self) {
        self.restore_affinities();
    }
}

/// Reports what a plan would do and changes nothing.
#[derive(Default)]
pub struct DryRunActuator {
    /// One line per applied plan.
    pub log: Vec<String>,
}

fn would_do(plan: &Plan) -> ApplyReport {
    ApplyReport {
        threads_moved: plan.threads.len() as u64,
        pages_moved: plan.pages.len() as u64 + plan.ranges.iter().map(|r| r.npages).sum::<u64>(),
        ranges_applied: plan.ranges.len() as u64,
        ..Default::default()
    }
}

impl Actuator for DryRunActuator {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            move_threads: true,
            move_pages: true,
            interleave_ranges: true,
            weighted_interleave: true,
            real: false,
        }
    }
    fn apply(&mut self, plan: &Plan) -> io::Result<ApplyReport> {
        let r = would_do(plan);
        self.log.push(format!(
            "dry-run: would move {} threads, {} pages, {} ranges",
            r.threads_moved, r.pages_moved, r.ranges_applied
        ));
        Ok(r)
    }
}

/// Keeps every plan it is given (tests), changes nothing.
#[derive(Default)]
pub struct RecordingActuator {
    pub plans: Vec<Plan>,
}

impl Actuator for RecordingActuator {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            move_threads: true,
            move_pages: true,
            interleave_ranges: true,
            weighted_interleave: true,
            real: false,
        }
    }
    fn apply(&mut self, plan: &Plan) -> io::Result<ApplyReport> {
        self.plans.push(plan.clone());
        Ok(would_do(plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptb_policy::{PageMove, RangeAction, ThreadMove};
    use ptb_profile::PageKey;
    use std::sync::Arc;

    fn plan() -> Plan {
        Plan {
            threads: vec![ThreadMove { tid: 7, to: ThreadTarget::Node(NodeIdx(1)) }],
            pages: vec![PageMove { page: PageKey { app: 1, vpn: 10 }, to: NodeIdx(0) }],
            ranges: vec![RangeAction { app: 1, start_vpn: 100, npages: 8, op: RangeOp::Interleave(vec![NodeIdx(0)]) }],
            ..Default::default()
        }
    }

    #[test]
    fn dry_run_and_recording_change_nothing_and_report() {
        let mut d = DryRunActuator::default();
        let r = d.apply(&plan()).unwrap();
        assert_eq!((r.threads_moved, r.pages_moved, r.ranges_applied), (1, 9, 1));
        assert!(!d.capabilities().real);
        assert!(d.log[0].contains("would move 1 threads, 9 pages"));
        let mut rec = RecordingActuator::default();
        rec.apply(&plan()).unwrap();
        rec.apply(&Plan::default()).unwrap();
        assert_eq!(rec.plans.len(), 2);
        assert_eq!(rec.plans[0], plan());
    }

    #[test]
    fn a_preset_never_drives_real_moves() {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=1").unwrap();
        let e = LinuxActuator::new(m, ProcRoot::live(), ActuatorConfig::default()).err().unwrap();
        assert!(e.contains("cannot drive real moves"), "{e}");
    }

    #[test]
    fn failures_that_may_pass_are_retried_three_cycles_and_a_new_plan_wins() {
        let ask = |vpn, node| Ask { vpn, node };
        let mut q = RetryQueue::default();
        q.failed(1, 1, 2, -libc::ENOENT, 0);
        q.failed(1, 2, 2, -libc::EBUSY, 0);
        q.failed(1, 3, 2, -libc::EFAULT, 0); // gone for good: not retried
        q.failed(1, 4, 2, -libc::ENOMEM, 0);
        q.failed(1, 5, 2, 0, 0); // the kernel left it on node 0
        assert_eq!(q.len(), 3);
        // The next plan moves page 2 elsewhere: that wins; the other two are taken.
        let mut asks = BTreeMap::from([(1u32, vec![ask(2, 3)])]);
        let tries = q.take_into(&mut asks);
        assert_eq!(tries.len(), 2);
        assert_eq!(asks[&1], vec![ask(2, 3), ask(1, 2), ask(5, 2)]);
        assert_eq!(q.len(), 0);
        // Page 1 keeps failing: queued after tries 1 and 2, given up after the third.
        let mut t = 1;
        loop {
            q.failed(1, 1, 2, -libc::ENOENT, t);
            let mut m = BTreeMap::new();
            let got = q.take_into(&mut m);
            if got.is_empty() {
                break;
            }
            t = got[&(1, 1)];
        }
        assert_eq!(t, RETRY_CYCLES);
    }

    #[test]
    fn budget_and_headroom_drop_and_count() {
        use crate::backing::Unit;
        use crate::pagemove::HugeWork;
        use crate::units::HugeAsk;
        let base: Vec<Ask> = (0..10u64).map(|i| Ask { vpn: i, node: (i % 2) as i32 }).collect();
        // A huge page of 8 pages (6 to copy) for node 1, asked for 3 of its pages.
        let huge = HugeWork {
            ask: HugeAsk {
                unit: Unit { head: 64, pages: 8, known: true },
                node: 1,
                asks: (64..67).map(|vpn| Ask { vpn, node: 1 }).collect(),
            },
            before: vec![0, 0, 0, 0, 0, 0, 1, 1],
            probes: vec![64],
        };
        let mut work = vec![Prepared { pid: 1, base, huge: vec![huge.clone()], ..Default::default() }];
        let room = BTreeMap::from([(0, 2u64), (1, 100u64)]);
        let mut rep = ApplyReport::default();
        let used = admit(&mut work, Some(6), &room, &mut rep);
        let kept = &work[0].base;
        assert_eq!(kept.iter().filter(|a| a.node == 0).count(), 2);
        assert_eq!(kept.len(), 6);
        assert_eq!(used, 6);
        // Pages to node 0 beyond its 2 free pages: 4, 6; then the budget runs out: 8, 9, and
        // the huge page (its 3 asked pages).
        assert_eq!(rep.pages_failed.get("headroom"), Some(&2));
        assert_eq!(rep.pages_failed.get("budget"), Some(&5));
        assert!(work[0].huge.is_empty());
        // With room, the huge page weighs the 6 pages it copies.
        let mut work = vec![Prepared { pid: 1, huge: vec![huge], ..Default::default() }];
        assert_eq!(admit(&mut work, None, &BTreeMap::new(), &mut ApplyReport::default()), 6);
    }

    /// A gate that lets one thread id through (or none).
    struct OnlyTid(Option<u32>);
    impl Gate for OnlyTid {
        fn pid_ok(&self, _pid: u32) -> bool {
            self.0.is_some()
        }
        fn tid_ok(&self, tid: u32) -> bool {
            self.0 == Some(tid)
        }
    }

    /// The actuator asks the gate before every move and every restore: a thread id the daemon
    /// no longer knows (its process exited, the id went to another process) is never touched.
    /// Before, any tid in a plan was moved and restored blindly.
    #[test]
    fn nothing_moves_or_is_restored_without_the_gate() {
        let root = ProcRoot::live();
        let m = crate::live::machine(&root).unwrap();
        let cpus = sys::get_affinity(std::process::id()).unwrap();
        if cpus.len() < 2 {
            eprintln!("skipped: needs two CPUs");
            return;
        }
        let first = ptb_topology::CpuId(cpus.first_raw().unwrap());
        let mut child = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let tid = child.id();
        let plan = Plan { threads: vec![ThreadMove { tid, to: ThreadTarget::Cpu(first) }], ..Default::default() };
        let mut a = LinuxActuator::new(m.clone(), root.clone(), ActuatorConfig::default()).unwrap();
        // A new actuator is closed until the daemon gives it a gate.
        a.apply(&plan).unwrap();
        assert_eq!(a.thread_failures.get("gone"), Some(&1));
        assert_eq!(sys::get_affinity(tid).unwrap(), cpus);
        a.set_gate(Arc::new(OnlyTid(Some(tid))));
        assert_eq!(a.apply(&plan).unwrap().threads_moved, 1);
        assert_eq!(sys::get_affinity(tid).unwrap().len(), 1);
        // The thread id now "belongs to someone else": restore must not touch it.
        a.set_gate(Arc::new(OnlyTid(None)));
        assert_eq!(a.restore_affinities(), 0);
        assert_eq!(sys::get_affinity(tid).unwrap().len(), 1);
        // Dropping an actuator (as a panic unwinding does) restores what it moved.
        sys::set_affinity(tid, &cpus).unwrap();
        let mut b = LinuxActuator::new(m, root, ActuatorConfig::default()).unwrap();
        b.set_gate(Arc::new(OnlyTid(Some(tid))));
        b.apply(&plan).unwrap();
        assert_eq!(sys::get_affinity(tid).unwrap().len(), 1);
        drop(b);
        assert_eq!(sys::get_affinity(tid).unwrap(), cpus);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Real move_pages on this process: moving pages to the node they are on succeeds
    /// (single-node machine), statuses are counted, a bad address is EFAULT, not fatal.
    #[test]
    fn real_batched_move_to_current_node_and_efault_counted() {
        let ps = sys::page_size() as usize;
        let n = 300;
        let buf = vec![1u8; (n + 1) * ps];
        let base = (buf.as_ptr() as usize).next_multiple_of(ps) as u64;
        let addrs: Vec<u64> = (0..n as u64).map(|i| base + i * ps as u64).collect();
        let here = query_pages(0, &addrs).unwrap();
        assert!(here.iter().all(|s| *s >= 0), "{here:?}");
        let moves: Vec<(u64, i32)> = addrs.iter().zip(&here).map(|(a, n)| (*a, *n)).collect();
        let c = move_pages_batched(0, &moves, 3, 64);
        assert_eq!(c.moved, n as u64, "{c:?}");
        assert_eq!(c.calls, (n as u64).div_ceil(64));
        let one = move_pages_one_by_one(0, &moves[..10]);
        assert_eq!((one.moved, one.calls), (10, 10));
        let bad = move_pages_batched(0, &[(8 * ps as u64, here[0])], 1, 1);
        assert_eq!(bad.moved, 0);
        assert_eq!(bad.failed.values().sum::<u64>(), 1, "{bad:?}");
        std::hint::black_box(&buf);
    }
}

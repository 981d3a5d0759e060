//! The daemon loop: the only place in ptb that reads the wall clock.
//!
//! ```text
//! start:  threads ─▶ Policy::start ─▶ StartPlan (pin threads; interleave existing pages of attached targets)
//! cycle:  sleep ─▶ targets alive? ─▶ threads, samples, page nodes, regions, free memory ─▶ Snapshot
//!         ─▶ budget ─▶ ptb_policy::cycle::step (decide ─▶ validate ─▶ apply ─▶ sampling request,
//!            the simulator's step too) ─▶ summary line + stats
//! stop:   SIGINT/SIGTERM, every target gone, or --seconds ─▶ restore affinities (and numa_balancing)
//! ```
//!
//! A target that exits mid-cycle is logged, never an error: reads that fail because the
//! process is gone are skipped and the loop ends when no target is left. Targets are known by
//! identity ([`crate::identity`]): a pid that now names another process is never touched.

use crate::actuator::{DryRunActuator, LinuxActuator};
use crate::control;
use crate::identity::{Gate, Identities, ProcId};
use crate::metrics::Stats;
use crate::observe;
use crate::perf::{Detection, PerfSource, SourceKind};
use crate::procfs::ProcRoot;
use crate::safety;
use crate::sampling::{Fixed, LiveSource, Opener, Sampling};
use ptb_policy::{
    Actuator, AllocPolicy, ApplyReport, Capabilities, Plan, Policy, RangeAction, RangeOp, SampleControl, SamplingMode,
    SamplingRequest, Snapshot, StartContext, StartPlan,
};
use ptb_profile::Sample;
use ptb_topology::render::plural;
use ptb_topology::{Machine, NodeSet};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The actuator the daemon drives.
pub enum Act {
    Real(Box<LinuxActuator>),
    DryRun(DryRunActuator),
}

/// The report's `seconds` are the wall time the moves took.
impl Actuator for Act {
    fn capabilities(&self) -> Capabilities {
        match self {
            Act::Real(a) => a.capabilities(),
            Act::DryRun(a) => a.capabilities(),
        }
    }
    fn apply(&mut self, plan: &Plan) -> std::io::Result<ApplyReport> {
        let t = Instant::now();
        let mut r = match self {
            Act::Real(a) => a.apply(plan),
            Act::DryRun(a) => a.apply(plan),
        }?;
        r.seconds = t.elapsed().as_secs_f64();
        Ok(r)
    }
}

/// What one daemon cycle acts on: the actuator, and the sampling the policy's plan steers.
struct Driver<'x, 'a> {
    act: &'x mut Act,
    sampling: &'x mut Sampling<'a>,
}

impl Actuator for Driver<'_, '_> {
    fn capabilities(&self) -> Capabilities {
        self.act.capabilities()
    }
    fn apply(&mut self, plan: &Plan) -> std::io::Result<ApplyReport> {
        self.act.apply(plan)
    }
}

impl SampleControl for Driver<'_, '_> {
    fn set_sampling(&mut self, req: SamplingRequest) {
        self.sampling.set_sampling(req);
    }
}

/// A managed process: launched by ptb (`child`) or attached, with its identity.
pub struct Target {
    pub pid: u32,
    pub child: Option<Child>,
    pub id: ProcId,
}

impl Target {
    /// A running process (the caller checked that it may be managed).
    pub fn attach(root: &ProcRoot, pid: u32) -> Result<Target, String> {
        Ok(Target { pid, child: None, id: ProcId::capture(root, pid)? })
    }
    /// A child ptb started (not reaped yet, so its pid cannot have been reused).
    pub fn launched(root: &ProcRoot, child: Child) -> Result<Target, (Child, String)> {
        let pid = child.id();
        match ProcId::capture(root, pid) {
            Ok(id) => Ok(Target { pid, child: Some(child), id }),
            Err(e) => Err((child, e)),
        }
    }
}

/// Daemon options.
pub struct Config {
    /// Cycle length (None: the policy's, changed when its plans ask).
    pub cycle: Option<Duration>,
    /// Sampling period (None: 1 for page faults; for hardware the policy's, changed when its
    /// plans ask).
    pub period: Option<u64>,
    /// Migration budget in MB/s (None: unlimited).
    pub budget_mbps: Option<f64>,
    /// Dense node indices placement may use.
    pub allowed: NodeSet,
    /// Sample source name: auto, ibs-op, pebs-loads, spe, page-faults, none.
    pub source: String,
    /// Start with placement paused until `ptb roi begin`.
    pub roi_wait: bool,
    /// The control channel's shared state: targets are registered there (for `ptb status`)
    /// and `ptb roi` pauses them through it.
    pub control: Option<Arc<control::Shared>>,
    /// The service rule that selected the targets (shown by `ptb status`).
    pub rule: Option<String>,
    /// Stop when set (the service detaching one program); SIGINT/SIGTERM stop every loop.
    pub stop: Option<Arc<AtomicBool>>,
    /// Prefix of the messages on stderr (`ptb`, or `ptb[PID]` in the service).
    pub label: String,
    /// The start plan's allocation policy was already applied (set_mempolicy before exec).
    pub alloc_applied: bool,
    /// Stop after this long (None: until the targets exit or a signal).
    pub max_time: Option<Duration>,
    /// Print the per-cycle summary line on stderr.
    pub summary_lines: bool,
    pub stats: Arc<Mutex<Stats>>,
    /// Append every applied plan here as a JSON line ([`crate::plan_log`]; every node a kernel
    /// node id): `{"cycle", "unix_ms" (when the moves ended), "plan", "page_moves": [[pid, vpn,
    /// kernel node]], "page_failures": [[pid, vpn, "ENOENT"]], "huge_moves": [[pid, first vpn,
    /// kernel node, base pages]], "thp": {"migration_success", ...}, "thread_moves": [[tid, "cpu
    /// list"]], "report"}`. With a real actuator the page moves are the base pages tried (ranges
    /// expanded, retries of earlier failures included), huge pages moved whole are in
    /// `huge_moves` (a failure names a huge page by its first vpn), and `thp` is the kernel's
    /// machine-wide count of huge-page migrations over the moves.
    pub plan_log: Option<std::path::PathBuf>,
}

/// How the daemon ended.
#[derive(Debug)]
pub struct Outcome {
    pub stats: Stats,
    /// Exit status of a launched target.
    pub child_status: Option<ExitStatus>,
    /// Signal that stopped ptb, if any.
    pub signal: Option<i32>,
    /// Threads whose affinity was put back.
    pub restored: usize,
}

/// Targets still alive (by identity; `full` also re-reads owner and start time, else only
/// the pidfds are polled).
fn pids_alive(ids: &Identities, targets: &mut [Target], child_status: &mut Option<ExitStatus>, full: bool) -> Vec<u32> {
    for t in targets.iter_mut() {
        if let Some(c) = &mut t.child {
            if let Ok(Some(st)) = c.try_wait() {
                if child_status.is_none() {
                    tracing::info!(pid = t.pid, status = %st, "target exited");
                }
                *child_status = Some(st);
            }
        }
    }
    // Identity, not the number: an exited target's pid may already name another process.
    let live = if full { ids.alive() } else { ids.alive_quick() };
    let child_done = child_status.is_some();
    targets.iter().filter(|t| live.contains(&t.pid) && !(t.child.is_some() && child_done)).map(|t| t.pid).collect()
}

/// Expand an allocation policy into range actions over the anonymous regions of attached
/// processes (their existing pages; new pages follow the process's own policy).
fn alloc_to_ranges(root: &ProcRoot, m: &Machine, pids: &[u32], alloc: &AllocPolicy) -> Vec<RangeAction> {
    let op = match alloc {
        AllocPolicy::FirstTouch => return vec![],
        AllocPolicy::Interleave(ns) if ns.len() > 1 => RangeOp::Interleave(ns.clone()),
        AllocPolicy::Weighted(ws) if ws.len() > 1 => RangeOp::Weighted(ws.clone()),
        _ => return vec![],
    };
    let mut out = Vec::new();
    for &pid in pids {
        for r in observe::regions(root, m, pid).unwrap_or_default() {
            if r.resident.iter().sum::<u64>() > 0 {
                out.push(RangeAction { app: pid, start_vpn: r.start_vpn, npages: r.npages, op: op.clone() });
            }
        }
    }
    out
}

fn open_source(det: &Detection, cfg: &Config, mode: SamplingMode) -> Result<Option<PerfSource>, String> {
    let policy_period = match mode {
        SamplingMode::None if cfg.source == "auto" || cfg.source == "none" => return Ok(None),
        _ if cfg.source == "none" => return Ok(None),
        SamplingMode::Address { period, .. } => period,
        SamplingMode::HintFaults { .. } | SamplingMode::PageFaults | SamplingMode::None => 1,
    };
    let kind = det.pick(&cfg.source)?;
    let period = cfg.period.unwrap_or(if kind == SourceKind::PageFaults { 1 } else { policy_period });
    Ok(Some(match mode {
        SamplingMode::Address { event, .. } => PerfSource::for_event(kind, period, event),
        _ => PerfSource::new(kind, period),
    }))
}

fn merge(stats: &mut Stats, r: &ApplyReport) {
    if stats.dry_run {
        // A dry-run actuator reports what the plan asks for; nothing moved.
        stats.threads_would_move += r.threads_moved;
        stats.pages_would_move += r.pages_moved;
    } else {
        stats.threads_moved += r.threads_moved;
        stats.pages_moved += r.pages_moved;
        stats.huge_pages_moved += r.huge_pages_moved;
    }
    stats.pages_retried += r.pages_retried;
    for (k, v) in &r.pages_failed {
        *stats.pages_failed.entry(k.clone()).or_default() += v;
    }
}

/// Run the daemon until the targets exit, a signal arrives, or `max_time` passes.
pub fn run(
    root: &ProcRoot,
    machine: &Machine,
    policy: &mut dyn Policy,
    start: Option<StartPlan>,
    targets: Vec<Target>,
    act: Act,
    cfg: &Config,
) -> Result<Outcome, String> {
    let det = crate::perf::detect(root.root());
    let open: Opener =
        Box::new(move |mode| Ok(open_source(&det, cfg, mode)?.map(|s| Box::new(s) as Box<dyn LiveSource>)));
    run_with(root, machine, policy, start, targets, act, cfg, open)
}

/// Open sample rings for the targets' threads listed since the last call (`listed`: that
/// listing, (pid, tid) sorted): one listing of /proc/PID/task per target, and only when it
/// changed each new thread's owner and start time checked before its ring opens
/// ([`Identities::tid_ok`], two /proc reads a thread: not repeated every 20 ms for threads
/// already seen); threads no longer listed keep their rings until the cycle's end.
/// A ring cannot follow threads by itself: the kernel's `perf_mmap` refuses (EINVAL) to map an
/// inherited per-task event (`cpu == -1` with `attr.inherit`), so each thread's ring opens
/// after the thread exists, and the sooner it is seen the fewer of its first faults go unsampled.
fn track_new_threads(
    root: &ProcRoot,
    ids: &Identities,
    pids: &[u32],
    listed: &mut Vec<(u32, u32)>,
    src: &mut dyn LiveSource,
) {
    let mut now: Vec<(u32, u32)> =
        pids.iter().flat_map(|&p| root.tasks(p).unwrap_or_default().into_iter().map(move |t| (p, t))).collect();
    now.sort_unstable();
    if now == *listed {
        return;
    }
    ids.note_threads(&now);
    let new: Vec<_> = now.iter().copied().filter(|x| listed.binary_search(x).is_err() && ids.tid_ok(x.1)).collect();
    src.track_more(&new);
    *listed = now;
}

/// [`run`] with the sample sources `open` makes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_with(
    root: &ProcRoot,
    machine: &Machine,
    policy: &mut dyn Policy,
    start: Option<StartPlan>,
    mut targets: Vec<Target>,
    mut act: Act,
    cfg: &Config,
    open: Opener,
) -> Result<Outcome, String> {
    let t0 = Instant::now();
    let mut child_status = None;
    let ids = Arc::new(Identities::new(root, targets.iter().map(|t| t.id.try_clone()).collect()));
    if let Act::Real(a) = &mut act {
        a.set_gate(ids.clone());
    }
    let threads = observe::threads(root, machine, &targets.iter().map(|t| t.pid).collect::<Vec<_>>());
    ids.note_threads(&threads.iter().map(|t| (t.app, t.tid)).collect::<Vec<_>>());
    if let Some(c) = &cfg.control {
        let nodes = cfg.allowed.iter_raw().map(|n| machine.nodes[n as usize].id.0.to_string()).collect::<Vec<_>>();
        for t in &targets {
            c.register(control::Program {
                pid: t.pid,
                uid: t.id.uid,
                command: root.comm(t.pid).unwrap_or_default(),
                rule: cfg.rule.clone(),
                policy: policy.name(),
                nodes: nodes.join(","),
                stats: cfg.stats.clone(),
                since: Instant::now(),
                roi_wait: cfg.roi_wait,
            });
        }
    }
    let start =
        start.unwrap_or_else(|| policy.start(&StartContext { machine, allowed: &cfg.allowed, threads: &threads }));
    let fixed = Fixed { cycle: cfg.cycle, period: cfg.period, source: cfg.source != "auto" };
    let mut sampling = Sampling::start(policy.sampling(), fixed, open)?;
    {
        let mut s = cfg.stats.lock().map_err(|_| "stats lock poisoned")?;
        s.policy = policy.name();
        s.source = sampling.describe();
        s.sampling_period = sampling.period();
        s.cycle_ms = sampling.cycle().as_secs_f64() * 1e3;
        s.dry_run = matches!(act, Act::DryRun(_));
        eprintln!("ptb: samples from {}", s.source);
    }
    // A dry run says "would" wherever a real run says what it did.
    let moved = if matches!(act, Act::DryRun(_)) { "would move" } else { "moved" };
    // Start plan: pin threads, and for attached processes spread existing pages.
    let mut first = Plan { threads: start.threads.clone(), ..Default::default() };
    if !cfg.alloc_applied {
        let pids: Vec<u32> = targets.iter().map(|t| t.pid).collect();
        first.ranges = alloc_to_ranges(root, machine, &pids, &start.alloc);
    }
    if !first.is_empty() {
        let free = observe::free_bytes(root, machine);
        let snap = Snapshot::new(machine, &cfg.allowed, &threads, &free).at(Duration::ZERO, sampling.cycle());
        let out =
            ptb_policy::cycle::check(first, &snap).carry_out(&mut Driver { act: &mut act, sampling: &mut sampling });
        match out.refused {
            None => {
                if let Some(e) = out.apply_error {
                    return Err(format!("applying the start plan: {e}"));
                }
                let r = out.report;
                crate::plan_log::append(cfg, machine, 0, &out.plan, &r, &act);
                let mut s = cfg.stats.lock().map_err(|_| "stats lock poisoned")?;
                merge(&mut s, &r);
                if matches!(act, Act::DryRun(_)) {
                    say!(
                        "{}: start (dry run): would pin {} and move {} ({})",
                        cfg.label,
                        plural(r.threads_moved, "thread", "threads"),
                        plural(r.pages_moved, "page", "pages"),
                        plural(r.ranges_applied, "range", "ranges")
                    );
                } else {
                    say!(
                        "{}: start: {} pinned, {} moved{}, {} failed ({})",
                        cfg.label,
                        plural(r.threads_moved, "thread", "threads"),
                        plural(r.pages_moved, "page", "pages"),
                        if r.huge_pages_moved > 0 {
                            format!(" and {} huge pages", r.huge_pages_moved)
                        } else {
                            String::new()
                        },
                        r.failed(),
                        plural(r.ranges_applied, "range", "ranges")
                    );
                }
            }
            Some(e) => tracing::warn!(error = %e, "start plan refused"),
        }
    }

    let mut samples: Vec<Sample> = Vec::new();
    // The targets' threads as last listed by `track_new_threads`.
    let mut listed: Vec<(u32, u32)> = Vec::new();
    if let Some(src) = sampling.source_mut() {
        track_new_threads(root, &ids, &targets.iter().map(|t| t.pid).collect::<Vec<_>>(), &mut listed, src);
    }
    let mut n = 0u64;
    let mut last_cycle = Instant::now();
    let mut signal = None;
    let mut was_paused = false;
    let stopped = || cfg.stop.as_ref().is_some_and(|f| f.load(Ordering::SeqCst));
    loop {
        // Sleep until the end of the cycle, watching for signals and target exit.
        let deadline = last_cycle + sampling.cycle();
        let mut alive = pids_alive(&ids, &mut targets, &mut child_status, true);
        while Instant::now() < deadline && signal.is_none() && !alive.is_empty() && !stopped() {
            std::thread::sleep(Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())));
            signal = safety::stop_requested();
            alive = pids_alive(&ids, &mut targets, &mut child_status, false);
            if let Some(src) = sampling.source_mut() {
                // A thread's samples start when its ring opens: new threads get theirs now,
                // not at the cycle's end (a thread that first-touches its data as it starts
                // would otherwise leave those faults unsampled).
                track_new_threads(root, &ids, &alive, &mut listed, src);
                // Keep rings from overflowing during long cycles.
                let st = src.drain(&mut samples).unwrap_or_default();
                let mut s = cfg.stats.lock().map_err(|_| "stats lock poisoned")?;
                s.samples += st.samples;
                s.samples_lost += st.lost;
                s.samples_cache_hits += st.cache_hits;
            }
        }
        if signal.is_some() || alive.is_empty() || stopped() || cfg.max_time.is_some_and(|m| t0.elapsed() >= m) {
            break;
        }
        // The pids were checked by pidfd only while sleeping: owner and start time again.
        let alive = pids_alive(&ids, &mut targets, &mut child_status, true);
        if alive.is_empty() {
            break;
        }
        let now = Instant::now();
        let this_cycle = now - last_cycle;
        last_cycle = now;
        n += 1;
        let (threads, thread_cpu) = observe::threads_with_cpu(root, machine, &alive);
        ids.note_threads(&threads.iter().map(|t| (t.app, t.tid)).collect::<Vec<_>>());
        if let Some(src) = sampling.source_mut() {
            // Only threads still known to be the targets' own get a sample event.
            let tids: Vec<_> = threads.iter().map(|t| (t.app, t.tid)).filter(|(_, tid)| ids.tid_ok(*tid)).collect();
            src.track(&tids);
            let st = src.drain(&mut samples).unwrap_or_default();
            let mut s = cfg.stats.lock().map_err(|_| "stats lock poisoned")?;
            s.samples += st.samples;
            s.samples_lost += st.lost;
            s.samples_cache_hits += st.cache_hits;
        }
        let cycle_samples = std::mem::take(&mut samples);
        // `ptb roi end` of any target (or `--roi` before `ptb roi begin`) pauses the cycle.
        let paused = cfg.control.as_ref().is_some_and(|c| alive.iter().any(|p| c.paused(*p)))
            || (cfg.control.is_none() && cfg.roi_wait);
        if paused != was_paused && cfg.summary_lines {
            // Said once the cycle in flight is over: nothing moves after this line.
            say!("{}: placement {}", cfg.label, if paused { "paused (region of interest off)" } else { "resumed" });
        }
        was_paused = paused;
        if paused {
            let mut s = cfg.stats.lock().map_err(|_| "stats lock poisoned")?;
            s.cycles += 1;
            s.cycles_paused += 1;
            continue;
        }
        let pages = observe::page_locations(machine, &cycle_samples);
        let mut regions = Vec::new();
        for &pid in &alive {
            match observe::regions(root, machine, pid) {
                Ok(r) => regions.extend(r),
                Err(e) if e.is_gone() => tracing::info!(pid, "target exited mid-cycle"),
                Err(e) => tracing::warn!(pid, error = %e, "cannot read memory regions"),
            }
        }
        let free = observe::free_bytes(root, machine);
        let snap = Snapshot::new(machine, &cfg.allowed, &threads, &free)
            .at(t0.elapsed(), this_cycle)
            .with_samples(&cycle_samples, sampling.mode(), sampling.period())
            .with_memory(&pages, &regions)
            .with_thread_cpu(&thread_cpu);
        if let (Act::Real(a), Some(mbps)) = (&mut act, cfg.budget_mbps) {
            let pages = (mbps * 1e6 * this_cycle.as_secs_f64() / machine.page_size as f64) as u64;
            a.set_budget(Some(pages));
        }
        // The simulator's cycle step: decide, validate, apply, and the plan's sampling request
        // (cycle, mode, period) to `sampling`, where what the user fixed wins.
        let out =
            ptb_policy::cycle::step(policy, &snap, &mut Driver { act: &mut act, sampling: &mut sampling }, &mut || {
                t0.elapsed()
            });
        let decide_ms = out.decide_time.as_secs_f64() * 1e3;
        let refused = out.refused.is_some();
        if let Some(e) = &out.refused {
            tracing::warn!(error = %e, "plan refused");
        } else {
            if let Some(e) = &out.apply_error {
                tracing::warn!(error = %e, "applying the plan failed (target gone?)");
            }
            crate::plan_log::append(cfg, machine, n, &out.plan, &out.report, &act);
        }
        let report = out.report;
        let changed = sampling.take_change();
        let mut s = cfg.stats.lock().map_err(|_| "stats lock poisoned")?;
        s.cycles += 1;
        s.plans_refused += u64::from(refused);
        if let Some(c) = &changed {
            s.sampling_changes += 1;
            s.source = sampling.describe();
            if cfg.summary_lines {
                say!("{}: sampling as the policy asks: {c}", cfg.label);
            }
        }
        s.sampling_period = sampling.period();
        s.cycle_ms = sampling.cycle().as_secs_f64() * 1e3;
        s.last_decision_ms = decide_ms;
        s.threads_managed = threads.len() as u64;
        s.targets_alive = alive.len() as u64;
        merge(&mut s, &report);
        if let Act::Real(a) = &act {
            s.threads_failed = a.thread_failures.clone();
        }
        let fails: Vec<String> = report.pages_failed.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let line = format!(
            "{}: cycle {n} t={:.1}s samples={} lost={} threads={} {moved}: threads={} pages={}{} failed={}{} decide={decide_ms:.2}ms{}",
            cfg.label,
            t0.elapsed().as_secs_f64(),
            cycle_samples.len(),
            s.samples_lost,
            threads.len(),
            report.threads_moved,
            report.pages_moved,
            if report.huge_pages_moved > 0 { format!(" huge-pages={}", report.huge_pages_moved) } else { String::new() },
            report.failed(),
            if fails.is_empty() { String::new() } else { format!(" ({})", fails.join(",")) },
            if refused { " plan-refused" } else { "" }
        );
        if matches!(act, Act::DryRun(_)) {
            tracing::info!(cycle = n, samples = cycle_samples.len(), pages_would_move = report.pages_moved, "cycle");
        } else {
            tracing::info!(cycle = n, samples = cycle_samples.len(), pages_moved = report.pages_moved, "cycle");
        }
        if cfg.summary_lines {
            say!("{line}");
        }
    }

    // Stop: forward a signal to a launched child, then put things back.
    let label = &cfg.label;
    if let Some(sig) = signal {
        say!("{label}: stopping on signal {sig}");
        for t in targets.iter_mut() {
            if t.child.is_some() && child_status.is_none() {
                // Our own child, not reaped yet (its pid cannot name another process): it gets
                // this signal and every later one until it exits.
                let code = safety::supervise(t.pid);
                let raw = if code > 128 { code - 128 } else { code << 8 };
                child_status = Some(std::os::unix::process::ExitStatusExt::from_raw(raw));
            }
        }
    } else if stopped() {
        say!("{label}: detaching; the processes keep running");
    } else if !ids.alive().is_empty() {
        say!("{label}: time is up; leaving the targets running");
    } else {
        say!("{label}: every target has exited");
        // The identity check can see a launched child gone before `try_wait` saw it exit:
        // reap it now (our own child, so its pid names nobody else) to keep its status.
        for t in targets.iter_mut() {
            if let (Some(c), None) = (&mut t.child, child_status) {
                child_status = c.wait().ok();
            }
        }
    }
    let left = ids.alive().len() as u64;
    let restored = match &mut act {
        Act::Real(a) => a.restore_affinities(),
        Act::DryRun(_) => 0,
    };
    if restored > 0 {
        say!("{label}: restored the original CPU affinity of {}", plural(restored, "thread", "threads"));
    }
    if let Some(c) = &cfg.control {
        for t in &targets {
            c.unregister(t.pid);
        }
    }
    if let Ok(mut s) = cfg.stats.lock() {
        s.targets_alive = left;
    }
    let stats = cfg.stats.lock().map(|s| s.clone()).unwrap_or_default();
    Ok(Outcome { stats, child_status, signal, restored })
}

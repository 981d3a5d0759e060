//! The daemon loop honours a policy's sampling plan: a fake policy asks for a period, a cycle
//! and no samples; a launched `sleep` is the target; the sources are a fake (an address
//! source this machine may not have) and the real page-fault event.

use super::*;
use crate::daemon::{self, Act, Config, Target};
use crate::metrics::Stats;
use crate::perf::SourceKind;
use crate::procfs::ProcRoot;
use ptb_policy::{Plan, Policy, Snapshot, StartContext, StartPlan};
use ptb_profile::{Sample, SampledEvent, SourceStats};
use std::sync::{Arc, Mutex};

const START_PERIOD: u64 = 1000;
const PLAN_PERIOD: u64 = 4321;

fn address(period: u64) -> SamplingMode {
    SamplingMode::Address { event: SampledEvent::Misses, period }
}

/// Starts at `START_PERIOD` and 20 ms cycles; its plans ask for `asks` from the first cycle on
/// and record the sampling each snapshot says was in force.
struct Asks {
    asks: SamplingRequest,
    seen: Arc<Mutex<Vec<(SamplingMode, u64)>>>,
}

impl Policy for Asks {
    fn name(&self) -> String {
        "asks".into()
    }
    fn start(&mut self, _: &StartContext) -> StartPlan {
        StartPlan::default()
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(address(START_PERIOD), Duration::from_millis(20))
    }
    fn decide(&mut self, snap: &Snapshot) -> Plan {
        self.seen.lock().unwrap().push((snap.sampling, snap.sampling_period));
        Plan { sampling: Some(self.asks), ..Default::default() }
    }
}

/// An address-sampling source that only remembers what it was told.
struct FakeSource {
    period: u64,
    on: bool,
    periods: Arc<Mutex<Vec<u64>>>,
    /// Every thread it was told to sample, in order.
    tracked: Arc<Mutex<Vec<Tid>>>,
    /// Every interrupt budget it was given, in order.
    budgets: Arc<Mutex<Vec<Option<f64>>>>,
}

impl SampleSource for FakeSource {
    fn describe(&self) -> String {
        format!("fake (period {})", self.period)
    }
    fn drain(&mut self, _: &mut Vec<Sample>) -> std::io::Result<SourceStats> {
        Ok(SourceStats::default())
    }
}

impl LiveSource for FakeSource {
    fn track(&mut self, threads: &[(AppId, Tid)]) {
        self.track_more(threads);
    }
    fn track_more(&mut self, threads: &[(AppId, Tid)]) {
        self.tracked.lock().unwrap().extend(threads.iter().map(|t| t.1));
    }
    fn period(&self) -> u64 {
        self.period
    }
    fn set_period(&mut self, period: u64) {
        self.period = period;
        self.periods.lock().unwrap().push(period);
    }
    fn mode(&self) -> SamplingMode {
        address(self.period)
    }
    fn enabled(&self) -> bool {
        self.on
    }
    fn set_enabled(&mut self, on: bool) {
        self.on = on;
    }
    fn budget(&self) -> Option<f64> {
        self.budgets.lock().unwrap().last().copied().flatten()
    }
    fn set_budget(&mut self, budget: Option<f64>) {
        self.budgets.lock().unwrap().push(budget);
    }
}

fn config(cycle: Option<Duration>, period: Option<u64>, source: &str, allowed: ptb_topology::NodeSet) -> Config {
    Config {
        cycle,
        period,
        budget_mbps: None,
        allowed,
        source: source.into(),
        roi_wait: false,
        control: None,
        rule: None,
        stop: None,
        label: "ptb-test".into(),
        alloc_applied: true,
        max_time: Some(Duration::from_secs(10)),
        summary_lines: false,
        stats: Arc::new(Mutex::new(Stats::default())),
        plan_log: None,
    }
}

/// Run the daemon loop (dry run) on a `sleep 0.4` with the policy and sources given; returns
/// its stats and what the policy's snapshots said.
fn run_loop(asks: SamplingRequest, cfg: &Config, open: Opener) -> (Stats, Vec<(SamplingMode, u64)>) {
    let child = std::process::Command::new("sleep").arg("0.4").spawn().unwrap();
    run_loop_on(child, asks, cfg, open)
}

fn run_loop_on(
    child: std::process::Child,
    asks: SamplingRequest,
    cfg: &Config,
    open: Opener,
) -> (Stats, Vec<(SamplingMode, u64)>) {
    let root = ProcRoot::new("/");
    let machine = crate::live::machine(&root).unwrap();
    let target = Target::launched(&root, child).map_err(|(_, e)| e).unwrap();
    let seen = Arc::new(Mutex::new(vec![]));
    let mut policy = Asks { asks, seen: seen.clone() };
    let act = Act::DryRun(crate::actuator::DryRunActuator::default());
    let out = daemon::run_with(&root, &machine, &mut policy, None, vec![target], act, cfg, open).unwrap();
    assert!(out.child_status.is_some_and(|s| s.success()), "the target ran to its end: {:?}", out.child_status);
    let seen = seen.lock().unwrap().clone();
    (out.stats, seen)
}

fn fake_opener(periods: Arc<Mutex<Vec<u64>>>) -> Opener<'static> {
    Box::new(move |mode| {
        let SamplingMode::Address { period, .. } = mode else { return Ok(None) };
        Ok(Some(Box::new(FakeSource {
            period,
            on: true,
            periods: periods.clone(),
            tracked: Default::default(),
            budgets: Default::default(),
        }) as Box<dyn LiveSource>))
    })
}

#[test]
fn the_daemon_loop_applies_the_plans_sampling_period_and_cycle() {
    let machine = crate::live::machine(&ProcRoot::new("/")).unwrap();
    let cfg = config(None, None, "auto", machine.all_nodes());
    let periods = Arc::new(Mutex::new(vec![]));
    let asks = SamplingRequest::new(address(PLAN_PERIOD), Duration::from_millis(30));
    let (stats, seen) = run_loop(asks, &cfg, fake_opener(periods.clone()));
    assert!(seen.len() >= 3, "cycles run: {}", seen.len());
    assert_eq!(*periods.lock().unwrap(), vec![PLAN_PERIOD], "the source's period was set once, to the plan's");
    assert_eq!(seen[0], (address(START_PERIOD), START_PERIOD), "the first cycle sampled at the start period");
    assert!(seen[1..].iter().all(|s| *s == (address(PLAN_PERIOD), PLAN_PERIOD)), "then at the plan's: {seen:?}");
    assert_eq!(stats.sampling_period, PLAN_PERIOD);
    assert_eq!(stats.cycle_ms, 30.0);
    assert_eq!(stats.sampling_changes, 1);
    assert!(stats.source.contains("period 4321"), "{}", stats.source);
}

/// A policy's interrupt budget reaches the source, once, and a plan without one leaves the
/// source's cap alone.
#[test]
fn the_daemon_loop_hands_the_source_the_plans_interrupt_budget() {
    let machine = crate::live::machine(&ProcRoot::new("/")).unwrap();
    let cfg = config(None, None, "auto", machine.all_nodes());
    let budgets = Arc::new(Mutex::new(vec![]));
    let open = |budgets: Arc<Mutex<Vec<Option<f64>>>>| -> Opener<'static> {
        Box::new(move |mode| {
            let SamplingMode::Address { period, .. } = mode else { return Ok(None) };
            let fake = FakeSource {
                period,
                on: true,
                periods: Default::default(),
                tracked: Default::default(),
                budgets: budgets.clone(),
            };
            Ok(Some(Box::new(fake) as Box<dyn LiveSource>))
        })
    };
    let asks = SamplingRequest {
        mode: address(PLAN_PERIOD),
        cycle: Duration::from_millis(30),
        max_interrupts_per_s: Some(5e3),
    };
    let (stats, _) = run_loop(asks, &cfg, open(budgets.clone()));
    assert_eq!(*budgets.lock().unwrap(), vec![Some(5e3)], "set once, to the plan's");
    assert!(stats.sampling_changes >= 1);
    let none = Arc::new(Mutex::new(vec![]));
    let asks = SamplingRequest::new(address(PLAN_PERIOD), Duration::from_millis(30));
    run_loop(asks, &cfg, open(none.clone()));
    assert!(none.lock().unwrap().is_empty(), "no budget asked, none set: {:?}", none.lock().unwrap());
}

#[test]
fn what_the_user_fixed_wins_over_the_plan() {
    let machine = crate::live::machine(&ProcRoot::new("/")).unwrap();
    let cfg = config(Some(Duration::from_millis(25)), Some(7), "auto", machine.all_nodes());
    let periods = Arc::new(Mutex::new(vec![]));
    let asks = SamplingRequest::new(address(PLAN_PERIOD), Duration::from_millis(30));
    // The opener gets the policy's mode; the real one applies `--period` (here: the fake starts
    // at the user's period as the real opener would).
    let open: Opener = {
        let periods = periods.clone();
        Box::new(move |_| {
            Ok(Some(Box::new(FakeSource {
                period: 7,
                on: true,
                periods: periods.clone(),
                tracked: Default::default(),
                budgets: Default::default(),
            }) as Box<dyn LiveSource>))
        })
    };
    let (stats, seen) = run_loop(asks, &cfg, open);
    assert!(periods.lock().unwrap().is_empty(), "--period stays: {:?}", periods.lock().unwrap());
    assert!(seen.iter().all(|s| s.1 == 7));
    assert_eq!(stats.sampling_period, 7);
    assert_eq!(stats.cycle_ms, 25.0, "--cycle-ms stays");
    assert_eq!(stats.sampling_changes, 0);
}

/// The real page-fault event: its period stays one sample per fault whatever period the plan
/// names, and a plan asking for no samples pauses it.
#[test]
fn the_page_fault_source_keeps_its_period_and_pauses_when_the_plan_asks_for_no_samples() {
    let machine = crate::live::machine(&ProcRoot::new("/")).unwrap();
    let cfg = config(None, None, "auto", machine.all_nodes());
    let open: Opener = Box::new(|_| {
        Ok(Some(Box::new(crate::perf::PerfSource::new(SourceKind::PageFaults, 1)) as Box<dyn LiveSource>))
    });
    // Period first (ignored by a fault source), then nothing.
    let asks = SamplingRequest::new(address(PLAN_PERIOD), Duration::from_millis(20));
    let (stats, seen) = run_loop(asks, &cfg, open);
    assert!(seen.iter().all(|s| *s == (SamplingMode::PageFaults, 1)), "{seen:?}");
    assert_eq!(stats.sampling_period, 1);
    assert_eq!(stats.sampling_changes, 0);

    let open: Opener = Box::new(|_| {
        Ok(Some(Box::new(crate::perf::PerfSource::new(SourceKind::PageFaults, 1)) as Box<dyn LiveSource>))
    });
    let asks = SamplingRequest::new(SamplingMode::None, Duration::from_millis(20));
    let (stats, seen) = run_loop(asks, &cfg, open);
    assert_eq!(seen[0], (SamplingMode::PageFaults, 1));
    assert!(seen[1..].iter().all(|s| *s == (SamplingMode::None, 0)), "paused after the first plan: {seen:?}");
    assert_eq!(stats.sampling_period, 0);
    assert!(stats.source.contains("paused"), "{}", stats.source);
    assert_eq!(stats.sampling_changes, 1);
}

#[test]
fn a_source_opens_when_a_policy_that_started_without_samples_asks_for_them() {
    let periods = Arc::new(Mutex::new(vec![]));
    let mut s = Sampling::start(
        SamplingRequest::new(SamplingMode::None, Duration::from_millis(5)),
        Fixed::default(),
        fake_opener(periods),
    )
    .unwrap();
    assert_eq!(s.cycle(), MIN_CYCLE, "cycles are at least 10 ms");
    assert_eq!((s.mode(), s.period()), (SamplingMode::None, 0));
    s.set_sampling(SamplingRequest::new(address(500), Duration::from_millis(40)));
    assert_eq!((s.mode(), s.period(), s.cycle()), (address(500), 500, Duration::from_millis(40)));
    assert_eq!(s.take_change().as_deref(), Some("cycle 40 ms, samples from fake (period 500)"));
    assert_eq!(s.take_change(), None);
}

/// A thread's samples start when its ring opens, so a target's threads get theirs while the
/// cycle runs, not at its end: here the target (`sleep 0.4`) ends before the first 2 s cycle
/// does, and its thread was sampled all the same.
#[test]
fn a_targets_threads_are_sampled_before_the_first_cycle_ends() {
    let machine = crate::live::machine(&ProcRoot::new("/")).unwrap();
    let cfg = config(Some(Duration::from_secs(2)), None, "auto", machine.all_nodes());
    let tracked = Arc::new(Mutex::new(vec![]));
    let open: Opener = {
        let tracked = tracked.clone();
        Box::new(move |mode| {
            let SamplingMode::Address { period, .. } = mode else { return Ok(None) };
            Ok(Some(Box::new(FakeSource {
                period,
                on: true,
                periods: Default::default(),
                tracked: tracked.clone(),
                budgets: Default::default(),
            }) as Box<dyn LiveSource>))
        })
    };
    let child = std::process::Command::new("sleep").arg("0.4").spawn().unwrap();
    let pid = child.id();
    let asks = SamplingRequest::new(address(PLAN_PERIOD), Duration::from_secs(2));
    let (_, seen) = run_loop_on(child, asks, &cfg, open);
    assert!(seen.is_empty(), "no cycle ended while the target ran: {seen:?}");
    assert!(tracked.lock().unwrap().contains(&pid), "its thread {pid} was sampled: {:?}", tracked.lock().unwrap());
}

//! The simulator with policies in the loop: determinism, plan validation, costs, sampling.

use ptb_policy::follow::Follow;
use ptb_policy::{
    Params, Plan, Policy, PolicyKind, PolicySpec, SamplingMode, SamplingRequest, Snapshot, StartContext, StartPlan,
    ThreadMove, ThreadTarget,
};
use ptb_profile::SampleKind;
use ptb_sim::{ObjectPlacement, Samplers, SimError, SimOptions, Simulation, StaticPlacement, Workload};
use ptb_topology::{AddressSampler, CpuId, NodeIdx};
use std::time::Duration;

fn machine() -> ptb_topology::Machine {
    ptb_topology::synthetic::synthetic("nodes=2,cpus=4,dies=1,memonly=1").unwrap()
}

const SHARED: &str = r#"
name = "shared"
threads = 8
[[object]]
name = "data"
size_mib = 32
init = "thread:0"
[[phase]]
name = "work"
work_ginstr = 0.3
apki = 20
mlp = 2
access = [{ object = "data", pattern = "uniform" }]
"#;

fn sim(text: &str, opts: SimOptions) -> Simulation {
    sim_on(machine(), text, opts)
}

fn sim_on(m: ptb_topology::Machine, text: &str, opts: SimOptions) -> Simulation {
    Simulation::new(m, vec![Workload::parse(text, "test").unwrap()], opts).unwrap()
}

/// The test machine, its file naming `sampler`.
fn with_sampler(sampler: Option<AddressSampler>) -> ptb_topology::Machine {
    ptb_topology::Machine { sampler, ..machine() }
}

/// Every sampled page moves to the node of the thread that sampled it.
fn follow(mode: SamplingMode) -> Box<Follow> {
    Box::new(Follow { mode, cycle: Duration::from_millis(200), max_moves: usize::MAX })
}

/// A policy that returns a fixed (possibly impossible) plan at its first cycle.
struct Bad(Plan);

impl Policy for Bad {
    fn name(&self) -> String {
        "bad".into()
    }
    fn start(&mut self, _: &StartContext) -> StartPlan {
        StartPlan::default()
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(SamplingMode::None, Duration::from_millis(100))
    }
    fn decide(&mut self, _: &Snapshot) -> Plan {
        self.0.clone()
    }
}

/// A policy that samples with `mode` in 100 ms cycles, hands every snapshot to `see` and plans
/// nothing.
struct Watch<F>(SamplingMode, F);

impl<F: FnMut(&Snapshot) + Send> Policy for Watch<F> {
    fn name(&self) -> String {
        "watch".into()
    }
    fn start(&mut self, _: &StartContext) -> StartPlan {
        StartPlan::default()
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(self.0, Duration::from_millis(100))
    }
    fn decide(&mut self, s: &Snapshot) -> Plan {
        (self.1)(s);
        Plan::default()
    }
}

fn without_decision_time(r: &ptb_sim::RunResult) -> String {
    let mut v = serde_json::to_value(r).unwrap();
    v["decision_ms"] = serde_json::Value::Null;
    v.to_string()
}

#[test]
fn same_seed_same_result_and_sampling_depends_on_the_seed() {
    let run = |seed| {
        let s = sim(SHARED, SimOptions { seed, ..Default::default() });
        s.run_with(follow(SamplingMode::Address { event: ptb_policy::SampledEvent::Misses, period: 2048 })).unwrap()
    };
    let (a, b, c) = (run(1), run(1), run(2));
    assert_eq!(without_decision_time(&a), without_decision_time(&b));
    assert!(a.pages_migrated > 0);
    assert_ne!(a.pages_migrated, c.pages_migrated, "different seeds draw different samples");
}

/// Drawing samples on a second thread changes nothing: every sampler kind, a policy that moves
/// pages (so samples turn local and remote), and ptb-classic (which reads the samples' data
/// sources); a small cap on kept samples checks the dropped count too.
#[test]
fn a_second_sampling_thread_gives_the_same_results() {
    for (event, period, cap) in [
        (ptb_policy::SampledEvent::Misses, 512, 1_000_000),
        (ptb_policy::SampledEvent::Ops, 20_000, 1_000_000),
        (ptb_policy::SampledEvent::SlowLoads, 512, 1_000_000),
        (ptb_policy::SampledEvent::Cycles, 20_000, 300),
    ] {
        let run = |sampler_thread| {
            let s = sim(SHARED, SimOptions { sampler_thread, max_samples_per_cycle: cap, ..Default::default() });
            s.run_with(follow(SamplingMode::Address { event, period })).unwrap()
        };
        let (one, two) = (run(false), run(true));
        assert!(one.samples > 0 && one.pages_migrated > 0, "{event:?}");
        assert_eq!(one.samples_dropped > 0, cap < 1000, "{event:?}: {} dropped", one.samples_dropped);
        assert_eq!(without_decision_time(&one), without_decision_time(&two), "{event:?}");
    }
    let classic = |sampler_thread| {
        let s = sim(SHARED, SimOptions { sampler_thread, ..Default::default() });
        s.run_policy(PolicySpec::plain(PolicyKind::PtbClassic), &Params::new()).unwrap()
    };
    let (one, two) = (classic(false), classic(true));
    assert!(one.samples_dram > 0);
    assert_eq!(without_decision_time(&one), without_decision_time(&two));
}

#[test]
fn page_migrations_are_charged() {
    // Threads stay where they start, so pages that follow them stay local.
    let s = sim(SHARED, SimOptions { linux_migrations_per_s: 0.0, ..Default::default() });
    let r =
        s.run_with(follow(SamplingMode::Address { event: ptb_policy::SampledEvent::Misses, period: 2048 })).unwrap();
    assert!(r.pages_migrated > 100, "{}", r.pages_migrated);
    let c = &s.machine().costs;
    let per_page_s = (c.page_us * 1e-6).max(4096.0 / (c.copy_gbps * 1e9));
    assert!((r.page_migration_s - r.pages_migrated as f64 * per_page_s).abs() < 1e-9);
    assert!(r.samples > 0 && r.sampling_overhead_s > 0.0);
    assert!(r.cycles > 0);
    assert!(r.local_fraction > s.first_touch().unwrap().local_fraction);
}

#[test]
fn hint_faults_arrive_from_armed_pages_and_cost_time() {
    let s = sim(SHARED, SimOptions::default());
    let mode = SamplingMode::HintFaults { scan_bytes: 4 << 20, scan_period: Duration::from_millis(100) };
    let r = s.run_with(follow(mode)).unwrap();
    assert!(r.hint_faults > 0);
    assert_eq!(r.samples, r.hint_faults);
    let c = &s.machine().costs;
    assert!((r.sampling_overhead_s - r.hint_faults as f64 * c.hint_fault_us * 1e-6).abs() < 1e-9);
    // At most one fault per armed page per scan: 1024 pages per 100 ms scan.
    let scans = (r.runtime_s / 0.1).ceil() + 1.0;
    assert!(r.hint_faults as f64 <= scans * 1024.0);
    assert!(r.pages_migrated > 0);
}

#[test]
fn hint_fault_samples_are_marked() {
    let mode = SamplingMode::HintFaults { scan_bytes: 1 << 20, scan_period: Duration::from_millis(50) };
    let check = Watch(mode, |s: &Snapshot| {
        for x in s.samples {
            assert_eq!(x.kind, SampleKind::HintFault);
            assert!(s.thread(x.tid).is_some());
            assert!(s.pages.get(x.page(4096)).is_some());
        }
        assert_eq!(s.regions.len(), 1);
        assert_eq!(s.regions[0].resident.iter().sum::<u64>(), s.regions[0].npages);
    });
    let s = sim(SHARED, SimOptions::default());
    let r = s.run_with(Box::new(check)).unwrap();
    assert!(r.hint_faults > 0);
}

#[test]
fn impossible_plans_are_refused_and_nothing_applied() {
    let s = sim(SHARED, SimOptions::default());
    let bad_thread =
        Plan { threads: vec![ThreadMove { tid: 42, to: ThreadTarget::Node(NodeIdx(0)) }], ..Default::default() };
    let cpuless =
        Plan { threads: vec![ThreadMove { tid: 100_000, to: ThreadTarget::Node(NodeIdx(2)) }], ..Default::default() };
    for (plan, want) in [(bad_thread, "unknown thread"), (cpuless, "no CPUs")] {
        let e = s.run_with(Box::new(Bad(plan))).unwrap_err();
        assert!(matches!(e, SimError::InvalidPlan { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("bad") && msg.contains(want) && msg.contains("nothing of it was applied"), "{msg}");
    }
}

#[test]
fn thread_moves_cost_a_stall_and_are_counted() {
    let s = sim(SHARED, SimOptions::default());
    let plan =
        Plan { threads: vec![ThreadMove { tid: 100_001, to: ThreadTarget::Cpu(CpuId(7)) }], ..Default::default() };
    struct Once(Option<Plan>);
    impl Policy for Once {
        fn name(&self) -> String {
            "once".into()
        }
        fn start(&mut self, _: &StartContext) -> StartPlan {
            StartPlan::default()
        }
        fn sampling(&self) -> SamplingRequest {
            SamplingRequest::new(SamplingMode::None, Duration::from_millis(100))
        }
        fn decide(&mut self, _: &Snapshot) -> Plan {
            self.0.take().unwrap_or_default()
        }
    }
    let r = s.run_with(Box::new(Once(Some(plan)))).unwrap();
    assert_eq!(r.threads_migrated, 1);
    assert!((r.thread_migration_s - s.machine().costs.thread_us * 1e-6).abs() < 1e-12);
}

#[test]
fn static_placement_controls_threads_and_pages() {
    let s = sim(SHARED, SimOptions { threads: Some(4), ..Default::default() });
    let on = |n: u16| StaticPlacement {
        label: format!("node{n}"),
        threads: vec![ThreadTarget::Node(NodeIdx(0)); 4],
        objects: vec![ObjectPlacement::Fractions(if n == 0 { vec![1.0, 0.0, 0.0] } else { vec![0.0, 1.0, 0.0] })],
    };
    let local = s.run_static(&on(0)).unwrap();
    let remote = s.run_static(&on(1)).unwrap();
    assert!((local.local_fraction - 1.0).abs() < 1e-9);
    assert!(remote.local_fraction < 1e-9);
    assert!(local.runtime_s < remote.runtime_s);
    assert_eq!(local.threads_migrated, 0, "initial pinning is not a migration");
    let half = StaticPlacement {
        label: "half".into(),
        threads: vec![],
        objects: vec![ObjectPlacement::Fractions(vec![1.0, 1.0, 0.0])],
    };
    let h = s.run_static(&half).unwrap();
    assert!((h.access_map.controller_share[0] - 0.5).abs() < 0.01, "{:?}", h.access_map.controller_share);
    assert!(s.run_static(&StaticPlacement { label: "x".into(), threads: vec![], objects: vec![] }).is_ok());
    let wrong =
        StaticPlacement { label: "x".into(), threads: vec![ThreadTarget::Node(NodeIdx(2)); 4], objects: vec![] };
    assert!(s.run_static(&wrong).is_err());
}

#[test]
fn utilisation_never_exceeds_one_and_compute_bound_work_ignores_placement() {
    let s = sim(SHARED, SimOptions::default());
    let ft = s.first_touch().unwrap();
    for c in &ft.controller_utilisation {
        assert!(c.max <= 1.0 + 1e-12 && c.mean <= c.max + 1e-12);
    }
    for l in &ft.link_utilisation {
        assert!(l.max <= 1.0 + 1e-12);
    }
    let compute = SHARED.replace("apki = 20", "apki = 0.05");
    let s = sim(&compute, SimOptions::default());
    let il = s.run_policy(PolicySpec::plain(PolicyKind::Interleave), &Params::new()).unwrap();
    let sp = il.speedup_vs_first_touch.unwrap();
    assert!((sp - 1.0).abs() < 0.02, "{sp}");
}

#[test]
fn interleave_allocation_and_node_restriction() {
    let s = sim(SHARED, SimOptions { nodes: Some("1".parse().unwrap()), ..Default::default() });
    let r = s.first_touch().unwrap();
    // Only node 1 is allowed: every access is local to node 1.
    assert!((r.access_map.shares[1][1] - 1.0).abs() < 1e-9, "{:?}", r.access_map.shares);
    let s = sim(SHARED, SimOptions::default());
    let r = s.run_policy(PolicySpec::plain(PolicyKind::Interleave), &Params::new()).unwrap();
    // Interleave over the three memory nodes, including the CPU-less one.
    for n in 0..3 {
        assert!((r.access_map.controller_share[n] - 1.0 / 3.0).abs() < 0.02, "{:?}", r.access_map.controller_share);
    }
}

#[test]
fn several_applications_run_together() {
    let a = Workload::parse(SHARED, "a").unwrap();
    let b = Workload::parse(&SHARED.replace("name = \"shared\"", "name = \"other\""), "b").unwrap();
    let s = Simulation::new(machine(), vec![a, b], SimOptions::default()).unwrap();
    let r = s.first_touch().unwrap();
    assert_eq!(r.workload, "shared+other");
    assert_eq!(r.apps.len(), 2);
    assert_eq!(r.threads, 16);
    // 16 threads on 8 CPUs: each runs at half speed, so slower than one app alone.
    let alone = sim(SHARED, SimOptions::default()).first_touch().unwrap();
    assert!(r.runtime_s > alone.runtime_s);
}

#[test]
fn simulation_can_be_shared_between_threads() {
    fn is_sync<T: Sync + Send>() {}
    is_sync::<Simulation>();
}

#[test]
fn each_load_reports_the_latency_of_the_path_to_its_page() {
    // Every thread reads the whole object, whose slices sit on both nodes (parallel first
    // touch): half of each thread's loads are local, half remote. A load-latency sampler
    // reports each load's own latency, so the remote ones report more, within one thread.
    const HALVES: &str = r#"
name = "halves"
threads = 8
[[object]]
name = "data"
size_mib = 32
init = "parallel"
[[phase]]
name = "work"
work_ginstr = 0.3
apki = 20
mlp = 2
access = [{ object = "data", pattern = "uniform" }]
"#;
    use ptb_profile::datasrc::{decode, MemLevel};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    /// Per thread: (sum, count) of the latencies of its local and of its remote DRAM samples.
    type Sums = Arc<Mutex<BTreeMap<u32, [(f64, u64); 2]>>>;
    let sums = Sums::default();
    let seen = sums.clone();
    let mode = SamplingMode::Address { event: ptb_policy::SampledEvent::SlowLoads, period: 256 };
    let latencies = Watch(mode, move |s: &Snapshot| {
        let mut sums = seen.lock().unwrap();
        for x in s.samples {
            let (Some(l), Some(level)) = (x.latency_ns, x.data_src.and_then(decode)) else { continue };
            let k = match level {
                MemLevel::LocalDram => 0,
                MemLevel::RemoteDram => 1,
                MemLevel::Cache => continue,
            };
            let e = &mut sums.entry(x.tid).or_default()[k];
            e.0 += f64::from(l);
            e.1 += 1;
        }
    });
    sim(HALVES, SimOptions::default()).run_with(Box::new(latencies)).unwrap();
    let sums = sums.lock().unwrap();
    let both: Vec<(f64, f64)> = sums
        .values()
        .filter(|v| v[0].1 > 0 && v[1].1 > 0)
        .map(|v| (v[0].0 / v[0].1 as f64, v[1].0 / v[1].1 as f64))
        .collect();
    assert!(both.len() >= 4, "threads with both local and remote samples: {}", both.len());
    for (local, remote) in both {
        assert!(remote > local + 10.0, "a thread's remote loads report more than its local ones: {local} vs {remote}");
    }
}

/// Samples a run's op sampler (or another event's) puts on one object: how many, on which
/// pages, how many are not cache hits; and samples in all.
#[derive(Default)]
struct OnObject {
    on: u64,
    pages: std::collections::BTreeSet<u64>,
    not_cache: u64,
    all: u64,
}

/// Run `w` under a policy that only samples `event`, counting the samples on object `obj`.
fn samples_on(w: &Workload, obj: usize, event: ptb_policy::SampledEvent) -> (ptb_sim::RunResult, OnObject) {
    use ptb_profile::datasrc::{decode, MemLevel};
    use std::sync::{Arc, Mutex};
    let s = Simulation::new(machine(), vec![w.clone()], SimOptions::default()).unwrap();
    let o = &s.layout().objects[obj];
    let range = o.start_vpn..o.start_vpn + o.npages as u64;
    let c = Arc::new(Mutex::new(OnObject::default()));
    let seen = c.clone();
    let watch = Watch(SamplingMode::Address { event, period: 4096 }, move |s: &Snapshot| {
        let mut c = seen.lock().unwrap();
        for x in s.samples {
            c.all += 1;
            if range.contains(&(x.addr / 4096)) {
                c.on += 1;
                c.pages.insert(x.addr / 4096);
                c.not_cache += u64::from(x.data_src.and_then(decode) != Some(MemLevel::Cache));
            }
        }
    });
    let r = s.run_with(Box::new(watch)).unwrap();
    let c = std::mem::take(&mut *c.lock().unwrap());
    (r, c)
}

/// Eight threads reading `data` (spread by parallel first touch over the two nodes with CPUs)
/// and an object `second` of `size_mib` first touched by thread 0, with `extra` on the phase.
fn with_second_object(second: &str, size_mib: f64, extra: &str) -> Workload {
    let text = format!(
        "name = \"w\"\nthreads = 8\n[[object]]\nname = \"data\"\nsize_mib = 32\ninit = \"parallel\"\n\
         [[object]]\nname = \"{second}\"\nsize_mib = {size_mib}\ninit = \"thread:0\"\n\
         [[phase]]\nname = \"p\"\nwork_ginstr = 0.3\napki = 20\nmlp = 2\n\
         access = [{{ object = \"data\", pattern = \"uniform\" }}]\n{extra}\n"
    );
    Workload::parse(&text, "test").unwrap()
}

/// Cache hits on object 1 (`share` of the op samples; `extra` says which, `what` in messages),
/// as a time-based sampler and op sampling see them, at no cost in memory traffic or time: the
/// same run as without them, and never seen by a sampler of memory accesses. Returns the op
/// samples on object 1.
fn hits_cost_nothing_but_op_samples(second: &str, size_mib: f64, extra: &str, share: f64, what: &str) -> OnObject {
    let (w, plain) = (with_second_object(second, size_mib, extra), with_second_object(second, size_mib, ""));
    let (r, ops) = samples_on(&w, 1, ptb_policy::SampledEvent::Ops);
    let got = ops.on as f64 / ops.all as f64;
    assert!((got - share).abs() < 0.02, "{what}: {} of {} op samples", ops.on, ops.all);
    assert_eq!(ops.not_cache, 0, "{what}: loads that hit the cache");
    // The time-based map puts that share on object 1's node (thread 0's), the rest half and
    // half on the two nodes with CPUs.
    let c = &r.access_map_sampled.controller_share;
    let total: f64 = c.iter().sum();
    let mut shares: Vec<f64> = c.iter().map(|x| x / total).collect();
    shares.sort_by(f64::total_cmp);
    let rest = (1.0 - share) * 0.5;
    assert!((shares[1] - rest).abs() < 0.02 && (shares[2] - (share + rest)).abs() < 0.02, "{what}: {shares:?}");
    let (p, _) = samples_on(&plain, 1, ptb_policy::SampledEvent::Ops);
    assert_eq!(r.runtime_s, p.runtime_s, "{what}");
    assert_eq!(serde_json::to_string(&r.access_map).unwrap(), serde_json::to_string(&p.access_map).unwrap());
    let (_, misses) = samples_on(&w, 1, ptb_policy::SampledEvent::Misses);
    assert!(misses.all > 0);
    assert_eq!(misses.on, 0, "{what}: a sampler of memory accesses never sees them");
    ops
}

#[test]
fn a_pipelines_spin_wait_is_seen_by_op_samplers_on_the_flags_page_and_costs_no_memory_traffic() {
    // A pipeline of 28 stages: each of the 8 threads waits 7 / 35 = 20% of the phase spinning
    // on the flags, one page.
    let spin = "spin = { object = \"flags\", stages = 28 }";
    let ops = hits_cost_nothing_but_op_samples("flags", 0.00390625, spin, 0.2, "spin");
    assert_eq!(ops.pages.len(), 1);
}

#[test]
fn a_phases_cache_hits_are_seen_by_op_samplers_over_their_objects_pages_and_cost_no_memory_traffic() {
    // 30% of the memory ops read a hot table (4 MiB) that stays in the cache.
    let hits = "hits = [{ object = \"table\", share = 0.3 }]";
    let ops = hits_cost_nothing_but_op_samples("table", 4.0, hits, 0.3, "hits");
    assert!(ops.pages.len() > 512, "at random over the table's 1,024 pages: {} seen", ops.pages.len());
}

/// IBS op without a miss filter, as `ptb run` opens it for a policy that asks for misses: op
/// samples whose cache hits are dropped, at a period thinned by the share of ops that are
/// memory accesses (1/32 before the first cycle shows it), and no shorter than the daemon's
/// cap of 20,000 interrupts a second per thread (which binds here: these threads run 6.5e8 ops
/// a second). The interrupts, and so the sampling time charged, stay about those of a miss
/// sampler at the period asked; the samples are that share of a miss sampler's, each standing
/// for the period programmed, which the snapshot says. Requests for ops are what they were.
/// With `Samplers::Asked`, or on a machine file that names no sampler, misses are misses.
#[test]
fn ibs_op_hardware_thins_a_miss_request_to_a_miss_samplers_interrupts() {
    use ptb_policy::SampledEvent::{Misses, Ops};
    let ibs = Some(AddressSampler::IbsOp { op_count: true, miss_filter: false });
    let run = |ibs_op_hardware: bool, event, period| {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let watch = Watch(SamplingMode::Address { event, period }, move |s: &Snapshot| {
            log.lock().unwrap().push((s.sampling, s.sampling_period, s.samples.len()));
        });
        let samplers = if ibs_op_hardware { Samplers::Machine } else { Samplers::Asked };
        let s = sim_on(with_sampler(ibs), SHARED, SimOptions { samplers, ..Default::default() });
        let r = s.run_with(Box::new(watch)).unwrap();
        let seen = seen.lock().unwrap().clone();
        (r, seen)
    };
    let unnamed = sim(SHARED, SimOptions::default());
    let named = sim_on(with_sampler(ibs), SHARED, SimOptions::default());
    let follow_misses = || follow(SamplingMode::Address { event: Misses, period: 512 });
    let (unnamed, named) = (unnamed.run_with(follow_misses()).unwrap(), named.run_with(follow_misses()).unwrap());
    assert!(named.samples * 10 < unnamed.samples, "{} against {}", named.samples, unnamed.samples);
    let (miss, _) = run(false, Misses, 512);
    let (ibs, seen) = run(true, Misses, 512);
    // apki 20: 2 memory accesses per 100 instructions (ops).
    let ratio = ibs.samples as f64 / miss.samples as f64;
    assert!((0.01..0.04).contains(&ratio), "{} of {} samples", ibs.samples, miss.samples);
    // The first cycle's prior (1/32 of the ops) thins less than the 1/50 this program shows.
    let cost = ibs.sampling_overhead_s / miss.sampling_overhead_s;
    assert!((0.6..1.3).contains(&cost), "{} s against {} s", ibs.sampling_overhead_s, miss.sampling_overhead_s);
    assert_eq!(seen[0].0, SamplingMode::Address { event: Misses, period: 512 * 32 });
    let later = seen.iter().skip(2).map(|s| s.1).collect::<Vec<_>>();
    assert!(later.iter().all(|&p| (30_000..35_000).contains(&p)), "{later:?}");
    let (ops, _) = run(false, Ops, 20_000);
    let (ops_ibs, _) = run(true, Ops, 20_000);
    assert_eq!(without_decision_time(&ops), without_decision_time(&ops_ibs));
}

/// PEBS load latency delivers slow loads whatever is asked, and never a store: a policy asking
/// for misses on a machine that has only it sees the program's loads only, and its snapshot
/// says so. Where the CPU also has precise stores, a request for misses gets slow loads and
/// stores at one period thinned as IBS op's is (every retired store sampled, those that hit L1
/// dropped; the first cycle at 32 times the period asked): the kept stores say only that they
/// missed L1, with no latency, and the interrupts stay about a miss sampler's.
#[test]
fn pebs_hardware_serves_a_miss_request_with_loads_and_with_precise_stores_stores() {
    use ptb_policy::SampledEvent::{Misses, SlowLoads};
    let run = |sampler| {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let watch = Watch(SamplingMode::Address { event: Misses, period: 512 }, move |s: &Snapshot| {
            let stores: Vec<_> = s.samples.iter().filter(|x| x.kind == SampleKind::Store).collect();
            let bare = stores
                .iter()
                .all(|x| x.latency_ns.is_none() && x.data_src.is_some_and(ptb_profile::datasrc::missed_l1));
            log.lock().unwrap().push((s.sampling, s.samples.len(), stores.len(), bare));
        });
        let text = SHARED.replace("apki = 20", "apki = 20\nwrite_share = 0.3");
        let r = sim_on(with_sampler(sampler), &text, SimOptions::default()).run_with(Box::new(watch)).unwrap();
        let seen = seen.lock().unwrap().clone();
        (r, seen)
    };
    let (miss, misses) = run(None);
    let (_, pebs) = run(Some(AddressSampler::PebsLoads { stores: false }));
    assert_eq!(misses[0].0, SamplingMode::Address { event: Misses, period: 512 });
    assert_eq!(pebs[0].0, SamplingMode::Address { event: SlowLoads, period: 512 });
    assert!(misses.iter().map(|s| s.2).sum::<usize>() > 0, "the program writes");
    assert_eq!(pebs.iter().map(|s| s.2).sum::<usize>(), 0, "PEBS load latency sees no store");
    assert!(pebs.iter().map(|s| s.1).sum::<usize>() > 0);
    let (both, with_stores) = run(Some(AddressSampler::PebsLoads { stores: true }));
    assert_eq!(with_stores[0].0, SamplingMode::Address { event: Misses, period: 512 * 32 });
    assert!(with_stores.iter().map(|s| s.2).sum::<usize>() > 0, "precise stores are sampled");
    assert!(with_stores.iter().all(|s| s.3), "a store sample says only that it missed L1");
    let (all, kept) = (miss.samples as f64, both.samples as f64);
    assert!(kept < all / 2.0, "thinned: {kept} of a miss sampler's {all} samples");
    let cost = both.sampling_overhead_s / miss.sampling_overhead_s;
    assert!((0.6..1.5).contains(&cost), "{} s against {} s", both.sampling_overhead_s, miss.sampling_overhead_s);
}

/// Every address source is held under the daemon's cap of 20,000 sample interrupts a second
/// per thread, thinned or not, as `ptb run` holds every hardware source: a miss sampler asked
/// for every access (period 1) on a machine that serves what is asked is programmed, from the
/// second cycle on, at the period the cap allows for the accesses a thread made a second in the
/// cycle before (these threads make about 1.3e7), and the snapshot says that period.
#[test]
fn every_address_source_is_held_under_the_interrupt_cap() {
    use ptb_policy::SampledEvent::Misses;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let watch = Watch(SamplingMode::Address { event: Misses, period: 1 }, move |s: &Snapshot| {
        log.lock().unwrap().push(s.sampling);
    });
    let opts = SimOptions { samplers: Samplers::Asked, ..Default::default() };
    let r = sim(SHARED, opts).run_with(Box::new(watch)).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], SamplingMode::Address { event: Misses, period: 1 }, "no rate known yet");
    let later: Vec<u64> =
        seen.iter().skip(1).map(|m| if let SamplingMode::Address { period, .. } = m { *period } else { 0 }).collect();
    assert!(!later.is_empty() && later.iter().all(|&p| (200..3000).contains(&p)), "{later:?}");
    // Over the run: at most the cap's interrupts per thread-second after the first cycle.
    let per_thread_s = r.samples as f64 / (8.0 * r.runtime_s);
    assert!(per_thread_s < 20_000.0 * 1.5 + 1.3e7 * 0.1 / r.runtime_s, "{per_thread_s} a second per thread");
}

#[test]
fn a_pipelined_sweep_loads_the_nodes_holding_its_current_planes_and_interleave_evens_them() {
    // 16 threads on 4 nodes sweep a grid first touched by planes (each node holds a quarter
    // of the planes, in order); the sweep is a pipeline over 160 planes, so at any moment the
    // threads work on about 26 consecutive planes, on one or two nodes. Without the pipeline
    // the same accesses are spread over every plane at once and interleave has nothing to even.
    let text = |spin: &str| {
        format!(
            "name = \"sweep\"\nthreads = 16\n[[object]]\nname = \"grid\"\nsize_mib = 64\ninit = \"parallel\"\n\
             [[object]]\nname = \"flags\"\nsize_mib = 0.00390625\ninit = \"thread:0\"\n\
             [[phase]]\nname = \"sweeps\"\nwork_ginstr = 1.0\napki = 40\nmlp = 6\n\
             access = [{{ object = \"grid\", pattern = \"transposed\" }}]\n{spin}\n"
        )
    };
    let m = ptb_topology::synthetic::synthetic("nodes=4,cpus=4,dies=1").unwrap();
    let gain = |spin: &str| {
        let s = sim_on(m.clone(), &text(spin), SimOptions::default());
        let r = s.run_policy(PolicySpec::plain(PolicyKind::Interleave), &Params::new()).unwrap();
        r.speedup_vs_first_touch.unwrap()
    };
    let piped = gain("spin = { object = \"flags\", stages = 160 }");
    let spread = gain("");
    assert!(piped > 1.1, "interleave gains {piped:.3} on the pipeline, {spread:.3} without");
    assert!((spread - 1.0).abs() < 0.03, "interleave gains {spread:.3} without it");
}

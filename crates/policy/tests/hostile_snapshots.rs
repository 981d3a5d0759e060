//! Every policy on snapshots a driver could hand it on a bad day: samples of threads and
//! programs it does not know, from CPUs the machine does not have, at any address and time,
//! with any latency and data-source word; pages whose node is known only for some samples;
//! regions of any size; threads that come and go between cycles. No policy may panic, and
//! every plan it returns must pass the shared cycle's validation (the daemon would drop an
//! invalid one, so a policy that makes them wastes its cycles).

use proptest::prelude::*;
use ptb_policy::{build, validate_plan, PageLocations, Params, PolicyKind, PolicySpec, Region, Snapshot, StartContext};
use ptb_policy::{SampledEvent, SamplingMode, ThreadState};
use ptb_profile::{PageKey, Sample, SampleKind};
use ptb_topology::{CpuId, Machine, NodeIdx};
use std::time::Duration;

/// One hostile sample: (tid choice, app, cpu, address choice, kind, time, data source, latency).
type RawSample = (u8, u8, u16, (u8, u64), u8, u64, Option<u64>, Option<f32>);

fn machine(which: u8) -> Machine {
    match which % 3 {
        0 => ptb_topology::synthetic::synthetic("nodes=4,cpus=4").expect("synthetic machine"),
        1 => ptb_topology::presets::get("opteron6272-8n").expect("preset"),
        _ => ptb_topology::presets::get("broadwell-cod-4n").expect("preset"),
    }
}

fn mode(which: u8, period: u64) -> SamplingMode {
    match which % 7 {
        0 => SamplingMode::Address { event: SampledEvent::Misses, period },
        1 => SamplingMode::Address { event: SampledEvent::Ops, period },
        2 => SamplingMode::Address { event: SampledEvent::SlowLoads, period },
        3 => SamplingMode::Address { event: SampledEvent::Cycles, period },
        4 => SamplingMode::HintFaults { scan_bytes: period << 12, scan_period: Duration::from_millis(period % 5000) },
        5 => SamplingMode::PageFaults,
        _ => SamplingMode::None,
    }
}

/// Region `i`'s first page: regions 2^20 pages apart.
fn region_vpn(i: usize) -> u64 {
    0x10_0000 + (i as u64) * (1 << 20)
}

struct World {
    m: Machine,
    threads: Vec<ThreadState>,
    samples: Vec<Sample>,
    pages: PageLocations,
    regions: Vec<Region>,
    free: Vec<u64>,
    thread_cpu: Vec<(u32, f64)>,
}

fn world(
    which: u8,
    n_threads: usize,
    apps: u8,
    raw: &[RawSample],
    known_pages: u8,
    region_pages: &[u64],
    cpu_s: &[f64],
) -> World {
    let m = machine(which);
    let cpus = m.cpus();
    // Every fifth thread last ran on a CPU the machine file does not name (a file that
    // describes fewer CPUs than the server has): the daemon reports it on node 0, group 0.
    let threads: Vec<ThreadState> = (0..n_threads)
        .map(|i| {
            let (cpu, node, group) = if i % 5 == 4 {
                (CpuId(cpus.len() as u32 + i as u32), NodeIdx(0), ptb_topology::GroupIdx(0))
            } else {
                let cpu = cpus[(i * 7) % cpus.len()];
                (cpu, m.node_of_cpu(cpu).expect("cpu of the machine"), m.group_of_cpu(cpu).expect("cpu of the machine"))
            };
            ThreadState {
                tid: 1000 + i as u32,
                app: (i % usize::from(apps.max(1))) as u32,
                cpu,
                node,
                group,
                affinity: None,
            }
        })
        .collect();
    let nn = m.n_nodes();
    let regions: Vec<Region> = region_pages
        .iter()
        .enumerate()
        .map(|(i, &npages)| Region {
            app: (i % usize::from(apps.max(1))) as u32,
            start_vpn: region_vpn(i),
            npages,
            name: format!("r{i}"),
            resident: (0..nn).map(|n| npages / nn as u64 + u64::from(n == 0) * (npages % nn as u64)).collect(),
            huge: Default::default(),
        })
        .collect();
    let ps = m.page_size;
    let mut samples: Vec<Sample> = raw
        .iter()
        .map(|&(tid, app, cpu, (where_, off), kind, time_ns, data_src, latency_ns)| {
            // Mostly the known threads and regions, sometimes anything at all.
            let tid = if usize::from(tid) < n_threads { 1000 + u32::from(tid) } else { u32::from(tid) * 7919 };
            let addr = match (where_ % 4, regions.len()) {
                (0, _) | (_, 0) => off,
                (w, n) => {
                    let r = &regions[usize::from(w) % n];
                    (r.start_vpn + off % r.npages.max(1)) * ps + off % ps
                }
            };
            Sample {
                app: u32::from(app % (apps + 1)),
                tid,
                cpu: CpuId(u32::from(cpu) % (cpus.len() as u32 + 8)),
                addr,
                kind: [SampleKind::Load, SampleKind::Store, SampleKind::Access, SampleKind::HintFault]
                    [usize::from(kind % 4)],
                time_ns,
                data_src,
                latency_ns,
                phys: None,
            }
        })
        .collect();
    // Drivers hand samples over thread after thread.
    samples.sort_by_key(|s| s.tid);
    let mut pages = PageLocations::new();
    for (i, s) in samples.iter().enumerate() {
        if i % 4 < usize::from(known_pages % 5) {
            pages.insert(PageKey { app: s.app, vpn: s.addr / ps }, NodeIdx((i % nn) as u16));
        }
    }
    let free = m.nodes.iter().map(|n| n.memory_bytes / 2).collect();
    // Empty when no CPU times are given (a driver that reports none).
    let thread_cpu = threads.iter().zip(cpu_s.iter().cycle()).map(|(t, &c)| (t.tid, c)).collect();
    World { m, threads, samples, pages, regions, free, thread_cpu }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn no_policy_panics_or_plans_what_the_cycle_would_reject(
        which in 0u8..3,
        n_threads in 0usize..80,
        apps in 1u8..4,
        raw in proptest::collection::vec(
            (any::<u8>(), any::<u8>(), any::<u16>(), (any::<u8>(), any::<u64>()), any::<u8>(), any::<u64>(),
             proptest::option::of(any::<u64>()), proptest::option::of(prop_oneof![Just(0.0f32), 0.0f32..5000.0, Just(f32::MAX)])),
            0..600),
        known_pages in any::<u8>(),
        region_pages in proptest::collection::vec(prop_oneof![Just(0u64), 1u64..5000, Just(1u64 << 30)], 0..4),
        cpu_s in proptest::collection::vec(prop_oneof![Just(0.0f64), 0.0f64..100.0], 0..3),
        modes in proptest::collection::vec(any::<u8>(), 3),
        period in prop_oneof![Just(0u64), 1u64..100_000],
        lost in 0usize..10,
    ) {
        let w = world(which, n_threads, apps, &raw, known_pages, &region_pages, &cpu_s);
        let allowed = w.m.all_nodes();
        let specs = PolicyKind::ALL.into_iter().flat_map(|kind| {
            [PolicySpec::plain(kind), PolicySpec { kind, selective_filter: true }]
        });
        for spec in specs {
            let kind = spec.to_string();
            let mut p = build(spec, &Params::default()).expect("default parameters");
            let _ = p.start(&StartContext { machine: &w.m, allowed: &allowed, threads: &w.threads });
            for (cycle, &md) in modes.iter().enumerate() {
                // Threads come and go between cycles.
                let threads = &w.threads[..w.threads.len().saturating_sub(cycle * lost)];
                let snap = Snapshot::new(&w.m, &allowed, threads, &w.free)
                    .at(Duration::from_millis(100 * (cycle as u64 + 1)), Duration::from_millis(if cycle == 1 { 0 } else { 100 }))
                    .with_samples(&w.samples, mode(md, period), period)
                    .with_memory(&w.pages, &w.regions)
                    .with_thread_cpu(&w.thread_cpu);
                let plan = p.decide(&snap);
                prop_assert!(validate_plan(&plan, &snap).is_ok(), "{kind} cycle {cycle}: {:?}", validate_plan(&plan, &snap));
            }
        }
    }
}

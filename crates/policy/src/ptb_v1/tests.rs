//! Unit and invariant tests of the `ptb` policy on hand-built snapshots.

use super::chunks::ChunkState;
use super::*;
use crate::plan::validate_plan;
use crate::snapshot::{PageLocations, Region, ThreadState};
use crate::SampledEvent;
use ptb_profile::{PageKey, Sample, SampleKind};
use ptb_topology::{synthetic::synthetic, CpuId, Machine, NodeSet};

struct World {
    m: Machine,
    allowed: NodeSet,
    threads: Vec<ThreadState>,
    regions: Vec<Region>,
    pages: PageLocations,
    free: Vec<u64>,
}

fn world(npages: u64, home: u16) -> World {
    let m = synthetic("nodes=4,cpus=4").unwrap();
    let threads = m
        .cpus()
        .into_iter()
        .map(|c| ThreadState {
            tid: 100 + c.0,
            app: 0,
            cpu: c,
            node: m.node_of_cpu(c).unwrap(),
            group: m.group_of_cpu(c).unwrap(),
            affinity: None,
        })
        .collect();
    let mut resident = vec![0; 4];
    resident[home as usize] = npages;
    let regions =
        vec![Region { app: 0, start_vpn: 0, npages, name: "data".into(), resident, huge: Default::default() }];
    let pages = (0..npages).map(|v| (PageKey { app: 0, vpn: v }, NodeIdx(home))).collect();
    World { allowed: m.all_nodes(), free: vec![1 << 34; 4], m, threads, regions, pages }
}

fn sample(cpu: u32, vpn: u64) -> Sample {
    Sample {
        app: 0,
        tid: 100 + cpu,
        cpu: CpuId(cpu),
        addr: vpn * 4096 + 8,
        kind: SampleKind::Load,
        time_ns: 0,
        data_src: None,
        latency_ns: None,
        phys: None,
    }
}

fn snap<'a>(w: &'a World, samples: &'a [Sample], period: u64) -> Snapshot<'a> {
    Snapshot {
        machine: &w.m,
        allowed: &w.allowed,
        now: Duration::from_secs(1),
        cycle: Duration::from_secs(1),
        threads: &w.threads,
        samples,
        sampling: crate::SamplingMode::Address { event: crate::SampledEvent::Misses, period },
        sampling_period: period,
        pages: &w.pages,
        regions: &w.regions,
        free_bytes: &w.free,
        thread_cpu: &[],
    }
}

/// Every thread of node `n` (CPUs 4n..4n+3) samples pages of chunk `n` (private slices).
fn private_slices(per_thread: u64) -> Vec<Sample> {
    let mut v = Vec::new();
    for cpu in 0..16u32 {
        let node = (cpu / 4) as u64;
        for i in 0..per_thread {
            v.push(sample(cpu, node * 512 + (i * 37 + cpu as u64) % 512));
        }
    }
    v
}

/// Every thread samples every chunk (all shared).
fn all_shared(per_thread: u64) -> Vec<Sample> {
    let mut v = Vec::new();
    for cpu in 0..16u32 {
        for i in 0..per_thread {
            v.push(sample(cpu, (i * 131 + cpu as u64 * 7) % 2048));
        }
    }
    v
}

fn run_cycles(p: &mut PtbV1, w: &World, samples: &[Sample], period: u64, n: usize) -> Vec<Plan> {
    (0..n).map(|_| p.decide(&snap(w, samples, period))).collect()
}

#[test]
fn private_slices_move_home_after_confirmation() {
    let w = world(2048, 0);
    let s = private_slices(200);
    let mut p = PtbV1::new(PtbParams { urgent_s: 0.0, ..PtbParams::default() });
    let plans = run_cycles(&mut p, &w, &s, 8192, 3);
    assert!(plans[0].ranges.is_empty(), "first sight of a chunk must not move it");
    let moves: Vec<_> = plans.iter().flat_map(|p| p.ranges.clone()).collect();
    for chunk in 1..4u64 {
        let m = moves.iter().find(|r| r.start_vpn == chunk * 512).expect("chunk moved");
        assert_eq!(m.op, RangeOp::MoveTo(NodeIdx(chunk as u16)));
    }
    assert!(!moves.iter().any(|r| r.start_vpn == 0), "chunk 0 is already home");
    for plan in &plans {
        validate_plan(plan, &snap(&w, &s, 8192)).unwrap();
    }
}

#[test]
fn with_a_home_share_below_100_private_slices_keep_most_of_their_pages_at_home() {
    let w = world(2048, 0);
    let s = private_slices(200);
    let mut p = PtbV1::new(PtbParams { urgent_s: 0.0, home_confirm: 1000, ..PtbParams::default() });
    p.home.pct = 55;
    let moves: Vec<_> = run_cycles(&mut p, &w, &s, 8192, 3).into_iter().flat_map(|p| p.ranges).collect();
    for chunk in 1..4u64 {
        let m = moves.iter().find(|r| r.start_vpn == chunk * 512).expect("chunk moved");
        let RangeOp::Weighted(ws) = &m.op else { panic!("{m:?}") };
        assert_eq!(ws.len(), 4, "every memory node gets a share: {ws:?}");
        let home = ws.iter().find(|x| x.0 == NodeIdx(chunk as u16)).unwrap().1;
        assert!(ws.iter().all(|x| x.0 == NodeIdx(chunk as u16) || 4 * x.1 < home), "{ws:?}");
    }
}

#[test]
fn hot_data_on_an_overloaded_node_moves_on_first_sight_and_other_data_waits() {
    // Everything on node 0, which serves all the traffic: a hot spot, so the slices that pay
    // back within urgent_s move in the first cycle.
    let w = world(2048, 0);
    let s = private_slices(200);
    let mut p = PtbV1::new(PtbParams::default());
    assert!(!p.decide(&snap(&w, &s, 8192)).ranges.is_empty());
    // The same slices spread evenly (no hot spot): nothing moves before confirmation.
    let mut w = world(2048, 0);
    let n = w.regions[0].npages;
    w.regions[0].resident = vec![n / 4; 4];
    w.pages = (0..n).map(|v| (PageKey { app: 0, vpn: v }, NodeIdx((v % 4) as u16))).collect();
    let mut p = PtbV1::new(PtbParams::default());
    assert!(p.decide(&snap(&w, &s, 8192)).ranges.is_empty());
}

#[test]
fn heavy_shared_data_on_one_node_is_spread() {
    let w = world(2048, 0);
    let s = all_shared(400);
    let mut p = PtbV1::new(PtbParams::default());
    let moves: Vec<_> = run_cycles(&mut p, &w, &s, 65536, 3).into_iter().flat_map(|p| p.ranges).collect();
    assert!(!moves.is_empty());
    assert!(moves.iter().all(|r| matches!(r.op, RangeOp::Weighted(_))), "{moves:?}");
}

#[test]
fn compute_bound_programs_are_left_alone() {
    let w = world(2048, 0);
    let s = all_shared(2);
    let mut p = PtbV1::new(PtbParams::default());
    // Threads are pinned at start (as every driver calls it); the cycles then move nothing.
    p.start(&StartContext { machine: &w.m, allowed: &w.allowed, threads: &w.threads });
    let plans = run_cycles(&mut p, &w, &s, 16, 4);
    assert!(plans.iter().all(|p| p.is_empty()));
    assert!(plans.iter().all(|p| p.stats.contains_key("gated_compute_bound")));
}

#[test]
fn fault_samples_place_by_locality_without_the_gate() {
    // The same light evidence as a compute-bound program, but from page faults: the access rate
    // is unknown, so ptb neither gates nor prices the moves; private slices still go home.
    let w = world(2048, 0);
    let mut s = private_slices(2);
    for x in &mut s {
        x.kind = SampleKind::PageFault;
    }
    // Whole chunks home (no hedged first move: that is tested on its own).
    let mut p = PtbV1::new(PtbParams { first_home: Some(100), ..PtbParams::default() });
    let plans = run_cycles(&mut p, &w, &s, 1, 4);
    assert!(plans
        .iter()
        .all(|p| p.stats.contains_key("fault_samples_unpriced") && !p.stats.contains_key("gated_compute_bound")));
    let moves: Vec<_> = plans.iter().flat_map(|p| p.ranges.clone()).collect();
    for chunk in 1..4u64 {
        let m = moves.iter().find(|r| r.start_vpn == chunk * 512).expect("chunk moved");
        assert_eq!(m.op, RangeOp::MoveTo(NodeIdx(chunk as u16)));
    }
    // One access sample among them is enough to price the cycle again: the gate applies.
    s[0].kind = SampleKind::Load;
    let mut p = PtbV1::new(PtbParams::default());
    assert!(run_cycles(&mut p, &w, &s, 1, 2).iter().all(|p| p.stats.contains_key("gated_compute_bound")));
}

#[test]
fn quiet_mode_slows_sampling_and_identical_inputs_give_identical_plans() {
    let w = world(2048, 0);
    let s = private_slices(200);
    let mut a = PtbV1::new(PtbParams::default());
    let mut b = PtbV1::new(PtbParams::default());
    let pa = run_cycles(&mut a, &w, &s, 8192, 8);
    let pb = run_cycles(&mut b, &w, &s, 8192, 8);
    assert_eq!(pa, pb);
    assert!(pa.iter().any(|p| p
        .sampling
        .is_some_and(|r| r.mode == SamplingMode::Address { event: SampledEvent::Misses, period: 8192 * 4 })));
}

#[test]
fn the_first_cycles_are_short_then_the_cycle_returns_to_normal() {
    let w = world(2048, 0);
    let s = private_slices(200);
    let p = PtbParams { start_cycles: 3, ..PtbParams::default() };
    let mut ptb = PtbV1::new(p.clone());
    assert_eq!(ptb.sampling().cycle, p.start_cycle);
    assert_eq!(
        ptb.sampling().mode,
        SamplingMode::Address { event: SampledEvent::Misses, period: p.start_period },
        "denser samples at start"
    );
    let plans = run_cycles(&mut ptb, &w, &s, 8192, 4);
    // The request changes once, after the third cycle, to the normal cycle.
    let changes: Vec<(usize, Duration)> =
        plans.iter().enumerate().filter_map(|(i, x)| x.sampling.map(|r| (i, r.cycle))).collect();
    assert_eq!(changes.first(), Some(&(2, p.cycle)), "{changes:?}");
    assert_eq!(ptb.sampling().cycle, p.cycle);
    // Back to the normal period (or the quiet one: these slices were home after the start).
    assert!(matches!(ptb.sampling().mode, SamplingMode::Address { period, .. } if period >= p.period));
    let mut plain = PtbV1::new(PtbParams { start_cycles: 0, ..p });
    assert_eq!(plain.sampling().cycle, Duration::from_millis(100));
    assert!(run_cycles(&mut plain, &w, &s, 8192, 2).iter().all(|x| x.sampling.is_none()));
}

#[test]
fn single_memory_node_is_nothing_to_place() {
    let mut w = world(64, 0);
    w.m = synthetic("nodes=1,cpus=16").unwrap();
    w.allowed = w.m.all_nodes();
    w.threads.iter_mut().for_each(|t| {
        t.node = NodeIdx(0);
        t.group = ptb_topology::GroupIdx(0)
    });
    w.regions[0].resident = vec![64];
    let s = all_shared(100);
    let mut p = PtbV1::new(PtbParams::default());
    p.start(&StartContext { machine: &w.m, allowed: &w.allowed, threads: &w.threads });
    assert!(p.decide(&snap(&w, &s, 8192)).is_empty());
}

#[test]
fn bad_parameters_are_refused() {
    let mut params = Params::new();
    params.set_assignment("ptb-v1.chunk_pages=100").unwrap();
    assert!(PtbV1::from_params(&params).unwrap_err().to_string().contains("chunk_pages"));
    let mut params = Params::new();
    params.set_assignment("ptb-v1.private_share=2").unwrap();
    assert!(PtbV1::from_params(&params).is_err());
}

#[test]
fn start_spreads_only_where_local_paths_are_narrow() {
    let start = |name: &str| {
        let m = ptb_topology::presets::get(name).unwrap();
        let allowed = m.all_nodes();
        let mut p = PtbV1::new(PtbParams::default());
        let alloc = p.start(&StartContext { machine: &m, allowed: &allowed, threads: &[] }).alloc;
        (alloc, p.sampling().cycle)
    };
    // Short first cycles only where first touch may pile data up on one node.
    let (short, normal) = (PtbParams::default().start_cycle, PtbParams::default().cycle);
    assert!(matches!(start("opteron6272-4n"), (AllocPolicy::Interleave(ref n), c) if n.len() == 4 && c == normal));
    assert_eq!(start("broadwell-cod-4n"), (AllocPolicy::FirstTouch, short));
    assert_eq!(start("opteron6272-8n"), (AllocPolicy::FirstTouch, short));
    // A CXL node with a sixth of the bandwidth gets a proportionally small weight when spread.
    let m = ptb_topology::presets::get("cxl-1s").unwrap();
    let w = spread_weights(&m, &m.memory_nodes()).unwrap();
    assert!(w[1].1 * 4 < w[0].1, "{w:?}");
}

#[test]
fn private_chunks_are_spread_instead_where_home_moves_are_off() {
    let w = world(2048, 0);
    let s = private_slices(200);
    let mut params = Params::new();
    params.set_assignment("ptb-v1.home_moves=false").unwrap();
    let mut p = PtbV1::from_params(&params).unwrap();
    let moves: Vec<_> = run_cycles(&mut p, &w, &s, 8192, 3).into_iter().flat_map(|p| p.ranges).collect();
    assert!(!moves.is_empty());
    assert!(moves.iter().all(|r| !matches!(r.op, RangeOp::MoveTo(_))), "{moves:?}");
    // auto: off on the 4-node Opteron (local bandwidth close to remote), on elsewhere.
    let p = PtbV1::new(PtbParams::default());
    let on = |name: &str| p.home_moves_on(&ptb_topology::presets::get(name).unwrap());
    assert!(!on("opteron6272-4n") && on("opteron6272-8n") && on("broadwell-cod-4n"));
    params.set_assignment("ptb-v1.home_moves=maybe").unwrap();
    assert!(PtbV1::from_params(&params).unwrap_err().to_string().contains("home_moves"));
}

#[test]
fn a_chunk_whose_accessors_alternate_gets_a_short_horizon() {
    let w = world(2048, 0);
    let node = Target::Node(NodeIdx(1), 100);
    let mut c = ChunkState::new(4, 0.0);
    assert_eq!(c.observe_target(node, 0.0, 1), f64::INFINITY);
    assert_eq!(c.observe_target(node, 0.1, 1), f64::INFINITY, "no change yet");
    // First time spread: nothing known about how long spread periods last.
    assert_eq!(c.observe_target(Target::Spread, 0.2, 1), f64::INFINITY);
    // Back to a node: node periods have lasted 0.2 s so far.
    assert!((c.observe_target(node, 0.4, 1) - 0.2).abs() < 1e-6);
    // Spread again: the one spread period lasted 0.2 s; a long current period counts too.
    assert!((c.observe_target(Target::Spread, 0.5, 1) - 0.2).abs() < 1e-6);
    assert!((c.observe_target(Target::Spread, 1.5, 1) - 1.0).abs() < 1e-6);
    // With confirm = 2 the same sequence needs two cycles of a new target to end a period;
    // a new period then dates from the first of them.
    let mut c = ChunkState::new(4, 0.0);
    c.observe_target(node, 0.0, 2);
    assert_eq!(c.observe_target(Target::Spread, 0.2, 2), f64::INFINITY);
    assert_eq!(c.observe_target(Target::Spread, 0.3, 2), f64::INFINITY);
    assert!((c.observe_target(node, 0.5, 2) - 0.2).abs() < 1e-6, "node period 0.0-0.2");
    // In a run, confirmation and the short horizon together: slices that flip between
    // private and all-shared every cycle never move, while the same private slices held
    // steady do.
    let (a, b) = (private_slices(16), all_shared(16));
    let mk = || PtbV1::new(PtbParams { gate: 0.0, ..PtbParams::default() });
    let mut p = mk();
    let flip: usize = (0..12).map(|i| p.decide(&snap(&w, if i % 2 == 0 { &a } else { &b }, 512)).ranges.len()).sum();
    let mut p = mk();
    let steady: usize = (0..12).map(|_| p.decide(&snap(&w, &a, 512)).ranges.len()).sum();
    assert_eq!((flip, steady), (0, 3));
}

#[test]
fn a_one_cycle_flicker_of_the_target_does_not_cut_the_horizon() {
    // A chunk near the mixed threshold: its target flickers to spread for one cycle at a
    // time with sampling noise. Those are not phases: the node period goes on and the
    // horizon grows with it (the old rule counted each flicker, and the horizon stayed at
    // the 0.05 s between them, so the chunk never paid back a move home).
    let node = Target::Node(NodeIdx(1), 100);
    let mut c = ChunkState::new(4, 0.0);
    let mut t = 0.0;
    let mut last = 0.0;
    for i in 0..40 {
        let want = if i % 3 == 2 { Target::Spread } else { node };
        last = c.observe_target(want, t, 2);
        t += 0.025;
    }
    assert_eq!(c.held_n, [0, 0], "no period ended");
    assert_eq!(last, f64::INFINITY, "the node period is still the first");
    // Two spread cycles in a row are a period: the node period ends where spread began.
    c.observe_target(Target::Spread, t + 0.025, 2);
    c.observe_target(Target::Spread, t + 0.05, 2);
    assert_eq!(c.held_n, [1, 0]);
    assert!((c.held_s[0] as f64 - (t + 0.025)).abs() < 1e-4, "{}", c.held_s[0]);
    // Another node on top is another user: its period starts at once.
    c.observe_target(node, t + 0.075, 2);
    c.observe_target(node, t + 0.1, 2);
    c.observe_target(Target::Node(NodeIdx(2), 100), t + 0.125, 2);
    assert_eq!(c.held_n, [2, 1], "spread and the node-1 period both ended");
}

#[test]
fn chunks_already_near_their_target_are_not_moved() {
    // Pages spread evenly and accessed by everyone: already where `ptb` wants them.
    let mut w = world(2048, 0);
    for (i, v) in (0..2048u64).enumerate() {
        w.pages.insert(PageKey { app: 0, vpn: v }, NodeIdx((i % 4) as u16));
    }
    w.regions[0].resident = vec![512; 4];
    let s = all_shared(400);
    let mut p = PtbV1::new(PtbParams::default());
    let plans = run_cycles(&mut p, &w, &s, 65536, 4);
    assert!(
        plans.iter().all(|p| p.ranges.is_empty()),
        "{:?}",
        plans.iter().map(|p| p.ranges.len()).collect::<Vec<_>>()
    );
}

#[test]
fn sampled_latency_is_averaged_per_node_of_the_accessing_thread_given_enough_samples() {
    let w = world(2048, 0);
    // CPUs 0-3 are node 0, 4-7 node 1: node 0 gets 20 samples of 100 and 300 ns, node 1 only 10.
    let mut s: Vec<Sample> = (0..20u32)
        .map(|i| Sample { latency_ns: Some(if i % 2 == 0 { 100.0 } else { 300.0 }), ..sample(i % 4, 1) })
        .collect();
    s.extend((0..10u32).map(|_| Sample { latency_ns: Some(50.0), ..sample(4, 1) }));
    s.extend((0..40u32).map(|_| sample(8, 1))); // no latency: not counted
    let got = measured_latency_ns(&snap(&w, &s, 8192));
    assert_eq!(got, vec![Some(200.0), None, None, None]);
}

#[test]
fn a_mixed_chunk_is_private_only_when_its_top_share_is_confidently_above_even() {
    let nodes: Vec<NodeIdx> = (0..8).map(NodeIdx).collect();
    let p = PtbParams::default();
    let chunk = |counts: [f32; 8]| {
        let mut c = ChunkState::new(8, 0.0);
        c.by_src.iter_mut().zip(counts).for_each(|(x, v)| *x = v);
        c
    };
    // SPECjbb-like: half the accesses from the owner's node, the rest from everyone (56% top).
    let owner = chunk([34.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0, 3.0]);
    assert_eq!(private_home(&owner, &p, &nodes), Some(NodeIdx(0)));
    // The same shares seen in a handful of samples are no evidence.
    let few = chunk([2.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(private_home(&few, &p, &nodes), None);
    // A private phase ending: the share fell from 90% to 56% in one cycle; not mixed (yet).
    let mut ending = owner.clone();
    ending.prev_top = (NodeIdx(0), 0.9);
    assert_eq!(private_home(&ending, &p, &nodes), None);
    ending.prev_top = (NodeIdx(0), 0.6);
    assert_eq!(private_home(&ending, &p, &nodes), Some(NodeIdx(0)), "steady at 56%");
    // Seen for the first time, no fall has been seen, whichever node is on top.
    let first = chunk([3.0, 4.0, 3.0, 34.0, 4.0, 4.0, 4.0, 4.0]);
    assert_eq!(first.prev_top.1, 0.0);
    assert_eq!(private_home(&first, &p, &nodes), Some(NodeIdx(3)));
    // A uniform chunk's top node, even with plenty of samples, is not a home.
    let uniform = chunk([11.0, 8.0, 7.0, 8.0, 9.0, 7.0, 8.0, 6.0]);
    assert_eq!(private_home(&uniform, &p, &nodes), None);
    // Off, only private_share counts; a truly private chunk is private either way.
    let off = PtbParams { mixed_home: 0.0, ..p.clone() };
    assert_eq!(private_home(&owner, &off, &nodes), None);
    let private = chunk([3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(private_home(&private, &off, &nodes), Some(NodeIdx(0)));
    // The bound itself: below the sampled share, closer with more samples, within [0, 1].
    let (a, b) = (wilson_lower(0.56, 20.0, 2.0), wilson_lower(0.56, 200.0, 2.0));
    assert!(a < b && b < 0.56 && a > 0.0, "{a} {b}");
    assert_eq!(wilson_lower(0.5, 0.0, 2.0), 0.0);
    assert!(wilson_lower(1.0, 1e6, 2.0) <= 1.0);
}

#[test]
fn the_first_move_off_a_hot_spot_hedges_the_home_share_where_local_paths_are_narrower_than_the_controller() {
    let share = |name: &str| first_home_share(&ptb_topology::presets::get(name).unwrap());
    // 8-node Opteron: local path 8 GB/s, controller 16: midway between 100 and 50.
    assert_eq!(share("opteron6272-8n"), 70);
    // Broadwell: the local path is as wide as the controller, nothing to hedge.
    assert_eq!(share("broadwell-cod-4n"), 100);
    // Unknown bandwidth: whole chunks.
    let mut m = synthetic("nodes=4,cpus=4").unwrap();
    m.bandwidth = None;
    assert_eq!(first_home_share(&m), 100);
    // In a run: master-touched private slices leave the hot spot at the hedged share, with
    // most of each chunk on its home node.
    let w = world(2048, 0);
    let s = private_slices(200);
    let mut p = PtbV1::new(PtbParams { first_home: Some(70), ..PtbParams::default() });
    let moves = p.decide(&snap(&w, &s, 8192)).ranges;
    assert_eq!(moves.len(), 3, "{moves:?}");
    for m in &moves {
        let home = NodeIdx((m.start_vpn / 512) as u16);
        let RangeOp::Weighted(ws) = &m.op else { panic!("{m:?}") };
        let total: u32 = ws.iter().map(|x| x.1).sum();
        let at_home = ws.iter().find(|x| x.0 == home).unwrap().1;
        let pct = 100 * at_home / total;
        assert!((74..=79).contains(&pct), "70% + 30%/4 at home: {pct}% of {ws:?}");
    }
    // first_home=100: whole chunks, as before.
    let mut p = PtbV1::new(PtbParams { first_home: Some(100), ..PtbParams::default() });
    assert!(p.decide(&snap(&w, &s, 8192)).ranges.iter().all(|r| matches!(r.op, RangeOp::MoveTo(_))));
    let mut params = Params::new();
    params.set_assignment("ptb-v1.first_home=30").unwrap();
    assert!(PtbV1::from_params(&params).unwrap_err().to_string().contains("first_home"));
}

#[test]
fn quick_cycles_return_when_the_traffic_more_than_doubles_and_compute_bound_cycles_keep_full_sampling() {
    let w = world(2048, 0);
    let (light, heavy) = (all_shared(2), private_slices(200));
    let p = PtbParams { start_cycles: 2, ..PtbParams::default() };
    let mut ptb = PtbV1::new(p.clone());
    // A compute-bound phase, gated, past the start cycles: normal cycles, and the normal period
    // even after quiet_after cycles without moves.
    for _ in 0..6 {
        assert!(ptb.decide(&snap(&w, &light, 8192)).stats.contains_key("gated_compute_bound"));
    }
    assert_eq!(
        ptb.sampling(),
        SamplingRequest::new(SamplingMode::Address { event: SampledEvent::Misses, period: p.period }, p.cycle)
    );
    // The memory-bound phase begins: quick cycles with denser sampling for start_cycles.
    let plan = ptb.decide(&snap(&w, &heavy, 8192));
    assert_eq!(plan.sampling.map(|r| r.cycle), Some(p.start_cycle));
    assert_eq!(ptb.sampling().mode, SamplingMode::Address { event: SampledEvent::Misses, period: p.start_period });
    ptb.decide(&snap(&w, &heavy, 8192));
    assert_eq!(ptb.sampling().cycle, p.start_cycle);
    ptb.decide(&snap(&w, &heavy, 8192));
    assert_eq!(ptb.sampling().cycle, p.cycle, "back to normal after start_cycles");
    // Steady traffic does not bring them back.
    for _ in 0..4 {
        ptb.decide(&snap(&w, &heavy, 8192));
        assert_eq!(ptb.sampling().cycle, p.cycle);
    }
}

#[test]
fn quick_cycles_return_when_most_chunks_change_users() {
    // Private slices, then every thread reads every chunk (pca: means, then a covariance): the
    // traffic barely changes, but the chunks' users do.
    let w = world(2048, 0);
    let (private, shared) = (private_slices(200), all_shared(200));
    let p = PtbParams { start_cycles: 2, ..PtbParams::default() };
    let mut ptb = PtbV1::new(p.clone());
    for _ in 0..4 {
        ptb.decide(&snap(&w, &private, 8192));
    }
    assert_eq!(ptb.sampling().cycle, p.cycle);
    assert!(ptb.table.shifted_share() < 0.01, "a steady phase: {}", ptb.table.shifted_share());
    ptb.decide(&snap(&w, &shared, 8192));
    assert!(ptb.table.shifted_share() > PHASE_SHIFT, "{}", ptb.table.shifted_share());
    assert_eq!(ptb.sampling().cycle, p.start_cycle, "the new phase gets quick cycles");
}

fn thread(m: &Machine, tid: u32, app: u32, cpu: u32) -> ThreadState {
    let c = CpuId(cpu);
    ThreadState { tid, app, cpu: c, node: m.node_of_cpu(c).unwrap(), group: m.group_of_cpu(c).unwrap(), affinity: None }
}

/// The node each thread of a start plan is pinned to, in tid order.
fn start_pins(m: &Machine, allowed: &NodeSet, threads: &[ThreadState], p: PtbParams) -> Vec<(u32, u16)> {
    let sp = PtbV1::new(p).start(&StartContext { machine: m, allowed, threads });
    let mut v: Vec<(u32, u16)> = sp
        .threads
        .iter()
        .map(|t| match t.to {
            crate::plan::ThreadTarget::Node(n) => (t.tid, n.0),
            other => panic!("ptb pins to nodes, got {other:?}"),
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn start_pins_threads_in_blocks_of_neighbours_over_every_allowed_node_with_cpus() {
    let m = synthetic("nodes=4,cpus=4,memonly=1").unwrap();
    // Fork balancing interleaved the threads over the nodes; ptb pins blocks of neighbours.
    let threads: Vec<_> = (0..16u32).map(|i| thread(&m, 100 + i, 0, (i % 4) * 4 + i / 4)).collect();
    let pins = start_pins(&m, &m.all_nodes(), &threads, PtbParams::default());
    let want: Vec<(u32, u16)> = (0..16u32).map(|i| (100 + i, (i / 4) as u16)).collect();
    assert_eq!(pins, want, "the CPU-less node 4 gets no thread");
    // --nodes 1,2: only those nodes' CPUs, 8 threads each.
    let allowed = NodeSet::from_iter([1u32, 2]);
    let pins = start_pins(&m, &allowed, &threads, PtbParams::default());
    assert!(pins.iter().take(8).all(|p| p.1 == 1) && pins.iter().skip(8).all(|p| p.1 == 2), "{pins:?}");
    // Fewer threads than CPUs: spread over every controller, 2 per node.
    let pins = start_pins(&m, &m.all_nodes(), &threads[..8], PtbParams::default());
    assert_eq!(pins.iter().map(|p| p.1).collect::<Vec<_>>(), vec![0, 0, 1, 1, 2, 2, 3, 3]);
    // Off: threads are left to the scheduler.
    assert!(
        start_pins(&m, &m.all_nodes(), &threads, PtbParams { pin_threads: false, ..PtbParams::default() }).is_empty()
    );
    // No allowed node with CPUs (only the memory node): nothing to pin.
    assert!(start_pins(&m, &NodeSet::from_iter([4u32]), &threads, PtbParams::default()).is_empty());
}

#[test]
fn two_programs_get_nodes_of_their_own_and_threads_that_outnumber_the_cpus_are_not_pinned() {
    let m = synthetic("nodes=4,cpus=4").unwrap();
    let mut threads: Vec<_> = (0..8u32).map(|i| thread(&m, 200 + i, 1, i)).collect();
    threads.extend((0..8u32).map(|i| thread(&m, 300 + i, 0, 8 + i)));
    let pins = start_pins(&m, &m.all_nodes(), &threads, PtbParams::default());
    for (tid, node) in pins {
        let app1 = tid < 300;
        assert_eq!(node >= 2, app1, "program 0 (tids 300..) on nodes 0-1, program 1 on 2-3: {tid} on {node}");
    }
    // More threads than CPUs together: left to the scheduler.
    let mut threads: Vec<_> = (0..16u32).map(|i| thread(&m, 200 + i, 1, i)).collect();
    threads.extend((0..16u32).map(|i| thread(&m, 300 + i, 0, i)));
    assert!(start_pins(&m, &m.all_nodes(), &threads, PtbParams::default()).is_empty());
}

#[test]
fn two_threads_each_away_from_its_data_swap_and_no_pages_move_that_cycle() {
    // Pages of chunk 0 on node 0, chunk 1 on node 1 (one region, residency per page).
    let mut w = world(1024, 0);
    for v in 512..1024 {
        w.pages.insert(PageKey { app: 0, vpn: v }, NodeIdx(1));
    }
    w.regions[0].resident = vec![512, 512, 0, 0];
    let mut p = PtbV1::new(PtbParams::default());
    let sp = p.start(&StartContext { machine: &w.m, allowed: &w.allowed, threads: &w.threads });
    assert_eq!(sp.threads.len(), 16);
    // Thread 100 (CPU 0, node 0) uses chunk 1's pages; thread 104 (CPU 4, node 1) chunk 0's;
    // thread 108 (node 2) uses chunk 1's too but nobody on node 1 wants node 2: it stays.
    let mut s = Vec::new();
    for i in 0..1000u64 {
        s.push(sample(0, 512 + i % 512));
        s.push(sample(4, i % 512));
        s.push(sample(8, 512 + (i * 7) % 512));
    }
    let plan = p.decide(&snap(&w, &s, 8192));
    let moved: Vec<_> = plan.threads.iter().map(|t| (t.tid, t.to)).collect();
    use crate::plan::ThreadTarget::Node;
    assert_eq!(moved, vec![(100, Node(NodeIdx(1))), (104, Node(NodeIdx(0)))]);
    assert!(plan.ranges.is_empty() && plan.pages.is_empty(), "a cycle that moves threads moves no pages");
    assert_eq!(plan.stats.get("thread_swaps"), Some(&1.0));
    validate_plan(&plan, &snap(&w, &s, 8192)).unwrap();
    // Without pins nothing moves threads.
    let mut off = PtbV1::new(PtbParams { pin_threads: false, ..PtbParams::default() });
    assert!(off.decide(&snap(&w, &s, 8192)).threads.is_empty());
}

#[test]
fn threads_first_seen_in_a_cycle_are_pinned_where_a_cpu_is_free_and_never_on_a_cpu_less_node() {
    let m = synthetic("nodes=2,cpus=2,memonly=1").unwrap();
    let mut w = world(512, 0);
    w.m = m.clone();
    w.allowed = m.all_nodes();
    w.free = vec![1 << 34; 3];
    w.regions[0].resident = vec![512, 0, 0];
    // Three threads on node 0's two CPUs and one on node 1.
    w.threads = vec![thread(&m, 100, 0, 0), thread(&m, 101, 0, 1), thread(&m, 102, 0, 1), thread(&m, 103, 0, 2)];
    let mut p = PtbV1::new(PtbParams::default());
    let plan = p.decide(&snap(&w, &[], 8192));
    use crate::plan::ThreadTarget::Node;
    let mut got: Vec<_> = plan.threads.iter().map(|t| (t.tid, t.to)).collect();
    got.sort_by_key(|x| x.0);
    assert_eq!(
        got,
        vec![(100, Node(NodeIdx(0))), (101, Node(NodeIdx(0))), (102, Node(NodeIdx(1))), (103, Node(NodeIdx(1)))]
    );
    validate_plan(&plan, &snap(&w, &[], 8192)).unwrap();
    // Pinned threads are not pinned again.
    assert!(p.decide(&snap(&w, &[], 8192)).threads.is_empty());
}

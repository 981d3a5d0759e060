use super::test_world::World;
use super::*;
use ptb_profile::SampleKind::HintFault;

fn policy() -> AutoNuma {
    AutoNuma::from_params(&Params::new()).unwrap()
}

/// Pages last faulted by task `tid` from `node` (the kernel's per-page cpupid), as after an
/// earlier scan pass: a fault from another node is then held back by the two-fault filter.
fn seed_last(p: &mut AutoNuma, app: AppId, vpns: std::ops::Range<u64>, tid: Tid, node: u16) {
    for vpn in vpns {
        p.last.insert(PageKey { app, vpn }, (tid, node));
    }
}

/// Run one cycle: decide, check the plan's invariants, apply it.
fn cycle(p: &mut AutoNuma, w: &mut World) -> Plan {
    let plan = p.decide(&w.snap());
    let s = plan.sampling.expect("autonuma always states its scan period");
    match s.mode {
        SamplingMode::HintFaults { scan_period, .. } => {
            // Decisions come once per scan period, and at least once a second (task moves
            // are retried that often); periods are per scan window, so they may be shorter
            // than the tunable minimum, never longer than the maximum.
            assert_eq!(s.cycle, scan_period.min(RETRY));
            assert!(scan_period <= p.t.scan_period_max);
        }
        other => panic!("autonuma must ask for hinting faults, got {other:?}"),
    }
    w.cycle = s.cycle;
    w.apply(&plan);
    plan
}

#[test]
fn first_scan_after_the_delay_and_tunables_from_params() {
    let p = policy();
    let r = p.sampling();
    assert_eq!(r.cycle, Duration::from_millis(1000));
    assert_eq!(r.mode, SamplingMode::HintFaults { scan_bytes: 256 << 20, scan_period: Duration::from_millis(1000) });

    let mut ps = Params::new();
    ps.set_assignment("autonuma.scan_size_mb=512").unwrap();
    ps.set_assignment("autonuma.scan_delay_ms=2500").unwrap();
    let r = AutoNuma::from_params(&ps).unwrap().sampling();
    assert_eq!(r.cycle, RETRY, "decisions at least once a second");
    assert_eq!(r.mode, SamplingMode::HintFaults { scan_bytes: 512 << 20, scan_period: Duration::from_millis(2500) });

    for bad in ["autonuma.scan_size_mb=0", "autonuma.bogus=1", "autonuma.scan_period_min_ms=x"] {
        let mut ps = Params::new();
        ps.set_assignment(bad).unwrap();
        assert!(AutoNuma::from_params(&ps).is_err(), "{bad} accepted");
    }
    let mut ps = Params::new();
    ps.set_assignment("autonuma.scan_period_min_ms=5000").unwrap();
    ps.set_assignment("autonuma.scan_period_max_ms=4000").unwrap();
    let e = AutoNuma::from_params(&ps).unwrap_err().to_string();
    assert!(e.contains("scan_period_min_ms"), "{e}");
}

#[test]
fn no_faults_before_the_first_scan_keeps_the_minimum_period() {
    // The first cycle ends with the scan delay, before any scan produced faults: the period
    // must not double as it would for an idle task.
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.place(0, 0..8, 0);
    let mut ps = Params::new();
    ps.set_assignment("autonuma.scan_period_min_ms=700").unwrap();
    let mut p = AutoNuma::from_params(&ps).unwrap();
    cycle(&mut p, &mut w);
    assert_eq!(p.period, Duration::from_millis(700));
    // The first fault of a new scan pass places the task before the fault is counted
    // (`task_numa_fault` calls `task_numa_placement` first): an empty pass, so the period
    // doubles, as for an idle task.
    w.touch(1, 0, HintFault);
    cycle(&mut p, &mut w);
    assert_eq!(p.period, Duration::from_millis(1400));
    // No fault, no placement: the period stays.
    cycle(&mut p, &mut w);
    assert_eq!(p.period, Duration::from_millis(1400));
}

#[test]
fn single_private_thread_gets_its_pages_in_3_13() {
    // A lone task whose memory is on an empty node: 3.13's load check refuses the move (0
    // tasks left vs 1: beyond imbalance_pct; later kernels allow moves that do not worsen the
    // imbalance), so its pages come to it through the filter (never-faulted pages pass).
    let mut w = World::synthetic("nodes=4,cpus=4");
    w.add_thread(1, 0, 0); // node 0
    w.place(0, 0..64, 1); // all its data on node 1
    let mut p = policy();
    cycle(&mut p, &mut w); // the scan delay
    for _ in 0..3 {
        (0..64).for_each(|v| w.touch(1, v, HintFault));
        cycle(&mut p, &mut w);
    }
    assert_eq!(w.node_of(1), NodeIdx(0));
    assert!((0..64).all(|v| w.page_node(0, v) == Some(NodeIdx(0))), "the pages follow the thread");
}

#[test]
fn thread_follows_its_memory_when_loads_stay_balanced() {
    // Three tasks on node 0, one on node 1; task 1's memory is on node 1. Moving it leaves
    // 2 and 2: the thread moves, and its pages stay.
    let mut w = World::synthetic("nodes=2,cpus=4");
    for (tid, cpu) in [(1, 0), (2, 1), (3, 2), (4, 4)] {
        w.add_thread(tid, 0, cpu);
    }
    w.place(0, 0..64, 1);
    w.place(0, 100..164, 0);
    let mut p = policy();
    seed_last(&mut p, 0, 0..64, 4, 1);
    cycle(&mut p, &mut w); // the scan delay
    for _ in 0..3 {
        (0..64).for_each(|v| w.touch(1, v, HintFault));
        (0..64).for_each(|v| w.touch(2, 100 + v, HintFault));
        cycle(&mut p, &mut w);
        if w.node_of(1) == NodeIdx(1) {
            break;
        }
    }
    assert_eq!(w.node_of(1), NodeIdx(1), "the thread follows its memory");
    assert!((0..64).all(|v| w.page_node(0, v) == Some(NodeIdx(1))));
}

#[test]
fn pages_follow_when_the_preferred_node_is_full() {
    // Node 1 is full of threads that are local there; thread 1 cannot move nor swap with
    // a gain, so its pages come to it instead.
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.add_thread(2, 1, 2);
    w.add_thread(3, 2, 3);
    w.place(0, 0..32, 1);
    w.place(1, 0..32, 1);
    w.place(2, 0..32, 1);
    let mut p = policy();
    for _ in 0..4 {
        for v in 0..32 {
            w.touch(1, v, HintFault);
            w.touch(2, v, HintFault);
            w.touch(3, v, HintFault);
        }
        cycle(&mut p, &mut w);
    }
    assert_eq!(w.node_of(1), NodeIdx(0));
    assert_eq!((w.node_of(2), w.node_of(3)), (NodeIdx(1), NodeIdx(1)));
    assert!((0..32).all(|v| w.page_node(0, v) == Some(NodeIdx(0))), "pages of the stuck thread move to it");
    assert!((0..32).all(|v| w.page_node(1, v) == Some(NodeIdx(1))));
}

#[test]
fn tasks_swap_when_both_gain() {
    // 2 nodes x 2 CPUs, one task on each node, each with its memory on the other node. The
    // preferred node has room (3.13 searches it only then); the swap gains for both.
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.add_thread(2, 1, 2);
    w.place(0, 0..16, 1);
    w.place(1, 0..16, 0);
    let mut p = policy();
    // Each node's pages were last faulted from their own node (by other tasks), so the first
    // remote faults do not move them.
    seed_last(&mut p, 0, 0..16, 8, 1);
    seed_last(&mut p, 1, 0..16, 9, 0);
    cycle(&mut p, &mut w); // the scan delay: the first pass starts
    let (mut swaps, mut pages) = (0.0, 0);
    // The first pass places the tasks before counting a fault; the second places them by
    // their faults and swaps them.
    for _ in 0..2 {
        (0..16).for_each(|v| {
            w.touch(1, v, HintFault);
            w.touch(2, v, HintFault);
        });
        let plan = cycle(&mut p, &mut w);
        swaps += plan.stats["task_swaps"];
        pages += plan.pages.len();
    }
    assert_eq!(swaps, 1.0);
    assert_eq!(pages, 0);
    assert_eq!((w.node_of(1), w.node_of(2)), (NodeIdx(1), NodeIdx(0)));
}

#[test]
fn two_fault_filter_stops_ping_pong_of_shared_pages() {
    let mut w = World::synthetic("nodes=4,cpus=4");
    w.add_thread(1, 0, 0); // node 0
    w.add_thread(2, 0, 4); // node 1
    w.place(0, 0..16, 0); // thread 1's data
    w.place(0, 100..116, 1); // thread 2's data
    w.place(0, 500..502, 1); // shared pages on thread 2's node
    let mut p = policy();
    for c in 0..8 {
        for v in 0..16 {
            w.touch(1, v, HintFault);
            w.touch(2, 100 + v, HintFault);
        }
        // Page 500: touched alternately from nodes 1 and 0: never two in a row from node 0.
        if c >= 5 {
            w.touch(2, 500, HintFault);
            w.touch(1, 500, HintFault);
        }
        // Page 501: after the early scans, touched twice in a row from node 0.
        if c >= 6 {
            w.touch(2, 501, HintFault);
            w.touch(1, 501, HintFault);
            w.touch(1, 501, HintFault);
        }
        let plan = cycle(&mut p, &mut w);
        if c >= 5 {
            assert!(plan.threads.is_empty(), "each task is already on its preferred node");
        }
    }
    assert_eq!(p.groups.count(), 1, "tasks sharing pages form one numa group");
    assert_eq!(w.page_node(0, 500), Some(NodeIdx(1)), "alternating faults never pass the filter");
    assert_eq!(w.page_node(0, 501), Some(NodeIdx(0)), "two consecutive faults from node 0 move the page");
}

#[test]
fn scan_period_grows_when_local_and_shrinks_when_remote() {
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.place(0, 0..8, 0);
    let mut p = policy();
    let mut last = Duration::ZERO;
    let first = p.period;
    for _ in 0..6 {
        (0..8).for_each(|v| w.touch(1, v, HintFault));
        cycle(&mut p, &mut w);
        assert!(p.period >= last, "all-local faults never shorten the period");
        last = p.period;
    }
    assert!(last > first * 2, "all-local faults lengthen the period ({first:?} -> {last:?})");
    // Data suddenly remote and the thread cannot follow (other node full of local threads).
    w.add_thread(2, 1, 2);
    w.add_thread(3, 2, 3);
    w.place(1, 0..8, 1);
    w.place(2, 0..8, 1);
    w.place(0, 0..8, 1);
    let before = p.period;
    let mut remote = 0.0;
    // Placement (and the period's update) comes at the first fault of the next scan pass.
    for _ in 0..3 {
        for v in 0..8 {
            w.touch(1, v, HintFault);
            w.touch(2, v, HintFault);
            w.touch(3, v, HintFault);
        }
        remote += cycle(&mut p, &mut w).stats["faults_remote"];
    }
    assert!(p.period < before, "mostly remote faults shorten the period ({before:?} -> {:?})", p.period);
    assert!(remote > 0.0);
}

#[test]
fn plans_stay_valid_on_random_fault_streams() {
    // Invariants over a pseudo-random workload: every plan validates (World::apply checks),
    // no thread is moved twice in one plan, no node gets more threads than CPUs.
    let mut w = World::synthetic("nodes=4,cpus=2,mem=1");
    for t in 0..8u32 {
        w.add_thread(t + 1, t % 2, t);
    }
    w.place(0, 0..200, 0);
    w.place(1, 0..200, 3);
    let mut p = policy();
    let mut x: u64 = 12345;
    for _ in 0..20 {
        for _ in 0..150 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let tid = ((x >> 33) % 8) as u32 + 1;
            w.touch(tid, (x >> 20) % 200, HintFault);
        }
        let plan = cycle(&mut p, &mut w);
        let mut tids: Vec<Tid> = plan.threads.iter().map(|t| t.tid).collect();
        tids.sort_unstable();
        tids.dedup();
        assert_eq!(tids.len(), plan.threads.len());
        for n in 0..4u16 {
            assert!(w.threads.iter().filter(|t| t.node == NodeIdx(n)).count() <= 2);
        }
    }
}

#[test]
fn pin_moves_chooses_the_thread_target() {
    for (pin, unpinned) in [("true", false), ("false", true)] {
        let mut w = World::synthetic("nodes=2,cpus=4");
        for (tid, cpu) in [(1, 0), (2, 1), (3, 2), (4, 4)] {
            w.add_thread(tid, 0, cpu);
        }
        w.place(0, 0..64, 1);
        let mut ps = Params::new();
        ps.set_assignment(&format!("autonuma.pin_moves={pin}")).unwrap();
        let mut p = AutoNuma::from_params(&ps).unwrap();
        seed_last(&mut p, 0, 0..64, 4, 1);
        cycle(&mut p, &mut w);
        let mut targets = Vec::new();
        for _ in 0..3 {
            (0..64).for_each(|v| w.touch(1, v, HintFault));
            targets.extend(cycle(&mut p, &mut w).threads.into_iter().map(|t| t.to));
        }
        assert!(!targets.is_empty());
        assert!(targets.iter().all(|t| matches!(t, ThreadTarget::Preferred(_)) == unpinned), "{targets:?}");
    }
}

#[test]
fn a_task_whose_preferred_node_is_its_own_is_told_so_without_a_move() {
    for pin in [false, true] {
        // Task 1 runs on node 0 and every page it faults on is there: its preferred node becomes
        // node 0, where it already runs.
        let mut w = World::synthetic("nodes=2,cpus=4");
        w.add_thread(1, 0, 0);
        w.add_thread(2, 0, 4);
        w.place(0, 0..64, 0);
        let mut ps = Params::new();
        ps.set_assignment(&format!("autonuma.pin_moves={pin}")).unwrap();
        let mut p = AutoNuma::from_params(&ps).unwrap();
        cycle(&mut p, &mut w);
        let mut told = Vec::new();
        for _ in 0..3 {
            (0..64).for_each(|v| w.touch(1, v, HintFault));
            told.extend(cycle(&mut p, &mut w).threads.into_iter().filter(|t| t.tid == 1));
        }
        assert_eq!(p.tasks[&1].preferred, Some(0));
        assert_eq!(w.node_of(1), NodeIdx(0), "never moved");
        // Unpinned, the plan carries the preferred node (once: it changed once); pinned, a task
        // that does not move is not in the plan.
        let want = if pin { vec![] } else { vec![ThreadMove { tid: 1, to: ThreadTarget::Preferred(NodeIdx(0)) }] };
        assert_eq!(told, want, "pin_moves={pin}");
    }
}

use super::test_world::World;
use super::*;
use ptb_profile::SampleKind::HintFault;

fn policy() -> AutoNuma {
    AutoNuma::from_params(&Params::new()).unwrap()
}

/// Run one cycle: decide, check the plan's invariants, apply it.
fn cycle(p: &mut AutoNuma, w: &mut World) -> Plan {
    let plan = p.decide(&w.snap());
    let s = plan.sampling.expect("autonuma always states its scan period");
    match s.mode {
        SamplingMode::HintFaults { scan_period, .. } => {
            assert_eq!(scan_period, s.cycle);
            assert!(scan_period >= p.t.scan_period_min && scan_period <= p.t.scan_period_max);
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
    assert_eq!(r.cycle, Duration::from_millis(2500));
    assert!(matches!(r.mode, SamplingMode::HintFaults { scan_bytes, .. } if scan_bytes == 512 << 20));

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
    // Once faults have been seen, a cycle without any doubles it (idle task).
    w.touch(1, 0, HintFault);
    cycle(&mut p, &mut w);
    let after_local = p.period;
    cycle(&mut p, &mut w);
    assert_eq!(p.period, (after_local * 2).min(p.t.scan_period_max));
}

#[test]
fn single_private_thread_converges_to_local_by_moving_the_thread() {
    let mut w = World::synthetic("nodes=4,cpus=4");
    w.add_thread(1, 0, 0); // node 0
    w.place(0, 0..64, 1); // all its data on node 1
    let mut p = policy();
    for _ in 0..3 {
        (0..64).for_each(|v| w.touch(1, v, HintFault));
        cycle(&mut p, &mut w);
    }
    assert_eq!(w.node_of(1), NodeIdx(1), "the thread follows its memory");
    assert!(
        (0..64).all(|v| w.page_node(0, v) == Some(NodeIdx(1))),
        "given the choice, the thread moves, not the pages"
    );
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
    let mut w = World::synthetic("nodes=2,cpus=1");
    w.add_thread(1, 0, 0);
    w.add_thread(2, 1, 1);
    w.place(0, 0..16, 1);
    w.place(1, 0..16, 0);
    let mut p = policy();
    (0..16).for_each(|v| {
        w.touch(1, v, HintFault);
        w.touch(2, v, HintFault);
    });
    let plan = cycle(&mut p, &mut w);
    assert_eq!(plan.stats["task_swaps"], 1.0);
    assert!(plan.pages.is_empty());
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
    assert_eq!(p.groups.members().len(), 1, "tasks sharing pages form one numa group");
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
    for _ in 0..5 {
        (0..8).for_each(|v| w.touch(1, v, HintFault));
        cycle(&mut p, &mut w);
        assert!(p.period > last, "all-local faults lengthen the period");
        last = p.period;
    }
    // Data suddenly remote and the thread cannot follow (other node full of local threads).
    w.add_thread(2, 1, 2);
    w.add_thread(3, 2, 3);
    w.place(1, 0..8, 1);
    w.place(2, 0..8, 1);
    w.place(0, 0..8, 1);
    for v in 0..8 {
        w.touch(1, v, HintFault);
        w.touch(2, v, HintFault);
        w.touch(3, v, HintFault);
    }
    let before = p.period;
    let plan = cycle(&mut p, &mut w);
    assert!(p.period < before, "mostly remote faults shorten the period ({before:?} -> {:?})", p.period);
    assert!(plan.stats["faults_remote"] > 0.0);
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

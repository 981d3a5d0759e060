use super::*;
use crate::autonuma::test_world::World;
use crate::plan::{PageMove, ThreadMove, ThreadTarget};
use crate::SampledEvent;
use ptb_profile::SampleKind::Load;
use std::collections::BTreeSet;

fn policy(sets: &[&str]) -> Selective {
    let mut p = Params::new();
    sets.iter().for_each(|s| p.set_assignment(s).unwrap());
    Selective::from_params(&p).unwrap()
}

fn step(p: &mut dyn Policy, w: &mut World) -> Plan {
    let plan = p.decide(&w.snap());
    w.apply(&plan);
    plan
}

#[test]
fn never_migrates_a_region_seen_only_once() {
    // Thread on node 0 streams through fresh remote pages every epoch.
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.place(0, 0..10_000, 1);
    let mut p = policy(&[]);
    for e in 0..10u64 {
        (0..20).for_each(|i| w.touch(1, e * 500 + i * 3, Load));
        let plan = step(&mut p, &mut w);
        assert!(plan.ranges.is_empty() && plan.pages.is_empty(), "epoch {e}: {plan:?}");
        assert_eq!(plan.stats["regions_not_recurring"], plan.stats["regions_seen"]);
    }
    // The same object twice (same first page): held in the first epoch, moved (gaps filled,
    // the larger extent) in the second; the one-off pages 7020 and 7030 stay.
    let mut p = policy(&[]);
    [7000, 7001, 7003, 7004, 7005, 7020].iter().for_each(|&v| w.touch(1, v, Load));
    assert!(step(&mut p, &mut w).ranges.is_empty());
    [7000, 7002, 7004, 7005, 7030].iter().for_each(|&v| w.touch(1, v, Load));
    let plan = step(&mut p, &mut w);
    assert_eq!(plan.ranges.len(), 1);
    let r = &plan.ranges[0];
    assert_eq!((r.start_vpn, r.npages, &r.op), (7000, 6, &RangeOp::MoveTo(NodeIdx(0))));
    assert!((7000..7006).all(|v| w.page_node(0, v) == Some(NodeIdx(0))), "filled-in pages move together");
    assert_eq!((w.page_node(0, 7020), w.page_node(0, 7030)), (Some(NodeIdx(1)), Some(NodeIdx(1))));
}

#[test]
fn destination_is_the_node_accessing_most() {
    let mut w = World::synthetic("nodes=4,cpus=2");
    w.add_thread(1, 0, 0); // node 0
    w.add_thread(2, 0, 4); // node 2
    w.place(0, 0..8, 1);
    let mut p = policy(&["selective.balance=4"]);
    for _ in 0..2 {
        (0..8).for_each(|v| w.touch(2, v, Load));
        (0..8).step_by(4).for_each(|v| w.touch(1, v, Load));
        step(&mut p, &mut w);
    }
    assert!((0..8).all(|v| w.page_node(0, v) == Some(NodeIdx(2))));
}

#[test]
fn balance_holds_moves_that_would_make_a_new_hot_spot() {
    // Node 0's threads use a local region L (40 samples) and remote regions A (node 1) and
    // B (node 2), 30 samples each. Cap = 1.5/4 of 100 = 38: moving A or B to node 0 would
    // raise it to 70 > max(38, 40): both held. With balance = 4 both move.
    let run = |sets: &[&str]| -> (Plan, World) {
        let mut w = World::synthetic("nodes=4,cpus=2");
        w.add_thread(1, 0, 0);
        w.place(0, 0..40, 0);
        w.place(0, 1000..1030, 1);
        w.place(0, 2000..2030, 2);
        let mut p = policy(sets);
        let mut last = Plan::default();
        for _ in 0..2 {
            (0..40).chain(1000..1030).chain(2000..2030).for_each(|v| w.touch(1, v, Load));
            last = step(&mut p, &mut w);
        }
        (last, w)
    };
    let (plan, w) = run(&[]);
    assert!(plan.ranges.is_empty(), "{plan:?}");
    // A and B held; L too (its node is above the cap, but nobody else uses it).
    assert_eq!(plan.stats["regions_held_for_balance"], 3.0);
    assert_eq!(w.page_node(0, 1000), Some(NodeIdx(1)));
    let (plan, w) = run(&["selective.balance=4"]);
    assert_eq!(plan.ranges.len(), 2);
    assert_eq!(w.page_node(0, 2029), Some(NodeIdx(0)));
}

#[test]
fn highest_counter_first_within_the_page_budget() {
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.place(0, 0..100, 1);
    w.place(0, 1000..1100, 1);
    let mut p = policy(&["selective.max_pages=100", "selective.balance=2"]);
    // Region A (0..100) seen in epochs 1-3, region B (1000..1100) in epochs 2-3.
    for e in 0..3 {
        (0..100).step_by(10).for_each(|v| w.touch(1, v, Load));
        w.touch(1, 99, Load);
        if e >= 1 {
            (1000..1100).step_by(10).for_each(|v| w.touch(1, v, Load));
            w.touch(1, 1099, Load);
        }
        // Plans of the first two epochs are not applied: only the history matters here.
        if e < 2 {
            let _ = p.decide(&w.snap());
            w.samples.clear();
            continue;
        }
        let plan = step(&mut p, &mut w);
        assert_eq!(plan.ranges.len(), 1, "{plan:?}");
        assert_eq!(plan.ranges[0].start_vpn, 0, "the region seen 3 times goes first");
        assert!(plan.stats["pages_moved"] <= 100.0);
    }
}

struct Fixed(Plan);
impl Policy for Fixed {
    fn name(&self) -> String {
        "fake".into()
    }
    fn start(&mut self, _: &StartContext) -> StartPlan {
        StartPlan::default()
    }
    fn sampling(&self) -> SamplingRequest {
        SamplingRequest::new(
            SamplingMode::Address { event: SampledEvent::SlowLoads, period: 100 },
            Duration::from_millis(100),
        )
    }
    fn decide(&mut self, _: &Snapshot) -> Plan {
        self.0.clone()
    }
}

#[test]
fn filter_keeps_only_page_moves_of_recurring_regions() {
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.place(0, 0..1000, 1);
    let pk = |vpn| PageKey { app: 0, vpn };
    let inner = Plan {
        threads: vec![ThreadMove { tid: 1, to: ThreadTarget::Node(NodeIdx(0)) }],
        pages: [5, 6, 500].iter().map(|&v| PageMove { page: pk(v), to: NodeIdx(0) }).collect(),
        ..Plan::default()
    };
    let mut f = SelectiveFilter::wrap(Box::new(Fixed(inner)), &Params::new()).unwrap();
    assert_eq!(f.name(), "fake+selective");
    // Epoch 1: pages 4..8 and 500 seen once: every page move dropped, thread move kept.
    [4, 5, 7, 500].iter().for_each(|&v| w.touch(1, v, Load));
    let plan = f.decide(&w.snap());
    assert!(plan.pages.is_empty());
    assert_eq!(plan.threads.len(), 1);
    assert_eq!(plan.stats["selective_pages_dropped"], 3.0);
    w.samples.clear();
    // Epoch 2: only 4..8 recurs.
    [4, 6, 7].iter().for_each(|&v| w.touch(1, v, Load));
    let plan = f.decide(&w.snap());
    let kept: Vec<u64> = plan.pages.iter().map(|p| p.page.vpn).collect();
    assert_eq!(kept, vec![5, 6]);
    crate::validate_plan(&plan, &w.snap()).unwrap();
}

#[test]
fn plans_validate_and_respect_the_budget_on_random_samples() {
    let mut w = World::synthetic("nodes=4,cpus=2,mem=1");
    for t in 0..8u32 {
        w.add_thread(t + 1, 0, t);
    }
    w.place(0, 0..4000, 3);
    w.region(0, 0, 2000);
    w.region(0, 2000, 2000);
    let mut p = policy(&["selective.max_pages=300"]);
    let mut x: u64 = 99;
    for _ in 0..30 {
        for _ in 0..200 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let hot = !(x >> 40).is_multiple_of(4);
            let vpn = if hot { (x >> 20) % 400 } else { (x >> 20) % 4000 };
            w.touch(((x >> 33) % 8) as u32 + 1, vpn, Load);
        }
        let plan = step(&mut p, &mut w); // validates
        assert!(plan.ranges.iter().map(|r| r.npages).sum::<u64>() <= 300);
        for r in &plan.ranges {
            let inside = |v: u64| if v < 2000 { 0 } else { 1 };
            assert_eq!(inside(r.start_vpn), inside(r.start_vpn + r.npages - 1), "regions respect mappings");
        }
    }
}

#[test]
fn parameters_are_checked() {
    for bad in ["selective.balance=0.5", "selective.nope=1", "selective.max_age=-1"] {
        let mut p = Params::new();
        p.set_assignment(bad).unwrap();
        assert!(Selective::from_params(&p).is_err(), "{bad} accepted");
    }
    let p = policy(&["selective.epoch_ms=250"]);
    assert_eq!(p.sampling().cycle, Duration::from_millis(250));
}

#[test]
fn evenly_shared_regions_do_not_ping_pong_but_leave_a_hot_spot() {
    // Two nodes; one region used equally by both nodes' threads, on node 0 (100% of the
    // load, cap 75%): moving it anywhere keeps 100% on one node, so it stays put.
    let mut w = World::synthetic("nodes=2,cpus=2");
    w.add_thread(1, 0, 0);
    w.add_thread(2, 0, 2);
    w.place(0, 0..20, 0);
    let mut p = policy(&[]);
    for e in 0..6 {
        for v in 0..20 {
            w.touch(1 + (v as u32 + e) % 2, v, Load);
        }
        let plan = step(&mut p, &mut w);
        assert!(plan.ranges.is_empty(), "epoch {e}: {plan:?}");
    }
    // Four nodes, two regions used evenly by all, both on node 0 (a hot spot): one of them
    // moves off, to a node that stays below the cap, and then stays there.
    let mut w = World::synthetic("nodes=4,cpus=1");
    for n in 0..4u32 {
        w.add_thread(n + 1, 0, n);
    }
    w.place(0, 0..8, 0);
    w.place(0, 100..108, 0);
    let mut p = policy(&[]);
    let mut moves = 0;
    for e in 0..6u32 {
        for v in (0..8).chain(100..108) {
            w.touch(1 + (v as u32 + e) % 4, v, Load);
        }
        moves += step(&mut p, &mut w).ranges.len();
    }
    let nodes: BTreeSet<u16> = [0u64, 100].iter().map(|&v| w.page_node(0, v).unwrap().0).collect();
    assert_eq!(nodes.len(), 2, "the hot spot was relieved");
    assert!(moves <= 2, "{moves} moves: evenly shared regions must not ping-pong");
}

use super::*;
use crate::autonuma::test_world::World;
use crate::plan::{RangeAction, RangeOp};
use ptb_profile::SampleKind::Load;
use ptb_profile::Tid;
use ptb_topology::End;

fn policy(sets: &[&str]) -> AsymSched {
    let mut p = Params::new();
    sets.iter().for_each(|s| p.set_assignment(s).unwrap());
    AsymSched::from_params(&p).unwrap()
}

/// 8 nodes x 8 CPUs, a full mesh of 2 GB/s links except a fast triangle 2-5-7 at 6 GB/s.
fn asymmetric_world() -> World {
    let mut m = ptb_topology::synthetic::synthetic("nodes=8,cpus=8,remote=2").unwrap();
    let group = |n: u16| End::Group(m.node(NodeIdx(n)).groups[0]);
    let fast: Vec<(End, End)> = [(2, 5), (5, 7), (2, 7)].iter().map(|&(a, b)| (group(a), group(b))).collect();
    for l in &mut m.links {
        if fast.iter().any(|&(a, b)| (l.a == a && l.b == b) || (l.a == b && l.b == a)) {
            l.gbps_ab = 6.0;
            l.gbps_ba = 6.0;
        }
    }
    World::new(m)
}

/// Pin every thread to its node, as an earlier AsymSched plan would have.
fn pin_all(w: &mut World) {
    for t in &mut w.threads {
        t.affinity = Some(w.machine.node(t.node).cpus.clone());
    }
}

/// One app of 24 threads on `nodes` (8 each), each node holding 300 pages; every thread reads
/// pages of all three nodes (link-heavy sharing).
fn link_heavy_on(w: &mut World, nodes: [u32; 3]) {
    for (i, node) in nodes.iter().enumerate() {
        for k in 0..8 {
            w.add_thread(100 + i as u32 * 8 + k, 7, node * 8 + k);
        }
        w.place(7, i as u64 * 1000..i as u64 * 1000 + 300, *node as u16);
        w.region(7, i as u64 * 1000, 300);
    }
    w.now = Duration::from_secs(100);
}

fn touch_all(w: &mut World, per_region: u64) {
    let tids: Vec<Tid> = w.threads.iter().map(|t| t.tid).collect();
    for t in tids {
        for r in 0..3u64 {
            for k in 0..per_region {
                w.touch(t, r * 1000 + (k * 37 + t as u64) % 300, Load);
            }
        }
    }
}

fn nodes_used(w: &World) -> BTreeSet<u16> {
    w.threads.iter().map(|t| t.node.0).collect()
}

#[test]
fn picks_the_highest_bandwidth_subset_scoring_each_set_once() {
    let mut w = asymmetric_world();
    link_heavy_on(&mut w, [0, 1, 3]);
    touch_all(&mut w, 10);
    let mut p = policy(&[]);
    let plan = p.decide(&w.snap());
    let st = &plan.stats;
    assert_eq!(st["placements_total"], 336.0);
    assert!(st["placements_evaluated"] <= 56.0, "{st:?}");
    assert_eq!(st["placements_skipped"], 336.0 - st["placements_evaluated"]);
    w.apply(&plan);
    assert_eq!(nodes_used(&w), BTreeSet::from([2, 5, 7]), "{plan:?}");
    // 8 threads per node: clusters stay whole.
    for n in [2u16, 5, 7] {
        assert_eq!(w.threads.iter().filter(|t| t.node.0 == n).count(), 8);
    }
}

#[test]
fn good_enough_placement_stays_and_nothing_moves() {
    // Already on the fast triangle and pinned: the current placement is kept, nothing moves.
    let mut w = asymmetric_world();
    link_heavy_on(&mut w, [2, 5, 7]);
    pin_all(&mut w);
    touch_all(&mut w, 10);
    let mut p = policy(&[]);
    let plan = p.decide(&w.snap());
    assert!(plan.threads.is_empty(), "{plan:?}");
    assert!(plan.ranges.is_empty());
}

#[test]
fn unpinned_threads_are_pinned_where_they_are_when_that_is_best() {
    // Linux would keep moving them: AsymSched sets their affinity even when no thread moves.
    let mut w = asymmetric_world();
    link_heavy_on(&mut w, [2, 5, 7]);
    touch_all(&mut w, 10);
    let plan = policy(&[]).decide(&w.snap());
    assert_eq!(plan.threads.len(), 24);
    for mv in &plan.threads {
        let here = w.threads.iter().find(|t| t.tid == mv.tid).unwrap().node;
        assert_eq!(mv.to, ThreadTarget::Node(here));
    }
}

#[test]
fn budget_blocks_a_costly_move_early_in_the_run_and_no_page_moves_before_placement() {
    let mut w = asymmetric_world();
    link_heavy_on(&mut w, [0, 1, 3]);
    w.now = Duration::from_millis(10);
    touch_all(&mut w, 10);
    // 900 pages at 1000 s/GB: 3.7 s predicted, budget 5% of 10 ms.
    let mut p = policy(&["asymsched.s_per_gb=1000"]);
    let plan = p.decide(&w.snap());
    assert_eq!(plan.stats["budget_skipped"], 1.0);
    assert!(plan.threads.is_empty());
    assert!(plan.pages.is_empty(), "the app is not placed yet: its pages wait");
    assert!(plan.stats["migration_spent_s"] <= 0.05 * 0.010 + 1e-12);
}

#[test]
fn migration_time_never_exceeds_the_budget() {
    // A link-heavy app with all its memory on one node, over several cycles with a costly
    // migration: spent migration time stays within 5% of the run so far at every cycle.
    let mut w = asymmetric_world();
    for k in 0..24u32 {
        w.add_thread(100 + k, 7, (k % 8) * 8 + k / 8);
    }
    w.place(7, 0..3000, 0);
    w.region(7, 0, 3000);
    let mut p = policy(&["asymsched.s_per_gb=20"]);
    let mut moved = 0;
    for cycle in 1..=8u64 {
        w.now = Duration::from_secs(cycle);
        let tids: Vec<Tid> = w.threads.iter().map(|t| t.tid).collect();
        for (i, t) in tids.iter().enumerate() {
            (0..60u64).for_each(|k| w.touch(*t, (k * 53 + i as u64 * 7 + cycle * 11) % 3000, Load));
        }
        let plan = p.decide(&w.snap());
        assert!(plan.stats["migration_spent_s"] <= 0.05 * cycle as f64 + 1e-9, "cycle {cycle}: {:?}", plan.stats);
        moved += plan.pages.len();
        w.apply(&plan);
        w.now = Duration::from_secs(cycle);
    }
    assert!(moved > 0, "within the budget, pages do move");
    assert_eq!(nodes_used(&w), BTreeSet::from([2, 5, 7]));
}

#[test]
fn dynamic_migration_sends_private_pages_to_their_user_and_spreads_shared_ones() {
    // One CPU per node: the two threads need two nodes; they are on nodes 0 and 1 and their
    // memory too, so the placement stays. Pages 0-3 are used by thread 1 only but live on node
    // 1; pages 4-11 are shared and all on node 0.
    let mut w = World::synthetic("nodes=4,cpus=1");
    w.add_thread(1, 0, 0);
    w.add_thread(2, 0, 1);
    pin_all(&mut w);
    w.place(0, 0..4, 1);
    w.place(0, 4..12, 0);
    w.now = Duration::from_secs(1000);
    for _ in 0..2 {
        (0..4).for_each(|v| w.touch(1, v, Load));
    }
    (4..12).for_each(|v| {
        w.touch(1, v, Load);
        w.touch(2, v, Load);
    });
    let mut p = policy(&[]);
    let plan = p.decide(&w.snap());
    assert!(plan.threads.is_empty(), "{plan:?}");
    w.apply(&plan);
    assert!((0..4).all(|v| w.page_node(0, v) == Some(NodeIdx(0))), "private pages follow their user");
    let shared: Vec<u16> = (4..12).map(|v| w.page_node(0, v).unwrap().0).collect();
    assert!(shared.contains(&0) && shared.contains(&1), "shared pages spread: {shared:?}");
    // Balanced now: the next cycle with the same use moves nothing.
    for _ in 0..2 {
        (0..4).for_each(|v| w.touch(1, v, Load));
    }
    (4..12).for_each(|v| {
        w.touch(1, v, Load);
        w.touch(2, v, Load);
    });
    let plan = p.decide(&w.snap());
    assert!(plan.pages.is_empty(), "no page bounces once spread: {:?}", plan.pages);
}

#[test]
fn one_sample_from_one_node_does_not_move_a_page() {
    let mut w = World::synthetic("nodes=4,cpus=1");
    w.add_thread(1, 0, 0);
    w.add_thread(2, 0, 1);
    pin_all(&mut w);
    w.place(0, 0..4, 1);
    w.place(0, 100..104, 0);
    w.now = Duration::from_secs(1000);
    (0..4).for_each(|v| w.touch(1, v, Load));
    (100..104).for_each(|v| w.touch(2, v, Load));
    let plan = policy(&[]).decide(&w.snap());
    assert!(plan.pages.is_empty(), "{:?}", plan.pages);
}

#[test]
fn full_migration_when_an_app_still_uses_the_nodes_it_left() {
    // Threads on node 2; memory on a CPU-less node 4 that the app left 1 s ago.
    let mut w = World::synthetic("nodes=4,cpus=4,memonly=1");
    for k in 0..4 {
        w.add_thread(10 + k, 3, 8 + k);
    }
    pin_all(&mut w);
    w.place(3, 0..500, 4);
    w.region(3, 0, 500);
    w.now = Duration::from_secs(50);
    let mut p = policy(&["asymsched.s_per_gb=0.3"]);
    p.pending.insert(
        3,
        Moved { at: Duration::from_secs(49), left: BTreeSet::from([NodeIdx(4)]), to: BTreeSet::from([NodeIdx(2)]) },
    );
    // 1 s after the move: too early.
    let plan = p.decide(&w.snap());
    assert!(plan.ranges.is_empty() && plan.threads.is_empty(), "{plan:?}");
    w.now = Duration::from_secs(52);
    (0..40).for_each(|v| w.touch(10 + (v as u32 % 4), v * 7, Load));
    let plan = p.decide(&w.snap());
    assert_eq!(plan.ranges, vec![RangeAction { app: 3, start_vpn: 0, npages: 500, op: RangeOp::MoveTo(NodeIdx(2)) }]);
    assert!(plan.pages.is_empty(), "the full migration covers the sampled pages");
    w.apply(&plan);
    assert!((0..500).all(|v| w.page_node(3, v) == Some(NodeIdx(2))));
    assert!(p.pending.is_empty());
}

#[test]
fn no_full_migration_when_most_accesses_are_already_local() {
    let mut w = World::synthetic("nodes=4,cpus=4,memonly=1");
    for k in 0..4 {
        w.add_thread(10 + k, 3, 8 + k);
    }
    pin_all(&mut w);
    w.place(3, 0..100, 4);
    w.place(3, 100..500, 2);
    w.region(3, 0, 500);
    w.now = Duration::from_secs(52);
    let mut p = policy(&[]);
    p.pending.insert(
        3,
        Moved { at: Duration::from_secs(49), left: BTreeSet::from([NodeIdx(4)]), to: BTreeSet::from([NodeIdx(2)]) },
    );
    (0..40).for_each(|v| w.touch(10 + (v as u32 % 4), 100 + v * 7, Load));
    (0..4).for_each(|v| w.touch(10, v * 7, Load));
    let plan = p.decide(&w.snap());
    assert!(plan.ranges.is_empty());
    assert!(p.pending.is_empty(), "checked once, then forgotten");
}

#[test]
fn several_applications_get_distinct_nodes() {
    // Two 4-thread apps crowd node 0 (8 threads on 4 CPUs); each app's memory is on its own node.
    let mut w = World::synthetic("nodes=4,cpus=4");
    for k in 0..4 {
        w.add_thread(1 + k, 1, k);
        w.add_thread(11 + k, 2, k);
    }
    w.place(1, 0..50, 1);
    w.place(2, 0..50, 2);
    w.now = Duration::from_secs(100);
    for k in 0..4u32 {
        (0..50).for_each(|v| {
            w.touch(1 + k, v, Load);
            w.touch(11 + k, v, Load);
        });
    }
    let mut p = policy(&[]);
    let plan = p.decide(&w.snap());
    w.apply(&plan);
    let node_of_app =
        |a: AppId| -> BTreeSet<u16> { w.threads.iter().filter(|t| t.app == a).map(|t| t.node.0).collect() };
    let (n1, n2) = (node_of_app(1), node_of_app(2));
    assert_eq!((n1.len(), n2.len()), (1, 1), "each app's cluster stays together");
    assert_ne!(n1, n2, "clusters of different apps get different nodes");
    assert_eq!(
        (n1, n2),
        (BTreeSet::from([1]), BTreeSet::from([2])),
        "fewest page migrations: threads go to their memory"
    );
    for n in 0..4u16 {
        assert!(w.threads.iter().filter(|t| t.node.0 == n).count() <= 4);
    }
}

#[test]
fn parameters_are_checked() {
    for bad in ["asymsched.keep=1.5", "asymsched.what=1", "asymsched.budget=-0.1", "asymsched.spread_slack=-1"] {
        let mut p = Params::new();
        p.set_assignment(bad).unwrap();
        assert!(AsymSched::from_params(&p).is_err(), "{bad} accepted");
    }
    assert_eq!(Config::from_params(&Params::new()).unwrap(), Config::default());
}

#[test]
fn on_opteron6272_8n_picks_the_best_connected_three_nodes() {
    let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
    // Brute force over every 3-node subset, with the same bandwidth the policy uses.
    let bw = |s: [u32; 3]| fabric::cluster_bandwidth(&m, &s.map(|n| NodeIdx(n as u16)));
    let mut subsets = Vec::new();
    for a in 0..8 {
        for b in a + 1..8 {
            for c in b + 1..8 {
                subsets.push([a, b, c]);
            }
        }
    }
    let best = subsets.iter().map(|s| bw(*s)).fold(0.0, f64::max);
    let worst = *subsets.iter().min_by(|x, y| bw(**x).total_cmp(&bw(**y))).unwrap();
    assert!(bw(worst) < 0.9 * best, "the preset must make the choice matter");
    for (sets, strict) in [(&["asymsched.keep=1"][..], true), (&[][..], false)] {
        let mut w = World::new(m.clone());
        link_heavy_on(&mut w, worst);
        touch_all(&mut w, 10);
        let plan = policy(sets).decide(&w.snap());
        assert!(plan.stats["placements_evaluated"] <= 56.0, "{:?}", plan.stats);
        w.apply(&plan);
        let used: Vec<u32> = nodes_used(&w).into_iter().map(u32::from).collect();
        let got = bw([used[0], used[1], used[2]]);
        if strict {
            assert!((got - best).abs() < 1e-9, "chose {used:?} ({got} GB/s), best is {best} GB/s");
        } else {
            assert!(got >= 0.9 * best, "chose {used:?} ({got} GB/s), best is {best} GB/s");
        }
    }
}

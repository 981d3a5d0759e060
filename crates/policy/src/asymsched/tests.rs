use super::*;
use crate::autonuma::test_world::World;
use ptb_profile::SampleKind::Load;

fn policy(sets: &[&str]) -> AsymSched {
    let mut p = Params::new();
    sets.iter().for_each(|s| p.set_assignment(s).unwrap());
    AsymSched::from_params(&p).unwrap()
}

/// 8 nodes x 8 CPUs; remote links 3 GB/s except a fast triangle 2-5-7 at 6 GB/s.
fn asymmetric_world() -> World {
    let mut m = ptb_topology::synthetic::synthetic("nodes=8,cpus=8,remote=3").unwrap();
    let bw = &mut m.bandwidth.as_mut().unwrap().uncontended;
    for (a, b) in [(2, 5), (5, 7), (2, 7)] {
        bw.rows[a][b] = 6.0;
        bw.rows[b][a] = 6.0;
    }
    World::new(m)
}

/// One app of 24 threads on nodes 0, 1, 3 (8 each), each node holding 300 pages; every
/// thread reads pages of all three nodes (link-heavy sharing).
fn link_heavy(w: &mut World) {
    link_heavy_on(w, [0, 1, 3]);
}

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

#[test]
fn picks_the_highest_bandwidth_subset_evaluating_fewer_than_all() {
    let mut w = asymmetric_world();
    link_heavy(&mut w);
    touch_all(&mut w, 10);
    let mut p = policy(&[]);
    let plan = p.decide(&w.snap());
    let st = &plan.stats;
    assert_eq!(st["placements_total"], 336.0);
    assert!(st["placements_evaluated"] < 336.0, "{st:?}");
    assert_eq!(st["placements_skipped"], 336.0 - st["placements_evaluated"]);
    w.apply(&plan);
    let used: BTreeSet<u16> = w.threads.iter().map(|t| t.node.0).collect();
    assert_eq!(used, BTreeSet::from([2, 5, 7]), "{plan:?}");
    // 8 threads per node: clusters stay whole.
    for n in [2u16, 5, 7] {
        assert_eq!(w.threads.iter().filter(|t| t.node.0 == n).count(), 8);
    }
}

#[test]
fn good_enough_placement_stays_and_nothing_moves() {
    // Already on the fast triangle: the current placement is within 90% and moves nothing.
    let mut w = asymmetric_world();
    for (i, node) in [2u32, 5, 7].iter().enumerate() {
        for k in 0..8 {
            w.add_thread(100 + i as u32 * 8 + k, 7, node * 8 + k);
        }
        w.place(7, i as u64 * 1000..i as u64 * 1000 + 300, *node as u16);
        w.region(7, i as u64 * 1000, 300);
    }
    w.now = Duration::from_secs(100);
    touch_all(&mut w, 10);
    let plan = policy(&[]).decide(&w.snap());
    assert!(plan.threads.is_empty(), "{plan:?}");
    assert!(plan.ranges.is_empty());
}

#[test]
fn budget_blocks_a_costly_move_early_in_the_run() {
    let mut w = asymmetric_world();
    link_heavy(&mut w);
    w.now = Duration::from_millis(10);
    touch_all(&mut w, 10);
    // 900 pages at 1000 s/GB: 3.7 s predicted, budget 5% of 10 ms.
    let mut p = policy(&["asymsched.s_per_gb=1000"]);
    let plan = p.decide(&w.snap());
    assert_eq!(plan.stats["budget_skipped"], 1.0);
    assert!(plan.threads.is_empty());
    let page_s = 4096.0 * 1000.0 / 1e9;
    assert!(plan.pages.len() as f64 * page_s <= 0.05 * 0.010 + 1e-12, "dynamic pages exceed the budget");
    assert!(plan.stats["migration_spent_s"] <= 0.05 * 0.010 + 1e-12);
}

#[test]
fn dynamic_migration_sends_private_pages_to_their_user_and_spreads_shared_ones() {
    // One CPU per node, so the two threads cannot be packed onto one node.
    let mut w = World::synthetic("nodes=4,cpus=1");
    w.add_thread(1, 0, 0); // node 0
    w.add_thread(2, 0, 1); // node 1
    w.place(0, 0..10, 3);
    w.now = Duration::from_secs(1000);
    (0..4).for_each(|v| w.touch(1, v, Load)); // private to node 0
    (4..10).for_each(|v| {
        w.touch(1, v, Load);
        w.touch(2, v, Load);
    }); // shared by nodes 0 and 1
    let mut p = policy(&[]);
    let plan = p.decide(&w.snap());
    assert!(plan.threads.is_empty(), "a symmetric machine gives no reason to move: {plan:?}");
    w.apply(&plan);
    assert!((0..4).all(|v| w.page_node(0, v) == Some(NodeIdx(0))));
    let shared: Vec<u16> = (4..10).map(|v| w.page_node(0, v).unwrap().0).collect();
    assert_eq!(shared.iter().filter(|&&n| n == 0).count(), 1, "{shared:?}: node 0 already got 4 private pages");
    assert_eq!(shared.iter().filter(|&&n| n == 1).count(), 5);
}

#[test]
fn full_migration_when_an_app_still_uses_the_nodes_it_left() {
    let mut w = World::synthetic("nodes=4,cpus=4");
    for k in 0..4 {
        w.add_thread(10 + k, 3, 8 + k); // node 2 now
    }
    w.place(3, 0..500, 0); // its memory stayed on node 0
    w.region(3, 0, 500);
    w.now = Duration::from_secs(50);
    let mut p = policy(&["asymsched.s_per_gb=0.3"]);
    p.pending.insert(
        3,
        Moved { at: Duration::from_secs(49), left: BTreeSet::from([NodeIdx(0)]), to: BTreeSet::from([NodeIdx(2)]) },
    );
    (0..40).for_each(|v| w.touch(10 + (v as u32 % 4), v * 7, Load));
    // 1 s after the move: too early.
    let plan = p.decide(&w.snap());
    assert!(plan.ranges.is_empty());
    w.samples.clear();
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
fn several_applications_get_distinct_nodes() {
    // Two 4-thread apps crowd node 0 (8 threads on 4 CPUs) and share data within each app.
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
    for n in 0..4u16 {
        assert!(w.threads.iter().filter(|t| t.node.0 == n).count() <= 4);
    }
}

#[test]
fn parameters_are_checked() {
    for bad in ["asymsched.keep=1.5", "asymsched.what=1", "asymsched.budget=-0.1"] {
        let mut p = Params::new();
        p.set_assignment(bad).unwrap();
        assert!(AsymSched::from_params(&p).is_err(), "{bad} accepted");
    }
    let m = ptb_topology::synthetic::synthetic("nodes=2").unwrap();
    // Default cost per GB from the machine: 1.1 us x 244140.625 pages + 1/3.73 s.
    let s = policy(&[]).s_per_byte(&m) * 1e9;
    assert!((s - (1e9 / 4096.0 * 1.1e-6 + 1.0 / 3.73)).abs() < 1e-9, "{s}");
}

#[test]
fn on_opteron6272_8n_picks_the_best_connected_three_nodes() {
    let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
    // Brute force: total bandwidth between the nodes of every 3-node subset.
    let bw = |a: u32, b: u32| m.node_bg(NodeIdx(a as u16), NodeIdx(b as u16)).unwrap();
    let total = |s: [u32; 3]| -> f64 {
        s.iter().flat_map(|&a| s.iter().filter(move |&&b| b != a).map(move |&b| bw(a, b))).sum()
    };
    let mut subsets = Vec::new();
    for a in 0..8 {
        for b in a + 1..8 {
            for c in b + 1..8 {
                subsets.push([a, b, c]);
            }
        }
    }
    let best = subsets.iter().map(|s| total(*s)).fold(0.0, f64::max);
    let worst = *subsets.iter().min_by(|x, y| total(**x).total_cmp(&total(**y))).unwrap();
    assert!(total(worst) < 0.9 * best, "the preset must make the choice matter");
    for (sets, strict) in [(&["asymsched.keep=1"][..], true), (&[][..], false)] {
        let mut w = World::new(m.clone());
        link_heavy_on(&mut w, worst);
        touch_all(&mut w, 10);
        let plan = policy(sets).decide(&w.snap());
        assert!(plan.stats["placements_evaluated"] < 336.0, "{:?}", plan.stats);
        w.apply(&plan);
        let used: Vec<u32> = w.threads.iter().map(|t| t.node.0 as u32).collect::<BTreeSet<_>>().into_iter().collect();
        let got = total([used[0], used[1], used[2]]);
        if strict {
            assert!((got - best).abs() < 1e-9, "chose {used:?} ({got} GB/s), best is {best} GB/s");
        } else {
            assert!(got >= 0.9 * best, "chose {used:?} ({got} GB/s), best is {best} GB/s");
        }
    }
}

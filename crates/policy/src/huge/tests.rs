use super::*;
use crate::plan::PageMove;
use proptest::prelude::*;
use ptb_profile::PageKey;

const PP: u64 = 512;

fn region(app: AppId, start: u64, npages: u64, huge: &[(u64, u64)]) -> Region {
    Region {
        app,
        start_vpn: start,
        npages,
        name: "r".into(),
        resident: vec![],
        huge: HugeBacking::new(PP, huge.iter().copied()),
    }
}

fn n(i: u16) -> NodeIdx {
    NodeIdx(i)
}

/// Where the plan sends each base page of `app` in `[lo, hi)`: every node any action asks.
fn asked(plan: &Plan, app: AppId, lo: u64, hi: u64) -> BTreeMap<u64, Vec<Option<NodeIdx>>> {
    let mut out: BTreeMap<u64, Vec<Option<NodeIdx>>> = BTreeMap::new();
    for p in plan.pages.iter().filter(|p| p.page.app == app && (lo..hi).contains(&p.page.vpn)) {
        out.entry(p.page.vpn).or_default().push(Some(p.to));
    }
    for r in plan.ranges.iter().filter(|r| r.app == app) {
        for v in r.start_vpn.max(lo)..(r.start_vpn + r.npages).min(hi) {
            let to = match &r.op {
                RangeOp::MoveTo(n) => Some(*n),
                _ => None, // a spread: no single node
            };
            out.entry(v).or_default().push(to);
        }
    }
    out
}

#[test]
fn backing_aligns_merges_and_finds_heads() {
    let h = HugeBacking::new(PP, [(1000, 5000), (5000, 6000), (100, 200)]);
    // 1000 rounds up to 1024, 6000 down to 5632; (100, 200) holds no whole huge page.
    assert_eq!(h.ranges, vec![(1024, 5632)]);
    assert_eq!(h.head_of(1024), Some(1024));
    assert_eq!(h.head_of(1600), Some(1536));
    assert_eq!(h.head_of(5631), Some(5120));
    assert_eq!(h.head_of(5632), None);
    assert_eq!(h.head_of(1023), None);
    assert_eq!(h.pages_in(0, 2048), 1024);
    assert!(HugeBacking::new(1, [(0, 4096)]).is_empty());
    assert!(HugeBacking::new(PP, [(0, 100)]).is_empty());
}

#[test]
fn spread_node_round_robins_interleave_and_follows_weights() {
    let il = RangeOp::Interleave(vec![n(0), n(2), n(3)]);
    let got: Vec<u16> = (0..6).map(|h| spread_node(&il, h).unwrap().0).collect();
    assert_eq!(got, vec![0, 2, 3, 0, 2, 3]);
    assert_eq!(spread_node(&RangeOp::MoveTo(n(4)), 99), Some(n(4)));
    assert_eq!(spread_node(&RangeOp::Interleave(vec![]), 1), None);
    assert_eq!(spread_node(&RangeOp::Weighted(vec![(n(1), 0)]), 1), None);
    // A node with weight 0 never gets a huge page.
    let w = RangeOp::Weighted(vec![(n(0), 3), (n(1), 0), (n(2), 1)]);
    assert!((0..1000).all(|h| spread_node(&w, h) != Some(n(1))));
}

proptest! {
    /// Any run of consecutive huge pages gets the weights' shares (within 3% of the run plus
    /// two pages), and the same huge page always gets the same node.
    #[test]
    fn weighted_spread_keeps_the_shares(ws in proptest::collection::vec(1u32..100, 1..6), from in 0u64..1 << 40, len in 200u64..2000) {
        let op = RangeOp::Weighted(ws.iter().enumerate().map(|(i, w)| (n(i as u16), *w)).collect());
        let total: u32 = ws.iter().sum();
        let mut count = vec![0u64; ws.len()];
        for h in from..from + len {
            let a = spread_node(&op, h).unwrap();
            prop_assert_eq!(Some(a), spread_node(&op, h));
            count[a.ix()] += 1;
        }
        for (i, w) in ws.iter().enumerate() {
            let want = len as f64 * f64::from(*w) / f64::from(total);
            prop_assert!((count[i] as f64 - want).abs() <= len as f64 * 0.03 + 2.0, "node {} got {} want {:.1}", i, count[i], want);
        }
    }
}

#[test]
fn plans_without_huge_pages_pass_unchanged() {
    let regions = vec![region(1, 0, 4096, &[])];
    let plan = Plan {
        pages: vec![PageMove { page: PageKey { app: 1, vpn: 3 }, to: n(1) }],
        ranges: vec![RangeAction { app: 1, start_vpn: 0, npages: 1024, op: RangeOp::Interleave(vec![n(0), n(1)]) }],
        ..Default::default()
    };
    assert_eq!(whole_huge_pages(plan.clone(), &regions), plan);
}

#[test]
fn page_moves_inside_a_huge_page_vote_for_one_node() {
    let regions = vec![region(1, 0, 4096, &[(512, 2048)])];
    let mv = |vpn, to| PageMove { page: PageKey { app: 1, vpn }, to: n(to) };
    // Huge page 512..1024: three pages want node 1, two want node 2; page 10 is a base page.
    let plan = Plan {
        pages: vec![mv(600, 2), mv(601, 1), mv(700, 1), mv(10, 3), mv(800, 2), mv(900, 1)],
        ..Default::default()
    };
    let out = whole_huge_pages(plan, &regions);
    assert_eq!(out.pages, vec![mv(10, 3)]);
    assert_eq!(out.ranges, vec![RangeAction { app: 1, start_vpn: 512, npages: 512, op: RangeOp::MoveTo(n(1)) }]);
    assert_eq!(out.stats["huge_pages_planned"], 1.0);
    assert_eq!(out.stats["huge_pages_outvoted_pages"], 2.0);
    // A tie goes to the node asked first.
    let tie = Plan { pages: vec![mv(1100, 3), mv(1200, 0)], ..Default::default() };
    let out = whole_huge_pages(tie, &regions);
    assert_eq!(out.ranges[0].op, RangeOp::MoveTo(n(3)));
}

#[test]
fn spreading_a_range_assigns_whole_huge_pages_and_keeps_base_pages_spread() {
    // Huge pages over 0..4096 (8 of them); 4096..4196 are base pages.
    let regions = vec![region(7, 0, 4196, &[(0, 4096)])];
    let op = RangeOp::Interleave(vec![n(0), n(1)]);
    let plan =
        Plan { ranges: vec![RangeAction { app: 7, start_vpn: 0, npages: 4196, op: op.clone() }], ..Default::default() };
    let out = whole_huge_pages(plan, &regions);
    let moves: Vec<&RangeAction> = out.ranges.iter().filter(|r| matches!(r.op, RangeOp::MoveTo(_))).collect();
    assert_eq!(moves.iter().map(|r| r.npages).sum::<u64>(), 4096);
    let on = |k: u16| moves.iter().filter(|r| r.op == RangeOp::MoveTo(n(k))).map(|r| r.npages).sum::<u64>();
    assert_eq!((on(0), on(1)), (2048, 2048));
    assert!(out.ranges.contains(&RangeAction { app: 7, start_vpn: 4096, npages: 100, op }));
    assert_eq!(out.stats["huge_pages_planned"], 8.0);
    assert_eq!(out.stats["huge_pages_outvoted_pages"], 0.0);
}

#[test]
fn a_range_touching_part_of_a_huge_page_takes_it_whole() {
    let regions = vec![region(1, 0, 2048, &[(0, 2048)])];
    let plan = Plan {
        ranges: vec![RangeAction { app: 1, start_vpn: 500, npages: 20, op: RangeOp::MoveTo(n(2)) }],
        ..Default::default()
    };
    let out = whole_huge_pages(plan, &regions);
    assert_eq!(
        out.ranges,
        vec![RangeAction { app: 1, start_vpn: 0, npages: 1024, op: RangeOp::MoveTo(n(2)) }],
        "both huge pages the range touches go whole, merged into one range"
    );
}

fn arb_plan() -> impl Strategy<Value = (Plan, Vec<Region>)> {
    let huge = proptest::collection::vec((0u64..16, 1u64..4), 0..4);
    let pages = proptest::collection::vec((0u64..10_000, 0u16..4), 0..40);
    let ranges = proptest::collection::vec((0u64..10_000, 1u64..3000, 0u8..3, 0u16..4), 0..6);
    (huge, pages, ranges).prop_map(|(huge, pages, ranges)| {
        let hr: Vec<(u64, u64)> = huge.iter().map(|(h, k)| (h * PP, (h + k) * PP)).collect();
        let regions = vec![region(1, 0, 10_000, &hr), region(2, 0, 10_000, &[])];
        let plan = Plan {
            pages: pages
                .iter()
                .map(|&(v, to)| PageMove { page: PageKey { app: 1 + (v % 2) as u32, vpn: v }, to: n(to) })
                .collect(),
            ranges: ranges
                .iter()
                .map(|&(s, len, kind, k)| RangeAction {
                    app: 1,
                    start_vpn: s,
                    npages: len,
                    op: match kind {
                        0 => RangeOp::MoveTo(n(k)),
                        1 => RangeOp::Interleave((0..=k).map(n).collect()),
                        _ => RangeOp::Weighted((0..=k).map(|i| (n(i), u32::from(i) + 1)).collect()),
                    },
                })
                .collect(),
            ..Default::default()
        };
        (plan, regions)
    })
}

proptest! {
    /// After the rewrite, every base page of a huge page is asked for one node at most, no
    /// spread touches a huge page, and outside huge pages the plan asks exactly what it did.
    #[test]
    fn every_huge_page_gets_one_node(input in arb_plan()) {
        let (plan, regions) = input;
        let out = whole_huge_pages(plan.clone(), &regions);
        let hb = &regions[0].huge;
        let after = asked(&out, 1, 0, 20_000);
        for (v, to) in &after {
            if hb.head_of(*v).is_some() {
                prop_assert!(to.iter().all(|t| t.is_some()), "spread over huge page at {}", v);
                prop_assert!(to.windows(2).all(|w| w[0] == w[1]), "page {} asked for {:?}", v, to);
            }
        }
        // Whole huge pages: a huge page is asked for all of its base pages or none.
        for &(s, e) in &hb.ranges {
            for head in (s..e).step_by(PP as usize) {
                let k = (head..head + PP).filter(|v| after.contains_key(v)).count() as u64;
                prop_assert!(k == 0 || k == PP, "huge page {} asked for {} of {} pages", head, k, PP);
            }
        }
        let before = asked(&plan, 1, 0, 20_000);
        for (v, to) in &before {
            if hb.head_of(*v).is_none() {
                prop_assert_eq!(after.get(v), Some(to));
            }
        }
        prop_assert_eq!(asked(&out, 2, 0, 20_000), asked(&plan, 2, 0, 20_000));
        prop_assert_eq!(out.threads, plan.threads);
    }
}

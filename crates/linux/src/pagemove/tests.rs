use super::*;
use crate::backing::{BasePagesOnly, PageBacking};
use crate::units::group;
use proptest::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// A kernel that migrates folios whole, as Linux does: moving any page of a folio moves all of
/// it (and counts one folio migration when it changes node).
#[derive(Default)]
struct FakeKernel {
    node: RefCell<HashMap<u64, i32>>,
    /// Page -> first page of its folio; folio -> its pages.
    folio_of: RefCell<HashMap<u64, u64>>,
    folios: HashMap<u64, Vec<u64>>,
    /// Nodes that refuse every page (ENOMEM).
    full: Vec<i32>,
    /// Pages whose move the kernel refuses with ENOENT (6.1 does so for pages under a
    /// protection such as a NUMA hinting fault).
    protected: Vec<u64>,
    /// Nodes without a free huge page: a folio moved there is split and its pages moved one
    /// by one (protected ones stay), as Linux does (thp_migration_split).
    split_to: Vec<i32>,
    /// Folio migrations of more than one page.
    huge_migrations: RefCell<u64>,
}

impl FakeKernel {
    /// Pages `[0, n)` on `node`; folios of `huge` pages at each listed head.
    fn new(n: u64, node: i32, heads: &[u64], huge: u64) -> Self {
        let mut k = FakeKernel::default();
        for v in 0..n {
            k.node.get_mut().insert(v, node);
        }
        for &h in heads {
            k.folios.insert(h, (h..h + huge).collect());
            for v in h..h + huge {
                k.folio_of.get_mut().insert(v, h);
            }
        }
        k
    }
    fn at(&self, v: u64) -> i32 {
        self.node.borrow().get(&v).copied().unwrap_or(-libc::ENOENT)
    }
}

impl Kernel for FakeKernel {
    fn query(&self, _pid: u32, vpns: &[u64]) -> Vec<i32> {
        vpns.iter().map(|v| self.at(*v)).collect()
    }
    fn move_pages(&self, _pid: u32, moves: &[(u64, i32)]) -> Vec<i32> {
        moves
            .iter()
            .map(|&(v, n)| {
                let cur = self.at(v);
                if cur < 0 {
                    return cur;
                }
                if cur == n {
                    return n;
                }
                if self.full.contains(&n) {
                    return -libc::ENOMEM;
                }
                if self.protected.contains(&v) {
                    return -libc::ENOENT;
                }
                let pages = self.folio_of.borrow().get(&v).map_or(vec![v], |h| self.folios[h].clone());
                if pages.len() > 1 && self.split_to.contains(&n) {
                    // Split: its pages are base pages from now on.
                    let mut f = self.folio_of.borrow_mut();
                    for p in &pages {
                        f.remove(p);
                    }
                    let mut m = self.node.borrow_mut();
                    for p in pages.into_iter().filter(|p| *p == v || !self.protected.contains(p)) {
                        m.insert(p, n);
                    }
                    return n;
                }
                if pages.len() > 1 {
                    *self.huge_migrations.borrow_mut() += 1;
                }
                let mut m = self.node.borrow_mut();
                for p in pages {
                    m.insert(p, n);
                }
                n
            })
            .collect()
    }
}

/// Backing that knows the fake kernel's folios (as kpageflags would), or assumes every aligned
/// block of `assume` is one.
struct FakeBacking<'a> {
    k: &'a FakeKernel,
    huge: u64,
    assume: Option<(u64, u64)>,
}

impl PageBacking for FakeBacking<'_> {
    fn unit_of(&mut self, vpn: u64) -> Option<Unit> {
        if let Some((lo, hi)) = self.assume {
            let head = vpn / self.huge * self.huge;
            return (lo <= head && head + self.huge <= hi).then_some(Unit { head, pages: self.huge, known: false });
        }
        let h = *self.k.folio_of.borrow().get(&vpn)?;
        Some(Unit { head: h, pages: self.huge, known: true })
    }
}

fn ask(vpn: u64, node: i32) -> Ask {
    Ask { vpn, node }
}

fn run(k: &FakeKernel, asks: &[Ask], b: &mut dyn PageBacking) -> Outcome {
    execute(prepare(1, group(asks, b), k), k)
}

#[test]
fn base_pages_move_and_pages_already_there_are_not_counted() {
    let k = FakeKernel::new(16, 0, &[], 8);
    let o = run(&k, &[ask(1, 2), ask(2, 0), ask(3, 1), ask(99, 1)], &mut BasePagesOnly);
    assert_eq!((o.pages_moved, o.huge_pages_moved), (2, 0));
    assert_eq!(o.failed.get("ENOENT"), Some(&1), "{o:?}");
    assert_eq!((k.at(1), k.at(3)), (2, 1));
    assert_eq!(o.attempted, vec![(1, 2), (3, 1), (99, 1)], "page 2 was on node 0 already");
}

#[test]
fn a_huge_page_moves_once_to_the_node_most_asked() {
    let k = FakeKernel::new(32, 0, &[8], 8);
    let asks = [ask(8, 1), ask(9, 2), ask(10, 2), ask(11, 1), ask(12, 2), ask(3, 3)];
    let o = run(&k, &asks, &mut FakeBacking { k: &k, huge: 8, assume: None });
    assert_eq!(*k.huge_migrations.borrow(), 1);
    assert!((8..16).all(|v| k.at(v) == 2));
    assert_eq!((o.pages_moved, o.huge_pages_moved), (1, 1));
    assert_eq!(o.failed.get(HUGE_PAGE), Some(&2), "the two pages asked for node 1: {o:?}");
    assert_eq!(o.huge, vec![(8, 2, 8)]);
}

#[test]
fn unknown_huge_pages_are_caught_by_the_check_after_the_move() {
    // ptb before this check: every page of the huge page spread round-robin, all "moved".
    let k = FakeKernel::new(32, 0, &[8], 8);
    let asks: Vec<Ask> = (8..16).map(|v| ask(v, 1 + (v % 3) as i32)).collect();
    let o = run(&k, &asks, &mut BasePagesOnly);
    assert!(*k.huge_migrations.borrow() > 1, "the kernel bounced it");
    let last = k.at(8);
    let on_last = asks.iter().filter(|a| a.node == last).count() as u64;
    assert_eq!(o.pages_moved, on_last, "{o:?}");
    assert_eq!(o.failed.get(HUGE_PAGE), Some(&(8 - on_last)));
}

#[test]
fn an_assumed_block_of_base_pages_moves_each_page_where_asked() {
    let k = FakeKernel::new(32, 0, &[], 8);
    let asks = [ask(8, 1), ask(9, 2), ask(10, 1)];
    let o = run(&k, &asks, &mut FakeBacking { k: &k, huge: 8, assume: Some((0, 32)) });
    assert_eq!((k.at(8), k.at(9), k.at(10)), (1, 2, 1));
    assert!((11..16).all(|v| k.at(v) == 0), "pages nobody asked for stay");
    assert_eq!((o.pages_moved, o.huge_pages_moved), (3, 0));
    assert!(o.failed.is_empty(), "{o:?}");
    assert!(o.huge.is_empty());
}

#[test]
fn an_assumed_block_that_is_a_huge_page_counts_as_one() {
    let k = FakeKernel::new(32, 0, &[16], 8);
    let o = run(&k, &[ask(17, 2), ask(18, 3)], &mut FakeBacking { k: &k, huge: 8, assume: Some((0, 32)) });
    assert_eq!(*k.huge_migrations.borrow(), 1);
    assert_eq!((o.pages_moved, o.huge_pages_moved), (0, 1));
    assert_eq!(o.failed.get(HUGE_PAGE), Some(&1));
    assert!((16..24).all(|v| k.at(v) == 2));
}

#[test]
fn a_huge_page_the_node_refuses_fails_with_its_reason_and_is_retried() {
    let mut k = FakeKernel::new(32, 0, &[8], 8);
    k.full = vec![3];
    let o = run(&k, &[ask(9, 3), ask(10, 3)], &mut FakeBacking { k: &k, huge: 8, assume: None });
    assert_eq!(o.failed.get("ENOMEM"), Some(&2));
    assert_eq!(o.retry, vec![(8, 3, -libc::ENOMEM)]);
    assert_eq!(o.failures, vec![(8, "ENOMEM".to_string())]);
    assert_eq!(o.huge_pages_moved, 0);
}

#[test]
fn a_huge_page_split_on_the_way_logs_the_pages_left_behind() {
    let mut k = FakeKernel::new(32, 0, &[8], 8);
    k.split_to = vec![2];
    k.protected = vec![12];
    let o = run(&k, &[ask(9, 2), ask(10, 2)], &mut FakeBacking { k: &k, huge: 8, assume: None });
    assert_eq!((o.huge_pages_moved, o.pages_moved), (0, 7), "{o:?}");
    assert!(o.failed.is_empty(), "page 12 was not asked: {o:?}");
    assert_eq!(o.failures, vec![(12, SPLIT.to_string())]);
    // Asked and left behind: a failure.
    let mut k = FakeKernel::new(32, 0, &[8], 8);
    k.split_to = vec![2];
    k.protected = vec![12];
    let o = run(&k, &[ask(9, 2), ask(12, 2)], &mut FakeBacking { k: &k, huge: 8, assume: None });
    assert_eq!(o.failed.get(SPLIT), Some(&1), "{o:?}");
    assert_eq!(o.retry, vec![(12, 2, 0)]);
}

#[test]
fn a_huge_page_whose_first_probe_is_protected_moves_through_the_next() {
    let mut k = FakeKernel::new(32, 0, &[8], 8);
    k.protected = vec![9];
    let o = run(&k, &[ask(9, 2), ask(10, 2)], &mut FakeBacking { k: &k, huge: 8, assume: None });
    assert_eq!((o.huge_pages_moved, *k.huge_migrations.borrow()), (1, 1), "{o:?}");
    assert!(o.failed.is_empty(), "{o:?}");
    // Every probe protected: the huge page fails with the kernel's reason, to be retried.
    let mut k = FakeKernel::new(32, 0, &[8], 8);
    k.protected = (8..16).collect();
    let o =
        run(&k, &[ask(9, 2), ask(10, 2), ask(11, 2), ask(12, 2)], &mut FakeBacking { k: &k, huge: 8, assume: None });
    assert_eq!(o.failed.get("ENOENT"), Some(&4));
    assert_eq!(o.retry.len(), 1);
}

proptest! {
    /// Whatever the folios and the asks, with the folios known or only assumed: each folio
    /// migrates at most once, every page asked ends on its node or is reported failed (by
    /// itself or by its huge page's head), and what is counted moved is there.
    #[test]
    fn every_ask_lands_or_is_reported(
        heads in proptest::collection::btree_set(0u64..16, 0..8),
        asks in proptest::collection::vec((0u64..130, 0i32..4), 1..80),
        assume in any::<bool>(),
        protected in proptest::collection::vec(0u64..130, 0..10),
        split_to in proptest::collection::vec(0i32..4, 0..2),
    ) {
        let heads: Vec<u64> = heads.into_iter().map(|h| h * 8).collect();
        let mut k = FakeKernel::new(128, 0, &heads, 8);
        k.protected = protected;
        k.split_to = split_to;
        let asks: Vec<Ask> = asks.into_iter().map(|(v, n)| ask(v, n)).collect();
        let mut b = FakeBacking { k: &k, huge: 8, assume: assume.then_some((0, 64)) };
        let before: HashMap<u64, i32> = k.node.borrow().clone();
        let o = run(&k, &asks, &mut b);
        if !assume {
            prop_assert!(*k.huge_migrations.borrow() <= heads.len() as u64);
        }
        let mut last: HashMap<u64, i32> = HashMap::new();
        for a in &asks {
            last.insert(a.vpn, a.node);
        }
        let failed: std::collections::BTreeSet<u64> = o.failures.iter().map(|f| f.0).collect();
        for (v, n) in &last {
            let head = v / 8 * 8;
            let head = heads.contains(&head).then_some(head);
            let reported = failed.contains(v) || head.is_some_and(|h| failed.contains(&h))
                || (assume && failed.contains(&(v / 8 * 8)));
            prop_assert!(k.at(*v) == *n || reported, "page {} asked for {}, on {}, not reported: {:?}", v, n, k.at(*v), o);
        }
        // Nothing moved that was not asked, unless it shares a folio with a page asked.
        for (v, n0) in &before {
            if k.at(*v) != *n0 && !last.contains_key(v) {
                let h = v / 8 * 8;
                prop_assert!(heads.contains(&h) && k.folios[&h].iter().any(|p| last.contains_key(p)), "page {} moved unasked", v);
            }
        }
        // What is counted moved did change node (or was moved where the plan asked, and a
        // later move of the plan took it on).
        let changed = before.iter().filter(|(v, n)| k.at(**v) != **n).count() as u64;
        prop_assert!(o.pages_moved + 8 * o.huge_pages_moved <= changed + o.attempted.len() as u64, "{:?}", o);
        prop_assert!(o.huge_pages_moved <= o.huge.len() as u64);
    }
}

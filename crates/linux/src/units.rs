//! A process's page moves grouped by what the kernel migrates as one.
//!
//! Problem: a plan asks per base page, but the kernel migrates a huge page whole: two asks
//! inside one huge page for different nodes migrate it twice and leave it on the last node
//! asked, while the report says both pages moved.
//!
//! Approach: the asks of one process are deduplicated (the last ask of a page wins, as it
//! would in the kernel), then the asks inside one huge page ([`Unit`], from a
//! [`PageBacking`]) vote: the node asked for the most base pages wins, ties go to the node
//! asked first (the rule of `ptb_policy::huge`, so a plan that the policy layer already made
//! whole passes unchanged). The huge page is then moved once, to the winner; the pages asked
//! elsewhere are outvoted and reported as failed with reason `huge-page`.

use crate::backing::{PageBacking, Unit};
use std::collections::{BTreeMap, HashMap};

/// One base page asked for a node (kernel id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    pub vpn: u64,
    pub node: i32,
}

/// The asks inside one huge page and the node it gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HugeAsk {
    pub unit: Unit,
    /// The node the whole huge page goes to.
    pub node: i32,
    /// Every ask inside the huge page, in the order asked.
    pub asks: Vec<Ask>,
}

impl HugeAsk {
    /// Asks for another node than the winner.
    pub fn outvoted(&self) -> impl Iterator<Item = &Ask> {
        self.asks.iter().filter(move |a| a.node != self.node)
    }
    /// Asks for the winner.
    pub fn winners(&self) -> impl Iterator<Item = &Ask> {
        self.asks.iter().filter(move |a| a.node == self.node)
    }
}

/// The asks of one process, grouped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grouped {
    /// Pages the kernel moves one by one.
    pub base: Vec<Ask>,
    /// Huge pages, in address order.
    pub huge: Vec<HugeAsk>,
}

/// Group `asks` (in the order asked) by the huge pages `backing` finds.
pub fn group(asks: &[Ask], backing: &mut dyn PageBacking) -> Grouped {
    // The last ask of a page wins; the page keeps the position of its first ask.
    let mut last: HashMap<u64, (usize, i32)> = HashMap::with_capacity(asks.len());
    for (i, a) in asks.iter().enumerate() {
        last.entry(a.vpn).and_modify(|e| e.1 = a.node).or_insert((i, a.node));
    }
    let mut order: Vec<(usize, Ask)> = last.into_iter().map(|(vpn, (i, node))| (i, Ask { vpn, node })).collect();
    order.sort_unstable_by_key(|x| x.0);
    let mut out = Grouped::default();
    let mut units: BTreeMap<u64, (Unit, Vec<Ask>)> = BTreeMap::new();
    for (_, a) in order {
        match backing.unit_of(a.vpn) {
            Some(u) => units.entry(u.head).or_insert_with(|| (u, Vec::new())).1.push(a),
            None => out.base.push(a),
        }
    }
    for (_, (unit, asks)) in units {
        // (pages asked, order of the node's first ask) per node; most pages, then earliest.
        let mut votes: BTreeMap<i32, (u64, usize)> = BTreeMap::new();
        for (i, a) in asks.iter().enumerate() {
            votes.entry(a.node).or_insert((0, i)).0 += 1;
        }
        let node =
            votes.iter().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1))).map_or(asks[0].node, |(n, _)| *n);
        out.huge.push(HugeAsk { unit, node, asks });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backing::BasePagesOnly;
    use proptest::prelude::*;

    /// Huge pages of 8 base pages over [64, 128).
    struct Fake;
    impl PageBacking for Fake {
        fn unit_of(&mut self, vpn: u64) -> Option<Unit> {
            (64..128).contains(&vpn).then_some(Unit { head: vpn / 8 * 8, pages: 8, known: true })
        }
    }

    fn ask(vpn: u64, node: i32) -> Ask {
        Ask { vpn, node }
    }

    #[test]
    fn asks_in_a_huge_page_vote_and_base_pages_pass() {
        let g = group(&[ask(1, 0), ask(64, 2), ask(65, 1), ask(66, 1), ask(2, 3), ask(70, 2), ask(1, 3)], &mut Fake);
        // Page 1 asked twice: the last ask (node 3) wins, in its first position.
        assert_eq!(g.base, vec![ask(1, 3), ask(2, 3)]);
        assert_eq!(g.huge.len(), 1);
        let h = &g.huge[0];
        assert_eq!(h.unit.head, 64);
        // Two asks each for nodes 2 and 1: node 2 was asked first.
        assert_eq!(h.node, 2);
        assert_eq!(h.outvoted().count(), 2);
        assert_eq!(h.winners().count(), 2);
        let g = group(&[ask(80, 1), ask(81, 0), ask(82, 0)], &mut Fake);
        assert_eq!(g.huge[0].node, 0);
    }

    proptest! {
        /// Every ask lands in exactly one place, each huge page once, and without huge pages
        /// nothing changes but duplicates.
        #[test]
        fn every_ask_is_kept_once(asks in proptest::collection::vec((0u64..200, 0i32..4), 0..100)) {
            let asks: Vec<Ask> = asks.into_iter().map(|(v, n)| ask(v, n)).collect();
            let g = group(&asks, &mut Fake);
            let distinct: std::collections::BTreeSet<u64> = asks.iter().map(|a| a.vpn).collect();
            let kept = g.base.len() + g.huge.iter().map(|h| h.asks.len()).sum::<usize>();
            prop_assert_eq!(kept, distinct.len());
            let heads: std::collections::BTreeSet<u64> = g.huge.iter().map(|h| h.unit.head).collect();
            prop_assert_eq!(heads.len(), g.huge.len());
            for h in &g.huge {
                let best = h.winners().count();
                for n in 0..4 {
                    prop_assert!(h.asks.iter().filter(|a| a.node == n).count() <= best);
                }
                prop_assert!(h.asks.iter().all(|a| a.vpn / 8 * 8 == h.unit.head));
            }
            let plain = group(&asks, &mut BasePagesOnly);
            prop_assert!(plain.huge.is_empty());
            prop_assert_eq!(plain.base.len(), distinct.len());
        }
    }
}

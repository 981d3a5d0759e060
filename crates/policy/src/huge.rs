//! Whole huge pages: plans that the kernel can carry out where memory is backed by huge pages.
//!
//! Problem: a transparent huge page (2 MiB on x86) is one page to the kernel. `move_pages` of
//! any 4 KiB page inside it migrates all of it, so a plan that spreads a huge page's 512 base
//! pages over several nodes migrates it once per change of node and leaves it wherever the
//! last request sent it. A policy that plans page by page (ptb-classic) or spreads a 2 MiB
//! chunk (ptb) asks for placements the kernel cannot give.
//!
//! Approach: the snapshot's regions say which page ranges are huge-page backed
//! ([`HugeBacking`]). After a policy decides, [`whole_huge_pages`] rewrites its plan so that
//! every huge page it touches gets exactly one node, as one `MoveTo` of the whole huge page:
//! - page moves inside a huge page vote: the node asked for the most base pages wins (ties:
//!   the node asked first); the other pages are counted as outvoted;
//! - a range action takes every huge page it touches whole; spreading a range
//!   (`Interleave`, `Weighted`) assigns whole huge pages to nodes in the shares asked
//!   ([`spread_node`]: round-robin by huge-page index, or a low-discrepancy sequence for
//!   weights), so a large range gets the shares and one huge page is never split;
//! - parts of ranges outside huge pages keep their action unchanged.
//!
//! Every policy built by [`crate::build`] is wrapped in [`WholeHugePages`], so no policy has
//! to know; the plan's stats say the granularity it got (`huge_pages_planned`,
//! `huge_pages_outvoted_pages`). Without huge-page backed regions the plan is returned as is.
//! The Linux actuator applies [`spread_node`] too, for ranges it expands itself, so both
//! agree on where a huge page goes.

use crate::plan::{Plan, RangeAction, RangeOp};
use crate::snapshot::{Region, Snapshot, StartContext};
use crate::{Policy, SamplingRequest, StartPlan};
use ptb_profile::AppId;
use ptb_topology::NodeIdx;
use std::collections::BTreeMap;

/// Which page ranges of a region are backed by huge pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HugeBacking {
    /// Base pages per huge page (512 for 2 MiB over 4 KiB); 0 when the region has none.
    pub page_pages: u64,
    /// Huge-page backed ranges of virtual page numbers, `[start, end)`: sorted, disjoint, each
    /// end aligned to `page_pages`.
    pub ranges: Vec<(u64, u64)>,
}

impl HugeBacking {
    /// Backing of whole huge pages of `page_pages` base pages over `ranges`: ranges are sorted
    /// and merged, then clipped inwards to huge-page boundaries; empty ones are dropped.
    pub fn new(page_pages: u64, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        if page_pages < 2 {
            return HugeBacking::default();
        }
        let mut v: Vec<(u64, u64)> = ranges.into_iter().filter(|(s, e)| s < e).collect();
        v.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (s, e) in v {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let out: Vec<(u64, u64)> = merged
            .into_iter()
            .map(|(s, e)| (s.div_ceil(page_pages).saturating_mul(page_pages), e / page_pages * page_pages))
            .filter(|(s, e)| s < e)
            .collect();
        if out.is_empty() {
            return HugeBacking::default();
        }
        HugeBacking { page_pages, ranges: out }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty() || self.page_pages < 2
    }

    /// The first base page of the huge page holding `vpn`, if `vpn` is huge-page backed.
    pub fn head_of(&self, vpn: u64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let i = self.ranges.partition_point(|r| r.1 <= vpn);
        let (s, _) = *self.ranges.get(i).filter(|r| r.0 <= vpn)?;
        Some(s + (vpn - s) / self.page_pages * self.page_pages)
    }

    /// Base pages of `[start, end)` that are huge-page backed.
    pub fn pages_in(&self, start: u64, end: u64) -> u64 {
        self.ranges.iter().map(|&(s, e)| e.min(end).saturating_sub(s.max(start))).sum()
    }
}

/// The node a whole huge page gets when `op` spreads a range over nodes; `huge_index` is the
/// huge page's number in the address space (first base page / base pages per huge page).
///
/// `Interleave` goes round-robin by huge-page index (as the kernel interleaves huge pages
/// at fault time). `Weighted` picks by a golden-ratio (Weyl) sequence over the cumulative
/// weights: deterministic per huge page, so the same page gets the same node every cycle,
/// and any run of consecutive huge pages gets close to the shares asked (a repeated pattern
/// would put dozens of consecutive huge pages on the heaviest node). None: no node to give.
pub fn spread_node(op: &RangeOp, huge_index: u64) -> Option<NodeIdx> {
    match op {
        RangeOp::MoveTo(n) => Some(*n),
        RangeOp::Interleave(ns) if !ns.is_empty() => Some(ns[(huge_index % ns.len() as u64) as usize]),
        RangeOp::Interleave(_) => None,
        RangeOp::Weighted(ws) => {
            let total: u64 = ws.iter().map(|(_, w)| u64::from(*w)).sum();
            if total == 0 {
                return None;
            }
            // frac(h * (golden ratio - 1)) in 64-bit fixed point, scaled to [0, total).
            let u = huge_index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut x = ((u128::from(u) * u128::from(total)) >> 64) as u64;
            for (n, w) in ws {
                if x < u64::from(*w) {
                    return Some(*n);
                }
                x -= u64::from(*w);
            }
            ws.iter().rev().find(|(_, w)| *w > 0).map(|(n, _)| *n)
        }
    }
}

/// Per huge page: base pages asked per node, and the order of each node's first ask.
#[derive(Default)]
struct Vote {
    page_pages: u64,
    by_node: BTreeMap<NodeIdx, (u64, usize)>,
}

impl Vote {
    fn ask(&mut self, n: NodeIdx, pages: u64, order: usize) {
        let e = self.by_node.entry(n).or_insert((0, order));
        e.0 += pages;
    }
    /// The winner (most pages, then asked first) and the pages asked elsewhere.
    fn winner(&self) -> Option<(NodeIdx, u64)> {
        let (n, (c, _)) = self.by_node.iter().max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1)))?;
        let all: u64 = self.by_node.values().map(|v| v.0).sum();
        Some((*n, all - c))
    }
}

/// The huge-page backing of the region of `app` that holds `vpn`, when it has any.
fn backing_of(regions: &[Region], app: AppId, vpn: u64) -> Option<&HugeBacking> {
    regions
        .iter()
        .find(|r| r.app == app && r.start_vpn <= vpn && vpn < r.start_vpn + r.npages)
        .map(|r| &r.huge)
        .filter(|h| !h.is_empty())
}

/// Rewrite `plan` so that every huge page of `regions` it touches goes to one node as a whole
/// (see the module doc). Thread moves, sampling requests and stats pass unchanged; stats gain
/// `huge_pages_planned` and `huge_pages_outvoted_pages` when a huge page was touched.
pub fn whole_huge_pages(mut plan: Plan, regions: &[Region]) -> Plan {
    if regions.iter().all(|r| r.huge.is_empty()) || (plan.pages.is_empty() && plan.ranges.is_empty()) {
        return plan;
    }
    let mut votes: BTreeMap<(AppId, u64), Vote> = BTreeMap::new();
    let mut order = 0usize;
    let mut ask = |app: AppId, head: u64, pp: u64, n: NodeIdx, pages: u64| {
        let v = votes.entry((app, head)).or_default();
        v.page_pages = pp;
        v.ask(n, pages, order);
        order += 1;
    };
    let mut pages = Vec::with_capacity(plan.pages.len());
    for p in std::mem::take(&mut plan.pages) {
        let hb = backing_of(regions, p.page.app, p.page.vpn);
        match hb.and_then(|h| Some((h.head_of(p.page.vpn)?, h.page_pages))) {
            Some((head, pp)) => ask(p.page.app, head, pp, p.to, 1),
            None => pages.push(p),
        }
    }
    let mut ranges = Vec::with_capacity(plan.ranges.len());
    for r in std::mem::take(&mut plan.ranges) {
        let (start, end) = (r.start_vpn, r.start_vpn.saturating_add(r.npages));
        // The huge pages the range touches, in address order: (head, base pages per huge page).
        let mut heads: Vec<(u64, u64)> = Vec::new();
        for reg in regions.iter().filter(|x| x.app == r.app && !x.huge.is_empty()) {
            let pp = reg.huge.page_pages;
            for &(s, e) in &reg.huge.ranges {
                let (lo, hi) = (s.max(start), e.min(end));
                if lo < hi {
                    let first = s + (lo - s) / pp * pp;
                    heads.extend((first..hi).step_by(pp as usize).map(|h| (h, pp)));
                }
            }
        }
        heads.sort_unstable();
        heads.dedup_by_key(|h| h.0);
        // Stretches between huge pages keep the action; each huge page is asked for the node
        // `spread_node` gives it, with the base pages the range covers as its votes.
        let mut from = start;
        for (head, pp) in heads {
            if head.max(start) > from {
                ranges.push(RangeAction { app: r.app, start_vpn: from, npages: head - from, op: r.op.clone() });
            }
            let covered = (head + pp).min(end) - head.max(start);
            if let Some(n) = spread_node(&r.op, head / pp) {
                ask(r.app, head, pp, n, covered);
            }
            from = from.max((head + pp).min(end));
        }
        if from < end {
            ranges.push(RangeAction { app: r.app, start_vpn: from, npages: end - from, op: r.op.clone() });
        }
    }
    let (mut planned, mut outvoted) = (0u64, 0u64);
    let mut whole: Vec<RangeAction> = Vec::new();
    for ((app, head), v) in &votes {
        let Some((n, lost)) = v.winner() else { continue };
        planned += 1;
        outvoted += lost;
        // Neighbouring huge pages going to the same node make one range.
        match whole.last_mut() {
            Some(w) if w.app == *app && w.start_vpn + w.npages == *head && w.op == RangeOp::MoveTo(n) => {
                w.npages += v.page_pages;
            }
            _ => whole.push(RangeAction { app: *app, start_vpn: *head, npages: v.page_pages, op: RangeOp::MoveTo(n) }),
        }
    }
    ranges.extend(whole);
    plan.pages = pages;
    plan.ranges = ranges;
    if planned > 0 {
        *plan.stats.entry("huge_pages_planned".into()).or_default() += planned as f64;
        *plan.stats.entry("huge_pages_outvoted_pages".into()).or_default() += outvoted as f64;
    }
    plan
}

/// A policy whose plans are passed through [`whole_huge_pages`]; everything else is the inner
/// policy's.
pub struct WholeHugePages {
    inner: Box<dyn Policy>,
}

impl WholeHugePages {
    pub fn wrap(inner: Box<dyn Policy>) -> Self {
        WholeHugePages { inner }
    }
}

impl Policy for WholeHugePages {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        self.inner.start(ctx)
    }
    fn sampling(&self) -> SamplingRequest {
        self.inner.sampling()
    }
    fn decide(&mut self, snap: &Snapshot) -> Plan {
        whole_huge_pages(self.inner.decide(snap), snap.regions)
    }
}

#[cfg(test)]
mod tests;

//! Moving one process's pages so that the report is true: huge pages moved whole and once,
//! and every move checked against where the page really is afterwards.
//!
//! ```text
//! asks ─group─▶ base pages + huge pages (one node each)      [units]
//!      ─prepare─▶ query where they are; drop what is already there
//!      ─(admit: budget, headroom; in the actuator)
//!      ─execute─▶ move_pages: base pages, one entry per huge page
//!               ─▶ query every moved page (and every page of each huge page)
//!               ─▶ classify: moved / huge page moved / failed (by reason)
//!               ─▶ second pass for blocks that turned out to be base pages
//! ```
//!
//! Problem: the kernel's per-page status says where it *put* a page, not where the page *is*
//! at the end of the call: a base page inside a huge page that a later entry migrated again
//! reads as moved. Counting statuses made ptb report "N pages moved, 0 failed" while most
//! pages sat elsewhere.
//!
//! Approach: a huge page gets one entry (its head; for an assumed one, one asked page). After
//! the call every page is queried: a base page is moved only if it is on its node now; a
//! huge page is moved only if every page of it is. A page asked for a node that its huge
//! page did not go to is a failure with reason `huge-page`, never a success. An assumed huge
//! page whose other pages did not follow its moved page was base pages: each of its asked
//! pages is then moved on its own (second pass) and counted as a base page.

use crate::backing::Unit;
use crate::units::{Ask, Grouped, HugeAsk};
use std::collections::BTreeMap;

/// The reason of a page asked for a node its huge page did not go to.
pub const HUGE_PAGE: &str = "huge-page";
/// The reason of a page of a huge page that the kernel split to migrate it and that stayed.
pub const SPLIT: &str = "split";

/// The kernel calls the pipeline makes (a fake kernel in tests).
pub trait Kernel {
    /// Where each page is (kernel node), or a negative errno.
    fn query(&self, pid: u32, vpns: &[u64]) -> Vec<i32>;
    /// Move each page to its node; per entry the status the kernel gave (node or -errno).
    fn move_pages(&self, pid: u32, moves: &[(u64, i32)]) -> Vec<i32>;
}

/// A huge page to move, with where each of its pages was before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HugeWork {
    pub ask: HugeAsk,
    /// Node (or -errno) of each base page of the unit, in order.
    pub before: Vec<i32>,
    /// Pages whose move migrates the huge page, tried in turn while the kernel answers with
    /// a reason that may pass (a page under a protection, busy): pages the plan asked first
    /// (recently sampled, so likely accessible), then the head.
    pub probes: Vec<u64>,
}

impl HugeWork {
    /// Present pages not yet on the huge page's node: what the move copies.
    pub fn to_move(&self) -> u64 {
        self.before.iter().filter(|&&s| s >= 0 && s != self.ask.node).count() as u64
    }
}

/// One process's moves, ready to admit and execute.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    pub pid: u32,
    pub base: Vec<Ask>,
    pub huge: Vec<HugeWork>,
    /// Base pages asked that are on their node already: only checked after the moves (a
    /// huge page nobody knew of may take them along).
    pub stay: Vec<Ask>,
    /// Pages asked for another node than their huge page, which is on its node already.
    pub outvoted: Vec<Ask>,
}

/// What executing one process's moves did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Base pages now on the node asked.
    pub pages_moved: u64,
    /// Huge pages now wholly on their node.
    pub huge_pages_moved: u64,
    /// Base pages asked and not on their node, by reason.
    pub failed: BTreeMap<String, u64>,
    /// (vpn, node, status) of failures that may pass, for the retry queue.
    pub retry: Vec<(u64, i32, i32)>,
    /// (vpn, node) of every base-page move tried (outvoted asks included).
    pub attempted: Vec<(u64, i32)>,
    /// (head vpn, node, base pages) of every huge page moved or tried whole.
    pub huge: Vec<(u64, i32, u64)>,
    /// (vpn, reason) of every failure: a base page, or a huge page by its head.
    pub failures: Vec<(u64, String)>,
}

impl Outcome {
    fn fail(&mut self, vpn: u64, node: i32, why: String, pages: u64, status: Option<i32>) {
        *self.failed.entry(why.clone()).or_default() += pages;
        self.failures.push((vpn, why));
        if let Some(s) = status {
            self.retry.push((vpn, node, s));
        }
    }
}

/// Probes tried per huge page and apply.
pub const MAX_PROBES: usize = 3;

/// A failure that may pass by the next try: the page was not present (swapped, or under a
/// protection such as a NUMA hinting fault: some kernels answer ENOENT for those, e.g.
/// Debian's 6.1 in the VM tests, while 6.12 migrates them), busy, or left in place by the
/// kernel for a transient reason.
pub fn may_pass(status: i32) -> bool {
    status >= 0 || status == -libc::ENOENT || status == -libc::EBUSY || status == -libc::EAGAIN
}

/// The reason a page did not move, from its status.
pub fn failure_name(status: i32) -> String {
    if status < 0 {
        crate::sys::errno_name(-status)
    } else {
        "not-moved".into()
    }
}

/// Look where the asked pages are; keep only what must move.
pub fn prepare(pid: u32, g: Grouped, k: &dyn Kernel) -> Prepared {
    let mut p = Prepared { pid, ..Default::default() };
    let vpns: Vec<u64> = g.base.iter().map(|a| a.vpn).collect();
    let now = k.query(pid, &vpns);
    // A page already on its node needs nothing; a page that is not there (ENOENT, ...) is
    // still asked, so the kernel's answer is reported.
    for (a, s) in g.base.into_iter().zip(now) {
        if s == a.node {
            p.stay.push(a);
        } else {
            p.base.push(a);
        }
    }
    for h in g.huge {
        let Unit { head, pages, known } = h.unit;
        let before = k.query(pid, &(head..head + pages).collect::<Vec<_>>());
        let at = |v: u64| before[(v - head) as usize];
        let w = HugeWork { probes: vec![], before: before.clone(), ask: h };
        if w.to_move() == 0 {
            // The whole huge page is on its node (or nothing of it is present).
            p.outvoted.extend(w.ask.outvoted());
            continue;
        }
        // A huge page's move takes it all, so any page of it migrates it: asked pages not
        // there yet first. Where it is only assumed, only asked pages are used: if the block
        // turns out to be base pages, nothing the plan did not ask for has moved.
        let mut probes: Vec<u64> = w
            .ask
            .winners()
            .filter(|a| at(a.vpn) >= 0 && at(a.vpn) != w.ask.node)
            .map(|a| a.vpn)
            .take(MAX_PROBES)
            .collect();
        if known && !probes.contains(&head) {
            probes.truncate(MAX_PROBES - 1);
            probes.push(head);
        }
        if probes.is_empty() {
            // Assumed, and every page asked for the winner is there while others are not: not
            // one huge page. Base pages, each to where it was asked.
            p.base.extend(w.ask.asks.iter().filter(|a| at(a.vpn) != a.node));
        } else {
            p.huge.push(HugeWork { probes, ..w });
        }
    }
    p
}

/// Move, check, and count (see the module doc).
pub fn execute(p: Prepared, k: &dyn Kernel) -> Outcome {
    let mut o = Outcome::default();
    let pid = p.pid;
    let mut entries: Vec<(u64, i32)> = p.base.iter().map(|a| (a.vpn, a.node)).collect();
    entries.extend(p.huge.iter().map(|w| (w.probes[0], w.ask.node)));
    let status = k.move_pages(pid, &entries);
    let (base_st, huge_st) = status.split_at(p.base.len().min(status.len()));
    // Per huge page: the probe used and the kernel's answer; a probe that failed for a reason
    // that may pass gives way to the next one.
    let mut huge_st: Vec<(u64, i32)> = p.huge.iter().zip(huge_st).map(|(w, s)| (w.probes[0], *s)).collect();
    for attempt in 1..MAX_PROBES {
        let again: Vec<usize> = (0..p.huge.len())
            .filter(|&i| {
                huge_st[i].1 != p.huge[i].ask.node && may_pass(huge_st[i].1) && attempt < p.huge[i].probes.len()
            })
            .collect();
        if again.is_empty() {
            break;
        }
        let moves: Vec<(u64, i32)> = again.iter().map(|&i| (p.huge[i].probes[attempt], p.huge[i].ask.node)).collect();
        for (&i, st) in again.iter().zip(k.move_pages(pid, &moves)) {
            huge_st[i] = (p.huge[i].probes[attempt], st);
        }
    }
    // Query every page the kernel says it put in place, and every page of each huge page.
    let mut check: Vec<u64> = p.base.iter().zip(base_st).filter(|(a, s)| **s == a.node).map(|(a, _)| a.vpn).collect();
    let n_base_check = check.len();
    for w in &p.huge {
        check.extend(w.ask.unit.head..w.ask.unit.head + w.ask.unit.pages);
    }
    let n_huge_check = check.len() - n_base_check;
    check.extend(p.stay.iter().map(|a| a.vpn));
    let after = k.query(pid, &check);
    let (base_after, rest) = after.split_at(n_base_check.min(after.len()));
    let (mut huge_after, stay_after) = rest.split_at(n_huge_check.min(rest.len()));
    // Base pages.
    let mut checked = base_after.iter();
    for (a, s) in p.base.iter().zip(base_st) {
        o.attempted.push((a.vpn, a.node));
        if *s != a.node {
            o.fail(a.vpn, a.node, failure_name(*s), 1, Some(*s));
        } else if checked.next().is_none_or(|x| *x == a.node || *x < 0) {
            // On its node, or not visible to the query now: the kernel's status stands.
            o.pages_moved += 1;
        } else {
            // The kernel put it there, and something moved it on: the huge page it is part of.
            o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
        }
    }
    for a in &p.outvoted {
        o.attempted.push((a.vpn, a.node));
        o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
    }
    // Pages that were in place: still there, unless a huge page nobody knew of took them along.
    for (a, now) in p.stay.iter().zip(stay_after) {
        if *now >= 0 && *now != a.node {
            o.attempted.push((a.vpn, a.node));
            o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
        }
    }
    // Huge pages.
    let mut second: Vec<Ask> = Vec::new();
    for (w, &(probe, s)) in p.huge.iter().zip(&huge_st) {
        let n = w.ask.unit.pages as usize;
        let (now, rest) = huge_after.split_at(n.min(huge_after.len()));
        huge_after = rest;
        let (head, node) = (w.ask.unit.head, w.ask.node);
        let winners = w.ask.winners().count() as u64;
        if s != node {
            o.huge.push((head, node, w.ask.unit.pages));
            o.fail(head, node, failure_name(s), winners.max(1), Some(s));
            for a in w.ask.outvoted() {
                o.attempted.push((a.vpn, a.node));
                o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
            }
            continue;
        }
        // Pages the query cannot see now (a page under a protection reads as ENOENT on some
        // kernels) neither confirm nor contradict the move.
        let moving: Vec<usize> = (0..n).filter(|&i| w.before[i] >= 0 && w.before[i] != node).collect();
        let seen: Vec<usize> = moving.iter().copied().filter(|&i| now.get(i).is_some_and(|x| *x >= 0)).collect();
        let followed = seen.iter().filter(|&&i| now[i] == node).count();
        let probe_i = (probe - head) as usize;
        let others = seen.iter().filter(|&&i| i != probe_i).count();
        let others_followed = seen.iter().filter(|&&i| i != probe_i && now[i] == node).count();
        let whole = followed == seen.len() && (w.ask.unit.known || others > 0);
        if whole {
            o.huge_pages_moved += 1;
            o.huge.push((head, node, w.ask.unit.pages));
            for a in w.ask.outvoted() {
                o.attempted.push((a.vpn, a.node));
                o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
            }
        } else if w.ask.unit.known {
            // The kernel split it to migrate it (no free huge page on the node, for one) and
            // left part behind: what moved counts as base pages; every page left behind is
            // logged, and those the plan asked are failures, retried as the base pages they
            // are now.
            o.huge.push((head, node, w.ask.unit.pages));
            o.pages_moved += followed as u64;
            let asked: std::collections::HashSet<u64> = w.ask.winners().map(|a| a.vpn).collect();
            for &i in seen.iter().filter(|&&i| now[i] != node) {
                let vpn = head + i as u64;
                if asked.contains(&vpn) {
                    o.fail(vpn, node, SPLIT.into(), 1, Some(0));
                } else {
                    o.failures.push((vpn, SPLIT.into()));
                }
            }
            for a in w.ask.outvoted() {
                o.attempted.push((a.vpn, a.node));
                o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
            }
        } else {
            // Assumed, and only the probe moved (others_followed < others): base pages. The
            // probe counts; every other asked page goes where it was asked, on its own.
            o.attempted.push((probe, node));
            if now.get(probe_i).is_none_or(|x| *x == node || *x < 0) {
                o.pages_moved += 1;
            }
            o.pages_moved += others_followed as u64;
            second.extend(
                w.ask.asks.iter().filter(|a| a.vpn != probe && now.get((a.vpn - head) as usize) != Some(&a.node)),
            );
        }
    }
    if !second.is_empty() {
        let moves: Vec<(u64, i32)> = second.iter().map(|a| (a.vpn, a.node)).collect();
        let st = k.move_pages(pid, &moves);
        let after = k.query(pid, &second.iter().map(|a| a.vpn).collect::<Vec<_>>());
        for ((a, s), now) in second.iter().zip(&st).zip(&after) {
            o.attempted.push((a.vpn, a.node));
            if *s == a.node && (*now == a.node || *now < 0) {
                o.pages_moved += 1;
            } else if *s != a.node {
                o.fail(a.vpn, a.node, failure_name(*s), 1, Some(*s));
            } else {
                o.fail(a.vpn, a.node, HUGE_PAGE.into(), 1, None);
            }
        }
    }
    o
}

#[cfg(test)]
mod tests;

//! AsymSched's memory migration: what it costs, full migration of an application that left its
//! memory behind, and dynamic migration of the pages its samples show in use.
//!
//! Problem: once threads move, their data must follow, or the placement buys nothing; but the
//! paper caps the time spent migrating (spent + predicted) at 5% of the run so far, so the
//! moves that matter most must go first, and a page must not bounce between nodes on noise.
//!
//! Approach (../shared/spec/asymsched.md, "Migration"):
//! - *Cost*: the machine file's cost of moving one page (the larger of `page_us` and
//!   page size / `copy_gbps`: both describe the same measured migration) spread over the CPUs
//!   of the destination nodes, since the paper's migration runs one worker per CPU of the
//!   target nodes; or `s_per_gb` when set (the paper measured 0.3 s/GB on its machine).
//! - *Full migration*: `full_after` (2 s) after an application's threads left some nodes, if
//!   more than `full_threshold` (90%) of its sampled memory accesses still go to those nodes,
//!   all its memory moves to its new nodes (range actions: one node, or spread round-robin).
//! - *Dynamic migration*, for applications whose threads AsymSched has placed, hottest pages
//!   first, within the budget:
//!   1. a page on a node the application does not use goes to its users (the least loaded of
//!      them), else to the least loaded of the application's nodes;
//!   2. a page used by one node only goes there, once `private_min` samples have shown it
//!      (counted over the cycles since the application's threads last changed node, so one
//!      sample of a shared page does not move it);
//!   3. a shared page is spread: it leaves a node that serves more than `1 + spread_slack`
//!      times the application's mean sampled traffic per node, for the least loaded of its
//!      users below the mean.
//!
//! Load = sampled uses of the application's pages per node this cycle, updated as pages are
//! planned to move.

use super::clusters::{Measure, PageUse};
use super::{AsymSched, Hist, Moved};
use crate::plan::{PageMove, Plan, RangeAction, RangeOp};
use crate::snapshot::Snapshot;
use ptb_profile::AppId;
use ptb_topology::{Machine, NodeIdx};
use std::collections::{BTreeMap, BTreeSet};

/// History entries kept at most (about 24 bytes each); the table is cleared beyond.
const MAX_HISTORY: usize = 1 << 22;

/// Where one application runs after this cycle's decision.
#[derive(Clone, Debug)]
pub struct AppNodes {
    /// Nodes with memory its pages may go to (its threads' nodes).
    pub mem: Vec<NodeIdx>,
    /// Per current node `c` (bit index): mask of the nodes its threads on `c` go to.
    pub to: Vec<u64>,
    /// CPUs of the nodes in `mem` (the migration workers).
    pub cpus: usize,
}

impl AsymSched {
    /// Seconds to migrate `pages` pages to nodes with `cpus` CPUs in all (see module docs).
    pub(super) fn migration_s(&self, m: &Machine, pages: u64, cpus: usize) -> f64 {
        let bytes = pages as f64 * m.page_size as f64;
        match self.cfg.s_per_gb {
            Some(s) => bytes / 1e9 * s,
            None => {
                let per_page = (m.costs.page_us * 1e-6).max(m.page_size as f64 / (m.costs.copy_gbps.max(1e-6) * 1e9));
                pages as f64 * per_page / cpus.max(1) as f64
            }
        }
    }

    /// Full migration of the applications due (see module docs). Returns the apps moved.
    pub(super) fn full_migrations(
        &mut self,
        snap: &Snapshot,
        meas: &Measure,
        resident: &BTreeMap<AppId, Vec<u64>>,
        room: &mut [u64],
        budget_s: f64,
        plan: &mut Plan,
    ) -> BTreeSet<AppId> {
        let m = snap.machine;
        let nn = m.n_nodes();
        let mut done = BTreeSet::new();
        let due: Vec<AppId> =
            self.pending.iter().filter(|(_, mv)| snap.now >= mv.at + self.cfg.full_after).map(|(a, _)| *a).collect();
        for app in due {
            let mv: Moved = self.pending[&app].clone();
            let acc = meas.by_app.get(&app);
            let total: u64 = acc.map_or(0, |v| v.iter().sum());
            let on_left: u64 = acc.map_or(0, |v| mv.left.iter().map(|n| v[n.ix()]).sum());
            if total == 0 || (on_left as f64) <= self.cfg.full_threshold * total as f64 {
                self.pending.remove(&app);
                continue;
            }
            let dest: Vec<NodeIdx> =
                mv.to.iter().copied().filter(|n| snap.allowed.contains_idx(*n) && m.node(*n).has_memory()).collect();
            if dest.is_empty() {
                self.pending.remove(&app);
                continue;
            }
            let res = resident.get(&app);
            let on = |n: &NodeIdx| res.map_or(0, |v| v.get(n.ix()).copied().unwrap_or(0));
            let all: u64 = res.map_or(0, |v| v.iter().sum());
            let in_dest: u64 = dest.iter().map(on).sum();
            // Pages already on a destination node stay only where the spread puts them there.
            let moving = all - in_dest / dest.len() as u64;
            let cpus: usize = dest.iter().map(|n| m.node(*n).cpus.len()).sum();
            let cost = self.migration_s(m, moving, cpus);
            if self.spent_s + cost > budget_s {
                plan.stats.insert("full_migration_deferred".into(), 1.0);
                continue; // try again next cycle
            }
            let mut ranges = Vec::new();
            let mut need = vec![0u64; nn];
            for r in snap.regions.iter().filter(|r| r.app == app) {
                let held: u64 = r.resident.iter().sum();
                if held == 0 {
                    continue;
                }
                let op = if let [d] = dest[..] {
                    need[d.ix()] += held;
                    RangeOp::MoveTo(d)
                } else {
                    dest.iter().for_each(|d| need[d.ix()] += held.div_ceil(dest.len() as u64));
                    RangeOp::Interleave(dest.clone())
                };
                ranges.push(RangeAction { app, start_vpn: r.start_vpn, npages: r.npages, op });
            }
            if ranges.is_empty() || need.iter().zip(room.iter()).any(|(n, r)| n > r) {
                self.pending.remove(&app);
                continue;
            }
            need.iter().enumerate().for_each(|(i, n)| room[i] -= n);
            self.spent_s += cost;
            self.pending.remove(&app);
            self.epoch_bump(app);
            done.insert(app);
            plan.ranges.extend(ranges);
        }
        done
    }

    /// Forget the page history of `app` (its pages' users changed meaning).
    pub(super) fn epoch_bump(&mut self, app: AppId) {
        *self.epochs.entry(app).or_default() += 1;
    }

    /// Dynamic migration (see module docs) for the apps in `placed`, except those in `skip`.
    #[allow(clippy::too_many_arguments)] // the cycle's shared state, threaded through once
    pub(super) fn dynamic_moves(
        &mut self,
        snap: &Snapshot,
        meas: &Measure,
        placed: &BTreeMap<AppId, AppNodes>,
        skip: &BTreeSet<AppId>,
        room: &mut [u64],
        budget_s: f64,
        plan: &mut Plan,
    ) {
        let m = snap.machine;
        let nn = m.n_nodes();
        if self.history.len() > MAX_HISTORY {
            self.history.clear();
        }
        // Users of each page in the nodes the threads go to, and the apps' loads.
        let mut load: BTreeMap<AppId, Vec<f64>> = BTreeMap::new();
        let mut users: Vec<u64> = vec![0; meas.pages.len()];
        let mut private: Vec<bool> = vec![false; meas.pages.len()];
        for (i, p) in meas.pages.iter().enumerate() {
            let Some(an) = placed.get(&p.key.app) else { continue };
            let to = (0..nn.min(64)).filter(|c| p.on >> c & 1 == 1).fold(0u64, |acc, c| acc | an.to[c]);
            let epoch = self.epochs.get(&p.key.app).copied().unwrap_or(0);
            let h = self.history.entry(p.key).or_insert(Hist { on: 0, count: 0, epoch });
            if h.epoch != epoch {
                *h = Hist { on: 0, count: 0, epoch };
            }
            h.on |= to;
            h.count = h.count.saturating_add(p.count);
            users[i] = h.on;
            private[i] = h.on.count_ones() == 1 && h.count >= self.cfg.private_min;
            if let Some(n) = p.node {
                load.entry(p.key.app).or_insert_with(|| vec![0.0; nn])[n.ix()] += p.count as f64;
            }
        }
        // Hottest first (counting sort on the sample count, stable).
        let max = meas.pages.iter().map(|p| p.count).max().unwrap_or(0) as usize;
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); max.min(1 << 16) + 1];
        for (i, p) in meas.pages.iter().enumerate() {
            if placed.contains_key(&p.key.app) && !skip.contains(&p.key.app) {
                buckets[(p.count as usize).min(1 << 16)].push(i as u32);
            }
        }
        let mut moved = 0u64;
        'pages: for b in buckets.iter().rev() {
            for &i in b {
                let p: &PageUse = &meas.pages[i as usize];
                let Some(cur) = p.node else { continue };
                let an = &placed[&p.key.app];
                let Some(ld) = load.get_mut(&p.key.app) else { continue };
                let Some(to) = pick(an, users[i as usize], private[i as usize], cur, ld, self.cfg.spread_slack) else {
                    continue;
                };
                if room[to.ix()] == 0 {
                    continue;
                }
                let cost = self.migration_s(m, 1, an.cpus);
                if self.spent_s + cost > budget_s {
                    plan.stats.insert("dynamic_budget_exhausted".into(), 1.0);
                    break 'pages;
                }
                self.spent_s += cost;
                room[to.ix()] -= 1;
                ld[cur.ix()] -= p.count as f64;
                ld[to.ix()] += p.count as f64;
                moved += 1;
                plan.pages.push(PageMove { page: p.key, to });
            }
        }
        plan.stats.insert("pages_dynamic".into(), moved as f64);
    }
}

/// Where a sampled page should go, if anywhere (rules 1-3 of the module docs).
fn pick(an: &AppNodes, users: u64, private: bool, cur: NodeIdx, load: &[f64], slack: f64) -> Option<NodeIdx> {
    let mem = &an.mem;
    if mem.is_empty() {
        return None;
    }
    let is_user = |n: &NodeIdx| n.ix() < 64 && users >> n.ix() & 1 == 1;
    let least = |cands: &mut dyn Iterator<Item = NodeIdx>| -> Option<NodeIdx> {
        cands.min_by(|a, b| load[a.ix()].total_cmp(&load[b.ix()]).then(a.cmp(b)))
    };
    if !mem.contains(&cur) {
        return least(&mut mem.iter().copied().filter(is_user)).or_else(|| least(&mut mem.iter().copied()));
    }
    if private {
        let u = mem.iter().copied().find(is_user)?;
        return (u != cur).then_some(u);
    }
    if users.count_ones() < 2 {
        return None;
    }
    let mean = mem.iter().map(|n| load[n.ix()]).sum::<f64>() / mem.len() as f64;
    if load[cur.ix()] <= (1.0 + slack) * mean {
        return None;
    }
    least(&mut mem.iter().copied().filter(|n| is_user(n) && load[n.ix()] < mean))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn an(mem: &[u16]) -> AppNodes {
        AppNodes { mem: mem.iter().map(|&n| NodeIdx(n)).collect(), to: vec![], cpus: 8 }
    }

    #[test]
    fn pages_off_the_apps_nodes_go_to_their_least_loaded_user() {
        let a = an(&[1, 2, 3]);
        let load = [100.0, 5.0, 3.0, 1.0];
        // Users 1 and 2: the less loaded user (2), not node 3 (no user).
        assert_eq!(pick(&a, 0b0110, false, NodeIdx(0), &load, 0.25), Some(NodeIdx(2)));
        // No user among the app's nodes: the least loaded of them.
        assert_eq!(pick(&a, 0b0001, false, NodeIdx(0), &load, 0.25), Some(NodeIdx(3)));
    }

    #[test]
    fn private_pages_go_to_their_user_shared_ones_only_off_a_hot_node() {
        let a = an(&[0, 1, 2]);
        let even = [10.0, 10.0, 10.0];
        assert_eq!(pick(&a, 0b010, true, NodeIdx(0), &even, 0.25), Some(NodeIdx(1)));
        assert_eq!(pick(&a, 0b001, true, NodeIdx(0), &even, 0.25), None, "already there");
        // One sample from one node is not enough evidence (not private yet): stays.
        assert_eq!(pick(&a, 0b010, false, NodeIdx(0), &even, 0.25), None);
        // Shared, balanced: stays. Shared, on a hot node: to the coolest user below the mean.
        assert_eq!(pick(&a, 0b011, false, NodeIdx(0), &even, 0.25), None);
        let hot = [30.0, 10.0, 2.0];
        assert_eq!(pick(&a, 0b011, false, NodeIdx(0), &hot, 0.25), Some(NodeIdx(1)));
        assert_eq!(pick(&a, 0b111, false, NodeIdx(0), &hot, 0.25), Some(NodeIdx(2)));
        assert_eq!(pick(&an(&[]), 0b1, false, NodeIdx(0), &hot, 0.25), None);
    }

    #[test]
    fn migration_cost_uses_the_machine_or_the_papers_figure() {
        let m = ptb_topology::synthetic::synthetic("nodes=2").unwrap();
        let mut p = AsymSched::new(super::super::Config::default());
        let per_page = (m.costs.page_us * 1e-6).max(4096.0 / (m.costs.copy_gbps * 1e9));
        assert!((p.migration_s(&m, 1000, 4) - 1000.0 * per_page / 4.0).abs() < 1e-12);
        assert!(p.migration_s(&m, 1000, 8) < p.migration_s(&m, 1000, 4), "more workers, less time");
        p.cfg.s_per_gb = Some(0.3);
        let gb = 1e9 / 4096.0;
        assert!((p.migration_s(&m, gb as u64, 4) - 0.3).abs() < 1e-3);
    }
}

//! Page phase: NodeScore against the remaining bandwidth budgets, Min_Acc, C2, interleave once
//! the budgets are spent (spec "3. Page distribution").
//!
//! Choices where the spec is open:
//! - Demand `b_n[p] = (sum over threads on n of A_t[p]) * ls / tau`, in GB/s like the Bandwidth
//!   Graph. Threads count on the node the thread phase just chose. `tau` is the snapshot's cycle
//!   length. The formula as printed does not say what one sample stands for (the thesis calls
//!   it a relative measure against the budgets). We multiply by the sampling period
//!   (`scale_by_period = true`, the default): a sample then stands for `period` sampler events,
//!   which puts `b` on the budgets' scale. Without the factor, with IBS op sampling every 131072
//!   cycles, the ~25 samples a slot gathers per cycle make 1.6 KB/s against budgets of GB/s: the
//!   budgets are never used up, C2 keeps every page where it is, and PTB moves nothing, unlike
//!   the thesis' PTB, which spread canneal's pages (1.84x, near interleave's ~2x) and moved many
//!   pages per cycle on the programs it slowed down.
//! - Budgets: `B_n[n'] = BG(n', n)`, the node-level optimistic Bandwidth Graph from the CPUs of
//!   n' to memory on n ("threads on n' reading memory on n"). A machine without a Bandwidth Graph
//!   gets `10 / SLIT(n', n)` (relative, local = 1) or 1 everywhere when distances are unknown too.
//! - Page order: decreasing total sampled accesses, ties by page key (the source iterated its
//!   table; hot pages first means budgets go to the pages that matter most).
//! - Ties in NodeScore go to the page's current node, else to the lowest node index (so a page
//!   with all-zero scores stays put).
//! - Pages below Min_Acc are never touched (not even interleaved). Once every budget is zero
//!   the loop stops and every remaining page with at least Min_Acc samples is interleaved
//!   round-robin over the allowed memory nodes, in page order.
//! - Free memory (not in the published algorithm, but the driver refuses a plan that overfills a
//!   node): a node without room for one more page is not chosen; the next best node is, or the
//!   page stays.

use super::profile::Profile;
use ptb_profile::PageKey;
use ptb_topology::{Machine, NodeIdx};

/// Inputs of the page phase besides the profile.
pub(crate) struct PageInputs<'a> {
    pub machine: &'a Machine,
    /// Allowed nodes with memory, ascending.
    pub mem_nodes: &'a [NodeIdx],
    /// New node (dense index) of every thread index.
    pub thread_node: &'a [usize],
    /// GB/s represented by one sample (ls / tau / 1e9, times the period when asked).
    pub gbps_per_sample: f64,
    pub c2: f64,
    pub min_acc: u64,
    /// Current node of a page.
    pub current: &'a dyn Fn(PageKey) -> Option<NodeIdx>,
    /// Free bytes per node (dense index); missing entries mean no room.
    pub free_bytes: &'a [u64],
}

/// What the page phase decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PageDecision {
    /// (page, chosen node) for every page with at least Min_Acc samples that got a home.
    pub homes: Vec<(PageKey, NodeIdx)>,
    pub considered: u64,
    pub skipped_min_acc: u64,
    pub interleaved: u64,
    pub budget_exhausted: bool,
    /// Smallest budget entry seen (never negative), for checks.
    pub min_budget: f64,
    /// Total budget left at the end, GB/s.
    pub budget_left: f64,
}

/// The starting budgets `B[n][n']` (GB/s), n = memory node, n' = node of the accessing threads.
pub(crate) fn budgets(m: &Machine) -> Vec<Vec<f64>> {
    let nn = m.n_nodes();
    (0..nn)
        .map(|n| {
            (0..nn)
                .map(|from| {
                    let (to, from) = (NodeIdx::from_ix(n), NodeIdx::from_ix(from));
                    if !m.node(from).has_cpus() || !m.node(to).has_memory() {
                        return 0.0;
                    }
                    let v = m
                        .node_bg(from, to)
                        .or_else(|| m.distance(from, to).filter(|d| *d > 0.0).map(|d| 10.0 / d))
                        .unwrap_or(1.0);
                    if v.is_finite() && v > 0.0 {
                        v
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect()
}

pub(crate) fn decide(prof: &Profile, inp: &PageInputs) -> PageDecision {
    let m = inp.machine;
    let nn = m.n_nodes();
    let mut b = budgets(m);
    let mut total_budget: f64 = inp.mem_nodes.iter().map(|n| b[n.ix()].iter().sum::<f64>()).sum();
    let mut room: Vec<u64> =
        (0..nn).map(|n| inp.free_bytes.get(n).copied().unwrap_or(0) / m.page_size.max(1)).collect();
    let mut out = PageDecision { min_budget: f64::INFINITY, ..PageDecision::default() };

    // Pages below Min_Acc are never touched: count them and leave them out of the sort. The
    // sort key is copied next to the index so sorting millions of pages stays cache-friendly.
    let mut keyed: Vec<(std::cmp::Reverse<u64>, PageKey, u32)> = prof
        .pages
        .iter()
        .enumerate()
        .filter(|(_, r)| r.total >= inp.min_acc)
        .map(|(i, r)| (std::cmp::Reverse(r.total), r.key, i as u32))
        .collect();
    out.skipped_min_acc = (prof.pages.len() - keyed.len()) as u64;
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|x| x.2 as usize).collect();

    let mut demand = vec![0.0f64; nn];
    let mut rr = 0usize;
    let mut k = 0;
    while k < order.len() {
        let row = &prof.pages[order[k]];
        if total_budget <= 0.0 {
            out.budget_exhausted = true;
            break;
        }
        k += 1;
        out.considered += 1;
        demand.fill(0.0);
        for &(t, c) in prof.cells(row) {
            demand[inp.thread_node[t as usize]] += f64::from(c) * inp.gbps_per_sample;
        }
        let cur = (inp.current)(row.key);
        let mut best: Option<(usize, f64)> = None;
        for &n in inp.mem_nodes {
            let n = n.ix();
            if room[n] == 0 && cur.map(NodeIdx::ix) != Some(n) {
                continue;
            }
            let mut s: f64 = (0..nn).map(|from| b[n][from] * demand[from]).sum();
            if cur.map(NodeIdx::ix) == Some(n) {
                s *= inp.c2;
            }
            let better = match best {
                None => true,
                Some((bn, bs)) => {
                    s > bs || (s == bs && cur.map(NodeIdx::ix) == Some(n) && cur.map(NodeIdx::ix) != Some(bn))
                }
            };
            if better {
                best = Some((n, s));
            }
        }
        let Some((home, _)) = best else { continue };
        if cur.map(NodeIdx::ix) != Some(home) {
            room[home] -= 1;
        }
        out.homes.push((row.key, NodeIdx::from_ix(home)));
        for from in 0..nn {
            let before = b[home][from];
            let after = (before - demand[from]).max(0.0);
            b[home][from] = after;
            total_budget -= before - after;
            out.min_budget = out.min_budget.min(after);
        }
        if total_budget < 1e-12 {
            total_budget = 0.0;
        }
    }
    // Interleave the rest (pages with at least Min_Acc samples not yet placed).
    if out.budget_exhausted && !inp.mem_nodes.is_empty() {
        for &i in &order[k..] {
            let row = &prof.pages[i];
            let cur = (inp.current)(row.key).map(NodeIdx::ix);
            // Next node in round-robin order that can take the page.
            let mut placed = None;
            for _ in 0..inp.mem_nodes.len() {
                let n = inp.mem_nodes[rr % inp.mem_nodes.len()].ix();
                rr += 1;
                if room[n] > 0 || cur == Some(n) {
                    placed = Some(n);
                    break;
                }
            }
            if let Some(n) = placed {
                if cur != Some(n) {
                    room[n] -= 1;
                }
                out.homes.push((row.key, NodeIdx::from_ix(n)));
                out.interleaved += 1;
            }
        }
    }
    if out.min_budget == f64::INFINITY {
        out.min_budget = b.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    }
    out.budget_left = total_budget.max(0.0);
    out
}

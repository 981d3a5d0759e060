//! The plan log (`--plan-log FILE`): one JSON line per applied plan.
//!
//! Every node in a line is a kernel node id, as numactl and `/sys/devices/system/node` number
//! them (on `opteron6272-4n`: 0, 2, 4, 6), never a policy's dense index. The plan keeps the
//! shape of [`Plan`]'s own JSON, with each node translated on the way out:
//!
//! ```text
//! Plan (dense NodeIdx) ─▶ LoggedPlan (kernel ids) ─▶ {"cycle", "unix_ms", "plan", "page_moves", ...}
//! ```
//!
//! The page moves a real actuator tried come from its journal, which names kernel nodes
//! already; thread moves are logged as the CPU lists they set.

use crate::actuator::Journal;
use crate::daemon::{Act, Config};
use ptb_policy::{ApplyReport, Plan, RangeOp, SamplingRequest, ThreadTarget};
use ptb_profile::{AppId, PageKey, Tid};
use ptb_topology::{CpuId, Machine};
use serde::Serialize;
use std::collections::BTreeMap;

/// [`Plan`]'s JSON with kernel node ids.
#[derive(Serialize)]
struct LoggedPlan<'a> {
    threads: Vec<LoggedThreadMove>,
    pages: Vec<LoggedPageMove>,
    ranges: Vec<LoggedRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sampling: Option<SamplingRequest>,
    stats: &'a BTreeMap<String, f64>,
}

#[derive(Serialize)]
struct LoggedThreadMove {
    tid: Tid,
    to: LoggedTarget,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum LoggedTarget {
    Node(u32),
    Cpu(CpuId),
    Preferred(u32),
    /// A CPU group, by its name in the machine file.
    Group(String),
}

#[derive(Serialize)]
struct LoggedPageMove {
    page: PageKey,
    to: u32,
}

#[derive(Serialize)]
struct LoggedRange {
    app: AppId,
    start_vpn: u64,
    npages: u64,
    op: LoggedOp,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum LoggedOp {
    MoveTo(u32),
    Interleave(Vec<u32>),
    Weighted(Vec<(u32, u32)>),
}

fn logged_plan<'a>(m: &Machine, plan: &'a Plan) -> LoggedPlan<'a> {
    let threads = plan
        .threads
        .iter()
        .map(|t| LoggedThreadMove {
            tid: t.tid,
            to: match t.to {
                ThreadTarget::Node(n) => LoggedTarget::Node(m.kernel_id(n)),
                ThreadTarget::Cpu(c) => LoggedTarget::Cpu(c),
                ThreadTarget::Preferred(n) => LoggedTarget::Preferred(m.kernel_id(n)),
                ThreadTarget::Group(g) => {
                    LoggedTarget::Group(m.groups.get(g.ix()).map_or_else(|| g.to_string(), |x| x.name.clone()))
                }
            },
        })
        .collect();
    let pages = plan.pages.iter().map(|p| LoggedPageMove { page: p.page, to: m.kernel_id(p.to) }).collect();
    let ranges = plan
        .ranges
        .iter()
        .map(|r| LoggedRange {
            app: r.app,
            start_vpn: r.start_vpn,
            npages: r.npages,
            op: match &r.op {
                RangeOp::MoveTo(n) => LoggedOp::MoveTo(m.kernel_id(*n)),
                RangeOp::Interleave(ns) => LoggedOp::Interleave(ns.iter().map(|&n| m.kernel_id(n)).collect()),
                RangeOp::Weighted(ws) => LoggedOp::Weighted(ws.iter().map(|&(n, w)| (m.kernel_id(n), w)).collect()),
            },
        })
        .collect();
    LoggedPlan { threads, pages, ranges, sampling: plan.sampling, stats: &plan.stats }
}

/// The log line of one applied plan (`None` when there is nothing to log). `journal` is the
/// real actuator's (what it tried); without one, the plan's own moves are logged.
fn line(
    m: &Machine,
    cycle: u64,
    unix_ms: u64,
    plan: &Plan,
    report: &ApplyReport,
    journal: Option<&Journal>,
    dry_run: bool,
) -> Option<serde_json::Value> {
    // An empty plan still moves pages when earlier failures are retried: base pages
    // (`attempted`), whole huge pages (`huge`), or failures again (`failed`).
    if plan.is_empty() && journal.is_none_or(|j| j.attempted.is_empty() && j.huge.is_empty() && j.failed.is_empty()) {
        return None;
    }
    // The real actuator's journal has the pages actually tried (ranges expanded, retries
    // included) and which failed; a dry run logs the plan's own page moves.
    let moves: Vec<(u32, u64, i64)> = match journal {
        Some(j) => j.attempted.iter().map(|(p, v, n)| (*p, *v, i64::from(*n))).collect(),
        None => plan.pages.iter().map(|p| (p.page.app, p.page.vpn, i64::from(m.kernel_id(p.to)))).collect(),
    };
    let failures = journal.map(|j| j.failed.clone()).unwrap_or_default();
    let huge = journal.map(|j| j.huge.clone()).unwrap_or_default();
    let thp = journal.and_then(|j| j.thp).map(|t| {
        serde_json::json!({ "migration_success": t.migration_success, "migration_fail": t.migration_fail,
                            "migration_split": t.migration_split })
    });
    let threads: Vec<(u32, String)> = plan
        .threads
        .iter()
        .map(|t| {
            let cpus = match t.to {
                ThreadTarget::Node(n) => m.node(n).cpus.to_list(),
                ThreadTarget::Preferred(n) => format!("{} (once, preferred node)", m.node(n).cpus.to_list()),
                ThreadTarget::Cpu(c) => c.0.to_string(),
                ThreadTarget::Group(_) => t.to.cpus(m).map_or_else(String::new, |s| s.to_list()),
            };
            (t.tid, cpus)
        })
        .collect();
    let logged = logged_plan(m, plan);
    Some(if journal.is_none() && dry_run {
        // Nothing was tried: the moves are what the plan asked for.
        let r = serde_json::json!({ "threads_would_move": report.threads_moved, "pages_would_move": report.pages_moved,
                                    "ranges": report.ranges_applied });
        serde_json::json!({ "cycle": cycle, "unix_ms": unix_ms, "dry_run": true, "plan": logged, "would_move_pages": moves,
                            "would_move_threads": threads, "report": r })
    } else {
        serde_json::json!({ "cycle": cycle, "unix_ms": unix_ms, "plan": logged, "page_moves": moves, "page_failures": failures,
                            "huge_moves": huge, "thp": thp, "lookup_s": journal.map(|j| j.lookup_s),
                            "thread_moves": threads, "report": report })
    })
}

/// Append the line of an applied plan to `cfg.plan_log` (if set). A log that cannot be
/// written is warned about, never fatal: it must not stop the placement it records.
pub(crate) fn append(cfg: &Config, m: &Machine, cycle: u64, plan: &Plan, report: &ApplyReport, act: &Act) {
    let Some(path) = &cfg.plan_log else { return };
    let journal = match act {
        Act::Real(a) => a.journal(),
        Act::DryRun(_) => None,
    };
    let unix_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let Some(line) = line(m, cycle, unix_ms, plan, report, journal, matches!(act, Act::DryRun(_))) else { return };
    // Not through a symlink, not into another user's file (a root ptb, a log path in /tmp).
    let r = ptb_topology::input::create(path, "plan log", true)
        .map_err(|e| e.to_string())
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).map_err(|e| e.to_string()));
    if let Err(e) = r {
        tracing::warn!(path = %path.display(), error = %e, "cannot write the plan log");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptb_policy::{PageMove, RangeAction, ThreadMove};
    use ptb_topology::NodeIdx;

    /// A plan on `opteron6272-4n` (kernel nodes 0, 2, 4, 6) naming dense nodes 1..3.
    fn plan() -> Plan {
        Plan {
            threads: vec![
                ThreadMove { tid: 11, to: ThreadTarget::Node(NodeIdx(3)) },
                ThreadMove { tid: 12, to: ThreadTarget::Preferred(NodeIdx(2)) },
                ThreadMove { tid: 13, to: ThreadTarget::Cpu(CpuId(9)) },
            ],
            pages: vec![PageMove { page: PageKey { app: 7, vpn: 0x100 }, to: NodeIdx(1) }],
            ranges: vec![
                RangeAction { app: 7, start_vpn: 0x200, npages: 512, op: RangeOp::MoveTo(NodeIdx(2)) },
                RangeAction {
                    app: 7,
                    start_vpn: 0x400,
                    npages: 512,
                    op: RangeOp::Interleave(vec![NodeIdx(0), NodeIdx(1)]),
                },
                RangeAction {
                    app: 7,
                    start_vpn: 0x600,
                    npages: 512,
                    op: RangeOp::Weighted(vec![(NodeIdx(0), 100), (NodeIdx(1), 83), (NodeIdx(3), 100)]),
                },
            ],
            ..Plan::default()
        }
    }

    #[test]
    fn every_node_of_a_logged_plan_is_a_kernel_id() {
        let m = ptb_topology::resolve("opteron6272-4n").unwrap();
        assert_eq!(m.nodes.iter().map(|n| n.id.0).collect::<Vec<_>>(), [0, 2, 4, 6]);
        let (plan, report) = (plan(), ApplyReport::default());
        for dry_run in [true, false] {
            let v = line(&m, 3, 0, &plan, &report, None, dry_run).unwrap();
            let p = &v["plan"];
            assert_eq!(p["threads"][0]["to"], serde_json::json!({ "node": 6 }), "{p}");
            assert_eq!(p["threads"][1]["to"], serde_json::json!({ "preferred": 4 }), "{p}");
            assert_eq!(p["threads"][2]["to"], serde_json::json!({ "cpu": 9 }), "a CPU id stays: {p}");
            assert_eq!(p["pages"][0], serde_json::json!({ "page": { "app": 7, "vpn": 256 }, "to": 2 }), "{p}");
            assert_eq!(p["ranges"][0]["op"], serde_json::json!({ "move-to": 4 }), "{p}");
            assert_eq!(p["ranges"][1]["op"], serde_json::json!({ "interleave": [0, 2] }), "{p}");
            assert_eq!(p["ranges"][2]["op"], serde_json::json!({ "weighted": [[0, 100], [2, 83], [6, 100]] }), "{p}");
            let moves = if dry_run { &v["would_move_pages"] } else { &v["page_moves"] };
            assert_eq!(moves, &serde_json::json!([[7, 256, 2]]), "{v}");
        }
    }

    #[test]
    fn a_group_target_is_logged_by_its_name_and_its_cpus() {
        let m = ptb_topology::resolve("opteron6272-4n").unwrap();
        let g = m.node(NodeIdx(1)).groups[0];
        let plan = Plan { threads: vec![ThreadMove { tid: 11, to: ThreadTarget::Group(g) }], ..Plan::default() };
        let v = line(&m, 3, 0, &plan, &ApplyReport::default(), None, true).unwrap();
        assert_eq!(v["plan"]["threads"][0]["to"], serde_json::json!({ "group": "P2" }), "{v}");
        assert!(v.to_string().contains("16-23"), "the group's CPUs: {v}");
    }

    #[test]
    fn the_logged_plan_keeps_the_shape_of_the_plans_json() {
        // Same keys as `Plan`'s own serialisation: readers of older logs keep working.
        let m = ptb_topology::resolve("synthetic:nodes=4,cpus=2").unwrap();
        let plan = plan();
        let own = serde_json::to_value(&plan).unwrap();
        let logged = serde_json::to_value(logged_plan(&m, &plan)).unwrap();
        assert_eq!(logged, own, "kernel ids 0..3 are the dense indices here, so nothing changes");
    }

    #[test]
    fn an_empty_plan_without_moves_tried_is_not_logged() {
        let m = ptb_topology::resolve("opteron6272-4n").unwrap();
        assert!(line(&m, 1, 0, &Plan::default(), &ApplyReport::default(), None, true).is_none());
        assert!(line(&m, 1, 0, &Plan::default(), &ApplyReport::default(), Some(&Journal::default()), false).is_none());
    }

    #[test]
    fn an_empty_plan_whose_retries_moved_or_failed_a_huge_page_is_logged() {
        // Retries of earlier failures run under an empty plan: a huge page moved whole, or one
        // that failed again, is a move the log must show (check-plans reads it).
        let m = ptb_topology::resolve("opteron6272-4n").unwrap();
        let moved = Journal { huge: vec![(7, 0x200, 2, 512)], ..Journal::default() };
        let v = line(&m, 2, 0, &Plan::default(), &ApplyReport::default(), Some(&moved), false).unwrap();
        assert_eq!(v["huge_moves"], serde_json::json!([[7, 512, 2, 512]]), "{v}");
        let failed = Journal { failed: vec![(7, 0x200, "ENOENT".into())], ..Journal::default() };
        let v = line(&m, 3, 0, &Plan::default(), &ApplyReport::default(), Some(&failed), false).unwrap();
        assert_eq!(v["page_failures"], serde_json::json!([[7, 512, "ENOENT"]]), "{v}");
    }
}

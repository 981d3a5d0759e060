//! `ptb plan TRACE`: plan placement offline from a trace made by `ptb record`: what would
//! move, and the expected access map (thread node x page node) before and after.
//!
//! Every node a person reads here is a kernel node id (as numactl and `ptb topology` show
//! them); the policies' dense indices are translated on the way out, in text and in JSON.

use crate::common::{check_params, join, plural, ParamArgs};
use anyhow::{bail, Context, Result};
use ptb_linux::offline::{self, AccessMap, OfflinePlan};
use ptb_policy::{build, AllocPolicy, PolicySpec, RangeOp, ThreadTarget};
use ptb_topology::{Machine, NodeIdx, NodeSet};
use serde::Serialize;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace file from `ptb record`.
    #[arg(value_name = "TRACE", required_unless_present = "trace_opt")]
    pub trace: Option<PathBuf>,
    /// The trace file (deprecated spelling; give it as the first argument).
    #[arg(long = "trace", value_name = "TRACE", hide = true, conflicts_with = "trace")]
    pub trace_opt: Option<PathBuf>,
    /// Policy to plan with.
    #[arg(short, long, default_value = "ptb")]
    pub policy: String,
    /// Plan for this machine (preset, `synthetic:SPEC` or file) instead of the recorded one.
    #[arg(short, long, value_name = "MACHINE")]
    pub machine: Option<String>,
    /// Print the result as JSON (nodes as kernel ids).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub params: ParamArgs,
}

/// `0,2,4` from dense indices.
fn kids(m: &Machine, ns: &[NodeIdx]) -> String {
    ns.iter().map(|&n| m.kernel_id(n).to_string()).collect::<Vec<_>>().join(",")
}

/// `0:3,2:1` from dense (node, weight) pairs.
fn kweights(m: &Machine, ws: &[(NodeIdx, u32)]) -> String {
    ws.iter().map(|&(n, w)| format!("{}:{w}", m.kernel_id(n))).collect::<Vec<_>>().join(",")
}

/// How new pages are placed, in words.
pub fn describe_alloc(m: &Machine, a: &AllocPolicy) -> String {
    match a {
        AllocPolicy::FirstTouch => "first touch".into(),
        AllocPolicy::Interleave(ns) => format!("interleave over nodes {}", kids(m, ns)),
        AllocPolicy::Weighted(ws) => format!("weighted interleave, node:weight {}", kweights(m, ws)),
    }
}

fn describe_target(m: &Machine, t: ThreadTarget) -> String {
    match t {
        ThreadTarget::Node(n) => {
            let cpus = m.nodes.get(n.ix()).map_or(String::new(), |node| format!(" (CPUs {})", node.cpus.to_list()));
            format!("node {}{cpus}", m.kernel_id(n))
        }
        ThreadTarget::Preferred(n) => format!("node {} (moved, left unpinned, its preferred node)", m.kernel_id(n)),
        ThreadTarget::Cpu(c) => match m.node_of_cpu(c) {
            Some(n) => format!("CPU {} (node {})", c.0, m.kernel_id(n)),
            None => format!("CPU {}", c.0),
        },
        ThreadTarget::Group(g) => match m.groups.get(g.ix()) {
            Some(x) => format!("CPU group {} (CPUs {}, node {})", x.name, x.cpus.to_list(), m.kernel_id(x.node)),
            None => format!("CPU group {g}"),
        },
    }
}

fn describe_op(m: &Machine, op: &RangeOp) -> String {
    match op {
        RangeOp::MoveTo(n) => format!("move to node {}", m.kernel_id(*n)),
        RangeOp::Interleave(ns) => format!("interleave over nodes {}", kids(m, ns)),
        RangeOp::Weighted(ws) => format!("weighted interleave, node:weight {}", kweights(m, ws)),
    }
}

fn print_map(m: &Machine, title: &str, a: &AccessMap) {
    println!("{title} (rows: node of the accessing thread, columns: node of the page, ? = unknown):");
    let mut head = String::from("  node  ");
    for n in &m.nodes {
        head.push_str(&format!("{:>9}", n.id.0));
    }
    println!("{head}{:>9}", "?");
    for (i, row) in a.counts.iter().enumerate() {
        let cells: String = row.iter().map(|c| format!("{c:>9}")).collect();
        println!("  {:<6}{cells}", m.kernel_id(NodeIdx(i as u16)));
    }
    println!("  local: {:.1}% of accesses to pages of known node", 100.0 * a.local_fraction());
}

/// The JSON of `ptb plan --json`: the offline plan with every node as a kernel id.
#[derive(Serialize)]
struct PlanJson<'a> {
    policy: &'a str,
    machine: &'a str,
    samples: usize,
    threads: usize,
    /// Kernel ids of the access maps' rows and columns (the maps' last column: unknown node).
    nodes: Vec<u32>,
    start: StartJson,
    plan: PlanBody,
    /// Page moves per `from->to` kernel node (`?` when the page's node was not recorded).
    page_moves: &'a std::collections::BTreeMap<String, u64>,
    before: &'a AccessMap,
    after: &'a AccessMap,
    refused: &'a Option<String>,
}

#[derive(Serialize)]
struct StartJson {
    alloc: String,
    threads: Vec<ThreadJson>,
}

#[derive(Serialize)]
struct ThreadJson {
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<u32>,
    /// A CPU group's name (the thread may run on any of its CPUs).
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
}

#[derive(Serialize)]
struct PlanBody {
    threads: Vec<ThreadJson>,
    pages: Vec<PageJson>,
    ranges: Vec<RangeJson>,
}

#[derive(Serialize)]
struct PageJson {
    app: u32,
    vpn: u64,
    node: u32,
}

#[derive(Serialize)]
struct RangeJson {
    app: u32,
    start_vpn: u64,
    npages: u64,
    op: &'static str,
    nodes: Vec<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    weights: Vec<u32>,
}

fn thread_json(m: &Machine, t: &ptb_policy::ThreadMove) -> ThreadJson {
    match t.to {
        ThreadTarget::Node(n) | ThreadTarget::Preferred(n) => {
            ThreadJson { tid: t.tid, node: Some(m.kernel_id(n)), cpu: None, group: None }
        }
        ThreadTarget::Cpu(c) => {
            ThreadJson { tid: t.tid, node: m.node_of_cpu(c).map(|n| m.kernel_id(n)), cpu: Some(c.0), group: None }
        }
        ThreadTarget::Group(g) => ThreadJson {
            tid: t.tid,
            node: t.to.node(m).map(|n| m.kernel_id(n)),
            cpu: None,
            group: m.groups.get(g.ix()).map(|x| x.name.clone()),
        },
    }
}

fn to_json<'a>(m: &'a Machine, r: &'a OfflinePlan) -> PlanJson<'a> {
    let ranges = r
        .plan
        .ranges
        .iter()
        .map(|g| {
            let (op, nodes, weights) = match &g.op {
                RangeOp::MoveTo(n) => ("move-to", vec![m.kernel_id(*n)], vec![]),
                RangeOp::Interleave(ns) => ("interleave", ns.iter().map(|&n| m.kernel_id(n)).collect(), vec![]),
                RangeOp::Weighted(ws) => {
                    ("weighted", ws.iter().map(|&(n, _)| m.kernel_id(n)).collect(), ws.iter().map(|w| w.1).collect())
                }
            };
            RangeJson { app: g.app, start_vpn: g.start_vpn, npages: g.npages, op, nodes, weights }
        })
        .collect();
    PlanJson {
        policy: &r.policy,
        machine: &r.machine,
        samples: r.samples,
        threads: r.threads,
        nodes: m.nodes.iter().map(|n| n.id.0).collect(),
        start: StartJson {
            alloc: describe_alloc(m, &r.start.alloc),
            threads: r.start.threads.iter().map(|t| thread_json(m, t)).collect(),
        },
        plan: PlanBody {
            threads: r.plan.threads.iter().map(|t| thread_json(m, t)).collect(),
            pages: r
                .plan
                .pages
                .iter()
                .map(|p| PageJson { app: p.page.app, vpn: p.page.vpn, node: m.kernel_id(p.to) })
                .collect(),
            ranges,
        },
        page_moves: &r.page_moves,
        before: &r.before,
        after: &r.after,
        refused: &r.refused,
    }
}

pub fn run(a: Args) -> Result<()> {
    let Some(path) = a.trace.clone().or(a.trace_opt.clone()) else {
        bail!("give the trace file: ptb plan TRACE (from `ptb record`)")
    };
    let trace = ptb_linux::trace::read_trace(&path).map_err(anyhow::Error::msg)?;
    let m = match &a.machine {
        Some(arg) => ptb_topology::resolve(arg).with_context(|| format!("loading machine `{arg}`"))?,
        None => trace.machine.clone(),
    };
    eprintln!(
        "ptb plan: {} ({} {}, {} samples from {}), machine {} ({}), policy {}",
        path.display(),
        if trace.pids.len() == 1 { "pid" } else { "pids" },
        join(&trace.pids),
        trace.samples.len(),
        trace.source,
        m.name,
        plural(m.n_nodes(), "node", "nodes"),
        a.policy
    );
    if m.n_nodes() < 2 {
        let msg = format!(
            "nothing to place: machine {} has 1 NUMA node, so every access is local. Plan for another machine with \
             --machine NAME (see `ptb machines`).",
            m.name
        );
        if a.json {
            // Valid JSON as `ptb compare --real --json` gives it where there is nothing to compare.
            let v = serde_json::json!({ "policy": a.policy, "machine": m.name,
                                        "nodes": m.nodes.iter().map(|n| n.id.0).collect::<Vec<_>>(),
                                        "nothing_to_place": msg });
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            println!("{msg}");
        }
        return Ok(());
    }
    let spec: PolicySpec = a.policy.parse()?;
    let params = a.params.params()?;
    check_params(&params, &m)?;
    let mut policy = build(spec, &params)?;
    let allowed: NodeSet = m.all_nodes();
    let r = offline::plan(&trace, &m, policy.as_mut(), &allowed).map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&m, &r))?);
        return Ok(());
    }
    println!(
        "start: new pages by {}; {} pinned (nodes by kernel id)",
        describe_alloc(&m, &r.start.alloc),
        plural(r.start.threads.len(), "thread", "threads")
    );
    for t in &r.start.threads {
        println!("  thread {} -> {}", t.tid, describe_target(&m, t.to));
    }
    println!(
        "plan: {}, {}, {}{}",
        plural(r.plan.threads.len(), "thread move", "thread moves"),
        plural(r.plan.pages.len(), "page move", "page moves"),
        plural(r.plan.ranges.len(), "range action", "range actions"),
        r.refused.as_ref().map_or(String::new(), |e| format!(" (the daemon would refuse it: {e})"))
    );
    for t in &r.plan.threads {
        println!("  thread {} -> {}", t.tid, describe_target(&m, t.to));
    }
    for (pair, n) in &r.page_moves {
        println!("  pages from node {}: {n}", pair.replace("->", " to node "));
    }
    for g in &r.plan.ranges {
        println!("  range pid {} vpn {:#x} +{} pages: {}", g.app, g.start_vpn, g.npages, describe_op(&m, &g.op));
    }
    if r.plan.is_empty() && r.start.threads.is_empty() {
        println!("  (policy {} moves nothing for this trace)", r.policy);
    }
    print_map(&m, "access map now", &r.before);
    print_map(&m, "expected access map after the plan", &r.after);
    Ok(())
}

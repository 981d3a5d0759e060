//! `ptb plan`: plan placement offline from a trace made by `ptb record`: what would move,
//! and the expected access map (thread node x page node) before and after.

use crate::common::ParamArgs;
use anyhow::{Context, Result};
use ptb_linux::offline::{self, AccessMap};
use ptb_policy::{build, AllocPolicy, PolicySpec};
use ptb_topology::NodeSet;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Trace file from `ptb record`.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Policy to plan with.
    #[arg(long, default_value = "ptb")]
    pub policy: String,
    /// Plan for this machine (preset, `synthetic:SPEC` or file) instead of the recorded one.
    #[arg(long, visible_alias = "bg", value_name = "M")]
    pub machine: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub params: ParamArgs,
}

fn print_map(title: &str, m: &AccessMap) {
    let n = m.counts.len();
    println!("{title} (rows: node of the accessing thread, columns: node of the page, ? = unknown):");
    let mut head = String::from("        ");
    for j in 0..n {
        head.push_str(&format!("{:>9}", format!("n{j}")));
    }
    println!("{head}{:>9}", "?");
    for (i, row) in m.counts.iter().enumerate() {
        let cells: String = row.iter().map(|c| format!("{c:>9}")).collect();
        println!("  n{i:<5}{cells}");
    }
    println!("  local: {:.1}% of accesses to pages of known node", 100.0 * m.local_fraction());
}

pub fn run(a: Args) -> Result<()> {
    let trace = ptb_linux::trace::read_trace(&a.trace).map_err(anyhow::Error::msg)?;
    let m = match &a.machine {
        Some(arg) => ptb_topology::resolve(arg).with_context(|| format!("loading machine `{arg}`"))?,
        None => trace.machine.clone(),
    };
    eprintln!(
        "ptb plan: {} (pids {:?}, {} samples, {}), machine `{}` ({} nodes), policy {}",
        a.trace.display(),
        trace.pids,
        trace.samples.len(),
        trace.source,
        m.name,
        m.n_nodes(),
        a.policy
    );
    if m.n_nodes() < 2 {
        println!(
            "nothing to place: machine `{}` has 1 NUMA node, so every access is local. Plan for another machine with \
             --machine NAME (see `ptb machines`).",
            m.name
        );
        return Ok(());
    }
    let spec: PolicySpec = a.policy.parse()?;
    let mut policy = build(spec, &a.params.params()?)?;
    let allowed: NodeSet = m.all_nodes();
    let r = offline::plan(&trace, &m, policy.as_mut(), &allowed).map_err(anyhow::Error::msg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    let alloc = match &r.start.alloc {
        AllocPolicy::FirstTouch => "first touch".to_string(),
        AllocPolicy::Interleave(ns) => {
            format!("interleave over {}", ns.iter().map(|n| format!("n{}", n.0)).collect::<Vec<_>>().join(","))
        }
        AllocPolicy::Weighted(ws) => {
            format!(
                "weighted interleave {}",
                ws.iter().map(|(n, w)| format!("n{}:{w}", n.0)).collect::<Vec<_>>().join(",")
            )
        }
    };
    println!("start: new pages by {alloc}; {} threads pinned", r.start.threads.len());
    for t in &r.start.threads {
        println!("  thread {} -> {:?}", t.tid, t.to);
    }
    println!(
        "plan: {} thread moves, {} page moves, {} range actions{}",
        r.plan.threads.len(),
        r.plan.pages.len(),
        r.plan.ranges.len(),
        r.refused.as_ref().map_or(String::new(), |e| format!(" (the daemon would refuse it: {e})"))
    );
    for t in &r.plan.threads {
        println!("  thread {} -> {:?}", t.tid, t.to);
    }
    for (pair, n) in &r.page_moves {
        println!("  pages {pair}: {n}");
    }
    for g in &r.plan.ranges {
        println!("  range pid {} vpn {:#x} +{} pages: {:?}", g.app, g.start_vpn, g.npages, g.op);
    }
    if r.plan.is_empty() && r.start.threads.is_empty() {
        println!("  (policy {} moves nothing for this trace)", r.policy);
    }
    print_map("access map now", &r.before);
    print_map("expected access map after the plan", &r.after);
    Ok(())
}

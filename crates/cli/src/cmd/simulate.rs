//! `ptb simulate`: run workload models under placement policies on a simulated machine.
//! Every figure is simulated; first-touch always runs as the reference.

use crate::common::{parse_policies, ParamArgs};
use anyhow::{Context, Result};
use comfy_table::Table;
use ptb_policy::{PolicyKind, PolicySpec};
use ptb_sim::{RunResult, SimOptions, Simulation};
use serde::Serialize;

/// The machine used when `--machine` is not given.
pub const DEFAULT_MACHINE: &str = "opteron6272-4n";
/// Fallback while no preset of that name exists in this build.
pub const FALLBACK_MACHINE: &str = "synthetic:nodes=4,cpus=8,dies=2";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Machine: a preset (`ptb machines`), `synthetic:SPEC`, or a machine file.
    #[arg(long)]
    machine: Option<String>,
    /// Workloads: built-in names (`ptb workloads`) or TOML files, comma-separated; `a+b` runs
    /// a and b together as two applications.
    #[arg(long, default_value = "canneal")]
    workload: String,
    /// Policies, comma-separated (`ptb policies`); first-touch always runs as the reference.
    #[arg(long, default_value = "first-touch,interleave")]
    policy: String,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads per application (default: each workload's own, usually one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// Restrict the run to these nodes (kernel ids, numactl list such as `0,3,5`).
    #[arg(long, value_name = "LIST")]
    nodes: Option<String>,
    #[command(flatten)]
    world: crate::world::WorldArgs,
    /// Charge the measured policy decision time to the run (results then vary run to run).
    #[arg(long)]
    charge_decision: bool,
    #[command(flatten)]
    params: ParamArgs,
    /// Also print each run's node x node access map (row: node of the accessing CPU,
    /// column: node of the memory, % of all accesses) and per-node controller shares.
    #[arg(long)]
    map: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn print_map(r: &RunResult) {
    let m = &r.access_map;
    println!("\naccess map, {} under {} (simulated; % of all accesses):", r.workload, r.policy);
    let mut t = Table::new();
    let mut header = vec!["CPU node \\ memory".to_string()];
    header.extend(m.nodes.iter().map(|n| format!("node{n}")));
    t.set_header(header);
    for (i, row) in m.shares.iter().enumerate() {
        let mut cells = vec![format!("node{}", m.nodes[i])];
        cells.extend(row.iter().map(|v| format!("{:.1}", 100.0 * v)));
        t.add_row(cells);
    }
    let mut cells = vec!["controller share".to_string()];
    cells.extend(m.controller_share.iter().map(|v| format!("{:.1}", 100.0 * v)));
    t.add_row(cells);
    println!("{t}");
    println!("local {:.1}%, remote {:.1}%", 100.0 * m.local, 100.0 * m.remote);
}

#[derive(Serialize)]
struct Output<'a> {
    simulated: bool,
    machine: &'a str,
    seed: u64,
    world: crate::world::World,
    results: &'a [RunResult],
}

/// Load `--machine`, falling back to a synthetic 4-node machine when the default preset is
/// not in this build.
pub fn machine(arg: Option<&str>) -> Result<ptb_topology::Machine> {
    match arg {
        Some(a) => ptb_topology::resolve(a).with_context(|| format!("loading machine `{a}`")),
        None => ptb_topology::resolve(DEFAULT_MACHINE)
            .or_else(|_| ptb_topology::resolve(FALLBACK_MACHINE))
            .context("loading the default machine"),
    }
}

pub fn run(args: Args) -> Result<()> {
    let machine = machine(args.machine.as_deref())?;
    let params = args.params.params()?;
    let mut policies = parse_policies(&args.policy)?;
    if policies.is_empty() {
        anyhow::bail!("--policy: give at least one policy (see `ptb policies`)");
    }
    let ft = PolicySpec::plain(PolicyKind::FirstTouch);
    policies.retain(|p| *p != ft);
    policies.insert(0, ft);
    let nodes = match &args.nodes {
        Some(s) => Some(super::run::parse_nodes(s)?),
        None => None,
    };
    let mut opts = SimOptions {
        seed: args.seed,
        threads: args.threads,
        nodes,
        charge_decision: args.charge_decision,
        ..SimOptions::default()
    };
    args.world.apply(&mut opts);
    let mut results = Vec::new();
    for mix in args.workload.split(',').filter(|s| !s.trim().is_empty()) {
        let workloads = ptb_sim::resolve_mix(mix)?;
        let sim = Simulation::new(machine.clone(), workloads, opts.clone())
            .with_context(|| format!("setting up workload `{mix}`"))?;
        for p in &policies {
            let r = sim.run_policy(*p, &params).with_context(|| format!("simulating `{mix}` under `{p}`"))?;
            results.push(r);
        }
    }
    if args.json {
        let out = Output {
            simulated: true,
            machine: &machine.name,
            seed: args.seed,
            world: args.world.describe(),
            results: &results,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("SIMULATED results on machine `{}` (seed {}); first-touch is the reference.", machine.name, args.seed);
    println!("{}", args.world.line());
    let mut t = Table::new();
    t.set_header(vec![
        "workload",
        "policy",
        "runtime s",
        "speed-up",
        "local %",
        "GB/s",
        "pages moved",
        "threads moved",
        "migration s",
        "decision ms",
    ]);
    for r in &results {
        t.add_row(vec![
            r.workload.clone(),
            r.policy.clone(),
            format!("{:.3}", r.runtime_s),
            r.speedup_vs_first_touch.map_or("-".into(), |s| format!("{s:.2}x")),
            format!("{:.1}", 100.0 * r.local_fraction),
            format!("{:.2}", r.bandwidth_gbps),
            r.pages_migrated.to_string(),
            r.threads_migrated.to_string(),
            format!("{:.3}", r.migration_s),
            format!("{:.2}", r.decision_ms),
        ]);
    }
    println!("{t}");
    if args.map {
        results.iter().for_each(print_map);
    }
    println!("(simulated; decision ms is the measured time of the policy code, reported beside the run)");
    Ok(())
}

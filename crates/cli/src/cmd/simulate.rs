//! `ptb simulate`: run workload models under placement policies on a simulated machine.
//! Every figure is simulated; first-touch always runs as the reference.

use crate::common::{check_params, parse_policies, parse_seeds, ParamArgs, DEFAULT_MACHINE};
use anyhow::{Context, Result};
use comfy_table::Table;
use ptb_policy::{PolicyKind, PolicySpec};
use ptb_sim::{RunResult, SimOptions, Simulation};
use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Machine: a preset (`ptb machines`), `synthetic:SPEC`, or a machine file.
    #[arg(short, long, default_value = DEFAULT_MACHINE)]
    machine: String,
    /// Workloads: built-in names (`ptb workloads`) or TOML files, comma-separated; `a+b` runs
    /// a and b together as two applications.
    #[arg(short, long, value_name = "W,...", default_value = "canneal")]
    workload: String,
    /// Policies, comma-separated (`ptb policies`); first-touch always runs as the reference.
    #[arg(short, long, value_name = "P,...", default_value = "first-touch,interleave")]
    policy: String,
    /// Seed of every random draw; a list such as `1-3,7` runs each seed.
    #[arg(short, long, value_name = "SEED|LIST", default_value = "1")]
    seed: String,
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
    /// Draw address samples on a second thread (same results; faster only where a core is
    /// free and waking a thread is cheap, see `ptb bench sim`).
    #[arg(long)]
    sampler_thread: bool,
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
    println!(
        "\naccess map, {} under {} (simulated, seed {}; % of all accesses; nodes by kernel id):",
        r.workload, r.policy, r.seed
    );
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
    /// The first seed (kept for readers of one-seed documents); every result has its own.
    seed: u64,
    seeds: &'a [u64],
    world: crate::world::World,
    results: &'a [RunResult],
}

pub fn run(args: Args) -> Result<()> {
    let machine = crate::common::sim_machine(&args.machine)?;
    let seeds = parse_seeds(&args.seed)?;
    let params = args.params.params()?;
    check_params(&params, &machine)?;
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
    let mut results = Vec::new();
    for mix in args.workload.split(',').filter(|s| !s.trim().is_empty()) {
        let workloads = ptb_sim::resolve_mix(mix)?;
        for &seed in &seeds {
            let mut opts = SimOptions {
                seed,
                threads: args.threads,
                nodes: nodes.clone(),
                charge_decision: args.charge_decision,
                sampler_thread: args.sampler_thread,
                ..SimOptions::default()
            };
            args.world.apply(&mut opts);
            let sim = Simulation::new(machine.clone(), workloads.clone(), opts)
                .with_context(|| format!("setting up workload `{mix}`"))?;
            for p in &policies {
                let r = sim.run_policy(*p, &params).with_context(|| format!("simulating `{mix}` under `{p}`"))?;
                results.push(r);
            }
        }
    }
    if args.json {
        let out = Output {
            simulated: true,
            machine: &machine.name,
            seed: seeds[0],
            seeds: &seeds,
            world: args.world.describe(Some(&machine)),
            results: &results,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let several = seeds.len() > 1;
    println!(
        "SIMULATED results on machine {} ({} {}); first-touch is the reference.",
        machine.name,
        if several { "seeds" } else { "seed" },
        crate::common::join(&seeds)
    );
    println!("{}", args.world.line(Some(&machine)));
    let mut t = Table::new();
    let mut header = vec!["workload"];
    if several {
        header.push("seed");
    }
    header.extend([
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
    t.set_header(header);
    for r in &results {
        let mut row = vec![r.workload.clone()];
        if several {
            row.push(r.seed.to_string());
        }
        row.extend([
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
        t.add_row(row);
    }
    println!("{t}");
    if args.map {
        results.iter().for_each(print_map);
    }
    println!("(simulated; decision ms is the measured time of the policy code, reported beside the run)");
    Ok(())
}

//! `ptb subsets`: one program pinned on every `k`-node subset of a machine (simulated).
//!
//! Problem: AsymSched's central observation is that, with the same number of threads and the
//! same relative thread/data placement, the *choice of nodes* alone changes a program's speed
//! (up to 2.37x over the 3-node subsets of an 8-node Opteron). A user judging a machine, or a
//! policy that picks nodes, needs every static choice side by side.
//!
//! Approach: run the node-subset sweep of `ptb_calibrate::subsets` (threads and memory confined
//! to each subset, pages interleaved over it) and print the subsets fastest first, with best,
//! worst and mean runtime and the paper's spread figures; or the sweep as JSON.

use crate::cmd::topology::write_stdout;
use anyhow::{bail, Context, Result};
use comfy_table::Table;
use ptb_calibrate::subsets::{sweep, Sweep};
use ptb_sim::SimOptions;
use serde::Serialize;
use std::fmt::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Machine: a preset (`ptb machines`), `synthetic:SPEC`, or a machine file.
    #[arg(short, long, default_value = "opteron6272-8n")]
    machine: String,
    /// Workload: a built-in name (`ptb workloads`) or a TOML file.
    #[arg(short, long, default_value = "streamcluster")]
    workload: String,
    /// Nodes per subset.
    #[arg(long, default_value_t = 3)]
    size: usize,
    /// Threads (default: the CPUs of `--size` nodes, the smallest nodes counted).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of every random draw.
    #[arg(short, long, default_value_t = 1)]
    seed: u64,
    /// Worker threads (default: the CPUs available).
    #[arg(short, long)]
    jobs: Option<usize>,
    #[command(flatten)]
    world: crate::world::WorldArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Output<'a> {
    simulated: bool,
    machine: &'a str,
    seed: u64,
    world: crate::world::World,
    best_vs_worst: f64,
    best_vs_mean: f64,
    worst_vs_mean: f64,
    #[serde(flatten)]
    sweep: &'a Sweep,
}

pub fn run(args: Args) -> Result<()> {
    let machine =
        ptb_topology::resolve(&args.machine).with_context(|| format!("loading machine `{}`", args.machine))?;
    let workload =
        ptb_sim::resolve_workload(&args.workload).with_context(|| format!("loading workload `{}`", args.workload))?;
    let usable: Vec<usize> =
        machine.nodes.iter().filter(|n| n.has_cpus() && n.has_memory()).map(|n| n.cpus.len()).collect();
    if args.size == 0 || args.size > usable.len() {
        bail!("--size {}: machine `{}` has {} nodes with CPUs and memory", args.size, args.machine, usable.len());
    }
    let threads = match args.threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(t) => t,
        None => usable.iter().min().copied().unwrap_or(1) * args.size,
    };
    let mut opts = SimOptions { seed: args.seed, ..SimOptions::default() };
    args.world.apply(&mut opts);
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let s = sweep(&machine, &workload, threads, args.size, &opts, jobs).context("running the node-subset sweep")?;
    if args.json {
        let out = Output {
            simulated: true,
            machine: &args.machine,
            seed: args.seed,
            world: args.world.describe(Some(&machine)),
            best_vs_worst: s.best_vs_worst(),
            best_vs_mean: s.best_vs_mean(),
            worst_vs_mean: s.worst_vs_mean(),
            sweep: &s,
        };
        return write_stdout(&(serde_json::to_string_pretty(&out)? + "\n"));
    }
    let mut t = Table::new();
    t.set_header(["rank", "nodes", "runtime s (simulated)", "vs best", "Bandwidth Graph inside, GB/s"]);
    for (i, r) in s.runs.iter().enumerate() {
        let nodes: Vec<String> = r.nodes.iter().map(u32::to_string).collect();
        t.add_row([
            format!("{}", i + 1),
            nodes.join(","),
            format!("{:.3}", r.runtime_s),
            format!("{:.2}x", r.runtime_s / s.best_s.max(1e-12)),
            format!("{:.1}", r.internal_gbps),
        ]);
    }
    let mut out = String::new();
    writeln!(
        out,
        "{} with {} threads pinned on each {}-node subset of {} ({} subsets; SIMULATED; {})",
        s.workload,
        threads,
        args.size,
        args.machine,
        s.runs.len(),
        args.world.line(Some(&machine))
    )?;
    writeln!(out, "{t}")?;
    writeln!(
        out,
        "best {:.3} s, mean {:.3} s, worst {:.3} s: worst/best - 1 = {:.0}%, best faster than mean by {:.0}%, worst slower than mean by {:.0}%",
        s.best_s,
        s.mean_s,
        s.worst_s,
        100.0 * s.best_vs_worst(),
        100.0 * s.best_vs_mean(),
        100.0 * s.worst_vs_mean()
    )?;
    write_stdout(&out)
}

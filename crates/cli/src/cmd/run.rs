//! `ptb run`: launch a program and manage the placement of its threads and pages.
//! The options shared with `ptb attach` live here ([`ManageArgs`], [`prepare`]).

use crate::common::ParamArgs;
use anyhow::{bail, Context, Result};
use ptb_linux::actuator::{ActuatorConfig, DryRunActuator, LinuxActuator};
use ptb_linux::daemon::{self, Act, Config, Outcome, Target};
use ptb_linux::metrics::Stats;
use ptb_linux::procfs::ProcRoot;
use ptb_linux::safety::{self, BalancingGuard};
use ptb_policy::{build, Policy, PolicySpec};
use ptb_topology::{Machine, NodeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Options shared by `ptb run` and `ptb attach`.
#[derive(clap::Args, Debug, Clone)]
pub struct ManageArgs {
    /// Placement policy (see `ptb policies`).
    #[arg(long, default_value = "ptb")]
    pub policy: String,
    /// Machine file with this machine's Bandwidth Graph (from `ptb characterize`); its
    /// topology must match this machine. Presets and other machines only work with --dry-run.
    #[arg(long, visible_alias = "bg", value_name = "FILE")]
    pub machine: Option<String>,
    /// Decide and report, but move nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Cycle length in milliseconds (default: the policy's).
    #[arg(long, value_name = "MS")]
    pub cycle: Option<u64>,
    /// Sampling period: events per sample (default: 1 for page faults, the policy's for hardware).
    #[arg(long, value_name = "N")]
    pub period: Option<u64>,
    /// Migration budget in MB per second (default: unlimited).
    #[arg(long, value_name = "MB/S")]
    pub budget_mbps: Option<f64>,
    /// Nodes placement may use, numactl-style kernel node ids (e.g. `0-1,3`).
    #[arg(long, value_name = "LIST")]
    pub nodes: Option<String>,
    /// Turn the kernel's NUMA balancing off while ptb runs (put back on exit).
    #[arg(long)]
    pub disable_kernel_balancing: bool,
    /// Serve Prometheus metrics (/metrics) and stats (/stats.json) on this loopback address.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
    /// Sample source: auto, ibs-op, pebs-loads, spe, page-faults, none.
    #[arg(long, default_value = "auto")]
    pub source: String,
    /// Start with placement paused until `ptb roi begin PID`.
    #[arg(long)]
    pub roi: bool,
    /// Stop managing after this many seconds.
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,
    /// Write the final statistics as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Append every applied plan to this file as JSON lines (with the kernel node of each page move).
    #[arg(long, value_name = "FILE")]
    pub plan_log: Option<PathBuf>,
    /// No per-cycle summary lines.
    #[arg(long)]
    pub quiet: bool,
    /// Worker threads for page migration.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    #[command(flatten)]
    pub params: ParamArgs,
}

/// Everything a managed run needs, checked.
pub struct Prepared {
    pub root: ProcRoot,
    pub machine: Machine,
    pub policy: Box<dyn Policy>,
    pub allowed: NodeSet,
    pub dry_run: bool,
}

/// `None` when there is nothing to place on this machine (one node); the caller explains.
pub fn prepare(a: &ManageArgs) -> Result<Option<Prepared>> {
    let root = ProcRoot::live();
    let live = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    let mut dry_run = a.dry_run;
    let machine = match &a.machine {
        None => live.clone(),
        Some(arg) => {
            let m = ptb_topology::resolve(arg).with_context(|| format!("loading machine `{arg}`"))?;
            if m.source.is_live() {
                m
            } else if ptb_linux::live::same_topology(&m, &live) {
                eprintln!("ptb: machine `{}` matches this machine's nodes and CPUs: using its Bandwidth Graph", m.name);
                Machine { source: live.source.clone(), ..m }
            } else if dry_run {
                eprintln!("ptb: machine `{}` is not this machine: dry run only", m.name);
                m
            } else {
                bail!(
                    "machine `{}` does not describe this machine ({} nodes here, {} in the model): a preset or another \
                     machine's model never drives real moves. Use --dry-run, or a machine file made here with `ptb characterize`",
                    m.name,
                    live.n_nodes(),
                    m.n_nodes()
                );
            }
        }
    };
    let cpu_nodes = machine.cpu_nodes().len();
    let mem_nodes = machine.memory_nodes().len();
    if machine.n_nodes() < 2 || (cpu_nodes < 2 && mem_nodes < 2) {
        eprintln!(
            "ptb: this machine (`{}`) has {} NUMA node{} ({} with CPUs, {} with memory): there is nothing to place, \
             so ptb will not move threads or pages here. On a NUMA machine, or with --machine for a dry run, it will.",
            machine.name,
            machine.n_nodes(),
            if machine.n_nodes() == 1 { "" } else { "s" },
            cpu_nodes,
            mem_nodes
        );
        return Ok(None);
    }
    let allowed = match &a.nodes {
        None => machine.all_nodes(),
        Some(list) => {
            let ids = NodeSet::parse_list(list).with_context(|| format!("--nodes `{list}`"))?;
            let mut dense = NodeSet::new();
            for id in ids.iter_raw() {
                let ix = machine.node_idx(ptb_topology::NodeId(id)).with_context(|| {
                    format!(
                        "--nodes: node {id} does not exist here (nodes: {:?})",
                        machine.nodes.iter().map(|n| n.id.0).collect::<Vec<_>>()
                    )
                })?;
                dense.insert_raw(ix.0 as u32);
            }
            dense
        }
    };
    let spec: PolicySpec = a.policy.parse()?;
    let policy = build(spec, &a.params.params()?)?;
    if !machine.source.is_live() {
        dry_run = true;
    }
    Ok(Some(Prepared { root, machine, policy, allowed, dry_run }))
}

/// Build the daemon config, the actuator, metrics and balancing guard, and run.
pub fn manage(
    a: &ManageArgs,
    mut p: Prepared,
    start: Option<ptb_policy::StartPlan>,
    targets: Vec<Target>,
    alloc_applied: bool,
) -> Result<Outcome> {
    safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
    let mut guard =
        BalancingGuard::new(&p.root, a.disable_kernel_balancing && !p.dry_run).map_err(anyhow::Error::msg)?;
    let stats = Arc::new(Mutex::new(Stats::default()));
    if let Some(addr) = &a.metrics_addr {
        let bound = ptb_linux::metrics::serve(addr, stats.clone(), false).map_err(anyhow::Error::msg)?;
        eprintln!("ptb: metrics on http://{bound}/metrics (stats: /stats.json)");
    }
    let act = if p.dry_run {
        Act::DryRun(DryRunActuator::default())
    } else {
        let mut cfg = ActuatorConfig::default();
        if let Some(w) = a.workers {
            cfg.workers = w.max(1);
        }
        let mut real = LinuxActuator::new(p.machine.clone(), p.root.clone(), cfg).map_err(anyhow::Error::msg)?;
        if a.plan_log.is_some() {
            real.keep_journal();
        }
        Act::Real(Box::new(real))
    };
    let cfg = Config {
        cycle: a.cycle.map(Duration::from_millis),
        period: a.period,
        budget_mbps: a.budget_mbps,
        allowed: p.allowed.clone(),
        source: a.source.clone(),
        roi_wait: a.roi,
        alloc_applied,
        max_time: a.seconds.map(Duration::from_secs_f64),
        summary_lines: !a.quiet,
        stats,
        plan_log: a.plan_log.clone(),
    };
    eprintln!(
        "ptb: managing {} with policy {} on {} nodes{}",
        targets.iter().map(|t| t.pid.to_string()).collect::<Vec<_>>().join(","),
        p.policy.name(),
        p.allowed.len(),
        if p.dry_run { " (dry run: nothing is moved)" } else { "" }
    );
    let out =
        daemon::run(&p.root, &p.machine, p.policy.as_mut(), start, targets, act, &cfg).map_err(anyhow::Error::msg);
    guard.restore();
    let out = out?;
    eprintln!(
        "ptb: {} cycles, {} samples ({} lost), {} threads moved, {} pages moved{}, {} pages failed",
        out.stats.cycles,
        out.stats.samples,
        out.stats.samples_lost,
        out.stats.threads_moved,
        out.stats.pages_moved,
        if out.stats.huge_pages_moved > 0 {
            format!(" and {} huge pages", out.stats.huge_pages_moved)
        } else {
            String::new()
        },
        out.stats.pages_failed.values().sum::<u64>()
    );
    if let Some(path) = &a.stats {
        std::fs::write(path, serde_json::to_string_pretty(&out.stats)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(out)
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub manage: ManageArgs,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    let a = &args.manage;
    let Some(mut p) = prepare(a)? else {
        eprintln!("ptb: running `{}` unmanaged", args.cmd.join(" "));
        let st = std::process::Command::new(&args.cmd[0])
            .args(&args.cmd[1..])
            .status()
            .with_context(|| format!("cannot start `{}`", args.cmd[0]))?;
        exit_like(st);
    };
    let start = p.policy.start(&ptb_policy::StartContext { machine: &p.machine, allowed: &p.allowed, threads: &[] });
    let alloc = if p.dry_run { ptb_policy::AllocPolicy::FirstTouch } else { start.alloc.clone() };
    let (child, note, weights) =
        ptb_linux::launch::spawn(&p.root, &p.machine, &args.cmd, &alloc).map_err(anyhow::Error::msg)?;
    let pid = child.id();
    eprintln!("ptb: started `{}` as pid {pid}; new pages: {note}", args.cmd.join(" "));
    let out = manage(a, p, Some(start), vec![Target { pid, child: Some(child) }], true)?;
    // The kernel's interleave weights are global: put them back once the program is done
    // (exit_like does not return, so the guard is dropped here, not at the end of scope).
    if let Some(w) = weights {
        let n = w.len();
        drop(w);
        if n > 0 {
            eprintln!("ptb: restored the kernel's weighted-interleave weights of {n} nodes");
        }
    }
    match out.child_status {
        Some(st) => exit_like(st),
        None => Ok(()),
    }
}

/// Exit with the child's status (its code, or 128 + signal).
fn exit_like(st: std::process::ExitStatus) -> ! {
    use std::os::unix::process::ExitStatusExt;
    let code = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
    std::process::exit(code)
}

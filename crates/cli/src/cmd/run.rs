//! `ptb run`: launch a program and manage the placement of its threads and pages.
//! The options shared with `ptb attach` live here ([`ManageArgs`], [`prepare`]).

use crate::common::ParamArgs;
use anyhow::{bail, Context, Result};
use ptb_linux::actuator::{ActuatorConfig, DryRunActuator, LinuxActuator};
use ptb_linux::control;
use ptb_linux::daemon::{self, Act, Config, Outcome, Target};
use ptb_linux::launch::WeightsGuard;
use ptb_linux::metrics::Stats;
use ptb_linux::procfs::ProcRoot;
use ptb_linux::safety::{self, BalancingGuard};
use ptb_linux::say;
use ptb_policy::{build, Policy, PolicySpec};
use ptb_topology::render::plural;
use ptb_topology::{Machine, NodeSet};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Options shared by `ptb run` and `ptb attach`. Every value is checked before ptb looks at
/// the machine or starts anything (a typo is an error even where there is nothing to place).
#[derive(clap::Args, Debug, Clone)]
pub struct ManageArgs {
    /// Placement policy (see `ptb policies`).
    #[arg(short, long, default_value = "ptb")]
    pub policy: String,
    /// Machine file with this machine's Bandwidth Graph (from `ptb characterize`); its nodes and
    /// CPUs must match this machine's, which ptb still reads from /sys. Presets, synthetic specs
    /// and other machines' files only work with --dry-run. Default: this machine, from /sys.
    #[arg(short, long, value_name = "FILE")]
    pub machine: Option<String>,
    /// Decide and report, but move nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Cycle length in milliseconds, 10 to 3600000 (default: the policy's, following its plans).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub cycle: Option<u64>,
    /// Sampling period: events per sample (default: 1 for page faults; for hardware the policy's,
    /// following its plans).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub period: Option<u64>,
    /// Migration budget in MB per second (default: unlimited).
    #[arg(long, value_name = "MB/S", value_parser = crate::common::positive_f64)]
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
    /// Sample source.
    #[arg(long, default_value = "auto", value_parser = ["auto", "ibs-op", "pebs-loads", "spe", "page-faults", "none"])]
    pub source: String,
    /// Start with placement paused until `ptb roi begin PID`.
    #[arg(long)]
    pub roi: bool,
    /// Stop managing after this many seconds (`ptb run` then waits for the program unmanaged).
    #[arg(long, value_name = "S", value_parser = crate::common::seconds)]
    pub seconds: Option<f64>,
    /// Write the final statistics as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Append every applied plan to this file as JSON lines (every node a kernel node id).
    #[arg(long, value_name = "FILE")]
    pub plan_log: Option<PathBuf>,
    /// No per-cycle summary lines.
    #[arg(long)]
    pub quiet: bool,
    /// Worker threads for page migration (1 to 256).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub workers: Option<u64>,
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

/// A `--nodes` list: numactl-style kernel node ids, at least one.
pub fn parse_nodes(list: &str) -> Result<NodeSet> {
    let ids = NodeSet::parse_list(list).with_context(|| format!("--nodes `{list}`"))?;
    if ids.is_empty() {
        bail!("--nodes `{list}`: names no node; give kernel node ids such as `0-1,3` (see `ptb topology`)");
    }
    Ok(ids)
}

/// The dense indices of kernel node ids `ids` on `machine`; every id must exist there.
pub fn dense_nodes(machine: &Machine, ids: &NodeSet) -> Result<NodeSet> {
    let mut dense = NodeSet::new();
    for id in ids.iter_raw() {
        let ix = machine
            .node_idx(ptb_topology::NodeId(id))
            .with_context(|| format!("--nodes: node {id} does not exist here (nodes: {})", machine.node_id_list()))?;
        dense.insert_raw(ix.0 as u32);
    }
    Ok(dense)
}

/// `None` when there is nothing to place on this machine (one node); the caller explains.
/// Every option is checked first, so a mistake is reported on every machine.
pub fn prepare(a: &ManageArgs) -> Result<Option<Prepared>> {
    let spec: PolicySpec = a.policy.parse()?;
    let policy = build(spec, &a.params.params()?)?;
    let node_ids = a.nodes.as_deref().map(parse_nodes).transpose()?;
    if let Some(addr) = &a.metrics_addr {
        ptb_linux::metrics::check_addr(addr, false).map_err(anyhow::Error::msg)?;
    }
    for p in a.stats.iter().chain(&a.plan_log) {
        check_output_dir(p)?;
    }
    let root = ProcRoot::live();
    let live = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    let mut dry_run = a.dry_run;
    let machine = match &a.machine {
        None => live.clone(),
        Some(arg) => {
            let m = ptb_topology::resolve(arg).with_context(|| format!("loading machine `{arg}`"))?;
            if m.source.is_live() {
                m
            } else {
                match ptb_linux::live::adopt(&m, &live) {
                    Ok(adopted) => {
                        say!(
                            "ptb: machine file `{}` matches this machine's nodes and CPUs: using its bandwidth figures \
                             (nodes and CPUs from /sys)",
                            m.name
                        );
                        adopted
                    }
                    Err(why) if dry_run => {
                        say!("ptb: machine `{}` {why}: dry run only", m.name);
                        m
                    }
                    Err(why) => bail!(
                        "machine `{}` {why}, so it never drives real moves. \
                         Use --dry-run, or a machine file made here with `ptb characterize`",
                        m.name
                    ),
                }
            }
        }
    };
    // Nodes that do not exist are a mistake on every machine, also where nothing is placed.
    let allowed = match &node_ids {
        None => machine.all_nodes(),
        Some(ids) => dense_nodes(&machine, ids)?,
    };
    let cpu_nodes = machine.cpu_nodes().len();
    let mem_nodes = machine.memory_nodes().len();
    if machine.n_nodes() < 2 || (cpu_nodes < 2 && mem_nodes < 2) {
        say!(
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
    if !machine.source.is_live() {
        dry_run = true;
    }
    Ok(Some(Prepared { root, machine, policy, allowed, dry_run }))
}

/// An output file's directory must exist (checked before anything starts).
fn check_output_dir(p: &std::path::Path) -> Result<()> {
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        bail!("cannot write {}: directory {} does not exist", p.display(), dir.display());
    }
    Ok(())
}

/// Build the daemon config, the actuator, metrics, control channel and balancing guard, and run.
pub fn manage(
    a: &ManageArgs,
    mut p: Prepared,
    start: Option<ptb_policy::StartPlan>,
    targets: Vec<Target>,
    alloc_applied: bool,
    mode: &str,
) -> Result<Outcome> {
    safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
    let mut guard =
        BalancingGuard::new(&p.root, a.disable_kernel_balancing && !p.dry_run).map_err(anyhow::Error::msg)?;
    let stats = Arc::new(Mutex::new(Stats::default()));
    if let Some(addr) = &a.metrics_addr {
        let bound = ptb_linux::metrics::serve(addr, stats.clone(), false).map_err(anyhow::Error::msg)?;
        say!("ptb: metrics on http://{bound}/metrics (stats: /stats.json)");
    }
    // The control channel (`ptb roi`, `ptb status`): without it --roi could never be lifted.
    let shared = control::Shared::new(mode, None);
    let server = match control::Server::start(shared.clone()) {
        Ok(s) => Some(s),
        Err(e) if a.roi => bail!("--roi needs the control channel for `ptb roi begin`: {e}"),
        Err(e) => {
            say!("ptb: warning: `ptb roi` and `ptb status` will not reach this run: {e}");
            None
        }
    };
    let act = if p.dry_run {
        Act::DryRun(DryRunActuator::default())
    } else {
        let mut cfg = ActuatorConfig::default();
        if let Some(w) = a.workers {
            cfg.workers = w as usize;
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
        control: server.as_ref().map(|_| shared.clone()),
        rule: None,
        stop: None,
        label: "ptb".into(),
        alloc_applied,
        max_time: a.seconds.map(Duration::from_secs_f64),
        summary_lines: !a.quiet,
        stats,
        plan_log: a.plan_log.clone(),
    };
    let nodes: Vec<String> = p.allowed.iter_idx().map(|n| p.machine.node(n).id.0.to_string()).collect();
    say!(
        "ptb: {} {} with policy {} on machine {}, nodes {}{}",
        if p.dry_run { "dry run of" } else { "managing" },
        crate::common::join(targets.iter().map(|t| t.pid)),
        p.policy.name(),
        p.machine.name,
        nodes.join(","),
        if p.dry_run { " (dry run: nothing is moved; every figure below is what would move)" } else { "" }
    );
    let out =
        daemon::run(&p.root, &p.machine, p.policy.as_mut(), start, targets, act, &cfg).map_err(anyhow::Error::msg);
    guard.restore();
    drop(server);
    let out = out?;
    let st = &out.stats;
    let hits = if st.samples_cache_hits > 0 {
        format!(", {} of cache hits dropped", plural(st.samples_cache_hits, "sample", "samples"))
    } else {
        String::new()
    };
    if st.dry_run {
        say!(
            "ptb: dry run: {}, {} ({} lost{hits}); would have moved {} and {} (nothing was moved)",
            plural(st.cycles, "cycle", "cycles"),
            plural(st.samples, "sample", "samples"),
            st.samples_lost,
            plural(st.threads_would_move, "thread", "threads"),
            plural(st.pages_would_move, "page", "pages")
        );
    } else {
        say!(
            "ptb: {}, {} ({} lost{hits}), {} moved, {} moved{}, {} failed",
            plural(st.cycles, "cycle", "cycles"),
            plural(st.samples, "sample", "samples"),
            st.samples_lost,
            plural(st.threads_moved, "thread", "threads"),
            plural(st.pages_moved, "page", "pages"),
            if st.huge_pages_moved > 0 { format!(" and {} huge pages", st.huge_pages_moved) } else { String::new() },
            plural(st.pages_failed.values().sum::<u64>(), "page", "pages")
        );
    }
    if let Some(path) = &a.stats {
        ptb_topology::input::write_text(path, "statistics", &serde_json::to_string_pretty(&out.stats)?)?;
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

/// Start the program (exit 127 when it does not exist, 126 when it cannot run, as shells do).
fn start(p: &Prepared, args: &Args, alloc: &ptb_policy::AllocPolicy) -> Result<(Child, String, Option<WeightsGuard>)> {
    match ptb_linux::launch::spawn(&p.root, &p.machine, &args.cmd, alloc) {
        Ok(x) => Ok(x),
        Err(e) => {
            say!("ptb: error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let a = &args.manage;
    let Some(mut p) = prepare(a)? else {
        // Nothing to place: run the program, pass SIGINT/SIGTERM on, exit with its status.
        say!("ptb: running `{}` unmanaged", args.cmd.join(" "));
        safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
        let child = match std::process::Command::new(&args.cmd[0]).args(&args.cmd[1..]).spawn() {
            Ok(c) => c,
            Err(error) => {
                let e = ptb_linux::launch::SpawnError { program: args.cmd[0].clone(), error };
                say!("ptb: error: {e}");
                std::process::exit(e.exit_code());
            }
        };
        std::process::exit(safety::supervise(child.id()));
    };
    let start_plan =
        p.policy.start(&ptb_policy::StartContext { machine: &p.machine, allowed: &p.allowed, threads: &[] });
    let alloc = if p.dry_run { ptb_policy::AllocPolicy::FirstTouch } else { start_plan.alloc.clone() };
    // Signals from here on are passed to the program, whatever happens to ptb.
    safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
    let (child, note, weights) = start(&p, &args, &alloc)?;
    let pid = child.id();
    say!("ptb: started `{}` as pid {pid}; new pages: {note}", args.cmd.join(" "));
    if p.dry_run && start_plan.alloc != ptb_policy::AllocPolicy::FirstTouch {
        say!(
            "ptb: dry run: the policy would place new pages by {} (not applied)",
            super::plan::describe_alloc(&p.machine, &start_plan.alloc)
        );
    }
    // Once the program runs, ptb never leaves it behind: an error or a panic while managing
    // it is reported, then ptb waits for it (passing signals on) and exits with its status.
    let managed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let target = match Target::launched(&p.root, child) {
            Ok(t) => t,
            Err((_child, e)) => bail!("pid {pid}: {e}"),
        };
        manage(a, p, Some(start_plan), vec![target], true, "run")
    }));
    let code = match managed {
        Ok(Ok(out)) => match out.child_status {
            Some(st) => exit_code(st),
            None => {
                say!("ptb: no longer managing pid {pid}; waiting for it to finish");
                safety::supervise(pid)
            }
        },
        Ok(Err(e)) => {
            say!("ptb: error: {e:#}");
            say!("ptb: `{}` (pid {pid}) keeps running unmanaged; waiting for it to finish", args.cmd.join(" "));
            safety::supervise(pid)
        }
        Err(_) => {
            say!(
                "ptb: internal error (a bug, please report it); `{}` (pid {pid}) keeps running unmanaged",
                args.cmd.join(" ")
            );
            safety::supervise(pid)
        }
    };
    // The kernel's interleave weights are global: put them back once the program is done
    // (process::exit does not run destructors, so the guard is dropped here).
    if let Some(w) = weights {
        let n = w.len();
        drop(w);
        if n > 0 {
            say!("ptb: restored the kernel's weighted-interleave weights of {}", plural(n, "node", "nodes"));
        }
    }
    std::process::exit(code)
}

/// The child's exit code (its code, or 128 + signal).
fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

//! `ptb compare`: every policy on a suite of workloads, side by side, against first-touch and
//! the oracle (best static placement found by search). Every figure is simulated.
//!
//! Jobs are (workload, seed) pairs run on `--jobs` threads; each job runs first-touch, every
//! policy and the oracle on its own [`Simulation`]. Results land in fixed slots, so the output
//! does not depend on which thread finished first.

use crate::common::{check_params, parse_policies, parse_seeds, plural, ParamArgs, DEFAULT_MACHINE};
use crate::report::{self, model::RunRecord, Document, Summary};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ptb_policy::{Params, Plan, Policy, PolicyKind, PolicySpec, SamplingRequest, Snapshot, StartContext, StartPlan};
use ptb_sim::{SimOptions, Simulation, Workload};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Machine: a preset (`ptb machines`), `synthetic:SPEC`, or a machine file.
    #[arg(short, long, default_value = DEFAULT_MACHINE)]
    machine: String,
    /// Workload suite: `default` (every built-in workload, `ptb workloads`), `quick` (six
    /// representative ones), or a file listing workload names or TOML paths, one per line.
    #[arg(long, default_value = "default")]
    suite: String,
    /// Workloads instead of a suite: built-in names or TOML files, comma-separated (`a+b` runs
    /// a and b together).
    #[arg(short, long, value_name = "W,...")]
    workload: Option<String>,
    /// Policies, comma-separated (default: every registered policy); first-touch always runs.
    #[arg(short, long, value_name = "P,...")]
    policy: Option<String>,
    /// Seeds: one, or a list such as `1-3,7`; several give mean and spread.
    #[arg(short, long, value_name = "SEED|LIST", default_value = "1", conflicts_with = "seeds")]
    seed: String,
    /// Shorthand for `--seed 1-N`.
    #[arg(long, value_name = "N")]
    seeds: Option<u64>,
    /// Worker threads (default: the CPUs available).
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    /// Skip the oracle columns (`oracle` and `oracle-moved`).
    #[arg(long)]
    no_oracle: bool,
    /// When `oracle-moved` moves the pages from where first touch put them to the oracle's
    /// placements, in milliseconds after the start (ptb's first decision is at 25).
    #[arg(long, default_value_t = 25, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    oracle_delay_ms: u64,
    #[command(flatten)]
    world: crate::world::WorldArgs,
    /// Threads per application (default: each workload's own, usually one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    params: ParamArgs,
    /// Print the JSON document (the `ptb simulate` schema plus oracle entries and a summary).
    #[arg(long)]
    json: bool,
    /// Also write a report (HTML, Markdown, PNG and SVG plots, compare.json) into this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Run a real program on this machine under each placement mode instead, and report
    /// MEASURED wall times, access maps and pages per node: `ptb compare --real -- CMD ARGS...`
    /// (see the options under "Measured comparison" and README.md).
    #[arg(long, conflicts_with_all = ["workload", "seeds", "machine"])]
    real: bool,
    #[command(flatten)]
    real_opts: crate::cmd::compare_real::RealArgs,
    /// The program and its arguments (with --real).
    #[arg(last = true, value_name = "CMD")]
    cmd: Vec<String>,
    /// With --report: write into a directory that is not empty (files of the same name are
    /// replaced, others stay).
    #[arg(long, requires = "report")]
    force: bool,
}

/// Six workloads spanning compute-bound to memory-bound and private to all-shared.
pub const QUICK: &[&str] = &["canneal", "streamcluster", "cg", "ft", "kmeans", "ep"];

/// The workload mixes of a suite argument.
fn suite(arg: &str) -> Result<Vec<String>> {
    match arg {
        "default" => Ok(ptb_sim::suite::names().into_iter().map(String::from).collect()),
        "quick" => Ok(QUICK.iter().map(|s| s.to_string()).collect()),
        path => {
            let p = Path::new(path);
            if !p.exists() {
                bail!("--suite `{path}`: not `default`, `quick` or an existing file");
            }
            if p.extension().is_some_and(|e| e == "toml") {
                return Ok(vec![path.to_string()]);
            }
            let text = ptb_topology::input::read_text(p, "suite file", ptb_topology::input::cap::CONFIG)?;
            let v: Vec<String> = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
                .filter(|l| !l.is_empty())
                .map(|l| relative_to_suite(p, &l))
                .collect();
            if v.is_empty() {
                bail!("suite file {path}: no workloads (one name or TOML path per line)");
            }
            Ok(v)
        }
    }
}

/// A suite line with each relative TOML path (parts of `a+b` too) resolved against the suite
/// file's folder when the file is there, so a suite runs from any directory; a path found
/// only relative to the current directory stays as written.
fn relative_to_suite(suite: &Path, line: &str) -> String {
    let dir = suite.parent().unwrap_or(Path::new(""));
    line.split('+')
        .map(|part| {
            let rel = Path::new(part);
            let here = dir.join(rel);
            if part.ends_with(".toml") && rel.is_relative() && here.is_file() {
                here.to_string_lossy().into_owned()
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// Pages a policy asked to move in each cycle, and when (seconds of simulated time).
type Planned = Arc<Mutex<Vec<(f64, u64)>>>;

/// Wraps a policy to record how many pages it asks to move in each cycle.
struct Recorder {
    inner: Box<dyn Policy>,
    pages: Planned,
}

impl Policy for Recorder {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        self.inner.start(ctx)
    }
    fn sampling(&self) -> SamplingRequest {
        self.inner.sampling()
    }
    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let plan = self.inner.decide(snap);
        let n = plan.pages.len() as u64 + plan.ranges.iter().map(|r| r.npages).sum::<u64>();
        if let Ok(mut v) = self.pages.lock() {
            v.push((snap.now.as_secs_f64(), n));
        }
        plan
    }
}

/// How many of the oracle's fastest static placements `oracle-moved` tries to reach.
const MOVED_CANDIDATES: usize = 3;

/// One (workload, seed) job.
struct Job {
    mix: String,
    workloads: Vec<Workload>,
    seed: u64,
}

fn run_job(job: &Job, a: &Setup, bar: &ProgressBar) -> Result<Vec<RunRecord>> {
    let mut opts = SimOptions { seed: job.seed, threads: a.threads, ..SimOptions::default() };
    a.world.apply(&mut opts);
    let sim = Simulation::new(a.machine.clone(), job.workloads.clone(), opts)
        .with_context(|| format!("setting up workload `{}`", job.mix))?;
    let mut out = Vec::new();
    let mut raw = Vec::new();
    let ft = sim.first_touch().with_context(|| format!("simulating `{}` under first-touch", job.mix))?;
    out.push(RunRecord::from_serialize(&ft)?);
    bar.inc(1);
    for spec in &a.policies {
        if *spec == PolicySpec::plain(PolicyKind::FirstTouch) {
            continue;
        }
        bar.set_message(format!("{} / {spec}", job.mix));
        let pages: Planned = Arc::new(Mutex::new(Vec::new()));
        let inner = ptb_policy::build(*spec, &a.params).with_context(|| format!("building policy `{spec}`"))?;
        let mut r = sim
            .run_with(Box::new(Recorder { inner, pages: pages.clone() }))
            .with_context(|| format!("simulating `{}` under `{spec}`", job.mix))?;
        r.policy = spec.to_string();
        let mut rec = RunRecord::from_serialize(&r)?;
        raw.push(r);
        let planned = pages.lock().map(|v| v.clone()).unwrap_or_default();
        rec.pages_planned_per_cycle = planned.iter().map(|p| p.1).collect();
        rec.pages_planned_at_s = planned.iter().map(|p| p.0).collect();
        out.push(rec);
        bar.inc(1);
    }
    if a.oracle {
        bar.set_message(format!("{} / oracle", job.mix));
        let o = ptb_oracle::search_with(&sim, &ptb_oracle::OracleOptions::default(), &raw)
            .with_context(|| format!("oracle search for `{}`", job.mix))?;
        let mut rec = RunRecord::from_serialize(&o.best)?;
        rec.extra.insert("oracle_winner".into(), Value::String(o.winner.clone()));
        rec.extra.insert("oracle_candidates".into(), serde_json::to_value(&o.candidates)?);
        rec.extra.insert("note".into(), Value::String("bound found by search, not a proof".into()));
        out.push(rec);
        bar.inc(1);
        bar.set_message(format!("{} / {}", job.mix, ptb_oracle::moved::ORACLE_MOVED));
        let m = ptb_oracle::moved::reach(&sim, &o, a.oracle_delay, MOVED_CANDIDATES)
            .with_context(|| format!("oracle placement reached by migration for `{}`", job.mix))?;
        let mut rec = RunRecord::from_serialize(&m.best)?;
        rec.extra.insert("oracle_winner".into(), Value::String(m.winner));
        rec.extra.insert("oracle_delay_ms".into(), json!(a.oracle_delay.as_millis() as u64));
        rec.extra.insert("note".into(), Value::String(report::model::ORACLE_MOVED_NOTE.into()));
        out.push(rec);
        bar.inc(1);
    }
    Ok(out)
}

/// What every job shares.
struct Setup {
    machine: ptb_topology::Machine,
    policies: Vec<PolicySpec>,
    params: Params,
    threads: Option<usize>,
    world: crate::world::WorldArgs,
    oracle: bool,
    oracle_delay: std::time::Duration,
}

pub fn run(args: Args) -> Result<()> {
    if args.real {
        let (opts, report) = (&args.real_opts, args.report.as_deref());
        return crate::cmd::compare_real::run(opts, &args.cmd, &args.params, args.json, report);
    }
    if !args.cmd.is_empty() {
        bail!("a program after `--` is run only with --real: ptb compare --real -- CMD ARGS...");
    }
    let machine = crate::common::sim_machine(&args.machine)?;
    let params = args.params.params()?;
    check_params(&params, &machine)?;
    let seeds = match args.seeds {
        Some(n) if n == 0 || n > crate::common::MAX_SEEDS as u64 => {
            bail!("--seeds {n}: give 1..={} (or --seed LIST)", crate::common::MAX_SEEDS)
        }
        Some(n) => (1..=n).collect(),
        None => parse_seeds(&args.seed)?,
    };
    if let Some(dir) = &args.report {
        report::check_out_dir(dir, args.force)?;
    }
    let mut policies = match &args.policy {
        Some(p) => parse_policies(p)?,
        None => PolicyKind::ALL.iter().map(|k| PolicySpec::plain(*k)).collect(),
    };
    let ft = PolicySpec::plain(PolicyKind::FirstTouch);
    policies.retain(|p| *p != ft);
    policies.insert(0, ft);
    let mut seen = Vec::new();
    policies.retain(|p| {
        let new = !seen.contains(p);
        seen.push(*p);
        new
    });
    let mixes: Vec<String> = match &args.workload {
        Some(w) => w.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None => suite(&args.suite)?,
    };
    if mixes.is_empty() {
        bail!("no workloads to compare (see `ptb workloads`)");
    }
    let mut jobs = Vec::new();
    for mix in &mixes {
        let workloads = ptb_sim::resolve_mix(mix).with_context(|| format!("workload `{mix}`"))?;
        for &seed in &seeds {
            jobs.push(Job { mix: mix.clone(), workloads: workloads.clone(), seed });
        }
    }
    let setup = Setup {
        machine: machine.clone(),
        policies: policies.clone(),
        params,
        threads: args.threads,
        world: args.world.clone(),
        oracle: !args.no_oracle,
        oracle_delay: std::time::Duration::from_millis(args.oracle_delay_ms),
    };
    let per_job = policies.len() as u64 + 2 * u64::from(setup.oracle);
    let bar = ProgressBar::new(jobs.len() as u64 * per_job);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let slots: Vec<Mutex<Option<Result<Vec<RunRecord>>>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = run_job(&jobs[i], &setup, &bar);
                let failed = r.is_err();
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
                if failed {
                    // Stop handing out work; the error is reported below.
                    next.store(jobs.len(), Ordering::Relaxed);
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut results = Vec::new();
    for slot in slots {
        match slot.into_inner().ok().flatten() {
            Some(Ok(v)) => results.extend(v),
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    let mut doc =
        Document { simulated: true, machine: machine.name.clone(), results, summary: None, extra: Default::default() };
    let summary = Summary::of(&doc);
    doc.summary = Some(summary.clone());
    doc.extra.insert("seeds".into(), json!(seeds));
    doc.extra.insert("workloads".into(), json!(mixes));
    doc.extra.insert("world".into(), serde_json::to_value(args.world.describe(Some(&machine)))?);
    doc.extra.insert("world_note".into(), json!(args.world.line(Some(&machine))));
    doc.extra.insert("policies".into(), json!(policies.iter().map(|p| p.to_string()).collect::<Vec<_>>()));
    if setup.oracle {
        doc.extra.insert("oracle_note".into(), json!(report::model::ORACLE_NOTE));
        doc.extra.insert("oracle_moved_note".into(), json!(report::model::ORACLE_MOVED_NOTE));
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "Speed-up vs first-touch, SIMULATED on {} ({}, {}: {}):",
            machine.name,
            plural(mixes.len(), "workload", "workloads"),
            if seeds.len() == 1 { "seed" } else { "seeds" },
            crate::common::join(&seeds)
        );
        println!("{}", args.world.line(Some(&machine)));
        println!("{}", report::table::terminal(&summary));
        for n in &summary.notes {
            println!("  {n}");
        }
        println!("  decision ms/cycle is the measured wall time of the policy code, reported beside the simulated run");
    }
    if let Some(dir) = &args.report {
        let page = report::render(&doc, dir)?;
        std::fs::write(dir.join("compare.json"), serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", dir.join("compare.json").display()))?;
        eprintln!("report written: {} (data: {})", page.display(), dir.join("compare.json").display());
    }
    Ok(())
}

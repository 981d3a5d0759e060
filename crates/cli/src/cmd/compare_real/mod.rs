//! `ptb compare --real -- CMD ARGS...`: the program itself, run on this machine under each
//! placement mode, several times, and compared on MEASURED wall time, ptb's statistics, the
//! access map of the sampled accesses and the pages per node at the end.
//!
//! Problem: which placement is best for *my* program on *my* machine is a measurement, and
//! measurements drift (other load, thermal state, page cache). Approach: every run is a
//! `ptb run` (the daemon of crates/linux, through `cmd::run::{prepare, manage}`) whose policy
//! is the mode's, wrapped by an [`observer::Observer`]; the runs go round-robin over the modes
//! (run 1 of every mode, then run 2, ...) so drift hits every mode alike; the wall time runs
//! from just before the program starts to the instant it exits (`waitid` without reaping);
//! a run whose program fails (exit status not 0, or a signal) is reported and never averaged.
//! Modes: `default` (the first-touch policy: Linux as it is), `interleave`,
//! `weighted-interleave`, `numa-balancing` (first touch with the kernel's automatic balancing
//! switched on for the run and put back after), `fixed`, and any policy name.

mod observer;
mod output;

use crate::cmd::run::{manage, prepare, ManageArgs};
use crate::common::ParamArgs;
use anyhow::{bail, Context, Result};
use observer::{Observed, Observer};
use ptb_linux::daemon::Target;
use ptb_linux::measured::{self, BalancingOn};
use ptb_linux::procfs::ProcRoot;
use ptb_policy::{PolicySpec, StartContext};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const H: &str = "Measured comparison of a real program (--real)";

/// Options of `ptb compare --real`.
#[derive(clap::Args, Debug, Clone)]
pub struct RealArgs {
    /// Modes to compare, comma-separated: `default` (Linux's first touch), `interleave`,
    /// `weighted-interleave` (kernels with MPOL_WEIGHTED_INTERLEAVE), `numa-balancing` (the
    /// kernel's automatic NUMA balancing, on for its runs), `fixed` (thread i on CPU i), `ptb`,
    /// or any other policy of `ptb policies` run under `ptb run`. Default: default,
    /// interleave, weighted-interleave, numa-balancing, fixed, ptb (those this machine has).
    #[arg(long, value_name = "MODE,...", help_heading = H, requires = "real")]
    pub modes: Option<String>,
    /// Runs per mode (mean and spread); runs go round-robin over the modes.
    #[arg(long, default_value_t = 3, value_name = "N", help_heading = H, requires = "real",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Sample source of the access maps (and of the sampling policies): auto, ibs-op,
    /// pebs-loads, spe, page-faults, none.
    #[arg(long, default_value = "auto", value_name = "SOURCE", help_heading = H, requires = "real")]
    pub source: String,
    /// Sampling period of hardware sources (events per sample; default: the policy's, 4096 for
    /// modes that decide nothing).
    #[arg(long, value_name = "N", help_heading = H, requires = "real")]
    pub period: Option<u64>,
    /// How often the modes that decide nothing (default, interleave, weighted-interleave,
    /// numa-balancing, fixed) read samples, page nodes and numa_maps; `fixed` pins new threads
    /// at this pace.
    #[arg(long, default_value_t = 100, value_name = "MS", help_heading = H, requires = "real",
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub observe_ms: u64,
    /// Write each run's program output to DIR/run-K-MODE-R.out and .err (default: the
    /// program's stdout goes to ptb's stderr, so ptb's stdout holds only the results).
    #[arg(long, value_name = "DIR", help_heading = H, requires = "real")]
    pub output_dir: Option<PathBuf>,
}

/// One placement mode.
#[derive(Clone, Debug, PartialEq)]
pub struct Mode {
    pub label: String,
    /// The policy it runs under `ptb run`.
    pub policy: String,
    /// The kernel's NUMA balancing on for its runs.
    pub balancing: bool,
    /// Its policy decides nothing after the start: it is observed at `--observe-ms`.
    pub passive: bool,
}

const PASSIVE: [&str; 4] = ["first-touch", "interleave", "weighted-interleave", "fixed"];

fn mode(label: &str) -> Result<Mode> {
    let (policy, balancing) = match label {
        "default" => ("first-touch".to_string(), false),
        "numa-balancing" => ("first-touch".to_string(), true),
        p => {
            let spec: PolicySpec = p.parse().with_context(|| {
                format!("--modes: `{p}` is not a mode (default, numa-balancing) or a policy (see `ptb policies`)")
            })?;
            (spec.to_string(), false)
        }
    };
    let passive = PASSIVE.contains(&policy.as_str());
    Ok(Mode { label: label.to_string(), policy, balancing, passive })
}

/// The modes to run, with notes on the default ones left out.
fn modes(arg: Option<&str>, root: &ProcRoot, notes: &mut Vec<String>) -> Result<Vec<Mode>> {
    let explicit = arg.is_some();
    let list: Vec<String> = match arg {
        Some(a) => a.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        None => ["default", "interleave", "weighted-interleave", "numa-balancing", "fixed", "ptb"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    let mut out: Vec<Mode> = Vec::new();
    for l in list {
        let m = mode(&l)?;
        if out.iter().any(|o| o.label == m.label) {
            continue;
        }
        if m.policy == "weighted-interleave" && !ptb_linux::actuator::weighted_interleave_supported(root) {
            let why = "this kernel has no MPOL_WEIGHTED_INTERLEAVE (Linux >= 6.9), so `weighted-interleave` would \
                       be plain interleave";
            if explicit {
                bail!("--modes: {why}; leave it out");
            }
            notes.push(format!("mode weighted-interleave left out: {why}"));
            continue;
        }
        if m.balancing {
            if let Err(why) = BalancingOn::check(root) {
                if explicit {
                    bail!("{why}");
                }
                notes.push(format!("mode numa-balancing left out: {why}"));
                continue;
            }
        }
        out.push(m);
    }
    if out.is_empty() {
        bail!("--modes: no mode to run");
    }
    Ok(out)
}

/// One run's outcome.
pub struct RunOut {
    pub mode: usize,
    pub rep: u32,
    /// Position in the run order (1..).
    pub order: usize,
    pub wall_s: f64,
    /// Exit code, or 128 + signal; `None` when the program could not run.
    pub exit: Option<i32>,
    /// Why the run failed (exit status, signal, or ptb's own error).
    pub failure: Option<String>,
    pub stats: Option<ptb_linux::metrics::Stats>,
    pub seen: Observed,
    /// ms between the last numa_maps read and the exit.
    pub pages_age_ms: Option<f64>,
    pub note: String,
}

/// Everything shared by the runs.
struct Ctx<'a> {
    root: ProcRoot,
    cmd: &'a [String],
    args: &'a RealArgs,
    params: &'a ParamArgs,
    source: String,
    disable_balancing_for_others: bool,
    nodes: usize,
}

fn manage_args(c: &Ctx, m: &Mode) -> Result<ManageArgs> {
    #[derive(clap::Parser)]
    struct Only {
        #[command(flatten)]
        m: ManageArgs,
    }
    let mut v: Vec<String> = vec!["ptb".into(), "--policy".into(), m.policy.clone(), "--quiet".into()];
    v.extend(["--source".into(), c.source.clone()]);
    if m.passive {
        v.extend(["--cycle".into(), c.args.observe_ms.to_string()]);
    }
    if let Some(p) = c.args.period {
        v.extend(["--period".into(), p.to_string()]);
    }
    if c.disable_balancing_for_others && !m.balancing {
        v.push("--disable-kernel-balancing".into());
    }
    for s in &c.params.set {
        v.extend(["--set".into(), s.clone()]);
    }
    if let Some(f) = &c.params.config {
        v.extend(["--config".into(), f.display().to_string()]);
    }
    use clap::Parser;
    Ok(Only::try_parse_from(v).context("building the run's options")?.m)
}

fn open_out(dir: &Path, name: &str) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p)
        .with_context(|| format!("creating {}", p.display()))
}

fn run_one(c: &Ctx, modes: &[Mode], mi: usize, rep: u32, order: usize) -> Result<RunOut> {
    let m = &modes[mi];
    let ma = manage_args(c, m)?;
    let Some(mut p) = prepare(&ma)? else { bail!("this machine has nothing to place") };
    let seen = Arc::new(Mutex::new(Observed::new(c.nodes)));
    let inner = std::mem::replace(&mut p.policy, Box::new(ptb_policy::first_touch::FirstTouch));
    p.policy = Box::new(Observer {
        inner,
        seen: seen.clone(),
        root: c.root.clone(),
        nodes: Default::default(),
        pending: Vec::new(),
    });
    let start = p.policy.start(&StartContext { machine: &p.machine, allowed: &p.allowed, threads: &[] });
    let alloc = start.alloc.clone();
    let balancing = if m.balancing { Some(BalancingOn::enable(&c.root).map_err(anyhow::Error::msg)?) } else { None };
    let stem = format!("run-{order:02}-{}-{rep}", crate::report::slug(&m.label));
    let (out, err) = match &c.args.output_dir {
        Some(d) => (Some(open_out(d, &format!("{stem}.out"))?), Some(open_out(d, &format!("{stem}.err"))?)),
        None => (None, None),
    };
    let t0 = Instant::now();
    let (child, note, weights) = ptb_linux::launch::spawn_with(&p.root, &p.machine, c.cmd, &alloc, |cmd| {
        match out {
            Some(f) => cmd.stdout(f),
            None => cmd.stdout(std::io::stderr()),
        };
        if let Some(f) = err {
            cmd.stderr(f);
        }
    })
    .map_err(anyhow::Error::msg)?;
    let pid = child.id();
    if let Ok(mut s) = seen.lock() {
        s.pid = pid;
    }
    let exit_clock = measured::watch_exit(pid);
    eprintln!(
        "ptb compare --real: run {order}: {} ({} of {}), pid {pid}, new pages: {note}",
        m.label, rep, c.args.repeat
    );
    let root = p.root.clone();
    let managed = match Target::launched(&root, child) {
        Ok(t) => manage(&ma, p, Some(start), vec![t], true, "run"),
        Err((_child, e)) => Err(anyhow::anyhow!("pid {pid}: {e}")),
    };
    let ended = Instant::now();
    let outcome = match managed {
        Ok(o) => o,
        Err(e) => {
            // The daemon failed with the program still ours (a zombie at worst, so its pid
            // cannot have been reused): stop it.
            // SAFETY: kill and waitpid on our own child.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
                libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
            }
            let _ = exit_clock.join();
            drop(weights);
            drop(balancing);
            return Ok(RunOut {
                mode: mi,
                rep,
                order,
                wall_s: (ended - t0).as_secs_f64(),
                exit: None,
                failure: Some(format!("ptb could not manage the run: {e:#}")),
                stats: None,
                seen: seen.lock().map(|s| s.clone()).unwrap_or_default(),
                pages_age_ms: None,
                note,
            });
        }
    };
    let exited = exit_clock.join().ok().flatten();
    drop(weights);
    drop(balancing);
    let end = exited.unwrap_or(ended);
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let pages_age_ms = seen.pages_at.map(|t| end.saturating_duration_since(t).as_secs_f64() * 1e3);
    use std::os::unix::process::ExitStatusExt;
    let exit = outcome.child_status.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)));
    let failure = match (outcome.signal, outcome.child_status) {
        (Some(sig), _) => Some(format!("ptb was stopped by signal {sig}")),
        (None, Some(st)) if st.success() => None,
        (None, Some(st)) => Some(match st.signal() {
            Some(sig) => format!("the program was killed by signal {sig}"),
            None => format!("the program exited with status {}", st.code().unwrap_or(-1)),
        }),
        (None, None) => Some("the program's exit status is unknown".into()),
    };
    Ok(RunOut {
        mode: mi,
        rep,
        order,
        wall_s: (end - t0).as_secs_f64(),
        exit,
        failure,
        stats: Some(outcome.stats),
        seen,
        pages_age_ms,
        note,
    })
}

/// `ptb compare --real [OPTIONS] -- CMD ARGS...`.
pub fn run(a: &RealArgs, cmd: &[String], params: &ParamArgs, json: bool, report: Option<&Path>) -> Result<()> {
    if cmd.is_empty() {
        bail!("ptb compare --real needs the program to run: ptb compare --real [OPTIONS] -- CMD ARGS...");
    }
    let root = ProcRoot::live();
    let machine = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    let kernel = measured::kernel_release(&root);
    let vm = measured::virtual_machine(&root);
    let (cpu_nodes, mem_nodes) = (machine.cpu_nodes().len(), machine.memory_nodes().len());
    if machine.n_nodes() < 2 || (cpu_nodes < 2 && mem_nodes < 2) {
        let msg = format!(
            "this machine (`{}`, kernel {kernel}) has {} NUMA node{} ({cpu_nodes} with CPUs, {mem_nodes} with memory): \
             every placement is the same here, so there is nothing to compare. Run it on a NUMA machine, or compare \
             policies in the simulator: `ptb model` turns a `ptb record` trace of the program into a workload for \
             `ptb compare --workload FILE --machine M`.",
            machine.name,
            machine.n_nodes(),
            if machine.n_nodes() == 1 { "" } else { "s" },
        );
        if json {
            let v = serde_json::json!({"measured": true, "machine": machine.name, "kernel": kernel,
                                       "nothing_to_compare": msg, "results": []});
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            println!("{msg}");
        }
        return Ok(());
    }
    let mut notes = Vec::new();
    let modes = modes(a.modes.as_deref(), &root, &mut notes)?;
    if let Some(d) = &a.output_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    // The sample source: the access maps need one; without any, say so and run unsampled.
    let det = ptb_linux::perf::detect(root.root());
    let source = match (a.source.as_str(), det.pick(&a.source)) {
        ("none", _) => {
            notes.push("--source none: no access maps are measured".into());
            "none".to_string()
        }
        (_, Ok(k)) => k.name().to_string(),
        ("auto", Err(why)) => {
            notes.push(format!("no sample source works here, so no access maps are measured: {why}"));
            "none".to_string()
        }
        (_, Err(why)) => bail!("--source {}: {why}", a.source),
    };
    if source == "page-faults" {
        notes.push(
            "sample source: software page faults (no address-sampling hardware found): the access maps count page \
             faults (first touches, hinting faults), not every access"
                .into(),
        );
    }
    // The kernel's balancer stays out of the other modes when it may be switched off.
    let bal_now = measured::balancing_now(&root);
    let mut disable = false;
    if bal_now.as_deref().is_some_and(measured::is_on) {
        let writable =
            std::fs::OpenOptions::new().write(true).open(root.path("proc/sys/kernel/numa_balancing")).is_ok();
        if writable {
            disable = true;
            notes.push("the kernel's NUMA balancing is on: it is switched off for the runs of every other mode and put back after each".into());
        } else {
            notes.push("the kernel's NUMA balancing is on and cannot be switched off here (needs root): every mode runs with it, so every result includes its moves".into());
        }
    }
    if let Some(why) = &vm {
        notes.push(format!(
            "this is a virtual machine ({why}): its NUMA nodes are emulated, so the wall times here say nothing about \
             NUMA performance on real hardware (the access maps and page placements are still what happened)"
        ));
    }
    let ctx = Ctx {
        root: root.clone(),
        cmd,
        args: a,
        params,
        source,
        disable_balancing_for_others: disable,
        nodes: machine.n_nodes(),
    };
    eprintln!(
        "ptb compare --real: {} mode(s) x {} run(s) of `{}` on `{}` (kernel {kernel}), round-robin",
        modes.len(),
        a.repeat,
        cmd.join(" "),
        machine.name
    );
    let mut runs = Vec::new();
    let mut order = 0;
    'outer: for rep in 1..=a.repeat {
        for mi in 0..modes.len() {
            order += 1;
            let r = run_one(&ctx, &modes, mi, rep, order)?;
            let stop = r.stats.is_some() && r.failure.as_deref().is_some_and(|f| f.starts_with("ptb was stopped"));
            runs.push(r);
            if stop || ptb_linux::safety::stop_requested().is_some() {
                notes.push("stopped by a signal: the runs after it did not happen".into());
                break 'outer;
            }
        }
    }
    let info =
        output::Info { machine: &machine, kernel: &kernel, vm: vm.as_deref(), cmd, modes: &modes, repeat: a.repeat };
    let doc = output::document(&info, &runs, &notes)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", output::text(&info, &runs, &notes));
    }
    if let Some(dir) = report {
        let page = crate::report::render(&doc, dir)?;
        std::fs::write(dir.join("compare.json"), serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", dir.join("compare.json").display()))?;
        eprintln!("report written: {} (data: {})", page.display(), dir.join("compare.json").display());
    }
    let failed = runs.iter().filter(|r| r.failure.is_some()).count();
    if failed > 0 {
        bail!("{failed} of {} runs failed (listed with the results); they are in no mean", runs.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_refuse_unknown_names() {
        let m = mode("default").unwrap();
        assert_eq!((m.policy.as_str(), m.balancing, m.passive), ("first-touch", false, true));
        let b = mode("numa-balancing").unwrap();
        assert!(b.balancing && b.passive);
        let p = mode("ptb").unwrap();
        assert!(!p.passive && !p.balancing);
        assert_eq!(mode("ptb-classic+selective").unwrap().policy, "ptb-classic+selective");
        assert!(mode("fixed").unwrap().passive);
        let e = format!("{:#}", mode("zigzag").unwrap_err());
        assert!(e.contains("zigzag") && e.contains("ptb policies"), "{e}");
    }

    #[test]
    fn modes_unavailable_here_are_refused_when_asked_for_and_skipped_by_default() {
        let d = std::env::temp_dir().join(format!("ptb-modes-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let root = ProcRoot::new(&d);
        let mut notes = vec![];
        let e = format!("{:#}", modes(Some("default,weighted-interleave"), &root, &mut notes).unwrap_err());
        assert!(e.contains("MPOL_WEIGHTED_INTERLEAVE"), "{e}");
        let e = format!("{:#}", modes(Some("numa-balancing"), &root, &mut notes).unwrap_err());
        assert!(e.contains("NUMA balancing"), "{e}");
        let all = modes(None, &root, &mut notes).unwrap();
        let labels: Vec<&str> = all.iter().map(|m| m.label.as_str()).collect();
        assert_eq!(labels, vec!["default", "interleave", "fixed", "ptb"]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

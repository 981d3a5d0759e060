//! `ptb bench sim`: how fast the simulator runs. Default scenario (from the simulator issue):
//! 64 threads on an 8-node machine, one application with 1M pages (4 GiB), about 60 simulated
//! seconds of first touch, a policy deciding every 100 ms. The policy's run is timed twice: as
//! `ptb simulate` runs it (one thread) and with samples drawn on a second thread
//! (`--sampler-thread`); both must give the same results. Prints
//! simulated seconds per wall second (target >= 200) and per CPU second (all threads of the
//! process), the same without the policy's own decision time, and peak memory (VmHWM).
//! One run of the default case takes a fraction of a second, so a busy moment of a shared
//! machine can halve one run's figure: each mode runs `--runs` times, alternating, and the
//! figures are the median with the range; the targets are checked on the medians.

use anyhow::{Context, Result};
use ptb_policy::follow::Follow;
use ptb_policy::{Params, Policy, SamplingMode};
use ptb_sim::{SimOptions, Simulation, Workload};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Machine: a preset (`ptb machines`), `synthetic:SPEC`, or a machine file.
    #[arg(short, long, default_value = crate::common::DEFAULT_MACHINE)]
    machine: String,
    /// Policy in the loop: `follow` (built-in bench policy: moves up to 4096 sampled pages per
    /// cycle to the node of the thread that sampled them; address samples every `--period` accesses)
    /// or any name from `ptb policies`.
    #[arg(short, long, default_value = "follow")]
    policy: String,
    /// Simulated seconds to aim for.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Pages of the application's data.
    #[arg(long, default_value_t = 1 << 20)]
    pages: u64,
    /// Sampling period of the `follow` policy (one address sample per this many accesses).
    #[arg(long, default_value_t = 4096)]
    period: u64,
    /// Threads of the application.
    #[arg(long, default_value_t = 64)]
    threads: usize,
    /// Cycle of the `follow` policy, ms.
    #[arg(long, default_value_t = 100)]
    cycle_ms: u64,
    /// Timed runs of each mode (one thread, --sampler-thread), alternating; the figures are
    /// their median and range.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Which sampler serves the policy: `asked` (default), the sampler it asks for, a miss
    /// sampler at `--period` for `follow`: the densest sampling, the simulator's heaviest case;
    /// `machine`, the machine's own as `ptb compare` runs it (on the Opteron presets IBS op
    /// thins a miss request to a few percent of the samples).
    #[arg(long, value_enum, default_value_t = crate::world::SamplersArg::Asked)]
    samplers: crate::world::SamplersArg,
}

fn workload(threads: usize, pages: u64) -> Result<Workload> {
    let mib = (pages * 4096) as f64 / (1024.0 * 1024.0);
    let text = format!(
        r#"
name = "bench"
threads = {threads}
iterations = 10
[[object]]
name = "data"
size_mib = {mib}
init = "thread:0"
[[phase]]
name = "mixed"
work_ginstr = 1.0
apki = 10
mlp = 4
access = [
  {{ object = "data", pattern = "private", weight = 0.6 }},
  {{ object = "data", pattern = "uniform", weight = 0.4 }},
]
[[phase]]
name = "stream"
work_ginstr = 0.5
apki = 5
mlp = 6
access = [{{ object = "data", pattern = "stream" }}]
"#
    );
    Ok(Workload::parse(&text, "bench workload")?)
}

/// CPU time of this process, every thread (finished ones included), seconds.
fn process_cpu_s() -> Option<f64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass; CLOCK_PROCESS_CPUTIME_ID always
    // exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// Peak resident memory of this process (VmHWM), KiB.
pub(super) fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn policy(name: &str, period: u64, cycle_ms: u64) -> Result<Box<dyn Policy>> {
    if name == "follow" {
        return Ok(Box::new(Follow {
            mode: SamplingMode::Address { event: ptb_policy::SampledEvent::Misses, period: period.max(1) },
            cycle: Duration::from_millis(cycle_ms.max(1)),
            max_moves: 4096,
        }));
    }
    Ok(ptb_policy::build(name.parse()?, &Params::new())?)
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_s() -> Option<f64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: as in `process_cpu_s`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// One timed run of the policy: wall time, CPU time of every thread and of the run's own.
struct Timed {
    r: ptb_sim::RunResult,
    wall: f64,
    cpu: Option<f64>,
    own_cpu: Option<f64>,
}

/// The timed runs of one mode: every run's result must be the same (the simulator is
/// deterministic); the times are summarised by their median.
struct Runs(Vec<Timed>);

impl Runs {
    /// The median of `f` over the runs (upper median for an even count), and its range.
    fn median(&self, f: impl Fn(&Timed) -> Option<f64>) -> Option<(f64, f64, f64)> {
        let mut v: Vec<f64> = self.0.iter().map(f).collect::<Option<_>>()?;
        v.sort_by(f64::total_cmp);
        Some((v[v.len() / 2], v[0], v[v.len() - 1]))
    }

    /// Simulated seconds per second of `f` (wall or CPU time): median, lowest, highest.
    fn speed(&self, f: impl Fn(&Timed) -> Option<f64>) -> Option<(f64, f64, f64)> {
        self.median(|t| f(t).map(|s| t.r.runtime_s / s.max(1e-9)))
    }

    fn first(&self) -> &Timed {
        &self.0[0]
    }

    /// Whether every run gave the first run's results.
    fn consistent(&self) -> bool {
        self.0.iter().all(|t| outcome(&t.r) == outcome(&self.first().r))
    }
}

/// `median (lowest-highest)` of a speed.
fn range((m, lo, hi): (f64, f64, f64)) -> String {
    format!("{m:.0} ({lo:.0}-{hi:.0})")
}

fn timed(sim: &Simulation, args: &Args) -> Result<Timed> {
    let policy = policy(&args.policy, args.period, args.cycle_ms)?;
    let (cpu0, own0) = (process_cpu_s(), thread_cpu_s());
    let started = Instant::now();
    let r = sim.run_with(policy)?;
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    let cpu = cpu0.zip(process_cpu_s()).map(|(a, b)| (b - a).max(1e-9));
    let own_cpu = own0.zip(thread_cpu_s()).map(|(a, b)| (b - a).max(1e-9));
    Ok(Timed { r, wall, cpu, own_cpu })
}

/// The figures that must not depend on how many threads drew the samples.
fn outcome(r: &ptb_sim::RunResult) -> (u64, u64, u64, u64, u64, u64) {
    (r.runtime_s.to_bits(), r.samples, r.samples_dram, r.pages_migrated, r.sim_steps, r.sim_solver_iterations)
}

pub fn run(args: Args) -> Result<()> {
    let machine =
        ptb_topology::resolve(&args.machine).with_context(|| format!("loading machine `{}`", args.machine))?;
    let w = workload(args.threads, args.pages)?;
    // Size the work so first touch runs about `seconds` simulated seconds.
    let probe =
        Simulation::new(machine.clone(), vec![w.clone()], SimOptions { duration_scale: 0.02, ..Default::default() })?;
    let probe_s = probe.first_touch()?.runtime_s;
    let scale = 0.02 * args.seconds / probe_s.max(1e-9);
    let samplers = args.samplers.into();
    let opts = |sampler_thread| SimOptions { duration_scale: scale, sampler_thread, samplers, ..Default::default() };
    let sim = Simulation::new(machine.clone(), vec![w.clone()], opts(false))?;
    let threaded = Simulation::new(machine.clone(), vec![w], opts(true))?;
    // The first-touch reference (cached inside `sim`), timed on its own.
    let ft_started = Instant::now();
    let ft = sim.first_touch()?;
    let ft_wall = ft_started.elapsed().as_secs_f64();
    threaded.first_touch()?;
    let (mut ones, mut twos) = (vec![], vec![]);
    for _ in 0..args.runs {
        ones.push(timed(&sim, &args)?);
        twos.push(timed(&threaded, &args)?);
    }
    let (one, two) = (Runs(ones), Runs(twos));
    let r = &one.first().r;
    let decision_s = r.decision_ms / 1e3;
    println!("ptb bench sim (simulated workload; wall-clock figures measured on this machine)");
    println!(
        "  machine {}, {} threads, {} pages ({} MiB), policy `{}` every {:.0} ms ({} cycles)",
        sim.machine().name,
        r.threads,
        args.pages,
        (args.pages * 4096) >> 20,
        args.policy,
        1e3 * r.runtime_s / (r.cycles.max(1) as f64),
        r.cycles
    );
    println!(
        "  samples: {}",
        match args.samplers {
            crate::world::SamplersArg::Asked => "the sampler the policy asks for (--samplers asked: the densest case)",
            crate::world::SamplersArg::Machine =>
                "the machine's own sampler, as ptb compare runs it (--samplers machine)",
        }
    );
    println!("  {} timed runs of each mode, alternating: median (lowest-highest)", args.runs);
    for (label, t) in [("one thread", &one), ("samples drawn on a second thread (--sampler-thread)", &two)] {
        let wall = t.median(|t| Some(t.wall)).map_or(0.0, |m| m.0);
        let cpu = match (t.median(|t| t.cpu), t.speed(|t| t.cpu)) {
            (Some((cpu, ..)), Some(speed)) => format!(
                "; {cpu:.2} s CPU: {} simulated s per CPU s ({} without decide())",
                range(speed),
                t.speed(|t| t.cpu.map(|c| c - t.r.decision_ms / 1e3)).map_or_else(String::new, range)
            ),
            _ => String::new(),
        };
        println!(
            "  {label}: simulated {:.1} s in {wall:.2} s wall: {} simulated s per wall s{cpu}",
            t.first().r.runtime_s,
            t.speed(|t| Some(t.wall)).map_or_else(String::new, range)
        );
    }
    if let (Some((own, ..)), Some(speed)) = (two.median(|t| t.own_cpu), two.speed(|t| t.own_cpu)) {
        println!(
            "  the run's own thread, with a second one drawing samples: {own:.2} s CPU: {} simulated s per CPU s (the wall time with a second thread cannot be shorter)",
            range(speed)
        );
    }
    let same = outcome(&two.first().r) == outcome(r) && one.consistent() && two.consistent();
    println!(
        "  same results on one and two threads and in every run (run time, samples, pages moved, steps): {}",
        if same { "yes" } else { "NO" }
    );
    println!(
        "  (CPU time counts every thread of the process; wall-clock figures are lower when the machine is shared)"
    );
    println!(
        "  first-touch reference (no policy): {:.1} s in {:.2} s wall: {:.0} simulated s per wall s ({} steps, {} solves)",
        ft.runtime_s,
        ft_wall,
        ft.runtime_s / ft_wall.max(1e-9),
        ft.sim_steps,
        ft.sim_solves
    );
    println!(
        "  policy decide(): {:.3} s wall over {} cycles; simulator alone: {} simulated s per wall s",
        decision_s,
        r.cycles,
        one.speed(|t| Some(t.wall - t.r.decision_ms / 1e3)).map_or_else(String::new, range)
    );
    println!("  {} samples, {} pages migrated", r.samples, r.pages_migrated);
    println!(
        "  simulator work: {} steps, {} contention solves, {:.1} fixed-point iterations per solve",
        r.sim_steps,
        r.sim_solves,
        r.sim_solver_iterations as f64 / r.sim_solves.max(1) as f64
    );
    let peak = vm_hwm_kib();
    match peak {
        Some(k) => println!("  peak memory (VmHWM): {:.1} MiB", k as f64 / 1024.0),
        None => println!("  peak memory: unavailable (/proc/self/status)"),
    }
    let verdict = |ok: bool| if ok { "pass" } else { "FAIL" };
    for (label, t) in [("one thread", &one), ("--sampler-thread", &two)] {
        let speed = t.speed(|t| Some(t.wall)).map_or(0.0, |m| m.0);
        println!("  target: >= 200 simulated s per wall s ({label}, median): {speed:.0}: {}", verdict(speed >= 200.0));
    }
    match peak {
        Some(k) => println!("  target: < 1 GiB peak memory: {:.1} MiB: {}", k as f64 / 1024.0, verdict(k < 1 << 20)),
        None => println!("  target: < 1 GiB peak memory: not measured"),
    }
    if args.policy == "ptb" {
        let per_cycle = r.decision_ms / r.cycles.max(1) as f64;
        println!("  target: ptb decides in <= 5 ms per cycle: {per_cycle:.2} ms: {}", verdict(per_cycle <= 5.0));
    }
    if !same {
        anyhow::bail!(
            "the runs gave different results on one and two threads or from one run to the next (a simulator bug: please report it)"
        );
    }
    Ok(())
}

//! `ptb bench sim`: how fast the simulator runs. Default scenario (from the simulator issue):
//! 64 threads on an 8-node machine, one application with 1M pages (4 GiB), about 60 simulated
//! seconds of first touch, a policy deciding every 100 ms. The policy's run is timed twice:
//! with samples drawn on a second thread (`SimOptions::sampler_thread`, the figure the target
//! is checked on) and on one thread; both must give the same results. Prints simulated seconds
//! per wall second (target >= 200) and per CPU second (all threads of the process), the same
//! without the policy's own decision time, and peak memory (VmHWM).

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
    let opts = |sampler_thread| SimOptions { duration_scale: scale, sampler_thread, ..Default::default() };
    let sim = Simulation::new(machine.clone(), vec![w.clone()], opts(true))?;
    let single = Simulation::new(machine.clone(), vec![w], opts(false))?;
    // The first-touch reference (cached inside `sim`), timed on its own.
    let ft_started = Instant::now();
    let ft = sim.first_touch()?;
    let ft_wall = ft_started.elapsed().as_secs_f64();
    single.first_touch()?;
    let two = timed(&sim, &args)?;
    let one = timed(&single, &args)?;
    let r = &two.r;
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
    for (label, t) in [("samples drawn on a second thread", &two), ("one thread", &one)] {
        let cpu = match t.cpu {
            Some(cpu) => format!(
                "; {cpu:.2} s CPU: {:.0} simulated s per CPU s ({:.0} without decide())",
                t.r.runtime_s / cpu,
                t.r.runtime_s / (cpu - t.r.decision_ms / 1e3).max(1e-9)
            ),
            None => String::new(),
        };
        println!(
            "  {label}: simulated {:.1} s in {:.2} s wall: {:.0} simulated s per wall s{cpu}",
            t.r.runtime_s,
            t.wall,
            t.r.runtime_s / t.wall
        );
    }
    if let Some(own) = two.own_cpu {
        println!(
            "  the run's own thread, with a second one drawing samples: {own:.2} s CPU: {:.0} simulated s per CPU s (on an idle machine with a core to spare the wall time approaches this)",
            r.runtime_s / own
        );
    }
    let same = outcome(&two.r) == outcome(&one.r);
    println!(
        "  same results on one and two threads (run time, samples, pages moved, steps): {}",
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
        "  policy decide(): {:.3} s wall over {} cycles; simulator alone: {:.0} simulated s per wall s",
        decision_s,
        r.cycles,
        r.runtime_s / (two.wall - decision_s).max(1e-9)
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
    let speed = r.runtime_s / two.wall;
    println!("  target: >= 200 simulated s per wall s (second thread): {speed:.0}: {}", verdict(speed >= 200.0));
    match peak {
        Some(k) => println!("  target: < 1 GiB peak memory: {:.1} MiB: {}", k as f64 / 1024.0, verdict(k < 1 << 20)),
        None => println!("  target: < 1 GiB peak memory: not measured"),
    }
    if args.policy == "ptb" {
        let per_cycle = r.decision_ms / r.cycles.max(1) as f64;
        println!("  target: ptb decides in <= 5 ms per cycle: {per_cycle:.2} ms: {}", verdict(per_cycle <= 5.0));
    }
    if !same {
        anyhow::bail!("the run gave different results on one and two threads (a simulator bug: please report it)");
    }
    Ok(())
}

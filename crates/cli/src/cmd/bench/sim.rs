//! `ptb bench sim`: how fast the simulator runs. Default scenario (from the simulator issue):
//! 64 threads on an 8-node machine, one application with 1M pages (4 GiB), about 60 simulated
//! seconds, a policy cycling every second. Prints simulated seconds per wall second (target
//! >= 100), the same figure without the policy's own decision time, and peak memory (VmHWM).

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

/// CPU time of the calling thread, seconds (first field of /proc/thread-self/schedstat, ns).
fn thread_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
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

pub fn run(args: Args) -> Result<()> {
    let machine =
        ptb_topology::resolve(&args.machine).with_context(|| format!("loading machine `{}`", args.machine))?;
    let w = workload(args.threads, args.pages)?;
    // Size the work so first touch runs about `seconds` simulated seconds.
    let probe =
        Simulation::new(machine.clone(), vec![w.clone()], SimOptions { duration_scale: 0.02, ..Default::default() })?;
    let probe_s = probe.first_touch()?.runtime_s;
    let scale = 0.02 * args.seconds / probe_s.max(1e-9);
    let sim = Simulation::new(machine.clone(), vec![w], SimOptions { duration_scale: scale, ..Default::default() })?;
    // The first-touch reference (cached inside `sim`), timed on its own.
    let ft_started = Instant::now();
    let ft = sim.first_touch()?;
    let ft_wall = ft_started.elapsed().as_secs_f64();
    let cpu0 = thread_cpu_s();
    let started = Instant::now();
    let r = sim.run_with(policy(&args.policy, args.period, args.cycle_ms)?)?;
    let wall = started.elapsed().as_secs_f64().max(1e-9);
    let cpu = cpu0.zip(thread_cpu_s()).map(|(a, b)| (b - a).max(1e-9));
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
        "  simulated {:.1} s in {:.2} s wall: {:.0} simulated s per wall s",
        r.runtime_s,
        wall,
        r.runtime_s / wall
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
        r.runtime_s / (wall - decision_s).max(1e-9)
    );
    if let Some(cpu) = cpu {
        println!(
            "  CPU time of the run: {cpu:.2} s: {:.0} simulated s per CPU s ({:.0} without decide()); wall-clock figures are lower when the machine is shared",
            r.runtime_s / cpu,
            r.runtime_s / (cpu - decision_s).max(1e-9)
        );
    }
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
    let speed = r.runtime_s / wall;
    println!("  target: >= 100 simulated s per wall s: {speed:.0}: {}", verdict(speed >= 100.0));
    match peak {
        Some(k) => println!("  target: < 1 GiB peak memory: {:.1} MiB: {}", k as f64 / 1024.0, verdict(k < 1 << 20)),
        None => println!("  target: < 1 GiB peak memory: not measured"),
    }
    if args.policy == "ptb" {
        let per_cycle = r.decision_ms / r.cycles.max(1) as f64;
        println!("  target: ptb decides in <= 5 ms per cycle: {per_cycle:.2} ms: {}", verdict(per_cycle <= 5.0));
    }
    Ok(())
}

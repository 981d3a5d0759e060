//! `ptb bench actuator`: pages migrated per second by the batched, parallel actuator vs one
//! move_pages call per page, on the same pages of a buffer of this process, same run.
//! The pages belong to a child process (as a managed program's do). Each mode moves the
//! pages once each way (A->B and B->A) so neither gets the easier direction. Needs two memory nodes (real NUMA machine or the VM harness).

use anyhow::{bail, Result};
use ptb_linux::actuator::{move_pages_batched, move_pages_one_by_one, query_pages, ActuatorConfig, MoveCounts};
use ptb_linux::holder::Holder;
use ptb_linux::procfs::ProcRoot;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Buffer size in MiB.
    #[arg(long, default_value_t = 64)]
    pub mb: u64,
    /// Worker threads of the batched mode (default: CPUs, at most 8).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Pages per move_pages call in the batched mode.
    #[arg(long, default_value_t = 1024)]
    pub batch: usize,
}

fn timed(f: impl FnOnce() -> MoveCounts) -> (MoveCounts, f64) {
    let t = Instant::now();
    let c = f();
    (c, t.elapsed().as_secs_f64())
}

pub fn run(a: Args) -> Result<()> {
    let root = ProcRoot::live();
    let m = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    let mem = m.memory_nodes();
    if mem.len() < 2 {
        println!(
            "ptb bench actuator: this machine has {} memory node(s): there is nowhere to migrate pages to, so there is \
             nothing to measure. Run it on a NUMA machine or in the VM harness (tests/vm/run.sh).",
            mem.len()
        );
        return Ok(());
    }
    let (na, nb) = (m.node(mem[0]).id.0 as i32, m.node(mem[1]).id.0 as i32);
    let len = (a.mb.max(1) as usize) << 20;
    // The pages live in a child process, as the daemon's targets do.
    let holder = Holder::spawn(len).map_err(|e| anyhow::anyhow!("starting the buffer holder ({} MiB): {e}", a.mb))?;
    let (pid, addrs) = (holder.pid, holder.addrs.clone());
    let to = |n: i32| addrs.iter().map(|&x| (x, n)).collect::<Vec<_>>();
    let workers = a.workers.unwrap_or_else(|| ActuatorConfig::default().workers);
    // Start with every page on A.
    move_pages_batched(pid, &to(na), workers, a.batch);
    let (s1, t1) = timed(|| move_pages_one_by_one(pid, &to(nb)));
    let (b1, t2) = timed(|| move_pages_batched(pid, &to(na), workers, a.batch));
    let (b2, t3) = timed(|| move_pages_batched(pid, &to(nb), workers, a.batch));
    let (s2, t4) = timed(|| move_pages_one_by_one(pid, &to(na)));
    let (o1, t5) = timed(|| move_pages_batched(pid, &to(nb), 1, a.batch));
    let (o2, t6) = timed(|| move_pages_batched(pid, &to(na), 1, a.batch));
    let ok = query_pages(pid, &addrs).map(|st| st.iter().filter(|&&s| s == na).count()).unwrap_or(0);
    let intact = holder.finish();
    let single = (s1.moved + s2.moved) as f64 / (t1 + t4);
    let batched = (b1.moved + b2.moved) as f64 / (t2 + t3);
    println!("ptb bench actuator: {} pages ({} MiB) between node {na} and node {nb}, each way", addrs.len(), a.mb);
    println!("  one page per call : {:>12.0} pages/s  ({} calls, {:.3} s)", single, s1.calls + s2.calls, t1 + t4);
    println!(
        "  batched, parallel : {:>12.0} pages/s  ({} calls of up to {} pages on {} workers, {:.3} s)",
        batched,
        b1.calls + b2.calls,
        a.batch,
        workers,
        t2 + t3
    );
    let one_worker = (o1.moved + o2.moved) as f64 / (t5 + t6);
    println!("  batched, 1 worker : {:>12.0} pages/s  ({:.3} s)", one_worker, t5 + t6);
    let ratio = batched / single.max(1e-9);
    println!(
        "  ratio             : {ratio:.1}x batched parallel / one page per call; target >= 10x: {}",
        if ratio >= 10.0 { "pass" } else { "FAIL" }
    );
    let failed: u64 = [&s1, &s2, &b1, &b2, &o1, &o2].iter().map(|c| c.failed.values().sum::<u64>()).sum();
    println!("  failed pages: {failed}; pages back on node {na}: {ok}/{}; data intact: {intact}", addrs.len());
    if !intact {
        bail!("data changed during migration");
    }
    Ok(())
}

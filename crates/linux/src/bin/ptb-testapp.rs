//! `ptb-testapp`: the multi-threaded program the VM tests run under ptb.
//!
//! `ptb-testapp [--threads N] [--mb M] [--seconds S] [--crash-after S] [--dump FILE]`:
//! the main thread initialises a buffer (so first touch puts it on its node), then N threads
//! read all of it over and over and check its checksum. At the end it prints, on lines
//! starting with `TESTAPP`: whether every checksum matched, where the buffer's pages are
//! (move_pages query, per kernel node) and each thread's CPU affinity; `--dump` writes the
//! node of every page (`vpn node` lines). `--crash-after` aborts mid-run (SIGABRT).
//!
//! `ptb-testapp check-plans PLANLOG DUMP`: every page move in a `ptb --plan-log` file that
//! falls in the dumped buffer must have left the page on the planned node, and every thread
//! move must show as the thread's affinity at the end (the last plan naming a page or thread
//! wins). Prints what it checked and fails on any mismatch.

use ptb_linux::actuator::query_pages;
use ptb_linux::sys::{self, AnonBuffer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn checksum(data: &[u8]) -> u64 {
    data.chunks_exact(8)
        .fold(0u64, |acc, c| acc.wrapping_mul(31).wrapping_add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("check-plans") {
        std::process::exit(check_plans(&args[2..]));
    }
    let threads: usize = arg(&args, "--threads", 4);
    let mb: usize = arg(&args, "--mb", 32);
    let seconds: f64 = arg(&args, "--seconds", 5.0);
    let crash: f64 = arg(&args, "--crash-after", -1.0);
    let dump: String = arg(&args, "--dump", String::new());
    // Each reader also keeps faulting in fresh scratch pages (up to this many KiB per thread)
    // so a page-fault sample source sees every thread at work.
    let churn_kb: usize = arg(&args, "--churn-kb", 0);
    let len = mb << 20;
    let mut buf = match AnonBuffer::new(len, 0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ptb-testapp: cannot map {mb} MiB: {e}");
            std::process::exit(2);
        }
    };
    // Initialise by this thread only: a pattern, so a page moved with wrong contents shows.
    for (i, c) in buf.as_mut_slice().chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    }
    let buf = Arc::new(buf);
    let expect = checksum(buf.as_slice());
    let addrs = buf.page_addrs();
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let passes = Arc::new(AtomicU64::new(0));
    let mut hs = vec![];
    for _ in 0..threads {
        let (buf, stop, bad, passes) = (buf.clone(), stop.clone(), bad.clone(), passes.clone());
        hs.push(std::thread::spawn(move || {
            let tid = nix::unistd::gettid().as_raw() as u32;
            let mut scratch: std::collections::VecDeque<AnonBuffer> = Default::default();
            while !stop.load(Ordering::Relaxed) {
                if churn_kb > 0 {
                    if scratch.len() * 64 >= churn_kb {
                        scratch.pop_front();
                    }
                    if let Ok(b) = AnonBuffer::new(64 << 10, 1) {
                        scratch.push_back(b);
                    }
                }
                if checksum(buf.as_slice()) != expect {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                passes.fetch_add(1, Ordering::Relaxed);
            }
            tid
        }));
    }
    // Printed once the buffer is initialised and every thread is started.
    println!(
        "TESTAPP start pid={} threads={threads} buf={:#x} pages={} checksum={expect:#x}",
        std::process::id(),
        addrs[0],
        addrs.len()
    );
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < seconds {
        if crash >= 0.0 && t0.elapsed().as_secs_f64() >= crash {
            println!("TESTAPP crashing on purpose");
            std::process::abort();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Report affinities while the threads are still alive.
    let me = std::process::id();
    let tids: Vec<u32> = ptb_linux::procfs::ProcRoot::live().tasks(me).unwrap_or_default();
    let mut aff_lines = String::new();
    for tid in &tids {
        let aff = sys::get_affinity(*tid).map(|a| a.to_list()).unwrap_or_else(|e| e.to_string());
        println!("TESTAPP thread tid={tid} cpus={aff}");
        aff_lines.push_str(&format!("tid {tid} {aff}\n"));
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        let _ = h.join();
    }
    let final_ok = checksum(buf.as_slice()) == expect;
    let st = query_pages(0, &addrs).unwrap_or_default();
    let mut per: BTreeMap<i32, u64> = BTreeMap::new();
    for s in &st {
        *per.entry(*s).or_default() += 1;
    }
    let text: Vec<String> = per
        .iter()
        .map(|(n, c)| if *n >= 0 { format!("node{n}={c}") } else { format!("{}={c}", sys::errno_name(-n)) })
        .collect();
    println!("TESTAPP pages {}", text.join(" "));
    if !dump.is_empty() {
        let ps = sys::page_size();
        let mut lines: String = addrs.iter().zip(&st).map(|(a, s)| format!("{} {s}\n", a / ps)).collect();
        lines.push_str(&aff_lines);
        if let Err(e) = std::fs::write(&dump, lines) {
            eprintln!("ptb-testapp: writing {dump}: {e}");
        }
    }
    let nbad = bad.load(Ordering::Relaxed);
    let ok = nbad == 0 && final_ok;
    println!("TESTAPP done passes={} checksum={}", passes.load(Ordering::Relaxed), if ok { "ok" } else { "BAD" });
    std::process::exit(if ok { 0 } else { 1 });
}

fn check_plans(args: &[String]) -> i32 {
    let (Some(log), Some(dump)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ptb-testapp check-plans PLANLOG DUMP");
        return 2;
    };
    let read = |p: &String| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let (log, dump) = match (read(log), read(dump)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("ptb-testapp: {e}");
            return 2;
        }
    };
    let affinity: BTreeMap<u64, String> = dump
        .lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("tid ")?.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.to_string()))
        })
        .collect();
    let nodes: BTreeMap<u64, i64> = dump
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .collect();
    let mut planned: BTreeMap<u64, i64> = BTreeMap::new();
    let mut threads: BTreeMap<u64, String> = BTreeMap::new();
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        for t in v["thread_moves"].as_array().into_iter().flatten() {
            if let (Some(tid), Some(cpus)) = (t[0].as_u64(), t[1].as_str()) {
                if affinity.contains_key(&tid) {
                    threads.insert(tid, cpus.to_string());
                }
            }
        }
        for p in v["page_moves"].as_array().into_iter().flatten() {
            if let (Some(vpn), Some(to)) = (p[1].as_u64(), p[2].as_i64()) {
                if nodes.contains_key(&vpn) {
                    planned.insert(vpn, to);
                }
            }
        }
    }
    let wrong = planned.iter().filter(|(v, to)| nodes.get(v) != Some(to)).count();
    let twrong = threads.iter().filter(|(t, cpus)| affinity.get(t) != Some(cpus)).count();
    println!(
        "TESTAPP check-plans: pages planned={} ok={} wrong={wrong}; threads planned={} ok={} wrong={twrong}",
        planned.len(),
        planned.len() - wrong,
        threads.len(),
        threads.len() - twrong
    );
    i32::from(wrong + twrong > 0)
}

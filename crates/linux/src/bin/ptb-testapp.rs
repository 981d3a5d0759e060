//! `ptb-testapp`: the multi-threaded program the VM tests run under ptb.
//!
//! `ptb-testapp [--threads N] [--mb M] [--seconds S] [--crash-after S] [--dump FILE]
//! [--partition] [--refault-ms MS [--refault-parts K] [--refault-s S]] [--churn-kb K] [--thp]
//! [--stop-file FILE]`:
//! the main thread initialises a buffer (so first touch puts it on its node; base pages, or
//! with `--thp` 2 MiB aligned and advised MADV_HUGEPAGE, so the kernel backs it with
//! transparent huge pages where THP is not `never`), then N threads
//! read all of it over and over and check its checksum (`--partition`: thread i reads only
//! the i-th slice). `--refault-ms` makes the accesses visible to a page-fault sample source
//! the way the kernel's NUMA hinting faults do: every MS milliseconds the main thread
//! protects the whole buffer (or the next of K parts, like the kernel's scan window; for the
//! first S seconds only), and the SIGSEGV handler unprotects each page as a reader first
//! touches it, so every such access is a page fault with the reader's TID and address. At the end it prints, on lines
//! starting with `TESTAPP`: whether every checksum matched, where the buffer's pages are
//! (move_pages query, per kernel node) and each thread's CPU affinity; `--dump` writes the
//! node of every page (`vpn node` lines). `--crash-after` aborts mid-run (SIGABRT).
//! `--stop-file` ends the run early once FILE exists.
//!
//! `ptb-testapp check-plans PLANLOG DUMP`: every page move in a `ptb --plan-log` file that
//! falls in the dumped buffer must have left the page on the planned node (unless the log
//! reports that move as failed), and every thread
//! move must show as the thread's affinity at the end (the last plan naming a page or thread
//! wins); a huge page moved whole (`huge_moves`) must have all its pages on its node. It also
//! compares, plan by plan, the kernel's huge-page migrations (`thp`) with the huge pages the
//! plan moved: more migrations than huge pages means a huge page moved more than once. Prints
//! what it checked and fails on any mismatch.

use ptb_linux::actuator::query_pages;
use ptb_linux::sys::{self, AnonBuffer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn checksum(data: &[u8]) -> u64 {
    data.chunks_exact(8)
        .fold(0u64, |acc, c| acc.wrapping_mul(31).wrapping_add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))))
}

/// The buffer `--refault-ms` protects: [start, end).
static REFAULT_START: AtomicUsize = AtomicUsize::new(0);
static REFAULT_END: AtomicUsize = AtomicUsize::new(0);
static REFAULTS: AtomicU64 = AtomicU64::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// SIGSEGV: a fault in the protected buffer unprotects its page and the access is retried;
/// any other fault restores the default action, so it kills the program as it would have.
extern "C" fn on_segv(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; mprotect and signal
    // are async-signal-safe.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let (lo, hi) = (REFAULT_START.load(Ordering::Relaxed), REFAULT_END.load(Ordering::Relaxed));
        if addr >= lo && addr < hi {
            let ps = PAGE.load(Ordering::Relaxed);
            let page = addr & !(ps - 1);
            libc::mprotect(page as *mut libc::c_void, ps, libc::PROT_READ | libc::PROT_WRITE);
            REFAULTS.fetch_add(1, Ordering::Relaxed);
        } else {
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        }
    }
}

fn install_refault_handler(start: usize, len: usize) {
    PAGE.store(sys::page_size() as usize, Ordering::Relaxed);
    REFAULT_START.store(start, Ordering::Relaxed);
    REFAULT_END.store(start + len, Ordering::Relaxed);
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_segv as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
    }
}

/// Protect (or unprotect) the whole buffer.
fn protect(start: usize, len: usize, none: bool) {
    let prot = if none { libc::PROT_NONE } else { libc::PROT_READ | libc::PROT_WRITE };
    // SAFETY: our own mapping; the handler unprotects pages on access.
    unsafe {
        libc::mprotect(start as *mut libc::c_void, len, prot);
    }
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
    let partition = args.iter().any(|a| a == "--partition");
    let refault_ms: u64 = arg(&args, "--refault-ms", 0);
    let refault_parts: usize = arg(&args, "--refault-parts", 1usize).max(1);
    let refault_s: f64 = arg(&args, "--refault-s", f64::INFINITY);
    let stop_file: String = arg(&args, "--stop-file", String::new());
    let thp = args.iter().any(|a| a == "--thp");
    let len = mb << 20;
    let mapped = if thp { AnonBuffer::with_huge_pages(len, 0) } else { AnonBuffer::new(len, 0) };
    let mut buf = match mapped {
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
    // Slice of thread i under --partition: whole pages, the last thread takes the rest.
    let ps = sys::page_size() as usize;
    let pages_per = (addrs.len() / threads.max(1)).max(1);
    let slice_of = move |i: usize| -> std::ops::Range<usize> {
        if !partition {
            return 0..len;
        }
        let a = (i * pages_per * ps).min(len);
        let b = if i + 1 == threads { len } else { ((i + 1) * pages_per * ps).min(len) };
        a..b
    };
    let expects: Vec<u64> = (0..threads).map(|i| checksum(&buf.as_slice()[slice_of(i)])).collect();
    if refault_ms > 0 {
        install_refault_handler(addrs[0] as usize, len);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let passes = Arc::new(AtomicU64::new(0));
    let mut hs = vec![];
    for (i, &expect) in expects.iter().enumerate() {
        let (buf, stop, bad, passes) = (buf.clone(), stop.clone(), bad.clone(), passes.clone());
        let range = slice_of(i);
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
                if checksum(&buf.as_slice()[range.clone()]) != expect {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                passes.fetch_add(1, Ordering::Relaxed);
            }
            tid
        }));
    }
    // Printed once the buffer is initialised and every thread is started; `thp_kb` is the
    // buffer's memory in PMD-mapped transparent huge pages (smaps AnonHugePages).
    println!(
        "TESTAPP start pid={} threads={threads} buf={:#x} pages={} checksum={expect:#x} thp_kb={}",
        std::process::id(),
        addrs[0],
        addrs.len(),
        anon_huge_kb(addrs[0])
    );
    let t0 = Instant::now();
    let mut last_protect = t0;
    let (part_len, mut part) = ((addrs.len().div_ceil(refault_parts)) * ps, 0usize);
    let mut refaulting = refault_ms > 0;
    while t0.elapsed().as_secs_f64() < seconds && (stop_file.is_empty() || !std::path::Path::new(&stop_file).exists()) {
        if refaulting && t0.elapsed().as_secs_f64() >= refault_s {
            // The accesses stop faulting: no more samples, and page moves no longer contend
            // with a storm of mprotect calls for the address space's lock.
            refaulting = false;
            protect(addrs[0] as usize, len, false);
        }
        if refaulting && last_protect.elapsed() >= Duration::from_millis(refault_ms) {
            let a = (part * part_len).min(len);
            protect(addrs[0] as usize + a, part_len.min(len - a), true);
            part = (part + 1) % refault_parts;
            last_protect = Instant::now();
        }
        if crash >= 0.0 && t0.elapsed().as_secs_f64() >= crash {
            println!("TESTAPP crashing on purpose");
            std::process::abort();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Report affinities while the threads are still alive.
    let me = std::process::id();
    let tids: Vec<u32> = ptb_linux::procfs::ProcRoot::live().tasks(me).unwrap_or_default();
    // Moves ptb logs after this instant may land after the report below: check-plans skips them.
    let report_ms = unix_ms();
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
    if refault_ms > 0 {
        protect(addrs[0] as usize, len, false);
        println!("TESTAPP refaults={}", REFAULTS.load(Ordering::Relaxed));
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
        lines.push_str(&format!("report_unix_ms {report_ms}\n"));
        if let Err(e) = std::fs::write(&dump, lines) {
            eprintln!("ptb-testapp: writing {dump}: {e}");
        }
    }
    let nbad = bad.load(Ordering::Relaxed);
    let ok = nbad == 0 && final_ok;
    println!("TESTAPP done passes={} checksum={}", passes.load(Ordering::Relaxed), if ok { "ok" } else { "BAD" });
    std::process::exit(if ok { 0 } else { 1 });
}

/// AnonHugePages of the mapping holding `addr` (0 when unreadable).
fn anon_huge_kb(addr: u64) -> u64 {
    let v = ptb_linux::thp::smaps(&ptb_linux::procfs::ProcRoot::live(), std::process::id()).unwrap_or_default();
    v.iter().find(|m| m.start <= addr && addr < m.end).map_or(0, |m| m.anon_huge_kb)
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
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
    let mut planned_in: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    let mut threads: BTreeMap<u64, String> = BTreeMap::new();
    let mut failed: BTreeMap<u64, String> = BTreeMap::new();
    let report_ms: u64 =
        dump.lines().find_map(|l| l.strip_prefix("report_unix_ms ")?.trim().parse().ok()).unwrap_or(u64::MAX);
    let mut attempts: BTreeMap<u64, usize> = BTreeMap::new();
    let mut late = 0usize;
    // Per plan: huge pages moved whole, and the kernel's huge-page migrations meanwhile.
    let (mut huge_total, mut thp_total, mut thp_split, mut over) = (0u64, 0u64, 0u64, Vec::new());
    let (mut slowest_s, mut slowest_lookup_s) = (0.0f64, 0.0f64);
    let (mut unsure_pages, mut unsure_threads) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let cycle = v["cycle"].as_u64().unwrap_or(0);
        // A cycle whose moves ended after the program began its report may have moved pages
        // after it looked: not checkable.
        // [pid, first vpn, node, pages] of every huge page moved whole.
        let huge: Vec<(u64, i64, u64)> = v["huge_moves"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| Some((h[1].as_u64()?, h[2].as_i64()?, h[3].as_u64()?.min(1 << 20))))
            .collect();
        let migrated = v["thp"]["migration_success"].as_u64().unwrap_or(0);
        let took = v["report"]["seconds"].as_f64().unwrap_or(0.0);
        if took > slowest_s {
            (slowest_s, slowest_lookup_s) = (took, v["lookup_s"].as_f64().unwrap_or(0.0));
        }
        huge_total += huge.len() as u64;
        thp_total += migrated;
        thp_split += v["thp"]["migration_split"].as_u64().unwrap_or(0);
        if migrated > huge.len() as u64 {
            over.push((cycle, migrated, huge.len()));
        }
        if v["unix_ms"].as_u64().is_some_and(|t| t >= report_ms) {
            late += 1;
            for p in v["page_moves"].as_array().into_iter().flatten() {
                unsure_pages.extend(p[1].as_u64());
            }
            for (head, _, n) in &huge {
                unsure_pages.extend(*head..head + n);
            }
            for t in v["thread_moves"].as_array().into_iter().flatten() {
                unsure_threads.extend(t[0].as_u64());
            }
            continue;
        }
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
                    let k = attempts.entry(vpn).or_default();
                    *k += 1;
                    planned_in.insert(vpn, (cycle, *k));
                    failed.remove(&vpn);
                }
            }
        }
        let heads: BTreeMap<u64, u64> = huge.iter().map(|(h, _, n)| (*h, *n)).collect();
        for (head, to, n) in &huge {
            for vpn in (*head..head + n).filter(|v| nodes.contains_key(v)) {
                planned.insert(vpn, *to);
                let k = attempts.entry(vpn).or_default();
                *k += 1;
                planned_in.insert(vpn, (cycle, *k));
                failed.remove(&vpn);
            }
        }
        for p in v["page_failures"].as_array().into_iter().flatten() {
            if let (Some(vpn), Some(why)) = (p[1].as_u64(), p[2].as_str()) {
                // A huge page's failure is named by its first page and covers all of it.
                let n = heads.get(&vpn).copied().unwrap_or(1);
                for v in (vpn..vpn + n).filter(|v| nodes.contains_key(v)) {
                    failed.insert(v, why.to_string());
                }
            }
        }
    }
    // Pages and threads a late cycle touched may be in either place.
    planned.retain(|v, _| !unsure_pages.contains(v));
    threads.retain(|t, _| !unsure_threads.contains(t));
    // A page whose last move failed (and was reported as failed) is not a wrong placement.
    let off: Vec<u64> = planned.iter().filter(|(v, to)| nodes.get(v) != Some(to)).map(|(v, _)| *v).collect();
    let nfailed = off.iter().filter(|v| failed.contains_key(v)).count();
    let wrong = off.len() - nfailed;
    let mut why: BTreeMap<&str, u64> = BTreeMap::new();
    for v in off.iter().filter_map(|v| failed.get(v)) {
        *why.entry(v.as_str()).or_default() += 1;
    }
    for v in off.iter().filter(|v| !failed.contains_key(v)).take(5) {
        let (cycle, k) = planned_in.get(v).copied().unwrap_or_default();
        println!(
            "TESTAPP check-plans: wrong: vpn {v:#x} planned node {} in cycle {cycle} (attempt {k}), found on {}",
            planned[v],
            nodes.get(v).copied().unwrap_or(-1)
        );
    }
    let twrong = threads.iter().filter(|(t, cpus)| affinity.get(t) != Some(cpus)).count();
    for (cycle, m, h) in over.iter().take(5) {
        println!("TESTAPP check-plans: wrong: cycle {cycle}: the kernel migrated {m} huge pages, the plan moved {h}");
    }
    println!(
        "TESTAPP check-plans: pages planned={} ok={} failed={nfailed} {why:?} wrong={wrong}; threads planned={} ok={} wrong={twrong}; cycles after the report={late} (pages {} and threads {} not checked); huge pages moved={huge_total} thp_migrations={thp_total} split={thp_split} plans with more migrations than huge pages={}; slowest plan {slowest_s:.2} s ({slowest_lookup_s:.2} s before its first move)",
        planned.len(),
        planned.len() - off.len(),
        threads.len(),
        threads.len() - twrong,
        unsure_pages.len(),
        unsure_threads.len(),
        over.len()
    );
    i32::from(wrong + twrong + over.len() > 0)
}

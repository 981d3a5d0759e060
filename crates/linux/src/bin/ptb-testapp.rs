//! `ptb-testapp`: the multi-threaded program the VM tests run under ptb.
//!
//! `ptb-testapp [--threads N] [--mb M] [--seconds S] [--crash-after S] [--dump FILE]
//! [--partition | --phases MS] [--parallel-init] [--pin] [--scatter] [--refault-ms MS [--refault-parts K]
//! [--refault-s S]] [--churn-kb K] [--thp] [--stop-file FILE]`:
//! the main thread initialises a buffer (so first touch puts it on its node; base pages, or
//! with `--thp` 2 MiB aligned and advised MADV_HUGEPAGE, so the kernel backs it with
//! transparent huge pages where THP is not `never`), then N threads
//! read all of it over and over and check its checksum (`--partition`: thread i reads only
//! the i-th slice; `--phases MS`: the i-th slice for MS milliseconds, then all of it for MS
//! milliseconds, and so on). `--parallel-init`: each thread first-touches its own slice
//! instead (so its pages land on its node); `--pin`: thread i pins itself to CPU i (modulo
//! the online CPUs) before it touches anything; `--scatter`: reads of the whole buffer go page by
//! page in an order that differs per thread and pass, so with `--refault-ms` every thread's
//! faults spread over the whole buffer. Checksums are compared with the pattern's. `--refault-ms` makes the accesses visible to a page-fault sample source
//! the way the kernel's NUMA hinting faults do: every MS milliseconds the main thread
//! protects the whole buffer (or the next of K parts, like the kernel's scan window; for the
//! first S seconds only), and the SIGSEGV handler unprotects each page as a reader first
//! touches it, so every such access is a page fault with the reader's TID and address. At the end it prints, on lines
//! starting with `TESTAPP`: whether every checksum matched, where the buffer's pages are
//! (move_pages query, per kernel node) and each thread's CPU affinity; `--dump` writes the
//! node of every page (`vpn node` lines). `--crash-after` aborts mid-run (SIGABRT).
//! `--stop-file` ends the run early once FILE exists.
//!
//! `ptb-testapp check-real JSON DIR [MAX_L1]`: for every run of a `ptb compare --real --json`
//! document of this program (its output files in DIR, from `--output-dir`): the program's
//! checksums held and it exited 0, no run failed, and for runs where nothing moved pages (no
//! page moved by ptb, not the kernel's balancer) the access map's memory columns match where
//! the buffer's pages were at the end (L1 distance at most MAX_L1, default 0.15) and numa_maps'
//! anonymous pages per node at the end match the buffer's (within 10% of the buffer plus 1024
//! pages of stacks and heap).
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

/// The value after `name`, `default` when the option is absent; a missing or unreadable value
/// ends the program (exit 2) naming the option, instead of running with the default.
fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    let Some(i) = args.iter().position(|a| a == name) else { return default };
    match args.get(i + 1).map(|v| (v, v.parse())) {
        Some((_, Ok(v))) => v,
        Some((v, Err(_))) => usage_error(&format!("{name}: '{v}' is not a valid value")),
        None => usage_error(&format!("{name} needs a value")),
    }
}

/// The usage line of the module docs.
const USAGE: &str = "usage: ptb-testapp [--threads N] [--mb M] [--seconds S] [--crash-after S] [--dump FILE]
       [--partition | --phases MS] [--parallel-init] [--pin] [--scatter]
       [--refault-ms MS [--refault-parts K] [--refault-s S]] [--churn-kb K] [--thp] [--stop-file FILE]
       ptb-testapp check-real JSON DIR [MAX_L1]
       ptb-testapp check-plans PLANLOG DUMP
(the program ptb's VM tests run under ptb; see crates/linux/src/bin/ptb-testapp.rs)";

fn usage_error(msg: &str) -> ! {
    eprintln!("ptb-testapp: {msg}\n{USAGE}");
    std::process::exit(2);
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

/// The word at index `i` of the buffer (a pattern, so a page moved with wrong contents shows).
fn word(i: usize) -> u64 {
    (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The checksum the bytes `range` of an intact buffer have (from the pattern, not from memory).
fn expected(range: std::ops::Range<usize>) -> u64 {
    (range.start / 8..range.end / 8).fold(0u64, |acc, i| acc.wrapping_mul(31).wrapping_add(word(i)))
}

/// Online CPUs (for `--pin`).
fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as u32
    } else {
        1
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    if args.get(1).map(String::as_str) == Some("check-plans") {
        std::process::exit(check_plans(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some("check-real") {
        std::process::exit(check_real(&args[2..]));
    }
    let threads: usize = arg(&args, "--threads", 4usize).max(1);
    let mb: usize = arg(&args, "--mb", 32);
    let seconds: f64 = arg(&args, "--seconds", 5.0);
    let crash: f64 = arg(&args, "--crash-after", -1.0);
    let dump: String = arg(&args, "--dump", String::new());
    // Each reader also keeps faulting in fresh scratch pages (up to this many KiB per thread)
    // so a page-fault sample source sees every thread at work.
    let churn_kb: usize = arg(&args, "--churn-kb", 0);
    let partition = args.iter().any(|a| a == "--partition");
    let pin = args.iter().any(|a| a == "--pin");
    let scatter = args.iter().any(|a| a == "--scatter");
    let parallel_init = args.iter().any(|a| a == "--parallel-init");
    let phases_ms: u64 = arg(&args, "--phases", 0);
    let refault_ms: u64 = arg(&args, "--refault-ms", 0);
    let refault_parts: usize = arg(&args, "--refault-parts", 1usize).max(1);
    let refault_s: f64 = arg(&args, "--refault-s", f64::INFINITY);
    let stop_file: String = arg(&args, "--stop-file", String::new());
    let thp = args.iter().any(|a| a == "--thp");
    let len = mb << 20;
    let made = if thp {
        AnonBuffer::with_huge_pages(len, 0)
    } else if parallel_init {
        AnonBuffer::untouched(len)
    } else {
        AnonBuffer::new(len, 0)
    };
    let mut buf = match made {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ptb-testapp: cannot map {mb} MiB: {e}");
            std::process::exit(2);
        }
    };
    if !parallel_init {
        // Initialise by this thread only, so first touch puts the whole buffer on its node.
        for (i, c) in buf.as_mut_slice().chunks_exact_mut(8).enumerate() {
            c.copy_from_slice(&word(i).to_le_bytes());
        }
    }
    let base = buf.as_mut_ptr() as usize;
    let buf = Arc::new(buf);
    let expect = expected(0..len);
    let addrs = buf.page_addrs();
    // Part of thread i: whole pages, the last thread takes the rest.
    let ps = sys::page_size() as usize;
    let pages_per = (addrs.len() / threads).max(1);
    let part = move |i: usize| -> std::ops::Range<usize> {
        let a = (i * pages_per * ps).min(len);
        let b = if i + 1 == threads { len } else { ((i + 1) * pages_per * ps).min(len) };
        a..b
    };
    // What thread i reads at time t: its part (--partition, or the even periods of --phases),
    // else the whole buffer.
    let range_of = move |i: usize, t: Duration| -> std::ops::Range<usize> {
        let shared_now = match (t.as_millis() as u64).checked_div(phases_ms) {
            Some(k) => k % 2 == 1,
            None => !partition,
        };
        if shared_now {
            0..len
        } else {
            part(i)
        }
    };
    if refault_ms > 0 {
        install_refault_handler(addrs[0] as usize, len);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let passes = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(std::sync::Barrier::new(threads + 1));
    let ncpu = online_cpus();
    let t_start = Instant::now();
    let mut hs = vec![];
    for i in 0..threads {
        let (buf, stop, bad, passes, ready) = (buf.clone(), stop.clone(), bad.clone(), passes.clone(), ready.clone());
        hs.push(std::thread::spawn(move || {
            let tid = nix::unistd::gettid().as_raw() as u32;
            if pin {
                let mut one = ptb_topology::CpuSet::new();
                one.insert_raw(i as u32 % ncpu);
                if let Err(e) = sys::set_affinity(tid, &one) {
                    eprintln!("ptb-testapp: thread {i}: cannot pin to CPU {}: {e}", i as u32 % ncpu);
                }
            }
            if parallel_init {
                let r = part(i);
                // SAFETY: every thread writes only its own part of the mapping, before the
                // barrier; nobody reads the buffer until every part is written.
                let mine = unsafe { std::slice::from_raw_parts_mut((base + r.start) as *mut u8, r.len()) };
                for (k, c) in mine.chunks_exact_mut(8).enumerate() {
                    c.copy_from_slice(&word(r.start / 8 + k).to_le_bytes());
                }
            }
            ready.wait();
            let own = part(i);
            let (exp_own, exp_all) = (expected(own.clone()), expected(0..len));
            let npg = len / ps;
            let exp_scatter = (0..npg).fold(0u64, |a, p| a.wrapping_add(expected(p * ps..(p + 1) * ps)));
            // A stride near the golden ratio of the buffer: consecutive pages land far apart and
            // any short run of them covers the buffer evenly.
            let stride = (npg * 618 / 1000 + 1..).find(|s| gcd(*s, npg.max(1)) == 1).unwrap_or(1);
            let mut pass = 0usize;
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
                let range = range_of(i, t_start.elapsed());
                let ok = if range != own && scatter {
                    // The whole buffer, page by page in a scattered order that differs per
                    // thread and pass (so no thread is always first on a page). Under --phases
                    // a pass stops where its phase ends (and is not checked), so phases stay
                    // sharp however slow a pass is.
                    let start = (i * npg / threads + pass * 7919) % npg.max(1);
                    let mut got = 0u64;
                    let mut done = true;
                    for k in 0..npg {
                        if k % 64 == 0 && phases_ms > 0 && range_of(i, t_start.elapsed()) == own {
                            done = false;
                            break;
                        }
                        let p = (start + k * stride) % npg;
                        got = got.wrapping_add(checksum(&buf.as_slice()[p * ps..(p + 1) * ps]));
                    }
                    !done || got == exp_scatter
                } else {
                    let want = if range == own { exp_own } else { exp_all };
                    checksum(&buf.as_slice()[range]) == want
                };
                pass += 1;
                if !ok {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                passes.fetch_add(1, Ordering::Relaxed);
            }
            tid
        }));
    }
    ready.wait();
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

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
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

/// `check-real JSON DIR [MAX_L1]`: see the module doc.
fn check_real(args: &[String]) -> i32 {
    let (Some(json), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ptb-testapp check-real JSON DIR [MAX_L1]");
        return 2;
    };
    let max_l1: f64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(0.15);
    let doc: serde_json::Value = match std::fs::read_to_string(json).map(|t| serde_json::from_str(&t)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            eprintln!("ptb-testapp: {json}: {e}");
            return 2;
        }
        Err(e) => {
            eprintln!("ptb-testapp: {json}: {e}");
            return 2;
        }
    };
    let mut bad = 0;
    let failed = doc["failed_runs"].as_array().map_or(0, |v| v.len());
    if failed > 0 {
        println!("TESTAPP check-real: {failed} failed run(s): {}", doc["failed_runs"]);
        bad += 1;
    }
    let results = doc["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        println!("TESTAPP check-real: no successful run");
        bad += 1;
    }
    for r in &results {
        let (mode, rep, order) =
            (r["policy"].as_str().unwrap_or("?"), r["seed"].as_u64().unwrap_or(0), r["order"].as_u64().unwrap_or(0));
        let slug: String =
            mode.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
        let path = format!("{dir}/run-{order:02}-{slug}-{rep}.out");
        let out = std::fs::read_to_string(&path).unwrap_or_default();
        let ok = out.contains("checksum=ok") && r["exit_status"].as_i64() == Some(0);
        // The buffer's pages per kernel node, as the program saw them at its end.
        let buffer: BTreeMap<u64, f64> = out
            .lines()
            .find(|l| l.starts_with("TESTAPP pages"))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|t| {
                        let (k, v) = t.strip_prefix("node")?.split_once('=')?;
                        Some((k.parse().ok()?, v.parse().ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let total: f64 = buffer.values().sum();
        let nodes: Vec<u64> =
            r["access_map"]["nodes"].as_array().into_iter().flatten().filter_map(|v| v.as_u64()).collect();
        let served: Vec<f64> =
            r["access_map"]["controller_share"].as_array().into_iter().flatten().filter_map(|v| v.as_f64()).collect();
        let l1: f64 = if total > 0.0 && nodes.len() == served.len() && !nodes.is_empty() {
            nodes.iter().zip(&served).map(|(n, s)| (s - buffer.get(n).copied().unwrap_or(0.0) / total).abs()).sum()
        } else {
            f64::NAN
        };
        // Pages that ptb or the kernel's balancer moved during the run may sit elsewhere at the
        // end than when they were sampled: no comparison with the end state then.
        let moved = r["pages_migrated"].as_u64().unwrap_or(0) + u64::from(mode == "numa-balancing");
        let at_end = &r["anon_pages_per_node_at_end"];
        let anon: Vec<f64> = nodes.iter().map(|n| at_end[n.to_string()].as_f64().unwrap_or(0.0)).collect();
        let nm_off: f64 =
            nodes.iter().zip(&anon).map(|(n, a)| (a - buffer.get(n).copied().unwrap_or(0.0)).abs()).sum::<f64>();
        let nm_ok = moved > 0 || nm_off <= 0.1 * total + 1024.0;
        let map_ok = moved > 0 || l1 <= max_l1;
        let fmt = |v: Vec<f64>| v.iter().map(|x| format!("{:.0}", 100.0 * x)).collect::<Vec<_>>().join("/");
        let pages: Vec<f64> = nodes.iter().map(|n| buffer.get(n).copied().unwrap_or(0.0) / total.max(1.0)).collect();
        println!(
            "TESTAPP check-real: run {order} {mode} #{rep}: exit {} checksum {}; memory served % {} vs buffer pages % {}: L1 {l1:.3}{}; anonymous pages at end (numa_maps) {} vs buffer {}: off by {nm_off:.0}; pages moved {moved}",
            r["exit_status"],
            if out.contains("checksum=ok") { "ok" } else { "NOT ok" },
            fmt(served.clone()),
            fmt(pages),
            if moved > 0 { " (pages may have moved during the run: not required)" } else { "" },
            anon.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join("/"),
            nodes.iter().map(|n| format!("{:.0}", buffer.get(n).copied().unwrap_or(0.0))).collect::<Vec<_>>().join("/"),
        );
        if !(ok && map_ok && nm_ok) {
            bad += 1;
        }
    }
    i32::from(bad > 0)
}

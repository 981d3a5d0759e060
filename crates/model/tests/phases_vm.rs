//! The phase finder on recordings made the way the VM tests make them (tests/vm/guest-real.sh):
//! `ptb-testapp --threads 4 --mb 8 --refault-ms 100` with `--partition`, `--scatter` or
//! `--phases 1000 --scatter`, sampled by software page faults.
//!
//! Problem: the real recordings are uneven in ways a tidy synthetic stream is not, and the
//! earlier finder found 3 phase kinds instead of 2 in 2 of 12 VM recordings of the alternating
//! program (and in 3 of 400 seeds of the simulation below, 0 of 400 now).
//! Approach: simulate the program millisecond by millisecond. Every 100 ms (plus up to 20 ms:
//! the main thread sleeps in 20 ms steps) the buffer is protected; a reader's first access to a
//! protected page is a fault (a sample with its thread, page and time) and unprotects it. Each
//! thread has a budget of work per millisecond (a fault costs 8 page reads), runs only part of
//! the time (4 vCPUs on a busy host: runs of being descheduled) and checks its phase only where
//! the program does: at the start of a pass over its own quarter (a pass it cannot leave) and
//! every 64 pages of a scattered pass over the whole buffer (so threads switch phase at
//! different times, up to hundreds of ms apart, as the VM recordings show). Speeds and
//! scheduling vary by seed, from fault bursts right after each re-protect to a steady trickle
//! (seeds 0-11: 20 000 to 51 000 samples in 4 s; the VM recordings had 11 000 to 43 000).

use ptb_model::phases::{find, Phases, Point};

const PAGES: usize = 2048;
const THREADS: usize = 4;
const FAULT_COST: u32 = 8;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 17
    }
    fn unit(&mut self) -> f64 {
        (self.next() % 1_000_000) as f64 / 1e6
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Partition,
    Shared,
    /// Partitioned for 1 s, shared for 1 s, ...
    Phased,
}

struct Reader {
    /// Position in the current pass and whether it reads the whole buffer.
    k: usize,
    whole: bool,
    pass: usize,
    budget: u32,
    running: bool,
    run_p: f64,
}

/// A 4 s recording that starts `offset` ms into the program; points in time order and the
/// program's phase boundaries (ms since the recording started).
fn record(mode: Mode, seed: u64) -> (Vec<Point>, Vec<u64>) {
    let mut rng = Lcg(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let offset = 100 + rng.next() % 900;
    let stride = (PAGES * 618 / 1000 + 1..).find(|s| s % 2 == 1).unwrap_or(1);
    let shared_at = |ms: u64| match mode {
        Mode::Partition => false,
        Mode::Shared => true,
        Mode::Phased => (ms / 1000) % 2 == 1,
    };
    let mut readers: Vec<Reader> = (0..THREADS)
        .map(|_| Reader {
            k: 0,
            whole: false,
            pass: 0,
            budget: 8 + (rng.next() % 52) as u32,
            running: true,
            run_p: 0.3 + 0.7 * rng.unit(),
        })
        .collect();
    for (i, r) in readers.iter_mut().enumerate() {
        r.whole = shared_at(0);
        r.k = if r.whole { 0 } else { i * PAGES / THREADS };
    }
    let mut protected = vec![false; PAGES];
    let mut next_protect = 100u64;
    let mut pts = Vec::new();
    for ms in 0..offset + 4000 {
        if ms >= next_protect {
            protected.iter_mut().for_each(|p| *p = true);
            next_protect = ms + 100 + 20 * (rng.next() % 2);
        }
        for (i, r) in readers.iter_mut().enumerate() {
            // Descheduled in runs: the state persists with probability 0.97 per ms.
            if rng.unit() < 0.03 {
                r.running = rng.unit() < r.run_p;
            }
            if !r.running {
                continue;
            }
            let mut left = r.budget;
            while left > 0 {
                let (own_a, own_b) = (i * PAGES / THREADS, (i + 1) * PAGES / THREADS);
                // At a pass boundary (and every 64 pages of a scattered pass) the phase is checked.
                let at_end = if r.whole { r.k >= PAGES } else { r.k >= own_b };
                let now_shared = shared_at(ms);
                if at_end || (r.whole && r.k % 64 == 0 && !now_shared) {
                    r.pass += 1;
                    r.whole = now_shared;
                    r.k = if r.whole { 0 } else { own_a };
                }
                let page = if r.whole { (i * PAGES / THREADS + r.pass * 7919 + r.k * stride) % PAGES } else { r.k };
                let c = if protected[page] { FAULT_COST } else { 1 };
                if c > left {
                    break;
                }
                if protected[page] {
                    protected[page] = false;
                    if ms >= offset {
                        let t =
                            (ms - offset) * 1_000_000 + u64::from(r.budget - left) * 1_000_000 / u64::from(r.budget);
                        pts.push(Point { time_ns: t, thread: i, object: 0, pos: page as f64 / PAGES as f64 });
                    }
                }
                left -= c;
                r.k += 1;
            }
        }
    }
    pts.sort_by_key(|p| p.time_ns);
    let bounds = (1..6).map(|s| s * 1000).filter(|b| *b > offset && *b < offset + 4000).map(|b| b - offset).collect();
    (pts, bounds)
}

fn phases_of(mode: Mode, seed: u64) -> (Phases, Vec<u64>, usize) {
    let (pts, bounds) = record(mode, seed);
    let (t0, t1) = (pts.first().map_or(0, |p| p.time_ns), pts.last().map_or(0, |p| p.time_ns));
    (find(&pts, THREADS, 1, t0, t1), bounds, pts.len())
}

const SEEDS: u64 = 48;
/// Seeds (of 400 tried) where the earlier finder found 3 kinds in the alternating program: a
/// switch where some threads had switched and others not became a kind of its own.
const HARD: [u64; 3] = [119, 307, 313];

#[test]
fn alternating_program_gives_two_kinds_at_the_switches() {
    for seed in (0..SEEDS).chain(HARD) {
        let (ph, bounds, n) = phases_of(Mode::Phased, seed);
        let seq: Vec<usize> = ph.segments.iter().map(|s| s.kind).collect();
        assert_eq!(ph.kinds, 2, "seed {seed}: {n} samples, phases {seq:?} {ph:?}");
        // Every change point found is near one of the program's (threads switch up to a few
        // hundred ms late), and no switch of the program is missed.
        let cuts: Vec<u64> = ph.segments.iter().skip(1).map(|s| s.start_ns / 1_000_000).collect();
        for c in &cuts {
            assert!(
                bounds.iter().any(|b| c.abs_diff(*b) <= 500),
                "seed {seed}: change at {c} ms, program's {bounds:?}"
            );
        }
        // A switch closer than 300 ms to either end of the recording may fall in its first or
        // last (shortest) phase's windows.
        for b in bounds.iter().filter(|b| **b > 300 && **b < 3700) {
            assert!(cuts.iter().any(|c| c.abs_diff(*b) <= 500), "seed {seed}: switch at {b} ms missed: {cuts:?}");
        }
    }
}

#[test]
fn steady_programs_give_one_kind() {
    for mode in [Mode::Partition, Mode::Shared] {
        for seed in 0..SEEDS {
            let (ph, _, n) = phases_of(mode, seed);
            assert_eq!(ph.kinds, 1, "seed {seed} ({} mode): {n} samples: {ph:?}", mode == Mode::Shared);
        }
    }
}

/// What the generator makes (printed with --nocapture): samples per recording and the phases.
#[test]
fn recordings_look_like_the_vm_ones() {
    for seed in 0..4 {
        let (pts, _) = record(Mode::Phased, seed);
        // Samples per 100 ms, per thread: bursts after re-protects, uneven threads.
        let mut per = vec![[0usize; THREADS]; 41];
        for p in &pts {
            per[(p.time_ns / 100_000_000) as usize][p.thread] += 1;
        }
        let row: Vec<String> = per.iter().take(12).map(|c| format!("{:?}", c)).collect();
        println!("seed {seed}: {} samples; per 100 ms and thread: {}", pts.len(), row.join(" "));
        assert!(pts.len() > 2000, "seed {seed}: {} samples", pts.len());
    }
}

/// A recording from the VM (tests/data/vm-*.txt: samples per 10 ms, thread and quarter of the
/// buffer), as points spread evenly over each 10 ms.
fn vm_recording(name: &str) -> Vec<Point> {
    let path = format!("{}/tests/data/vm-{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut pts = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        let (ms, thread, quarter, n) = (v[0], v[1] as usize, v[2], v[3]);
        for i in 0..n {
            let time_ns = ms * 1_000_000 + i * 10_000_000 / n;
            let pos = (quarter as f64 + (i as f64 + 0.5) / n as f64) / 4.0;
            pts.push(Point { time_ns, thread, object: 0, pos });
        }
    }
    pts.sort_by_key(|p| p.time_ns);
    pts
}

#[test]
fn vm_recordings_give_the_programs_phase_kinds() {
    // The earlier finder (blocks of 3 time windows compared against max(0.35, 2.5 x median))
    // found 3 kinds in the full traces of s61-phased-2 and b612-phased-5: around a switch,
    // where some threads had switched and others not, it cut out a segment that matched
    // neither kind. Replayed from these 10 ms counts it still finds 3 in b612-phased-5 (a
    // 176 ms segment) and cuts s61-phased-2's shared phases to 615 ms.
    for (name, want) in [
        ("s61-phased-2", 2),
        ("b612-phased-5", 2),
        ("s61-phased-1", 2),
        ("b612-phased-1", 2),
        ("s61-partitioned-1", 1),
        ("b612-shared-1", 1),
    ] {
        let pts = vm_recording(name);
        let ph = find(&pts, THREADS, 1, pts[0].time_ns, pts[pts.len() - 1].time_ns);
        let seq: Vec<usize> = ph.segments.iter().map(|s| s.kind).collect();
        assert_eq!(ph.kinds, want, "{name}: {} samples: {seq:?} {ph:?}", pts.len());
        // Phases of the alternating program last about 1 s (the first and last are cut short).
        for s in ph.segments.iter().skip(1).take(ph.segments.len().saturating_sub(2)) {
            let ms = (s.end_ns - s.start_ns) / 1_000_000;
            assert!((700..=1300).contains(&ms), "{name}: a phase of {ms} ms: {ph:?}");
        }
    }
}

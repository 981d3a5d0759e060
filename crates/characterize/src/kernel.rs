//! The measuring kernels and the thread team that runs them.
//!
//! Problem: measure the sustained bandwidth a set of CPUs gets from one memory node, without
//! the hardware prefetchers hiding the memory system.
//!
//! Approach: the STREAM-like triad of ptb.md with a pseudo-random index,
//! `p = ((i + LENGTH/NTHREADS*t) * 302400041) % LENGTH; A[p] = B[p] + s*C[p]`. LENGTH is a
//! power of two, so the prime is coprime with it, `% LENGTH` is a mask, and each thread's slice
//! of `i` maps to a disjoint set of `p` (threads never write the same element). Threads are
//! 0-based here (the spec's 1-based `t` only rotates the slices). Each worker is pinned to one
//! CPU, publishes its iteration count after every batch, and the team is timed between two
//! snapshots of those counters after a warm-up, so thread start-up and ramp are not measured.
//! Bytes are counted as STREAM does: 24 per triad iteration (two reads, one write; write-
//! allocate traffic is not counted), 2 per copied byte for the sequential copy.

use crate::buffer::NodeBuffer;
use crate::error::CharError;
use crate::sys;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The multiplier of the pseudo-random index (ptb.md).
pub const PRIME: u64 = 302_400_041;
/// Bytes counted per triad iteration.
pub const TRIAD_BYTES: u64 = 24;
/// Iterations between two checks of the stop flag.
const BATCH: u64 = 1024;
/// Bytes copied between two checks of the stop flag.
const COPY_PIECE: usize = 256 * 1024;

/// Three arrays of `len` doubles (A, B, C) laid out back to back in one node buffer. It
/// borrows the buffer (`'b`), so it cannot outlive it: the raw pointers inside are only ever
/// used while the memory they point to is mapped. (It used to be `Copy + Send + Sync` with no
/// lifetime, so safe code could keep it after the buffer was unmapped.)
///
/// ```compile_fail
/// use ptb_characterize::{buffer::NodeBuffer, kernel::Triad};
/// let t = {
///     let buf = NodeBuffer::new(3 * 8 * 1024, 0).unwrap();
///     Triad::new(&buf, 1024)
/// }; // error: `buf` does not live long enough
/// let _ = t;
/// ```
#[derive(Clone, Copy)]
pub struct Triad<'b> {
    a: *mut f64,
    b: *const f64,
    c: *const f64,
    len: usize,
    _buf: PhantomData<&'b NodeBuffer>,
}

// SAFETY: the pointers stay inside the borrowed `NodeBuffer` (alive for `'b`); workers write
// disjoint elements of A (see `work`) and only read B and C.
unsafe impl Send for Triad<'_> {}
// SAFETY: as for Send: shared use only ever writes disjoint elements.
unsafe impl Sync for Triad<'_> {}

impl<'b> Triad<'b> {
    /// Arrays of `len` doubles (a power of two) at the start of three thirds of `buf`.
    pub fn new(buf: &'b NodeBuffer, len: usize) -> Self {
        let third = buf.len() / 3 / 8;
        assert!(len.is_power_of_two() && len <= third, "triad length {len} must be a power of two <= {third}");
        let base = buf.as_mut_ptr().cast::<f64>();
        Triad { a: base, b: base.wrapping_add(third), c: base.wrapping_add(2 * third), len, _buf: PhantomData }
    }

    /// Run worker `t` of `n` until `stop`, publishing the iteration count in `done`.
    fn work(&self, t: usize, n: usize, stop: &AtomicBool, done: &AtomicU64) {
        let chunk = (self.len / n).max(1);
        let base = (chunk * t) as u64;
        let mask = (self.len - 1) as u64;
        let s = std::hint::black_box(3.0f64);
        let (mut i, mut iters) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..BATCH {
                let p = ((i + base).wrapping_mul(PRIME) & mask) as usize;
                // SAFETY: p <= mask < len, inside all three arrays; slices of `i` are disjoint
                // per thread and the map i -> p is a bijection, so no two threads write one p.
                unsafe { *self.a.add(p) = *self.b.add(p) + s * *self.c.add(p) };
                i += 1;
                if i == chunk as u64 {
                    i = 0;
                }
            }
            iters += BATCH;
            done.store(iters * TRIAD_BYTES, Ordering::Relaxed);
        }
    }
}

/// A plain sequential copy between the two halves of a buffer (the sanity reference); it
/// borrows the buffer, like [`Triad`].
///
/// ```compile_fail
/// use ptb_characterize::{buffer::NodeBuffer, kernel::Copy};
/// let c = Copy::new(&NodeBuffer::new(1 << 16, 0).unwrap(), 1 << 12); // temporary dropped
/// let _ = c;
/// ```
#[derive(Clone, Copy)]
pub struct Copy<'b> {
    src: *const u8,
    dst: *mut u8,
    len: usize,
    _buf: PhantomData<&'b NodeBuffer>,
}

// SAFETY: the pointers stay inside the borrowed buffer; workers copy disjoint slices.
unsafe impl Send for Copy<'_> {}
// SAFETY: as for Send.
unsafe impl Sync for Copy<'_> {}

impl<'b> Copy<'b> {
    /// Copy between the first `len` bytes of each half of `buf`.
    pub fn new(buf: &'b NodeBuffer, len: usize) -> Self {
        let half = buf.len() / 2;
        let len = len.min(half);
        let p = buf.as_mut_ptr();
        Copy { src: p, dst: p.wrapping_add(half), len, _buf: PhantomData }
    }

    fn work(&self, t: usize, n: usize, stop: &AtomicBool, done: &AtomicU64) {
        let chunk = self.len / n;
        let (start, mut bytes) = (chunk * t, 0u64);
        while !stop.load(Ordering::Relaxed) {
            let mut off = 0;
            while off < chunk && !stop.load(Ordering::Relaxed) {
                let k = COPY_PIECE.min(chunk - off);
                // SAFETY: [start+off, +k) lies in this worker's slice of each half.
                unsafe { std::ptr::copy_nonoverlapping(self.src.add(start + off), self.dst.add(start + off), k) };
                off += k;
                bytes += 2 * k as u64;
                done.store(bytes, Ordering::Relaxed);
            }
        }
    }
}

/// What a team runs (borrowing the buffer it runs on).
#[derive(Clone, Copy)]
pub enum Work<'b> {
    Triad(Triad<'b>),
    Copy(Copy<'b>),
}

/// One measuring thread: the CPU it is pinned to and the team (CPU group) it counts for.
#[derive(Clone, Copy, Debug)]
pub struct Worker {
    pub cpu: u32,
    pub team: usize,
}

#[repr(align(128))]
struct Padded(AtomicU64);

/// What one team run measured.
#[derive(Clone, Debug)]
pub struct TeamRun {
    /// GB/s per team.
    pub gbps: Vec<f64>,
    /// The smallest share of the run any worker spent on a CPU (thread CPU time / wall time):
    /// well below 1 means other work took the CPUs and the figures are low.
    pub cpu_share: f64,
}

/// Run `work` on every worker at once; returns GB/s per team (`n_teams` entries), timed over
/// `duration` after a warm-up of a quarter of it.
pub fn run_team(workers: &[Worker], n_teams: usize, work: Work<'_>, duration: Duration) -> Result<TeamRun, CharError> {
    let n = workers.len();
    if n == 0 {
        return Ok(TeamRun { gbps: vec![0.0; n_teams], cpu_share: 1.0 });
    }
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(n + 1);
    let done: Vec<Padded> = (0..n).map(|_| Padded(AtomicU64::new(0))).collect();
    let warm = (duration / 4).max(Duration::from_millis(1));
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(t, w)| {
                let (stop, barrier, done) = (&stop, &barrier, &done[t].0);
                s.spawn(move || {
                    let pinned = sys::pin_current_thread(w.cpu);
                    barrier.wait();
                    pinned.map_err(|source| affinity_error(w.cpu, source))?;
                    let c0 = sys::thread_cpu_time();
                    match work {
                        Work::Triad(k) => k.work(t, n, stop, done),
                        Work::Copy(k) => k.work(t, n, stop, done),
                    }
                    Ok::<Duration, CharError>(sys::thread_cpu_time() - c0)
                })
            })
            .collect();
        barrier.wait();
        let released = Instant::now();
        std::thread::sleep(warm);
        let t0 = Instant::now();
        let before: Vec<u64> = done.iter().map(|d| d.0.load(Ordering::Relaxed)).collect();
        std::thread::sleep(duration);
        // On a busy machine a worker may not have run at all yet: extend the window (up to ten
        // times, or 2 s for short samples) until every worker has made progress, so no figure is
        // an artefact of scheduling.
        let limit = (duration * 10).max(Duration::from_secs(2));
        let mut after: Vec<u64>;
        loop {
            after = done.iter().map(|d| d.0.load(Ordering::Relaxed)).collect();
            if after.iter().zip(&before).all(|(a, b)| a > b) || t0.elapsed() > limit {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        let wall = released.elapsed().as_secs_f64();
        let mut cpu_share = 1.0f64;
        for h in handles {
            let cpu = h.join().map_err(|_| CharError::Thread("a bandwidth worker panicked".into()))??;
            cpu_share = cpu_share.min(cpu.as_secs_f64() / wall);
        }
        let mut gbps = vec![0.0; n_teams];
        for (w, (b, a)) in workers.iter().zip(before.iter().zip(&after)) {
            gbps[w.team] += (a - b) as f64 / secs / 1e9;
        }
        Ok(TeamRun { gbps, cpu_share })
    })
}

/// Explain an affinity failure.
pub(crate) fn affinity_error(cpu: u32, source: std::io::Error) -> CharError {
    let allowed = sys::allowed_cpus();
    let hint = if allowed.contains(&cpu) {
        "Check the CPU is online".to_string()
    } else {
        format!(
            "This process may only run on CPUs {allowed:?} (taskset/cpuset); run ptb characterize without CPU \
             restrictions, or use a machine model whose groups name allowed CPUs"
        )
    };
    CharError::Affinity { cpu, error: source, hint }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_map_is_a_permutation_and_thread_slices_are_disjoint() {
        let len = 1usize << 12;
        let mut seen = vec![false; len];
        for i in 0..len as u64 {
            let p = (i.wrapping_mul(PRIME) & (len as u64 - 1)) as usize;
            assert!(!seen[p], "p={p} hit twice");
            seen[p] = true;
        }
    }

    #[test]
    fn a_team_on_node_0_reports_positive_bandwidth_per_team() {
        let cpus = sys::allowed_cpus();
        let buf = NodeBuffer::new(3 * 8 * (1 << 16), 0).unwrap();
        let workers: Vec<Worker> = cpus.iter().take(2).enumerate().map(|(i, &c)| Worker { cpu: c, team: i }).collect();
        let run = run_team(&workers, workers.len(), Work::Triad(Triad::new(&buf, 1 << 16)), Duration::from_millis(5))
            .unwrap();
        let gbps = run.gbps;
        assert!(run.cpu_share > 0.0 && run.cpu_share <= 1.05, "{}", run.cpu_share);
        assert_eq!(gbps.len(), workers.len());
        assert!(gbps.iter().all(|g| *g > 0.0), "{gbps:?}");
        let copy = run_team(&workers[..1], 1, Work::Copy(Copy::new(&buf, 1 << 20)), Duration::from_millis(5)).unwrap();
        assert!(copy.gbps[0] > 0.0);
    }

    #[test]
    fn pinning_to_a_cpu_outside_the_allowed_set_is_explained() {
        let buf = NodeBuffer::new(3 * 8 * 1024, 0).unwrap();
        let w = [Worker { cpu: 4000, team: 0 }];
        let e = run_team(&w, 1, Work::Triad(Triad::new(&buf, 1024)), Duration::from_millis(1)).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("CPU 4000") && text.contains("may only run on CPUs"), "{text}");
    }
}

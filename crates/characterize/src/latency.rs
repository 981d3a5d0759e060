//! Idle memory latency by dependent pointer chasing.
//!
//! Problem: measure how long one load takes from a CPU group to a memory node, with no
//! overlap between loads and no help from prefetchers or caches.
//!
//! Approach: split a node-bound buffer larger than the last-level cache into cache-line slots
//! and link them into one random cycle (Sattolo's shuffle, so the cycle visits every slot).
//! Each load's address is the value of the previous load, so loads cannot overlap; the mean
//! thread CPU time per step over a timed run is the latency. TLB misses are reduced by asking for huge
//! pages, as MLC does by default.

use crate::buffer::NodeBuffer;
use crate::error::CharError;
use crate::kernel::affinity_error;
use crate::sys;
use std::time::{Duration, Instant};

/// Steps between two clock reads.
const STEPS: usize = 4096;

/// A random cycle of pointers through a node buffer. It borrows the buffer (`'b`): the chase
/// follows addresses inside it, so it must not outlive it.
///
/// ```compile_fail
/// use ptb_characterize::{buffer::NodeBuffer, latency::Cycle};
/// let c = {
///     let buf = NodeBuffer::new(1 << 16, 0).unwrap();
///     Cycle::build(&buf, 64, 1)
/// }; // error: `buf` does not live long enough
/// let _ = c.slots();
/// ```
pub struct Cycle<'b> {
    start: usize,
    slots: usize,
    _buf: std::marker::PhantomData<&'b NodeBuffer>,
}

/// SplitMix64: a small, good-enough generator for shuffling (no dependency needed).
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One cyclic permutation of `0..n` (Sattolo): `next[k]` is the slot after `k`.
pub(crate) fn sattolo(n: usize, seed: u64) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut rng = SplitMix(seed);
    for i in (1..n).rev() {
        let j = rng.below(i);
        perm.swap(i, j);
    }
    perm
}

impl<'b> Cycle<'b> {
    /// Link the slots of `buf` (each `slot` bytes, rounded up to a whole number of pointers so
    /// every slot is pointer aligned) into one random cycle.
    pub fn build(buf: &'b NodeBuffer, slot: usize, seed: u64) -> Self {
        let slot = slot.max(1).next_multiple_of(std::mem::size_of::<usize>());
        let slots = (buf.len() / slot).max(1);
        let next = sattolo(slots, seed);
        let base = buf.as_mut_ptr();
        for (k, &nk) in next.iter().enumerate() {
            let target = base.wrapping_add(nk as usize * slot) as usize;
            // SAFETY: slot k lies inside buf (k < slots = len / slot) and is pointer aligned
            // (the buffer is page aligned and `slot` a multiple of the pointer size).
            unsafe { base.add(k * slot).cast::<usize>().write(target) };
        }
        Cycle { start: base as usize, slots, _buf: std::marker::PhantomData }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Mean ns per dependent load, chased for `duration` from a thread pinned to `cpu`.
    pub fn chase_ns(&self, cpu: u32, duration: Duration) -> Result<f64, CharError> {
        let start = self.start;
        std::thread::scope(|s| {
            s.spawn(move || {
                sys::pin_current_thread(cpu).map_err(|e| affinity_error(cpu, e))?;
                let mut p = start;
                // Warm-up: leave the start-up transient (and the slot last written) behind.
                p = chase(p, STEPS);
                // Timed in thread CPU time: a dependent load stalls the CPU it runs on, so CPU
                // time is the latency, and time spent descheduled on a busy machine is not.
                let (t0, c0) = (Instant::now(), sys::thread_cpu_time());
                let mut steps = 0u64;
                loop {
                    p = chase(p, STEPS);
                    steps += STEPS as u64;
                    if sys::thread_cpu_time() - c0 >= duration || t0.elapsed() >= duration * 20 {
                        break;
                    }
                }
                std::hint::black_box(p);
                Ok((sys::thread_cpu_time() - c0).as_secs_f64() * 1e9 / steps as f64)
            })
            .join()
            .map_err(|_| CharError::Thread("the latency worker panicked".into()))?
        })
    }
}

/// Follow `n` pointers from `p`.
#[inline(never)]
fn chase(mut p: usize, n: usize) -> usize {
    for _ in 0..n {
        // SAFETY: every slot of the cycle holds the address of another slot of the same live
        // buffer (see `Cycle::build`), and the chase starts at a slot.
        p = unsafe { *(p as *const usize) };
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sattolo_makes_one_cycle_through_every_slot() {
        for n in [1usize, 2, 3, 17, 1000] {
            let next = sattolo(n, 42);
            let (mut k, mut seen) = (0usize, vec![false; n]);
            for _ in 0..n {
                assert!(!seen[k]);
                seen[k] = true;
                k = next[k] as usize;
            }
            assert_eq!(k, 0, "cycle of {n} must close after n steps");
            assert!(seen.iter().all(|s| *s));
        }
    }

    #[test]
    fn chasing_a_node_0_cycle_gives_a_plausible_latency() {
        let buf = NodeBuffer::new(1 << 20, 0).unwrap();
        let c = Cycle::build(&buf, 64, 7);
        assert_eq!(c.slots(), (1 << 20) / 64);
        // A slot size that is not a whole number of pointers is rounded up (was misaligned).
        assert_eq!(Cycle::build(&buf, 12, 7).slots(), (1 << 20) / 16);
        let cpu = sys::allowed_cpus()[0];
        let ns = c.chase_ns(cpu, Duration::from_millis(2)).unwrap();
        assert!(ns > 0.1 && ns < 100_000.0, "{ns} ns");
    }
}

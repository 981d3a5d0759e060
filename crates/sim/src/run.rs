//! The mutable state of one simulated run: where threads run, where pages live, how far each
//! thread and application has come, pending costs, samples and hint-fault events.
//!
//! Scheduling without pinning: threads start where Linux puts a fresh parallel program and
//! then wander between nodes as its scheduler moves them ([`crate::sched`]). Threads sharing a
//! CPU share its time equally. A thread given a node (not a CPU) runs on the least-loaded CPU
//! of that node.

use crate::error::SimError;
use crate::layout::slice;
use crate::metrics::Accum;
use crate::pages::PageTable;
use crate::sim::Simulation;
use crate::solver::{Demand, Rate, Solver};
use ptb_policy::{AllocPolicy, SamplingMode, SamplingRequest, ThreadState};
use ptb_profile::Sample;
use ptb_topology::{CpuSet, GroupIdx, NodeIdx};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// A contiguous page range a thread accesses, with its share of reads and writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Piece {
    pub obj: usize,
    pub start: usize,
    pub end: usize,
    pub w_read: f64,
    pub w_write: f64,
}

#[derive(Clone, Debug)]
pub(crate) struct ThreadRt {
    pub cpu_pos: usize,
    pub affinity: Option<CpuSet>,
    /// The node a plan made this thread's preferred node (`ThreadTarget::Preferred`, the
    /// kernel's `numa_preferred_nid`); the scheduler model keeps it there (`crate::sched`).
    pub preferred: Option<usize>,
    /// Instructions left in the current phase.
    pub remaining: f64,
    pub working: bool,
    pub alive: bool,
    /// Pending stall (migration, thread move, carried overhead), ns.
    pub stall_ns: f64,
    /// Out of the contention solve while a long stall lasts ([`crate::engine::STALL_EVENT_NS`]).
    pub parked: bool,
    pub sample_carry: f64,
    pub pieces: Vec<Piece>,
    pub f_read: Vec<f64>,
    pub f_write: Vec<f64>,
    pub demand: Demand,
    /// What `demand` was built from (see `crate::access::DemandKey`).
    pub demand_key: Option<crate::access::DemandKey>,
    pub rate: Rate,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct AppRt {
    /// Position in the app's phase sequence.
    pub cur: usize,
    pub phase_started_ns: f64,
    pub done_ns: Option<f64>,
    /// Time spent per compiled phase, ns.
    pub phase_ns: Vec<f64>,
}

/// Page-copy traffic of a migration, on the resources it crosses, until a time.
#[derive(Clone, Debug)]
pub(crate) struct Background {
    pub until_ns: f64,
    pub loads: Vec<(u32, f64)>,
}

/// A pending NUMA hinting fault: (time, sequence, thread, object, page).
pub(crate) type HintEvent = Reverse<(u64, u64, u32, u32, u32)>;

pub(crate) struct Run<'a> {
    pub sim: &'a Simulation,
    pub now_ns: f64,
    pub objs: Vec<PageTable>,
    pub armed: Vec<Vec<u64>>,
    pub threads: Vec<ThreadRt>,
    pub apps: Vec<AppRt>,
    pub cpu_load: Vec<u32>,
    pub used_pages: Vec<u64>,
    pub cap_pages: Vec<u64>,
    pub background: Vec<Background>,
    pub bg_vec: Vec<f64>,
    /// Scratch space for demand building (one slot per resource, kept zeroed).
    pub scratch: Vec<f64>,
    /// Scratch: a node histogram, and a thread's previous pieces and node shares (reused so
    /// the per-step paths do not allocate).
    pub hist: Vec<u64>,
    pub touched: Vec<u32>,
    pub prev_pieces: Vec<Piece>,
    pub prev_shares: Vec<f64>,
    pub solver: Solver,
    pub dirty: bool,
    pub rng: ChaCha8Rng,
    /// Where address samples are drawn (its generator is seeded from `rng`).
    pub sampler: crate::drawer::Sampler,
    /// Samples drawn this cycle and not yet collected into `samples`; an empty vector to
    /// hand the drawing thread next.
    pub samples_drawn: usize,
    pub spare_samples: Vec<Sample>,
    /// Sample jobs not yet handed to the drawer.
    pub batch: crate::drawer::Batch,
    pub acc: Accum,
    /// Steps taken and contention solves made (for the speed benchmark).
    pub steps: u64,
    pub solves: u64,
    pub solver_iterations: u64,
    pub samples: Vec<Sample>,
    pub samples_dropped_cycle: u64,
    /// IBS op hardware asked for misses ([`crate::sampler::Thinning`]).
    pub thinning: crate::sampler::Thinning,
    pub sampling: SamplingRequest,
    pub hint_events: BinaryHeap<HintEvent>,
    pub hint_seq: u64,
    pub hint_cursor: Vec<(usize, usize)>,
    pub next_scan_ns: f64,
}

impl<'a> Run<'a> {
    pub fn new(sim: &'a Simulation, seed_salt: u64) -> Self {
        let l = &sim.layout;
        let nn = sim.sm.n_nodes;
        let objs: Vec<PageTable> = l.objects.iter().map(|o| PageTable::new(o.npages, nn)).collect();
        let armed = l.objects.iter().map(|o| vec![0u64; o.npages.div_ceil(64)]).collect();
        let mut cpu_load = vec![0u32; sim.cpus.len()];
        let allowed_pos: Vec<usize> =
            (0..sim.cpus.len()).filter(|&p| sim.allowed.contains_idx(NodeIdx::from_ix(sim.cpu_node[p]))).collect();
        let threads = (0..l.threads.len())
            .map(|k| {
                let pos = allowed_pos[k % allowed_pos.len()];
                cpu_load[pos] += 1;
                ThreadRt {
                    cpu_pos: pos,
                    affinity: None,
                    preferred: None,
                    remaining: 0.0,
                    working: false,
                    alive: true,
                    stall_ns: 0.0,
                    parked: false,
                    sample_carry: 0.0,
                    pieces: vec![],
                    f_read: vec![0.0; nn],
                    f_write: vec![0.0; nn],
                    demand: Demand::default(),
                    demand_key: None,
                    rate: Rate::default(),
                }
            })
            .collect();
        let apps = l.apps.iter().map(|a| AppRt { phase_ns: vec![0.0; a.phases.len()], ..Default::default() }).collect();
        let cap_pages = sim.machine.nodes.iter().map(|n| n.memory_bytes / sim.machine.page_size).collect();
        let mut seed = sim.opts.seed ^ seed_salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for w in &sim.workloads {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(w.seed);
        }
        let nr = sim.sm.resources.len();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let fast_rng = SmallRng::seed_from_u64(rng.random());
        let readers = objs.iter().map(PageTable::reader).collect();
        let sampler = crate::drawer::Sampler::Inline(crate::drawer::Drawer::new(fast_rng, readers));
        let mut run = Run {
            sim,
            now_ns: 0.0,
            objs,
            armed,
            threads,
            apps,
            cpu_load,
            used_pages: vec![0; nn],
            cap_pages,
            background: vec![],
            bg_vec: vec![0.0; nr],
            scratch: vec![0.0; nr],
            hist: vec![0; nn],
            touched: vec![],
            prev_pieces: vec![],
            prev_shares: vec![],
            solver: Solver::new(nr),
            dirty: true,
            rng,
            sampler,
            samples_drawn: 0,
            spare_samples: vec![],
            batch: Default::default(),
            acc: Accum::new(nn, nr, l.apps.len()),
            steps: 0,
            solves: 0,
            solver_iterations: 0,
            samples: vec![],
            samples_dropped_cycle: 0,
            thinning: Default::default(),
            sampling: SamplingRequest::new(SamplingMode::None, Duration::from_secs(1)),
            hint_events: BinaryHeap::new(),
            hint_seq: 0,
            hint_cursor: vec![(0, 0); l.apps.len()],
            next_scan_ns: f64::INFINITY,
        };
        run.place_at_start();
        run
    }

    pub fn node_of(&self, t: usize) -> usize {
        self.sim.cpu_node[self.threads[t].cpu_pos]
    }

    pub fn group_of(&self, t: usize) -> usize {
        self.sim.cpu_group[self.threads[t].cpu_pos]
    }

    /// What a policy sees of the live threads.
    pub fn thread_states(&self) -> Vec<ThreadState> {
        let l = &self.sim.layout;
        (0..self.threads.len())
            .filter(|&t| self.threads[t].alive)
            .map(|t| ThreadState {
                tid: l.threads[t].tid,
                app: l.threads[t].app as u32,
                cpu: self.sim.cpus[self.threads[t].cpu_pos],
                node: NodeIdx::from_ix(self.node_of(t)),
                group: GroupIdx::from_ix(self.group_of(t)),
                affinity: self.threads[t].affinity.clone(),
            })
            .collect()
    }

    /// Index of a live thread by tid.
    pub fn thread_by_tid(&self, tid: u32) -> Option<usize> {
        let l = &self.sim.layout;
        let app = (tid / 100_000).checked_sub(1)? as usize;
        let idx = (tid % 100_000) as usize;
        let a = l.apps.get(app)?;
        (idx < a.n_threads).then_some(a.first_thread + idx).filter(|&t| self.threads[t].alive)
    }

    /// Move thread `t` to CPU position `pos`; returns true if it changed CPU.
    pub fn place_thread(&mut self, t: usize, pos: usize) -> bool {
        let old = self.threads[t].cpu_pos;
        if old == pos {
            return false;
        }
        self.cpu_load[old] -= 1;
        self.cpu_load[pos] += 1;
        self.threads[t].cpu_pos = pos;
        self.dirty = true;
        true
    }

    /// The least-loaded CPU position among `cpus` (ties: lowest CPU id); the current CPU wins ties.
    pub fn least_loaded(&self, t: usize, cpus: &CpuSet) -> Option<usize> {
        let cur = self.threads[t].cpu_pos;
        let mut best: Option<(u32, usize)> = None;
        for c in cpus.iter() {
            let Some(pos) = self.sim.cpu_pos(c) else { continue };
            let load = self.cpu_load[pos] - u32::from(pos == cur);
            let better = match best {
                None => true,
                Some((bl, bp)) => load < bl || (load == bl && pos == cur && bp != cur),
            };
            if better {
                best = Some((load, pos));
            }
        }
        best.map(|b| b.1)
    }

    /// Nearest allowed memory node with a free page, from node `from` (by idle latency of its
    /// first CPU group; `from` itself first).
    pub fn nearest_with_room(&self, from: usize, group: usize) -> Option<usize> {
        let mut cands: Vec<usize> =
            self.sim.mem_nodes.iter().copied().filter(|&n| self.used_pages[n] < self.cap_pages[n]).collect();
        cands.sort_by(|&a, &b| {
            let ka = (a != from, self.sim.sm.lat0(group, a));
            let kb = (b != from, self.sim.sm.lat0(group, b));
            ka.partial_cmp(&kb).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
        });
        cands.first().copied()
    }

    /// Place page `p` of object `o` (allocation), counting node usage.
    pub fn alloc_page(&mut self, o: usize, p: usize, n: usize) {
        if let Some(old) = self.objs[o].set(p, n) {
            self.used_pages[old] -= 1;
        }
        self.used_pages[n] += 1;
    }

    /// First-touch every object under `alloc` (the initialising threads' nodes at t = 0).
    pub fn allocate(&mut self, alloc: &AllocPolicy, only: Option<&[bool]>) -> Result<(), SimError> {
        let l = &self.sim.layout;
        let pattern: Vec<usize> = match alloc {
            AllocPolicy::FirstTouch => vec![],
            AllocPolicy::Interleave(ns) => ns.iter().map(|n| n.ix()).collect(),
            AllocPolicy::Weighted(ws) => {
                ws.iter().flat_map(|(n, w)| std::iter::repeat_n(n.ix(), *w as usize)).collect()
            }
        };
        for o in 0..l.objects.len() {
            if only.is_some_and(|m| !m[o]) {
                continue;
            }
            let obj = &l.objects[o];
            let app = &l.apps[obj.app];
            let k = obj.initialisers.len();
            for i in 0..k {
                let t = app.first_thread + obj.initialisers[i];
                let (s, e) = slice(obj.npages, k, i);
                let (home, group) = (self.node_of(t), self.group_of(t));
                // First touch of a fresh slice on a node with room: every page goes home at once.
                if pattern.is_empty()
                    && self.used_pages[home] + (e - s) as u64 <= self.cap_pages[home]
                    && self.sim.is_mem_allowed(home)
                    && self.objs[o].fill(s, e, home)
                {
                    self.used_pages[home] += (e - s) as u64;
                    continue;
                }
                for p in s..e {
                    let want = if pattern.is_empty() {
                        home
                    } else {
                        pattern[((obj.start_vpn + p as u64) % pattern.len() as u64) as usize]
                    };
                    let n = if self.used_pages[want] < self.cap_pages[want] && self.sim.is_mem_allowed(want) {
                        want
                    } else {
                        self.nearest_with_room(want, group).ok_or_else(|| {
                            SimError::Options(format!(
                                "the workloads need {} MiB but the allowed nodes' memory is full",
                                (l.total_pages() * self.sim.machine.page_size) >> 20
                            ))
                        })?
                    };
                    self.alloc_page(o, p, n);
                }
            }
        }
        self.dirty = true;
        Ok(())
    }

    /// Free bytes per node.
    pub fn free_bytes(&self) -> Vec<u64> {
        (0..self.sim.sm.n_nodes)
            .map(|n| (self.cap_pages[n].saturating_sub(self.used_pages[n])) * self.sim.machine.page_size)
            .collect()
    }
}

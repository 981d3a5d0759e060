//! Drawing address samples, on the run's own thread or on a second one.
//!
//! Problem: a run under a sampling policy draws tens of thousands of samples per simulated
//! second (several random numbers, a page-table lookup and an 80-byte record each); that was
//! about half of a run's CPU time, all of it on the thread that also solves contention and runs
//! the policy.
//!
//! Approach: the sampler ([`crate::sampler`]) decides on the run's thread how many samples each
//! thread gives in a step and what they may be (a [`Job`]); a [`Drawer`] turns jobs into
//! samples, in job order, with its own random generator and a read-only view of the page tables
//! ([`crate::pages::NodeReader`]). With [`crate::SimOptions::sampler_thread`] the drawer runs on
//! a second thread fed through a channel while the run goes on; the run hands its samples over
//! before each policy cycle (the only place pages move). The drawer sees the same jobs in the
//! same order either way, so the samples, and every figure of the run, are the same bit for bit
//! with or without the second thread.

use crate::layout::{CacheHit, Layout};
use crate::pages::{NodeReader, UNALLOCATED};
use crate::run::Piece;
use ptb_profile::datasrc::{encode, encode_store_l1, MemLevel};
use ptb_profile::{Sample, SampleKind};
use ptb_topology::CpuId;
use rand::rngs::SmallRng;
use rand::Rng;
use std::sync::mpsc::{Receiver, Sender};

/// The samples of one thread in one step.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub app: u32,
    pub tid: u32,
    pub cpu: CpuId,
    /// Node of the thread's CPU (a DRAM sample is local when its page lives there).
    pub node: usize,
    /// Latency a DRAM sample reports when its page's node is unknown (the thread's mean).
    pub latency: Option<f32>,
    /// Latency a DRAM sample reports by the node of its page (`Batch::lat[lat]`, one per node;
    /// empty when the source reports no latency).
    pub lat: std::ops::Range<usize>,
    /// Probability that a sample is a DRAM access, and that it is a store.
    pub dram: f64,
    pub writes: f64,
    /// Store samples say only that they missed L1, with no latency (Intel PEBS precise stores).
    pub stores_l1_only: bool,
    /// Cache hits on named objects (`Batch::hits[hits]`): a pipeline's spin loop and a
    /// phase's `hits`; empty for samplers of DRAM accesses.
    pub hits: std::ops::Range<usize>,
    pub take: u64,
    /// Time of the first sample is `t0 + step / 2`, samples `step` apart.
    pub t0: f64,
    pub step: f64,
    /// The thread's pieces (`Batch::pieces[pieces]`) and their total read and write weights.
    pub pieces: std::ops::Range<usize>,
    pub totals: [f64; 2],
}

/// The jobs of one step.
#[derive(Clone, Debug, Default)]
pub(crate) struct Batch {
    pub jobs: Vec<Job>,
    pub pieces: Vec<Piece>,
    /// Per-node latencies of the jobs, ns.
    pub lat: Vec<f32>,
    /// The jobs' cache hits on named objects: each `share` the probability that a sample is
    /// such a hit (a job's add up to at most the share of its samples that are not DRAM
    /// accesses).
    pub hits: Vec<CacheHit>,
}

/// Pick a piece by weight (`write` selects the write weights, whose sum is `total`); `x` uniform
/// in [0, 1).
fn pick(pieces: &[Piece], write: bool, x: f64, total: f64) -> Option<&Piece> {
    let w = |p: &Piece| if write { p.w_write } else { p.w_read };
    if total <= 0.0 {
        return None;
    }
    let mut target = x * total;
    for p in pieces {
        target -= w(p);
        if target < 0.0 && w(p) > 0.0 {
            return Some(p);
        }
    }
    pieces.iter().rev().find(|p| w(p) > 0.0)
}

/// Total read (`write` false) or write weight of the pieces.
pub(crate) fn total_weight(pieces: &[Piece], write: bool) -> f64 {
    pieces.iter().map(|p| if write { p.w_write } else { p.w_read }).sum()
}

/// How many samples a job gives: all it takes, or none when no piece has any weight (whatever
/// the random draws).
pub(crate) fn yields(pieces: &[Piece], totals: [f64; 2], take: u64) -> u64 {
    let none = pick(pieces, false, 0.5, totals[0]).is_none() && pick(pieces, true, 0.5, totals[1]).is_none();
    if none {
        0
    } else {
        take
    }
}

/// Turns jobs into samples.
#[derive(Debug)]
pub(crate) struct Drawer {
    rng: SmallRng,
    /// Where each object's pages live (one reader per object of the layout).
    nodes: Vec<NodeReader>,
    /// Samples drawn since the last hand-over, and how many of them are DRAM accesses.
    pub samples: Vec<Sample>,
    pub dram: u64,
}

impl Drawer {
    pub fn new(rng: SmallRng, nodes: Vec<NodeReader>) -> Drawer {
        Drawer { rng, nodes, samples: vec![], dram: 0 }
    }

    /// Draw the samples of every job of a batch, in order.
    pub fn draw(&mut self, l: &Layout, page_size: u64, line_size: u64, batch: &Batch) {
        let ps = page_size;
        let lines_per_page = (ps / line_size.max(1)).max(1);
        let line = ps / lines_per_page;
        // Data source word of a sample: by store, then cache / local DRAM / remote DRAM.
        let data_src = [false, true]
            .map(|store| [MemLevel::Cache, MemLevel::LocalDram, MemLevel::RemoteDram].map(|l| encode(l, store)));
        for job in &batch.jobs {
            let pieces = &batch.pieces[job.pieces.clone()];
            let lat = &batch.lat[job.lat.clone()];
            let hits = &batch.hits[job.hits.clone()];
            let totals = job.totals;
            self.samples.reserve(job.take as usize);
            'sample: for i in 0..job.take {
                let rng = &mut self.rng;
                let dram = job.dram >= 1.0 || rng.random::<f64>() < job.dram;
                if !dram && !hits.is_empty() {
                    let mut x = rng.random::<f64>() * (1.0 - job.dram);
                    for h in hits {
                        if x >= h.share {
                            x -= h.share;
                            continue;
                        }
                        let Some(o) = l.objects.get(h.object) else { break };
                        let page = if h.first_page { 0 } else { rng.random_range(0..o.npages.max(1) as u64) };
                        let addr = (o.start_vpn + page) * ps + rng.random_range(0..lines_per_page) * line;
                        self.samples.push(Sample {
                            app: job.app,
                            tid: job.tid,
                            cpu: job.cpu,
                            addr,
                            kind: SampleKind::Load,
                            time_ns: (job.t0 + (i as f64 + 0.5) * job.step) as u64,
                            data_src: Some(data_src[0][0]),
                            latency_ns: None,
                            phys: None,
                        });
                        continue 'sample;
                    }
                }
                let write = job.writes > 0.0 && rng.random::<f64>() < job.writes;
                let Some(p) = pick(pieces, write, rng.random::<f64>(), totals[usize::from(write)])
                    .or_else(|| pick(pieces, !write, 0.5, totals[usize::from(!write)]))
                else {
                    break;
                };
                let page = p.start + rng.random_range(0..(p.end - p.start).max(1));
                let o = &l.objects[p.obj];
                let addr = (o.start_vpn + page as u64) * ps + rng.random_range(0..lines_per_page) * line;
                // Local or remote from where the page lives now (pages move only in a cycle's
                // plan, before which the samples drawn so far are handed over) and the sample's
                // CPU; a page not yet placed counts as local.
                // The data source is picked from a table, not by branching on the node read: a
                // branch on it would hold up every sample until that read (often a cache miss)
                // completes.
                let (level, latency) = if !dram {
                    (0, None)
                } else {
                    let at = if page < o.npages {
                        self.nodes[p.obj].raw(page)
                    } else {
                        let at = l.find_page(job.app as usize, addr / ps).and_then(|(o, i)| self.nodes[o].get(i));
                        at.map_or(UNALLOCATED, |n| n as u8)
                    };
                    // The load's own latency: the path to its page's node (a page not yet
                    // placed reports the thread's mean).
                    let latency = lat.get(usize::from(at)).copied().or(job.latency);
                    (1 + usize::from((at != UNALLOCATED) & (at as usize != job.node)), latency)
                };
                self.dram += u64::from(dram);
                let (word, latency) = if write && job.stores_l1_only {
                    (encode_store_l1(level == 0), None)
                } else {
                    (data_src[usize::from(write)][level], latency)
                };
                self.samples.push(Sample {
                    app: job.app,
                    tid: job.tid,
                    cpu: job.cpu,
                    addr,
                    kind: if write { SampleKind::Store } else { SampleKind::Load },
                    time_ns: (job.t0 + (i as f64 + 0.5) * job.step) as u64,
                    data_src: Some(word),
                    latency_ns: latency,
                    phys: None,
                });
            }
        }
    }
}

/// What the run sends the drawing thread.
pub(crate) enum ToDrawer {
    Batch(Batch),
    /// Hand the samples drawn so far over (in exchange for an empty vector to fill next).
    HandOver(Vec<Sample>),
}

/// Samples handed over, and how many of them are DRAM accesses.
pub(crate) struct HandedOver {
    pub samples: Vec<Sample>,
    pub dram: u64,
}

/// Where samples are drawn.
pub(crate) enum Sampler {
    /// On the run's thread.
    Inline(Drawer),
    /// On a second thread.
    Thread { tx: Sender<ToDrawer>, rx: Receiver<HandedOver> },
    /// Between the two (only while a thread starts or stops).
    Moving,
}

/// The drawing thread: draws every batch it gets, hands samples over when asked; ends (giving
/// its drawer back) when the run drops its end of the channel.
pub(crate) fn serve(
    mut d: Drawer,
    l: &Layout,
    page_size: u64,
    line_size: u64,
    rx: Receiver<ToDrawer>,
    tx: Sender<HandedOver>,
) -> Drawer {
    while let Ok(msg) = rx.recv() {
        match msg {
            ToDrawer::Batch(b) => d.draw(l, page_size, line_size, &b),
            ToDrawer::HandOver(empty) => {
                let samples = std::mem::replace(&mut d.samples, empty);
                let dram = std::mem::take(&mut d.dram);
                if tx.send(HandedOver { samples, dram }).is_err() {
                    break;
                }
            }
        }
    }
    d
}

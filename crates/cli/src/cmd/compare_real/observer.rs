//! What one measured run saw: a wrapper around the run's policy that the daemon drives like
//! any policy. It passes every call through, and on each cycle's snapshot it counts the
//! sampled accesses by (node of the sampling CPU, node of the sampled page) and reads the
//! program's pages per node from numa_maps (the last read before the exit is the run's
//! "pages at the end"). Modes whose policy wants no samples get address sampling anyway, so
//! every mode has an access map, and the sampling overhead hits every mode alike.
//!
//! This is the CLI's observer, not a placement policy: it reads /proc (numa_maps) and the
//! clock, which policies never do.

use ptb_linux::numa_pages::{self, NodePages};
use ptb_linux::procfs::ProcRoot;
use ptb_policy::{Plan, Policy, SamplingMode, SamplingRequest, Snapshot, StartContext, StartPlan};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Sampling period asked for when the mode's policy wants no samples (as ptb-classic's).
pub const OBSERVE_PERIOD: u64 = 4096;

/// What a run's observer collected.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The program's pid (0 until it is launched).
    pub pid: u32,
    /// `counts[cpu node][page node]`, dense indices.
    pub counts: Vec<Vec<u64>>,
    /// Samples whose CPU or page node was not known (or still waited for it at the end).
    pub unknown: u64,
    /// Samples still waiting for their page's node after the last cycle.
    pub waiting: u64,
    /// Samples in the map whose page's node the kernel did not tell in their cycle (some
    /// kernels do not tell the node of a page under PROT_NONE), taken from an earlier cycle
    /// that knew it, or asked again in the next [`RETRIES`] cycles.
    pub from_earlier: u64,
    /// The last non-empty pages-per-node read, and when.
    pub pages: Option<NodePages>,
    pub pages_at: Option<Instant>,
    /// Wall time of the policy's decisions, ms, and cycles observed.
    pub decide_ms: f64,
    pub cycles: u64,
}

impl Observed {
    pub fn new(nodes: usize) -> Self {
        Observed { counts: vec![vec![0; nodes]; nodes], ..Default::default() }
    }
    /// Samples in the map.
    pub fn known(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }
}

/// The wrapper the daemon drives.
pub struct Observer {
    pub inner: Box<dyn Policy>,
    pub seen: Arc<Mutex<Observed>>,
    pub root: ProcRoot,
    /// The last node seen of each sampled page (at most [`MAX_REMEMBERED`]).
    pub nodes: std::collections::HashMap<ptb_profile::PageKey, usize>,
    /// Samples whose page's node is not known yet: (page, node of the CPU, cycles left).
    pub pending: Vec<(ptb_profile::PageKey, usize, u8)>,
}

/// Cycles a sample whose page's node is unknown waits for it.
pub const RETRIES: u8 = 3;

/// Pages whose node the observer remembers.
pub const MAX_REMEMBERED: usize = 1 << 20;

impl Policy for Observer {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn start(&mut self, ctx: &StartContext) -> StartPlan {
        self.inner.start(ctx)
    }
    fn sampling(&self) -> SamplingRequest {
        let s = self.inner.sampling();
        match s.mode {
            SamplingMode::None => {
                let mode = SamplingMode::Address { event: ptb_profile::SampledEvent::Misses, period: OBSERVE_PERIOD };
                SamplingRequest::new(mode, s.cycle)
            }
            _ => s,
        }
    }
    fn decide(&mut self, snap: &Snapshot) -> Plan {
        let t = Instant::now();
        let plan = self.inner.decide(snap);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let ps = snap.machine.page_size;
        let Ok(mut o) = self.seen.lock() else { return plan };
        o.decide_ms += ms;
        o.cycles += 1;
        let nn = o.counts.len();
        for s in snap.samples {
            let row = snap.machine.node_of_cpu(s.cpu).map(|n| n.ix());
            let key = s.page(ps);
            let col = match snap.pages.get(key).map(|n| n.ix()) {
                Some(c) => {
                    if self.nodes.len() < MAX_REMEMBERED || self.nodes.contains_key(&key) {
                        self.nodes.insert(key, c);
                    }
                    Some(c)
                }
                None => {
                    let c = self.nodes.get(&key).copied();
                    o.from_earlier += u64::from(c.is_some());
                    c
                }
            };
            match (row, col) {
                (Some(r), Some(c)) if r < nn && c < nn => o.counts[r][c] += 1,
                (Some(r), None) if r < nn && self.pending.len() < MAX_REMEMBERED => {
                    self.pending.push((key, r, RETRIES))
                }
                _ => o.unknown += 1,
            }
        }
        // Ask again for the pages of earlier samples (the program's own pages only).
        if o.pid != 0 && !self.pending.is_empty() {
            let waiting = std::mem::take(&mut self.pending);
            let addrs: Vec<u64> = waiting.iter().map(|(k, _, _)| k.vpn.saturating_mul(ps)).collect();
            let st = ptb_linux::actuator::query_pages(o.pid, &addrs).unwrap_or_default();
            for (i, (key, row, left)) in waiting.into_iter().enumerate() {
                let node = st
                    .get(i)
                    .filter(|s| **s >= 0 && key.app == o.pid)
                    .and_then(|s| snap.machine.node_idx(ptb_topology::NodeId(*s as u32)))
                    .map(|n| n.ix())
                    .filter(|c| *c < nn);
                match node {
                    Some(c) => {
                        o.counts[row][c] += 1;
                        o.from_earlier += 1;
                    }
                    None if left > 1 => self.pending.push((key, row, left - 1)),
                    None => o.unknown += 1,
                }
            }
        }
        o.waiting = self.pending.len() as u64;
        if o.pid != 0 {
            // Only a live program's pages count (a read during its exit sees them torn down).
            if let Some(p) = numa_pages::read_live(&self.root, o.pid, ps) {
                o.pages = Some(p);
                o.pages_at = Some(Instant::now());
            }
        }
        plan
    }
}

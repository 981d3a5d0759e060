//! What a policy sees: the machine, the threads and where they run, the samples of the cycle,
//! and where the sampled pages live.

use ptb_profile::{AppId, PageKey, Sample, Tid};
use ptb_topology::{CpuId, CpuSet, GroupIdx, Machine, NodeIdx, NodeSet};
use std::collections::HashMap;
use std::time::Duration;

/// One managed thread.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadState {
    pub tid: Tid,
    pub app: AppId,
    /// CPU it last ran on.
    pub cpu: CpuId,
    /// Node of that CPU.
    pub node: NodeIdx,
    /// CPU group of that CPU.
    pub group: GroupIdx,
    /// Its current CPU affinity, if restricted.
    pub affinity: Option<CpuSet>,
}

/// A contiguous range of an application's address space (a mapping on Linux, an object in the
/// simulator), with how many of its pages are resident on each node.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub app: AppId,
    pub start_vpn: u64,
    pub npages: u64,
    pub name: String,
    /// Resident pages per node (dense node index).
    pub resident: Vec<u64>,
    /// Page ranges backed by huge pages (Linux transparent huge pages; `huge_pages = true`
    /// objects in the simulator): a move there takes whole huge pages ([`crate::huge`]).
    pub huge: crate::huge::HugeBacking,
}

/// Where pages live, as a policy asks: the node of a page, if the driver knows it.
pub trait PageLookup {
    /// The node of page `p` (None: not resident, or not known to the driver).
    fn get(&self, p: PageKey) -> Option<NodeIdx>;
}

/// Where pages live: the node of every page sampled this cycle (and possibly more), as the
/// daemon learns it from `move_pages` queries.
#[derive(Clone, Debug, Default)]
pub struct PageLocations {
    map: HashMap<PageKey, NodeIdx, ptb_profile::histogram::FxBuild>,
}

impl PageLocations {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&mut self, p: PageKey, n: NodeIdx) {
        self.map.insert(p, n);
    }
    /// The node of page `p`, if known (None: not resident or not queried).
    pub fn get(&self, p: PageKey) -> Option<NodeIdx> {
        self.map.get(&p).copied()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl PageLookup for PageLocations {
    fn get(&self, p: PageKey) -> Option<NodeIdx> {
        PageLocations::get(self, p)
    }
}

impl FromIterator<(PageKey, NodeIdx)> for PageLocations {
    fn from_iter<I: IntoIterator<Item = (PageKey, NodeIdx)>>(iter: I) -> Self {
        let mut map = HashMap::with_hasher(ptb_profile::histogram::FxBuild::default());
        map.extend(iter);
        PageLocations { map }
    }
}

/// Everything a policy may look at when it decides.
pub struct Snapshot<'a> {
    pub machine: &'a Machine,
    /// Dense indices of the nodes the policy may place threads and pages on (`--nodes`).
    pub allowed: &'a NodeSet,
    /// Time since management started.
    pub now: Duration,
    /// Length of the cycle whose samples are in `samples`.
    pub cycle: Duration,
    pub threads: &'a [ThreadState],
    /// Samples of this cycle, in arrival order.
    pub samples: &'a [Sample],
    /// What the samples are: the sampling mode in force during the cycle (its event tells
    /// what one sample stands for; see [`SampledEvent`](ptb_profile::SampledEvent)).
    pub sampling: crate::plan::SamplingMode,
    /// One sample represents this many events of the mode's kind (the sampling period, grown
    /// when the driver dropped samples); 0 when unknown.
    pub sampling_period: u64,
    /// Node of every sampled page (and possibly more).
    pub pages: &'a dyn PageLookup,
    /// Memory regions of the managed applications.
    pub regions: &'a [Region],
    /// Free memory per node (bytes, dense index).
    pub free_bytes: &'a [u64],
    /// CPU time each thread has used since it started (user + system, seconds), sorted by tid;
    /// empty where the driver does not know it (the simulator, recorded traces). From two
    /// snapshots a policy tells the threads that run from those that mostly wait.
    pub thread_cpu: &'a [(Tid, f64)],
}

impl Snapshot<'_> {
    /// The samples that are memory accesses, where the source marked some as cache hits (IBS
    /// op and SPE tag every memory op; hits load no memory); `None` where none is marked.
    pub fn cache_hits_dropped(&self) -> Option<Vec<ptb_profile::Sample>> {
        (!self.samples.iter().all(|s| s.is_memory_access()))
            .then(|| self.samples.iter().filter(|s| s.is_memory_access()).copied().collect())
    }

    /// The thread with this tid.
    pub fn thread(&self, tid: Tid) -> Option<&ThreadState> {
        self.threads.iter().find(|t| t.tid == tid)
    }
    /// Allowed nodes that have CPUs.
    pub fn cpu_nodes(&self) -> Vec<NodeIdx> {
        self.machine.cpu_nodes().into_iter().filter(|n| self.allowed.contains_idx(*n)).collect()
    }
    /// Allowed nodes that have memory.
    pub fn memory_nodes(&self) -> Vec<NodeIdx> {
        self.machine.memory_nodes().into_iter().filter(|n| self.allowed.contains_idx(*n)).collect()
    }
}

/// What a policy sees at start.
pub struct StartContext<'a> {
    pub machine: &'a Machine,
    pub allowed: &'a NodeSet,
    /// Threads known at start (may be empty for a program that has not started threads yet).
    pub threads: &'a [ThreadState],
}

/// No page is known (a snapshot before any sample, e.g. for checking a start plan).
struct NoPages;

impl PageLookup for NoPages {
    fn get(&self, _: PageKey) -> Option<NodeIdx> {
        None
    }
}

/// Building a snapshot: [`Snapshot::new`] gives the part every driver has (machine, allowed
/// nodes, threads, free memory) at time zero with no samples, pages or regions; the drivers
/// add what a cycle has.
impl<'a> Snapshot<'a> {
    pub fn new(machine: &'a Machine, allowed: &'a NodeSet, threads: &'a [ThreadState], free_bytes: &'a [u64]) -> Self {
        Snapshot {
            machine,
            allowed,
            now: Duration::ZERO,
            cycle: Duration::ZERO,
            threads,
            samples: &[],
            sampling: crate::plan::SamplingMode::None,
            sampling_period: 0,
            pages: &NoPages,
            regions: &[],
            free_bytes,
            thread_cpu: &[],
        }
    }
    /// Time since management started, and the length of the cycle the samples are from.
    pub fn at(self, now: Duration, cycle: Duration) -> Self {
        Snapshot { now, cycle, ..self }
    }
    /// The cycle's samples, the mode they were taken in and the events one sample stands for.
    pub fn with_samples(self, samples: &'a [Sample], sampling: crate::plan::SamplingMode, period: u64) -> Self {
        Snapshot { samples, sampling, sampling_period: period, ..self }
    }
    /// The CPU time each thread has used ([`Snapshot::thread_cpu`]), sorted by tid.
    pub fn with_thread_cpu(self, thread_cpu: &'a [(Tid, f64)]) -> Self {
        Snapshot { thread_cpu, ..self }
    }
    /// CPU seconds `tid` has used since it started, when the driver knows.
    pub fn cpu_s(&self, tid: Tid) -> Option<f64> {
        self.thread_cpu.binary_search_by_key(&tid, |x| x.0).ok().map(|i| self.thread_cpu[i].1)
    }
    /// Where pages live, and the managed applications' memory regions.
    pub fn with_memory(self, pages: &'a dyn PageLookup, regions: &'a [Region]) -> Self {
        Snapshot { pages, regions, ..self }
    }
}

//! Plans: what a policy asks the driver to do, and the checks every plan passes before it is
//! applied.

use crate::snapshot::Snapshot;
use ptb_profile::{AppId, PageKey, SampledEvent, Tid};
use ptb_topology::{CpuId, CpuSet, GroupIdx, Machine, NodeIdx};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// Where a thread should run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadTarget {
    /// Any CPU of the node (affinity = the node's CPUs).
    Node(NodeIdx),
    /// Exactly this CPU.
    Cpu(CpuId),
    /// Any CPU of this CPU group (affinity = the group's CPUs: a die or last-level cache of
    /// its node). For threads that do not fill their node: pinned to the node, Linux's
    /// balancer spreads them over all its groups.
    Group(GroupIdx),
    /// A CPU of the node now, the thread's affinity left as it was, and the node becomes the
    /// thread's preferred node: what the kernel's NUMA balancer does with `sched_setnuma`
    /// (`numa_preferred_nid`) then `migrate_task_to` / `migrate_swap`. The scheduler may move
    /// the thread again later; the simulator's scheduler model keeps it on its preferred node
    /// as Linux's load balancer does (`sim::sched`). Real Linux has no system call that sets a
    /// task's preferred node, so the Linux actuator moves the thread once and leaves it to the
    /// kernel.
    Preferred(NodeIdx),
}

impl ThreadTarget {
    /// The node the thread runs on (`None`: a CPU or group this machine does not have).
    pub fn node(self, m: &Machine) -> Option<NodeIdx> {
        match self {
            ThreadTarget::Node(n) | ThreadTarget::Preferred(n) => Some(n),
            ThreadTarget::Cpu(c) => m.node_of_cpu(c),
            ThreadTarget::Group(g) => m.groups.get(g.ix()).map(|g| g.node),
        }
    }

    /// The CPUs the thread may run on right after the move (for `Preferred`, its node's).
    /// `None`: a node or group this machine does not have.
    pub fn cpus(self, m: &Machine) -> Option<CpuSet> {
        match self {
            ThreadTarget::Node(n) | ThreadTarget::Preferred(n) => m.nodes.get(n.ix()).map(|x| x.cpus.clone()),
            ThreadTarget::Cpu(c) => {
                let mut s = CpuSet::new();
                s.insert(c);
                Some(s)
            }
            ThreadTarget::Group(g) => m.groups.get(g.ix()).map(|x| x.cpus.clone()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadMove {
    pub tid: Tid,
    pub to: ThreadTarget,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageMove {
    pub page: PageKey,
    pub to: NodeIdx,
}

/// What to do with a whole address range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RangeOp {
    /// Move every resident page of the range to one node.
    MoveTo(NodeIdx),
    /// Spread the range's pages round-robin over these nodes (and set MPOL_INTERLEAVE for
    /// future faults).
    Interleave(Vec<NodeIdx>),
    /// Spread in proportion to the weights (MPOL_WEIGHTED_INTERLEAVE where supported).
    Weighted(Vec<(NodeIdx, u32)>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RangeAction {
    pub app: AppId,
    pub start_vpn: u64,
    pub npages: u64,
    pub op: RangeOp,
}

/// How new pages get their node (applies at first touch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AllocPolicy {
    /// Node of the CPU that first touches the page (Linux default).
    #[default]
    FirstTouch,
    /// Round-robin over these nodes.
    Interleave(Vec<NodeIdx>),
    /// Proportional to the weights.
    Weighted(Vec<(NodeIdx, u32)>),
}

/// What samples a policy wants.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplingMode {
    /// No samples (static policies).
    None,
    /// Hardware address sampling: one sample every `period` events of the kind `event` counts
    /// (ops for IBS op / SPE, slow loads for PEBS load latency, last-level misses).
    Address { event: SampledEvent, period: u64 },
    /// NUMA hinting faults: every `scan_period`, `scan_bytes` of each application's address
    /// space (continuing where the last scan stopped) is made to fault on its next access.
    HintFaults { scan_bytes: u64, scan_period: Duration },
    /// Software page-fault events (every fault, with its address): what a machine without an
    /// address-sampling PMU delivers. Only the daemon reports this mode; it sees first
    /// touches and faults a program provokes, not how often memory is used.
    PageFaults,
}

impl SamplingMode {
    /// The mode a named sample source delivers (`ibs-op`, `spe`, `pebs-loads`, `page-faults`,
    /// as `ptb run --source` and trace headers name them; a longer description starting with
    /// the name works too); `None` for a name ptb does not know.
    pub fn of_source(name: &str, period: u64) -> Option<SamplingMode> {
        let first = name.split_whitespace().next().unwrap_or("");
        Some(match first {
            "ibs-op" | "ibs_op" => SamplingMode::Address { event: SampledEvent::Cycles, period },
            "spe" => SamplingMode::Address { event: SampledEvent::Ops, period },
            "pebs-loads" => SamplingMode::Address { event: SampledEvent::SlowLoads, period },
            "page-faults" => SamplingMode::PageFaults,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingRequest {
    pub mode: SamplingMode,
    /// Time between two `decide` calls.
    pub cycle: Duration,
    /// The most sample interrupts a second per sampled thread the policy lets its sampling
    /// cost; the driver holds every hardware source under the lower of this and its own cap
    /// ([`ptb_profile::thinning::MAX_INTERRUPTS_PER_S`]). `None`: the driver's cap alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interrupts_per_s: Option<f64>,
}

impl SamplingRequest {
    /// Sample in `mode`, deciding every `cycle`, under the driver's interrupt cap alone.
    pub fn new(mode: SamplingMode, cycle: Duration) -> Self {
        SamplingRequest { mode, cycle, max_interrupts_per_s: None }
    }
}

/// What to do at start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StartPlan {
    pub alloc: AllocPolicy,
    pub threads: Vec<ThreadMove>,
}

/// The decisions of one cycle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub threads: Vec<ThreadMove>,
    pub pages: Vec<PageMove>,
    pub ranges: Vec<RangeAction>,
    /// A new sampling request for the next cycles (e.g. autonuma's adaptive scan period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingRequest>,
    /// Policy diagnostics for this cycle (e.g. `hash_collisions`, `placements_skipped`).
    #[serde(default)]
    pub stats: BTreeMap<String, f64>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.pages.is_empty() && self.ranges.is_empty()
    }
}

/// Why a plan was refused.
#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    #[error("plan moves unknown thread {0}")]
    UnknownThread(Tid),
    #[error("plan puts thread {tid} on node {node}, which has no CPUs")]
    CpulessNode { tid: Tid, node: u16 },
    #[error("plan puts thread {tid} on CPU {cpu}, which this machine does not have")]
    UnknownCpu { tid: Tid, cpu: u32 },
    #[error("plan puts thread {tid} on CPU group {group}, which this machine does not have")]
    UnknownGroup { tid: Tid, group: u16 },
    #[error("plan uses node {0}, which is outside the allowed node set")]
    NodeNotAllowed(u16),
    #[error("plan uses node {0}, which does not exist")]
    UnknownNode(u16),
    #[error("plan puts pages on node {0}, which has no memory")]
    MemorylessNode(u16),
    #[error("plan moves {bytes} bytes to node {node}, which has only {free} bytes free")]
    NodeFull { node: u16, bytes: u64, free: u64 },
}

/// Check a plan against the snapshot it was made from. Nothing of a refused plan is applied.
pub fn validate_plan(plan: &Plan, snap: &Snapshot) -> Result<(), PlanError> {
    let m = snap.machine;
    let node_ok = |n: NodeIdx| -> Result<(), PlanError> {
        if n.ix() >= m.n_nodes() {
            return Err(PlanError::UnknownNode(n.0));
        }
        if !snap.allowed.contains_idx(n) {
            return Err(PlanError::NodeNotAllowed(n.0));
        }
        Ok(())
    };
    for t in &plan.threads {
        if snap.thread(t.tid).is_none() {
            return Err(PlanError::UnknownThread(t.tid));
        }
        match t.to {
            ThreadTarget::Node(n) | ThreadTarget::Preferred(n) => {
                node_ok(n)?;
                if !m.node(n).has_cpus() {
                    return Err(PlanError::CpulessNode { tid: t.tid, node: n.0 });
                }
            }
            ThreadTarget::Cpu(c) => {
                let n = m.node_of_cpu(c).ok_or(PlanError::UnknownCpu { tid: t.tid, cpu: c.0 })?;
                node_ok(n)?;
            }
            ThreadTarget::Group(g) => {
                let n = t.to.node(m).ok_or(PlanError::UnknownGroup { tid: t.tid, group: g.0 })?;
                node_ok(n)?;
            }
        }
    }
    // Bytes arriving per node (dense index; a node gets a slot once it passed `mem_ok`).
    let mut incoming: Vec<Option<u64>> = vec![None; m.n_nodes()];
    let mem_ok = |incoming: &mut [Option<u64>], n: NodeIdx| -> Result<usize, PlanError> {
        if n.ix() >= m.n_nodes() || incoming[n.ix()].is_none() {
            node_ok(n)?;
            if !m.node(n).has_memory() {
                return Err(PlanError::MemorylessNode(n.0));
            }
            incoming[n.ix()] = Some(0);
        }
        Ok(n.ix())
    };
    for p in &plan.pages {
        let n = mem_ok(&mut incoming, p.to)?;
        if snap.pages.get(p.page) != Some(p.to) {
            *incoming[n].get_or_insert(0) += m.page_size;
        }
    }
    for r in &plan.ranges {
        match &r.op {
            RangeOp::MoveTo(to) => {
                let n = mem_ok(&mut incoming, *to)?;
                *incoming[n].get_or_insert(0) += r.npages * m.page_size;
            }
            RangeOp::Interleave(ns) => ns.iter().try_for_each(|n| mem_ok(&mut incoming, *n).map(|_| ()))?,
            RangeOp::Weighted(ws) => ws.iter().try_for_each(|(n, _)| mem_ok(&mut incoming, *n).map(|_| ()))?,
        }
    }
    for (n, bytes) in incoming.into_iter().enumerate() {
        let Some(bytes) = bytes else { continue };
        let free = snap.free_bytes.get(n).copied().unwrap_or(0);
        if bytes > free {
            return Err(PlanError::NodeFull { node: NodeIdx::from_ix(n).0, bytes, free });
        }
    }
    Ok(())
}

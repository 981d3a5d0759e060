//! The machine model types and their queries.

use crate::cpulist::{CpuSet, NodeSet};
use crate::ids::{CpuId, GroupIdx, LinkIdx, NodeId, NodeIdx};
use crate::matrix::Matrix;
use serde::{Deserialize, Serialize};

/// Where a machine model came from. Only [`ModelSource::Sysfs`] with root `/` describes the
/// machine ptb runs on; every other source must never drive real thread or page moves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModelSource {
    /// Read from a sysfs tree rooted at `root` (`/` for this machine, a fixture in tests).
    Sysfs { root: String },
    /// Loaded from a machine file.
    File { path: String },
    /// A built-in preset.
    Preset { name: String },
    /// A synthetic spec such as `nodes=4,cpus=8,dies=2`.
    Synthetic { spec: String },
}

impl std::fmt::Display for ModelSource {
    /// Where the model came from, for people: `preset opteron6272-8n`, `sysfs at /`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Sysfs { root } => write!(f, "sysfs at {root}"),
            ModelSource::File { path } => write!(f, "machine file {path}"),
            ModelSource::Preset { name } => write!(f, "preset {name}"),
            ModelSource::Synthetic { spec } => write!(f, "synthetic spec {spec}"),
        }
    }
}

impl ModelSource {
    /// True only for a model read from this machine's own `/sys`.
    pub fn is_live(&self) -> bool {
        matches!(self, ModelSource::Sysfs { root } if root == "/")
    }
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Kernel id.
    pub id: NodeId,
    /// Dense logical id (= position in `Machine::nodes`).
    pub idx: NodeIdx,
    /// CPUs of the node (empty for a memory-only node).
    pub cpus: CpuSet,
    /// Memory size in bytes (0 for a CPU-only node).
    pub memory_bytes: u64,
    /// CPU groups inside the node.
    pub groups: Vec<GroupIdx>,
}

impl Node {
    pub fn has_cpus(&self) -> bool {
        !self.cpus.is_empty()
    }
    pub fn has_memory(&self) -> bool {
        self.memory_bytes > 0
    }
}

/// A group of CPUs that share the way to memory (a die / LLC domain); the unit the
/// Bandwidth Graph is measured from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuGroup {
    pub idx: GroupIdx,
    /// Human name, e.g. `P3` or `die1`.
    pub name: String,
    pub node: NodeIdx,
    pub cpus: CpuSet,
}

/// One end of an interconnect link: a CPU group (die) or the memory of a node that has no
/// CPU group of its own next to it (e.g. a CXL expander).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    Group(GroupIdx),
    Memory(NodeIdx),
}

/// A bidirectional interconnect link with a bandwidth for each direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub a: End,
    pub b: End,
    /// Sustainable GB/s from `a` to `b`.
    pub gbps_ab: f64,
    /// Sustainable GB/s from `b` to `a`.
    pub gbps_ba: f64,
    /// A label such as `16-bit`, `8-bit`, `16/8-bit`, `UPI`.
    pub width: String,
}

/// A link used in one direction: `forward` means a -> b.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DirLink {
    pub link: LinkIdx,
    pub forward: bool,
}

/// The directed links that the *data* of a read from `group` to memory on `node` crosses,
/// in order from the memory to the group. An empty list means the memory is attached to the
/// group (local). Writes use the same links in the opposite direction unless a route for the
/// write direction is given in `write_hops`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Route {
    pub group: GroupIdx,
    pub node: NodeIdx,
    pub hops: Vec<DirLink>,
    /// Optional one-way routing for writes (request data flowing group -> memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_hops: Option<Vec<DirLink>>,
}

/// The Bandwidth Graph: sustained GB/s from each CPU group (row) to each memory node
/// (column), uncontended (one group active) and contended (all groups active), plus the
/// idle latency in ns. Columns of CPU-only nodes hold 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandwidthGraph {
    pub uncontended: Matrix,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contended: Option<Matrix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Matrix>,
}

/// What moving things costs on this machine (machines.md, "Costs of moving things"). Every
/// field is optional in a machine file (a missing one takes its default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MigrationCosts {
    /// CPU time per migrated 4 KiB page, microseconds (syscall, locking, TLB shootdown).
    pub page_us: f64,
    /// Copy bandwidth of one migrating thread, GB/s.
    pub copy_gbps: f64,
    /// Cost of moving one thread to another node, microseconds (mostly lost cache).
    pub thread_us: f64,
    /// Cost of one NUMA hinting fault, microseconds.
    pub hint_fault_us: f64,
    /// Cost of one hardware address sample (interrupt + record), microseconds.
    pub sample_us: f64,
}

impl Default for MigrationCosts {
    /// machines.md: move_pages ~1.1 us per 4 KiB page and 3.73 GB/s (Zen 3, one thread);
    /// sched_migration_cost_ns 0.5 ms; hinting fault and sample costs are typical figures
    /// (a minor fault ~1-2 us; an IBS/PEBS sample interrupt ~1 us).
    fn default() -> Self {
        MigrationCosts { page_us: 1.1, copy_gbps: 3.73, thread_us: 500.0, hint_fault_us: 1.5, sample_us: 1.0 }
    }
}

/// A NUMA machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Short name (preset name, hostname, file stem).
    pub name: String,
    /// One line for `ptb machines` / `ptb topology`.
    #[serde(default)]
    pub description: String,
    pub source: ModelSource,
    /// Base page size in bytes (4096 on x86-64).
    pub page_size: u64,
    /// Cache line size in bytes.
    pub line_size: u64,
    /// Nodes in kernel-id order; `nodes[i].idx == NodeIdx(i)`.
    pub nodes: Vec<Node>,
    /// CPU groups; `groups[i].idx == GroupIdx(i)`; every CPU of a node is in exactly one group.
    pub groups: Vec<CpuGroup>,
    /// SLIT distances, node x node (firmware) — or published/derived for presets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distances: Option<Matrix>,
    /// Interconnect links (may be empty when unknown).
    #[serde(default)]
    pub links: Vec<Link>,
    /// Routing table for every (group, memory node) pair when links are known.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Per-node memory-controller capacity in GB/s (all groups together), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_gbps: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<BandwidthGraph>,
    #[serde(default)]
    pub costs: MigrationCosts,
    /// Core clock in GHz (nominal), when known: turns a sampler's cycle counts (IBS op's period,
    /// load latencies) into time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_ghz: Option<f64>,
    /// The CPUs' hardware address sampler, when known: the simulator serves a policy's sampling
    /// request as `ptb run` would on it; unknown, every policy gets the sampler it asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<crate::sampler::AddressSampler>,
    /// Free-form notes: where each number comes from.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Machine {
    /// A machine of `nodes` and `groups` and nothing else known: no distances, links, routes,
    /// controller capacities or Bandwidth Graph, default migration costs, 4 KiB pages and
    /// 64-byte lines. Readers of partial sources (sysfs, an MLC import) start from it.
    pub fn bare(
        name: String,
        description: String,
        source: ModelSource,
        nodes: Vec<Node>,
        groups: Vec<CpuGroup>,
    ) -> Self {
        Machine {
            name,
            description,
            source,
            page_size: 4096,
            line_size: 64,
            nodes,
            groups,
            distances: None,
            links: vec![],
            routes: vec![],
            controller_gbps: None,
            bandwidth: None,
            costs: MigrationCosts::default(),
            clock_ghz: None,
            sampler: None,
            notes: vec![],
        }
    }

    pub fn node(&self, n: NodeIdx) -> &Node {
        &self.nodes[n.ix()]
    }

    pub fn group(&self, g: GroupIdx) -> &CpuGroup {
        &self.groups[g.ix()]
    }

    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Total number of CPUs.
    pub fn n_cpus(&self) -> usize {
        self.nodes.iter().map(|n| n.cpus.len()).sum()
    }

    /// All CPUs in ascending kernel order.
    pub fn cpus(&self) -> Vec<CpuId> {
        let mut v: Vec<CpuId> = self.nodes.iter().flat_map(|n| n.cpus.iter()).collect();
        v.sort();
        v
    }

    /// The node holding `cpu`.
    pub fn node_of_cpu(&self, cpu: CpuId) -> Option<NodeIdx> {
        self.nodes.iter().find(|n| n.cpus.contains(cpu)).map(|n| n.idx)
    }

    /// The CPU group holding `cpu`.
    pub fn group_of_cpu(&self, cpu: CpuId) -> Option<GroupIdx> {
        self.groups.iter().find(|g| g.cpus.contains(cpu)).map(|g| g.idx)
    }

    /// Logical index of a kernel node id.
    pub fn node_idx(&self, id: NodeId) -> Option<NodeIdx> {
        self.nodes.iter().find(|n| n.id == id).map(|n| n.idx)
    }

    /// The kernel's id of node `n` (as numactl and /sys number nodes; `opteron6272-4n`: 0, 2, 4,
    /// 6), or `n`'s own index where the machine has no such node.
    pub fn kernel_id(&self, n: NodeIdx) -> u32 {
        self.nodes.get(n.ix()).map_or(u32::from(n.0), |node| node.id.0)
    }

    /// The kernel node ids, as messages write a node list: `0, 2, 4, 6`.
    pub fn node_id_list(&self) -> String {
        self.nodes.iter().map(|n| n.id.0.to_string()).collect::<Vec<_>>().join(", ")
    }

    /// Nodes that have CPUs (threads can run there).
    pub fn cpu_nodes(&self) -> Vec<NodeIdx> {
        self.nodes.iter().filter(|n| n.has_cpus()).map(|n| n.idx).collect()
    }

    /// Nodes that have memory (pages can live there).
    pub fn memory_nodes(&self) -> Vec<NodeIdx> {
        self.nodes.iter().filter(|n| n.has_memory()).map(|n| n.idx).collect()
    }

    /// All nodes as a node set.
    pub fn all_nodes(&self) -> NodeSet {
        self.nodes.iter().map(|n| n.idx.0 as u32).collect()
    }

    /// The route from group `g` to memory node `n`, if the routing table has one.
    pub fn route(&self, g: GroupIdx, n: NodeIdx) -> Option<&Route> {
        self.routes.iter().find(|r| r.group == g && r.node == n)
    }

    /// Uncontended Bandwidth Graph entry, GB/s, from group `g` to memory on node `n`.
    pub fn bg(&self, g: GroupIdx, n: NodeIdx) -> Option<f64> {
        self.bandwidth.as_ref().map(|b| b.uncontended.get(g.ix(), n.ix()))
    }

    /// Node-level uncontended bandwidth from the CPUs of node `from` to memory on `to`:
    /// the mean over `from`'s CPU groups (what PTB's node-granular page phase uses).
    pub fn node_bg(&self, from: NodeIdx, to: NodeIdx) -> Option<f64> {
        let b = self.bandwidth.as_ref()?;
        let groups = &self.node(from).groups;
        if groups.is_empty() {
            return Some(0.0);
        }
        let sum: f64 = groups.iter().map(|g| b.uncontended.get(g.ix(), to.ix())).sum();
        Some(sum / groups.len() as f64)
    }

    /// Idle latency in ns from group `g` to node `n`, when known.
    pub fn latency_ns(&self, g: GroupIdx, n: NodeIdx) -> Option<f64> {
        self.bandwidth.as_ref()?.latency.as_ref().map(|m| m.get(g.ix(), n.ix()))
    }

    /// SLIT distance between two nodes (10 = local) when known.
    pub fn distance(&self, a: NodeIdx, b: NodeIdx) -> Option<f64> {
        self.distances.as_ref().map(|m| m.get(a.ix(), b.ix()))
    }
}

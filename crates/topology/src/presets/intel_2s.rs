//! Shared shape of the two-socket Intel presets built from a published MLC summary
//! (machines.md section 3): one node and one CPU group per socket, one UPI link between the
//! sockets, idle latency and read bandwidth as published, controllers from the all-reads peak.

use super::build::{grp, nodes_and_groups, AddressSampler, GroupSpec, LinkSet, NodeSpec, Parts};
use crate::error::TopologyError;
use crate::machine::{Machine, MigrationCosts};
use crate::matrix::{Matrix, MatrixSource};

/// One published MLC summary row of machines.md s3, plus the assumptions needed around it.
pub(super) struct Mlc2s {
    pub name: &'static str,
    pub description: &'static str,
    /// Published CPU model, for the notes.
    pub cpu: &'static str,
    /// Base clock of the part, GHz (vendor specification).
    pub clock_ghz: f64,
    /// Cores per socket (published model's core count; one CPU per core, SMT not modelled).
    pub cores_per_socket: u32,
    /// Assumed memory per socket, GiB, with its reason.
    pub mem_gib: u64,
    pub mem_reason: &'static str,
    /// Published idle latency, ns: local of node 0 / node 1, remote from node 0 / node 1.
    pub local_ns: [f64; 2],
    pub remote_ns: [f64; 2],
    /// Published read bandwidth, MB/s: local node 0 / node 1, remote from node 0 / node 1.
    pub local_mbps: [f64; 2],
    pub remote_mbps: [f64; 2],
    /// Published all-reads peak of the machine, GB/s.
    pub peak_gbps: f64,
    /// Published loaded latency at the ceiling, for the notes: (ns, GB/s).
    pub loaded: Option<(f64, f64)>,
    /// Interconnect label.
    pub link_label: &'static str,
}

impl Mlc2s {
    /// Build the machine.
    pub fn machine(&self) -> Result<Machine, TopologyError> {
        let c = self.cores_per_socket;
        let nodes = [NodeSpec { id: 0, mem_gib: self.mem_gib }, NodeSpec { id: 1, mem_gib: self.mem_gib }];
        let groups = [
            GroupSpec { name: "socket0".into(), node: 0, first_cpu: 0, n_cpus: c },
            GroupSpec { name: "socket1".into(), node: 1, first_cpu: c, n_cpus: c },
        ];
        let (nodes, groups) = nodes_and_groups(&nodes, &groups);
        let gb = |mbps: f64| mbps / 1000.0;
        // Link a = socket0, b = socket1. Data of socket0's remote reads flows b -> a.
        let mut links = LinkSet::default();
        links.add(grp(0), grp(1), gb(self.remote_mbps[1]), gb(self.remote_mbps[0]), self.link_label);
        let routes = vec![
            (0, 0, vec![grp(0)], None),
            (0, 1, vec![grp(1), grp(0)], None),
            (1, 0, vec![grp(0), grp(1)], None),
            (1, 1, vec![grp(1)], None),
        ];
        let lat = Matrix::new(
            "ns",
            MatrixSource::Published,
            vec![vec![self.local_ns[0], self.remote_ns[0]], vec![self.remote_ns[1], self.local_ns[1]]],
        );
        let unc = Matrix::new(
            "GB/s",
            MatrixSource::Published,
            vec![
                vec![gb(self.local_mbps[0]), gb(self.remote_mbps[0])],
                vec![gb(self.remote_mbps[1]), gb(self.local_mbps[1])],
            ],
        );
        let distances = super::build::slit_from_latency(&nodes, &lat);
        let mut notes = vec![
            format!("source: published Intel Memory Latency Checker (MLC) figures of 2 x {}", self.cpu),
            format!(
                "CPUs: {c} cores per socket (the published model's core count), one CPU per core (SMT siblings \
                 not modelled); CPUs 0-{} on node 0, {}-{} on node 1",
                c - 1,
                c,
                2 * c - 1
            ),
            format!("memory: {} GiB per socket (assumed: {})", self.mem_gib, self.mem_reason),
            "latency ns and uncontended GB/s: published MLC idle latency and read bandwidth (MB/s / 1000); \
             row = CPU node, column = memory node; the published 'a / b' pairs are read as node 0 / node 1, \
             remote = from that node to the other"
                .into(),
            format!(
                "controller_gbps: derived: published all-reads peak {} GB/s split evenly over the 2 sockets, \
                 raised to a node's published local read bandwidth where that is higher",
                self.peak_gbps
            ),
            format!(
                "link GB/s: derived: each direction = the published remote read bandwidth whose data crosses it \
                 (a lower bound of the {} capacity)",
                self.link_label
            ),
            "distances: derived from the latency matrix: round(10 x lat / local)".into(),
            "migration costs: defaults (published move_pages measurements on a 2-socket AMD Zen 3 machine: 1.1 us per 4 KiB page; no Intel figure published)".into(),
        ];
        if let Some((ns, gbps)) = self.loaded {
            notes.push(format!(
                "published calibration target: loaded latency about {ns} ns at about {gbps} GB/s (all reads)"
            ));
        }
        Parts {
            name: self.name,
            description: self.description,
            nodes,
            groups,
            distances,
            links,
            routes,
            // Half the all-reads peak, but never below a node's own published local figure
            // (Skylake node 1 reads 106.0 GB/s locally, above 211.2 / 2).
            controller_gbps: (0..2).map(|i| (self.peak_gbps / 2.0).max(gb(self.local_mbps[i]))).collect(),
            uncontended: unc,
            contended: None,
            latency: lat,
            costs: MigrationCosts::default(),
            clock_ghz: self.clock_ghz,
            // Skylake / Ice Lake servers: PEBS load latency (MEM_TRANS_RETIRED.LOAD_LATENCY) and
            // precise stores (MEM_INST_RETIRED.ALL_STORES, perf's `mem-stores`), Intel SDM vol. 3B.
            sampler: AddressSampler::PebsLoads { stores: true },
            notes,
        }
        .finish()
    }
}

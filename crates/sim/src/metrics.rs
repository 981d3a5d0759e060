//! What a run reports: runtime (total, per application, per phase), the node x node access
//! map, controller and link utilisation, migrations and their cost, sampling and decision time.
//! Every figure except `decision_ms` (real wall time of the policy code) is simulated and
//! deterministic for a given seed.

use crate::machine::ResourceKind;
use crate::run::Run;
use ptb_topology::End;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Running totals of a run.
#[derive(Clone, Debug)]
pub(crate) struct Accum {
    pub access: Vec<f64>,
    /// The same cells weighted by the time the accessing thread ran instead of by its accesses:
    /// what a sampler that tags one operation per interval of CPU time (IBS op in cycle mode)
    /// counts.
    pub access_time: Vec<f64>,
    pub app_lines: Vec<f64>,
    pub util_ns: Vec<f64>,
    pub util_max: Vec<f64>,
    pub sim_ns: f64,
    pub pages_migrated: u64,
    pub threads_migrated: u64,
    pub page_migration_ns: f64,
    pub thread_migration_ns: f64,
    /// Threads the simulated Linux scheduler moved between nodes, and their stall time.
    pub sched_migrations: u64,
    pub sched_migration_ns: f64,
    pub decision_ns: f64,
    pub decision_charged_ns: f64,
    pub cycles: u64,
    pub samples: u64,
    pub samples_dram: u64,
    pub samples_dropped: u64,
    pub hint_faults: u64,
    pub sample_overhead_ns: f64,
    pub pages_failed: BTreeMap<String, u64>,
    pub policy_stats: BTreeMap<String, f64>,
}

impl Accum {
    pub fn new(nn: usize, nr: usize, napps: usize) -> Self {
        Accum {
            access: vec![0.0; nn * nn],
            access_time: vec![0.0; nn * nn],
            app_lines: vec![0.0; napps],
            util_ns: vec![0.0; nr],
            util_max: vec![0.0; nr],
            sim_ns: 0.0,
            pages_migrated: 0,
            threads_migrated: 0,
            page_migration_ns: 0.0,
            thread_migration_ns: 0.0,
            sched_migrations: 0,
            sched_migration_ns: 0.0,
            decision_ns: 0.0,
            decision_charged_ns: 0.0,
            cycles: 0,
            samples: 0,
            samples_dram: 0,
            samples_dropped: 0,
            hint_faults: 0,
            sample_overhead_ns: 0.0,
            pages_failed: BTreeMap::new(),
            policy_stats: BTreeMap::new(),
        }
    }
}

/// The node x node access map: row = node of the accessing CPU, column = node of the memory;
/// each cell is a share of all accesses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AccessMap {
    /// Kernel node ids of the rows and columns.
    pub nodes: Vec<u32>,
    pub shares: Vec<Vec<f64>>,
    /// Share of all accesses served by each node's memory (column sums).
    pub controller_share: Vec<f64>,
    pub local: f64,
    pub remote: f64,
}

impl AccessMap {
    /// Shares of the `nn x nn` cells (row = CPU node, column = memory node) of `cells`.
    fn of(cells: &[f64], nn: usize, ids: &[u32]) -> AccessMap {
        let total: f64 = cells.iter().sum();
        let share = |v: f64| if total > 0.0 { v / total } else { 0.0 };
        let shares: Vec<Vec<f64>> = (0..nn).map(|r| (0..nn).map(|c| share(cells[r * nn + c])).collect()).collect();
        let controller_share: Vec<f64> = (0..nn).map(|c| (0..nn).map(|r| shares[r][c]).sum()).collect();
        let local: f64 = (0..nn).map(|n| shares[n][n]).sum();
        AccessMap {
            nodes: ids.to_vec(),
            shares,
            controller_share,
            local,
            remote: if total > 0.0 { 1.0 - local } else { 0.0 },
        }
    }
}

/// Mean and peak utilisation of one directed link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkUse {
    pub link: u16,
    pub from: String,
    pub to: String,
    pub width: String,
    pub capacity_gbps: f64,
    pub mean: f64,
    pub max: f64,
}

/// Mean and peak utilisation of one memory controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerUse {
    pub node: u32,
    pub capacity_gbps: f64,
    pub mean: f64,
    pub max: f64,
}

/// One application of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppResult {
    pub app: u32,
    pub workload: String,
    pub threads: usize,
    pub runtime_s: f64,
    /// Mean memory bandwidth the application achieved, GB/s.
    pub bandwidth_gbps: f64,
}

/// Time spent in one phase (summed over iterations).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub app: u32,
    pub workload: String,
    pub phase: String,
    pub seconds: f64,
}

/// The result of one simulated run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Workload names joined with `+` (applications run together).
    pub workload: String,
    pub policy: String,
    pub machine: String,
    pub seed: u64,
    pub threads: usize,
    /// Simulated seconds until the last application finished.
    pub runtime_s: f64,
    /// First-touch runtime / this runtime (same machine, workloads and seed).
    pub speedup_vs_first_touch: Option<f64>,
    pub local_fraction: f64,
    pub access_map: AccessMap,
    /// The access map as a time-based sampler sees it (IBS op in cycle mode: one tagged operation
    /// per interval of a thread's running time, so a thread slowed by remote memory is sampled
    /// more per access than a fast one; a pipeline's spin-wait, whose loads hit the cache, counts
    /// on the page holding its flags). Published access maps measured that way compare with
    /// this one, not with `access_map`.
    #[serde(default)]
    pub access_map_sampled: AccessMap,
    pub controller_utilisation: Vec<ControllerUse>,
    pub link_utilisation: Vec<LinkUse>,
    /// Mean memory bandwidth over the run, GB/s.
    pub bandwidth_gbps: f64,
    pub pages_migrated: u64,
    pub threads_migrated: u64,
    /// CPU time charged for page and thread migrations, seconds.
    pub migration_s: f64,
    pub page_migration_s: f64,
    pub thread_migration_s: f64,
    /// Cross-node moves of unpinned threads by the simulated Linux scheduler (not the policy's),
    /// and the cache-loss stall they cost, seconds.
    #[serde(default)]
    pub sched_migrations: u64,
    #[serde(default)]
    pub sched_migration_s: f64,
    /// Real (wall-clock) time of the policy's decide() calls, ms; measured, not simulated.
    pub decision_ms: f64,
    /// Whether decision time was charged to the run as a stalled core.
    pub decision_charged: bool,
    pub cycles: u64,
    pub samples: u64,
    /// Kept samples that were DRAM accesses (the rest hit a cache; op samplers only).
    #[serde(default)]
    pub samples_dram: u64,
    pub samples_dropped: u64,
    pub hint_faults: u64,
    /// CPU time charged for samples and hinting faults, seconds.
    pub sampling_overhead_s: f64,
    pub pages_failed: BTreeMap<String, u64>,
    pub policy_stats: BTreeMap<String, f64>,
    /// Work of the simulator itself: time steps, contention solves and their fixed-point
    /// iterations (for `ptb bench sim`).
    #[serde(default)]
    pub sim_steps: u64,
    #[serde(default)]
    pub sim_solves: u64,
    #[serde(default)]
    pub sim_solver_iterations: u64,
    pub apps: Vec<AppResult>,
    pub phases: Vec<PhaseResult>,
}

impl Run<'_> {
    pub(crate) fn result(&self, policy: &str) -> RunResult {
        let sim = self.sim;
        let m = &sim.machine;
        let nn = sim.sm.n_nodes;
        let ids: Vec<u32> = m.nodes.iter().map(|n| n.id.0).collect();
        let access_map = AccessMap::of(&self.acc.access, nn, &ids);
        let access_map_sampled = AccessMap::of(&self.acc.access_time, nn, &ids);
        let local = access_map.local;
        let runtime_ns = self.apps.iter().filter_map(|a| a.done_ns).fold(0.0, f64::max);
        let mean = |r: usize| if self.acc.sim_ns > 0.0 { self.acc.util_ns[r] / self.acc.sim_ns } else { 0.0 };
        let end_name = |e: End| match e {
            End::Group(g) => m.groups.get(g.ix()).map_or_else(|| g.to_string(), |x| x.name.clone()),
            End::Memory(n) => format!("mem{}", m.nodes.get(n.ix()).map_or(n.0 as u32, |x| x.id.0)),
        };
        let mut links = Vec::new();
        let mut ctrls = Vec::new();
        for (r, res) in sim.sm.resources.iter().enumerate() {
            match res.kind {
                ResourceKind::Link { link, forward } => {
                    let l = &m.links[link as usize];
                    let (a, b) = if forward { (l.a, l.b) } else { (l.b, l.a) };
                    links.push(LinkUse {
                        link,
                        from: end_name(a),
                        to: end_name(b),
                        width: l.width.clone(),
                        capacity_gbps: res.capacity,
                        mean: mean(r),
                        max: self.acc.util_max[r],
                    });
                }
                ResourceKind::Controller(n) => ctrls.push(ControllerUse {
                    node: m.nodes[n.ix()].id.0,
                    capacity_gbps: res.capacity,
                    mean: mean(r),
                    max: self.acc.util_max[r],
                }),
                ResourceKind::Path(..) => {}
            }
        }
        let line = m.line_size as f64;
        let l = &sim.layout;
        let apps = l
            .apps
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let rt = self.apps[i].done_ns.unwrap_or(self.now_ns);
                AppResult {
                    app: a.app,
                    workload: a.workload.clone(),
                    threads: a.n_threads,
                    runtime_s: rt / 1e9,
                    bandwidth_gbps: if rt > 0.0 { self.acc.app_lines[i] * line / rt } else { 0.0 },
                }
            })
            .collect();
        let phases = l
            .apps
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                a.phases.iter().enumerate().map(move |(pi, p)| PhaseResult {
                    app: a.app,
                    workload: a.workload.clone(),
                    phase: p.name.clone(),
                    seconds: self.apps[i].phase_ns[pi] / 1e9,
                })
            })
            .collect();
        RunResult {
            workload: l.apps.iter().map(|a| a.workload.as_str()).collect::<Vec<_>>().join("+"),
            policy: policy.to_string(),
            machine: m.name.clone(),
            seed: sim.opts.seed,
            threads: l.threads.len(),
            runtime_s: runtime_ns / 1e9,
            speedup_vs_first_touch: None,
            local_fraction: local,
            access_map,
            access_map_sampled,
            controller_utilisation: ctrls,
            link_utilisation: links,
            bandwidth_gbps: if runtime_ns > 0.0 {
                self.acc.app_lines.iter().sum::<f64>() * line / runtime_ns
            } else {
                0.0
            },
            pages_migrated: self.acc.pages_migrated,
            threads_migrated: self.acc.threads_migrated,
            migration_s: (self.acc.page_migration_ns + self.acc.thread_migration_ns) / 1e9,
            page_migration_s: self.acc.page_migration_ns / 1e9,
            thread_migration_s: self.acc.thread_migration_ns / 1e9,
            sched_migrations: self.acc.sched_migrations,
            sched_migration_s: self.acc.sched_migration_ns / 1e9,
            decision_ms: self.acc.decision_ns / 1e6,
            decision_charged: sim.opts.charge_decision,
            cycles: self.acc.cycles,
            samples: self.acc.samples,
            samples_dram: self.acc.samples_dram,
            samples_dropped: self.acc.samples_dropped,
            hint_faults: self.acc.hint_faults,
            sampling_overhead_s: self.acc.sample_overhead_ns / 1e9,
            pages_failed: self.acc.pages_failed.clone(),
            policy_stats: self.acc.policy_stats.clone(),
            sim_steps: self.steps,
            sim_solves: self.solves,
            sim_solver_iterations: self.solver_iterations,
            apps,
            phases,
        }
    }
}

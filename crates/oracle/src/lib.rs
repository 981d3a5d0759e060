//! The oracle: the best *static* placement of a simulated workload found with full knowledge of
//! its true access pattern. It is **a bound found by search, not a proof**: a better static
//! placement may exist, and a dynamic policy may beat it on multi-phase programs (it can move
//! pages between phases; the oracle cannot).
//!
//! Problem: for every workload of a comparison, say how fast the program could run if threads
//! and pages were placed once, perfectly informed, so that policies can be judged by the share
//! of that speed-up they reach.
//!
//! Approach (each candidate is run in the simulator, the fastest simulated run is kept):
//!
//! ```text
//! layout (true pattern) ──▶ Demand: per phase, thread -> page-group reads/writes
//! thread placements (pinned): one per CPU | balanced over nodes | clustered from true sharing
//!        └─▶ for each: LP over page-group fractions (min sum of per-phase bounds from
//!            controller, link and path loads and per-thread latency; clarabel)
//! simple candidates: first-touch, interleave (threads unpinned, and pinned one per CPU),
//!                    bandwidth-weighted, all-local
//!        └─▶ Simulation::run_static_groups ──▶ best runtime = `oracle`
//! ```

pub mod demand;
pub mod lp;
pub mod moved;
pub mod threads;

use demand::Demand;
use lp::{LpPhase, LpProblem, LpResource, ThreadLoad};
use ptb_policy::ThreadTarget;
use ptb_sim::machine::{ResourceKind, SimMachine};
use ptb_sim::{RunResult, SimError, Simulation};
use serde::{Deserialize, Serialize};
use threads::ThreadPlacement;

/// What the search tried and what each candidate achieved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub label: String,
    pub runtime_s: f64,
    /// Why the candidate has no runtime (e.g. the LP was infeasible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// The oracle's answer for one simulation.
#[derive(Clone, Debug)]
pub struct OracleResult {
    /// The best run, labelled `oracle`; `policy_stats` unchanged.
    pub best: RunResult,
    /// Label of the candidate that won.
    pub winner: String,
    pub candidates: Vec<Candidate>,
    /// The static placements that ran, fastest first (for [`moved::reach`]).
    pub placements: Vec<StaticCandidate>,
}

/// A static placement the search ran: thread targets (empty = unpinned, the Linux default) and, per
/// object, the node fractions of its equal page groups (empty = first touch).
#[derive(Clone, Debug, PartialEq)]
pub struct StaticCandidate {
    pub label: String,
    pub threads: Vec<ThreadTarget>,
    pub groups: Vec<Vec<Vec<f64>>>,
    pub runtime_s: f64,
}

/// How hard to search.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleOptions {
    /// Capacity derating factors tried in the LP (1 = full capacity).
    pub capacity_scales: Vec<f64>,
    /// Try the clustered and balanced thread placements besides one thread per CPU.
    pub thread_search: bool,
}

impl Default for OracleOptions {
    fn default() -> Self {
        OracleOptions { capacity_scales: vec![1.0, 0.75], thread_search: true }
    }
}

/// A candidate placement: label, thread targets (empty = unpinned), groups per object.
type Placement = (String, Vec<ThreadTarget>, Vec<Vec<Vec<f64>>>);

/// Search for the best static placement of `sim`'s workloads.
pub fn search(sim: &Simulation, opts: &OracleOptions) -> Result<OracleResult, SimError> {
    search_with(sim, opts, &[])
}

/// [`search`], also considering runs already made on the same simulation (e.g. allocation-only
/// policies such as weighted interleave). A run counts as a static placement only when it
/// moved no page and no thread.
pub fn search_with(sim: &Simulation, opts: &OracleOptions, runs: &[RunResult]) -> Result<OracleResult, SimError> {
    let layout = sim.layout();
    let machine = sim.machine();
    let sm = sim.sim_machine().clone();
    let _ = machine;
    let nn = sm.n_nodes;
    let demand = Demand::of(layout);
    let mem: Vec<usize> = sim
        .allowed()
        .iter_idx()
        .map(|n| n.ix())
        .filter(|&n| machine.node(ptb_topology::NodeIdx::from_ix(n)).has_memory())
        .collect();
    let nobj = layout.objects.len();
    let uniform = |f: &dyn Fn(usize) -> f64| -> Vec<Vec<Vec<f64>>> {
        let v: Vec<f64> = (0..nn).map(|n| if mem.contains(&n) { f(n) } else { 0.0 }).collect();
        (0..nobj).map(|_| vec![v.clone()]).collect()
    };
    let ctrl_cap: Vec<f64> = (0..nn)
        .map(|n| {
            sm.resources
                .iter()
                .find(|r| r.kind == ResourceKind::Controller(ptb_topology::NodeIdx::from_ix(n)))
                .map_or(1.0, |r| r.capacity)
        })
        .collect();
    let mut cands: Vec<Placement> = vec![
        ("first-touch".into(), vec![], vec![]),
        ("interleave".into(), vec![], uniform(&|_| 1.0)),
        ("weighted".into(), vec![], uniform(&|n| ctrl_cap[n])),
    ];
    let mut thread_options = vec![ThreadPlacement::default_spread(sim)];
    if opts.thread_search {
        for t in [ThreadPlacement::balanced(sim), ThreadPlacement::clustered(sim, &demand)].into_iter().flatten() {
            if !thread_options.iter().any(|o| o.node == t.node && o.group == t.group) {
                thread_options.push(t);
            }
        }
    }
    // The page policies above with the threads pinned as well (the Linux default moves them).
    let spread = &thread_options[0];
    cands.push((format!("first-touch/{}", spread.label), spread.targets.clone(), vec![]));
    cands.push((format!("interleave/{}", spread.label), spread.targets.clone(), uniform(&|_| 1.0)));
    let mut failures = Vec::new();
    for tp in &thread_options {
        cands.push((format!("all-local/{}", tp.label), tp.targets.clone(), all_local(&demand, tp, &mem, nn, None)));
        cands.push((
            format!("private-local+shared-weighted/{}", tp.label),
            tp.targets.clone(),
            all_local(&demand, tp, &mem, nn, Some(&ctrl_cap)),
        ));
        for &scale in &opts.capacity_scales {
            let label = format!("lp/{}/cap{:.2}", tp.label, scale);
            match lp_groups(sim, &sm, &demand, tp, &mem, scale) {
                Ok(g) => cands.push((label, tp.targets.clone(), g)),
                Err(e) => failures.push(Candidate { label, runtime_s: f64::NAN, failed: Some(e) }),
            }
        }
    }
    let mut best: Option<(RunResult, String)> = None;
    let mut tried = Vec::new();
    let mut placements = Vec::new();
    for (label, threads, groups) in cands {
        match sim.run_static_groups(&label, &threads, &groups) {
            Ok(r) => {
                tried.push(Candidate { label: label.clone(), runtime_s: r.runtime_s, failed: None });
                placements.push(StaticCandidate { label: label.clone(), threads, groups, runtime_s: r.runtime_s });
                if best.as_ref().is_none_or(|b| r.runtime_s < b.0.runtime_s) {
                    best = Some((r, label));
                }
            }
            Err(e) => tried.push(Candidate { label, runtime_s: f64::NAN, failed: Some(e.to_string()) }),
        }
    }
    for r in runs.iter().filter(|r| r.pages_migrated == 0 && r.threads_migrated == 0 && r.runtime_s > 0.0) {
        let label = format!("policy:{}", r.policy);
        tried.push(Candidate { label: label.clone(), runtime_s: r.runtime_s, failed: None });
        if best.as_ref().is_none_or(|b| r.runtime_s < b.0.runtime_s) {
            best = Some((r.clone(), label));
        }
    }
    tried.extend(failures);
    let (mut r, winner) = best.ok_or_else(|| SimError::Placement("the oracle found no runnable placement".into()))?;
    r.policy = "oracle".into();
    // A static placement: no policy code ran for it.
    r.decision_ms = 0.0;
    r.cycles = 0;
    placements.sort_by(|a, b| a.runtime_s.total_cmp(&b.runtime_s));
    Ok(OracleResult { best: r, winner, candidates: tried, placements })
}

/// Each fine group on the node that accesses it most (locality only); with `shared` weights,
/// groups that no node accesses more than half of the time are spread by those weights.
fn all_local(d: &Demand, tp: &ThreadPlacement, mem: &[usize], nn: usize, shared: Option<&[f64]>) -> Vec<Vec<Vec<f64>>> {
    let mut per_node = vec![vec![0.0; nn]; d.groups.len()];
    for ph in &d.phases {
        for th in &ph.threads {
            let n = tp.node[th.thread];
            for &(g, r, w) in &th.access {
                per_node[g][n] += r + w;
            }
        }
    }
    expand(d, |g| {
        let mut v = vec![0.0; nn];
        let best = mem.iter().copied().max_by(|&a, &b| per_node[g][a].total_cmp(&per_node[g][b]).then(b.cmp(&a)));
        let best = best.unwrap_or(mem[0]);
        let total: f64 = per_node[g].iter().sum();
        match shared {
            Some(w) if per_node[g][best] <= 0.5 * total => {
                for &n in mem {
                    v[n] = w[n].max(1e-9);
                }
            }
            _ => v[best] = 1.0,
        }
        v
    })
}

/// Per object, the fractions of each fine group.
fn expand(d: &Demand, f: impl Fn(usize) -> Vec<f64>) -> Vec<Vec<Vec<f64>>> {
    (0..d.per_object.len()).map(|o| (0..d.per_object[o]).map(|k| f(d.first[o] + k)).collect()).collect()
}

/// Solve the LP for one thread placement; fractions per fine group.
fn lp_groups(
    sim: &Simulation,
    sm: &SimMachine,
    d: &Demand,
    tp: &ThreadPlacement,
    mem: &[usize],
    scale: f64,
) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let (coarse, nc) = d.coarsen();
    let mut pages = vec![0.0; nc];
    for (g, &(_, _, p)) in d.groups.iter().enumerate() {
        pages[coarse[g]] += p as f64;
    }
    let machine = sim.machine();
    let page = machine.page_size.max(1);
    let free: Vec<f64> =
        mem.iter().map(|&n| (machine.node(ptb_topology::NodeIdx::from_ix(n)).memory_bytes / page) as f64).collect();
    let ng = sm.n_groups;
    let per = |f: &dyn Fn(usize, usize) -> Vec<u32>| -> Vec<Vec<Vec<u32>>> {
        (0..ng).map(|g| (0..sm.n_nodes).map(|n| f(g, n)).collect()).collect()
    };
    let problem = LpProblem {
        group_pages: pages,
        nodes: mem.to_vec(),
        free_pages: free,
        resources: sm.resources.iter().map(|r| LpResource { capacity: r.capacity }).collect(),
        read_res: per(&|g, n| sm.read_res(g, n).to_vec()),
        write_res: per(&|g, n| sm.write_res(g, n).to_vec()),
        lat0: (0..ng).map(|g| (0..sm.n_nodes).map(|n| sm.lat0(g, n)).collect()).collect(),
        line_bytes: machine.line_size as f64,
        phases: d
            .phases
            .iter()
            .map(|ph| LpPhase {
                ips: ph.ips,
                mlp: ph.mlp,
                threads: ph
                    .threads
                    .iter()
                    .map(|th| {
                        let mut acc: Vec<(usize, f64, f64)> = Vec::new();
                        for &(g, r, w) in &th.access {
                            acc.push((coarse[g], r, w));
                        }
                        ThreadLoad {
                            group: tp.group[th.thread],
                            instr: th.instr,
                            cpu_share: tp.cpu_share[th.thread],
                            access: acc,
                        }
                    })
                    .collect(),
            })
            .collect(),
        capacity_scale: scale,
        latency_weight: 1e-3,
    };
    let x = lp::solve(&problem).map_err(|e| e.to_string())?;
    let nn = sm.n_nodes;
    Ok(expand(d, |g| {
        let mut v = vec![0.0; nn];
        for (j, &n) in mem.iter().enumerate() {
            v[n] = x[coarse[g]][j];
        }
        v
    }))
}

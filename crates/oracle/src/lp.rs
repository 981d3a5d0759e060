//! The page-placement linear program of the oracle.
//!
//! Problem: given where every thread runs and how many reads and writes each thread sends to
//! each page group in each phase, choose for every page group the share of its pages on each
//! memory node so that the run is as short as the machine allows.
//!
//! Approach: a lower bound on each phase's time is an LP in the placement fractions
//! `x[k][n]` (group `k`, node `n`, `sum_n x[k][n] = 1`, `x >= 0`):
//!
//! - bandwidth: every resource `R` (controller, link direction, group->node path) must carry
//!   the bytes routed over it: `t_p >= sum_{i,k,n} bytes_{p,i,k} [R on route(g_i, n)] x[k][n] / C_R`;
//! - latency: every thread must finish its work, each access paying the idle latency of the
//!   node it hits, overlapped `mlp` ways: `t_p >= share_i (instr_{p,i} / ips_p +
//!   sum_{k,n} acc_{p,i,k} lat0(g_i, n) x[k][n] / mlp_p)`;
//! - memory: `sum_k pages_k x[k][n] <= free_n`.
//!
//! The objective is `sum_p t_p` plus a small multiple of the total idle latency (a tie-break
//! toward locality among placements with the same bound). Solved with clarabel (interior point,
//! pure Rust). The solution is a placement to try in the simulator, not a proof of optimality:
//! the real (simulated) run adds queueing delays the LP does not see, so the oracle evaluates
//! several LP variants and keeps the best simulated one.

use clarabel::algebra::CscMatrix;
use clarabel::solver::{
    DefaultSettingsBuilder, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus, SupportedConeT, ZeroConeT,
};

/// A shared resource of the machine with its capacity.
#[derive(Clone, Debug, PartialEq)]
pub struct LpResource {
    /// Bytes per ns (= GB/s).
    pub capacity: f64,
}

/// The traffic of one thread in one phase.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadLoad {
    /// Index of the thread's CPU group (for routes and latency).
    pub group: usize,
    /// Instructions the thread executes in the phase.
    pub instr: f64,
    /// Its share of a CPU (1 / threads on its CPU).
    pub cpu_share: f64,
    /// `(page group, reads, writes)`: accesses (cache lines) to each page group.
    pub access: Vec<(usize, f64, f64)>,
}

/// One phase: its threads' loads and core parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LpPhase {
    pub ips: f64,
    pub mlp: f64,
    pub threads: Vec<ThreadLoad>,
}

/// The whole program handed to the solver.
#[derive(Clone, Debug, PartialEq)]
pub struct LpProblem {
    /// Pages of each page group.
    pub group_pages: Vec<f64>,
    /// Memory nodes a group may use (dense node indices) and their free pages.
    pub nodes: Vec<usize>,
    pub free_pages: Vec<f64>,
    pub resources: Vec<LpResource>,
    /// Resources crossed by a read from CPU group `g` to memory node `n`: `read_res[g][n]`.
    pub read_res: Vec<Vec<Vec<u32>>>,
    pub write_res: Vec<Vec<Vec<u32>>>,
    /// Idle latency `lat0[g][n]`, ns.
    pub lat0: Vec<Vec<f64>>,
    pub line_bytes: f64,
    pub phases: Vec<LpPhase>,
    /// Capacities are multiplied by this (< 1 keeps resources away from saturation).
    pub capacity_scale: f64,
    /// Weight of the idle-latency tie-break relative to the phase bounds.
    pub latency_weight: f64,
}

/// Why the LP gave no placement.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LpError {
    #[error("the placement LP is malformed: {0}")]
    Shape(String),
    #[error("the placement LP was not solved ({0})")]
    NotSolved(String),
}

/// Solve; returns `x[k][j]` (share of group `k` on `nodes[j]`), rows summing to 1.
pub fn solve(p: &LpProblem) -> Result<Vec<Vec<f64>>, LpError> {
    let k_n = p.group_pages.len();
    let m = p.nodes.len();
    if m == 0 || k_n == 0 || p.free_pages.len() != m {
        return Err(LpError::Shape(format!("{k_n} groups, {m} nodes, {} free sizes", p.free_pages.len())));
    }
    let np = p.phases.len();
    let nx = k_n * m;
    let nvar = nx + np;
    let xv = |k: usize, j: usize| k * m + j;
    let mut q = vec![0.0; nvar];
    for t in q.iter_mut().skip(nx) {
        *t = 1.0;
    }
    let (mut ri, mut ci, mut vv) = (Vec::new(), Vec::new(), Vec::new());
    let mut b = Vec::new();
    let mut row = 0usize;
    // Equalities: every group fully placed.
    for k in 0..k_n {
        for j in 0..m {
            ri.push(row);
            ci.push(xv(k, j));
            vv.push(1.0);
        }
        b.push(1.0);
        row += 1;
    }
    let n_eq = row;
    // Memory (in units of the program's total pages).
    let total_pages = p.group_pages.iter().sum::<f64>().max(1.0);
    for j in 0..m {
        for k in 0..k_n {
            ri.push(row);
            ci.push(xv(k, j));
            vv.push(p.group_pages[k] / total_pages);
        }
        b.push((p.free_pages[j] / total_pages).min(1e6));
        row += 1;
    }
    // Non-negativity.
    for v in 0..nvar {
        ri.push(row);
        ci.push(v);
        vv.push(-1.0);
        b.push(0.0);
        row += 1;
    }
    let scale = p.capacity_scale.clamp(1e-3, 1.0);
    // Time unit of the phase rows: the longest thread's time with every access local-fast,
    // so the solver sees numbers near 1 (t_p = tscale * t'_p).
    let mut tscale: f64 = 1.0;
    for ph in &p.phases {
        for th in &ph.threads {
            let g = th.group.min(p.lat0.len().saturating_sub(1));
            let best = p.nodes.iter().map(|&n| p.lat0.get(g).and_then(|r| r.get(n)).copied().unwrap_or(0.0));
            let best = best.fold(f64::INFINITY, f64::min);
            let acc: f64 = th.access.iter().map(|a| a.1 + a.2).sum();
            let est = (th.instr / ph.ips.max(1e-6) + acc * best / ph.mlp.max(1e-3)) / th.cpu_share.max(1e-6);
            if est.is_finite() {
                tscale = tscale.max(est);
            }
        }
    }
    for (pi, ph) in p.phases.iter().enumerate() {
        let t = nx + pi;
        // Bandwidth rows: bytes routed over each resource, seconds-equivalent (ns).
        let mut res_rows: Vec<Vec<(usize, f64)>> = vec![Vec::new(); p.resources.len()];
        for th in &ph.threads {
            let g = th.group;
            if g >= p.read_res.len() || g >= p.lat0.len() {
                return Err(LpError::Shape(format!("CPU group {g} out of range")));
            }
            let mut lat_row: Vec<(usize, f64)> = Vec::new();
            for &(k, r, w) in &th.access {
                if k >= k_n {
                    return Err(LpError::Shape(format!("page group {k} out of range")));
                }
                for (j, &n) in p.nodes.iter().enumerate() {
                    for (list, vol) in [(&p.read_res[g][n], r), (&p.write_res[g][n], w)] {
                        if vol <= 0.0 {
                            continue;
                        }
                        for &res in list {
                            let cap = p.resources.get(res as usize).map_or(0.0, |x| x.capacity) * scale;
                            if cap > 0.0 {
                                res_rows[res as usize].push((xv(k, j), vol * p.line_bytes / cap / tscale));
                            }
                        }
                    }
                    let l = (r + w) * p.lat0[g][n] / ph.mlp.max(1e-3) / th.cpu_share.max(1e-6) / tscale;
                    lat_row.push((xv(k, j), l));
                    q[xv(k, j)] += p.latency_weight * l;
                }
            }
            // Latency row: cpu time of the thread <= t_p.
            for (v, c) in lat_row {
                ri.push(row);
                ci.push(v);
                vv.push(c);
            }
            ri.push(row);
            ci.push(t);
            vv.push(-1.0);
            b.push(-(th.instr / ph.ips.max(1e-6) / th.cpu_share.max(1e-6)) / tscale);
            row += 1;
        }
        for entries in res_rows.into_iter().filter(|e| !e.is_empty()) {
            for (v, c) in entries {
                ri.push(row);
                ci.push(v);
                vv.push(c);
            }
            ri.push(row);
            ci.push(t);
            vv.push(-1.0);
            b.push(0.0);
            row += 1;
        }
    }
    let a = CscMatrix::new_from_triplets(row, nvar, ri, ci, vv);
    let pm = CscMatrix::<f64>::zeros((nvar, nvar));
    let cones: Vec<SupportedConeT<f64>> = vec![ZeroConeT(n_eq), NonnegativeConeT(row - n_eq)];
    let settings = DefaultSettingsBuilder::default()
        .verbose(false)
        .max_iter(200)
        .build()
        .map_err(|e| LpError::NotSolved(format!("{e:?}")))?;
    let mut solver =
        DefaultSolver::new(&pm, &q, &a, &b, &cones, settings).map_err(|e| LpError::NotSolved(format!("{e:?}")))?;
    solver.solve();
    match solver.solution.status {
        SolverStatus::Solved | SolverStatus::AlmostSolved => {}
        s => return Err(LpError::NotSolved(format!("{s:?}"))),
    }
    let x = &solver.solution.x;
    Ok((0..k_n)
        .map(|k| {
            let mut r: Vec<f64> = (0..m).map(|j| x[xv(k, j)].max(0.0)).collect();
            // Drop solver noise, renormalise.
            r.iter_mut().for_each(|v| {
                if *v < 1e-4 {
                    *v = 0.0
                }
            });
            let s: f64 = r.iter().sum();
            if s > 0.0 {
                r.iter_mut().for_each(|v| *v /= s);
            } else {
                r[0] = 1.0;
            }
            r
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two nodes, one CPU group per node, controllers 0 and 1, one link each way (2, 3).
    fn two_nodes(phases: Vec<LpPhase>, groups: Vec<f64>) -> LpProblem {
        let read_res = vec![vec![vec![0], vec![1, 3]], vec![vec![0, 2], vec![1]]];
        LpProblem {
            group_pages: groups,
            nodes: vec![0, 1],
            free_pages: vec![1e9, 1e9],
            resources: vec![LpResource { capacity: 10.0 }; 4],
            write_res: read_res.clone(),
            read_res,
            lat0: vec![vec![100.0, 200.0], vec![200.0, 100.0]],
            line_bytes: 64.0,
            phases,
            capacity_scale: 1.0,
            latency_weight: 1e-3,
        }
    }

    fn thread(group: usize, access: Vec<(usize, f64, f64)>) -> ThreadLoad {
        ThreadLoad { group, instr: 1e6, cpu_share: 1.0, access }
    }

    #[test]
    fn private_groups_go_to_their_thread() {
        let ph = LpPhase {
            ips: 2.0,
            mlp: 4.0,
            threads: vec![thread(0, vec![(0, 1e5, 0.0)]), thread(1, vec![(1, 1e5, 0.0)])],
        };
        let x = solve(&two_nodes(vec![ph], vec![100.0, 100.0])).unwrap();
        assert!(x[0][0] > 0.99 && x[1][1] > 0.99, "{x:?}");
    }

    #[test]
    fn a_saturated_controller_is_relieved_by_spreading() {
        // Both threads hammer one shared group: all on one node would double that controller's
        // load, so the bound is lower when the group is split.
        let heavy = |g| thread(g, vec![(0, 1e8, 0.0)]);
        let ph = LpPhase { ips: 2.0, mlp: 64.0, threads: vec![heavy(0), heavy(1)] };
        let x = solve(&two_nodes(vec![ph], vec![100.0])).unwrap();
        assert!((x[0][0] - 0.5).abs() < 0.05, "{x:?}");
        for row in &x {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            assert!(row.iter().all(|v| *v >= 0.0));
        }
    }

    #[test]
    fn memory_limits_hold() {
        let ph = LpPhase { ips: 2.0, mlp: 4.0, threads: vec![thread(0, vec![(0, 1e5, 0.0)])] };
        let mut p = two_nodes(vec![ph], vec![100.0]);
        p.free_pages = vec![30.0, 1e9];
        let x = solve(&p).unwrap();
        assert!(x[0][0] * 100.0 <= 30.0 + 1e-3, "{x:?}");
        p.free_pages = vec![10.0, 10.0];
        assert!(solve(&p).is_err());
    }

    #[test]
    fn bad_shapes_are_refused() {
        let ph = LpPhase { ips: 2.0, mlp: 4.0, threads: vec![thread(0, vec![(5, 1.0, 0.0)])] };
        assert!(matches!(solve(&two_nodes(vec![ph], vec![1.0])), Err(LpError::Shape(_))));
    }
}

//! Closed-loop prediction of a program's memory throughput under another placement.
//!
//! Problem: the sampled traffic says how many accesses per second each node's threads issue
//! *at the current placement*. A thread with a fixed number of misses in flight issues them
//! faster when its latency drops, so moving pages changes the traffic too: an open model
//! (fixed rates, loaded latency per resource) overrates relieving a saturated resource and
//! cannot tell a program that gains from spreading its private data (NPB MG) from one that
//! loses (NPB SP).
//!
//! Approach: each node's threads are a closed population. A thread's access rate is
//! `1 / (c + L / mlp)`: `c` the time it computes per access, `L` the mean loaded latency of
//! its accesses. `c` is estimated per source node from the measured rate and the measured
//! latency (load-latency samples: PEBS, IBS, SPE), or, without them, the latency the current
//! loads imply. The measured latency matters where a resource is saturated: the threads then
//! wait in its queue, which the samples show and the loads cannot (a saturated resource carries
//! its capacity whether the threads want a little more or twice as much). Without samples `c`
//! is overrated there and the model sees less to gain. For a candidate placement (the share of each node's accesses going to
//! each memory node) the rates and loads are iterated to their fixed point, then scaled down
//! where a controller, path or link would carry more than its capacity. A controller or link
//! adds the load model's queueing delay ([`super::model::queue_ns`]).

use super::model::{queue_ns, LoadModel};

const ITERATIONS: usize = 80;
const DAMPING: f64 = 0.3;

/// A closed model of the managed threads, calibrated on the current loads.
pub struct Closed<'a> {
    load: &'a LoadModel,
    /// Threads per source node.
    threads: Vec<f64>,
    /// Compute time per access per source node, ns.
    compute_ns: Vec<f64>,
    /// Accesses a thread overlaps, per source node ([`super::mlp`]).
    mlp: Vec<f64>,
    /// The mean latency of each source node's accesses the calibration used (measured, else
    /// implied by the loads), ns; 0 where the node issued none.
    latency_ns: Vec<f64>,
}

impl<'a> Closed<'a> {
    /// Calibrate on the loads of `load` (the measured traffic), with `threads` per node and
    /// the measured mean latency of each node's accesses where known (ns) and the accesses
    /// each node's threads overlap.
    pub fn new(load: &'a LoadModel, threads: Vec<f64>, measured_ns: &[Option<f64>], mlp: Vec<f64>) -> Self {
        let lat = latencies(load, &load.path);
        let nn = load.acc.len();
        let (mut compute_ns, mut latency_ns) = (vec![0.0; nn], vec![0.0; nn]);
        for s in 0..nn {
            let x: f64 = load.path[s].iter().sum();
            let n = threads.get(s).copied().unwrap_or(0.0);
            if x <= 0.0 || n <= 0.0 {
                continue;
            }
            let l = measured_ns.get(s).copied().flatten().unwrap_or_else(|| mean(&load.path[s], &lat[s]));
            latency_ns[s] = l;
            compute_ns[s] = (n * 1e9 / x - l / mlp_of(&mlp, s)).max(0.0);
        }
        Closed { load, threads, compute_ns, mlp, latency_ns }
    }

    /// The mean latency of each source node's accesses as calibrated, ns (0: no accesses).
    pub fn latency_ns(&self) -> &[f64] {
        &self.latency_ns
    }

    /// Calibrate on the cycle's measured traffic (`load`), the threads of `snap` on each node
    /// the mean sampled latency of each node's accesses and the accesses each node's threads
    /// overlap.
    pub fn for_snapshot(load: &'a LoadModel, snap: &crate::snapshot::Snapshot, mlp: Vec<f64>) -> Self {
        Self::new(load, super::threads_per_node(snap), &super::measured_latency_ns(snap), mlp)
    }

    /// Predicted accesses per second of all threads when node s's accesses go to the memory
    /// nodes in the shares `shape[s]` (rows summing to 1; a zero row: no accesses).
    pub fn throughput(&self, shape: &[Vec<f64>]) -> f64 {
        let x: Vec<f64> = (0..shape.len()).map(|s| self.load.path[s].iter().sum()).collect();
        self.solve(&self.threads, &self.compute_ns, &self.mlp, shape, x).iter().sum()
    }

    /// Threads per node, compute time per access (ns) and overlapped accesses of each node's
    /// threads as calibrated.
    pub fn calibration(&self) -> (&[f64], &[f64], &[f64]) {
        (&self.threads, &self.compute_ns, &self.mlp)
    }

    /// Predicted accesses per second of each node's threads when `threads[s]` threads computing
    /// `compute_ns[s]` per access and overlapping `mlp[s]` accesses run on node s and send their
    /// accesses to the memory nodes in the shares `shape[s]`: another placement of the threads
    /// as well as of the pages.
    pub fn rates_for(&self, threads: &[f64], compute_ns: &[f64], mlp: &[f64], shape: &[Vec<f64>]) -> Vec<f64> {
        let m = self.load;
        let x: Vec<f64> = (0..shape.len())
            .map(|s| {
                let l = mean(&shape[s], &m.idle[s]);
                let n = threads.get(s).copied().unwrap_or(0.0);
                let c = compute_ns.get(s).copied().unwrap_or(0.0);
                if n > 0.0 && shape[s].iter().any(|&f| f > 0.0) {
                    n * 1e9 / (c + l / mlp_of(mlp, s)).max(1e-3)
                } else {
                    0.0
                }
            })
            .collect();
        self.solve(threads, compute_ns, mlp, shape, x)
    }

    fn solve(&self, threads: &[f64], compute_ns: &[f64], mlp: &[f64], shape: &[Vec<f64>], mut x: Vec<f64>) -> Vec<f64> {
        let m = self.load;
        let nn = shape.len();
        let path_of =
            |x: &[f64]| -> Vec<Vec<f64>> { (0..nn).map(|s| shape[s].iter().map(|f| f * x[s]).collect()).collect() };
        // The iterations reuse their buffers (a layout scores about a hundred candidates a
        // cycle, each iterated ITERATIONS times): the same sums as `latencies`, in the same
        // order, without a matrix allocated per iteration.
        let mut path = vec![vec![0.0; nn]; nn];
        let (mut ctrl, mut row) = (vec![0.0; nn], vec![0.0; nn]);
        let mut delay = vec![0.0; m.link_cap.len()];
        for _ in 0..ITERATIONS {
            for (p, (sh, xs)) in path.iter_mut().zip(shape.iter().zip(&x)) {
                p.iter_mut().zip(sh).for_each(|(p, f)| *p = f * xs);
            }
            for (d, c) in ctrl.iter_mut().enumerate() {
                *c = queue_ns(path.iter().map(|r| r[d]).sum(), m.cap[d]);
            }
            let links = m.link_loads(&path);
            for ((q, a), c) in delay.iter_mut().zip(&links).zip(&m.link_cap) {
                *q = queue_ns(*a, *c);
            }
            for s in 0..nn {
                if x[s] <= 0.0 {
                    continue;
                }
                for (d, r) in row.iter_mut().enumerate() {
                    *r = m.idle[s][d]
                        + ctrl[d]
                        + m.links_of[s][d].iter().map(|&(l, share)| share * delay[l]).sum::<f64>();
                }
                let l = mean(&shape[s], &row);
                let want = threads[s] * 1e9 / (compute_ns[s] + l / mlp_of(mlp, s)).max(1e-3);
                x[s] += DAMPING * (want - x[s]);
            }
        }
        // No resource carries more than its capacity.
        let path = path_of(&x);
        let acc: Vec<f64> = (0..nn).map(|d| path.iter().map(|r| r[d]).sum()).collect();
        let links = m.link_loads(&path);
        let fit = |load: f64, cap: f64| if cap > 0.0 && load > cap { cap / load } else { 1.0 };
        (0..nn)
            .map(|s| {
                let mut f: f64 = 1.0;
                for d in (0..nn).filter(|&d| shape[s][d] > 0.0) {
                    f = f.min(fit(acc[d], m.cap[d])).min(fit(path[s][d], m.path_cap[s][d]));
                    for &(l, _) in &m.links_of[s][d] {
                        f = f.min(fit(links[l], m.link_cap[l]));
                    }
                }
                x[s] * f
            })
            .collect()
    }
}

/// Loaded latency (source node x memory node), ns, for the per-path loads `path`: idle
/// latency plus the queueing of the controller and of every link on the route (the paths are
/// held to their capacity in [`Closed::solve`], not queued).
fn latencies(m: &LoadModel, path: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let acc: Vec<f64> = (0..path.len()).map(|d| path.iter().map(|r| r[d]).sum()).collect();
    m.loaded_with(&acc, path, false)
}

/// Node s's overlapped accesses (at least 1; 1 where `mlp` does not name it).
fn mlp_of(mlp: &[f64], s: usize) -> f64 {
    mlp.get(s).copied().filter(|m| m.is_finite()).unwrap_or(1.0).max(1.0)
}

/// Mean of `v` weighted by `w` (0 when `w` is all zero).
fn mean(w: &[f64], v: &[f64]) -> f64 {
    let t: f64 = w.iter().sum();
    if t <= 0.0 {
        return 0.0;
    }
    w.iter().zip(v).map(|(a, b)| a * b).sum::<f64>() / t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptb::model::Demand;

    fn model(m: &ptb_topology::Machine, path: Vec<Vec<f64>>) -> LoadModel {
        let nn = m.n_nodes();
        let per_node = (0..nn).map(|d| path.iter().map(|r| r[d]).sum()).collect();
        LoadModel::for_machine(m, &Demand { per_node, per_path: path, share: 0.5 })
    }

    /// Every node reading `home` of its accesses from its own memory, the rest evenly from the
    /// others, with `scale` per row (a row's total).
    fn shape(nn: usize, home: f64, scale: impl Fn(usize) -> f64) -> Vec<Vec<f64>> {
        (0..nn)
            .map(|s| (0..nn).map(|d| scale(s) * if s == d { home } else { (1.0 - home) / (nn - 1) as f64 }).collect())
            .collect()
    }

    /// The 8-node Opteron with every node reading its own memory at `frac` of its local path.
    fn local_load(frac: f64) -> (LoadModel, usize) {
        let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
        let nn = m.n_nodes();
        let quiet = model(&m, vec![vec![0.0; nn]; nn]);
        (model(&m, shape(nn, 1.0, |s| frac * quiet.path_cap[s][s])), nn)
    }

    #[test]
    fn the_current_shape_predicts_the_measured_traffic() {
        let (load, nn) = local_load(0.4);
        let total: f64 = load.path.iter().flatten().sum();
        let c = Closed::new(&load, vec![8.0; nn], &[], vec![4.0; nn]);
        let x = c.throughput(&shape(nn, 1.0, |_| 1.0));
        assert!((x - total).abs() < 0.01 * total, "{x} vs {total}");
    }

    #[test]
    fn memory_bound_threads_on_a_saturated_local_path_gain_from_remote_paths_compute_bound_ones_do_not() {
        let local = |nn| shape(nn, 1.0, |_| 1.0);
        let spread = |nn| shape(nn, 0.6, |_| 1.0);
        // Saturated local paths; the samples show the threads waiting: 400 ns where the idle
        // local latency is ~100.
        let (load, nn) = local_load(1.0);
        let c = Closed::new(&load, vec![8.0; nn], &vec![Some(400.0); nn], vec![4.0; nn]);
        assert!(c.throughput(&spread(nn)) > 1.05 * c.throughput(&local(nn)));
        // Without latency samples the wait is invisible and nothing is predicted to gain.
        let blind = Closed::new(&load, vec![8.0; nn], &[], vec![4.0; nn]);
        assert!(blind.throughput(&spread(nn)) <= blind.throughput(&local(nn)));
        // A light load: the threads mostly compute, and remote latency only slows them.
        let (load, nn) = local_load(0.1);
        let c = Closed::new(&load, vec![8.0; nn], &[], vec![4.0; nn]);
        assert!(c.throughput(&spread(nn)) < c.throughput(&local(nn)));
    }

    #[test]
    fn the_threads_whose_data_sits_behind_a_saturated_link_are_the_slowest() {
        // The 8-node Opteron, every node reading from every memory node alike at a high load:
        // the nodes whose routes cross its narrow links predict a lower rate per thread, which
        // is the pace of a program whose threads share the work evenly.
        let (load, nn) = local_load(0.9);
        let c = Closed::new(&load, vec![8.0; nn], &vec![Some(300.0); nn], vec![6.0; nn]);
        let even = shape(nn, 1.0 / nn as f64, |_| 1.0);
        let x = c.rates_for(&[8.0; 8], c.calibration().1, &[6.0; 8], &even);
        assert!(x.iter().all(|r| r.is_finite() && *r > 0.0), "{x:?}");
        let (lo, hi) = x.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        assert!(lo < 0.95 * hi, "{x:?}");
    }

    proptest::proptest! {
        #[test]
        fn predictions_are_finite_and_never_negative(
            loads in proptest::collection::vec(0.0f64..2e9, 64),
            home in 0.0f64..=1.0,
            lat in proptest::option::of(1.0f64..5000.0),
            threads in 0.0f64..16.0,
        ) {
            let m = ptb_topology::presets::get("opteron6272-8n").unwrap();
            let nn = m.n_nodes();
            let path: Vec<Vec<f64>> = loads.chunks(nn).map(|r| r.to_vec()).collect();
            let load = model(&m, path);
            let c = Closed::new(&load, vec![threads; nn], &vec![lat; nn], vec![6.0; nn]);
            let x = c.throughput(&shape(nn, home, |_| 1.0));
            proptest::prop_assert!(x.is_finite() && x >= 0.0, "{x}");
        }
    }
}

//! The characterisation run: every (CPU group, memory node) pair, uncontended, contended and
//! latency, with repeats and run-to-run spread.
//!
//! ```text
//! for each node with memory (memory-only nodes too):    bind buffers to it (mbind), touch them
//!     for each CPU group:  sweep 1..k threads until the plateau  -> uncontended[g][n]
//!                          chase a random cycle                   -> latency[g][n]
//!     every group at once, all its CPUs                           -> contended[*][n]
//! columns of CPU-only nodes are 0 (nothing to read there)
//! ```

use crate::buffer::NodeBuffer;
use crate::error::CharError;
use crate::kernel::{run_team, Copy, Triad, Work, Worker};
use crate::latency::Cycle;
use crate::options::Options;
use ptb_topology::{Machine, Matrix, MatrixSource};
use serde::Serialize;
use std::time::Instant;

/// One step of progress: how far, and what is being measured now.
pub struct Step<'a> {
    pub done: u64,
    pub total: u64,
    pub what: &'a str,
}

/// The sanity figure: local bandwidth of the kernel next to a plain sequential copy.
#[derive(Clone, Debug, Serialize)]
pub struct Sanity {
    pub group: String,
    pub node: u32,
    pub threads: usize,
    /// The uncontended Bandwidth Graph entry (pseudo-random triad), GB/s.
    pub kernel_gbps: f64,
    /// A sequential copy (memcpy) with the same threads and node, GB/s (read + write bytes).
    pub copy_gbps: f64,
    /// kernel / copy.
    pub ratio: f64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Characterisation {
    /// GB/s, CPU group x node, one group active at a time, at the plateau thread count.
    pub uncontended: Matrix,
    /// GB/s, CPU group x node, every group active at once with all its CPUs.
    pub contended: Matrix,
    /// ns, CPU group x node, idle dependent-load latency.
    pub latency: Matrix,
    /// Threads used for each uncontended entry (0 where the node has no memory).
    pub plateau_threads: Vec<Vec<usize>>,
    /// GB/s at 1, 2, ... threads for each (group, node): the sweep that found the plateau.
    pub sweeps: Vec<Vec<Vec<f64>>>,
    pub sanity: Option<Sanity>,
    /// The smallest share of a bandwidth sample that a measuring thread spent on its CPU
    /// (1 = never preempted). Well below 1: the machine was busy and bandwidths are low.
    pub min_cpu_share: f64,
    /// Wall-clock seconds the run took.
    pub seconds: f64,
    pub options: Options,
    /// What was measured and how, and anything the reader should know.
    pub notes: Vec<String>,
}

/// The median and the range (max - min) of samples.
pub fn median_spread(samples: &[f64]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let med = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    (med, s[n - 1] - s[0])
}

/// CPUs a group measures with: those this process may run on (all of them when the allowed
/// set is unknown), at most `max_threads`.
fn group_cpus(m: &Machine, g: usize, max_threads: usize, allowed: &[u32]) -> Vec<u32> {
    let ok = |c: &u32| allowed.is_empty() || allowed.contains(c);
    m.groups[g].cpus.iter().map(|c| c.0).filter(ok).take(max_threads.max(1)).collect()
}

/// Steps the run will take at most (for the progress bar).
fn total_steps(m: &Machine, o: &Options, allowed: &[u32]) -> u64 {
    let mem = m.memory_nodes().len() as u64;
    let r = o.repeats.max(1) as u64;
    let per_pair: u64 =
        (0..m.groups.len()).map(|g| group_cpus(m, g, o.max_threads, allowed).len() as u64 + (r - 1) + r).sum();
    mem * (1 + per_pair + r) + 1
}

/// Measure the Bandwidth Graph and latency matrix of the machine `m` describes, which must be
/// the machine this process runs on (its CPU and node ids are used for pinning and binding).
pub fn characterize(m: &Machine, o: &Options, progress: &mut dyn FnMut(Step)) -> Result<Characterisation, CharError> {
    let t_start = Instant::now();
    let (ng, nn) = (m.groups.len(), m.nodes.len());
    let mem_nodes = m.memory_nodes();
    if ng == 0 {
        return Err(CharError::Nothing("the machine model has no CPU groups".into()));
    }
    if mem_nodes.is_empty() {
        return Err(CharError::Nothing("the machine model has no node with memory".into()));
    }
    let r = o.repeats.max(1);
    let (ulen, clen) = (o.array_len(), o.contended_len());
    let mut unc = vec![vec![0.0; nn]; ng];
    let mut unc_sp = vec![vec![0.0; nn]; ng];
    let mut con = vec![vec![0.0; nn]; ng];
    let mut con_sp = vec![vec![0.0; nn]; ng];
    let mut lat = vec![vec![0.0; nn]; ng];
    let mut lat_sp = vec![vec![0.0; nn]; ng];
    let mut threads = vec![vec![0usize; nn]; ng];
    let mut sweeps = vec![vec![Vec::new(); nn]; ng];
    let mut notes = vec![format!("measured by ptb characterize: {}", o.describe())];
    let allowed = crate::sys::allowed_cpus();
    for (g, grp) in m.groups.iter().enumerate() {
        let usable = group_cpus(m, g, usize::MAX, &allowed).len();
        if usable == 0 {
            return Err(CharError::Nothing(format!(
                "this process may not run on any CPU of group {} ({}); allowed CPUs are {allowed:?} \
                 (taskset/cpuset): run ptb characterize without CPU restrictions",
                grp.name, grp.cpus
            )));
        }
        if usable < grp.cpus.len() {
            notes.push(format!(
                "group {}: only {usable} of its {} CPUs may be used by this process (cpuset); measured with those",
                grp.name,
                grp.cpus.len()
            ));
        }
    }
    let total = total_steps(m, o, &allowed);
    let mut done = 0u64;
    let mut step = |done: &mut u64, what: String| {
        progress(Step { done: *done, total, what: &what });
        *done += 1;
    };
    let mut sanity = None;
    let mut share = 1.0f64;
    let mut team = |w: &[Worker], teams: usize, work: Work| -> Result<Vec<f64>, CharError> {
        let run = run_team(w, teams, work, o.bw_time)?;
        share = share.min(run.cpu_share);
        Ok(run.gbps)
    };
    for &n in &mem_nodes {
        let node = &m.nodes[n.ix()];
        let id = node.id.0;
        // Keep every buffer of this node within a quarter of its memory.
        let budget = node.memory_bytes / 4;
        let (mut ulen, mut clen, mut chase) = (ulen, clen, o.chase_bytes as usize);
        let fits = |c: usize, ch: usize| (3 * c * 8 + ch) as u64 <= budget;
        while !fits(clen, chase) && clen > ulen {
            clen /= 2;
        }
        while !fits(clen, chase) && ulen > 1024 {
            ulen /= 2;
            clen = ulen;
            chase = (chase / 2).max(64 << 10);
        }
        if ulen < o.array_len() {
            notes.push(format!(
                "node {id}: buffers cut to 3 x {} KiB to fit in a quarter of its memory; figures may include cache hits",
                (ulen * 8) >> 10
            ));
        } else if clen < o.contended_len() {
            notes.push(format!(
                "node {id}: contended arrays cut to {} MiB to fit in a quarter of its memory",
                (clen * 8) >> 20
            ));
        }
        step(&mut done, format!("binding {} MiB of buffers to node {id}", (3 * clen * 8 + chase) >> 20));
        let buf = NodeBuffer::new(3 * clen * 8, id)?;
        let chase_buf = NodeBuffer::new(chase, id)?;
        let cycle = Cycle::build(&chase_buf, m.line_size.max(8) as usize, o.seed ^ u64::from(id));
        let triad = Triad::new(&buf, ulen);
        for g in 0..ng {
            let name = &m.groups[g].name;
            let cpus = group_cpus(m, g, o.max_threads, &allowed);
            let workers = |k: usize| -> Vec<Worker> { cpus[..k].iter().map(|&cpu| Worker { cpu, team: 0 }).collect() };
            // Thread sweep: stop after two steps in a row that gain less than `plateau_gain`.
            let (mut best_k, mut best, mut flat) = (1usize, 0.0f64, 0);
            let mut k = 1;
            while k <= cpus.len() {
                step(&mut done, format!("bandwidth {name} -> node {id}, {k} thread(s)"));
                let v = team(&workers(k), 1, Work::Triad(triad))?[0];
                sweeps[g][n.ix()].push(v);
                if v > best * (1.0 + o.plateau_gain) {
                    flat = 0;
                } else {
                    flat += 1;
                }
                if v > best {
                    (best_k, best) = (k, v);
                }
                k += 1;
                if flat >= 2 {
                    break;
                }
            }
            done += (cpus.len() + 1 - k) as u64;
            let mut samples = vec![best];
            for i in 1..r {
                step(&mut done, format!("bandwidth {name} -> node {id}, {best_k} thread(s), repeat {}", i + 1));
                samples.push(team(&workers(best_k), 1, Work::Triad(triad))?[0]);
            }
            (unc[g][n.ix()], unc_sp[g][n.ix()]) = median_spread(&samples);
            threads[g][n.ix()] = best_k;
            let mut ls = Vec::new();
            for i in 0..r {
                step(&mut done, format!("latency {name} -> node {id}, sample {}", i + 1));
                ls.push(cycle.chase_ns(cpus[0], o.lat_time)?);
            }
            (lat[g][n.ix()], lat_sp[g][n.ix()]) = median_spread(&ls);
            if sanity.is_none() && m.groups[g].node == n {
                let copy = Work::Copy(Copy::new(&buf, 3 * ulen * 8 / 2));
                let c = team(&workers(best_k), 1, copy)?[0];
                let kernel = unc[g][n.ix()];
                sanity = Some(Sanity {
                    group: name.clone(),
                    node: id,
                    threads: best_k,
                    kernel_gbps: kernel,
                    copy_gbps: c,
                    ratio: if c > 0.0 { kernel / c } else { 0.0 },
                });
            }
        }
        // Contended: every group at once, all its CPUs, data on this node.
        let all: Vec<Worker> = (0..ng)
            .flat_map(|g| group_cpus(m, g, o.max_threads, &allowed).into_iter().map(move |cpu| Worker { cpu, team: g }))
            .collect();
        let contended_triad = Triad::new(&buf, clen);
        let mut per_group: Vec<Vec<f64>> = vec![Vec::new(); ng];
        for i in 0..r {
            step(&mut done, format!("contended: all {} groups -> node {id}, sample {}", ng, i + 1));
            for (g, v) in team(&all, ng, Work::Triad(contended_triad))?.into_iter().enumerate() {
                per_group[g].push(v);
            }
        }
        for (g, s) in per_group.iter().enumerate() {
            (con[g][n.ix()], con_sp[g][n.ix()]) = median_spread(s);
        }
    }
    progress(Step { done: total, total, what: "done" });
    if share < 0.8 {
        notes.push(format!(
            "the machine was busy: a measuring thread ran only {:.0}% of a sample's time, so bandwidths are lower \
             than the hardware's (latencies are timed in thread CPU time and are less affected)",
            share * 100.0
        ));
    }
    for node in m.nodes.iter().filter(|n| !n.has_memory()) {
        notes.push(format!("node {} has no memory: its column is 0", node.id.0));
    }
    // One sample has no run-to-run spread to report.
    let matrix = |unit: &str, rows, spread| Matrix {
        spread: (r > 1).then_some(spread),
        ..Matrix::new(unit, MatrixSource::Measured, rows)
    };
    Ok(Characterisation {
        uncontended: matrix("GB/s", unc, unc_sp),
        contended: matrix("GB/s", con, con_sp),
        latency: matrix("ns", lat, lat_sp),
        plateau_threads: threads,
        sweeps,
        sanity,
        min_cpu_share: share,
        seconds: t_start.elapsed().as_secs_f64(),
        options: o.clone(),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median_spread(&[3.0, 1.0, 2.0]), (2.0, 2.0));
        assert_eq!(median_spread(&[1.0, 4.0]), (2.5, 3.0));
        assert_eq!(median_spread(&[]), (0.0, 0.0));
    }
}

//! Does the model reproduce the recording? Simulate it on the recorded machine with every
//! thread on the CPU it was recorded on and every page where it was recorded, and compare the
//! simulated node x node access map with the recorded one.
//!
//! The recorded map counts the model's samples (those in its objects and threads): row = node
//! of the CPU that took the sample, column = node of the page (the placement record of the
//! sample's cycle, else any record that lists the page, else the nearest page within 64 pages
//! whose node a record gives: some kernels do not tell the node of a page under PROT_NONE;
//! the count is reported). Each row weighs as much as all its samples, those whose page node
//! stayed unknown included; its columns are spread as its samples with a known page node are.
//! The simulated map is the simulator's (row = node of the accessing thread, column = node of
//! the memory, shares of all accesses) for the placement: each object is cut into up to 256
//! equal page groups, each placed in proportion to where the recording last saw its sampled
//! pages (the nearest group's mix where a group has none). The distance is the L1 norm of the
//! difference of the two normalised matrices (0 = identical, 2 = disjoint).

use crate::fit::Fitted;
use crate::objects;
use crate::recording::Recording;
use crate::ModelError;
use ptb_policy::ThreadTarget;
use ptb_sim::{SimOptions, Simulation};
use ptb_topology::CpuId;

/// The two maps and their distance.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckResult {
    /// Kernel node ids of rows and columns.
    pub nodes: Vec<u32>,
    /// Recorded shares (rows: node of the sampling CPU, columns: node of the page).
    pub recorded: Vec<Vec<f64>>,
    /// Simulated shares under the recorded placement.
    pub simulated: Vec<Vec<f64>>,
    pub l1: f64,
    /// Samples in the recorded map (the model's samples whose page node is known).
    pub samples: usize,
    /// Model samples whose page node no placement record gives (left out of the map).
    pub unknown: usize,
    /// Of the samples in the map, those whose page's node no record gave, taken from the
    /// nearest page (within [`NEARBY`] pages) whose node was recorded.
    pub nearby: usize,
    pub simulated_runtime_s: f64,
}

/// Most page groups per object in the simulated placement.
const GROUPS: usize = 256;
/// How far (pages) the nearest page with a recorded node may be from a sample's page.
pub const NEARBY: u64 = 64;

/// The recorded node of the page nearest to `vpn` inside `obj`, within [`NEARBY`] pages.
fn nearest(last: &std::collections::BTreeMap<u64, u16>, obj: &crate::objects::ObjectSpan, vpn: u64) -> Option<u16> {
    let lo = vpn.saturating_sub(NEARBY).max(obj.start_vpn);
    let hi = (vpn + NEARBY + 1).min(obj.start_vpn + obj.npages);
    let below = last.range(lo..=vpn).next_back();
    let above = last.range(vpn..hi).next();
    match (below, above) {
        (Some(b), Some(a)) => Some(if vpn - b.0 <= a.0 - vpn { *b.1 } else { *a.1 }),
        (Some(x), None) | (None, Some(x)) => Some(*x.1),
        (None, None) => None,
    }
}

/// Compare the recorded access map with the model's, simulated under the recorded placement.
pub fn check(rec: &Recording, f: &Fitted) -> Result<CheckResult, ModelError> {
    let m = rec.machine.clone().ok_or_else(|| {
        ModelError::Empty(format!(
            "{}: no machine model in the input, so there is nothing to simulate on (a `ptb record` trace has one)",
            rec.origin
        ))
    })?;
    if rec.page_nodes.is_empty() {
        return Err(ModelError::Empty(format!(
            "{}: no placement records say where pages were, so there is no recorded access map to compare with",
            rec.origin
        )));
    }
    let nn = m.n_nodes();
    let idx = rec.node_index();
    let last = rec.last_nodes();
    let tids: std::collections::BTreeSet<u32> = f.threads.iter().map(|t| t.tid).collect();
    let mut counts = vec![vec![0u64; nn]; nn];
    // Modelled samples per node of the sampling CPU, whether their page's node is known or not.
    let mut row_all = vec![0u64; nn];
    let (mut known, mut unknown, mut nearby) = (0usize, 0usize, 0usize);
    for s in &rec.samples {
        let Some(o) = objects::locate(&f.objects, s.vpn).filter(|_| tids.contains(&s.tid)) else { continue };
        let col = match rec.node_at(&idx, s.vpn, s.time_ns) {
            Some(c) => Some(c),
            None => {
                let c = nearest(&last, &f.objects[o], s.vpn);
                nearby += usize::from(c.is_some());
                c
            }
        };
        let Some(r) = rec.node_of_cpu(s.cpu) else {
            unknown += 1;
            continue;
        };
        row_all[r] += 1;
        match col {
            Some(c) if (c as usize) < nn => {
                counts[r][c as usize] += 1;
                known += 1;
            }
            _ => unknown += 1,
        }
    }
    if known == 0 {
        return Err(ModelError::Empty(format!(
            "{}: no modelled sample has a page whose node was recorded",
            rec.origin
        )));
    }
    // A row's weight is its share of every modelled sample (the CPU's node is always known);
    // within the row, the columns are those of its samples whose page node is known. Leaving
    // the samples without a page node out of the rows would weigh the threads by how often the
    // kernel told their pages' nodes rather than by how often they accessed memory.
    let rows_total: u64 = (0..nn).filter(|&r| counts[r].iter().sum::<u64>() > 0).map(|r| row_all[r]).sum();
    let recorded: Vec<Vec<f64>> = counts
        .iter()
        .zip(&row_all)
        .map(|(row, &all)| {
            let k: u64 = row.iter().sum();
            row.iter()
                .map(|c| if k == 0 { 0.0 } else { (all as f64 / rows_total as f64) * (*c as f64 / k as f64) })
                .collect()
        })
        .collect();
    // The recorded placement: every thread on the CPU it was recorded on, which the machine
    // must have (a trace edited by hand, or perf script text read with another machine's model,
    // may name others).
    if let Some(t) = f.threads.iter().find(|t| rec.node_of_cpu(t.cpu).is_none()) {
        return Err(ModelError::Mismatch(format!(
            "{}: thread {} ran on CPU {}, which the recorded machine `{}` does not have, so the recorded placement \
             cannot be simulated (for perf script text, give the machine it was recorded on with --machine)",
            rec.origin, t.tid, t.cpu, m.name
        )));
    }
    let targets: Vec<ThreadTarget> = f.threads.iter().map(|t| ThreadTarget::Cpu(CpuId(t.cpu))).collect();
    let mut groups: Vec<Vec<Vec<f64>>> = Vec::new();
    for obj in &f.objects {
        let np = obj.npages as usize;
        let g = np.clamp(1, GROUPS);
        let bounds: Vec<usize> = (0..g).map(|k| ptb_sim::layout::slice(np, g, k).0).collect();
        let mut per = vec![vec![0.0; nn]; g];
        let mut all = vec![0.0; nn];
        for (v, n) in last.range(obj.start_vpn..obj.start_vpn + obj.npages) {
            let k = (v - obj.start_vpn) as usize;
            let gi = bounds.partition_point(|b| *b <= k).saturating_sub(1);
            if (*n as usize) < nn {
                per[gi][*n as usize] += 1.0;
                all[*n as usize] += 1.0;
            }
        }
        if all.iter().sum::<f64>() == 0.0 {
            if let Some(r) = obj.region.and_then(|i| rec.regions.get(i)).filter(|r| r.resident.len() == nn) {
                all = r.resident.iter().map(|c| *c as f64).collect();
            }
        }
        // Only memory nodes may hold pages.
        let mem = |v: &mut Vec<f64>| {
            for (n, x) in v.iter_mut().enumerate() {
                if !m.nodes[n].has_memory() {
                    *x = 0.0;
                }
            }
        };
        mem(&mut all);
        if all.iter().sum::<f64>() == 0.0 {
            groups.push(vec![]); // nothing known: first touch
            continue;
        }
        for p in &mut per {
            mem(p);
        }
        // A group without a known page takes the mix of the nearest group with one (pages next
        // to each other were usually placed together), else the object's.
        let have: Vec<usize> = (0..g).filter(|&k| per[k].iter().sum::<f64>() > 0.0).collect();
        let filled: Vec<Vec<f64>> = (0..g)
            .map(|k| {
                if per[k].iter().sum::<f64>() > 0.0 {
                    return per[k].clone();
                }
                match have.iter().min_by_key(|&&h| (h as i64 - k as i64).unsigned_abs()) {
                    Some(&h) => per[h].clone(),
                    None => all.clone(),
                }
            })
            .collect();
        groups.push(filled);
    }
    let sim = Simulation::new(m.clone(), vec![f.workload.clone()], SimOptions::default())
        .map_err(|e| ModelError::Sim(format!("simulating the model on `{}`: {e}", m.name)))?;
    let r = sim
        .run_static_groups("recorded placement", &targets, &groups)
        .map_err(|e| ModelError::Sim(format!("simulating the model under the recorded placement: {e}")))?;
    let simulated = r.access_map.shares.clone();
    let l1 = recorded.iter().flatten().zip(simulated.iter().flatten()).map(|(a, b)| (a - b).abs()).sum();
    Ok(CheckResult {
        nodes: m.nodes.iter().map(|n| n.id.0).collect(),
        recorded,
        simulated,
        l1,
        samples: known,
        unknown,
        nearby,
        simulated_runtime_s: r.runtime_s,
    })
}

//! What the fitter reads: one program's sampled accesses, its memory regions and where its
//! sampled pages were, from a `ptb record` trace (or `perf script` text, see
//! [`crate::perf_script`]).
//!
//! Problem: traces hold several processes, placements repeated every cycle and fields the
//! fitter does not need; a trace can also be empty or lack what a fit needs.
//! Approach: reduce it to one process (the one with most samples), its samples in time order,
//! the union of its regions and every (time, page, node) placement known, and refuse with the
//! file and the reason when nothing is left to fit.

use crate::ModelError;
use ptb_linux::trace::{Trace, TraceRecord};
use ptb_profile::SampleKind;
use ptb_topology::{CpuId, Machine};
use std::collections::BTreeMap;

/// One sampled access of the program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecSample {
    pub tid: u32,
    pub cpu: u32,
    /// Virtual page number.
    pub vpn: u64,
    pub time_ns: u64,
    pub kind: SampleKind,
}

/// A memory region of the program (a mapping).
#[derive(Clone, Debug, PartialEq)]
pub struct RecRegion {
    pub start_vpn: u64,
    pub npages: u64,
    pub name: String,
    /// Resident base pages per dense node at the last record that listed the region.
    pub resident: Vec<u64>,
}

/// One program's recording.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The file it came from (for messages).
    pub origin: String,
    /// The sample source, as the recorder described it.
    pub source: String,
    /// Accesses per sample when each sample stands for a number of memory accesses (address
    /// sampling hardware); `None` when samples are page faults, which say where memory is
    /// used but not how often.
    pub period: Option<u64>,
    pub page_size: u64,
    /// The machine recorded on (`None` for inputs that do not say).
    pub machine: Option<Machine>,
    pub pid: u32,
    /// In time order.
    pub samples: Vec<RecSample>,
    pub regions: Vec<RecRegion>,
    /// (time, vpn, dense node) of every page whose node a placement record gave, in file order.
    pub page_nodes: Vec<(u64, u64, u16)>,
    /// What was left out and why.
    pub notes: Vec<String>,
}

/// The regions of all records as one list: a mapping that `mprotect` split into pieces (a
/// garbage collector, a fault-driven profiler, the kernel's hinting scan emulated by a program)
/// is listed differently from one record to the next (and in pieces that only touch when the
/// program protects single pages), so regions of the same name that overlap or touch are one
/// region. The kernel itself merges touching anonymous mappings with the same flags, so pieces
/// that stay apart usually differ in permissions: fragments of one allocation, or a neighbour
/// such as a thread's stack, which the object finder trims off as an end with few samples.
/// The resident pages are the last record's, summed over the pieces inside each region.
fn merge_regions(mut spans: Vec<(u64, u64, String)>, last: &[(u64, u64, Vec<u64>)], nn: usize) -> Vec<RecRegion> {
    spans.sort_by_key(|a| (a.0, a.1));
    let mut out: Vec<RecRegion> = Vec::new();
    for (s, e, name) in spans {
        if let Some(r) = out.last_mut() {
            let end = r.start_vpn + r.npages;
            if s < end || (s == end && r.name == name) {
                r.npages = r.npages.max(e.saturating_sub(r.start_vpn));
                continue;
            }
        }
        out.push(RecRegion { start_vpn: s, npages: e.saturating_sub(s), name, resident: vec![0; nn] });
    }
    for r in &mut out {
        for (s, e, res) in last {
            if *s >= r.start_vpn && *e <= r.start_vpn + r.npages {
                r.resident.iter_mut().zip(res).for_each(|(a, b)| *a = a.saturating_add(*b));
            }
        }
    }
    out
}

/// Most samples read from one input (memory stays bounded on huge traces).
pub const MAX_SAMPLES: usize = 20_000_000;

impl Recording {
    /// From a parsed `ptb record` trace.
    pub fn from_trace(t: &Trace, origin: &str) -> Result<Recording, ModelError> {
        if t.page_size == 0 || !t.page_size.is_power_of_two() {
            return Err(ModelError::input(origin, 1, "page_size", format!("{} is not a power of two", t.page_size)));
        }
        let mut per_pid: BTreeMap<u32, usize> = BTreeMap::new();
        for s in &t.samples {
            *per_pid.entry(s.app).or_default() += 1;
        }
        let Some((&pid, _)) = per_pid.iter().max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p))) else {
            return Err(ModelError::Empty(format!(
                "{origin}: the trace has no samples (source: {}). Record longer, or while the program works: \
                 `ptb record PID --seconds 10 -o FILE`",
                t.source
            )));
        };
        let mut notes = Vec::new();
        if per_pid.len() > 1 {
            notes.push(format!(
                "the trace holds {} processes; modelled pid {pid} (the most samples), left out pid {}",
                per_pid.len(),
                per_pid.keys().filter(|p| **p != pid).map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
            ));
        }
        let fault_like = t
            .samples
            .iter()
            .filter(|s| s.app == pid)
            .all(|s| matches!(s.kind, SampleKind::PageFault | SampleKind::HintFault))
            || t.source.starts_with("page-faults");
        // Samples the source marks as cache hits (IBS/SPE ops) are not memory traffic.
        let hits = t.samples.iter().filter(|s| s.app == pid && !s.is_memory_access()).count();
        if hits > 0 {
            notes.push(format!("left out {hits} samples the source marks as cache hits (not memory accesses)"));
        }
        let mut samples: Vec<RecSample> = t
            .samples
            .iter()
            .filter(|s| s.app == pid && s.is_memory_access())
            .take(MAX_SAMPLES)
            .map(|s| RecSample {
                tid: s.tid,
                cpu: s.cpu.0,
                vpn: s.addr / t.page_size,
                time_ns: s.time_ns,
                kind: s.kind,
            })
            .collect();
        samples.sort_by_key(|s| s.time_ns);
        let nn = t.machine.n_nodes();
        let mut page_nodes = Vec::new();
        // Every region any record listed; the last record's resident pages.
        let mut spans: Vec<(u64, u64, String)> = Vec::new();
        let mut last_regions: Vec<(u64, u64, Vec<u64>)> = Vec::new();
        for p in &t.placements {
            let TraceRecord::Placement { time_ns, pages, regions: rs, .. } = p else { continue };
            for &(app, vpn, n) in pages {
                if app == pid && (n as usize) < nn {
                    page_nodes.push((*time_ns, vpn, n));
                }
            }
            let mine: Vec<_> = rs.iter().filter(|r| r.app == pid && r.npages > 0).collect();
            if !mine.is_empty() {
                last_regions = mine
                    .iter()
                    .filter(|r| r.resident.len() == nn)
                    .map(|r| (r.start_vpn, r.start_vpn.saturating_add(r.npages), r.resident.clone()))
                    .collect();
            }
            spans.extend(mine.iter().map(|r| (r.start_vpn, r.start_vpn.saturating_add(r.npages), r.name.clone())));
        }
        Ok(Recording {
            origin: origin.to_string(),
            source: t.source.clone(),
            period: (!fault_like && t.period > 0).then_some(t.period),
            page_size: t.page_size,
            machine: Some(t.machine.clone()),
            pid,
            samples,
            regions: merge_regions(spans, &last_regions, nn),
            page_nodes,
            notes,
        })
    }
    /// Dense node of the CPU `cpu`, when the machine is known.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<usize> {
        self.machine.as_ref()?.node_of_cpu(CpuId(cpu)).map(|n| n.ix())
    }

    /// Recorded length, ns (at least 1 ms).
    pub fn span_ns(&self) -> u64 {
        let (a, b) = (self.samples.first().map_or(0, |s| s.time_ns), self.samples.last().map_or(0, |s| s.time_ns));
        b.saturating_sub(a).max(1_000_000)
    }

    /// The last known node of every page (vpn -> dense node).
    pub fn last_nodes(&self) -> BTreeMap<u64, u16> {
        self.page_nodes.iter().map(|&(_, v, n)| (v, n)).collect()
    }

    /// The node of page `vpn` at time `t`: the first placement record at or after `t` that
    /// lists it (the cycle the sample belongs to), else the last one before.
    pub fn node_at(&self, idx: &BTreeMap<u64, Vec<(u64, u16)>>, vpn: u64, t: u64) -> Option<u16> {
        let v = idx.get(&vpn)?;
        let i = v.partition_point(|(time, _)| *time < t);
        v.get(i).or_else(|| v.last()).map(|x| x.1)
    }

    /// Placement records per page, in time order.
    pub fn node_index(&self) -> BTreeMap<u64, Vec<(u64, u16)>> {
        let mut idx: BTreeMap<u64, Vec<(u64, u16)>> = BTreeMap::new();
        for &(t, v, n) in &self.page_nodes {
            idx.entry(v).or_default().push((t, n));
        }
        for v in idx.values_mut() {
            v.sort_by_key(|x| x.0);
        }
        idx
    }
}

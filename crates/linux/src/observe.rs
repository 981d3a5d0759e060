//! What the daemon observes each cycle about its targets: threads and the CPU/node they last
//! ran on, memory regions with resident pages per node (numa_maps) and their huge-page backed
//! ranges (smaps, page flags), the node of sampled pages
//! (move_pages query) and free memory per node (sysfs).

use crate::actuator::query_pages;
use crate::backing::LiveBacking;
use crate::procfs::{ProcError, ProcRoot};
use crate::sys;
use ptb_policy::{HugeBacking, PageLocations, Region, ThreadState};
use ptb_profile::{AppId, PageKey, Sample};
use ptb_topology::{CpuId, GroupIdx, Machine, NodeId, NodeIdx};
use std::collections::{BTreeMap, BTreeSet};

/// True while `pid` exists and is not a zombie.
pub fn alive(root: &ProcRoot, pid: u32) -> bool {
    match root.task_stat(pid, pid) {
        Ok(s) => s.state != 'Z' && s.state != 'X',
        Err(_) => false,
    }
}

/// Threads of the processes `pids`. Threads that exit while being read are skipped; a
/// process that exited is left out (the caller notices through [`alive`]).
pub fn threads(root: &ProcRoot, m: &Machine, pids: &[u32]) -> Vec<ThreadState> {
    let mut out = Vec::new();
    let all = m.n_cpus();
    for &pid in pids {
        let Ok(tids) = root.tasks(pid) else { continue };
        for tid in tids {
            let Ok(st) = root.task_stat(pid, tid) else { continue };
            if st.state == 'Z' || st.state == 'X' {
                continue;
            }
            let cpu = CpuId(st.processor);
            let affinity = sys::get_affinity(tid).ok().filter(|a| a.len() < all);
            out.push(ThreadState {
                tid,
                app: pid,
                cpu,
                node: m.node_of_cpu(cpu).unwrap_or(NodeIdx(0)),
                group: m.group_of_cpu(cpu).unwrap_or(GroupIdx(0)),
                affinity,
            });
        }
    }
    out
}

/// The node (dense index) of every sampled page that is resident.
pub fn page_locations(m: &Machine, samples: &[Sample]) -> PageLocations {
    let mut by_app: BTreeMap<AppId, BTreeSet<u64>> = BTreeMap::new();
    for s in samples {
        by_app.entry(s.app).or_default().insert(s.addr / m.page_size);
    }
    let mut loc = PageLocations::new();
    for (app, vpns) in by_app {
        let vpns: Vec<u64> = vpns.into_iter().collect();
        let addrs: Vec<u64> = vpns.iter().map(|v| v * m.page_size).collect();
        let Ok(st) = query_pages(app, &addrs) else { continue };
        for (v, s) in vpns.iter().zip(st) {
            if s >= 0 {
                if let Some(n) = m.node_idx(NodeId(s as u32)) {
                    loc.insert(PageKey { app, vpn: *v }, n);
                }
            }
        }
    }
    loc
}

/// Blocks looked at per process and cycle to find transparent huge pages (32 GiB of 2 MiB
/// pages); beyond, mappings with huge pages count as huge-page backed whole.
const HUGE_BLOCKS_PER_CYCLE: usize = 16_384;

/// Private anonymous regions of a process with resident pages per dense node, and which of
/// their pages are huge-page backed ([`LiveBacking::huge_ranges`]; nothing is read where no
/// process can hold huge pages, see [`crate::thp::huge_pages_possible`]).
pub fn regions(root: &ProcRoot, m: &Machine, pid: u32) -> Result<Vec<Region>, ProcError> {
    let maps = root.maps(pid)?;
    let huge: Vec<(u64, u64, u64)> = if crate::thp::huge_pages_possible(root) {
        LiveBacking::open(root, pid, m.page_size).huge_ranges(HUGE_BLOCKS_PER_CYCLE)
    } else {
        vec![]
    };
    let numa: BTreeMap<u64, _> = root.numa_maps(pid)?.into_iter().map(|n| (n.start, n)).collect();
    let mut out = Vec::new();
    for mp in maps.iter().filter(|x| x.is_anon_data()) {
        let mut resident = vec![0u64; m.n_nodes()];
        if let Some(n) = numa.get(&mp.start) {
            // numa_maps counts pages of the mapping's own page size; convert to base pages.
            let mult = (n.page_kb * 1024 / m.page_size).max(1);
            for (id, c) in &n.pages {
                if let Some(ix) = m.node_idx(NodeId(*id)) {
                    resident[ix.ix()] += c * mult;
                }
            }
        }
        // A guard page or an address-space reservation holds nothing to place.
        if mp.no_access() && resident.iter().all(|c| *c == 0) {
            continue;
        }
        let (lo, hi) = (mp.start / m.page_size, mp.end / m.page_size);
        let inside: Vec<&(u64, u64, u64)> = huge.iter().filter(|h| h.0 < hi && lo < h.1).collect();
        let backing = match inside.first() {
            Some(h) => HugeBacking::new(h.2, inside.iter().filter(|x| x.2 == h.2).map(|x| (x.0.max(lo), x.1.min(hi)))),
            None => HugeBacking::default(),
        };
        out.push(Region {
            app: pid,
            start_vpn: lo,
            npages: hi - lo,
            name: if mp.path.is_empty() { "[anon]".into() } else { mp.path.clone() },
            resident,
            huge: backing,
        });
    }
    Ok(out)
}

/// Free bytes per node (dense index); 0 where unreadable.
pub fn free_bytes(root: &ProcRoot, m: &Machine) -> Vec<u64> {
    m.nodes.iter().map(|n| root.node_free_bytes(n.id.0).unwrap_or(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptb_profile::SampleKind;

    /// This machine's live model, built from what the test can see (one node per
    /// /sys/devices/system/node/nodeN), without needing the topology crate's sysfs reader.
    fn this_machine() -> Machine {
        let n = std::fs::read_dir("/sys/devices/system/node")
            .map(|rd| rd.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("node")).count())
            .unwrap_or(1)
            .max(1);
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        ptb_topology::synthetic::synthetic(&format!("nodes={n},cpus={}", (cpus / n).max(1))).unwrap()
    }

    #[test]
    fn observes_this_process() {
        let m = this_machine();
        let root = ProcRoot::live();
        let me = std::process::id();
        assert!(alive(&root, me));
        let ts = threads(&root, &m, &[me]);
        assert!(ts.iter().any(|t| t.tid == me));
        let rs = regions(&root, &m, me).unwrap();
        assert!(rs.iter().any(|r| r.resident.iter().sum::<u64>() > 0));
        let v = vec![3u8; 4096 * 4];
        let s = Sample {
            app: me,
            tid: me,
            cpu: CpuId(0),
            addr: v.as_ptr() as u64,
            kind: SampleKind::Access,
            time_ns: 0,
            data_src: None,
            latency_ns: None,
            phys: None,
        };
        let loc = page_locations(&m, &[s]);
        assert_eq!(loc.get(s.page(m.page_size)), Some(NodeIdx(0)));
        assert!(free_bytes(&root, &m)[0] > 0);
        assert!(!alive(&root, u32::MAX - 1));
    }
}

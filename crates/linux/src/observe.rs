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
    threads_with_cpu(root, m, pids).0
}

/// [`threads`], and the CPU time (user + system, seconds) each has used since it started,
/// sorted by tid ([`ptb_policy::Snapshot::thread_cpu`]).
pub fn threads_with_cpu(root: &ProcRoot, m: &Machine, pids: &[u32]) -> (Vec<ThreadState>, Vec<(u32, f64)>) {
    let mut out = Vec::new();
    let mut cpu_s = Vec::new();
    let all = m.n_cpus();
    let hz = sys::clock_ticks() as f64;
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
            cpu_s.push((tid, st.utime.saturating_add(st.stime) as f64 / hz));
        }
    }
    cpu_s.sort_unstable_by_key(|x| x.0);
    cpu_s.dedup_by_key(|x| x.0);
    (out, cpu_s)
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
    let (maps, numa) = maps_with_numa(root, pid)?;
    let huge: Vec<(u64, u64, u64)> = if crate::thp::huge_pages_possible(root) {
        LiveBacking::open(root, pid, m.page_size).huge_ranges(HUGE_BLOCKS_PER_CYCLE)
    } else {
        vec![]
    };
    let mut out = Vec::new();
    for mp in maps.iter().filter(|x| x.is_anon_data()) {
        let mut resident = vec![0u64; m.n_nodes()];
        let counted = numa.get(&mp.start);
        if let Some(n) = counted {
            // numa_maps counts pages of the mapping's own page size; convert to base pages.
            let mult = (n.page_kb * 1024 / m.page_size).max(1);
            for (id, c) in &n.pages {
                if let Some(ix) = m.node_idx(NodeId(*id)) {
                    resident[ix.ix()] += c * mult;
                }
            }
        }
        // A guard page or an address-space reservation holds nothing to place. A mapping
        // numa_maps did not list (it changed between the two reads) may hold pages: kept.
        if mp.no_access() && counted.is_some() && resident.iter().all(|c| *c == 0) {
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

/// Reads of maps and numa_maps tried before a process's mappings are taken as they are.
const MAP_READS: usize = 3;

/// `pid`'s mappings and its numa_maps lines by start address, read so that they agree.
///
/// The two files are separate reads, and a program that changes its mappings all the time
/// (mprotect of parts of a buffer: garbage collectors, fault-driven profilers, the test
/// program's refault mode) splits and merges them between the reads: measured on a 2-core
/// guest with the test program re-protecting its buffer every 100 ms, 2% of the mappings of
/// one read were missing from the numa_maps read after it. Read again while a private mapping
/// has no numa_maps line; after [`MAP_READS`] reads the mappings are taken as they are, and the
/// caller must treat a missing line as "not known", not as "nothing resident".
fn maps_with_numa(
    root: &ProcRoot,
    pid: u32,
) -> Result<(Vec<crate::procfs::Mapping>, BTreeMap<u64, crate::procfs::NumaMapping>), ProcError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let maps = root.maps(pid)?;
        let numa: BTreeMap<u64, _> = root.numa_maps(pid)?.into_iter().map(|n| (n.start, n)).collect();
        if tries >= MAP_READS || maps.iter().filter(|x| x.is_anon_data()).all(|x| numa.contains_key(&x.start)) {
            return Ok((maps, numa));
        }
    }
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

    /// A fake /proc with one process whose maps and numa_maps disagree, as two reads of a
    /// program that is re-protecting its buffer do.
    fn fake_proc(maps: &str, numa: &str) -> (tempfile::TempDir, ProcRoot) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("proc/42");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("maps"), maps).unwrap();
        std::fs::write(p.join("numa_maps"), numa).unwrap();
        let root = ProcRoot::new(d.path());
        (d, root)
    }

    #[test]
    fn a_protected_mapping_numa_maps_missed_is_kept_an_empty_one_dropped() {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=1").unwrap();
        let maps = "7f0000000000-7f0000010000 rw-p 00000000 00:00 0 \n\
                    7f0000010000-7f0000020000 ---p 00000000 00:00 0 \n\
                    7f0000020000-7f0000030000 ---p 00000000 00:00 0 \n";
        // The second mapping's line is missing (it was split between the reads); the third is
        // listed with nothing resident: a guard or a reservation.
        let numa = "7f0000000000 default anon=16 dirty=16 N0=10 N1=6 kernelpagesize_kB=4\n\
                    7f0000020000 default kernelpagesize_kB=4\n";
        let (_d, root) = fake_proc(maps, numa);
        let rs = regions(&root, &m, 42).unwrap();
        let starts: Vec<u64> = rs.iter().map(|r| r.start_vpn * m.page_size).collect();
        assert_eq!(starts, vec![0x7f0000000000, 0x7f0000010000], "{rs:?}");
        assert_eq!(rs[0].resident, vec![10, 6]);
        assert_eq!(rs[1].resident, vec![0, 0], "not known: nothing counted");
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

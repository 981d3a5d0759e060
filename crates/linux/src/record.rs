//! `ptb record`: samples and placements of one process into a trace file, moving nothing.

use crate::observe;
use crate::perf::PerfSource;
use crate::procfs::ProcRoot;
use crate::safety;
use crate::trace::{TraceRecord, TraceRegion, TraceThread, TraceWriter, TRACE_VERSION};
use ptb_profile::{Sample, SampleSource};
use ptb_topology::Machine;
use std::io::BufWriter;
use std::path::Path;
use std::time::{Duration, Instant};

/// Cycles a page whose node could not be read is asked again.
const RETRIES: u8 = 3;
/// Most such pages kept at once.
const MAX_PENDING: usize = 100_000;

/// Options of a recording.
pub struct RecordConfig {
    pub seconds: f64,
    pub cycle: Duration,
    /// Sample source name (auto, ibs-op, pebs-loads, spe, page-faults).
    pub source: String,
    pub period: Option<u64>,
}

/// What a recording captured.
#[derive(Debug, Default)]
pub struct RecordSummary {
    pub samples: u64,
    pub lost: u64,
    pub placements: u64,
    pub threads_seen: usize,
    pub target_exited: bool,
    pub source: String,
}

/// Record process `pid` for `cfg.seconds` (or until it exits / SIGINT / SIGTERM) into `out`.
pub fn record(root: &ProcRoot, m: &Machine, pid: u32, out: &Path, cfg: &RecordConfig) -> Result<RecordSummary, String> {
    // Known by identity: if the process exits and its pid comes round to another process,
    // the recording stops instead of following the newcomer.
    let id = crate::identity::ProcId::capture(root, pid)?;
    let det = crate::perf::detect(root.root());
    let kind = det.pick(&cfg.source)?;
    let period = cfg.period.unwrap_or(if kind == crate::perf::SourceKind::PageFaults { 1 } else { 4096 });
    // At the period given, all along: the trace states one period for every sample.
    let mut src = PerfSource::new(kind, period).uncapped();
    let f = ptb_topology::input::create(out, "trace", false).map_err(|e| e.to_string())?;
    let mut w = TraceWriter::new(BufWriter::new(f));
    let io = |e: std::io::Error| format!("{}: {e}", out.display());
    w.write(&TraceRecord::Header {
        version: TRACE_VERSION,
        pids: vec![pid],
        page_size: m.page_size,
        source: src.describe(),
        period,
        machine: Box::new(m.clone()),
    })
    .map_err(io)?;
    let mut sum = RecordSummary { source: src.describe(), ..Default::default() };
    let t0 = Instant::now();
    let mut tids_seen = std::collections::BTreeSet::new();
    let mut buf: Vec<Sample> = Vec::new();
    let mut offset: Option<i128> = None;
    let mut pending: std::collections::BTreeMap<(u32, u64), u8> = Default::default();
    loop {
        let threads = observe::threads(root, m, &[pid]);
        tids_seen.extend(threads.iter().map(|t| t.tid));
        src.track(&threads.iter().map(|t| (t.app, t.tid)).collect::<Vec<_>>());
        let deadline = Instant::now() + cfg.cycle;
        while Instant::now() < deadline && safety::stop_requested().is_none() && id.current(root) {
            std::thread::sleep(Duration::from_millis(20));
            // New threads are sampled from now, not from the next cycle (as in the daemon).
            let tids = root.tasks(pid).unwrap_or_default();
            if tids.iter().any(|t| !tids_seen.contains(t)) {
                tids_seen.extend(tids.iter().copied());
                src.track_more(&tids.iter().map(|&t| (pid, t)).collect::<Vec<_>>());
            }
        }
        let st = src.drain(&mut buf).map_err(|e| e.to_string())?;
        sum.samples += st.samples;
        sum.lost += st.lost;
        let pages = observe::page_locations(m, &buf);
        let mut page_list = Vec::new();
        // Pages whose node the kernel would not tell (some kernels refuse to query a page
        // under PROT_NONE) are asked again in the next cycles.
        let retry: Vec<Sample> = pending
            .keys()
            .filter(|(app, vpn)| pages.get(ptb_profile::PageKey { app: *app, vpn: *vpn }).is_none())
            .map(|&(app, vpn)| Sample {
                app,
                tid: 0,
                cpu: ptb_topology::CpuId(0),
                addr: vpn * m.page_size,
                kind: ptb_profile::SampleKind::Access,
                time_ns: 0,
                data_src: None,
                latency_ns: None,
                phys: None,
            })
            .collect();
        let again = observe::page_locations(m, &retry);
        for r in &retry {
            let key = (r.app, r.addr / m.page_size);
            if let Some(n) = again.get(r.page(m.page_size)) {
                page_list.push((key.0, key.1, n.0));
                pending.remove(&key);
            } else if let Some(left) = pending.get_mut(&key) {
                *left -= 1;
                if *left == 0 {
                    pending.remove(&key);
                }
            }
        }
        // Sample times on the recorder's clock (that of the placement records), keeping perf's
        // own spacing between samples: perf time + an offset fixed at the first cycle with
        // samples (its latest sample taken as "now"), never later than now.
        let now = t0.elapsed().as_nanos() as i128;
        if let (None, Some(latest)) = (offset, buf.iter().map(|s| s.time_ns).max()) {
            offset = Some(now - latest as i128);
        }
        for s in &buf {
            let mut s = *s;
            s.time_ns = (s.time_ns as i128 + offset.unwrap_or(0)).clamp(0, now) as u64;
            match pages.get(s.page(m.page_size)) {
                Some(n) => {
                    page_list.push((s.app, s.addr / m.page_size, n.0));
                    pending.remove(&(s.app, s.addr / m.page_size));
                }
                None if pending.len() < MAX_PENDING => {
                    pending.entry((s.app, s.addr / m.page_size)).or_insert(RETRIES);
                }
                None => {}
            }
            w.write(&TraceRecord::Sample(s)).map_err(io)?;
        }
        buf.clear();
        page_list.sort_unstable();
        page_list.dedup();
        let regions = observe::regions(root, m, pid).unwrap_or_default();
        w.write(&TraceRecord::Placement {
            time_ns: t0.elapsed().as_nanos() as u64,
            threads: threads
                .iter()
                .map(|t| TraceThread { app: t.app, tid: t.tid, cpu: t.cpu.0, node: t.node.0 })
                .collect(),
            pages: page_list,
            regions: regions
                .into_iter()
                .map(|r| TraceRegion {
                    app: r.app,
                    start_vpn: r.start_vpn,
                    npages: r.npages,
                    name: r.name,
                    resident: r.resident,
                })
                .collect(),
            free_bytes: observe::free_bytes(root, m),
        })
        .map_err(io)?;
        sum.placements += 1;
        if !id.current(root) {
            sum.target_exited = true;
            break;
        }
        if safety::stop_requested().is_some() || t0.elapsed().as_secs_f64() >= cfg.seconds {
            break;
        }
    }
    w.write(&TraceRecord::End { time_ns: t0.elapsed().as_nanos() as u64, samples: sum.samples, lost: sum.lost })
        .map_err(io)?;
    w.flush().map_err(io)?;
    sum.threads_seen = tids_seen.len();
    Ok(sum)
}

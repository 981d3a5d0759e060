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
    let mut src = PerfSource::new(kind, period);
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
    loop {
        let threads = observe::threads(root, m, &[pid]);
        tids_seen.extend(threads.iter().map(|t| t.tid));
        src.track(&threads.iter().map(|t| (t.app, t.tid)).collect::<Vec<_>>());
        let deadline = Instant::now() + cfg.cycle;
        while Instant::now() < deadline && safety::stop_requested().is_none() && id.current(root) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let st = src.drain(&mut buf).map_err(|e| e.to_string())?;
        sum.samples += st.samples;
        sum.lost += st.lost;
        let pages = observe::page_locations(m, &buf);
        let mut page_list = Vec::new();
        for s in &buf {
            // Sample time on the daemon's clock, not perf's.
            let mut s = *s;
            s.time_ns = t0.elapsed().as_nanos() as u64;
            if let Some(n) = pages.get(s.page(m.page_size)) {
                page_list.push((s.app, s.addr / m.page_size, n.0));
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

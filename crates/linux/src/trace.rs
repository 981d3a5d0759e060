//! Trace files: samples and placements of a managed process, as JSON lines
//! (docs/trace-format.md). Written by `ptb record`, read by `ptb plan` and the replay source.
//!
//! ```text
//! {"type":"header","version":1,"pids":[4242],"page_size":4096,"source":"page-faults ...","period":1,"machine":{...}}
//! {"type":"sample","app":4242,"tid":4243,"cpu":1,"addr":140..,"kind":"page-fault","time_ns":1200}
//! {"type":"placement","time_ns":1000000000,"threads":[...],"pages":[[4242,34359738,0]],"regions":[...],"free_bytes":[...]}
//! {"type":"end","time_ns":5000000000,"samples":812,"lost":0}
//! ```

use ptb_profile::{AppId, Sample, SampleSource, SourceStats, Tid};
use ptb_topology::Machine;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

pub const TRACE_VERSION: u32 = 1;

/// A thread in a placement record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceThread {
    pub app: AppId,
    pub tid: Tid,
    pub cpu: u32,
    /// Dense node index of that CPU.
    pub node: u16,
}

/// A memory region in a placement record (resident pages per dense node).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRegion {
    pub app: AppId,
    pub start_vpn: u64,
    pub npages: u64,
    pub name: String,
    pub resident: Vec<u64>,
}

/// One line of a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum TraceRecord {
    Header {
        version: u32,
        pids: Vec<AppId>,
        page_size: u64,
        source: String,
        /// Sampling period (events per sample).
        period: u64,
        machine: Box<Machine>,
    },
    Sample(Sample),
    Placement {
        time_ns: u64,
        threads: Vec<TraceThread>,
        /// (app, vpn, dense node) of pages whose node is known.
        pages: Vec<(AppId, u64, u16)>,
        regions: Vec<TraceRegion>,
        free_bytes: Vec<u64>,
    },
    End {
        time_ns: u64,
        samples: u64,
        lost: u64,
    },
}

/// Appends records to a trace file.
pub struct TraceWriter<W: Write> {
    out: W,
}

impl<W: Write> TraceWriter<W> {
    pub fn new(out: W) -> Self {
        TraceWriter { out }
    }
    pub fn write(&mut self, r: &TraceRecord) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, r)?;
        self.out.write_all(b"\n")
    }
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A whole trace in memory.
#[derive(Clone, Debug)]
pub struct Trace {
    pub pids: Vec<AppId>,
    pub page_size: u64,
    pub source: String,
    pub period: u64,
    pub machine: Machine,
    pub samples: Vec<Sample>,
    /// Placement records in file order.
    pub placements: Vec<TraceRecord>,
    pub lost: u64,
}

/// Read a trace; errors name the file and line.
pub fn read_trace(path: &Path) -> Result<Trace, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_trace(std::io::BufReader::new(f), &path.display().to_string())
}

/// Parse a trace from text (`origin` names it in errors).
pub fn parse_trace(r: impl BufRead, origin: &str) -> Result<Trace, String> {
    let mut trace: Option<Trace> = None;
    for (i, line) in r.lines().enumerate() {
        let line = line.map_err(|e| format!("{origin}: line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let rec: TraceRecord =
            serde_json::from_str(&line).map_err(|e| format!("{origin}: line {}: not a trace record: {e}", i + 1))?;
        match (rec, trace.as_mut()) {
            (TraceRecord::Header { version, pids, page_size, source, period, machine }, None) => {
                if version != TRACE_VERSION {
                    return Err(format!("{origin}: trace version {version}, this ptb reads version {TRACE_VERSION}"));
                }
                trace = Some(Trace {
                    pids,
                    page_size,
                    source,
                    period,
                    machine: *machine,
                    samples: vec![],
                    placements: vec![],
                    lost: 0,
                });
            }
            (TraceRecord::Header { .. }, Some(_)) => return Err(format!("{origin}: line {}: second header", i + 1)),
            (_, None) => return Err(format!("{origin}: line {}: the first record must be the header", i + 1)),
            (TraceRecord::Sample(s), Some(t)) => t.samples.push(s),
            (p @ TraceRecord::Placement { .. }, Some(t)) => t.placements.push(p),
            (TraceRecord::End { lost, .. }, Some(t)) => t.lost = lost,
        }
    }
    trace.ok_or_else(|| format!("{origin}: empty trace (no header)"))
}

/// Replays a trace's samples: each `drain` delivers the samples up to the current cursor.
pub struct ReplaySource {
    samples: Vec<Sample>,
    next: usize,
    until_ns: u64,
    label: String,
}

impl ReplaySource {
    pub fn new(trace: &Trace) -> Self {
        let mut samples = trace.samples.clone();
        samples.sort_by_key(|s| s.time_ns);
        ReplaySource { samples, next: 0, until_ns: 0, label: trace.source.clone() }
    }
    /// Let samples up to `t_ns` (trace time) be drained.
    pub fn advance_to(&mut self, t_ns: u64) {
        self.until_ns = self.until_ns.max(t_ns);
    }
    pub fn done(&self) -> bool {
        self.next >= self.samples.len()
    }
}

impl SampleSource for ReplaySource {
    fn describe(&self) -> String {
        format!("trace replay (recorded with {})", self.label)
    }
    fn drain(&mut self, out: &mut Vec<Sample>) -> std::io::Result<SourceStats> {
        let start = self.next;
        while self.next < self.samples.len() && self.samples[self.next].time_ns <= self.until_ns {
            self.next += 1;
        }
        out.extend_from_slice(&self.samples[start..self.next]);
        Ok(SourceStats { samples: (self.next - start) as u64, ..Default::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ptb_profile::SampleKind;
    use ptb_topology::CpuId;

    fn sample(t: u64, addr: u64) -> Sample {
        Sample {
            app: 7,
            tid: 8,
            cpu: CpuId(1),
            addr,
            kind: SampleKind::PageFault,
            time_ns: t,
            data_src: None,
            latency_ns: None,
            phys: None,
        }
    }

    fn write_trace(samples: &[Sample]) -> Vec<u8> {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=2").unwrap();
        let mut w = TraceWriter::new(Vec::new());
        w.write(&TraceRecord::Header {
            version: 1,
            pids: vec![7],
            page_size: 4096,
            source: "page-faults".into(),
            period: 1,
            machine: Box::new(m),
        })
        .unwrap();
        for s in samples {
            w.write(&TraceRecord::Sample(*s)).unwrap();
        }
        w.write(&TraceRecord::Placement {
            time_ns: 5,
            threads: vec![TraceThread { app: 7, tid: 8, cpu: 1, node: 0 }],
            pages: vec![(7, 1, 1)],
            regions: vec![],
            free_bytes: vec![1, 2],
        })
        .unwrap();
        w.write(&TraceRecord::End { time_ns: 9, samples: samples.len() as u64, lost: 3 }).unwrap();
        w.out
    }

    #[test]
    fn round_trip_and_replay_in_time_order() {
        let ss = [sample(30, 0x2000), sample(10, 0x1000), sample(20, 0x3000)];
        let bytes = write_trace(&ss);
        let t = parse_trace(&bytes[..], "mem").unwrap();
        assert_eq!(t.samples.len(), 3);
        assert_eq!(t.lost, 3);
        assert_eq!(t.placements.len(), 1);
        let mut r = ReplaySource::new(&t);
        let mut out = vec![];
        r.advance_to(20);
        assert_eq!(r.drain(&mut out).unwrap().samples, 2);
        assert_eq!(out.iter().map(|s| s.time_ns).collect::<Vec<_>>(), vec![10, 20]);
        r.advance_to(100);
        r.drain(&mut out).unwrap();
        assert!(r.done() && out.len() == 3);
    }

    #[test]
    fn bad_traces_name_file_and_line() {
        let e =
            parse_trace(&b"{\"type\":\"end\",\"time_ns\":1,\"samples\":0,\"lost\":0}\n"[..], "t.jsonl").unwrap_err();
        assert!(e.contains("t.jsonl: line 1") && e.contains("header"), "{e}");
        let e = parse_trace(&b"garbage\n"[..], "t.jsonl").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(parse_trace(&b""[..], "t").unwrap_err().contains("empty"));
    }

    proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC{0,200}") {
            let _ = parse_trace(s.as_bytes(), "fuzz");
        }

        #[test]
        fn samples_round_trip(addrs in proptest::collection::vec(any::<u64>(), 0..20)) {
            let ss: Vec<Sample> = addrs.iter().enumerate().map(|(i, a)| sample(i as u64, *a)).collect();
            let t = parse_trace(&write_trace(&ss)[..], "p").unwrap();
            prop_assert_eq!(t.samples, ss);
        }
    }
}

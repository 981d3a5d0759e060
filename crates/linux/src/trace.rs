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
use ptb_topology::input::{self, cap};
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

/// Read a trace (a regular file of at most [`cap::TRACE`]); errors name the file and line.
pub fn read_trace(path: &Path) -> Result<Trace, String> {
    let f = input::open(path, "trace", cap::TRACE).map_err(|e| e.to_string())?;
    parse_trace(std::io::BufReader::new(f), &path.display().to_string())
}

/// Parse a trace from text (`origin` names it in errors). Lines are at most [`cap::LINE`]
/// bytes; the header's machine goes through the same validation as a machine file, and its
/// page size must be the machine's.
pub fn parse_trace(r: impl BufRead, origin: &str) -> Result<Trace, String> {
    let mut trace: Option<Trace> = None;
    input::for_each_line(
        r,
        cap::LINE,
        |n, line| {
            if line.trim().is_empty() {
                return Ok(());
            }
            let rec: TraceRecord = serde_json::from_str(line).map_err(|e| explain(line, &e, origin, n))?;
            match (rec, trace.as_mut()) {
                (TraceRecord::Header { version, pids, page_size, source, period, machine }, None) => {
                    if version != TRACE_VERSION {
                        return Err(format!(
                            "{origin}: trace version {version}, this ptb reads version {TRACE_VERSION}"
                        ));
                    }
                    let at = format!("{origin}: line {n}: header");
                    ptb_topology::validate::validate(&machine, &format!("{at}: machine")).map_err(|e| e.to_string())?;
                    if page_size != machine.page_size {
                        return Err(format!(
                            "{at}: field `page_size`: {page_size} differs from the machine's page_size {}",
                            machine.page_size
                        ));
                    }
                    if pids.is_empty() {
                        return Err(format!("{at}: field `pids`: no process recorded"));
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
                (TraceRecord::Header { .. }, Some(_)) => return Err(format!("{origin}: line {n}: second header")),
                (_, None) => return Err(format!("{origin}: line {n}: the first record must be the header")),
                (TraceRecord::Sample(s), Some(t)) => t.samples.push(s),
                (p @ TraceRecord::Placement { .. }, Some(t)) => t.placements.push(p),
                (TraceRecord::End { lost, .. }, Some(t)) => t.lost = lost,
            }
            Ok(())
        },
        |n, e| format!("{origin}: line {n}: {e}"),
    )?;
    trace.ok_or_else(|| format!("{origin}: empty trace (no header)"))
}

/// Why a line is not a trace record, naming the record type and the field: the tagged enum's
/// own error says neither (`invalid value: integer -1, expected u32`), so the line is read
/// again as its record type with the field path tracked.
fn explain(line: &str, e: &serde_json::Error, origin: &str, n: usize) -> String {
    let at = format!("{origin}: line {n}");
    let v: serde_json::Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(_) => return format!("{at}: not JSON: {e}"),
    };
    let Some(kind) = v.get("type").and_then(|t| t.as_str()).map(str::to_string) else {
        return format!("{at}: not a trace record: no `type` field (header, sample, placement or end)");
    };
    fn path<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Option<String> {
        serde_path_to_error::deserialize::<_, T>(v).err().map(|e| {
            let p = e.path().to_string();
            let msg = e.into_inner().to_string();
            if p == "." {
                msg
            } else {
                format!("field `{p}`: {msg}")
            }
        })
    }
    let detail = match kind.as_str() {
        "header" => path::<shape::Header>(v),
        "sample" => path::<Sample>(v),
        "placement" => path::<shape::Placement>(v),
        "end" => path::<shape::End>(v),
        other => Some(format!("unknown record type `{other}` (header, sample, placement or end)")),
    };
    format!("{at}: {kind} record: {}", detail.unwrap_or_else(|| e.to_string()))
}

/// The fields of each record type, for [`explain`] only (reading goes through [`TraceRecord`];
/// a test checks both accept the same records).
mod shape {
    use super::*;
    #[derive(Deserialize)]
    #[allow(dead_code)]
    pub struct Header {
        version: u32,
        pids: Vec<AppId>,
        page_size: u64,
        source: String,
        period: u64,
        machine: Box<Machine>,
    }
    #[derive(Deserialize)]
    #[allow(dead_code)]
    pub struct Placement {
        time_ns: u64,
        threads: Vec<TraceThread>,
        pages: Vec<(AppId, u64, u16)>,
        regions: Vec<TraceRegion>,
        free_bytes: Vec<u64>,
    }
    #[derive(Deserialize)]
    #[allow(dead_code)]
    pub struct End {
        time_ns: u64,
        samples: u64,
        lost: u64,
    }
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

    /// Header machines that are not consistent used to reach `ptb plan`/`ptb report` and
    /// panic there (index out of bounds, division by zero): they are refused like a machine file.
    #[test]
    fn an_inconsistent_header_machine_is_refused_with_its_field() {
        let good: Vec<String> =
            String::from_utf8(write_trace(&[sample(1, 0x1000)])).unwrap().lines().map(String::from).collect();
        let header: serde_json::Value = serde_json::from_str(&good[0]).unwrap();
        type Edit = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("groups[0].node", Box::new(|h| h["machine"]["groups"][0]["node"] = 7.into())),
            ("distances.rows", Box::new(|h| h["machine"]["distances"]["rows"].as_array_mut().unwrap().truncate(1))),
            ("nodes[1].idx", Box::new(|h| h["machine"]["nodes"][1]["idx"] = 4095.into())),
            ("controller_gbps", Box::new(|h| h["machine"]["controller_gbps"] = serde_json::json!([1.0]))),
            ("page_size", Box::new(|h| h["machine"]["page_size"] = 0.into())),
            ("page_size", Box::new(|h| h["page_size"] = 0.into())),
            ("pids", Box::new(|h| h["pids"] = serde_json::json!([]))),
        ];
        for (field, edit) in cases {
            let mut h = header.clone();
            edit(&mut h);
            let text = format!("{}\n{}\n", h, good[1..].join("\n"));
            let e = parse_trace(text.as_bytes(), "t.jsonl").unwrap_err();
            assert!(e.contains("t.jsonl: line 1") && e.contains(field), "{field}: {e}");
        }
    }

    /// `not a trace record: invalid value: integer -1, expected u32` said neither the record
    /// nor the field.
    #[test]
    fn a_bad_value_names_record_field_and_line() {
        let mut lines: Vec<String> =
            String::from_utf8(write_trace(&[sample(1, 0x1000)])).unwrap().lines().map(String::from).collect();
        lines[1] = lines[1].replace("\"tid\":8", "\"tid\":-1");
        let e = parse_trace(lines.join("\n").as_bytes(), "t.jsonl").unwrap_err();
        assert!(e.contains("line 2") && e.contains("sample record") && e.contains("field `tid`"), "{e}");
        lines[1] = r#"{"type":"placement","time_ns":1,"threads":[{"app":7,"tid":8,"cpu":"x","node":0}],"pages":[],"regions":[],"free_bytes":[]}"#.into();
        let e = parse_trace(lines.join("\n").as_bytes(), "t.jsonl").unwrap_err();
        assert!(e.contains("line 2") && e.contains("field `threads[0].cpu`"), "{e}");
        lines[1] = r#"{"type":"sampel"}"#.into();
        let e = parse_trace(lines.join("\n").as_bytes(), "t.jsonl").unwrap_err();
        assert!(e.contains("unknown record type `sampel`"), "{e}");
    }

    /// The record shapes [`explain`] uses accept every record the writer produces.
    #[test]
    fn explain_shapes_match_the_records() {
        for line in String::from_utf8(write_trace(&[sample(1, 0x1000)])).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let ok = match v["type"].as_str().unwrap() {
                "header" => serde_json::from_value::<shape::Header>(v).is_ok(),
                "sample" => serde_json::from_value::<Sample>(v).is_ok(),
                "placement" => serde_json::from_value::<shape::Placement>(v).is_ok(),
                "end" => serde_json::from_value::<shape::End>(v).is_ok(),
                t => panic!("{t}"),
            };
            assert!(ok, "{line}");
        }
    }

    #[test]
    fn devices_fifos_and_endless_lines_are_refused() {
        let e = read_trace(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("/dev/zero") && e.contains("device"), "{e}");
        let mut long = write_trace(&[]);
        long.extend(std::iter::repeat_n(b' ', (cap::LINE + 10) as usize));
        let e = parse_trace(&long[..], "t.jsonl").unwrap_err();
        assert!(e.contains("line 4") && e.contains("longer than"), "{e}");
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

//! `perf script` output of `perf mem record` as a recording: thread, CPU, time, data address
//! and data source of every sample.
//!
//! Problem: perf prints whatever fields were recorded or asked for (`-F`), padded for reading,
//! with the command name first (which may hold spaces) and decoded text after the numbers.
//! Approach: anchor on the fields perf always prints in the same order. The thread is the
//! `pid/tid` token, or the token before the `[cpu]` token (the default fields print the tid
//! alone); then an optional `secs.usecs:` time, an optional period and the event name (the
//! token ending in `:`); then the data address (hex) and, when the next token is hex followed
//! by `|...` text, the data source, whose `mem_op` bits say load or store. Anything else is
//! refused with the line, the field and what was found. Both layouts come from
//! `perf script -F pid,tid,cpu,time,addr,data_src` and from plain `perf script`.

use crate::recording::{RecSample, Recording, MAX_SAMPLES};
use crate::ModelError;
use ptb_profile::SampleKind;
use ptb_topology::Machine;
use std::collections::BTreeMap;
use std::io::{BufRead, Read};

/// Longest line accepted.
pub const MAX_LINE: usize = 64 << 10;

/// PERF_MEM_OP_LOAD / PERF_MEM_OP_STORE bits of `data_src` (include/uapi/linux/perf_event.h).
const MEM_OP_LOAD: u64 = 0x2;
const MEM_OP_STORE: u64 = 0x4;

/// One parsed sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfLine {
    pub pid: Option<u32>,
    pub tid: u32,
    pub cpu: Option<u32>,
    pub time_ns: Option<u64>,
    pub period: Option<u64>,
    pub addr: u64,
    pub data_src: Option<u64>,
}

fn hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

fn time_ns(tok: &str) -> Option<u64> {
    let t = tok.strip_suffix(':')?;
    let (s, frac) = t.split_once('.')?;
    if s.is_empty() || frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let ns: u64 = format!("{frac:0<9}").parse().ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Parse one sample line; the error names the field.
pub fn parse_line(line: &str) -> Result<PerfLine, (&'static str, String)> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    let cpu_at = toks.iter().position(|t| {
        t.len() > 2 && t.starts_with('[') && t.ends_with(']') && t[1..t.len() - 1].bytes().all(|b| b.is_ascii_digit())
    });
    let pt_at = toks.iter().position(|t| {
        t.split_once('/').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
    });
    let (pid, tid, mut i) = match (pt_at, cpu_at) {
        (Some(k), _) => {
            let (a, b) = toks[k].split_once('/').unwrap_or(("", ""));
            (a.parse().ok(), b.parse().map_err(|_| ("tid", format!("`{}` is not a thread id", toks[k])))?, k + 1)
        }
        (None, Some(c)) if c > 0 => {
            let t = toks[c - 1];
            (None, t.parse().map_err(|_| ("tid", format!("`{t}` before `{}` is not a thread id", toks[c])))?, c)
        }
        _ => return Err((
            "tid",
            "no `pid/tid` token and no `tid [cpu]` pair (make it with `perf script -F pid,tid,cpu,time,addr,data_src`)"
                .into(),
        )),
    };
    let mut cpu = None;
    if let Some(c) = cpu_at.filter(|c| *c == i) {
        cpu = toks[c][1..toks[c].len() - 1].parse().ok();
        i += 1;
    }
    let mut t_ns = None;
    if let Some(t) = toks.get(i).and_then(|t| time_ns(t)) {
        t_ns = Some(t);
        i += 1;
    }
    // An optional period and the event name (`cpu/mem-loads,ldlat=30/P:`), within a few tokens.
    let mut period = None;
    if let Some(k) = (i..toks.len().min(i + 3)).find(|&k| toks[k].ends_with(':') && toks[k].len() > 1) {
        if k > i {
            period = toks[k - 1].parse().ok();
        }
        i = k + 1;
    }
    let at = toks.get(i).ok_or(("addr", "the line ends before the data address".to_string()))?;
    let addr = hex(at).ok_or(("addr", format!("`{at}` is not a hex address")))?;
    let data_src = match (toks.get(i + 1), toks.get(i + 2)) {
        (Some(d), Some(txt)) if txt.starts_with('|') => {
            Some(hex(d).ok_or(("data_src", format!("`{d}` before `{txt}` is not a hex data source")))?)
        }
        _ => None,
    };
    Ok(PerfLine { pid, tid, cpu, time_ns: t_ns, period, addr, data_src })
}

/// Read `perf script` text into a recording. `machine` maps CPUs to nodes (this machine's
/// model when the caller has nothing better); `page_size` divides addresses into pages.
pub fn read(r: impl Read, origin: &str, machine: Option<Machine>, page_size: u64) -> Result<Recording, ModelError> {
    let mut reader = std::io::BufReader::new(r);
    let mut lines: Vec<(usize, PerfLine)> = Vec::new();
    let mut buf = Vec::new();
    let mut n = 0usize;
    loop {
        buf.clear();
        let got = reader
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| ModelError::Io(format!("{origin}: {e}")))?;
        if got == 0 {
            break;
        }
        n += 1;
        if buf.len() > MAX_LINE && !buf.ends_with(b"\n") {
            return Err(ModelError::input(origin, n, "(line)", format!("longer than {MAX_LINE} bytes")));
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let p = parse_line(line).map_err(|(f, why)| ModelError::input(origin, n, f, why))?;
        lines.push((n, p));
        if lines.len() >= MAX_SAMPLES {
            break;
        }
    }
    if lines.is_empty() {
        return Err(ModelError::Empty(format!(
            "{origin}: no samples (an empty file, or only comments). Make one with `perf mem record -- CMD` then \
             `perf script -F pid,tid,cpu,time,addr,data_src > FILE`"
        )));
    }
    let mut per_pid: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, l) in &lines {
        *per_pid.entry(l.pid.unwrap_or(0)).or_default() += 1;
    }
    let pid = per_pid.iter().max_by_key(|(p, c)| (**c, std::cmp::Reverse(**p))).map_or(0, |x| *x.0);
    let mut notes = Vec::new();
    if per_pid.len() > 1 {
        notes.push(format!("the input holds {} processes; modelled pid {pid} (the most samples)", per_pid.len()));
    }
    let timed = lines.iter().all(|(_, l)| l.time_ns.is_some());
    if !timed {
        notes.push("some lines have no time: samples are taken in file order, 1 us apart".into());
    }
    let t0 = lines.iter().filter_map(|(_, l)| l.time_ns).min().unwrap_or(0);
    let ps = page_size.max(1);
    let mut samples = Vec::new();
    let mut periods = Vec::new();
    for (k, (_, l)) in lines.iter().enumerate().filter(|(_, (_, l))| l.pid.unwrap_or(0) == pid) {
        let kind = match l.data_src {
            Some(d) if d & MEM_OP_STORE != 0 => SampleKind::Store,
            Some(d) if d & MEM_OP_LOAD != 0 => SampleKind::Load,
            _ => SampleKind::Access,
        };
        let time_ns = if timed { l.time_ns.unwrap_or(0) - t0 } else { k as u64 * 1000 };
        samples.push(RecSample { tid: l.tid, cpu: l.cpu.unwrap_or(0), vpn: l.addr / ps, time_ns, kind });
        periods.extend(l.period);
    }
    if lines.iter().any(|(_, l)| l.cpu.is_none()) {
        notes.push("some lines have no CPU: their thread's node is unknown (CPU 0 assumed)".into());
    }
    samples.sort_by_key(|s| s.time_ns);
    periods.sort_unstable();
    let period = periods.get(periods.len() / 2).copied().filter(|p| *p > 0);
    Ok(Recording {
        origin: origin.to_string(),
        source: "perf mem (perf script)".into(),
        period,
        page_size: ps,
        machine,
        pid,
        samples,
        regions: vec![],
        page_nodes: vec![],
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const F: &str = "  5240/5241  [001] 12345.678901:      7ffc8a2b3e70         68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A\n";
    const DEFAULT: &str = "  my prog  5241 [003] 12345.700000:      30000 cpu/mem-loads,ldlat=30/P:      7ffc8a2b4000         68100242 |OP STORE|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A        52   401136 main+0x26 (/tmp/a.out)\n";

    #[test]
    fn both_layouts_parse() {
        let a = parse_line(F).unwrap();
        assert_eq!((a.pid, a.tid, a.cpu), (Some(5240), 5241, Some(1)));
        assert_eq!(a.time_ns, Some(12_345_678_901_000));
        assert_eq!((a.addr, a.data_src), (0x7ffc8a2b3e70, Some(0x68100142)));
        let b = parse_line(DEFAULT).unwrap();
        assert_eq!((b.pid, b.tid, b.cpu, b.period), (None, 5241, Some(3), Some(30000)));
        assert_eq!(b.addr, 0x7ffc8a2b4000);
        let r = read(format!("{F}# comment\n\n{DEFAULT}").as_bytes(), "p.txt", None, 4096).unwrap();
        assert_eq!(r.samples.len(), 1, "one pid with the most samples: {:?}", r.notes);
    }

    #[test]
    fn loads_and_stores_come_from_the_data_source() {
        let text =
            "1/2 [000] 1.000000: 1000 |OP LOAD|\n1/3 [001] 1.000001: 2000 2 |OP ..|\n1/3 [001] 1.000002: 3000 4 |x|\n";
        let r = read(text.as_bytes(), "t", None, 4096).unwrap();
        let kinds: Vec<SampleKind> = r.samples.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, vec![SampleKind::Access, SampleKind::Load, SampleKind::Store]);
        assert_eq!(r.samples[2].vpn, 3);
        assert_eq!(r.samples[1].time_ns, 1000);
    }

    #[test]
    fn malformed_and_empty_inputs_name_the_line_and_field() {
        for (text, want) in [
            ("1/2 [000] 1.0: zzz 12 |OP|\n", "line 1: field `addr`"),
            ("1/2 [000] 1.000001: 1000 qq |OP|\n", "line 1: field `data_src`"),
            ("# x\nhello world\n", "line 2: field `tid`"),
            ("1/2 [000] 1.000001:\n", "field `addr`"),
        ] {
            let e = read(text.as_bytes(), "bad.txt", None, 4096).unwrap_err().to_string();
            assert!(e.contains("bad.txt") && e.contains(want), "{want}: {e}");
        }
        let e = read(&b"\n# only a comment\n"[..], "empty.txt", None, 4096).unwrap_err().to_string();
        assert!(e.contains("empty.txt") && e.contains("no samples"), "{e}");
        let long = format!("1/2 [000] 1.0: {}\n", "a".repeat(MAX_LINE + 10));
        let e = read(long.as_bytes(), "long.txt", None, 4096).unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn generated_lines_round_trip(pid in 1u32..1 << 22, tid in 1u32..1 << 22, cpu in 0u32..1024,
                                      secs in 0u64..1 << 30, us in 0u64..1_000_000, addr in any::<u64>(),
                                      ds in any::<u64>(), comm in "[a-z ]{0,12}") {
            let line = format!("{comm} {pid:7}/{tid:<7} [{cpu:03}] {secs:5}.{us:06}: {addr:16x} {ds:16x} |OP LOAD|LVL x|");
            let p = parse_line(&line).unwrap();
            prop_assert_eq!((p.pid, p.tid, p.cpu), (Some(pid), tid, Some(cpu)));
            prop_assert_eq!(p.time_ns, Some(secs * 1_000_000_000 + us * 1000));
            prop_assert_eq!((p.addr, p.data_src), (addr, Some(ds)));
        }

        #[test]
        fn mutated_lines_never_panic(cut in 0usize..120, junk in "[ -~]{0,10}") {
            let mut l = F.to_string();
            let at = cut.min(l.len());
            l.insert_str(at, &junk);
            let _ = parse_line(&l);
            let _ = read(l.as_bytes(), "m", None, 4096);
        }

        #[test]
        fn any_text_never_panics(text in "\\PC{0,300}") {
            let _ = read(text.as_bytes(), "fuzz", None, 0);
        }
    }
}

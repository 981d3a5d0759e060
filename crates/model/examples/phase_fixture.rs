//! Developer tool: a `ptb record` trace as the phase finder's test fixture, or as a timeline.
//!
//! Problem: the phase tests replay VM recordings, which are megabytes each.
//! Approach: fit the trace (for its thread order and first object), then print samples per
//! 10 ms, thread and quarter of the object (`cargo run --example phase_fixture -- TRACE`, the
//! format of tests/data/vm-*.txt), or with `--timeline MS` per MS ms the samples of each thread
//! and the share in its own quarter, and the phases found.

use ptb_model::{fit, FitOptions, Recording};
use std::collections::BTreeMap;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: phase_fixture TRACE [--timeline MS]")?;
    let timeline: Option<u64> = args.iter().position(|a| a == "--timeline").and_then(|i| args.get(i + 1)?.parse().ok());
    let f = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?);
    let t = ptb_linux::trace::parse_trace(f, path)?;
    let rec = Recording::from_trace(&t, path).map_err(|e| e.to_string())?;
    let ft = fit(&rec, &FitOptions::default()).map_err(|e| e.to_string())?;
    let o = ft.objects.first().ok_or("no object")?;
    let tids: Vec<u32> = ft.threads.iter().map(|t| t.tid).collect();
    let t0 = rec.samples.first().map_or(0, |s| s.time_ns);
    let bin = timeline.unwrap_or(10).max(1) * 1_000_000;
    let mut c: BTreeMap<(u64, usize, u64), u32> = BTreeMap::new();
    for s in &rec.samples {
        let Some(j) = tids.iter().position(|t| *t == s.tid) else { continue };
        if s.vpn >= o.start_vpn && s.vpn < o.start_vpn + o.npages {
            *c.entry(((s.time_ns - t0) / bin, j, (s.vpn - o.start_vpn) * 4 / o.npages)).or_default() += 1;
        }
    }
    let Some(_) = timeline else {
        for ((b, j, q), n) in c {
            println!("{} {j} {q} {n}", b * 10);
        }
        return Ok(());
    };
    let mut rows: BTreeMap<u64, Vec<(u32, u32)>> = BTreeMap::new();
    for ((b, j, q), n) in c {
        let r = &mut rows.entry(b).or_insert_with(|| vec![(0, 0); tids.len()])[j];
        r.0 += n;
        r.1 += if q == j as u64 { n } else { 0 };
    }
    for (b, r) in rows {
        let cells: Vec<String> =
            r.iter().map(|(n, own)| format!("{n:4}/{:.2}", f64::from(*own) / f64::from((*n).max(1)))).collect();
        println!("{:6} ms  {}", b * bin / 1_000_000, cells.join(" "));
    }
    let segs: Vec<String> = ft
        .phases
        .segments
        .iter()
        .map(|s| {
            format!(
                "{}-{} ms kind {} ({} samples)",
                (s.start_ns - t0) / 1_000_000,
                (s.end_ns - t0) / 1_000_000,
                s.kind,
                s.samples
            )
        })
        .collect();
    println!("{} phase kind(s): {}", ft.phases.kinds, segs.join(", "));
    Ok(())
}

//! The results of `ptb compare --real`: the document (the `ptb compare --json` schema, with
//! `"simulated": false` and `"measured": true`, one result per successful run, so `--report`
//! and `ptb report` draw the same pages) and the text for a terminal.
//!
//! Speed-up is the reference mode's mean wall time over the run's (the reference is `default`
//! when it ran, else the first mode with a successful run). Failed runs are listed apart and
//! never enter a mean.

use super::{Mode, RunOut};
use crate::report::model::{AccessMapRec, RunRecord};
use crate::report::stats::mean_sd;
use crate::report::{Document, Summary};
use anyhow::Result;
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table};
use ptb_topology::{Machine, NodeIdx};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// What the runs were.
pub struct Info<'a> {
    pub machine: &'a Machine,
    pub kernel: &'a str,
    pub vm: Option<&'a str>,
    pub cmd: &'a [String],
    pub modes: &'a [Mode],
    pub repeat: u32,
}

/// The program as a workload label.
fn program(cmd: &[String]) -> String {
    let mut s = cmd.join(" ");
    if s.chars().count() > 60 {
        s = s.chars().take(57).collect::<String>() + "...";
    }
    s
}

/// The reference mode (index) and its mean wall time.
fn reference(info: &Info, runs: &[RunOut]) -> Option<(usize, f64)> {
    let ok = |mi: usize| -> Vec<f64> {
        runs.iter().filter(|r| r.mode == mi && r.failure.is_none()).map(|r| r.wall_s).collect()
    };
    let first = info.modes.iter().position(|m| m.label == "default").filter(|&mi| !ok(mi).is_empty());
    let mi = first.or_else(|| (0..info.modes.len()).find(|&mi| !ok(mi).is_empty()))?;
    mean_sd(&ok(mi)).map(|(m, _)| (mi, m))
}

/// Shares of an observed count matrix, with kernel node ids.
fn map_of(m: &Machine, counts: &[Vec<u64>]) -> Option<AccessMapRec> {
    let total: u64 = counts.iter().flatten().sum();
    if total == 0 {
        return None;
    }
    let n = counts.len();
    let shares: Vec<Vec<f64>> = counts.iter().map(|r| r.iter().map(|c| *c as f64 / total as f64).collect()).collect();
    let local: f64 = (0..n).map(|i| shares[i][i]).sum();
    let mut extra = Map::new();
    extra.insert("samples".into(), json!(total));
    Some(AccessMapRec {
        nodes: m.nodes.iter().map(|x| x.id.0).collect(),
        controller_share: (0..n).map(|c| (0..n).map(|r| shares[r][c]).sum()).collect(),
        shares,
        local,
        remote: 1.0 - local,
        extra,
    })
}

fn pages_json(r: &RunOut, anon: bool) -> Value {
    match &r.seen.pages {
        Some(p) => {
            let m = if anon { &p.anon } else { &p.pages };
            Value::Object(m.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
        }
        None => Value::Null,
    }
}

/// The document of all runs.
pub fn document(info: &Info, runs: &[RunOut], notes: &[String]) -> Result<Document> {
    let refm = reference(info, runs);
    let prog = program(info.cmd);
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for r in runs {
        let label = &info.modes[r.mode].label;
        if let Some(why) = &r.failure {
            failed.push(json!({"mode": label, "repeat": r.rep, "order": r.order, "wall_s": r.wall_s,
                               "exit_status": r.exit, "reason": why}));
            continue;
        }
        let map = map_of(info.machine, &r.seen.counts);
        let stats = r.stats.clone().unwrap_or_default();
        let mut extra = Map::new();
        extra.insert("measured".into(), json!(true));
        extra.insert("order".into(), json!(r.order));
        extra.insert("exit_status".into(), json!(r.exit));
        extra.insert("pages_per_node_at_end".into(), pages_json(r, false));
        extra.insert("anon_pages_per_node_at_end".into(), pages_json(r, true));
        extra.insert("numa_maps_read_ms_before_exit".into(), json!(r.pages_age_ms));
        extra.insert("samples_in_map".into(), json!(r.seen.known()));
        extra.insert("samples_unknown_node".into(), json!(r.seen.unknown + r.seen.waiting));
        extra.insert("samples_node_from_earlier_cycle".into(), json!(r.seen.from_earlier));
        extra.insert("new_pages".into(), json!(r.note));
        extra.insert("ptb_stats".into(), serde_json::to_value(&stats)?);
        results.push(RunRecord {
            workload: prog.clone(),
            policy: label.clone(),
            seed: u64::from(r.rep),
            runtime_s: r.wall_s,
            speedup_vs_first_touch: refm.map(|(_, m)| m / r.wall_s.max(1e-9)),
            local_fraction: map.as_ref().map_or(0.0, |m| m.local),
            access_map: map,
            controller_utilisation: vec![],
            link_utilisation: vec![],
            pages_migrated: stats.pages_moved,
            threads_migrated: stats.threads_moved,
            migration_s: 0.0,
            decision_ms: r.seen.decide_ms,
            cycles: r.seen.cycles,
            pages_planned_per_cycle: vec![],
            pages_planned_at_s: vec![],
            extra,
        });
    }
    let ref_label = refm.map_or("-".to_string(), |(mi, _)| info.modes[mi].label.clone());
    let mut doc =
        Document { simulated: false, machine: info.machine.name.clone(), results, summary: None, extra: Map::new() };
    let mut summary = Summary::of(&doc);
    summary.notes = vec![
        format!("MEASURED on this machine: speed-up = mean wall time of `{ref_label}` / the run's wall time"),
        "cells: mean over the successful runs; ± is the standard deviation over them; failed runs are not in them"
            .into(),
    ];
    summary.notes.extend(notes.iter().cloned());
    doc.summary = Some(summary);
    let mut intro = vec![format!(
        "MEASURED: `{}` on this machine (`{}`, {} NUMA nodes), kernel {}: {} mode(s) x {} run(s), round-robin.",
        info.cmd.join(" "),
        info.machine.name,
        info.machine.n_nodes(),
        info.kernel,
        info.modes.len(),
        info.repeat
    )];
    intro.extend(notes.iter().cloned());
    let e = &mut doc.extra;
    e.insert("measured".into(), json!(true));
    e.insert("kind".into(), json!("compare-real"));
    e.insert("command".into(), json!(info.cmd));
    e.insert("kernel".into(), json!(info.kernel));
    e.insert("virtual_machine".into(), json!(info.vm));
    e.insert("machine_model".into(), serde_json::to_value(info.machine)?);
    e.insert("reference".into(), json!(ref_label));
    e.insert(
        "modes".into(),
        json!(info
            .modes
            .iter()
            .map(|m| json!({"mode": m.label, "policy": m.policy, "kernel_numa_balancing": m.balancing}))
            .collect::<Vec<_>>()),
    );
    e.insert("repeat".into(), json!(info.repeat));
    e.insert("failed_runs".into(), json!(failed));
    e.insert("notes".into(), json!(notes));
    e.insert("intro".into(), json!(intro));
    Ok(doc)
}

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

/// The terminal text.
pub fn text(info: &Info, runs: &[RunOut], notes: &[String]) -> String {
    let m = info.machine;
    let kid = |n: usize| m.node(NodeIdx::from_ix(n)).id.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "MEASURED: `{}` on this machine (`{}`, {} NUMA nodes), kernel {}; {} run(s) per mode, round-robin.",
        info.cmd.join(" "),
        m.name,
        m.n_nodes(),
        info.kernel,
        info.repeat
    );
    for n in notes {
        let _ = writeln!(o, "note: {n}");
    }
    let refm = reference(info, runs);
    let mem: Vec<usize> = (0..m.n_nodes()).filter(|&n| m.nodes[n].has_memory()).collect();
    let mem_ids: Vec<String> = mem.iter().map(|&n| kid(n).to_string()).collect();
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "mode".to_string(),
        "runs ok".into(),
        "wall s (mean ±sd)".into(),
        format!("speed-up vs {}", refm.map_or("-".into(), |(mi, _)| info.modes[mi].label.clone())),
        "local %".into(),
        format!("memory served % (node {})", mem_ids.join("/")),
        format!("anon pages at end (node {})", mem_ids.join("/")),
        "pages moved".into(),
        "threads moved".into(),
        "samples".into(),
    ]);
    let mut maps = Vec::new();
    for (mi, md) in info.modes.iter().enumerate() {
        let ok: Vec<&RunOut> = runs.iter().filter(|r| r.mode == mi && r.failure.is_none()).collect();
        let all = runs.iter().filter(|r| r.mode == mi).count();
        let walls: Vec<f64> = ok.iter().map(|r| r.wall_s).collect();
        let wall = mean_sd(&walls).map_or("-".into(), |(a, s)| format!("{a:.3} ±{s:.3}"));
        let speed = match (refm, mean_sd(&walls)) {
            (Some((_, rm)), Some((a, _))) if a > 0.0 => format!("{:.2}x", rm / a),
            _ => "-".into(),
        };
        let mut counts = vec![vec![0u64; m.n_nodes()]; m.n_nodes()];
        for r in &ok {
            for (i, row) in r.seen.counts.iter().enumerate() {
                for (j, c) in row.iter().enumerate() {
                    counts[i][j] += c;
                }
            }
        }
        let map = map_of(m, &counts);
        let (local, served) = match &map {
            Some(mp) => (
                pct(mp.local),
                mem.iter().map(|&n| format!("{:.0}", 100.0 * mp.controller_share[n])).collect::<Vec<_>>().join("/"),
            ),
            None => ("-".into(), "-".into()),
        };
        // Pages at the end: mean over the successful runs, per memory node.
        let pages = if ok.iter().all(|r| r.seen.pages.is_some()) && !ok.is_empty() {
            mem.iter()
                .map(|&n| {
                    let s: u64 = ok
                        .iter()
                        .map(|r| r.seen.pages.as_ref().and_then(|p| p.anon.get(&kid(n)).copied()).unwrap_or(0))
                        .sum();
                    (s / ok.len() as u64).to_string()
                })
                .collect::<Vec<_>>()
                .join("/")
        } else {
            "-".into()
        };
        let sum = |f: &dyn Fn(&ptb_linux::metrics::Stats) -> u64| -> u64 {
            ok.iter().filter_map(|r| r.stats.as_ref()).map(f).sum::<u64>() / ok.len().max(1) as u64
        };
        t.add_row(vec![
            md.label.clone(),
            format!("{}/{all}", ok.len()),
            wall,
            speed,
            local,
            served,
            pages,
            sum(&|s| s.pages_moved).to_string(),
            sum(&|s| s.threads_moved).to_string(),
            counts.iter().flatten().sum::<u64>().to_string(),
        ]);
        maps.push((md.label.clone(), map));
    }
    for c in t.column_iter_mut().skip(1) {
        c.set_cell_alignment(CellAlignment::Right);
    }
    let _ = writeln!(o, "{t}");
    let _ = writeln!(
        o,
        "pages moved, threads moved: ptb's statistics, mean per run; anon pages at end: pages of the program's mappings without a file (heap, stacks, anonymous mmap) per node, from numa_maps at ptb's last cycle before the exit, mean per run (the JSON also has every mapping's)"
    );
    let ids: Vec<String> = (0..m.n_nodes()).map(|n| format!("{:>7}", format!("node{}", kid(n)))).collect();
    for (label, map) in maps {
        match map {
            None => {
                let _ = writeln!(o, "\naccess map under {label}: no samples with a known page node");
            }
            Some(mp) => {
                let _ = writeln!(
                    o,
                    "\naccess map under {label} (MEASURED, {} samples; rows: node of the CPU, columns: node of the memory, % of accesses):",
                    mp.extra.get("samples").and_then(Value::as_u64).unwrap_or(0)
                );
                let _ = writeln!(o, "          {}", ids.join(""));
                for (i, row) in mp.shares.iter().enumerate() {
                    let cells: String = row.iter().map(|v| format!("{:>7}", pct(*v))).collect();
                    let _ = writeln!(o, "  {:<8}{cells}", format!("node{}", kid(i)));
                }
                let served: String = mp.controller_share.iter().map(|v| format!("{:>7}", pct(*v))).collect();
                let _ = writeln!(o, "  {:<8}{served}", "served");
                let _ = writeln!(o, "  local {}%, remote {}%", pct(mp.local), pct(mp.remote));
            }
        }
    }
    let failed: Vec<&RunOut> = runs.iter().filter(|r| r.failure.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(o, "\nfailed runs (not in any mean):");
        for r in failed {
            let _ = writeln!(
                o,
                "  run {} ({}, {} of {}): {} after {:.3} s",
                r.order,
                info.modes[r.mode].label,
                r.rep,
                info.repeat,
                r.failure.as_deref().unwrap_or("?"),
                r.wall_s
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::compare_real::observer::Observed;

    fn run(mode: usize, rep: u32, order: usize, wall: f64, fail: bool) -> RunOut {
        let mut seen = Observed::new(2);
        seen.counts = vec![vec![30, 10], vec![0, 60]];
        let mut pages = ptb_linux::numa_pages::NodePages::default();
        pages.pages.insert(0, 100 * (mode as u64 + 1));
        pages.pages.insert(1, 50);
        pages.anon = pages.pages.clone();
        // A file mapping (the program's binary) on node 1.
        pages.pages.insert(1, 50 + 360);
        seen.pages = Some(pages);
        RunOut {
            mode,
            rep,
            order,
            wall_s: wall,
            exit: Some(if fail { 1 } else { 0 }),
            failure: fail.then(|| "the program exited with status 1".to_string()),
            stats: Some(ptb_linux::metrics::Stats { pages_moved: 7, ..Default::default() }),
            seen,
            pages_age_ms: Some(40.0),
            note: "first touch".into(),
        }
    }

    #[test]
    fn failed_runs_stay_out_of_the_means_and_pages_say_measured() {
        let m = ptb_topology::synthetic::synthetic("nodes=2,cpus=1").unwrap();
        let modes = vec![super::super::mode("default").unwrap(), super::super::mode("interleave").unwrap()];
        let cmd = vec!["./app".to_string(), "--n".into(), "4".into()];
        let info = Info {
            machine: &m,
            kernel: "6.1.0-test",
            vm: Some("the CPU flags include `hypervisor`"),
            cmd: &cmd,
            modes: &modes,
            repeat: 2,
        };
        let runs =
            vec![run(0, 1, 1, 2.0, false), run(1, 1, 2, 1.0, false), run(0, 2, 3, 4.0, false), run(1, 2, 4, 9.0, true)];
        let notes = vec!["this is a virtual machine: its NUMA nodes are emulated".to_string()];
        let doc = document(&info, &runs, &notes).unwrap();
        assert!(!doc.simulated);
        assert_eq!(doc.results.len(), 3);
        assert_eq!(doc.extra["failed_runs"].as_array().unwrap().len(), 1);
        assert_eq!(doc.extra["reference"], "default");
        // default's mean is 3 s: interleave's one good run (1 s) is 3x.
        let il = doc.results.iter().find(|r| r.policy == "interleave").unwrap();
        assert!((il.speedup_vs_first_touch.unwrap() - 3.0).abs() < 1e-9);
        assert!((il.access_map.as_ref().unwrap().local - 0.9).abs() < 1e-9);
        assert_eq!(il.extra["pages_per_node_at_end"]["0"], 200);
        let s = doc.summary.as_ref().unwrap();
        assert!(s.notes[0].starts_with("MEASURED"));
        let t = text(&info, &runs, &notes);
        assert!(t.contains("MEASURED") && t.contains("failed runs") && t.contains("emulated"), "{t}");
        assert!(t.contains("1/2") && t.contains("3.00x"), "{t}");
        // The table shows the anonymous pages (mean per run): 100/50 under default, 200/50 under interleave.
        assert!(t.contains("100/50") && t.contains("200/50") && !t.contains("/410"), "{t}");
        let dir = std::env::temp_dir().join(format!("ptb-real-report-{}", std::process::id()));
        let page = crate::report::render(&doc, &dir).unwrap();
        let html = std::fs::read_to_string(page).unwrap();
        assert!(html.contains("MEASURED") && html.contains("Speed-up vs default (measured)"), "{html}");
        assert!(!html.contains("(simulated)"), "{html}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

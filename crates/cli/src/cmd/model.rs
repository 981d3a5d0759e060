//! `ptb model`: a recorded trace of a program (`ptb record`, or `perf script` output of
//! `perf mem record`) becomes a workload model that `ptb simulate` and `ptb compare
//! --workload` accept, with a fit score per object; `--check` simulates the model on the
//! recorded machine under the recorded placement and compares its access map with the
//! recorded one.

use anyhow::{bail, Context, Result};
use ptb_linux::procfs::ProcRoot;
use ptb_model::{check, fit, FitOptions, Recording};
use serde_json::json;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// Largest input file read (a trace of this size holds some 50 M samples).
const MAX_INPUT_BYTES: u64 = 8 << 30;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The recording: a `ptb record` trace, or `perf script` output of `perf mem record`
    /// (e.g. `perf script -F pid,tid,cpu,time,addr,data_src`).
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Write the workload model (TOML) to this file (default: print it).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Input format: `auto` (a ptb trace when its first line is a trace header, else perf
    /// script text), `ptb`, or `perf-script`.
    #[arg(long, default_value = "auto")]
    pub format: String,
    /// Name of the workload (default: the trace's file name).
    #[arg(long)]
    pub name: Option<String>,
    /// Machine of a perf script recording (which node each CPU is on): a preset, a machine
    /// file, or this machine when absent. A ptb trace carries its own.
    #[arg(short = 'm', long, value_name = "MACHINE")]
    pub machine: Option<String>,
    /// apki (memory accesses per 1000 instructions) assumed when the samples cannot measure
    /// memory intensity (page-fault samples).
    #[arg(long, default_value_t = ptb_model::fit::DEFAULT_APKI, value_name = "APKI")]
    pub apki: f64,
    /// Simulate the model on the recorded machine with every thread and page where the
    /// recording saw it, and compare its access map with the recorded one (L1 distance).
    #[arg(long)]
    pub check: bool,
    /// With --check: exit with status 1 when the L1 distance is above this.
    #[arg(long, value_name = "L1", requires = "check")]
    pub max_l1: Option<f64>,
    /// Print a JSON summary (threads, objects with their fit, phases, the check) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Whether the first non-empty line looks like a ptb trace header.
fn looks_like_ptb_trace(path: &Path) -> Result<bool> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut r = std::io::BufReader::new(f.take(1 << 20));
    let mut line = String::new();
    while r.read_line(&mut line).unwrap_or(0) > 0 {
        let l = line.trim();
        if !l.is_empty() {
            return Ok(l.starts_with('{') && l.contains("\"header\""));
        }
        line.clear();
    }
    Ok(false)
}

fn load(a: &Args) -> Result<Recording> {
    let path = &a.trace;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    if meta.len() > MAX_INPUT_BYTES {
        bail!("{}: {} bytes, more than the {} GiB ptb model reads", path.display(), meta.len(), MAX_INPUT_BYTES >> 30);
    }
    let origin = path.display().to_string();
    let ptb = match a.format.as_str() {
        "ptb" => true,
        "perf-script" => false,
        "auto" => looks_like_ptb_trace(path)?,
        f => bail!("--format `{f}`: expected auto, ptb or perf-script"),
    };
    if ptb {
        let t = ptb_linux::trace::read_trace(path).map_err(anyhow::Error::msg)?;
        return Recording::from_trace(&t, &origin).map_err(anyhow::Error::from);
    }
    let machine = match &a.machine {
        Some(m) => ptb_topology::resolve(m).with_context(|| format!("loading machine `{m}`"))?,
        None => ptb_linux::live::machine(&ProcRoot::live()).map_err(anyhow::Error::msg)?,
    };
    let ps = machine.page_size;
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(ptb_model::perf_script::read(f, &origin, Some(machine), ps)?)
}

fn name_of(a: &Args) -> String {
    a.name.clone().unwrap_or_else(|| {
        let stem = a.trace.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        let clean: String = stem.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        if clean.is_empty() {
            "recorded".into()
        } else {
            clean
        }
    })
}

/// The check's two maps and their distance, as text.
fn maps_text(c: &ptb_model::CheckResult) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let head: String = c.nodes.iter().map(|n| format!("{:>7}", format!("node{n}"))).collect();
    let _ = writeln!(
        o,
        "\naccess map, % of the modelled samples (rows: node of the CPU, columns: node of the memory):\n  recorded (MEASURED, {} samples{}{}):",
        c.samples,
        if c.nearby > 0 {
            format!(", {} of them with the node of a page within {} pages", c.nearby, ptb_model::check::NEARBY)
        } else {
            String::new()
        },
        if c.unknown > 0 {
            format!("; {} more with no known page node, counted in their row's weight", c.unknown)
        } else {
            String::new()
        }
    );
    let show = |o: &mut String, m: &[Vec<f64>]| {
        let _ = writeln!(o, "          {head}");
        for (i, row) in m.iter().enumerate() {
            let cells: String = row.iter().map(|v| format!("{:>7.1}", 100.0 * v)).collect();
            let _ = writeln!(o, "  {:<8}{cells}", format!("node{}", c.nodes[i]));
        }
    };
    show(&mut o, &c.recorded);
    let _ =
        writeln!(o, "  the model, SIMULATED under the recorded placement ({:.3} s simulated):", c.simulated_runtime_s);
    show(&mut o, &c.simulated);
    let _ = writeln!(o, "L1 distance between the two: {:.3} (0 = identical, 2 = nothing in common)", c.l1);
    o
}

pub fn run(a: Args) -> Result<()> {
    if !(a.apki.is_finite() && a.apki > 0.0 && a.apki <= 1000.0) {
        bail!("--apki {}: must be in (0, 1000]", a.apki);
    }
    if let Some(x) = a.max_l1.filter(|x| !(x.is_finite() && (0.0..=2.0).contains(x))) {
        bail!("--max-l1 {x}: must be in [0, 2] (the L1 distance of two access maps is at most 2)");
    }
    let rec = load(&a)?;
    let f = fit(&rec, &FitOptions { name: name_of(&a), default_apki: a.apki })?;
    let checked = if a.check { Some(check(&rec, &f)?) } else { None };
    match &a.out {
        Some(p) => {
            std::fs::write(p, &f.toml).with_context(|| format!("writing {}", p.display()))?;
            if !a.json {
                println!("workload model written to {} (use it: ptb simulate --workload {0})", p.display());
            }
        }
        None if !a.json => print!("{}", f.toml),
        None => {}
    }
    if a.json {
        let objects: Vec<_> = f
            .object_fits
            .iter()
            .zip(&f.objects)
            .map(|(o, s)| {
                json!({"name": o.name, "pages": s.npages, "mapping_pages": s.mapping_pages, "samples": o.samples,
                       "fit": o.score, "init": o.init, "init_note": o.init_note, "spreads_per_phase": o.spreads})
            })
            .collect();
        let threads: Vec<_> = f
            .threads
            .iter()
            .map(|t| {
                let node = t.node.and_then(|n| rec.machine.as_ref().map(|m| m.nodes[n].id.0));
                json!({"tid": t.tid, "cpu": t.cpu, "node": node, "samples": t.samples})
            })
            .collect();
        let mut v = json!({
            "schema": "ptb.model/1",
            "input": rec.origin, "source": rec.source, "pid": rec.pid,
            "samples": rec.samples.len(), "samples_used": f.samples_used,
            "threads": threads, "objects": objects,
            "phase_kinds": f.phases.kinds,
            "phase_sequence": f.sequence.iter().map(|k| format!("phase{}", k + 1)).collect::<Vec<_>>(),
            "iterations": f.workload.iterations,
            "notes": f.notes,
            "workload": f.workload,
            "out": a.out,
        });
        if let Some(c) = &checked {
            v["check"] = json!({"nodes": c.nodes, "recorded": c.recorded, "simulated": c.simulated, "l1": c.l1,
                                "samples": c.samples, "samples_unknown_node": c.unknown, "samples_node_from_nearby_page": c.nearby,
                                "simulated_runtime_s": c.simulated_runtime_s, "max_l1": a.max_l1});
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if a.out.is_some() {
        println!(
            "{}, {}, {} phase kind(s) x {} iteration(s), from {} of {} samples ({})",
            crate::common::plural(f.threads.len(), "thread", "threads"),
            crate::common::plural(f.objects.len(), "object", "objects"),
            f.phases.kinds,
            f.workload.iterations,
            f.samples_used,
            rec.samples.len(),
            rec.source
        );
        for o in &f.object_fits {
            println!("  {}: {} samples, fit {:.2}, first touch {}", o.name, o.samples, o.score, o.init);
        }
    }
    if let Some(c) = &checked {
        if !a.json {
            // With the model on stdout, the check goes to stderr so that stdout stays a TOML file.
            if a.out.is_some() {
                print!("{}", maps_text(c));
            } else {
                eprint!("{}", maps_text(c));
            }
        }
        if let Some(max) = a.max_l1 {
            if c.l1 > max {
                bail!(
                    "the model's access map is {:.3} away from the recorded one (L1), more than --max-l1 {max}",
                    c.l1
                );
            }
        }
    }
    Ok(())
}

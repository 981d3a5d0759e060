//! `ptb workloads`: list the built-in workload models (or print one as TOML to start your own).

use anyhow::{Context, Result};
use comfy_table::Table;
use ptb_sim::Workload;
use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    /// Print one workload's TOML (a built-in name or a file), e.g. as a template.
    #[arg(long, value_name = "NAME")]
    show: Option<String>,
}

#[derive(Serialize)]
struct Row {
    name: String,
    description: String,
    source: String,
    threads: String,
    memory_mib: f64,
    phases: Vec<String>,
    iterations: u32,
    /// Accesses per kilo-instruction, weighted by each phase's work.
    mean_apki: f64,
}

fn row(w: &Workload) -> Row {
    let work: f64 = w.phases.iter().map(|p| p.work_ginstr).sum();
    let apki = if work > 0.0 { w.phases.iter().map(|p| p.apki * p.work_ginstr).sum::<f64>() / work } else { 0.0 };
    Row {
        name: w.name.clone(),
        description: w.description.clone(),
        source: w.source.clone(),
        threads: match &w.threads {
            ptb_sim::workload::Threads::Count(n) => n.to_string(),
            ptb_sim::workload::Threads::Named(s) => s.clone(),
        },
        memory_mib: w.objects.iter().map(|o| o.size_mib).sum(),
        phases: w.phases.iter().map(|p| p.name.clone()).collect(),
        iterations: w.iterations,
        mean_apki: apki,
    }
}

pub fn run(args: Args) -> Result<()> {
    if let Some(name) = &args.show {
        let w = ptb_sim::resolve_workload(name).with_context(|| format!("loading workload `{name}`"))?;
        match ptb_sim::suite::FILES.iter().find(|f| f.0 == name.as_str()) {
            Some((_, text)) => print!("{text}"),
            None => print!("{}", w.to_toml()),
        }
        return Ok(());
    }
    let rows: Vec<Row> = ptb_sim::suite::all().context("built-in workloads")?.iter().map(row).collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut t = Table::new();
    t.set_header(vec!["workload", "threads", "memory MiB", "phases", "apki", "description"]);
    for r in &rows {
        t.add_row(vec![
            r.name.clone(),
            r.threads.clone(),
            format!("{:.0}", r.memory_mib),
            if r.iterations > 1 { format!("{} x{}", r.phases.join(","), r.iterations) } else { r.phases.join(",") },
            format!("{:.1}", r.mean_apki),
            r.description.clone(),
        ]);
    }
    println!("{t}");
    println!("Workload models for the simulator (`ptb simulate --workload NAME`); `--show NAME` prints one as TOML.");
    Ok(())
}

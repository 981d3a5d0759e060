//! `ptb report RUN.json`: render the table, summary and plots of a saved `ptb simulate --json`
//! or `ptb compare --json` document into a directory (HTML page, Markdown page, PNG and SVG).
//! A `ptb record` trace gets a summary: sample counts and the measured access map.

use crate::report::{self, Document, Summary};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A JSON file written by `ptb simulate --json` or `ptb compare --json`, or a `ptb record`
    /// trace.
    #[arg(value_name = "RUN.json")]
    input: PathBuf,
    /// Directory for the report (created if missing; refused when not empty, see --force);
    /// default: `<RUN>-report` next to the input.
    #[arg(short, long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write into a report directory that is not empty (files of the same name are replaced,
    /// others stay).
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> Result<()> {
    if args.input.exists() && !args.input.is_file() {
        anyhow::bail!(
            "{}: not a regular file (a device, FIFO or directory); give a `ptb simulate --json`, `ptb compare --json` or `ptb record` file",
            args.input.display()
        );
    }
    if !args.input.is_file() {
        anyhow::bail!(
            "{}: no such file (give a `ptb simulate --json`, `ptb compare --json` or `ptb record` file)",
            args.input.display()
        );
    }
    let trace = report::trace::is_trace(&args.input);
    let doc = if trace { report::trace::load(&args.input)? } else { Document::load(&args.input)? };
    let out = args.out.unwrap_or_else(|| {
        let stem = args.input.file_stem().map_or("run".into(), |s| s.to_string_lossy().to_string());
        args.input.with_file_name(format!("{stem}-report"))
    });
    report::check_out_dir(&out, args.force)?;
    if trace {
        println!("MEASURED trace {} on machine {}:", args.input.display(), doc.machine);
        for r in &doc.results {
            println!(
                "  {}: {:.3} s, local share of sampled accesses {:.1}%",
                r.workload,
                r.runtime_s,
                100.0 * r.local_fraction
            );
            for (k, v) in &r.extra {
                println!("  {k}: {v}");
            }
        }
    } else {
        let summary = doc.summary.clone().unwrap_or_else(|| Summary::of(&doc));
        println!("SIMULATED results on machine {}; speed-up vs first-touch:", doc.machine);
        println!("{}", report::table::terminal(&summary));
    }
    let page = report::render(&doc, &out)?;
    println!("report written: {}", page.display());
    Ok(())
}

//! `ptb machines`: the built-in machine presets, one line each.

use super::topology::write_stdout;
use anyhow::Result;
use std::fmt::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON (`[{"name", "description", "nodes", "cpus"}]`) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let presets = ptb_topology::presets::list();
    if args.json {
        let mut v = Vec::new();
        for (name, description) in &presets {
            let m = ptb_topology::presets::get(name)?;
            v.push(serde_json::json!({
                "name": name,
                "description": description,
                "nodes": m.n_nodes(),
                "cpus": m.n_cpus(),
            }));
        }
        return write_stdout(&(serde_json::to_string_pretty(&v)? + "\n"));
    }
    let width = presets.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, description) in &presets {
        writeln!(out, "{name:<width$}  {description}")?;
    }
    if presets.is_empty() {
        writeln!(out, "(no built-in presets in this build)")?;
    }
    writeln!(out, "\nShow one with `ptb topology --machine NAME`; also accepted: a machine file (TOML/JSON),")?;
    writeln!(
        out,
        "a captured sysfs directory, or `synthetic:nodes=4,cpus=8,dies=2` (README: \"Machines and topology\")."
    )?;
    write_stdout(&out)
}

//! `ptb machines`: the built-in machine presets, one line each.

use anyhow::Result;

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
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let width = presets.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, description) in &presets {
        println!("{name:<width$}  {description}");
    }
    if presets.is_empty() {
        println!("(no built-in presets in this build)");
    }
    println!("\nShow one with `ptb topology --machine NAME`; also accepted: a machine file (TOML/JSON) or");
    println!("`synthetic:nodes=4,cpus=8,dies=2` (see the README, \"Machines and topology\").");
    Ok(())
}

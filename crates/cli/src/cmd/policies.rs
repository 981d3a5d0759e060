//! `ptb policies`: the placement policies and their parameters.

use anyhow::Result;
use ptb_policy::PolicyKind;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    if args.json {
        let v: Vec<_> = PolicyKind::ALL
            .iter()
            .map(|k| {
                serde_json::json!({
                    "name": k.name(),
                    "description": k.describe(),
                    "params": k.params().iter().map(|p| serde_json::json!({"key": p.key, "default": p.default, "doc": p.doc})).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for k in PolicyKind::ALL {
        println!("{:<20} {}", k.name(), k.describe());
        for p in k.params() {
            println!("    {}.{} (default {}): {}", k.name(), p.key, p.default, p.doc);
        }
    }
    println!("\nAny policy can be followed by `+selective` to filter its page moves through selective migration.");
    println!("Set parameters with `--set POLICY.KEY=VALUE` or `--config FILE` ([POLICY] tables).");
    Ok(())
}

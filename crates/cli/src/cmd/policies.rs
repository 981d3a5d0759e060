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
    print!("{}", list_text());
    Ok(())
}

/// Every policy with its parameters, as `ptb policies` prints it.
fn list_text() -> String {
    let mut out = String::new();
    for k in PolicyKind::ALL {
        out.push_str(&format!("{:<20} {}\n", k.name(), k.describe()));
        for p in k.params() {
            out.push_str(&format!("    {}.{} (default {}): {}\n", k.name(), p.key, p.default, p.doc));
        }
    }
    out.push_str(
        "\nAny policy can be followed by `+selective` to filter its page moves through selective migration.\n",
    );
    out.push_str("Set parameters with `--set POLICY.KEY=VALUE` or `--config FILE` ([POLICY] tables).\n");
    out
}

/// The policy list for `--help` of the commands that take `--policy`.
pub fn help_text() -> String {
    format!("Policies and their parameters (also `ptb policies`):\n\n{}", list_text())
}

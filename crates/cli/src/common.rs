//! Options and helpers shared by several subcommands.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use ptb_policy::{Params, PolicySpec};
use ptb_topology::Machine;
use std::path::PathBuf;

/// Set up `tracing` on stderr.
pub fn init_logging(filter: &str, json: bool) {
    use tracing_subscriber::EnvFilter;
    let f = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(filter));
    let b = tracing_subscriber::fmt().with_env_filter(f).with_writer(std::io::stderr);
    let _ = if json { b.json().try_init() } else { b.try_init() };
}

/// Load a machine from `--machine` (preset name, `synthetic:SPEC`, or file), or this machine
/// from `/sys` when absent.
#[allow(dead_code)]
pub fn load_machine(arg: Option<&str>) -> Result<Machine> {
    match arg {
        Some(a) => ptb_topology::resolve(a).with_context(|| format!("loading machine `{a}`")),
        None => ptb_topology::sysfs::read_machine(std::path::Path::new("/"))
            .context("reading this machine's topology from /sys (use --machine NAME to pick a preset)"),
    }
}

/// Policy parameters: `--set policy.key=value` (repeatable) and `--config FILE`.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct ParamArgs {
    /// Set a policy parameter, e.g. `--set ptb-classic.c2=1.5` (see `ptb policies`).
    #[arg(long = "set", value_name = "POLICY.KEY=VALUE")]
    pub set: Vec<String>,
    /// TOML file of policy parameters: `[ptb-classic]` tables of `key = value`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ParamArgs {
    #[allow(dead_code)]
    pub fn params(&self) -> Result<Params> {
        let mut p = Params::new();
        if let Some(path) = &self.config {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))?;
            p.add_toml(&text, &path.display().to_string())?;
        }
        for s in &self.set {
            p.set_assignment(s)?;
        }
        Ok(p)
    }
}

/// Parse a comma-separated policy list such as `first-touch,ptb-classic+selective`.
#[allow(dead_code)]
pub fn parse_policies(text: &str) -> Result<Vec<PolicySpec>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.parse::<PolicySpec>().map_err(anyhow::Error::from))
        .collect()
}

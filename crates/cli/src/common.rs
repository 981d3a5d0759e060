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
            let text = ptb_topology::input::read_text(path, "config", ptb_topology::input::cap::CONFIG)?;
            p.add_toml(&text, &path.display().to_string())?;
        }
        for s in &self.set {
            p.set_assignment(s)?;
        }
        ptb_policy::check_params(&p)?;
        Ok(p)
    }
}

/// A `--seconds` value: a finite number of seconds above 0 and at most ten years (`nan`,
/// `inf`, `1e300` and `-1` used to panic, or record forever).
pub fn seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > MAX_SECONDS {
        return Err(format!("{text}: give a number of seconds above 0 and at most {MAX_SECONDS} (ten years)"));
    }
    Ok(v)
}

/// Ten years, in seconds.
pub const MAX_SECONDS: f64 = 315_360_000.0;

/// A finite number above 0 (e.g. `--budget-mbps`; `nan` used to be taken).
pub fn positive_f64(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
    if !v.is_finite() || v <= 0.0 || v > 1e12 {
        return Err(format!("{text}: give a finite number above 0"));
    }
    Ok(v)
}

/// Parse a comma-separated policy list such as `first-touch,ptb-classic+selective`.
#[allow(dead_code)]
pub fn parse_policies(text: &str) -> Result<Vec<PolicySpec>> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.parse::<PolicySpec>().map_err(anyhow::Error::from))
        .collect()
}

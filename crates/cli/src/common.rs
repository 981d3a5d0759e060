//! Options and helpers shared by several subcommands.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use ptb_policy::{Params, PolicySpec};
use ptb_topology::Machine;
use std::path::PathBuf;

/// Set up `tracing` on stderr: `RUST_LOG` when set, else `--log`; colour only when stderr is a
/// terminal (and `NO_COLOR` is unset), so a pipe or a log file gets plain text.
pub fn init_logging(filter: &str, json: bool) -> Result<()> {
    use std::io::IsTerminal;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    let (text, origin) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => (v, "RUST_LOG"),
        _ => (filter.to_string(), "--log"),
    };
    let targets: Targets = text.parse().map_err(|e| {
        anyhow::anyhow!("{origin} `{text}`: {e} (expected a level such as `info`, or `target=level,...`)")
    })?;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
    let _ = if json {
        tracing_subscriber::registry().with(fmt.json().with_filter(targets)).try_init()
    } else {
        tracing_subscriber::registry().with(fmt.with_filter(targets)).try_init()
    };
    Ok(())
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

/// The machine `simulate`, `compare` and `bench sim` use when `--machine` is not given.
pub const DEFAULT_MACHINE: &str = "opteron6272-8n";

/// Load a simulated machine from `--machine` (a preset, `synthetic:SPEC` or a machine file).
pub fn sim_machine(arg: &str) -> Result<Machine> {
    ptb_topology::resolve(arg).with_context(|| format!("loading machine `{arg}` (see `ptb machines`)"))
}

/// The most seeds one command runs.
pub const MAX_SEEDS: usize = 1000;

/// Parse `--seed`: one seed, or a list of seeds and ranges such as `1-3,7` (like a numactl
/// node list). Duplicates are dropped; order is ascending.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>> {
    let bad = |why: &str| anyhow::anyhow!("--seed `{text}`: {why} (give a seed, or a list such as `1-3,7`)");
    let mut v = std::collections::BTreeSet::new();
    for item in text.split(',').map(str::trim) {
        let num = |s: &str| s.trim().parse::<u64>().map_err(|_| bad(&format!("`{s}` is not a whole number")));
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(item)?;
                (n, n)
            }
        };
        if a > b {
            return Err(bad(&format!("range `{item}` runs backwards")));
        }
        if b - a >= MAX_SEEDS as u64 || v.len() + (b - a) as usize >= MAX_SEEDS {
            return Err(bad(&format!("more than {MAX_SEEDS} seeds")));
        }
        v.extend(a..=b);
    }
    Ok(v.into_iter().collect())
}

/// `1, 2, 3` for people; `--seed` input form (`1-3`) is not repeated back.
pub fn join<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// `1 workload`, `3 workloads` (the topology crate's, which every message shares).
pub use ptb_topology::render::plural;

/// Check parameters that name nodes against the machine (kernel node ids, as `--nodes` and
/// numactl take them), so a typo is refused before a run rather than silently dropped.
pub fn check_params(params: &Params, machine: &Machine) -> Result<()> {
    ptb_policy::interleave::check_weights(params, machine).map_err(anyhow::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_take_one_value_a_list_or_ranges() {
        assert_eq!(parse_seeds("7").unwrap(), vec![7]);
        assert_eq!(parse_seeds("1-3,7, 2").unwrap(), vec![1, 2, 3, 7]);
        for bad in ["", "x", "3-1", "1,,2", "0-5000", "-1"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lists_read_like_words() {
        assert_eq!(join(["a", "b", "c"]), "a, b, c");
        assert_eq!(plural(1, "seed", "seeds"), "1 seed");
        assert_eq!(plural(11, "policy", "policies"), "11 policies");
    }
}

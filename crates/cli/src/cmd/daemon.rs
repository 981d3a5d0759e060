//! `ptb daemon --config /etc/ptb/ptb.toml`: the system-wide service (see
//! `ptb_linux::service` for how it works and `ptb_linux::rules` for the config).

use crate::common::plural;
use anyhow::{bail, Context, Result};
use ptb_linux::control;
use ptb_linux::procfs::ProcRoot;
use ptb_linux::rules::ServiceConfig;
use ptb_linux::safety::{self, BalancingGuard};
use ptb_linux::say;
use ptb_linux::service::{self, ServiceMetrics, Setup};
use ptb_policy::Params;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The service's configuration: rules, defaults and policy parameters (see
    /// packaging/ptb.toml for a commented example).
    #[arg(long, value_name = "FILE", default_value = "/etc/ptb/ptb.toml")]
    pub config: PathBuf,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check: bool,
}

pub fn run(a: Args) -> Result<()> {
    let root = ProcRoot::live();
    let passwd = ptb_topology::input::read_text(std::path::Path::new("/etc/passwd"), "user database", 64 << 20)
        .unwrap_or_default();
    let config = ServiceConfig::load(&a.config, &passwd).map_err(anyhow::Error::msg)?;
    let mut params = Params::new();
    params.add_toml(&config.policy_toml, &a.config.display().to_string())?;
    let live = ptb_linux::live::machine(&root).map_err(anyhow::Error::msg)?;
    let mut dry_run = config.daemon.dry_run;
    let machine = match &config.daemon.machine {
        None => live,
        Some(arg) => {
            let m = ptb_topology::resolve(arg)
                .with_context(|| format!("{}: daemon.machine `{arg}`", a.config.display()))?;
            match ptb_linux::live::adopt(&m, &live) {
                Ok(adopted) => adopted,
                Err(_) if dry_run => m,
                Err(why) => bail!(
                    "{}: daemon.machine `{arg}` {why}, so it never drives real moves: only a machine file made \
                     here with `ptb characterize` does, for its bandwidth figures (or set dry_run = true)",
                    a.config.display()
                ),
            }
        }
    };
    if !machine.source.is_live() {
        dry_run = true;
    }
    let metrics = Arc::new(ServiceMetrics::default());
    let shared = control::Shared::new("daemon", Some(a.config.display().to_string()));
    let setup = Setup {
        root: root.clone(),
        machine,
        dry_run,
        config,
        passwd,
        params,
        control: Some(shared.clone()),
        metrics: metrics.clone(),
    };
    service::check(&setup).map_err(anyhow::Error::msg)?;
    if a.check {
        println!(
            "{}: {}, policy {} by default; configuration is valid",
            a.config.display(),
            plural(setup.config.rules.len(), "rule", "rules"),
            setup.config.daemon.policy
        );
        return Ok(());
    }
    let mut setup = setup;
    let m = &setup.machine;
    if m.n_nodes() < 2 || (m.cpu_nodes().len() < 2 && m.memory_nodes().len() < 2) {
        setup.dry_run = true;
        say!(
            "ptb daemon: this machine has {} NUMA node{}: there is nothing to place; the service keeps running and \
             reports what it would manage (dry run)",
            m.n_nodes(),
            if m.n_nodes() == 1 { "" } else { "s" }
        );
    }
    safety::install_stop_handler().context("installing SIGINT/SIGTERM handlers")?;
    let mut guard = BalancingGuard::new(&root, setup.config.daemon.disable_kernel_balancing && !setup.dry_run)
        .map_err(anyhow::Error::msg)?;
    let _server = control::Server::start(shared).map_err(anyhow::Error::msg)?;
    if let Some(addr) = &setup.config.daemon.metrics_addr {
        let bound = ptb_linux::metrics::serve(addr, metrics, false).map_err(anyhow::Error::msg)?;
        say!("ptb daemon: metrics on http://{bound}/metrics (stats: /stats.json)");
    }
    say!(
        "ptb daemon: {} from {}; scanning every {} ms{}",
        plural(setup.config.rules.len(), "rule", "rules"),
        a.config.display(),
        setup.config.daemon.scan_ms,
        if setup.dry_run { " (dry run: nothing is moved)" } else { "" }
    );
    let sum = service::run(setup).map_err(anyhow::Error::msg);
    guard.restore();
    let sum = sum?;
    say!("ptb daemon: stopped after {} scans; took {} programs, let go of {}", sum.scans, sum.attached, sum.detached);
    Ok(())
}

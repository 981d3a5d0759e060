//! `ptb status`: what each running ptb (`ptb run`, `ptb attach`, the `ptb daemon` service)
//! manages, asked over its control socket (see `ptb_linux::control`). Each user sees the
//! programs they own (root and a daemon's own user see all).

use anyhow::Result;
use comfy_table::Table;
use ptb_linux::control;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the status as JSON (`[{"socket", "daemon": {...}}]`).
    #[arg(long)]
    pub json: bool,
}

fn duration(s: f64) -> String {
    let s = s as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The sampling in force: events per sample and the cycle length (`off`: no samples).
fn sampling(s: &ptb_linux::metrics::Stats) -> String {
    let cycle = if s.cycle_ms > 0.0 { format!(" every {:.0} ms", s.cycle_ms) } else { String::new() };
    match s.sampling_period {
        0 => format!("off{cycle}"),
        p => format!("1/{p}{cycle}"),
    }
}

pub fn run(a: Args) -> Result<()> {
    let euid = super::roi::nix_euid();
    let dirs = control::client_dirs(euid);
    let all = control::status_all(&dirs, euid);
    if a.json {
        let v: Vec<serde_json::Value> = all
            .iter()
            .map(|(sock, d)| serde_json::json!({ "socket": sock.display().to_string(), "daemon": d }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if all.is_empty() {
        println!(
            "no running ptb found (looked for control sockets in {})",
            dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        return Ok(());
    }
    for (i, (_, d)) in all.iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!(
            "ptb {} (pid {}{}), up {}: {} program{}{}",
            d.mode,
            d.pid,
            d.config.as_ref().map_or(String::new(), |c| format!(", config {c}")),
            duration(d.uptime_s),
            d.programs.len(),
            if d.programs.len() == 1 { "" } else { "s" },
            if d.hidden > 0 { format!(" (and {} of other users)", d.hidden) } else { String::new() }
        );
        if d.programs.is_empty() {
            continue;
        }
        let mut t = Table::new();
        t.set_header([
            "pid",
            "uid",
            "command",
            "rule",
            "policy",
            "nodes",
            "for",
            "cycles",
            "sampling",
            "threads moved",
            "pages moved",
            "state",
        ]);
        for p in &d.programs {
            t.add_row([
                p.pid.to_string(),
                p.uid.to_string(),
                p.command.clone(),
                p.rule.clone().unwrap_or_else(|| "-".into()),
                p.policy.clone(),
                p.nodes.clone(),
                duration(p.managed_s),
                p.stats.cycles.to_string(),
                sampling(&p.stats),
                p.stats.threads_moved.to_string(),
                p.stats.pages_moved.to_string(),
                if p.paused { "paused (roi)".into() } else { "placing".into() },
            ]);
        }
        println!("{t}");
    }
    Ok(())
}

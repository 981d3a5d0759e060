//! `ptb`: places the Pages, Threads and memory Bandwidth of parallel programs on NUMA machines.
//!
//! One subcommand per file under `cmd/`; shared option handling in `common`.

mod cmd;
mod common;
mod plot;
mod report;
mod world;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ptb", version, about = "Place the pages, threads and memory bandwidth of parallel programs on NUMA machines", long_about = None)]
struct Cli {
    /// Log filter (e.g. `info`, `debug`, `ptb_linux=trace`); also RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    /// Logs as JSON lines on stderr.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a machine's nodes, CPUs, memory, distances, links and Bandwidth Graph.
    Topology(cmd::topology::Args),
    /// List the built-in machine presets.
    Machines(cmd::machines::Args),
    /// List the placement policies and their parameters.
    Policies(cmd::policies::Args),
    /// List the built-in workload models.
    Workloads(cmd::workloads::Args),
    /// Simulate workloads under placement policies (results are simulated).
    Simulate(cmd::simulate::Args),
    /// Compare every policy on a suite of workloads against first-touch and an oracle (simulated).
    Compare(cmd::compare::Args),
    /// Check the simulated world against published whole-program results, item by item.
    Calibrate(cmd::calibrate::Args),
    /// Render plots and a report from a saved simulate/compare/record JSON.
    Report(cmd::report::Args),
    /// Measure this machine's Bandwidth Graph and latency matrix.
    Characterize(cmd::characterize::Args),
    /// Launch a program and manage its placement.
    Run(cmd::run::Args),
    /// Manage the placement of running processes.
    Attach(cmd::attach::Args),
    /// Record samples and placements of a process to a trace file.
    Record(cmd::record::Args),
    /// Plan placement offline from a recorded trace.
    Plan(cmd::plan::Args),
    /// Enable or disable placement for a managed process (region of interest).
    Roi(cmd::roi::Args),
    /// The system-wide service: manage every process the config's rules select.
    Daemon(cmd::daemon::Args),
    /// Show what each running ptb (run, attach, the daemon service) manages.
    Status(cmd::status::Args),
    /// Benchmarks that print figures (policy decision time, simulator speed, actuator rate).
    Bench(cmd::bench::Args),
    /// Run one program pinned on every k-node subset of a machine: best, worst, mean (simulated).
    Subsets(cmd::subsets::Args),
}

/// Parse the command line; `--help` of the commands that take `--policy` lists every policy
/// and its parameters (generated from the policy registry, so it cannot go stale).
fn parse_cli() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let text = cmd::policies::help_text();
    let mut c = Cli::command();
    for name in ["run", "attach", "simulate", "compare", "plan"] {
        c = c.mut_subcommand(name, |s| s.after_long_help(text.clone()));
    }
    let m = c.get_matches();
    Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit())
}

/// A closed stdout (`ptb policies | head -1`) ends ptb quietly, as it ends `cat`: SIGPIPE is
/// set back to its default for every command that only prints. The commands that manage
/// processes keep it ignored (a write error is not a reason to leave threads pinned; they
/// print through `say!`, which ignores a closed stderr) and so does the service.
fn pipe_policy(cmd: &Command) {
    let manages = matches!(cmd, Command::Run(_) | Command::Attach(_) | Command::Record(_) | Command::Daemon(_));
    if !manages {
        // SAFETY: setting a signal's disposition to its default before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
}

fn main() -> ExitCode {
    let cli = parse_cli();
    pipe_policy(&cli.cmd);
    common::init_logging(&cli.log, cli.log_json);
    let r = match cli.cmd {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Machines(a) => cmd::machines::run(a),
        Command::Policies(a) => cmd::policies::run(a),
        Command::Workloads(a) => cmd::workloads::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Characterize(a) => cmd::characterize::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Attach(a) => cmd::attach::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Roi(a) => cmd::roi::run(a),
        Command::Daemon(a) => cmd::daemon::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Subsets(a) => cmd::subsets::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ptb: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

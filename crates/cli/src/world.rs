//! The simulated world's options shared by `simulate`, `compare` and `bench sim`: run length,
//! the Linux scheduler model and perturbed worlds, and the line every output prints about them.

use ptb_sim::{Samplers, SimOptions};
use ptb_topology::Machine;
use serde::Serialize;

/// How the simulated world behaves (see README "Simulator").
#[derive(clap::Args, Debug, Clone)]
pub struct WorldArgs {
    /// Multiply every phase's work: 1 runs the built-in programs as long as the published ones
    /// (15 s to over a minute under the Linux default); below 1 shortens them for a quick look.
    #[arg(long, default_value_t = 1.0, value_parser = duration_scale)]
    pub duration_scale: f64,
    /// Cross-node migrations per second of each thread no policy pinned, under the simulated
    /// Linux scheduler (calibrated on published NPB access maps); 0 keeps unpinned threads
    /// where they start.
    #[arg(long, value_name = "PER_S", default_value_t = ptb_sim::sched::DEFAULT_MIGRATIONS_PER_S, value_parser = rate)]
    pub linux_migrations: f64,
    /// Perturb the simulator's hidden constants (service times, queue steepness, idle
    /// latencies, link capacities, migration costs) by factors within +-30% drawn from this
    /// seed; policies still see the unperturbed machine file.
    #[arg(long, value_name = "SEED")]
    pub perturb: Option<u64>,
    /// With --perturb: hand the policies a machine file that states these perturbed constants
    /// rightly, as if measured (`links`: every link's capacity; `latency`: every idle latency;
    /// comma-separated), to see which of the file's errors costs a policy what.
    #[arg(long, value_name = "WHAT", value_delimiter = ',', value_parser = known, requires = "perturb")]
    pub perturb_known: Vec<ptb_sim::perturb::Known>,
    /// Which sampler serves the policies' sampling requests: `machine`, the one the machine
    /// file names, opened as `ptb run` opens it (the Opteron and EPYC presets: IBS op without a
    /// miss filter, so a request for misses gets op samples with the cache hits dropped at a
    /// thinned period; the Intel presets: PEBS load latency, loads only); `asked`, each policy
    /// the sampler it asks for, whatever the hardware has.
    #[arg(long, value_enum, default_value_t = SamplersArg::Machine)]
    pub samplers: SamplersArg,
}

/// `--samplers`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplersArg {
    Machine,
    Asked,
}

impl From<SamplersArg> for Samplers {
    fn from(a: SamplersArg) -> Self {
        match a {
            SamplersArg::Machine => Samplers::Machine,
            SamplersArg::Asked => Samplers::Asked,
        }
    }
}

/// `--perturb-known`: `links` or `latency`.
fn known(text: &str) -> Result<ptb_sim::perturb::Known, String> {
    ptb_sim::perturb::Known::parse(text.trim())
        .ok_or_else(|| format!("`{text}`: give links or latency (comma-separated for both)"))
}

/// `--duration-scale`: a finite factor above 0, at most 1000 (`inf` was told "must be > 0").
fn duration_scale(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!("`{text}`: give a finite factor above 0 and at most 1000 (1 = the published length)")),
    }
}

/// `--linux-migrations`: a finite rate >= 0.
fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1e6).contains(&v) => Ok(v),
        _ => Err(format!("`{text}`: give a finite number of migrations per second, 0 to 1000000")),
    }
}

impl WorldArgs {
    /// Put these options into simulator options.
    pub fn apply(&self, o: &mut SimOptions) {
        o.duration_scale = self.duration_scale;
        o.linux_migrations_per_s = self.linux_migrations;
        o.perturb = self.perturb;
        o.perturb_known = self.perturb_known.clone();
        o.samplers = self.samplers.into();
    }

    /// The names of the perturbed constants the policies are told (`--perturb-known`).
    fn known_names(&self) -> Vec<&'static str> {
        self.perturb_known.iter().map(|k| k.name()).collect()
    }

    /// What the world is, for JSON outputs (`machine`: the machine of the run, when one).
    pub fn describe(&self, machine: Option<&Machine>) -> World {
        World {
            duration_scale: self.duration_scale,
            full_length: (self.duration_scale - 1.0).abs() < 1e-9,
            linux_migrations_per_s: self.linux_migrations,
            perturb: self.perturb,
            perturb_known: self.known_names(),
            samplers: self.samplers_line(machine),
        }
    }

    /// Which sampler the policies' samples come from, in words.
    fn samplers_line(&self, machine: Option<&Machine>) -> String {
        match (self.samplers, machine.map(|m| m.sampler)) {
            (SamplersArg::Asked, _) => "each policy the sampler it asks for (--samplers asked)".into(),
            (SamplersArg::Machine, Some(Some(s))) => {
                format!("the machine's {}, as ptb run opens it (--samplers)", s.describe())
            }
            (SamplersArg::Machine, Some(None)) => {
                "each policy the sampler it asks for (the machine file names no sampler)".into()
            }
            (SamplersArg::Machine, None) => "each machine's own, as ptb run opens it (--samplers)".into(),
        }
    }

    /// One line for human outputs: run length, Linux model, perturbation, samplers
    /// (`machine`: the machine of the run, when one).
    pub fn line(&self, machine: Option<&Machine>) -> String {
        let length = if (self.duration_scale - 1.0).abs() < 1e-9 {
            "runs at the published programs' length".to_string()
        } else if self.duration_scale < 1.0 {
            format!(
                "runs SHORTENED to {:.3}x of the published programs' length (--duration-scale)",
                self.duration_scale
            )
        } else {
            format!(
                "runs lengthened to {:.3}x of the published programs' length (--duration-scale)",
                self.duration_scale
            )
        };
        let linux = if self.linux_migrations > 0.0 {
            format!(
                "Linux model: unpinned threads start where fork balancing puts them and change node {} times/s each (--linux-migrations); a node's CPU groups share its running threads evenly",
                self.linux_migrations
            )
        } else {
            "Linux model: unpinned threads stay where fork balancing puts them (--linux-migrations 0); a node's CPU groups share its running threads evenly".to_string()
        };
        let world = match self.perturb {
            Some(s) if !self.perturb_known.is_empty() => {
                let k = self.known_names();
                format!(
                    "; PERTURBED world, seed {s} (hidden constants within +-30%; the policies' machine file states its {} rightly)",
                    k.join(" and ")
                )
            }
            Some(s) => format!("; PERTURBED world, seed {s} (hidden constants within +-30%)"),
            None => String::new(),
        };
        let samplers = self.samplers_line(machine);
        format!("{length}; {linux}{world}; samples: {samplers}")
    }
}

/// The world of a run, as JSON outputs carry it.
#[derive(Serialize, Debug, Clone)]
pub struct World {
    pub duration_scale: f64,
    pub full_length: bool,
    pub linux_migrations_per_s: f64,
    pub perturb: Option<u64>,
    /// Perturbed constants the policies' machine file states rightly (`--perturb-known`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub perturb_known: Vec<&'static str>,
    /// Which sampler served the policies' requests (`--samplers`).
    pub samplers: String,
}

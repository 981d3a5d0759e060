//! The daemon's side of a policy's sampling plan: the sample source, its period and mode, and
//! the cycle length.
//!
//! Problem: a policy changes how it samples as it runs (`ptb` samples more densely in its
//! first cycles and 4x more sparsely once nothing moves; `autonuma` adapts its scan period),
//! and the daemon used to honour only the cycle length of such a request: the rest held in the
//! simulator only.
//!
//! Approach: [`Sampling`] owns the source and the cycle length and is the daemon's
//! [`SampleControl`] in the shared cycle step (`ptb_policy::cycle`). What the user fixed wins
//! (`--cycle-ms`, `--period`, `--source NAME`); otherwise:
//! - cycle: the policy's, at least [`MIN_CYCLE`];
//! - period: an address-sampling source (IBS, PEBS, SPE) takes the policy's period on every
//!   open ring; the page-fault source keeps one sample per fault, since a policy's period
//!   counts memory accesses (thousands per fault);
//! - mode: a request for no samples pauses a source ptb chose itself (`--source auto`), a
//!   request for samples enables it again, or opens one where none was open yet.

use crate::perf::PerfSource;
use ptb_policy::{SampleControl, SamplingMode, SamplingRequest};
use ptb_profile::{AppId, SampleSource, Tid};
use std::time::Duration;

/// Shortest cycle the daemon runs.
pub const MIN_CYCLE: Duration = Duration::from_millis(10);

/// A sample source the daemon can steer ([`PerfSource`]; fakes in tests).
pub trait LiveSource: SampleSource {
    /// Sample exactly these (app, tid) threads from now on.
    fn track(&mut self, threads: &[(AppId, Tid)]);
    /// Also sample these threads from now on (the ones sampled already go on).
    fn track_more(&mut self, threads: &[(AppId, Tid)]);
    /// Events per sample now.
    fn period(&self) -> u64;
    /// The period last asked for: [`Self::period`], unless the source programs another one for
    /// it (an op sampler thinned to the cost of a miss sampler, see `PerfSource::for_event`).
    fn asked_period(&self) -> u64 {
        self.period()
    }
    /// Sample once every `period` events from now on.
    fn set_period(&mut self, period: u64);
    /// The policy's interrupt budget in force (`SamplingRequest::max_interrupts_per_s`).
    fn budget(&self) -> Option<f64> {
        None
    }
    /// Hold the sample interrupts under the policy's own budget from now on (`None`: the
    /// source's cap alone). Sources without a cap ignore it.
    fn set_budget(&mut self, _budget: Option<f64>) {}
    /// What its samples stand for at the current period.
    fn mode(&self) -> SamplingMode;
    /// True when it samples (not paused).
    fn enabled(&self) -> bool;
    /// Sample (true) or pause (false).
    fn set_enabled(&mut self, on: bool);
}

impl LiveSource for PerfSource {
    fn track(&mut self, threads: &[(AppId, Tid)]) {
        PerfSource::track(self, threads);
    }
    fn track_more(&mut self, threads: &[(AppId, Tid)]) {
        PerfSource::track_more(self, threads);
    }
    fn period(&self) -> u64 {
        PerfSource::period(self)
    }
    fn asked_period(&self) -> u64 {
        PerfSource::asked_period(self)
    }
    fn set_period(&mut self, period: u64) {
        let reopen = PerfSource::set_period(self, period);
        if reopen > 0 {
            tracing::info!(rings = reopen, period, "rings reopened at the new sample period");
        }
    }
    fn budget(&self) -> Option<f64> {
        PerfSource::budget(self)
    }
    fn set_budget(&mut self, budget: Option<f64>) {
        let reopen = PerfSource::set_budget(self, budget);
        if reopen > 0 {
            tracing::info!(rings = reopen, ?budget, "rings reopened under the policy's interrupt budget");
        }
    }
    fn mode(&self) -> SamplingMode {
        PerfSource::mode(self)
    }
    fn enabled(&self) -> bool {
        PerfSource::enabled(self)
    }
    fn set_enabled(&mut self, on: bool) {
        PerfSource::set_enabled(self, on);
    }
}

/// Opens a source for a sampling mode (`Ok(None)`: no source for that mode here).
pub type Opener<'a> = Box<dyn FnMut(SamplingMode) -> Result<Option<Box<dyn LiveSource>>, String> + 'a>;

/// What the user fixed on the command line (it wins over the policy's requests).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fixed {
    /// `--cycle-ms`.
    pub cycle: Option<Duration>,
    /// `--period`.
    pub period: Option<u64>,
    /// `--source NAME` (not `auto`): the source samples whatever the policy asks.
    pub source: bool,
}

/// The source and cycle length of one daemon loop.
pub struct Sampling<'a> {
    source: Option<Box<dyn LiveSource>>,
    open: Opener<'a>,
    fixed: Fixed,
    cycle: Duration,
    /// A source was opened (or tried) for a mode that samples: not tried again.
    tried: bool,
    /// What the last requests changed, until [`Self::take_change`].
    changed: Vec<String>,
}

impl<'a> Sampling<'a> {
    /// Start as the policy's first request says (the source it needs opened).
    pub fn start(req: SamplingRequest, fixed: Fixed, mut open: Opener<'a>) -> Result<Self, String> {
        let source = open(req.mode)?;
        Ok(Sampling {
            tried: req.mode != SamplingMode::None || source.is_some(),
            source,
            open,
            fixed,
            cycle: fixed.cycle.unwrap_or(req.cycle).max(MIN_CYCLE),
            changed: vec![],
        })
    }

    /// The cycle length now.
    pub fn cycle(&self) -> Duration {
        self.cycle
    }

    /// The open source, if any (to track threads and drain samples).
    pub fn source_mut(&mut self) -> Option<&mut (dyn LiveSource + 'static)> {
        self.source.as_deref_mut()
    }

    fn live(&self) -> Option<&dyn LiveSource> {
        self.source.as_deref().filter(|s| s.enabled())
    }

    /// What the samples stand for now (`None`: no source, or paused).
    pub fn mode(&self) -> SamplingMode {
        self.live().map_or(SamplingMode::None, |s| s.mode())
    }

    /// Events per sample now (0: not sampling).
    pub fn period(&self) -> u64 {
        self.live().map_or(0, |s| s.period())
    }

    /// The source for people: its name and period, or why there is none.
    pub fn describe(&self) -> String {
        match &self.source {
            None => "none (the policy asks for no samples)".into(),
            Some(s) if !s.enabled() => format!("{} (paused: the policy asks for no samples)", s.describe()),
            Some(s) => s.describe(),
        }
    }

    /// What the policy's requests changed since the last call (None: nothing).
    pub fn take_change(&mut self) -> Option<String> {
        (!self.changed.is_empty()).then(|| std::mem::take(&mut self.changed).join(", "))
    }
}

impl SampleControl for Sampling<'_> {
    fn set_sampling(&mut self, req: SamplingRequest) {
        if self.fixed.cycle.is_none() {
            let c = req.cycle.max(MIN_CYCLE);
            if c != self.cycle {
                self.cycle = c;
                self.changed.push(format!("cycle {} ms", c.as_millis()));
            }
        }
        let wants = req.mode != SamplingMode::None;
        if self.source.is_none() && wants && !self.tried {
            self.tried = true;
            match (self.open)(req.mode) {
                Ok(Some(s)) => {
                    self.changed.push(format!("samples from {}", s.describe()));
                    self.source = Some(s);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "the policy asks for samples, but no source opens"),
            }
        }
        let Some(src) = self.source.as_deref_mut() else { return };
        if !self.fixed.source && src.enabled() != wants {
            src.set_enabled(wants);
            self.changed.push(if wants { "sampling resumed" } else { "sampling paused" }.into());
        }
        if let SamplingMode::Address { period, .. } = req.mode {
            let follows = self.fixed.period.is_none() && src.mode() != SamplingMode::PageFaults;
            if follows && period.max(1) != src.asked_period() {
                src.set_period(period.max(1));
                self.changed.push(format!("period {}", src.period()));
            }
            if follows && req.max_interrupts_per_s != src.budget() {
                src.set_budget(req.max_interrupts_per_s);
                let budget = req.max_interrupts_per_s.map_or("the cap".into(), |b| format!("{b:.0}/s"));
                self.changed.push(format!("interrupt budget {budget} (period {})", src.period()));
            }
        }
    }
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod tests;

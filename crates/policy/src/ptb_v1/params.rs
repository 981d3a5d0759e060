//! The `ptb` policy's parameters: their documentation (`ptb policies`, `--help`), defaults
//! and parsing from `--set ptb.KEY=VALUE` / `--config`.

use crate::params::{ParamDoc, Params};
use crate::PolicyError;
use std::time::Duration;

pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { key: "cycle_ms", default: "100", doc: "cycle length in milliseconds" },
    ParamDoc { key: "period", default: "8192", doc: "sampling period: one address sample per N accesses" },
    ParamDoc { key: "chunk_pages", default: "512", doc: "pages per chunk (power of two; 512 x 4 KiB = 2 MiB)" },
    ParamDoc { key: "decay", default: "0.5", doc: "weight of the previous cycles' counts (0 = no history)" },
    ParamDoc {
        key: "private_share",
        default: "0.7",
        doc: "share of a chunk's accesses from one node that makes it private",
    },
    ParamDoc { key: "min_samples", default: "3", doc: "decayed samples a chunk needs before it is placed" },
    ParamDoc { key: "confirm", default: "2", doc: "cycles a chunk's target must hold before it moves" },
    ParamDoc {
        key: "gate",
        default: "0.02",
        doc: "minimum memory traffic, as a share of machine bandwidth, to act at all",
    },
    ParamDoc { key: "payback", default: "2.0", doc: "predicted saving must exceed the move's cost by this factor" },
    ParamDoc { key: "tolerance", default: "0.25", doc: "a chunk within this share of its target placement counts as placed" },
    ParamDoc { key: "mlp", default: "6", doc: "accesses a thread overlaps: divides the access-time saving into thread time, and how much latency slows a thread in the home-share model" },
    ParamDoc { key: "horizon_s", default: "10", doc: "seconds over which a move's saving is counted" },
    ParamDoc {
        key: "urgent_s",
        default: "1",
        doc: "a move not yet confirmed happens anyway if it pays back within this many seconds (0: always wait for confirmation)",
    },
    ParamDoc {
        key: "spread_at_start",
        default: "auto",
        doc: "spread new pages over the memory nodes at start: true, false (first touch), or auto (spread when a CPU group's local bandwidth is under 1.5x its mean bandwidth to the other nodes)",
    },
    ParamDoc {
        key: "home_moves",
        default: "auto",
        doc: "move private chunks to the node of their accessors: true, false (spread them like shared ones), or auto (false where spread_at_start's auto rule finds local bandwidth close to remote)",
    },
    ParamDoc {
        key: "link_aware",
        default: "auto",
        doc: "spread shared chunks with weights that balance the interconnect links for where their accesses come from: true, false (in proportion to node bandwidth), or auto (true where the machine's links differ in bandwidth by more than 1.5x)",
    },
    ParamDoc {
        key: "start_cycle_ms",
        default: "25",
        doc: "length of the first start_cycles cycles in milliseconds (data first touched by one thread is found sooner)",
    },
    ParamDoc {
        key: "start_cycles",
        default: "4",
        doc: "cycles of start_cycle_ms at start, and again at a new phase: the memory traffic more than doubles, or more than half the evidence sits on chunks that lost their dominant user (0: every cycle is cycle_ms)",
    },
    ParamDoc {
        key: "start_period",
        default: "4096",
        doc: "sampling period during the start cycles (more samples, so the first decisions see most chunks)",
    },
    ParamDoc {
        key: "mixed_home",
        default: "1.3",
        doc: "a chunk below private_share is private too when its top node's share, two standard errors below what was sampled (Wilson bound), is at least this many times an even share (1 / memory nodes) and has not fallen by a quarter since the last cycle: data a thread shares with everyone but uses most (0: off)",
    },
    ParamDoc {
        key: "first_home",
        default: "auto",
        doc: "percent of a private chunk placed at home when it first leaves a hot spot, before the home-share model has evidence: 40-100, or auto (midway between 100 and the share of a node's traffic its local path carries at full controller bandwidth, rounded to a home share; 100 where the local path is as wide as the controller)",
    },
    ParamDoc {
        key: "home_confirm",
        default: "3",
        doc: "cycles of averaged predictions needed before the home share (the part of each private chunk on its node, the rest spread evenly) may change",
    },
    ParamDoc {
        key: "pin_threads",
        default: "true",
        doc: "pin each thread to a node (blocks of neighbouring threads, sized by each node's CPUs; two threads whose data is on each other's node swap); false leaves threads to the scheduler",
    },
    ParamDoc { key: "quiet_after", default: "3", doc: "cycles without moves before sampling slows down 4x" },
];

/// Tunables of the `ptb` policy (see [`PARAMS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PtbParams {
    pub cycle: Duration,
    pub period: u64,
    pub chunk_pages: u64,
    pub decay: f64,
    pub private_share: f64,
    pub min_samples: f64,
    pub confirm: u32,
    pub gate: f64,
    pub payback: f64,
    pub horizon_s: f64,
    pub urgent_s: f64,
    pub mlp: f64,
    pub quiet_after: u32,
    /// Spread new pages at start (auto: where local paths are narrow).
    pub spread_at_start: Switch,
    /// Move private chunks home (auto: unless local paths are narrow).
    pub home_moves: Switch,
    /// Link-aware spread weights (auto: where links differ in width).
    pub link_aware: Switch,
    pub tolerance: f64,
    /// Length of the first `start_cycles` cycles.
    pub start_cycle: Duration,
    pub start_cycles: u32,
    /// Sampling period during the start cycles.
    pub start_period: u64,
    /// Cycles of averaged predictions needed before the home share may change.
    pub home_confirm: u32,
    /// Multiple of an even share the Wilson bound of a chunk's top share must reach for a
    /// mixed chunk to count as private (0: off).
    pub mixed_home: f64,
    /// Home share of a private chunk's first move off a hot spot (`None`: auto).
    pub first_home: Option<u8>,
    /// Pin threads to nodes ([`super::threads`]).
    pub pin_threads: bool,
}

impl Default for PtbParams {
    fn default() -> Self {
        PtbParams {
            cycle: Duration::from_millis(100),
            period: 8192,
            chunk_pages: 512,
            decay: 0.5,
            private_share: 0.7,
            min_samples: 3.0,
            confirm: 2,
            gate: 0.02,
            payback: 2.0,
            horizon_s: 10.0,
            urgent_s: 1.0,
            mlp: 6.0,
            tolerance: 0.25,
            start_cycle: Duration::from_millis(25),
            start_cycles: 4,
            start_period: 4096,
            home_confirm: 3,
            mixed_home: 1.3,
            first_home: None,
            quiet_after: 3,
            spread_at_start: Switch::Auto,
            home_moves: Switch::Auto,
            link_aware: Switch::Auto,
            pin_threads: true,
        }
    }
}

/// A yes/no parameter that may also be left to a rule about the machine (`auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    Auto,
    On,
    Off,
}

impl Switch {
    /// On or off; `Auto` asks `rule`.
    pub fn on(self, rule: impl FnOnce() -> bool) -> bool {
        match self {
            Switch::On => true,
            Switch::Off => false,
            Switch::Auto => rule(),
        }
    }

    /// `auto`, `true` or `false`, for the error `key`.
    fn parse(v: &str, key: &str) -> Result<Switch, PolicyError> {
        match v {
            "auto" => Ok(Switch::Auto),
            "true" => Ok(Switch::On),
            "false" => Ok(Switch::Off),
            other => Err(PolicyError::Param {
                origin: "parameters".into(),
                policy: "ptb-v1".into(),
                key: key.into(),
                reason: format!("`{other}` is not auto, true or false"),
            }),
        }
    }
}

impl PtbParams {
    /// The `[ptb]` section of `params`, checked (unknown keys and bad values are refused).
    pub fn from_params(params: &Params) -> Result<Self, PolicyError> {
        let s = params.section("ptb-v1");
        let d = PtbParams::default();
        let chunk_pages: u64 = s.get("chunk_pages", d.chunk_pages)?;
        if !chunk_pages.is_power_of_two() {
            return Err(PolicyError::Param {
                origin: "parameters".into(),
                policy: "ptb-v1".into(),
                key: "chunk_pages".into(),
                reason: format!("{chunk_pages} is not a power of two"),
            });
        }
        let p = PtbParams {
            cycle: Duration::from_millis(s.u64_in("cycle_ms", d.cycle.as_millis() as u64, 10, 3_600_000)?),
            period: s.u64_in("period", d.period, 1, u64::MAX)?,
            chunk_pages,
            decay: s.f64_in("decay", d.decay, 0.0, 0.99)?,
            private_share: s.f64_in("private_share", d.private_share, 0.5, 1.0)?,
            min_samples: s.f64_in("min_samples", d.min_samples, 0.0, 1e9)?,
            confirm: s.get("confirm", d.confirm)?,
            gate: s.f64_in("gate", d.gate, 0.0, 1.0)?,
            payback: s.f64_in("payback", d.payback, 0.0, 1e6)?,
            horizon_s: s.f64_in("horizon_s", d.horizon_s, 0.0, 1e6)?,
            urgent_s: s.f64_in("urgent_s", d.urgent_s, 0.0, 1e6)?,
            mlp: s.f64_in("mlp", d.mlp, 1.0, 1000.0)?,
            tolerance: s.f64_in("tolerance", d.tolerance, 0.0, 1.0)?,
            start_cycle: Duration::from_millis(s.u64_in(
                "start_cycle_ms",
                d.start_cycle.as_millis() as u64,
                1,
                3_600_000,
            )?),
            start_cycles: s.get("start_cycles", d.start_cycles)?,
            start_period: s.u64_in("start_period", d.start_period, 1, u64::MAX)?,
            home_confirm: s.get("home_confirm", d.home_confirm)?,
            mixed_home: s.f64_in("mixed_home", d.mixed_home, 0.0, 1e3)?,
            first_home: match s.get::<String>("first_home", "auto".into())?.as_str() {
                "auto" => None,
                v => {
                    Some(v.parse::<u8>().ok().filter(|p| (40..=100).contains(p)).ok_or_else(|| PolicyError::Param {
                        origin: s.origin("first_home"),
                        policy: "ptb-v1".into(),
                        key: "first_home".into(),
                        reason: format!("`{v}` is not auto or a percent from 40 to 100"),
                    })?)
                }
            },
            quiet_after: s.get("quiet_after", d.quiet_after)?,
            pin_threads: s.get("pin_threads", d.pin_threads)?,
            spread_at_start: Switch::parse(&s.get::<String>("spread_at_start", "auto".into())?, "spread_at_start")?,
            home_moves: Switch::parse(&s.get::<String>("home_moves", "auto".into())?, "home_moves")?,
            link_aware: Switch::parse(&s.get::<String>("link_aware", "auto".into())?, "link_aware")?,
        };
        s.finish()?;
        Ok(p)
    }
}

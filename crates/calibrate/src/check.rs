//! How a simulated figure is judged against a published one: its direction, and its size within
//! 30%.
//!
//! - a **speed-up** over the Linux default must lie on the same side of 1.0 as the published one
//!   (a published effect under 3% counts as none, and then the simulated one must be under 5%),
//!   and within 30% of it (`0.7 <= sim / published <= 1.3`);
//! - a **share** (of accesses, of memory) or a **spread** between placements must be within 30%
//!   of the published value;
//! - a **range** (a published "1,000-8,000 per second") must overlap the range widened by 30% on
//!   both sides;
//! - a **relation** the sources state without a number ("interleave helps fluidanimate less than
//!   canneal") is a direction only.

use serde::Serialize;

/// What the published source says.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Expect {
    /// A speed-up over the default.
    Speedup { published: f64 },
    /// A share in [0, 1].
    Share { published: f64 },
    /// A relative spread (worst / best - 1, ...).
    Spread { published: f64 },
    /// A value in a published range.
    Range { lo: f64, hi: f64 },
    /// A relation without a number: the simulated figure must be > 0.
    Holds,
}

/// The verdict on one item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Right direction (`None`: the item has no direction).
    pub direction: Option<bool>,
    /// Within 30% (`None`: the item has no size).
    pub within: Option<bool>,
}

/// The allowed relative error.
pub const TOLERANCE: f64 = 0.3;

impl Expect {
    /// Judge a simulated figure.
    pub fn judge(&self, sim: f64) -> Verdict {
        let ratio_ok = |p: f64| p > 0.0 && sim.is_finite() && (sim / p - 1.0).abs() <= TOLERANCE + 1e-12;
        match *self {
            Expect::Speedup { published } => {
                let none = (published - 1.0).abs() < 0.03;
                let direction = if none {
                    (sim - 1.0).abs() < 0.05
                } else {
                    (sim > 1.0) == (published > 1.0) && (sim - 1.0).abs() >= 0.01
                };
                Verdict { direction: Some(direction), within: Some(ratio_ok(published)) }
            }
            Expect::Share { published } | Expect::Spread { published } => {
                Verdict { direction: None, within: Some(ratio_ok(published)) }
            }
            Expect::Range { lo, hi } => Verdict {
                direction: None,
                within: Some(sim.is_finite() && sim >= lo * (1.0 - TOLERANCE) && sim <= hi * (1.0 + TOLERANCE)),
            },
            Expect::Holds => Verdict { direction: Some(sim.is_finite() && sim > 0.0), within: None },
        }
    }

    /// The published value as people read it.
    pub fn published_text(&self) -> String {
        match *self {
            Expect::Speedup { published } => format!("{published:.2}x"),
            Expect::Share { published } => format!("{:.0}%", 100.0 * published),
            Expect::Spread { published } => format!("{:.0}%", 100.0 * published),
            Expect::Range { lo, hi } => format!("{lo:.0}-{hi:.0}"),
            Expect::Holds => "holds".into(),
        }
    }

    /// A simulated value in the same form.
    pub fn format(&self, sim: f64) -> String {
        match self {
            Expect::Speedup { .. } => format!("{sim:.2}x"),
            Expect::Share { .. } | Expect::Spread { .. } => format!("{:.0}%", 100.0 * sim),
            Expect::Range { .. } => format!("{sim:.0}"),
            Expect::Holds => format!("{sim:.3}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedups_need_the_side_of_one_and_thirty_percent() {
        let e = Expect::Speedup { published: 3.78 };
        assert_eq!(e.judge(4.0), Verdict { direction: Some(true), within: Some(true) });
        assert_eq!(e.judge(5.1), Verdict { direction: Some(true), within: Some(false) });
        assert_eq!(e.judge(0.9).direction, Some(false));
        let none = Expect::Speedup { published: 1.0 };
        assert_eq!(none.judge(1.04).direction, Some(true));
        assert_eq!(none.judge(0.93).direction, Some(false));
        // A small published gain needs a gain, not a loss.
        let small = Expect::Speedup { published: 1.08 };
        assert_eq!(small.judge(0.97).direction, Some(false));
        assert_eq!(small.judge(1.05), Verdict { direction: Some(true), within: Some(true) });
    }

    #[test]
    fn shares_ranges_and_relations() {
        assert_eq!(Expect::Share { published: 0.26 }.judge(0.30).within, Some(true));
        assert_eq!(Expect::Share { published: 0.26 }.judge(0.40).within, Some(false));
        assert_eq!(Expect::Range { lo: 30_000.0, hi: 35_000.0 }.judge(24_000.0).within, Some(true));
        assert_eq!(Expect::Range { lo: 30_000.0, hi: 35_000.0 }.judge(20_000.0).within, Some(false));
        assert_eq!(Expect::Holds.judge(0.2).direction, Some(true));
        assert_eq!(Expect::Holds.judge(-0.2).direction, Some(false));
        assert_eq!(Expect::Holds.judge(f64::NAN).direction, Some(false));
    }
}

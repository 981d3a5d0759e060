//! Calibration of the simulated world against what the published studies measured for whole
//! programs, and the node-subset sweep AsymSched's claims need.
//!
//! ```text
//! published figure (NPB, PTB, AsymSched, selective, run lengths) ──▶ Expect
//! the same comparison, simulated ──▶ figure ──judge──▶ Verdict { direction, within 30% }
//! Report: every item; passes when every direction is right and >= 80% of sizes are within 30%
//! ```
//!
//! `ptb calibrate` prints the report; `crates/calibrate/tests/published.rs` fails when it does
//! not pass. The items are the *training* comparisons: the world is checked on further published
//! results kept aside, so a model change is made for a cause, never to move one of these.

pub mod check;
pub mod deviations;
pub mod published;
pub mod runs;
pub mod subsets;

pub use check::{Expect, Verdict};
pub use published::{run, Item, Options, Report};
pub use subsets::{sweep, Sweep};

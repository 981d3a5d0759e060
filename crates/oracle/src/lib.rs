//! The oracle: the best *static* placement found with full knowledge of a simulated workload.
//! It is a bound found by search, not a proof.

pub mod lp;

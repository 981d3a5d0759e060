//! Fitted parameters of the performance model that belong to the simulator rather than to a
//! machine: queueing service times and the utilisation cap. Each value says where it comes from.

use serde::{Deserialize, Serialize};

/// Parameters of the contention model (see the crate docs for the equations).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// Queueing service time `s_R` of a memory controller, ns. Fitted to Skylake 6140
    /// (machines.md §3): ~90 ns idle -> ~166 ns at its ~210 GB/s ceiling, where MLC's
    /// bandwidth kernel keeps ~15 lines in flight per core; with `s = 4 ns` the controller then
    /// runs at ~95% of capacity (q = 4 * 0.95 / 0.05 = 76 ns), so the delivered bandwidth is
    /// within a few % of the capacity and the latency rises steeply only above ~80%.
    pub controller_service_ns: f64,
    /// Queueing service time of one directed interconnect link, ns (same value as controllers;
    /// no published loaded-latency curve for links).
    pub link_service_ns: f64,
    /// Queueing service time of a group's own path to one node, ns. 0: the path is a hard
    /// cap (the per-pair Bandwidth Graph figure) enforced by the final projection, with no
    /// delay of its own — its queue is the controller's or the link's, not a second one (a
    /// second queue in series made local MLC bandwidth ~10% too low).
    pub path_service_ns: f64,
    /// Highest utilisation the delay formula is evaluated at (`q = s*u/(1-u)` is capped there);
    /// demand above capacity is then removed by scaling the rates down, so `u <= 1` always.
    pub u_max: f64,
    /// Fixed-point iterations per solve (warm-started, stops early on convergence).
    pub max_iterations: usize,
    /// Convergence tolerance on utilisation.
    pub tolerance: f64,
    /// Idle local latency used when the machine gives neither a latency matrix nor distances, ns.
    pub default_local_ns: f64,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            controller_service_ns: 4.0,
            link_service_ns: 4.0,
            path_service_ns: 0.0,
            u_max: 0.99,
            max_iterations: 200,
            tolerance: 1e-4,
            default_local_ns: 80.0,
        }
    }
}

//! The NUMA simulator: machine models, workload models and placement policies in the loop.
//! Every figure it produces is **simulated**.
//!
//! ```text
//! Machine (preset/file/synthetic) ──▶ SimMachine: controllers, directed links, (group,node) paths
//! Workload TOML (suite or file)    ──▶ Layout: apps, threads, objects (address spaces), phases
//!                                        │
//! Simulation::run_policy(spec) ── start(): alloc policy + pins ── allocate (first touch / interleave)
//!   loop every step (<= 10 ms):  access shares ─▶ contention solve ─▶ advance threads
//!                                samples / hinting faults ─▶ every cycle: Snapshot ─▶ decide()
//!                                ─▶ validate_plan ─▶ SimActuator (costs) ─▶ RunResult
//! ```
//!
//! # API
//!
//! ```text
//! let sim = Simulation::new(machine, ptb_sim::resolve_mix("canneal+ep")?, SimOptions::default())?;
//! let ft  = sim.first_touch()?;                                   // reference, cached
//! let r   = sim.run_policy("autonuma".parse()?, &Params::new())?; // r.speedup_vs_first_touch
//! let s   = sim.run_static(&StaticPlacement { label, threads: vec![ThreadTarget::Node(..); n],
//!                                             objects: vec![ObjectPlacement::Fractions(..); m] })?;
//! serde_json::to_string(&r)?;                                     // RunResult is serde
//! ```
//!
//! `sim.layout()` lists the threads and objects (the order a [`StaticPlacement`] uses);
//! `run_with(Box<dyn Policy>)` runs a policy object built elsewhere. A `Simulation` is `Sync`:
//! several runs may go in parallel threads.
//!
//! # Performance model
//!
//! A closed queueing network solved mean-value style once per time step. For thread `i`
//! running on CPU group `g`, with phase parameters `ips_i` (instructions per ns when never
//! stalled), `m_i` (memory accesses per instruction = apki / 1000), `k_i` (memory-level
//! parallelism) and write share `w_i`, and with `fr_i[n]` / `fw_i[n]` the shares of its reads /
//! writes that hit pages on node `n` (from its access distribution and the current placement):
//!
//! - resources `R`: each node's memory controller, each direction of each link, and each
//!   (group, node) path (capacity = the uncontended Bandwidth Graph entry: what one group alone
//!   reaches). A read from `g` to `n` crosses the controller of `n`, the path `(g, n)` and the
//!   route's links memory -> group; a write crosses the controller, the path and the write
//!   route (the reverse links unless the machine gives `write_hops`).
//! - crossing share `c_iR = sum_n (1 - w_i) fr_i[n] [R on read route(g,n)] + w_i fw_i[n] [R on write route(g,n)]`
//! - queueing delay `q_R = s_R * u_R / (1 - u_R)`, `u_R` capped at `u_max` (0.99) in the formula
//! - loaded latency `L_i = sum_n ((1 - w_i) fr_i[n] + w_i fw_i[n]) * lat0(g, n) + sum_R c_iR q_R`,
//!   `lat0` the idle latency (Bandwidth Graph latency matrix; else SLIT x local / 10)
//! - progress `r_i = share_i / (1 / ips_i + m_i * L_i / k_i)` instructions per ns, where
//!   `share_i` is the thread's share of its CPU (1 / threads on that CPU)
//! - demand `D_R = sum_i r_i m_i c_iR * line_bytes + B_R` (bytes per ns = GB/s), `B_R` the load
//!   of page copies in flight; `u_R = D_R / C_R`
//!
//! The fixed point `u -> q -> L -> r -> D -> u` is found by damped iteration with per-resource
//! adaptive steps (warm-started from the previous step); then every thread's rate is scaled by
//! the smallest `(C_R - B_R) / (D_R - B_R)` over the resources it crosses, so utilisation never
//! exceeds 1: bandwidth is a finite shared resource and, near saturation, the latency of every
//! access through a resource rises steeply. One thread alone is bound by `k_i` and latency long
//! before a controller saturates (`k * 64 B / L`), which is why bandwidth plateaus with a few
//! threads.
//!
//! Service times and the cap are simulator parameters ([`ModelParams`]), not machine data.
//!
//! # What is simulated and what is not
//!
//! Caches are not modelled beyond `apki` (the miss rate is a workload input); pages are 4 KiB
//! base pages, except objects marked `huge_pages`, which are allocated and migrated in whole
//! 2 MiB huge pages; initialisation is instantaneous at t = 0 (first touch uses the node of the
//! initialising thread's CPU); phases end with barriers; the OS scheduler spreads unpinned
//! threads one per CPU in CPU order and never moves them on its own.

pub mod error;
pub mod layout;
pub mod machine;
pub mod metrics;
pub mod model;
pub mod pages;
pub mod sim;
pub mod solver;
pub mod workload;

mod access;
mod actuator;
mod drawer;
mod engine;
mod hintfault;
mod huge;
pub mod perturb;
mod run;
mod sampler;
pub mod sched;
mod static_groups;

pub use error::SimError;
pub use layout::Layout;
pub use metrics::{AccessMap, AppResult, ControllerUse, LinkUse, PhaseResult, RunResult};
pub use model::ModelParams;
pub use sim::{FractionRr, ObjectPlacement, Samplers, SimOptions, Simulation, StaticPlacement};
pub use workload::{resolve as resolve_workload, suite, Workload};

/// Parse a `--workload` argument: `a+b` runs workloads together (one application each).
pub fn resolve_mix(arg: &str) -> Result<Vec<Workload>, SimError> {
    arg.split('+').filter(|s| !s.trim().is_empty()).map(workload::resolve).collect()
}

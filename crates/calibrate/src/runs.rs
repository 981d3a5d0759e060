//! The simulated runs the calibration needs, made once each and in parallel.

use ptb_policy::{Params, PolicySpec};
use ptb_sim::{RunResult, SimError, SimOptions, Simulation};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One run: a machine, one workload, a policy with parameter assignments, a thread count.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Spec {
    pub machine: String,
    pub workload: String,
    pub policy: String,
    /// `policy.key=value` assignments.
    pub set: Vec<String>,
    pub threads: Option<usize>,
}

impl Spec {
    pub fn new(machine: &str, workload: &str, policy: &str) -> Spec {
        Spec { machine: machine.into(), workload: workload.into(), policy: policy.into(), set: vec![], threads: None }
    }
    pub fn with(mut self, set: &[&str]) -> Spec {
        self.set = set.iter().map(|s| s.to_string()).collect();
        self
    }
    pub fn threads(mut self, n: usize) -> Spec {
        self.threads = Some(n);
        self
    }
}

/// Finished runs by spec.
pub struct Runs {
    done: BTreeMap<Spec, RunResult>,
}

impl Runs {
    /// Run every spec (duplicates once) on `jobs` threads with `base` options.
    pub fn make(specs: &[Spec], base: &SimOptions, jobs: usize) -> Result<Runs, SimError> {
        let mut uniq: Vec<Spec> = specs.to_vec();
        uniq.sort();
        uniq.dedup();
        let slots: Vec<Mutex<Option<Result<RunResult, SimError>>>> = uniq.iter().map(|_| Mutex::new(None)).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..jobs.clamp(1, uniq.len().max(1)) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= uniq.len() {
                        break;
                    }
                    let r = run(&uniq[i], base);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        let mut done = BTreeMap::new();
        for (spec, slot) in uniq.into_iter().zip(slots) {
            match slot.into_inner().ok().flatten() {
                Some(Ok(r)) => {
                    done.insert(spec, r);
                }
                Some(Err(e)) => return Err(e),
                None => return Err(SimError::Options(format!("run {spec:?} did not finish"))),
            }
        }
        Ok(Runs { done })
    }

    /// A finished run (every spec asked for in [`Runs::make`] is there).
    pub fn get(&self, spec: &Spec) -> Result<&RunResult, SimError> {
        self.done.get(spec).ok_or_else(|| SimError::Options(format!("calibration run {spec:?} was not made")))
    }
}

fn run(spec: &Spec, base: &SimOptions) -> Result<RunResult, SimError> {
    let machine =
        ptb_topology::resolve(&spec.machine).map_err(|e| SimError::Machine(format!("{}: {e}", spec.machine)))?;
    let workloads = ptb_sim::resolve_mix(&spec.workload)?;
    let opts = SimOptions { threads: spec.threads.or(base.threads), ..base.clone() };
    let sim = Simulation::new(machine, workloads, opts)?;
    let mut params = Params::new();
    for s in &spec.set {
        params
            .set_assignment(s)
            .map_err(|e| SimError::Policy { policy: spec.policy.clone(), reason: e.to_string() })?;
    }
    let p: PolicySpec = spec.policy.parse().map_err(|e: ptb_policy::PolicyError| SimError::Policy {
        policy: spec.policy.clone(),
        reason: e.to_string(),
    })?;
    sim.run_policy(p, &params)
}

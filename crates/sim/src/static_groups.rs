//! A static run with a finer page placement than [`crate::StaticPlacement`]: each object is
//! split into equal page groups (the same slicing as the threads' private slices,
//! [`crate::layout::slice`]) and every group gets its own node fractions. This is what the
//! oracle (crate `ptb-oracle`) needs to place, e.g., each thread's slice of an object that one
//! thread initialised on that thread's node.

use crate::error::SimError;
use crate::layout::slice;
use crate::metrics::RunResult;
use crate::run::Run;
use crate::sim::Simulation;
use ptb_policy::{validate_plan, AllocPolicy, PageLocations, Plan, Snapshot, ThreadMove, ThreadTarget};
use std::time::Duration;

impl Simulation {
    /// Run with fixed threads and pages: `threads` has one target per thread in
    /// [`crate::Layout::threads`] order (empty = the default spread); `groups[o]` splits object
    /// `o` into `groups[o].len()` equal page groups, each spread over the nodes in proportion to
    /// its fractions (dense node index, smooth weighted round-robin); an empty entry (or an
    /// empty `groups`) leaves the object to first touch. No policy, sampling or migration runs.
    pub fn run_static_groups(
        &self,
        label: &str,
        threads: &[ThreadTarget],
        groups: &[Vec<Vec<f64>>],
    ) -> Result<RunResult, SimError> {
        let l = &self.layout;
        let bad = |m: String| SimError::Placement(m);
        if !threads.is_empty() && threads.len() != l.threads.len() {
            return Err(bad(format!("{} thread targets for {} threads", threads.len(), l.threads.len())));
        }
        if !groups.is_empty() && groups.len() != l.objects.len() {
            return Err(bad(format!("{} object placements for {} objects", groups.len(), l.objects.len())));
        }
        let mut run = Run::new(self, 0);
        let plan = Plan {
            threads: threads.iter().enumerate().map(|(i, &to)| ThreadMove { tid: l.threads[i].tid, to }).collect(),
            ..Default::default()
        };
        {
            let states = run.thread_states();
            let free = run.free_bytes();
            let pages = PageLocations::new();
            let snap = Snapshot {
                machine: &self.machine,
                allowed: &self.allowed,
                now: Duration::ZERO,
                cycle: Duration::ZERO,
                threads: &states,
                samples: &[],
                sampling_period: 0,
                pages: &pages,
                regions: &[],
                free_bytes: &free,
            };
            validate_plan(&plan, &snap).map_err(|e| bad(e.to_string()))?;
        }
        run.apply_plan(&plan);
        let nn = self.sm.n_nodes;
        let mut ft = vec![true; l.objects.len()];
        for (o, gs) in groups.iter().enumerate() {
            if gs.is_empty() {
                continue;
            }
            ft[o] = false;
            let np = l.objects[o].npages;
            for (g, f) in gs.iter().enumerate() {
                if f.len() != nn || f.iter().any(|x| !x.is_finite() || *x < 0.0) || f.iter().sum::<f64>() <= 0.0 {
                    return Err(bad(format!(
                        "object {o} group {g}: fractions must be {nn} non-negative numbers, not all 0"
                    )));
                }
                if let Some(n) = (0..nn).find(|&n| f[n] > 0.0 && !self.is_mem_allowed(n)) {
                    return Err(bad(format!("object {o} group {g}: node {n} is not an allowed memory node")));
                }
                let total: f64 = f.iter().sum();
                let mut cur = vec![0.0; nn];
                let (s, e) = slice(np, gs.len(), g);
                for p in s..e {
                    if run.objs[o].get(p).is_some() {
                        continue;
                    }
                    for n in 0..nn {
                        cur[n] += f[n] / total;
                    }
                    let best = (0..nn).fold(0, |b, n| if cur[n] > cur[b] { n } else { b });
                    cur[best] -= 1.0;
                    if run.used_pages[best] >= run.cap_pages[best] {
                        return Err(bad(format!("object {o}: node {best} is full")));
                    }
                    run.alloc_page(o, p, best);
                }
            }
        }
        run.allocate(&AllocPolicy::FirstTouch, Some(&ft))?;
        run.drive(None)?;
        let mut r = run.result(label);
        let base = self.first_touch()?;
        r.speedup_vs_first_touch = (r.runtime_s > 0.0).then(|| base.runtime_s / r.runtime_s);
        Ok(r)
    }
}

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
use ptb_policy::{AllocPolicy, Plan, ThreadMove, ThreadTarget};

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
        self.check(&run, &plan).map_err(bad)?;
        run.apply_plan(&plan);
        let mut ft = vec![true; l.objects.len()];
        for (o, gs) in groups.iter().enumerate() {
            if gs.is_empty() {
                continue;
            }
            ft[o] = false;
            let np = l.objects[o].npages;
            for (g, f) in gs.iter().enumerate() {
                let (s, e) = slice(np, gs.len(), g);
                self.place_fractions(&mut run, o, s..e, f, &format!("object {o} group {g}"))?;
            }
        }
        run.allocate_objects(&AllocPolicy::FirstTouch, Some(&ft))?;
        run.drive(None)?;
        let mut r = run.result(label);
        let base = self.first_touch()?;
        r.speedup_vs_first_touch = (r.runtime_s > 0.0).then(|| base.runtime_s / r.runtime_s);
        Ok(r)
    }
}

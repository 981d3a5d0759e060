//! The public entry point: a [`Simulation`] of some workloads on a machine, run under a policy
//! ([`Simulation::run_policy`]) or a fixed placement ([`Simulation::run_static`]).

use crate::error::SimError;
use crate::layout::Layout;
use crate::machine::SimMachine;
use crate::metrics::RunResult;
use crate::model::ModelParams;
use crate::run::Run;
use crate::workload::Workload;
use ptb_policy::{
    validate_plan, AllocPolicy, Params, Plan, Policy, PolicyKind, PolicySpec, Snapshot, StartContext, ThreadTarget,
};
use ptb_topology::{CpuId, Machine, NodeIdx, NodeSet};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// Options of a simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimOptions {
    /// Seed of every random draw of the run (combined with each workload's seed).
    pub seed: u64,
    /// Threads per application (overrides the workloads' counts).
    pub threads: Option<usize>,
    /// Kernel node ids the run may use (like `numactl --cpunodebind --membind`); all when absent.
    pub nodes: Option<NodeSet>,
    /// Multiplies the work of every phase.
    pub duration_scale: f64,
    /// Longest simulated time step, ms.
    pub max_step_ms: f64,
    /// Charge the measured decision time to the run (as a stall of the thread on the lowest
    /// allowed CPU). Off by default so results are deterministic; decision time is always
    /// reported beside the run.
    pub charge_decision: bool,
    /// Most address samples kept per policy cycle (the rest are counted as dropped).
    pub max_samples_per_cycle: usize,
    /// A run that has not finished after this many simulated seconds is an error.
    pub max_sim_s: f64,
    pub model: ModelParams,
    /// Cross-node migrations per second of each thread no policy pinned, under the simulated
    /// Linux scheduler ([`crate::sched`]); 0: unpinned threads never move on their own.
    pub linux_migrations_per_s: f64,
    /// Perturb the simulator's hidden constants with this seed ([`crate::perturb`]): the world
    /// then differs from what the machine file (all a policy sees) says by up to +-30%.
    pub perturb: Option<u64>,
    /// Perturbed constants the machine file given to the policies states rightly
    /// ([`crate::perturb::Known`]); only with `perturb`.
    #[serde(default)]
    pub perturb_known: Vec<crate::perturb::Known>,
    /// Draw address samples on a second thread ([`crate::drawer`]): a run under a sampling
    /// policy then finishes sooner on a machine with a spare core. The results are the same.
    #[serde(default)]
    pub sampler_thread: bool,
    /// Which sampler serves the policies' sampling requests: the machine's, as `ptb run` would
    /// open it ([`ptb_profile::thinning::served`]; IBS op without a miss filter asked for
    /// misses: [`crate::sampler::Thinning`]), or each the one it asks for.
    #[serde(default)]
    pub samplers: Samplers,
}

/// Which sampler serves a policy's sampling request ([`SimOptions::samplers`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Samplers {
    /// The machine file's sampler (`Machine::sampler`), served as `ptb run` serves it there;
    /// on a machine whose file names none, the one asked for.
    #[default]
    Machine,
    /// Every policy gets the sampler it asks for, whatever the machine has.
    Asked,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: 1,
            threads: None,
            nodes: None,
            duration_scale: 1.0,
            max_step_ms: 10.0,
            charge_decision: false,
            max_samples_per_cycle: 1_000_000,
            max_sim_s: 3600.0,
            model: ModelParams::default(),
            linux_migrations_per_s: crate::sched::DEFAULT_MIGRATIONS_PER_S,
            perturb: None,
            perturb_known: vec![],
            sampler_thread: false,
            samplers: Samplers::Machine,
        }
    }
}

/// How one object's pages are placed in a static run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectPlacement {
    /// Where its initialising threads run (after the static thread placement).
    FirstTouch,
    /// Share of the pages per node (dense node index; need not be normalised), spread page by
    /// page with smooth weighted round-robin so every part of the object gets the same mix.
    Fractions(Vec<f64>),
}

/// A fixed placement of every thread and object (what the oracle searches over).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StaticPlacement {
    /// Label of the run in results.
    pub label: String,
    /// One target per thread in [`Layout::threads`] order; empty = the default spread.
    pub threads: Vec<ThreadTarget>,
    /// One entry per object in [`Layout::objects`] order; empty = first touch for all.
    pub objects: Vec<ObjectPlacement>,
}

/// A machine, some workloads (run together, one application each) and options.
pub struct Simulation {
    pub(crate) machine: Machine,
    pub(crate) sm: SimMachine,
    pub(crate) workloads: Vec<Workload>,
    pub(crate) layout: Layout,
    pub(crate) opts: SimOptions,
    /// Dense indices of the allowed nodes.
    pub(crate) allowed: NodeSet,
    /// Every CPU of the machine, ascending.
    pub(crate) cpus: Vec<CpuId>,
    pub(crate) cpu_node: Vec<usize>,
    pub(crate) cpu_group: Vec<usize>,
    /// Allowed nodes with memory (dense).
    pub(crate) mem_nodes: Vec<usize>,
    /// Allowed nodes with CPUs (dense, ascending), and the CPU positions of every node.
    pub(crate) cpu_nodes: Vec<usize>,
    pub(crate) node_cpu_pos: Vec<Vec<usize>>,
    /// CPU positions of the allowed nodes, ascending, and whether each CPU position is one.
    pub(crate) allowed_cpu_pos: Vec<usize>,
    pub(crate) cpu_allowed: Vec<bool>,
    /// What migrations and samples really cost in this world (the machine's costs, perturbed
    /// with `--perturb`); policies see the machine's own.
    pub(crate) costs: ptb_topology::MigrationCosts,
    /// Position of each CPU id in `cpus` (`u32::MAX`: none), for ids below [`CPU_POS_TABLE`].
    cpu_pos_of: Vec<u32>,
    reference: Mutex<Option<RunResult>>,
}

/// CPU ids up to this are looked up in a table (every sample's CPU is); larger ids, which only
/// a sparse machine file has, by binary search.
const CPU_POS_TABLE: usize = 1 << 16;

impl Simulation {
    /// Set up a simulation. Fails on a machine the simulator cannot use, a bad node list or
    /// invalid workloads.
    pub fn new(mut machine: Machine, workloads: Vec<Workload>, opts: SimOptions) -> Result<Self, SimError> {
        if workloads.is_empty() {
            return Err(SimError::Options("no workload given".into()));
        }
        if !(opts.duration_scale.is_finite() && opts.duration_scale > 0.0 && opts.duration_scale <= 1000.0) {
            return Err(SimError::Options(format!(
                "--duration-scale {} must be a finite number above 0 and at most 1000",
                opts.duration_scale
            )));
        }
        if !(opts.max_step_ms.is_finite() && opts.max_step_ms > 0.0) {
            return Err(SimError::Options(format!("max step {} ms must be > 0", opts.max_step_ms)));
        }
        if opts.threads == Some(0) || opts.threads.is_some_and(|t| t > crate::workload::MAX_THREADS as usize) {
            return Err(SimError::Options(format!("--threads must be 1..={}", crate::workload::MAX_THREADS)));
        }
        if !(opts.linux_migrations_per_s.is_finite() && opts.linux_migrations_per_s >= 0.0) {
            return Err(SimError::Options(format!(
                "Linux migration rate {} per second must be a number >= 0",
                opts.linux_migrations_per_s
            )));
        }
        let mut sm = SimMachine::new(&machine, &opts.model)?;
        let mut costs = machine.costs.clone();
        match opts.perturb {
            Some(seed) => {
                crate::perturb::apply(seed, &mut sm, &mut costs);
                crate::perturb::tell(&opts.perturb_known, &sm, &mut machine);
            }
            None if !opts.perturb_known.is_empty() => {
                return Err(SimError::Options(
                    "--perturb-known names constants of a perturbed world: give --perturb SEED too".into(),
                ));
            }
            None => {}
        }
        let allowed: NodeSet = match &opts.nodes {
            None => machine.all_nodes(),
            Some(ids) => {
                let mut s = NodeSet::new();
                for id in ids.iter_raw() {
                    let idx = machine.node_idx(ptb_topology::NodeId(id)).ok_or_else(|| {
                        let known: Vec<String> = machine.nodes.iter().map(|n| n.id.0.to_string()).collect();
                        let known = known.join(", ");
                        SimError::Options(format!(
                            "--nodes: machine `{}` has no node {id} (nodes: {known})",
                            machine.name
                        ))
                    })?;
                    s.insert_raw(idx.0 as u32);
                }
                s
            }
        };
        if !allowed.iter_idx().any(|n| machine.node(n).has_cpus()) {
            return Err(SimError::Options("--nodes: the allowed nodes have no CPUs".into()));
        }
        let mem_nodes: Vec<usize> =
            allowed.iter_idx().filter(|n| machine.node(*n).has_memory()).map(|n| n.ix()).collect();
        if mem_nodes.is_empty() {
            return Err(SimError::Options("--nodes: the allowed nodes have no memory".into()));
        }
        let cpus = machine.cpus();
        let cpu_node = cpus.iter().map(|c| machine.node_of_cpu(*c).map_or(0, |n| n.ix())).collect::<Vec<_>>();
        let cpu_group = cpus.iter().map(|c| machine.group_of_cpu(*c).map_or(0, |g| g.ix())).collect::<Vec<_>>();
        let per_cpu = cpu_node.iter().filter(|&&n| allowed.contains_idx(NodeIdx::from_ix(n))).count();
        let allowed_cpu_pos: Vec<usize> =
            (0..cpus.len()).filter(|&p| allowed.contains_idx(NodeIdx::from_ix(cpu_node[p]))).collect();
        let mut node_cpu_pos = vec![Vec::new(); machine.n_nodes()];
        for &p in &allowed_cpu_pos {
            node_cpu_pos[cpu_node[p]].push(p);
        }
        let cpu_nodes: Vec<usize> = (0..machine.n_nodes()).filter(|&n| !node_cpu_pos[n].is_empty()).collect();
        let layout = Layout::build(&workloads, per_cpu, opts.threads, opts.duration_scale, machine.page_size)?;
        let table = cpus.iter().map(|c| c.0 as usize + 1).filter(|&n| n <= CPU_POS_TABLE).max().unwrap_or(0);
        let mut cpu_allowed = vec![false; cpus.len()];
        for &p in &allowed_cpu_pos {
            cpu_allowed[p] = true;
        }
        let mut cpu_pos_of = vec![u32::MAX; table];
        for (pos, c) in cpus.iter().enumerate() {
            if let Some(slot) = cpu_pos_of.get_mut(c.0 as usize) {
                *slot = pos as u32;
            }
        }
        Ok(Simulation {
            machine,
            sm,
            workloads,
            layout,
            opts,
            allowed,
            cpus,
            cpu_node,
            cpu_group,
            mem_nodes,
            cpu_nodes,
            node_cpu_pos,
            allowed_cpu_pos,
            cpu_allowed,
            costs,
            cpu_pos_of,
            reference: Mutex::new(None),
        })
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Threads and objects of the run (the order [`StaticPlacement`] uses).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn workloads(&self) -> &[Workload] {
        &self.workloads
    }

    pub fn options(&self) -> &SimOptions {
        &self.opts
    }

    /// Dense indices of the nodes the run may use.
    pub fn allowed(&self) -> &NodeSet {
        &self.allowed
    }

    /// The machine as this world really is: resources, capacities, latencies (perturbed with
    /// `--perturb`). Only the oracle (full knowledge) reads it; policies see [`Self::machine`].
    pub fn sim_machine(&self) -> &SimMachine {
        &self.sm
    }

    /// What migrations and samples really cost in this world.
    pub fn costs(&self) -> &ptb_topology::MigrationCosts {
        &self.costs
    }

    /// How the machine model was turned into resources (fallbacks used).
    pub fn notes(&self) -> &[String] {
        &self.sm.notes
    }

    pub(crate) fn cpu_pos(&self, c: CpuId) -> Option<usize> {
        match self.cpu_pos_of.get(c.0 as usize) {
            Some(&p) => (p != u32::MAX).then_some(p as usize),
            None => self.cpus.binary_search(&c).ok(),
        }
    }

    pub(crate) fn is_mem_allowed(&self, n: usize) -> bool {
        self.mem_nodes.contains(&n)
    }

    /// Place the not yet placed pages `pages` of object `o` over the nodes in proportion to
    /// `f` (dense node index; smooth weighted round-robin: each page goes to the node furthest
    /// behind its share). `what` names the pages in errors: `f` must be one non-negative
    /// number per node, not all 0, and only allowed memory nodes may get pages.
    pub(crate) fn place_fractions(
        &self,
        run: &mut Run,
        o: usize,
        pages: std::ops::Range<usize>,
        f: &[f64],
        what: &str,
    ) -> Result<(), SimError> {
        let bad = |m: String| SimError::Placement(m);
        let nn = self.sm.n_nodes;
        if f.len() != nn || f.iter().any(|x| !x.is_finite() || *x < 0.0) || f.iter().sum::<f64>() <= 0.0 {
            return Err(bad(format!("{what}: fractions must be {nn} non-negative numbers, not all 0")));
        }
        if let Some(n) = (0..nn).find(|&n| f[n] > 0.0 && !self.is_mem_allowed(n)) {
            return Err(bad(format!("{what}: node {n} is not an allowed memory node")));
        }
        let mut rr = FractionRr::new(f);
        for p in pages {
            if run.objs[o].get(p).is_some() {
                continue;
            }
            let best = rr.next_node();
            if run.used_pages[best] >= run.cap_pages[best] {
                return Err(bad(format!("object {o}: node {best} is full")));
            }
            run.alloc_page(o, p, best);
        }
        Ok(())
    }

    /// The first-touch reference run (computed once, then cached).
    pub fn first_touch(&self) -> Result<RunResult, SimError> {
        if let Some(r) = self.reference.lock().ok().and_then(|g| g.clone()) {
            return Ok(r);
        }
        let p = ptb_policy::build(PolicySpec::plain(PolicyKind::FirstTouch), &Params::new())
            .map_err(|e| SimError::Policy { policy: "first-touch".into(), reason: e.to_string() })?;
        let mut r = self.run_raw(p)?;
        r.speedup_vs_first_touch = Some(1.0);
        if let Ok(mut g) = self.reference.lock() {
            *g = Some(r.clone());
        }
        Ok(r)
    }

    fn with_speedup(&self, mut r: RunResult) -> Result<RunResult, SimError> {
        let base = self.first_touch()?;
        r.speedup_vs_first_touch = (r.runtime_s > 0.0).then(|| base.runtime_s / r.runtime_s);
        Ok(r)
    }

    /// Run under a policy built by name with parameters; the speed-up is against first touch.
    pub fn run_policy(&self, spec: PolicySpec, params: &Params) -> Result<RunResult, SimError> {
        if spec == PolicySpec::plain(PolicyKind::FirstTouch) {
            return self.first_touch();
        }
        let p = ptb_policy::build(spec, params)
            .map_err(|e| SimError::Policy { policy: spec.to_string(), reason: e.to_string() })?;
        let mut r = self.run_raw(p)?;
        r.policy = spec.to_string();
        self.with_speedup(r)
    }

    /// Run under an already-built policy object.
    pub fn run_with(&self, policy: Box<dyn Policy>) -> Result<RunResult, SimError> {
        let r = self.run_raw(policy)?;
        self.with_speedup(r)
    }

    fn run_raw(&self, mut policy: Box<dyn Policy>) -> Result<RunResult, SimError> {
        let name = policy.name();
        let mut run = Run::new(self, 0);
        let threads = run.thread_states();
        let sp = policy.start(&StartContext { machine: &self.machine, allowed: &self.allowed, threads: &threads });
        let invalid = |reason: String| SimError::InvalidPlan { policy: name.clone(), cycle: 0, time_s: 0.0, reason };
        let nodes: Vec<NodeIdx> = match &sp.alloc {
            AllocPolicy::FirstTouch => vec![],
            AllocPolicy::Interleave(v) => v.clone(),
            AllocPolicy::Weighted(v) => v.iter().map(|x| x.0).collect(),
        };
        for n in nodes {
            if !self.mem_nodes.contains(&n.ix()) {
                return Err(invalid(format!(
                    "start plan allocates on node {}, which is not an allowed memory node",
                    n.0
                )));
            }
        }
        let plan = Plan { threads: sp.threads.clone(), ..Default::default() };
        self.check(&run, &plan).map_err(invalid)?;
        run.apply_plan(&plan);
        // Initial pinning happens before the program runs: not a migration.
        run.acc.threads_migrated = 0;
        run.set_sampling(policy.sampling());
        run.allocate_objects(&sp.alloc, None)?;
        run.drive(Some(policy.as_mut()))?;
        Ok(run.result(&name))
    }

    /// Check a plan made before the run starts (a start plan, a static placement).
    pub(crate) fn check(&self, run: &Run, plan: &Plan) -> Result<(), String> {
        let threads = run.thread_states();
        let free = run.free_bytes();
        let snap = Snapshot::new(&self.machine, &self.allowed, &threads, &free);
        validate_plan(plan, &snap).map_err(|e| e.to_string())
    }

    /// Run with a fixed placement: no policy, no sampling, no migrations.
    pub fn run_static(&self, pl: &StaticPlacement) -> Result<RunResult, SimError> {
        let l = &self.layout;
        let bad = |m: String| SimError::Placement(m);
        if !pl.threads.is_empty() && pl.threads.len() != l.threads.len() {
            return Err(bad(format!("{} thread targets for {} threads", pl.threads.len(), l.threads.len())));
        }
        if !pl.objects.is_empty() && pl.objects.len() != l.objects.len() {
            return Err(bad(format!("{} object placements for {} objects", pl.objects.len(), l.objects.len())));
        }
        let mut run = Run::new(self, 0);
        let plan = Plan {
            threads: pl
                .threads
                .iter()
                .enumerate()
                .map(|(i, &to)| ptb_policy::ThreadMove { tid: l.threads[i].tid, to })
                .collect(),
            ..Default::default()
        };
        self.check(&run, &plan).map_err(bad)?;
        run.apply_plan(&plan);
        run.acc.threads_migrated = 0;
        let mut ft = vec![pl.objects.is_empty(); l.objects.len()];
        for (o, op) in pl.objects.iter().enumerate() {
            match op {
                ObjectPlacement::FirstTouch => ft[o] = true,
                ObjectPlacement::Fractions(f) => {
                    self.place_fractions(&mut run, o, 0..l.objects[o].npages, f, &format!("object {o}"))?;
                }
            }
        }
        run.allocate_objects(&AllocPolicy::FirstTouch, Some(&ft))?;
        run.drive(None)?;
        let r = run.result(&pl.label);
        self.with_speedup(r)
    }
}

/// Smooth weighted round-robin over nodes: each next page goes to the node furthest behind its
/// share, so every prefix of the pages follows the fractions as closely as whole pages can.
/// The fractions are one non-negative number per node (dense index), not all 0.
#[derive(Clone, Debug)]
pub struct FractionRr {
    share: Vec<f64>,
    cur: Vec<f64>,
}

impl FractionRr {
    pub fn new(f: &[f64]) -> FractionRr {
        let total: f64 = f.iter().filter(|x| x.is_finite() && **x > 0.0).sum();
        let share = f.iter().map(|&x| if x.is_finite() && x > 0.0 && total > 0.0 { x / total } else { 0.0 }).collect();
        FractionRr { share, cur: vec![0.0; f.len()] }
    }

    /// The node of the next page (0 when there are no nodes).
    pub fn next_node(&mut self) -> usize {
        for (c, s) in self.cur.iter_mut().zip(&self.share) {
            *c += s;
        }
        let best = (0..self.cur.len()).fold(0, |b, n| if self.cur[n] > self.cur[b] { n } else { b });
        if let Some(c) = self.cur.get_mut(best) {
            *c -= 1.0;
        }
        best
    }
}

#[cfg(test)]
mod fraction_rr_tests {
    use super::FractionRr;

    #[test]
    fn every_prefix_follows_the_fractions_within_a_page() {
        let f = [0.6, 0.0, 0.3, 0.1];
        let mut rr = FractionRr::new(&f);
        let mut got = [0usize; 4];
        for i in 1..=1000 {
            got[rr.next_node()] += 1;
            for n in 0..4 {
                assert!((got[n] as f64 - f[n] * i as f64).abs() <= 1.0, "node {n} after {i} pages: {}", got[n]);
            }
        }
        assert_eq!(got[1], 0);
    }
}

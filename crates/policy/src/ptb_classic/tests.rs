//! Hand-worked cases and invariants of `ptb-classic` on synthetic machines.

use super::*;
use crate::plan::validate_plan;
use crate::snapshot::{PageLocations, ThreadState};
use crate::SampledEvent;
use proptest::prelude::*;
use ptb_profile::{PageKey, Sample, SampleKind};
use ptb_topology::synthetic::synthetic;
use ptb_topology::{CpuId, Machine, NodeSet};
use std::collections::BTreeMap;

const PAGE: u64 = 4096;

/// Owned inputs of a snapshot.
struct Fixture {
    m: Machine,
    allowed: NodeSet,
    threads: Vec<ThreadState>,
    samples: Vec<Sample>,
    pages: PageLocations,
    free: Vec<u64>,
}

impl Fixture {
    /// Threads `0..n` with tid = 100 + i on CPU `cpus[i]`, pinned to their node when `pinned`.
    fn new(spec: &str, cpus: &[u32], pinned: bool) -> Fixture {
        let m = synthetic(spec).unwrap();
        let threads = cpus
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let node = m.node_of_cpu(CpuId(c)).unwrap();
                ThreadState {
                    tid: 100 + i as u32,
                    app: 1,
                    cpu: CpuId(c),
                    node,
                    group: m.group_of_cpu(CpuId(c)).unwrap(),
                    affinity: pinned.then(|| m.node(node).cpus.clone()),
                }
            })
            .collect();
        let free = vec![1 << 30; m.n_nodes()];
        Fixture { allowed: m.all_nodes(), m, threads, samples: vec![], pages: PageLocations::new(), free }
    }

    /// `n` samples of thread index `t` on page `vpn`, and record the page as living on `home`.
    fn touch(&mut self, t: usize, vpn: u64, n: usize, home: u16) {
        let ts = &self.threads[t];
        for k in 0..n {
            self.samples.push(Sample {
                app: 1,
                tid: ts.tid,
                cpu: ts.cpu,
                addr: vpn * PAGE + (k as u64 % 64) * 64,
                kind: SampleKind::Load,
                time_ns: 0,
                data_src: None,
                latency_ns: None,
                phys: None,
            });
        }
        self.pages.insert(PageKey { app: 1, vpn }, NodeIdx(home));
    }

    fn snap(&self) -> Snapshot<'_> {
        Snapshot {
            machine: &self.m,
            allowed: &self.allowed,
            now: Duration::from_secs(1),
            cycle: Duration::from_secs(1),
            threads: &self.threads,
            samples: &self.samples,
            sampling: crate::SamplingMode::Address { event: crate::SampledEvent::Cycles, period: 131_072 },
            sampling_period: 131_072,
            pages: &self.pages,
            regions: &[],
            free_bytes: &self.free,
            thread_cpu: &[],
        }
    }

    /// Node of every thread index after the plan.
    fn final_nodes(&self, plan: &Plan) -> Vec<usize> {
        self.threads
            .iter()
            .map(|t| {
                plan.threads
                    .iter()
                    .find(|mv| mv.tid == t.tid)
                    .map_or(t.node.ix(), |mv| mv.to.node(&self.m).unwrap().ix())
            })
            .collect()
    }
}

fn policy(set: &[&str]) -> PtbClassic {
    let mut p = Params::new();
    for s in set {
        p.set_assignment(s).unwrap();
    }
    PtbClassic::from_params(&p).unwrap()
}

fn page_moves(plan: &Plan) -> BTreeMap<u64, u16> {
    plan.pages.iter().map(|m| (m.page.vpn, m.to.0)).collect()
}

#[test]
fn two_sharing_groups_end_on_separate_nodes() {
    // Threads 0,1 on node 0; 2,3 on node 1. Groups {0,2} and {1,3} share disjoint pages.
    let mut f = Fixture::new("nodes=2,cpus=2", &[0, 1, 2, 3], false);
    for vpn in 0..4 {
        f.touch(0, vpn, 20, 0);
        f.touch(2, vpn, 20, 0);
        f.touch(1, 100 + vpn, 20, 1);
        f.touch(3, 100 + vpn, 20, 1);
    }
    let plan = policy(&[]).decide(&f.snap());
    validate_plan(&plan, &f.snap()).unwrap();
    let n = f.final_nodes(&plan);
    assert_eq!(n[0], n[2], "{n:?}");
    assert_eq!(n[1], n[3], "{n:?}");
    assert_ne!(n[0], n[1], "{n:?}");
    // Every thread gets exactly one move (unpinned threads are pinned to their node).
    assert_eq!(plan.threads.len(), 4);
    // Greedy keeps the first cluster where most of its threads are: exactly two threads move.
    assert_eq!(plan.stats["threads_moved"], 2.0);
    // Each group's pages follow it to its node.
    for vpn in 0..4 {
        let want = n[0] as u16;
        assert_eq!(page_moves(&plan).get(&vpn).copied().unwrap_or(0), want);
    }
}

#[test]
fn budget_exhaustion_interleaves_the_remaining_pages() {
    // 1e-6 GB/s local, 5e-7 remote: one sample is 64 B/s = 6.4e-8 GB/s, so a page with 100
    // samples from each node exceeds every budget of the row it lands in.
    let mut f = Fixture::new("nodes=2,cpus=2,local=0.000001,remote=0.0000005", &[0, 1, 2, 3], true);
    for t in 0..4 {
        f.touch(t, 1, 50, 0); // two hot pages shared by everybody
        f.touch(t, 2, 50, 0);
        for vpn in 3..7 {
            f.touch(t, vpn, 5, 0); // 20 samples each: above Min_Acc
        }
        f.touch(t, 9, 1, 0); // 4 samples: below Min_Acc
    }
    let plan = policy(&[]).decide(&f.snap());
    validate_plan(&plan, &f.snap()).unwrap();
    assert_eq!(plan.stats["budget_exhausted"], 1.0);
    assert_eq!(plan.stats["pages_considered"], 2.0);
    assert_eq!(plan.stats["interleaved"], 4.0);
    assert_eq!(plan.stats["pages_skipped_min_acc"], 1.0);
    let mv = page_moves(&plan);
    // Round-robin in page order: 3 -> n0 (already there), 4 -> n1, 5 -> n0, 6 -> n1.
    assert_eq!(mv.get(&3), None);
    assert_eq!(mv.get(&4), Some(&1));
    assert_eq!(mv.get(&5), None);
    assert_eq!(mv.get(&6), Some(&1));
    assert_eq!(mv.get(&9), None, "below Min_Acc: untouched");
    // The two hot pages took one row each (both rows exhausted), so they sit on different nodes.
    let home = |vpn| mv.get(&vpn).copied().unwrap_or(0);
    assert_ne!(home(1), home(2));
}

/// Threads 0,1 on node 0 and 2,3 on node 1, each pair sharing a private hot page, so the
/// thread phase keeps everybody in place; page 50 is used by both pairs, a bit more by node 1.
fn c2_fixture() -> Fixture {
    let mut f = Fixture::new("nodes=2,cpus=2", &[0, 1, 2, 3], true);
    f.touch(0, 10, 200, 0);
    f.touch(1, 10, 200, 0);
    f.touch(2, 20, 200, 1);
    f.touch(3, 20, 200, 1);
    // b_0 = 20, b_1 = 24 samples: S_0 = 10*20 + 5*24 = 320 (x C2), S_1 = 5*20 + 10*24 = 340.
    f.touch(0, 50, 10, 0);
    f.touch(1, 50, 10, 0);
    f.touch(2, 50, 12, 0);
    f.touch(3, 50, 12, 0);
    f
}

#[test]
fn c2_keeps_a_page_that_is_only_marginally_better_elsewhere() {
    let f = c2_fixture();
    let plan = policy(&[]).decide(&f.snap());
    assert!(plan.threads.is_empty(), "{:?}", plan.threads);
    assert_eq!(page_moves(&plan).get(&50), None);
    // Without hysteresis the page goes to node 1.
    let plan = policy(&["ptb-classic.c2=1.0"]).decide(&f.snap());
    assert_eq!(page_moves(&plan).get(&50), Some(&1));
}

#[test]
fn min_acc_and_a_full_node_are_respected() {
    let mut f = c2_fixture();
    f.free = vec![1 << 30, 0]; // node 1 is full
    let plan = policy(&["ptb-classic.c2=1.0"]).decide(&f.snap());
    validate_plan(&plan, &f.snap()).unwrap();
    assert_eq!(page_moves(&plan).get(&50), None);
    let f = c2_fixture();
    let plan = policy(&["ptb-classic.c2=1.0", "ptb-classic.min_acc=100"]).decide(&f.snap());
    assert_eq!(page_moves(&plan).get(&50), None);
    assert_eq!(plan.stats["pages_skipped_min_acc"], 1.0);
}

#[test]
fn unequal_and_cpuless_nodes_and_classic_collisions() {
    // Node 2 has memory only; 6 threads on 2 nodes of 4 CPUs: 3 per node, none on node 2.
    let mut f = Fixture::new("nodes=2,cpus=4,memonly=1", &[0, 1, 2, 3, 4, 5], false);
    for t in 0..6 {
        f.touch(t, t as u64, 30, 0);
        f.touch(t, 15000 + t as u64, 30, 0); // same slot as page t in a 15000-slot table
    }
    let plan = policy(&[]).decide(&f.snap());
    validate_plan(&plan, &f.snap()).unwrap();
    let n = f.final_nodes(&plan);
    assert_eq!(n.iter().filter(|&&x| x == 0).count(), 3);
    assert_eq!(n.iter().filter(|&&x| x == 1).count(), 3);
    assert_eq!(plan.stats["hash_collisions"], 6.0);
    let plan = policy(&["ptb-classic.histogram=exact"]).decide(&f.snap());
    assert_eq!(plan.stats["hash_collisions"], 0.0);
    assert_eq!(plan.stats["pages_seen"], 12.0);
}

#[test]
fn parameters_defaults_and_errors() {
    let p = policy(&[]);
    assert_eq!(p.config(), &ClassicConfig::default());
    assert_eq!(p.sampling().mode, SamplingMode::Address { event: SampledEvent::Cycles, period: 131_072 });
    assert_eq!(p.sampling().cycle, Duration::from_secs(1));
    let p = policy(&["ptb-classic.tau=0.5", "ptb-classic.period=65536", "ptb-classic.hash_slots=20000"]);
    assert_eq!(
        p.sampling(),
        SamplingRequest::new(
            SamplingMode::Address { event: SampledEvent::Cycles, period: 65536 },
            Duration::from_millis(500)
        )
    );
    assert_eq!(p.config().hash_slots, 20000);
    for bad in ["ptb-classic.histogram=fancy", "ptb-classic.c2=-1", "ptb-classic.hash_slots=0", "ptb-classic.nope=1"] {
        let mut ps = Params::new();
        ps.set_assignment(bad).unwrap();
        let e = PtbClassic::from_params(&ps).unwrap_err().to_string();
        let key = bad.split(['.', '=']).nth(1).unwrap();
        assert!(e.contains(key) && e.contains("--set"), "{bad}: {e}");
    }
    let keys: Vec<&str> = PARAMS.iter().map(|d| d.key).collect();
    assert!(keys.contains(&"c1") && keys.contains(&"min_acc") && keys.contains(&"histogram"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random histograms on several machines: a valid plan, each thread moved at most once, no
    /// node over its CPUs when there are enough CPUs, pages below Min_Acc untouched, budgets never
    /// negative, identical input -> identical plan.
    #[test]
    fn invariants_on_random_histograms(
        spec_ix in 0usize..3,
        nthreads in 1usize..12,
        exact in any::<bool>(),
        touches in proptest::collection::vec((0usize..12, 0u64..40, 1usize..30, 0u16..3), 0..60),
    ) {
        let specs = ["nodes=2,cpus=2", "nodes=3,cpus=2", "nodes=2,cpus=4,memonly=1"];
        let m = synthetic(specs[spec_ix]).unwrap();
        let cpus: Vec<u32> = (0..nthreads).map(|i| (i % m.n_cpus()) as u32).collect();
        let mut f = Fixture::new(specs[spec_ix], &cpus, false);
        for &(t, vpn, n, home) in &touches {
            let home = home % f.m.n_nodes() as u16;
            f.touch(t % nthreads, vpn * 7, n, home);
        }
        let hist = if exact { "ptb-classic.histogram=exact" } else { "ptb-classic.hash_slots=50" };
        let mut p = policy(&[hist]);
        let plan = p.decide(&f.snap());
        prop_assert!(validate_plan(&plan, &f.snap()).is_ok());
        let mut tids: Vec<_> = plan.threads.iter().map(|t| t.tid).collect();
        tids.sort();
        let before = tids.len();
        tids.dedup();
        prop_assert_eq!(before, tids.len());
        let nodes = f.final_nodes(&plan);
        if nthreads <= f.m.n_cpus() {
            for n in f.m.cpu_nodes() {
                prop_assert!(nodes.iter().filter(|&&x| x == n.ix()).count() <= f.m.node(n).cpus.len());
            }
        }
        // Pages below Min_Acc are not moved.
        let mut totals: BTreeMap<u64, usize> = BTreeMap::new();
        for s in &f.samples {
            *totals.entry(s.addr / PAGE).or_default() += 1;
        }
        for mv in &plan.pages {
            prop_assert!(totals[&mv.page.vpn] >= 16 || !exact, "page {} below Min_Acc moved", mv.page.vpn);
        }
        prop_assert!(plan.stats.values().all(|v| v.is_finite() && *v >= 0.0));
        // Determinism: same policy again, and a fresh one.
        prop_assert_eq!(&p.decide(&f.snap()), &plan);
        prop_assert_eq!(&policy(&[hist]).decide(&f.snap()), &plan);
    }

    /// The page phase directly: budgets never go negative, at most every page gets a home.
    #[test]
    fn budgets_never_negative(counts in proptest::collection::vec((0u32..4, 1u32..500), 1..80), tiny in any::<bool>()) {
        let spec = if tiny { "nodes=2,cpus=2,local=0.00001,remote=0.000005" } else { "nodes=2,cpus=2" };
        let m = synthetic(spec).unwrap();
        let mut prof = profile::Profile::default();
        for (k, &(t, c)) in counts.iter().enumerate() {
            let start = prof.cells.len() as u32;
            prof.cells.push((t, c));
            prof.pages.push(profile::PageRow { key: PageKey { app: 1, vpn: k as u64 }, start, end: start + 1, total: u64::from(c) });
        }
        let mem = m.memory_nodes();
        let cur = |_| Some(NodeIdx(0));
        let inp = pages::PageInputs {
            machine: &m, mem_nodes: &mem, thread_node: &[0, 0, 1, 1], gbps_per_sample: 64.0 / 1e9, c2: 1.5,
            min_acc: 16, current: &cur, free_bytes: &[1 << 30, 1 << 30],
        };
        let d = pages::decide(&prof, &inp);
        prop_assert!(d.min_budget >= 0.0 && d.budget_left >= 0.0);
        prop_assert_eq!(d.homes.len() as u64, d.considered + d.interleaved);
        prop_assert_eq!(d.considered + d.interleaved + d.skipped_min_acc, counts.len() as u64);
    }
}

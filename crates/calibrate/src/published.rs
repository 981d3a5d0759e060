//! The training comparisons: what the published studies measured for whole programs, and the
//! same figure in the simulated world.
//!
//! Sources (the numbers are those of the publications; the programs are ptb's workload models):
//! - **NPB** 3.3 OpenMP class C, 64 unpinned threads on a 4-node, 64-core AMD Opteron 6282, Linux
//!   3.13, baseline = the Linux default (first touch, NUMA balancing off): interleave
//!   (`numactl --interleave=all`) and automatic NUMA balancing with default tunables, with their
//!   access maps (a UNICAMP performance study of NUMA balancing). Simulated on `opteron6272-4n`,
//!   the same processor family and node count.
//! - **PTB** (the master's thesis), 4-node Opteron 6272, Linux 3.9 default as baseline, IBS op
//!   sampling: canneal and fluidanimate, their DRAM sample rates and run lengths, the 15,000-slot
//!   table's occupancy and conflicts.
//! - **AsymSched** (USENIX ATC 2015), the 8-node Opteron 6272 ("machine A"): 24-thread programs
//!   on every 3-node subset, streamcluster with 16 threads on 2-node subsets, and the claim that
//!   AsymSched lands close to the best static placement. That last comparison is made as the paper
//!   made it: programs long enough that every run lasts 15 s or more, AsymSched's page moves at
//!   the 0.3 s per GB of its own parallel migration.
//! - **Selective migration** (Yook and Egger), 4-node Intel Xeon: far fewer pages moved than
//!   migrating every remotely sampled page, a modest mean speed-up, small worst-case slowdowns.
//!   Simulated on `broadwell-cod-4n`.
//! - **Run lengths**: the published programs ran 15 s to minutes.
//!
//! "Balancing" is ptb's model of the kernel's balancer (`autonuma`); its "much higher scan rate"
//! is 1 GB per scan with scans at most 1 s apart (the default: 256 MB, up to 60 s apart).

use crate::check::{Expect, Verdict};
use crate::runs::{Runs, Spec};
use crate::subsets;
use ptb_sim::{RunResult, SimError, SimOptions};
use serde::Serialize;

/// Calibration options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The world (seed, Linux scheduler model, perturbation); its run length is the full one.
    pub base: SimOptions,
    /// Worker threads.
    pub jobs: usize,
    /// Run length of the many static node-subset runs (they compare placements, not policies).
    pub sweep_scale: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            base: SimOptions::default(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sweep_scale: 0.1,
        }
    }
}

/// One published figure and its simulated counterpart.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pub id: &'static str,
    pub group: &'static str,
    pub what: String,
    pub machine: &'static str,
    pub expect: Expect,
    pub published: String,
    pub simulated: f64,
    pub simulated_text: String,
    pub verdict: Verdict,
}

impl Item {
    /// Wrong direction or size beyond 30%.
    pub fn is_wrong(&self) -> bool {
        self.verdict.direction == Some(false) || self.verdict.within == Some(false)
    }
}

/// Every item, and the two totals the calibration is judged by.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub items: Vec<Item>,
    /// Items with a direction, and how many are right.
    pub directions: (usize, usize),
    /// Items with a size, and how many are within 30%.
    pub sizes: (usize, usize),
}

impl Report {
    /// Every direction right and at least 80% of the sizes within 30%.
    pub fn passes(&self) -> bool {
        self.directions.0 == self.directions.1 && self.sizes.1 as f64 >= 0.8 * self.sizes.0 as f64
    }

    /// Items judged wrong (direction, or size beyond 30%) that are not known deviations.
    pub fn unexplained(&self) -> Vec<&Item> {
        self.items.iter().filter(|i| i.is_wrong() && crate::deviations::cause(i.id).is_none()).collect()
    }

    /// Known deviations that are right again (their line in [`crate::deviations`] is stale), and
    /// known ids no item has.
    pub fn stale(&self) -> Vec<&'static str> {
        crate::deviations::KNOWN
            .iter()
            .filter(|(k, _)| !self.items.iter().any(|i| i.id == *k && i.is_wrong()))
            .map(|(k, _)| *k)
            .collect()
    }
}

const N4: &str = "opteron6272-4n";
const N8: &str = "opteron6272-8n";
const BDW: &str = "broadwell-cod-4n";
const FAST_SCAN: &[&str] = &["autonuma.scan_size_mb=1024", "autonuma.scan_period_max_ms=1000"];
const ASYM_NEAR: &[&str] = &["streamcluster", "pca", "facesim"];
const THESIS: &[&str] = &["canneal", "fluidanimate"];

fn speedup(base: &RunResult, r: &RunResult) -> f64 {
    base.runtime_s / r.runtime_s.max(1e-12)
}

/// The published NPB access maps are compared with the map a time-based sampler sees
/// ([`RunResult::access_map_sampled`]), not with access counts: NPB's loops give every thread the
/// same work, so counted accesses would give every CPU node the same row total (or, with threads
/// moving, more to the nodes near the data, where threads run faster), yet cg.C's default map has
/// 19% and 19% on the nodes nearest its data and 29% and 31% on the two others: the slow threads
/// were sampled more, as IBS op sampling in cycle mode (one operation per interval of running
/// time) samples them.
fn sampled_map(r: &RunResult) -> &ptb_sim::AccessMap {
    &r.access_map_sampled
}

fn top_memory_share(r: &RunResult) -> f64 {
    sampled_map(r).controller_share.iter().copied().fold(0.0, f64::max)
}

/// Run every calibration item.
pub fn run(opts: &Options) -> Result<Report, SimError> {
    let suite: Vec<String> = ptb_sim::suite::names().into_iter().map(String::from).collect();
    let mut specs = Vec::new();
    for w in ["cg", "mg", "lu", "ep"] {
        for p in ["first-touch", "interleave", "autonuma"] {
            specs.push(Spec::new(N4, w, p));
        }
    }
    specs.push(Spec::new(N4, "cg", "autonuma").with(FAST_SCAN));
    for w in ["canneal", "fluidanimate"] {
        for p in ["first-touch", "interleave", "ptb-classic"] {
            specs.push(Spec::new(N4, w, p));
        }
    }
    for w in &suite {
        specs.push(Spec::new(N8, w, "first-touch"));
        for p in ["first-touch", "selective"] {
            specs.push(Spec::new(BDW, w, p));
        }
        specs.push(Spec::new(BDW, w, "selective").with(&["selective.min_count=1"]));
    }
    let runs = Runs::make(&specs, &opts.base, opts.jobs)?;
    let get = |m: &str, w: &str, p: &str| runs.get(&Spec::new(m, w, p));
    let mut items: Vec<Item> = Vec::new();
    let mut push =
        |id: &'static str, group: &'static str, what: String, machine: &'static str, expect: Expect, sim: f64| {
            let verdict = expect.judge(sim);
            items.push(Item {
                id,
                group,
                what,
                machine,
                published: expect.published_text(),
                simulated_text: expect.format(sim),
                expect,
                simulated: sim,
                verdict,
            });
        };

    // NPB under interleave and NUMA balancing, with access maps.
    let npb = [("cg", 3.78, 3.64), ("mg", 2.84, 2.30), ("lu", 1.08, 1.10), ("ep", 1.0, 1.0)];
    let mut int_gain = Vec::new();
    for (w, pi, pb) in npb {
        let ft = get(N4, w, "first-touch")?;
        let il = get(N4, w, "interleave")?;
        let an = get(N4, w, "autonuma")?;
        let (si, sb) = (speedup(ft, il), speedup(ft, an));
        int_gain.push(si);
        push(
            npb_id(w, "interleave"),
            "NPB",
            format!("{w}.C interleave vs default"),
            N4,
            Expect::Speedup { published: pi },
            si,
        );
        push(
            npb_id(w, "balancing"),
            "NPB",
            format!("{w}.C NUMA balancing vs default"),
            N4,
            Expect::Speedup { published: pb },
            sb,
        );
    }
    let cg_ft = get(N4, "cg", "first-touch")?;
    let cg_an = get(N4, "cg", "autonuma")?;
    let cg_fast = runs.get(&Spec::new(N4, "cg", "autonuma").with(FAST_SCAN))?;
    push(
        "npb-cg-fast-scan",
        "NPB",
        "cg.C NUMA balancing, much higher scan rate, vs default".into(),
        N4,
        Expect::Speedup { published: 4.975 },
        speedup(cg_ft, cg_fast),
    );
    push(
        "npb-cg-fast-scan-helps",
        "NPB",
        "cg.C: a higher scan rate beats the default scan rate (ratio - 1)".into(),
        N4,
        Expect::Holds,
        speedup(cg_an, cg_fast) - 1.0,
    );
    push(
        "npb-gain-order",
        "NPB",
        "interleave gains ordered cg > mg > lu >= ep (smallest margin)".into(),
        N4,
        Expect::Holds,
        (int_gain[0] - int_gain[1]).min(int_gain[1] - int_gain[2]).min(int_gain[2] - int_gain[3] + 0.02),
    );
    let maps: [(&str, &str, &'static str, f64); 21] = [
        ("cg", "first-touch", "npb-map-cg-default-local", 0.19),
        ("cg", "interleave", "npb-map-cg-interleave-local", 0.24),
        ("cg", "autonuma", "npb-map-cg-balancing-local", 0.68),
        ("mg", "first-touch", "npb-map-mg-default-local", 0.21),
        ("mg", "interleave", "npb-map-mg-interleave-local", 0.24),
        ("mg", "autonuma", "npb-map-mg-balancing-local", 0.71),
        ("lu", "first-touch", "npb-map-lu-default-local", 0.26),
        ("lu", "interleave", "npb-map-lu-interleave-local", 0.25),
        ("lu", "autonuma", "npb-map-lu-balancing-local", 0.43),
        ("ep", "first-touch", "npb-map-ep-default-local", 0.26),
        ("ep", "autonuma", "npb-map-ep-balancing-local", 0.77),
        ("cg", "first-touch", "npb-map-cg-default-top-node", 0.97),
        ("mg", "first-touch", "npb-map-mg-default-top-node", 0.97),
        ("cg", "interleave", "npb-map-cg-interleave-top-node", 0.31),
        ("mg", "interleave", "npb-map-mg-interleave-top-node", 0.27),
        ("lu", "interleave", "npb-map-lu-interleave-top-node", 0.27),
        ("cg", "autonuma", "npb-map-cg-balancing-top-node", 0.37),
        ("mg", "autonuma", "npb-map-mg-balancing-top-node", 0.31),
        ("lu", "autonuma", "npb-map-lu-balancing-top-node", 0.37),
        ("ep", "first-touch", "npb-map-ep-default-top-node", 0.68),
        ("ep", "autonuma", "npb-map-ep-balancing-top-node", 0.38),
    ];
    for (w, p, id, published) in maps {
        let r = get(N4, w, p)?;
        let top = id.ends_with("top-node");
        let (what, v) = if top {
            (format!("{w}.C {} share of the busiest memory node", label(p)), top_memory_share(r))
        } else {
            (format!("{w}.C {} local share of accesses", label(p)), sampled_map(r).local)
        };
        push(id, "NPB map", what, N4, Expect::Share { published }, v);
    }
    push(
        "npb-map-lu-default-top-node",
        "NPB map",
        "lu.C default share of the busiest memory node".into(),
        N4,
        Expect::Share { published: 0.38 },
        top_memory_share(get(N4, "lu", "first-touch")?),
    );

    // PTB (the thesis).
    let (c_ft, c_il, c_pt) =
        (get(N4, "canneal", "first-touch")?, get(N4, "canneal", "interleave")?, get(N4, "canneal", "ptb-classic")?);
    let (f_ft, f_il, f_pt) = (
        get(N4, "fluidanimate", "first-touch")?,
        get(N4, "fluidanimate", "interleave")?,
        get(N4, "fluidanimate", "ptb-classic")?,
    );
    push(
        "ptb-canneal",
        "PTB",
        "canneal under PTB vs default".into(),
        N4,
        Expect::Speedup { published: 1.84 },
        speedup(c_ft, c_pt),
    );
    push(
        "ptb-fluidanimate",
        "PTB",
        "fluidanimate under PTB vs default".into(),
        N4,
        Expect::Speedup { published: 1.45 },
        speedup(f_ft, f_pt),
    );
    push(
        "ptb-canneal-interleave",
        "PTB",
        "canneal interleaved vs default (\"roughly halves its running time\")".into(),
        N4,
        Expect::Speedup { published: 2.0 },
        speedup(c_ft, c_il),
    );
    push(
        "ptb-fluidanimate-interleave-less",
        "PTB",
        "interleave helps fluidanimate, less than canneal (smallest margin)".into(),
        N4,
        Expect::Holds,
        (speedup(c_ft, c_il) - speedup(f_ft, f_il)).min(speedup(f_ft, f_il) - 1.0),
    );
    push(
        "ptb-canneal-dram-samples",
        "PTB",
        "canneal DRAM samples per second under PTB (IBS op)".into(),
        N4,
        Expect::Range { lo: 30_000.0, hi: 35_000.0 },
        c_pt.samples_dram as f64 / c_pt.runtime_s.max(1e-9),
    );
    push(
        "ptb-fluidanimate-dram-samples",
        "PTB",
        "fluidanimate DRAM samples per second under PTB (run mean)".into(),
        N4,
        Expect::Range { lo: 1_000.0, hi: 8_000.0 },
        f_pt.samples_dram as f64 / f_pt.runtime_s.max(1e-9),
    );
    push(
        "ptb-canneal-runtime",
        "PTB",
        "canneal run length under PTB, s".into(),
        N4,
        Expect::Range { lo: 14.0, hi: 14.0 },
        c_pt.runtime_s,
    );
    push(
        "ptb-fluidanimate-runtime",
        "PTB",
        "fluidanimate run length under PTB, s".into(),
        N4,
        Expect::Range { lo: 35.0, hi: 35.0 },
        f_pt.runtime_s,
    );
    let occupancy =
        |r: &RunResult| r.policy_stats.get("pages_seen").copied().unwrap_or(0.0) / r.cycles.max(1) as f64 / 15_000.0;
    push(
        "ptb-table-full",
        "PTB",
        "share of the 15,000 slots occupied per cycle (canneal)".into(),
        N4,
        Expect::Share { published: 1.0 },
        occupancy(c_pt),
    );
    let conflicts =
        |r: &RunResult| r.policy_stats.get("hash_collisions").copied().unwrap_or(0.0) / r.cycles.max(1) as f64;
    push(
        "ptb-table-conflicts",
        "PTB",
        "hash conflicts per cycle, the more conflicted of the two programs".into(),
        N4,
        Expect::Range { lo: 500_000.0, hi: 500_000.0 },
        conflicts(c_pt).max(conflicts(f_pt)),
    );

    // AsymSched: node subsets on the 8-node machine.
    let m8 = ptb_topology::resolve(N8).map_err(|e| SimError::Machine(e.to_string()))?;
    let sweep_opts = SimOptions { duration_scale: opts.base.duration_scale * opts.sweep_scale, ..opts.base.clone() };
    let mut spreads = Vec::new();
    let (mut best_vs_mean, mut worst_vs_mean) = (0.0f64, 0.0f64);
    for w in &suite {
        let wl = ptb_sim::resolve_workload(w)?;
        let s = subsets::sweep(&m8, &wl, 24, 3, &sweep_opts, opts.jobs)?;
        spreads.push(s.best_vs_worst());
        best_vs_mean = best_vs_mean.max(s.best_vs_mean());
        worst_vs_mean = worst_vs_mean.max(s.worst_vs_mean());
    }
    spreads.sort_by(f64::total_cmp);
    let mean = spreads.iter().sum::<f64>() / spreads.len().max(1) as f64;
    let median =
        if spreads.is_empty() { 0.0 } else { 0.5 * (spreads[(spreads.len() - 1) / 2] + spreads[spreads.len() / 2]) };
    push(
        "asym-subsets-max",
        "AsymSched",
        "24 threads on 3 of 8 nodes: largest best-vs-worst spread over the suite".into(),
        N8,
        Expect::Spread { published: 2.37 },
        spreads.last().copied().unwrap_or(0.0),
    );
    push(
        "asym-subsets-mean",
        "AsymSched",
        "24 threads on 3 of 8 nodes: mean best-vs-worst spread".into(),
        N8,
        Expect::Spread { published: 0.40 },
        mean,
    );
    push(
        "asym-subsets-median",
        "AsymSched",
        "24 threads on 3 of 8 nodes: median best-vs-worst spread".into(),
        N8,
        Expect::Spread { published: 0.14 },
        median,
    );
    push(
        "asym-best-vs-mean",
        "AsymSched",
        "largest gain of the best subset over the average one".into(),
        N8,
        Expect::Spread { published: 0.88 },
        best_vs_mean,
    );
    push(
        "asym-worst-vs-mean",
        "AsymSched",
        "largest loss of the worst subset against the average one".into(),
        N8,
        Expect::Spread { published: 0.44 },
        worst_vs_mean,
    );
    let sc = ptb_sim::resolve_workload("streamcluster")?;
    let s2 = subsets::sweep(&m8, &sc, 16, 2, &sweep_opts, opts.jobs)?;
    push(
        "asym-streamcluster-2n",
        "AsymSched",
        "streamcluster, 16 threads on 2 of 8 nodes: best vs worst".into(),
        N8,
        Expect::Spread { published: 1.33 },
        s2.best_vs_worst(),
    );
    let eq = ptb_topology::resolve("synthetic:nodes=4,cpus=4").map_err(|e| SimError::Machine(e.to_string()))?;
    let s3 = subsets::sweep(&eq, &sc, 16, 2, &sweep_opts, opts.jobs)?;
    push("asym-streamcluster-equal-links", "AsymSched",
        "streamcluster, 16 threads on 2 of 4 nodes, 16 cores, equal links: node choice barely matters (0.10 - best vs worst; published 3%)".into(),
        "synthetic 4n", Expect::Holds, 0.10 - s3.best_vs_worst());
    for w in ASYM_NEAR {
        let wl = ptb_sim::resolve_workload(w)?;
        let (s, a) = asym_near_best(&m8, &wl, &opts.base, opts.jobs)?;
        push(
            asym_id(w),
            "AsymSched",
            format!("{w}, 24 threads: AsymSched within 10% of the best static 3-node subset (margin)"),
            N8,
            Expect::Holds,
            1.1 * s.best_s / a.runtime_s.max(1e-12) - 1.0,
        );
    }

    // Selective migration on a 4-node Intel machine.
    let (mut sel_pages, mut all_pages, mut logsum, mut worst) = (0u64, 0u64, 0.0f64, f64::INFINITY);
    for w in &suite {
        let ft = get(BDW, w, "first-touch")?;
        let sel = get(BDW, w, "selective")?;
        let un = runs.get(&Spec::new(BDW, w, "selective").with(&["selective.min_count=1"]))?;
        sel_pages += sel.pages_migrated;
        all_pages += un.pages_migrated;
        let s = speedup(ft, sel);
        logsum += s.ln();
        worst = worst.min(s);
    }
    push(
        "sel-fewer-pages",
        "Selective",
        "pages moved: far fewer than its unselective form (0.5 - ratio)".into(),
        BDW,
        Expect::Holds,
        0.5 - sel_pages as f64 / all_pages.max(1) as f64,
    );
    push(
        "sel-modest-gain",
        "Selective",
        "mean speed-up over the suite above 1 (geomean - 1)".into(),
        BDW,
        Expect::Holds,
        (logsum / suite.len().max(1) as f64).exp() - 1.0,
    );
    push(
        "sel-small-worst",
        "Selective",
        "worst slowdown small (worst speed-up - 0.9)".into(),
        BDW,
        Expect::Holds,
        worst - 0.9,
    );

    // Run lengths.
    // canneal and fluidanimate are the thesis' programs, checked on its 4-node machine above.
    let mut lengths = Vec::new();
    for w in suite.iter().filter(|w| !THESIS.contains(&w.as_str())) {
        lengths.push(get(N8, w, "first-touch")?.runtime_s);
    }
    let shortest = lengths.iter().copied().fold(f64::INFINITY, f64::min);
    push(
        "run-length-shortest",
        "Run lengths",
        "shortest program under the default (AsymSched chose programs of >= 15 s), s".into(),
        N8,
        Expect::Range { lo: 15.0, hi: 120.0 },
        shortest,
    );

    let directions =
        items.iter().filter_map(|i| i.verdict.direction).fold((0, 0), |(n, k), d| (n + 1, k + usize::from(d)));
    let sizes = items.iter().filter_map(|i| i.verdict.within).fold((0, 0), |(n, k), d| (n + 1, k + usize::from(d)));
    Ok(Report { items, directions, sizes })
}

/// AsymSched "benchmarks were chosen to run at least 15 s" (asymsched.md): every run of the
/// comparison, the fastest static placement included, lasts at least this long.
pub const ASYM_MIN_RUN_S: f64 = 15.0;

/// AsymSched's own parallel migration, measured at 0.3 s per GB (asymsched.md: "0.3 s per GB of
/// resident memory"; 17x faster than the stock `migrate_pages` of the time, which the 8-node
/// preset charges every other policy: ~5 s per GB).
pub const ASYM_S_PER_GB: f64 = 0.3;

/// The near-best comparison as the paper made it: 24 threads, every static 3-node subset and
/// AsymSched, the program lengthened so that even its fastest static placement runs
/// [`ASYM_MIN_RUN_S`] (static runtimes grow in proportion to the work), and AsymSched's page
/// moves charged at its own migration's [`ASYM_S_PER_GB`]. Returns the sweep and AsymSched's run.
fn asym_near_best(
    m8: &ptb_topology::Machine,
    wl: &ptb_sim::Workload,
    base: &SimOptions,
    jobs: usize,
) -> Result<(subsets::Sweep, RunResult), SimError> {
    let first = subsets::sweep(m8, wl, 24, 3, base, jobs)?;
    let stretch = (ASYM_MIN_RUN_S / first.best_s.max(1e-9)).max(1.0);
    let opts = SimOptions { duration_scale: base.duration_scale * stretch, ..base.clone() };
    let sweep = if stretch > 1.0 { subsets::sweep(m8, wl, 24, 3, &opts, jobs)? } else { first };
    let mut m = m8.clone();
    m.costs.page_us = ASYM_S_PER_GB * 1e6 * m.page_size as f64 / (1u64 << 30) as f64;
    m.costs.copy_gbps = 1.0 / ASYM_S_PER_GB;
    let sim = ptb_sim::Simulation::new(m, vec![wl.clone()], SimOptions { threads: Some(24), ..opts })?;
    let run =
        sim.run_policy(ptb_policy::PolicySpec::plain(ptb_policy::PolicyKind::Asymsched), &ptb_policy::Params::new())?;
    Ok((sweep, run))
}

fn label(policy: &str) -> &'static str {
    match policy {
        "first-touch" => "default",
        "interleave" => "interleave",
        _ => "balancing",
    }
}

fn npb_id(w: &str, what: &str) -> &'static str {
    match (w, what) {
        ("cg", "interleave") => "npb-cg-interleave",
        ("cg", _) => "npb-cg-balancing",
        ("mg", "interleave") => "npb-mg-interleave",
        ("mg", _) => "npb-mg-balancing",
        ("lu", "interleave") => "npb-lu-interleave",
        ("lu", _) => "npb-lu-balancing",
        ("ep", "interleave") => "npb-ep-interleave",
        _ => "npb-ep-balancing",
    }
}

fn asym_id(w: &str) -> &'static str {
    match w {
        "streamcluster" => "asymsched-near-best-streamcluster",
        "pca" => "asymsched-near-best-pca",
        _ => "asymsched-near-best-facesim",
    }
}

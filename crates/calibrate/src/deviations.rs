//! The calibration's known deviations: items the simulated world does not reproduce today,
//! each with the cause as far as it is understood.
//!
//! Problem: the calibration target (every direction right, 80% of sizes within 30%) is not met,
//! and a test that only says "fails" would either be ignored or be loosened until it cannot fail.
//!
//! Approach: every item judged wrong today is listed here with its cause. The calibration test
//! fails when an item *not* listed goes wrong (a regression) and when a listed item is right
//! again (the list must be kept true: delete its line). `ptb calibrate` marks listed items as
//! "known" so readers see which gaps are understood.

/// The cause shared by the items that opteron6272-4n's controller figures put out of reach (a
/// macro so that one item can extend it with `concat!`).
macro_rules! controllers_cause {
    () => {
        "opteron6272-4n's controllers are the thesis' pseudo-random STREAM figures (4.8 GB/s a node, derived), so a program whose pages sit on one node is held by that one controller under the default and by all four once they are spread: the gain is close to 4x whenever the program can demand more than the four give, and at 150 ns the models demand canneal 35, cg 55, mg 49-91 and fluidanimate 8-38 GB/s (by phase). A per-core limit on outstanding misses does not change that: the hardware's (Bulldozer: 23 outstanding L2 misses per two-core module) is above the suite's mlp (1.5-6) and never binds, and 64 threads keep one 4.8 GB/s controller saturated at any limit above ~0.3 lines per thread. A per-die limit (Little's law) fitted to the thesis' one-die interleaved 3.2 GB/s (6-8 lines) lowers the gains only to 3.4-3.7x, moves the one-die sweep's peak to 5-25% remote (published 60-70%) and collapses AsymSched's node-subset spreads on the same processor (largest 130% -> 21%, published 237%), so it was not adopted. The published gains (cg 3.78x, mg 2.84x, canneal ~2x) need mg and canneal to be less memory-bound under interleave than their models; their intensities (apki, ips, mlp) are not published"
    };
}

/// The shared cause (see `controllers_cause`).
const CONTROLLERS: &str = controllers_cause!();

/// (item id, cause) of every item judged wrong today.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "npb-mg-interleave",
        CONTROLLERS,
    ),
    (
        "npb-mg-balancing",
        CONTROLLERS,
    ),
    (
        "ptb-canneal-interleave",
        CONTROLLERS,
    ),
    (
        "ptb-fluidanimate",
        concat!(controllers_cause!(), "; with pages spread by PTB fluidanimate gains as interleave would"),
    ),
    (
        "npb-lu-interleave",
        "the NPB 3.3 OpenMP source first-touches every LU array in parallel loops over k-planes (setbv, setiv, erhs; static schedule), nothing serially, so the model's pages are evenly spread and interleave has nothing to even out. The published map's 38% on one node is not memory traffic: it is the pipeline's spin-wait (sync_left/sync_right loop on the flags isync, one page first touched by the master), whose loads hit the cache and which op sampling tags; the model has it (38% on the master's node in the sampled map) and it loads no controller. Besides, the model's lu keeps all four controllers busy (18.9 of 19.2 GB/s) under every placement",
    ),
    (
        "npb-map-lu-balancing-local",
        "with lu's access pattern from the NPB source (pages first touched by k-planes; the triangular sweeps and rhs's zeta fluxes, three quarters of the work, run over j-blocks of every plane, so each page has one sweeping thread and one plane owner) the model's balancer moves each page to its sweeping thread and reaches 64% local in the sampled map (76% of the memory accesses; the spin-wait's loads on the master's flags page, about a fifth of the sampled ops, are local on one node in four) where the kernel reached 43%. It is not the task side: the model's balancer leaves moved tasks unpinned with a preferred node, and the simulated scheduler keeps them there as 3.13's load balancer does (runqueue classes, NUMA_FAVOUR_HIGHER), giving lu 76% of its memory accesses (70% with the tasks pinned instead; 31% with them unpinned and that bias switched off, which also dropped mg/ep to 31/34%, and cg to 31% before its gathered vector's loads were modelled as cache hits) and cg/mg/ep 54/63/88% (published 68/71/77%). The published 43% needs the kernel to have moved fewer of lu's pages to their sweeping threads, or to have kept its tasks off their preferred nodes more than its balancer's rules say (the time a wandering task spends away before the balancer brings it back is not modelled); neither is checked",
    ),
    (
        "ptb-table-conflicts",
        "the table fills (100%, as published) but sees 0.30 million conflicts a cycle (canneal; fluidanimate 0.24), not 0.5. A conflict is a sample that lands on a slot holding another page, so a cycle has at most as many conflicts as memory-op samples, and both programs get about 0.35 million a cycle: the sampling period (131,072 cycles on each of the 64 cores) is set so that canneal gives the thesis' 30,000 DRAM samples/s, and the model's canneal makes 30 DRAM accesses per 350 memory ops (8.6%). More distinct pages cannot raise the conflicts past 0.35 million. The published 30,000-35,000 DRAM samples/s and 0.5 million conflicts together need DRAM to be at most ~6-7% of canneal's sampled memory ops (its misses per memory op are not published), or the 0.5 million was reached by another of the thesis' programs (\"for some programs\"); neither is checked",
    ),
    (
        "asym-subsets-max",
        "the spreads between node subsets depend on which links the 8-node Opteron has and how wide each is; the source gives only some of them and the preset chose the rest (see its notes), so the widest spread (237% published) is not reached",
    ),
    (
        "asym-subsets-median",
        "same cause as asym-subsets-max",
    ),
    (
        "asym-best-vs-mean",
        "same cause as asym-subsets-max",
    ),
    (
        "asym-streamcluster-2n",
        "same cause as asym-subsets-max: on two nodes the chosen links make the worst pair worse than the published one",
    ),
    (
        "npb-map-lu-interleave-top-node",
        "the published lu.C maps disagree with each other under the model's reading of the default one. The model's spin-wait loads on the flags page isync (cache hits that op sampling tags, about a fifth of the sampled ops) put 38% of the sampled accesses on that page's node, as the published default map has on node 1; but interleave places that one page on one node too, so the model gives the busiest node 38% under interleave as well, where the published interleave map has 24-27% on every node. If the spin loads were a small share, the default's 38% would have to be data on one node, which the NPB 3.3 source's parallel first touch (setbv, setiv, erhs over k-planes) does not give; which of the two readings is wrong is not known (how the study's maps were sampled is not published)",
    ),
    (
        "npb-map-ep-default-top-node",
        "ep's arrays are thread-local storage that glibc zero-fills on the creating thread, so they land on the master's node (100% in the model); the published 68% on one node and 30% on another says the master ran on a second node while it created about a third of the team, which the model's team creation (the master stays where it is while it creates the team) does not do. ep makes almost no memory accesses, so no speed-up depends on it",
    ),
    (
        "npb-lu-balancing",
        "the model's lu keeps all four controllers busy (18.9 of 19.2 GB/s) under the default, whose pages are already evenly spread by parallel first touch, so neither moving pages towards their users nor spreading them can make it faster; the real lu gained 10% with 43% local accesses, so it was not held by the controllers (a lower memory intensity than the model's apki 10 is a hypothesis, not checked)",
    ),
];

/// The cause of a known deviation, if `id` is one.
pub fn cause(id: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(k, _)| *k == id).map(|(_, c)| *c)
}

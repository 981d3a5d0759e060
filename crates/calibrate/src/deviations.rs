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
        "ptb-table-conflicts",
        "the table fills (100%, as published) but sees 0.30 million conflicts a cycle (canneal; fluidanimate 0.24), not 0.5. A conflict is a sample that lands on a slot holding another page, so a cycle has at most as many conflicts as memory-op samples, and both programs get about 0.35 million a cycle: the sampling period (131,072 cycles on each of the 64 cores) is set so that canneal gives the thesis' 30,000 DRAM samples/s, and the model's canneal makes 30 DRAM accesses per 350 memory ops (8.6%). More distinct pages cannot raise the conflicts past 0.35 million. The published 30,000-35,000 DRAM samples/s and 0.5 million conflicts together need DRAM to be at most ~6-7% of canneal's sampled memory ops (its misses per memory op are not published), or the 0.5 million was reached by another of the thesis' programs (\"for some programs\"); neither is checked",
    ),
    (
        "asym-subsets-max",
        "the spreads over node subsets are set by the suite's programs more than by the link map's free choices: a local search over the preset's unpublished choices (each of the 14 links between packages 8-bit, 16-bit or 16/8-bit, at most 48 bits of HT port a die, the Bandwidth Graph recomputed from them; and, separately, the six 2-hop routes that are not published) moved the largest spread between 130% and 145% (streamcluster), the median between 20.6% and 21.7% and the best subset's gain over the average one between 34% and 48%, never within 30% of the published 237%, 14% and 88%. The published 237% was reached by facerec (SPEC OMP), which the suite does not model (the program behind the 88% is not named), and the published median is over the study's 20 programs, not these",
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
        "the worst pair is nodes 3 and 7: the published read of node 3 by node 7 at 2 GB/s (a path cap in the model) makes streamcluster 2.9x slower there than on a 16-bit pair, and the next worst pair is only 49% slower than the best. The link widths and routes searched for asym-subsets-max leave it at 189%; with that read at 3 GB/s it would be 93%, so the published 133% and the published 2 GB/s do not fit together in the model (whether the 2 GB/s was measured with one core or the whole die is not published)",
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
        "the model's balancer leaves lu slower than the default in its steady state, not through its copies: with seed 1 it moves 166,808 pages (lu has 81,920) and 74 threads, and the copies' 3.45 s of CPU time are spread over the 64 threads (about 0.1% of the run each), but from 20 s on, with no page moving any more, lu progresses 3.5% slower than under the default (1.00 against 1.04 iterations a second). Its task placement takes each thread to the node of its own k-planes (the rhs phase's private faults; the share of pages on their plane owner's node is 0.93, against 0.17-0.35 under the default, whose scheduler keeps moving the threads), and the pages settle there in an arrangement where consecutive planes share a node more often: the pipelined sweeps' window of planes (the wavefront that makes interleave gain 1.10x, published 1.08x) has its busiest node at 35.6% of the window's pages on average (worst 70.5%) against 30.4% (worst 46.2%) under the default, and lu is held by the controllers (17.3 of 19.2 GB/s under the default), so that concentration costs it what locality does not give back: 0.95x where the real lu gained 10% with the same 43% local accesses (42.6% in the model). Why the kernel's placement keeps lu's windows even (or why the real lu was not held by its controllers) is not known from the published data. A lower memory intensity does not change the verdict: with apki 4 (the NPB source's 1,985 flops and about 17 lines of 3-D array traffic per grid point and iteration, at an assumed 2.25 instructions per flop) the model's lu still keeps 17.1 GB/s of the 19.2 busy and balancing gives 0.93x. Faster controllers (16 GB/s a node, the 8-node preset's assumption for the same die, against the thesis' pseudo-random 4.8) give 0.97x, and bring mg, canneal-interleave and fluidanimate within 30% but put cg's balancing (1.98x against 3.64x), its fast scan (which then no longer helps) and both run lengths out of it: 20/22 directions and 32/47 sizes (8 GB/s: 19/22, 33/47), so the preset keeps the thesis' figure",
    ),
];

/// The cause of a known deviation, if `id` is one.
pub fn cause(id: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(k, _)| *k == id).map(|(_, c)| *c)
}

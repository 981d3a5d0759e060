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

/// (item id, cause) of every item judged wrong today.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "npb-mg-interleave",
        "opteron6272-4n's controllers are the thesis' pseudo-random STREAM figures (about 4 GB/s a node); a program whose pages sit on one node under the default is then held by that one controller, and spreading them gains close to the four controllers' 4x. The published gains say the real programs were less held by it; a per-core limit on outstanding misses (Little's law) would cap the default's loss, but the one tried broke the MLC reproduction and was taken out",
    ),
    (
        "npb-mg-balancing",
        "opteron6272-4n's controllers are the thesis' pseudo-random STREAM figures (about 4 GB/s a node); a program whose pages sit on one node under the default is then held by that one controller, and spreading them gains close to the four controllers' 4x. The published gains say the real programs were less held by it; a per-core limit on outstanding misses (Little's law) would cap the default's loss, but the one tried broke the MLC reproduction and was taken out",
    ),
    (
        "ptb-canneal-interleave",
        "opteron6272-4n's controllers are the thesis' pseudo-random STREAM figures (about 4 GB/s a node); a program whose pages sit on one node under the default is then held by that one controller, and spreading them gains close to the four controllers' 4x. The published gains say the real programs were less held by it; a per-core limit on outstanding misses (Little's law) would cap the default's loss, but the one tried broke the MLC reproduction and was taken out",
    ),
    (
        "ptb-fluidanimate",
        "opteron6272-4n's controllers are the thesis' pseudo-random STREAM figures (about 4 GB/s a node); a program whose pages sit on one node under the default is then held by that one controller, and spreading them gains close to the four controllers' 4x. The published gains say the real programs were less held by it; a per-core limit on outstanding misses (Little's law) would cap the default's loss, but the one tried broke the MLC reproduction and was taken out; with pages spread by PTB fluidanimate gains as interleave would",
    ),
    (
        "npb-cg-fast-scan",
        "the published fast scan beats interleave (4.97x vs 3.78x); the model's balancer at 1 GB per scan gains only about 5% over the default scan; not yet explained (hypothesis: the model's balancer already reaches its final placement within the default scan's first passes)",
    ),
    (
        "npb-lu-interleave",
        "the NPB 3.3 OpenMP source first-touches every LU array in parallel loops over k-planes (setbv, setiv, erhs; static schedule), nothing serially, so the model's pages are evenly spread (25% on the top node) and interleave has nothing to even out; the published 38% node is not explained by the source (hypothesis, not checked: the study's maps count sampled memory operations, cache hits included, by the page's node, so small hot data first touched by the master thread weighs in). Besides, the model's lu keeps all four controllers busy (18.9 of 19.2 GB/s) under every placement",
    ),
    (
        "npb-map-lu-default-top-node",
        "same cause as npb-lu-interleave: the NPB source first-touches all of lu's arrays in parallel by k-planes, so the model spreads them evenly",
    ),
    (
        "npb-map-lu-balancing-local",
        "with lu's access pattern from the NPB source (pages first touched by k-planes; the triangular sweeps and rhs's zeta fluxes, three quarters of the work, run over j-blocks of every plane, so each page has one sweeping thread and one plane owner) the model's balancer moves each page to its sweeping thread and reaches 71% local where the kernel reached 43%. The model's balancer pins the tasks it moves (autonuma.pin_moves) because the simulated scheduler lacks 3.13's preferred-node bias (NUMA_FAVOUR_HIGHER); moving them unpinned, as the kernel does, gave lu 34% local but also cg/mg/ep 32-35% (published 68-77%) and lu 0.87x (measured before lu's sweeps were modelled)",
    ),
    (
        "ptb-table-conflicts",
        "the table fills (100%, as published) but sees 0.3 million conflicts a cycle, not 0.5; hypothesis, not checked: the model's canneal touches fewer distinct pages per cycle than the real one",
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
        "npb-lu-balancing",
        "the model's lu keeps all four controllers busy (18.9 of 19.2 GB/s) under the default, whose pages are already evenly spread by parallel first touch, so neither moving pages towards their users nor spreading them can make it faster; the real lu gained 10% with 43% local accesses, so it was not held by the controllers (a lower memory intensity than the model's apki 10 is a hypothesis, not checked)",
    ),
];

/// The cause of a known deviation, if `id` is one.
pub fn cause(id: &str) -> Option<&'static str> {
    KNOWN.iter().find(|(k, _)| *k == id).map(|(_, c)| *c)
}

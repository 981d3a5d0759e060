#!/usr/bin/env python3
"""Summarise `ptb compare --report DIR` runs (used by scripts/heldout.sh and scripts/figures.sh).

Problem: docs/heldout.md needs, per machine, ptb's geometric mean against the best other policy
and oracle-moved, and per workload ptb's share of oracle-moved's gain, with the workloads where
ptb falls short flagged by fixed rules. Approach: read each run's compare.json summary (mean
speed-up over seeds per workload and policy) and print Markdown. Every figure is SIMULATED.

Usage: heldout_summary.py NAME=DIR [NAME=DIR ...]
"""
import json
import math
import sys

POLICY = "ptb"
BOUNDS = {"oracle", "oracle-moved"}
# Flag rules (docs/heldout.md): slower than the default, or short of oracle-moved's gain.
MIN_VS_DEFAULT = 0.98
MIN_SHARE = 0.90
MIN_ORACLE_GAIN = 0.10


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def summarise(name, path):
    with open(f"{path}/compare.json", encoding="utf-8") as f:
        s = json.load(f)["summary"]
    pols, wls = s["policies"], s["workloads"]
    mean = {(w, p): s["cells"][i][j]["mean"] for i, w in enumerate(wls) for j, p in enumerate(pols)}
    gm = {p: geomean([mean[(w, p)] for w in wls]) for p in pols}
    others = [p for p in pols if p not in BOUNDS and p != POLICY]
    best = max(others, key=lambda p: gm[p])
    out = [f"### {name}", ""]
    out.append(
        f"Geometric mean (simulated): **{POLICY} {gm[POLICY]:.2f}x**, best other policy "
        f"{best} {gm[best]:.2f}x, oracle-moved {gm['oracle-moved']:.2f}x, oracle {gm['oracle']:.2f}x."
    )
    out.append("")
    out.append(
        f"| workload | {POLICY} | best other | oracle-moved | {POLICY}'s share of oracle-moved's gain | flag |"
    )
    out.append("| --- | --- | --- | --- | --- | --- |")
    flagged = []
    for w in wls:
        x, om = mean[(w, POLICY)], mean[(w, "oracle-moved")]
        bo = max(others, key=lambda p: mean[(w, p)])
        gain = om - 1.0
        share = (x - 1.0) / gain if abs(gain) > 1e-9 else float("nan")
        flags = []
        if x < MIN_VS_DEFAULT:
            flags.append(f"< {MIN_VS_DEFAULT}x of first-touch")
        if gain > MIN_ORACLE_GAIN and share < MIN_SHARE:
            flags.append(f"< {MIN_SHARE:.0%} of oracle-moved's gain")
        if flags:
            flagged.append(w)
        share_txt = "-" if math.isnan(share) or gain <= 0.01 else f"{share:.0%}"
        out.append(
            f"| {w} | {x:.2f}x | {bo} {mean[(w, bo)]:.2f}x | {om:.2f}x | {share_txt} | "
            f"{'**' + '; '.join(flags) + '**' if flags else ''} |"
        )
    out.append("")
    out.append(f"Flagged: {', '.join(flagged) if flagged else 'none'}.")
    out.append("")
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = []
    for arg in sys.argv[1:]:
        name, _, path = arg.partition("=")
        lines += summarise(name, path)
    print("\n".join(lines))


if __name__ == "__main__":
    main()

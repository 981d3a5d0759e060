#!/usr/bin/env bash
# Time to first result, side by side in one run.
#
# Problem: what a new user waits for is `cargo run --release -- compare` on a fresh clone,
# build included; a figure from another day or another load on the box says little.
# Approach: clone two revisions of this repository (default: `main` and `HEAD`) into fresh
# directories, then for each in turn, with its own empty target directory, time
# (1) `cargo build --release --bin ptb` (what `cargo run --release` and `cargo install` do
# first) and (2) the `ptb compare` it built, to its table. Wall and CPU seconds (user+sys of
# cargo, rustc and ptb) for each; CPU seconds are the fairer figure on a shared box.
#
# Usage: scripts/first-result.sh [OLD_REV [NEW_REV]] [-- COMPARE ARGS]
# Env: FR_DIR (work dir, default a new one under target/first-result; removed at the end
# unless FR_KEEP=1). Crates are fetched into the usual cargo home (offline when cached).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
OLD=main NEW=HEAD
[ $# -gt 0 ] && [ "$1" != -- ] && { OLD=$1; shift; }
[ $# -gt 0 ] && [ "$1" != -- ] && { NEW=$1; shift; }
[ "${1:-}" = -- ] && shift
ARGS=("$@")
REPO=$PWD
mkdir -p target/first-result
W=${FR_DIR:-$(mktemp -d "$REPO/target/first-result/run.XXXXXX")}

CPU_F=$(mktemp)
trap 'rm -f "$CPU_F"; [ "${FR_KEEP:-0}" = 1 ] || rm -rf "$W"' EXIT
cpu_s() {  # sets CPU: user+sys seconds of this shell's finished children so far. `times` runs
  # in this shell, not in a $(...) subshell, which has no children of its own.
  times > "$CPU_F"
  CPU=$(awk 'NR==2 { split($1,u,"m"); split($2,s,"m"); printf "%.1f", u[1]*60 + u[2] + s[1]*60 + s[2] }' "$CPU_F")
}
now() { date +%s.%N; }

LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
ROWS=()
for side in old new; do
  rev=$([ $side = old ] && echo "$OLD" || echo "$NEW")
  sha=$(git rev-parse --short "$rev")
  d=$W/$side
  git clone --quiet --no-local --no-checkout "$REPO" "$d"
  git -C "$d" checkout --quiet "$sha"
  echo "== $side: $rev ($sha): cargo build --release --bin ptb (fresh target dir)"
  cpu_s; c0=$CPU t0=$(now)
  (cd "$d" && cargo build --quiet --release --bin ptb)
  cpu_s; c1=$CPU t1=$(now)
  echo "== $side: ptb compare ${ARGS[*]}"
  "$d/target/release/ptb" compare "${ARGS[@]}" > "$d/compare.out"
  cpu_s; c2=$CPU t2=$(now)
  head -n 3 "$d/compare.out"
  ROWS+=("$(awk -v s="$side $sha" -v b="$(echo "$t1 - $t0" | bc)" -v bc="$(echo "$c1 - $c0" | bc)" \
    -v r="$(echo "$t2 - $t1" | bc)" -v rc="$(echo "$c2 - $c1" | bc)" \
    'BEGIN { printf "%-14s %8.0f %8.0f %9.1f %9.1f %8.0f %8.0f", s, b, bc, r, rc, b + r, bc + rc }')")
done
echo "== time to first result ($(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average at the start: $LOAD)"
printf '%-14s %8s %8s %9s %9s %8s %8s\n' "" "build" "build" "compare" "compare" "total" "total"
printf '%-14s %8s %8s %9s %9s %8s %8s\n' "revision" "wall s" "CPU s" "wall s" "CPU s" "wall s" "CPU s"
printf '%s\n' "${ROWS[@]}"

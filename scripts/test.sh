#!/usr/bin/env bash
# Runs every check and test of ptb on a fresh machine: format, lints, unit/property/golden/
# simulator tests, then the real-kernel VM tests (QEMU guest with emulated NUMA nodes) when
# the harness exists. Installs what it needs through the project's own scripts.
#
# Each stage is one `stage NAME COMMAND...` line below; its wall and CPU time (user+sys of
# everything it ran) are printed when it ends and all of them again at the end (also on
# failure). On a shared machine the CPU time is the steadier figure. The VM tests pack the release binaries
# that `cargo run --release` and `cargo install --path crates/cli` also use: no separate
# static build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

STAGES=()
T_ALL=$(date +%s)
CPU_F=$(mktemp)
cpu_s() {  # sets CPU: user+sys seconds of every finished child of this script so far (cargo,
  # rustc, tests). `times` runs in this shell, not in a $(...) subshell, which has no children.
  times > "$CPU_F"
  CPU=$(awk 'NR==2 { split($1,u,"m"); split($2,s,"m"); printf "%.0f", u[1]*60 + u[2] + s[1]*60 + s[2] }' "$CPU_F")
}
stage() {  # stage NAME COMMAND...: run one stage and record its wall and CPU time
  local name=$1 t0 c0 line
  shift
  echo "== $name"
  t0=$(date +%s)
  cpu_s
  c0=$CPU
  "$@"
  cpu_s
  line=$(printf '%6d s %7d s  %s' $(($(date +%s) - t0)) $((CPU - c0)) "$name")
  STAGES+=("$line")
  echo "   ($name: $(($(date +%s) - t0)) s wall, $((CPU - c0)) s CPU)"
}
summary() {
  local rc=$?
  cpu_s
  rm -f "$CPU_F"
  echo "== stage times ($(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  printf '   %6s   %7s    %s\n' wall CPU stage
  [ ${#STAGES[@]} = 0 ] || printf '   %s\n' "${STAGES[@]}"
  printf '   %6d s %7d s  %s\n' $(($(date +%s) - T_ALL)) "$CPU" "in all$([ $rc = 0 ] || echo ", FAILED (exit $rc)")"
}
trap summary EXIT

# PTB_TEST_ARGS: extra `cargo test` arguments for the run stage only (the build stage still
# compiles everything), e.g. "--exclude ptb-calibrate" to leave out the calibration tier.
run_tests() {
  # shellcheck disable=SC2086
  cargo test --workspace ${PTB_TEST_ARGS:-} --quiet 2>&1 | tee target/test.log
}

stage "cargo fmt --check" cargo fmt --all -- --check
stage "cargo clippy -D warnings" cargo clippy --workspace --all-targets --quiet -- -D warnings
stage "cargo test: build" cargo test --workspace --no-run --quiet
stage "cargo test: run" run_tests
if [ -x tests/vm/run.sh ] && [ "${PTB_SKIP_VM:-0}" != 1 ]; then
  # The VM tests run the release binaries: the same build `cargo run --release` and
  # `cargo install --path crates/cli` use (a no-op when one of them ran before).
  stage "release build (shared with cargo run --release)" \
    cargo build --release --quiet -p ptb -p ptb-linux --bin ptb --bin ptb-testapp
  stage "VM tests (QEMU, emulated NUMA nodes)" tests/vm/run.sh
fi

#!/usr/bin/env bash
# Runs every check and test of ptb on a fresh machine: format, lints, unit/property/golden/
# simulator tests, then the real-kernel VM tests (QEMU guest with emulated NUMA nodes) when
# the harness exists. Installs what it needs through the project's own scripts.
#
# Each stage is one `stage NAME COMMAND...` line below; its wall time is printed when it ends
# and all of them again at the end (also on failure). The VM tests pack the release binaries
# that `cargo run --release` and `cargo install --path crates/cli` also use: no separate
# static build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

STAGES=()
T_ALL=$(date +%s)
stage() {  # stage NAME COMMAND...: run one stage and record its wall time
  local name=$1 t0
  shift
  echo "== $name"
  t0=$(date +%s)
  "$@"
  STAGES+=("$(printf '%5d s  %s' $(($(date +%s) - t0)) "$name")")
  echo "   ($name: $(($(date +%s) - t0)) s)"
}
summary() {
  local rc=$?
  echo "== stage times (wall, $(nproc) CPUs)"
  printf '   %s\n' "${STAGES[@]}"
  printf '%8d s  %s\n' $(($(date +%s) - T_ALL)) "in all$([ $rc = 0 ] || echo ", FAILED (exit $rc)")"
}
trap summary EXIT

run_tests() {
  cargo test --workspace --quiet 2>&1 | tee target/test.log
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

#!/usr/bin/env bash
# Runs every check and test of ptb on a fresh machine: format, lints, unit/property/golden/
# simulator tests, then the real-kernel VM tests (QEMU guest with emulated NUMA nodes) when
# the harness exists. Installs what it needs through the project's own scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --quiet 2>&1 | tee target/test.log
if [ -x tests/vm/run.sh ] && [ "${PTB_SKIP_VM:-0}" != 1 ]; then
  echo "== VM tests (QEMU, emulated NUMA nodes)"
  tests/vm/run.sh
fi

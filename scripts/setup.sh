#!/usr/bin/env bash
# Sourced by the other scripts: makes sure the Rust toolchain and components are present.
if ! command -v cargo >/dev/null 2>&1; then
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "ptb needs Rust (cargo): install it from rustup" >&2; exit 1; }
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt >/dev/null 2>&1 || true
mkdir -p target

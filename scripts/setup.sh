#!/usr/bin/env bash
# Installs what the project needs beyond a stable Rust toolchain; idempotent.
# .ci/run calls it; on a fresh machine run it once (as root for the system
# parts). Today: the nightly toolchain with Miri and rust-src, for
# scripts/miri.sh.
set -euo pipefail

if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "setup: installing the nightly toolchain with miri and rust-src"
  rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
cargo +nightly miri setup >/dev/null

#!/usr/bin/env bash
# Runs the datapath and key-value tests under AddressSanitizer and
# ThreadSanitizer (nightly, std rebuilt with the sanitizer so that it is
# instrumented too). Not part of CI (each build takes several minutes); the
# last run is recorded in crates/cornflakes-datapath/README.md and
# crates/cornflakes-kv/README.md.
#
#   scripts/sanitizers.sh            # both
#   scripts/sanitizers.sh address    # one
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add rust-src --toolchain nightly >/dev/null 2>&1 || true

target=$(rustc -vV | sed -n 's/^host: //p')
for san in "${@:-address thread}"; do
  for s in $san; do
    echo "== $s sanitizer: cornflakes-datapath, cornflakes-kv"
    RUSTFLAGS="-Zsanitizer=$s" RUSTDOCFLAGS="-Zsanitizer=$s" \
      CARGO_TARGET_DIR="target/sanitizer-$s" \
      TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1}" \
      ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
      cargo +nightly test -Zbuild-std --target "$target" \
        -p cornflakes-datapath -p cornflakes-kv --lib --tests
  done
done

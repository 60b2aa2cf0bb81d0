#!/usr/bin/env bash
# Before/after of comparing leased bytes in place (one memcmp) instead of
# through a 4 KiB bounce buffer: `cf ipc-compare` of two builds in turns,
# each going first in alternate rounds.
# Usage: run.sh BEFORE_CF AFTER_CF ROUNDS   (binaries built with
# `cargo build --release --bin cf` at 278642a and f32a58d)
set -euo pipefail
before=$1 after=$2 rounds=${3:-3}
out=$(dirname "$0")
for r in $(seq 1 "$rounds"); do
  order="before after"
  [ $((r % 2)) = 0 ] && order="after before"
  for which in $order; do
    bin=$before
    [ "$which" = after ] && bin=$after
    echo "== round $r $which $(date -u +%H:%M:%S)"
    "$bin" ipc-compare --sizes 2048,65536,1048552 --repeats 3 | grep -A4 '^round trip, median' | grep -v '^\[{'
  done
done | tee "$out/ipc-compare-turns.txt"

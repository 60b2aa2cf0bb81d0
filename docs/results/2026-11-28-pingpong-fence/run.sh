#!/usr/bin/env bash
# Round trips before and after the per-batch fence (b1d5439): `cf pingpong
# --transport shm` of two builds in turns, each first in alternate rounds.
# Usage: run.sh BEFORE_CF AFTER_CF ROUNDS   (release builds of 13df4ed and f32a58d)
set -euo pipefail
before=$1 after=$2 rounds=${3:-3}
for r in $(seq 1 "$rounds"); do
  order="before after"
  [ $((r % 2)) = 0 ] && order="after before"
  for which in $order; do
    bin=$before
    [ "$which" = after ] && bin=$after
    for size in 8 2048; do
      printf 'round %s %-6s %5s B ' "$r" "$which" "$size"
      "$bin" pingpong --transport shm --size "$size" --iters 200000 2>/dev/null | tail -1 |
        python3 -c 'import json,sys; r=json.load(sys.stdin); print("p50 %d ns  p99 %d ns  p99.9 %d ns  mean %.1f ns" % (r["p50_ns"], r["p99_ns"], r["p999_ns"], r["mean_ns"]))'
    done
  done
done

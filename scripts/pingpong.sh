#!/usr/bin/env bash
# Ping-pong round trips over the bare ring, the shared-memory datapath and
# UDP on loopback, 8 B and 2048 B, each repeated; server on core 0, client
# on core 1. Prints per-run medians and p99, then the median over runs and
# the ratios the project tracks (shm / bare <= 1.3; udp / shm >= 20).
# Usage: scripts/pingpong.sh [repeats] [iters]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
iters=${2:-100000}
cargo build -q --release --bin cf
out=$(mktemp)
for r in $(seq "$repeats"); do
  for size in 8 2048; do
    for t in bare shm udp; do
      n=$iters
      [ "$t" = udp ] && n=$((iters / 5))
      ./target/release/cf pingpong --transport "$t" --size "$size" --iters "$n" --warmup $((n / 10)) 2>/dev/null | tail -1 | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = {}
for size in (8, 2048):
    print(f"\n{size} B messages (median over {len([r for r in runs if r['size']==size and r['transport']=='bare'])} runs)")
    for t in ("bare", "shm", "udp"):
        rs = [r for r in runs if r["size"] == size and r["transport"] == t]
        med[(t, size)] = statistics.median(r["p50_ns"] for r in rs)
        p99 = statistics.median(r["p99_ns"] for r in rs)
        print(f"  {t:<5} p50 {med[(t, size)]:>9.0f} ns   p99 {p99:>9.0f} ns   runs: {[r['p50_ns'] for r in rs]}")
    print(f"  shm / bare = {med[('shm', size)] / med[('bare', size)]:.2f}x (target <= 1.3)"
          f"   udp / shm = {med[('udp', size)] / med[('shm', size)]:.1f}x (target >= 20)")
PY

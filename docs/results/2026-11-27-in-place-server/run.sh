#!/bin/bash
# Side by side, interleaved: cf compare of Cornflakes with copies (default)
# and with trusted peers (--in-place: the server gathers requests into its
# shared pool, the load generator reads responses in place).
# usage: run.sh OUTDIR REPEATS WORKLOAD...
set -u
out=$1; reps=$2; shift 2
mkdir -p "$out"
for r in $(seq 1 "$reps"); do
  for w in "$@"; do
    for m in gather in-place; do
      flag=""; [ $m = in-place ] && flag="--in-place"
      dir=$out/$w-$m-$r
      target/release/cf compare --workload "$w" --systems cornflakes $flag --out "$dir" > "$dir.log" 2>&1
      python3 - "$dir/summary.json" "$w" "$m" "$r" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))["workloads"][0]["systems"][0]
keys = ["max_achieved_rps", "probe_rps", "server_busy_capacity_rps", "p99_us", "errors", "timeouts", "slow_phase_reruns"]
print(sys.argv[2], sys.argv[3], "rep" + sys.argv[4], " ".join(f"{k}={row.get(k)}" for k in keys), flush=True)
PY
    done
  done
done

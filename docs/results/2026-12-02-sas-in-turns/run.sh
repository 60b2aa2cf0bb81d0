#!/usr/bin/env bash
# Serialize-and-send against the same server without it, in shuffled turns
# of 2048 requests in one server (cf thresholds --interleaved), two rounds
# of every workload of cf compare's default set; server core 0, load
# generator core 1, closed loop, 10 s each.
set -euo pipefail
cf=${CF:-../../../target/release/cf}
for round in 1 2; do
  for w in 'echo:fields=2,size=2048' ycsb 'google:max=8' twitter cdn; do
    echo "== round $round $w"
    "$cf" thresholds --workload "$w" --interleaved 10 --turns 512,512-no-sas 2>&1 | grep -v "^kv-server\|preloading\|^interleaved"
  done
done

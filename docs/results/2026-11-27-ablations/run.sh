#!/bin/bash
# The hybrid at the calibrated threshold (128 B) against only-sg (0) and only-copy (never), in turns in one server.
# DIR, CF, REPEATS and WORKLOADS may be given in the environment (defaults: this folder's run).
cd "${DIR:-/work/runs/ablations}"
CF=${CF:-/work/main/target/release/cf}
$CF hiccup 2>&1 | grep 'round trip'
for rep in ${REPEATS:-1 2 3}; do
  for w in ${WORKLOADS:-echo ycsb google twitter cdn google:max=1 google:max=4 google:max=8 google:max=16}; do
    echo "=== repeat $rep workload $w"
    $CF thresholds --workload $w --interleaved 4 --turns 128,0,never 2>/dev/null
  done
done
$CF hiccup 2>&1 | grep 'round trip'

#!/bin/bash
# The hybrid at the calibrated threshold (128 B) against only-sg (0) and only-copy (never), in turns in one server.
cd /work/runs/ablations-prefetch
CF=/tmp/cf-prefetch
$CF hiccup 2>&1 | grep 'round trip'
for rep in 1 2 3; do
  for w in echo ycsb google twitter cdn google:max=1 google:max=4 google:max=8 google:max=16; do
    echo "=== repeat $rep workload $w"
    $CF thresholds --workload $w --interleaved 4 --turns 128,0,never 2>/dev/null
  done
done
$CF hiccup 2>&1 | grep 'round trip'

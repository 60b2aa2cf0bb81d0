#!/bin/bash
# Three more repeats of the workloads where the hybrid was below only-sg, with prefetch.
cd /work/runs/ablations-prefetch
CF=/tmp/cf-prefetch
$CF hiccup 2>&1 | grep 'round trip'
for rep in 4 5 6; do
  for w in google twitter google:max=1 google:max=4 google:max=8 google:max=16; do
    echo "=== repeat $rep workload $w"
    $CF thresholds --workload $w --interleaved 4 --turns 128,0,never 2>/dev/null
  done
done
$CF hiccup 2>&1 | grep 'round trip'

#!/bin/bash
for r in 1 2 3 4 5 6; do for w in google:max=4 google:max=8 twitter; do
  target/release/cf thresholds --workload $w --interleaved 4 --turns 128,64,32,0 2>/dev/null | tail -4 | awk -v w=$w -v r=$r '{ printf "%s:%s ", $1, $4} END{print " " w " " r}'
done; done

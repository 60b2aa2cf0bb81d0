#!/bin/bash
target/release/cf hiccup 2>&1 | grep "round trip"
for r in 1 2 3 4 5 6 7 8; do for w in google:max=4 google:max=8 google:max=16 twitter; do
  target/release/cf thresholds --workload $w --interleaved 4 --turns 128,64,0,never 2>/dev/null | tail -4 | awk -v w=$w -v r=$r '{ if ($1=="never") printf "never:%s ", $3; else printf "%s:%s ", $1, $4} END{print " " w " " r}'
done; done
target/release/cf hiccup 2>&1 | grep "round trip"

#!/bin/bash
# Closed-loop end-to-end rate (client-bound) with the old and new value check, builds alternating.
for r in 1 2 3 4 5 6 7 8; do for w in cdn ycsb google:max=8; do for b in s31 s31c; do
  cf-$b thresholds --workload $w --interleaved 2 --turns 128 2>/dev/null | grep "achieved closed loop" | awk -v b=$b -v w=$w -v r=$r '{print w, b, r, $4, $9}'
done; done; done

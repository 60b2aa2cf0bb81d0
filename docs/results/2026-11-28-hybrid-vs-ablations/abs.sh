#!/bin/bash
# Absolute server busy ns/request of the hybrid (128 B): base 609678e vs 8aba291, builds alternating, order swapped each round.
for r in $(seq 1 24); do for w in google google:max=8; do
  if [ $((r % 2)) = 0 ]; then order="base new"; else order="new base"; fi
  for b in $order; do
    bin=target/release/cf; [ $b = base ] && bin=cf-609678e
    $bin thresholds --workload $w --interleaved 2 --turns 128 2>/dev/null | tail -1 | awk -v b=$b -v w=$w -v r=$r '{print w, b, r, $4}'
  done
done; done

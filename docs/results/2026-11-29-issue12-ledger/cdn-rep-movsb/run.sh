#!/bin/bash
# Old (rep movsb) and new (vector loop) builds in turns on CDN, side by side in each run.
for round in 1 2; do
  for b in cf-busy cf-vec; do
    /tmp/$b compare --workload cdn --systems cornflakes cornflakes-only-copy rkyv --repeats 2 --out /tmp/vecab/$b-$round > /tmp/vecab/$b-$round.log 2>&1
  done
done
echo done > /tmp/vecab/rc

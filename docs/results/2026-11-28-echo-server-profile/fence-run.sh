#!/bin/bash
# Before/after the per-batch wake-up fence: cf compare on one workload,
# both builds in turns, R rounds.  usage: run.sh WORKLOAD R [systems...]
W=$1; R=$2; shift 2
out=/work/runs/fence
for r in $(seq 1 $R); do
  for b in before after; do
    bin=$out/cf-$b
    /usr/bin/time -f "%e s" $bin compare --workload $W --systems "$@" --out $out/$W-$b-$r > $out/$W-$b-$r.log 2>&1
    echo "== $W $b round $r ($(tail -1 $out/$W-$b-$r.log))"
  done
done

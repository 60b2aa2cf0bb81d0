#!/bin/bash
# Side by side: old and new load generator, gathering and reading in place, one server, interleaved.
# usage: run.sh WORKLOAD SYSTEM REPEATS
cd /work/main
W=$1; S=$2; R=$3
out=/work/runs/inplace2
sock=/tmp/ipb2-$W-$S.sock
rm -f $sock
taskset -c 0 target/release/cf kv-server --system $S --workload $W --addr $sock > $out/server-$W-$S.log 2>&1 &
srv=$!
for i in $(seq 1 120); do [ -S $sock ] && break; sleep 0.5; done
sleep 1
for r in $(seq 1 $R); do
  for build in ${BUILDS:-before after}; do
  bin=/work/runs/client/cf-$build
  for m in gather in-place; do
    flag=""; [ $m = in-place ] && flag="--in-place"
    log=$out/$W-$S-$build-$m-$r.log
    $bin loadgen --system $S --workload $W --addr $sock --seconds 1 --warmup 0.3 --core 1 --slo p50 $flag > $log 2>&1
    probe=$(grep -m1 "point 1: offered" $log | sed -E 's/.*offered ([0-9]+)\/s.*/\1/')
    max=$(tail -1 $log | python3 -c 'import json,sys; print(json.load(sys.stdin).get("max_achieved_rps"))')
    echo "$W $S $build $m rep$r max=$max"
  done
  done
done
kill $srv; wait $srv 2>/dev/null
rm -f $sock

#!/bin/bash
# Side by side: the load generator gathering vs reading in place, same server, interleaved.
# usage: run.sh WORKLOAD SYSTEM REPEATS
cd /work/main
W=$1; S=$2; R=$3
sock=/tmp/ipb-$W-$S.sock
rm -f $sock
taskset -c 0 target/release/cf kv-server --system $S --workload $W --addr $sock > /work/runs/inplace/server-$W-$S.log 2>&1 &
srv=$!
for i in $(seq 1 60); do [ -S $sock ] && break; sleep 0.5; done
sleep 1
for r in $(seq 1 $R); do
  for m in gather in-place; do
    flag=""; [ $m = in-place ] && flag="--in-place"
    out=/work/runs/inplace/$W-$S-$m-$r.log
    target/release/cf loadgen --system $S --workload $W --addr $sock --seconds 1 --warmup 0.3 --core 1 --slo p50 $flag > $out 2>&1
    probe=$(grep -m1 "point 1: offered" $out | sed -E 's/.*offered ([0-9]+)\/s.*/\1/')
    max=$(tail -1 $out | python3 -c 'import json,sys; print(json.load(sys.stdin).get("max_achieved_rps"))')
    inpl=$(grep -m1 "responses read in place" $out | sed -E 's/.*generator: //' )
    echo "$W $S $m rep$r probe=$((probe*20)) max=$max ${inpl}"
  done
done
kill $srv; wait $srv 2>/dev/null
rm -f $sock

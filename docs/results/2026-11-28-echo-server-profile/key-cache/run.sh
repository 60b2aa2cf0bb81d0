#!/bin/bash
# One server (new build), old and new load generator in turns: closed-loop probe and swept maximum.
# usage: run.sh WORKLOAD SYSTEM REPEATS
W=$1; S=$2; R=$3
out=/work/runs/keys
sock=/tmp/keys-$W-$S.sock
rm -f $sock
taskset -c 0 $out/cf-after kv-server --system $S --workload $W --addr $sock > $out/server-$W-$S.log 2>&1 &
srv=$!
for i in $(seq 1 240); do [ -S $sock ] && break; sleep 0.5; done
sleep 1
for r in $(seq 1 $R); do
  for build in before after; do
    log=$out/$W-$S-$build-$r.log
    $out/cf-$build loadgen --system $S --workload $W --addr $sock --seconds 1 --warmup 0.3 --core 1 --slo p50 > $log 2>&1
    probe=$(grep -m1 "point 1: offered" $log | sed -E 's/.*offered ([0-9]+)\/s \(([0-9]+) %.*/\1 \2/' | awk '{print int($1*100/$2)}')
    max=$(tail -1 $log | python3 -c 'import json,sys; print(json.load(sys.stdin).get("max_achieved_rps"))')
    echo "$W $S $build rep$r probe=$probe max=$max"
  done
done
kill $srv; wait $srv 2>/dev/null
rm -f $sock

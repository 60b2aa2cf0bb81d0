#!/bin/bash
# Server-side profile of echo 2x2048 over shm: perf record (cpu-clock) of
# `cf kv-server` on core 0 while `cf loadgen` (core 1) probes and sweeps it.
# usage: run.sh SYSTEM [in-place]
cd /work/main
S=$1; M=${2:-gather}
out=/work/runs/echo-prof
sock=/tmp/echoprof-$S.sock
flag=""; [ "$M" = in-place ] && flag="--in-place"
rm -f $sock
taskset -c 0 perf record -e cpu-clock -F ${FREQ:-4000} ${PERF_ARGS} -o $out/perf${TAG}-$S-$M.data target/release/cf kv-server --system $S --workload echo $flag --addr $sock > $out/server-$S-$M.log 2>&1 &
srv=$!
for i in $(seq 1 120); do [ -S $sock ] && break; sleep 0.5; done
sleep 1
target/release/cf loadgen --system $S --workload echo --addr $sock --seconds 1 --warmup 0.3 --core 1 --slo p50 $flag > $out/loadgen-$S-$M.log 2>&1
pkill -INT -f "kv-server --system $S --workload echo" ; wait $srv 2>/dev/null
perf report -i $out/perf${TAG}-$S-$M.data --no-children --sort symbol 2>/dev/null | grep -v "^#" | grep -v "^$" | head -25 > $out/perf${TAG}-$S-$M.txt
probe=$(grep -m1 "point 1: offered" $out/loadgen-$S-$M.log | sed -E 's/.*offered ([0-9]+)\/s.*/\1/')
echo "$S $M probe=$probe"
rm -f $sock

#!/bin/bash
# usage: run.sh MODE(default|in-place) RATE: the echo server under perf (cpu-clock) at RATE.
M=$1; R=$2; F=""; [ $M = in-place ] && F=--in-place
sock=/tmp/ipperf-$M.sock; rm -f $sock
perf record -e cpu-clock -F 4000 -g -o /tmp/ipperf/perf-$M.data -- /tmp/cf-keys-new kv-server --system cornflakes --workload echo --addr $sock --core 0 $F > /tmp/ipperf/server-$M.log 2>&1 &
spid=$!
for i in $(seq 1 300); do grep -q -i "listening\|ready\|serving" /tmp/ipperf/server-$M.log && break; sleep 0.5; done
/tmp/cf-keys-new loadgen --system cornflakes --workload echo --addr $sock --core 1 --rate $R --seconds 3 $F 2>&1 | grep -i "achieved" | head -2 | cut -c1-200
pkill -INT -f "kv-server --system cornflakes --workload echo --addr $sock"; wait $spid 2>/dev/null

#!/bin/bash
# usage: ep.sh SYSTEM RATE [perf]
S=$1; R=$2; P=$3
sock=/tmp/ep-$S.sock; rm -f $sock
${CF:-/tmp/cf-prof} kv-server --system $S --workload echo --addr $sock --core 0 > /tmp/$S-server.log 2>&1 &
spid=$!
for i in $(seq 1 300); do grep -q -i "listening\|ready\|serving" /tmp/$S-server.log && break; sleep 0.5; done
if [ -n "$P" ]; then
  perf record -e cpu-clock -F 4000 --call-graph dwarf,16384 -o /tmp/perf-$S.data -- ${CF:-/tmp/cf-prof} loadgen --system $S --workload echo --addr $sock --core 1 --rate $R --seconds 2 --warmup 0.2 2>&1 | grep achieved | cut -c1-200
else
  ${CF:-/tmp/cf-prof} loadgen --system $S --workload echo --addr $sock --core 1 --rate $R --seconds 3 2>&1 | tail -2 | cut -c1-400
fi
kill $spid; wait $spid 2>/dev/null

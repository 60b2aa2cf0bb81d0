#!/bin/bash
# usage: cdnab.sh SYSTEM RATE [perf]
S=$1; R=$2; P=$3
sock=/tmp/cdnab-$S.sock; rm -f $sock
${CF:-/tmp/cf-busy} kv-server --system $S --workload cdn --addr $sock --core 0 > /tmp/cdnab-$S-server.log 2>&1 &
spid=$!
for i in $(seq 1 300); do grep -q -i "listening\|ready\|serving" /tmp/cdnab-$S-server.log && break; sleep 0.5; done
if [ -n "$P" ]; then
  env $ENVV perf record -e cpu-clock -F 4000 --call-graph dwarf,16384 -o /tmp/perf-$S.data -- ${CF:-/tmp/cf-busy} loadgen --system $S --workload cdn --addr $sock --core 1 --rate $R --seconds 2 --warmup 0.2 $EXTRA 2>&1 | grep achieved | cut -c1-160
else
  ${CF:-/tmp/cf-busy} loadgen --system $S --workload cdn --addr $sock --core 1 --rate $R --seconds 3 2>&1 | tail -2 | cut -c1-400
fi
kill $spid; wait $spid 2>/dev/null

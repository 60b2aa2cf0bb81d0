#!/bin/bash
# perf (cpu-clock) of the load generator at a fixed rate against one kv-server; prints achieved, busy share, p99 and the top 25 symbols
# prof3.sh CF SYSTEM WORKLOAD RATE OUT: perf of the client
CF=$1 S=$2 W=$3 R=$4 O=$5
sock=/tmp/pfp.sock; rm -f $sock; $CF kv-server --system $S --workload $W --addr $sock --core 0 > /tmp/perf-client-server.log 2>&1 & spid=$!
for i in $(seq 1 300); do grep -q -i "listening\|ready\|serving" /tmp/perf-client-server.log && break; sleep 0.5; done
perf record -e cpu-clock -F 4000 -o $O -- $CF loadgen --system $S --workload $W --addr $sock --core 1 --rate $R --seconds 3 2>/dev/null | tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["max_achieved_rps"], j["client_busy_at_max"], j["p99_us"])'
kill $spid; wait $spid 2>/dev/null
perf report -i $O --no-children --sort symbol 2>/dev/null | grep -v "^#" | grep "%" | head -25 | cut -c1-150

#!/bin/bash
# perfsrv.sh CF RATE OUT: perf (cpu-clock) of the echo server (in place) at RATE, load generator in place on core 1
CF=$1 R=$2 O=$3
sock=/tmp/pfs.sock; rm -f $sock
perf record -e cpu-clock -F 4000 -o $O -- $CF kv-server --system cornflakes --workload echo --addr $sock --core 0 --in-place > /tmp/prof/srv2.log 2>&1 & spid=$!
for i in $(seq 1 300); do grep -q -i "READY" /tmp/prof/srv2.log && break; sleep 0.5; done
$CF loadgen --system cornflakes --workload echo --addr $sock --core 1 --rate $R --seconds 3 --in-place 2>/dev/null | tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print({k:v for k,v in j.items() if not isinstance(v,(list,dict))})'
pkill -f "kv-server --system cornflakes --workload echo --addr $sock"; wait $spid 2>/dev/null

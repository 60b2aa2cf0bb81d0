#!/bin/bash
# perfcli.sh CF RATE OUT [extra flags]: perf of the echo load generator (in place) at RATE
CF=$1 R=$2 O=$3; shift 3
sock=/tmp/pfc.sock; rm -f $sock; $CF kv-server --system cornflakes --workload echo --addr $sock --core 0 --in-place > /tmp/prof/srv.log 2>&1 & spid=$!
for i in $(seq 1 300); do grep -q -i "listening\|ready\|serving" /tmp/prof/srv.log && break; sleep 0.5; done
if [ "$O" = none ]; then
$CF loadgen --system cornflakes --workload echo --addr $sock --core 1 --rate $R --seconds 3 --in-place "$@" 2>/tmp/prof/cli.err | tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print({k:v for k,v in j.items() if not isinstance(v,(list,dict))})'
else
perf record -e cpu-clock -F 4000 -o $O -- $CF loadgen --system cornflakes --workload echo --addr $sock --core 1 --rate $R --seconds 3 --in-place "$@" 2>/tmp/prof/cli.err | tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print({k:v for k,v in j.items() if not isinstance(v,(list,dict))})'
fi
kill $spid; wait $spid 2>/dev/null

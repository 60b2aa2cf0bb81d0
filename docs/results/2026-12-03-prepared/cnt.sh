#!/bin/bash
# cnt.sh CF RATE: echo in place at RATE; prints the load generator's result and the server's shm counters
CF=$1 R=$2
sock=/tmp/pcnt.sock; rm -f $sock; rm -f /tmp/prof/ctl; mkfifo /tmp/prof/ctl
( exec 3>/tmp/prof/ctl; sleep 1000 ) & holder=$!
$CF kv-server --system cornflakes --workload echo --addr $sock --core 0 --in-place --exit-with-parent < /tmp/prof/ctl > /tmp/prof/cnt.log 2>&1 & spid=$!
for i in $(seq 1 300); do grep -q "READY" /tmp/prof/cnt.log && break; sleep 0.5; done
$CF loadgen --system cornflakes --workload echo --addr $sock --core 1 --rate $R --seconds 3 --in-place 2>/dev/null | tail -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["max_achieved_rps"], j["client_busy_at_max"], j["p99_us"], j["timeouts"])'
echo > /tmp/prof/ctl; sleep 1; kill $holder; wait $spid 2>/dev/null
grep -v "^READY\|hugepages\|zero-copy threshold" /tmp/prof/cnt.log | cut -c1-600

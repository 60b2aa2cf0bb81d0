#!/bin/bash
# bench.sh NAME cmd... : runs cmd, logs stdout/stderr and machine load (other processes' CPU every 5 s)
name=$1; shift
out=/tmp/udpw/runs/$name; mkdir -p /tmp/udpw/runs
( while true; do echo "--- $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; top -b -n1 -w 200 | sed -n '8,14p' | awk '$9+0 >= 10 {print $1, $9"%", $12, $13, $14}'; sleep 5; done ) > $out.load 2>&1 &
W=$!
echo "start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" > $out.meta
"$@" > $out.out 2> $out.err
echo "rc $? end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out.meta
kill $W

#!/bin/bash
# The per-command cost of CLIENT LIST's registry: the RESP server before it
# (OLD_CF) and after (NEW_CF), side by side, ROUNDS interleaved rounds,
# server on core 0, redis-benchmark on core 1; a warm-up SET run first.
# Usage: [ROUNDS=n] registry-cost.sh OLD_CF NEW_CF
set -u
old=$1; new=$2; port=6441
for round in $(seq ${ROUNDS:-5}); do
  for sys in old new; do
    bin=$old; [ $sys = new ] && bin=$new
    for _ in $(seq 100); do ss -ltn | grep -q ":$port " || break; sleep 0.1; done
    taskset -c 0 "$bin" kv-server --protocol resp --transport tcp --addr 127.0.0.1:$port --workload echo >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p $port PING >/dev/null 2>&1 && break; sleep 0.1; done
    # Its own server answers (not one left on the port).
    kill -0 $pid 2>/dev/null && redis-cli -p $port PING >/dev/null 2>&1 || { echo "$sys did not start" >&2; exit 1; }
    # Warm up: the pool grows to hold the keys once.
    taskset -c 1 redis-benchmark -p $port -t set -n 200000 -P 16 -c 50 -q >/dev/null 2>&1
    taskset -c 1 redis-benchmark -p $port -t set,get,incr,lpush -n 500000 -P 16 -c 50 -q 2>&1 | tr '\r' '\n' \
      | grep "requests per second" | sed "s/^/$round $sys /"
    kill $pid; wait $pid 2>/dev/null
  done
done

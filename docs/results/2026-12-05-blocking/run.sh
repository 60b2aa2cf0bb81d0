#!/bin/bash
# Side by side under redis-benchmark, three interleaved rounds: the RESP
# server before this stop's serving-loop change (OLD_CF, d568e83), after it
# (NEW_CF), and redis-server 7.0. Server on core 0, redis-benchmark on
# core 1, one server at a time. The BLPOP round pops from a list the RPUSH
# round filled (served at once: the path every blocking pop takes first).
# The jobs round: 50 connections wait in BLPOP on an empty list while 10
# others RPUSH, unpipelined (each job wakes a waiter).
# Usage: [ROUNDS=n] run.sh OLD_CF NEW_CF > raw.txt
set -u
old=$1; new=$2
port=6431
common=(-p $port -n 200000 -P 16 -c 50 -d 64 -q)
start() {
  for _ in $(seq 100); do ss -ltn | grep -q ":$port " || break; sleep 0.1; done
  case $1 in
    redis) taskset -c 0 redis-server --port $port --save '' --appendonly no >/dev/null 2>&1 & ;;
    old) taskset -c 0 "$old" kv-server --protocol resp --transport tcp --addr 127.0.0.1:$port --workload echo >/dev/null 2>&1 & ;;
    new) taskset -c 0 "$new" kv-server --protocol resp --transport tcp --addr 127.0.0.1:$port --workload echo >/dev/null 2>&1 & ;;
  esac
  pid=$!
  for _ in $(seq 150); do redis-cli -p $port PING >/dev/null 2>&1 && return; sleep 0.1; done
  echo "server $1 did not start" >&2; exit 1
}
bench() { taskset -c 1 redis-benchmark "${common[@]}" "$@" 2>&1 | tr '\r' '\n' | grep "requests per second"; }
for round in $(seq ${ROUNDS:-3}); do
  for sys in old new redis; do
    start $sys
    {
      bench -t set,get,lpush,rpop
      bench RPUSH bq __rand_int__
      if [ $sys != old ]; then
        bench BLPOP bq 0
        # Waiters first; then the producer; the waiters' rate is the jobs'.
        taskset -c 1 redis-benchmark -p $port -n 100000 -c 50 -q BLPOP jq 5 2>&1 | tr '\r' '\n' \
          | grep "requests per second" | sed 's/^/jobs: /' &
        waiters=$!
        sleep 0.3
        taskset -c 1 redis-benchmark -p $port -n 100000 -c 10 -q RPUSH jq __rand_int__ >/dev/null 2>&1
        wait $waiters
        redis-cli -p $port LLEN jq | sed 's/^/left in jq: /'
      fi
      redis-cli -p $port LLEN bq | sed 's/^/left in bq: /'
    } | sed "s/^/$round $sys /"
    kill $pid; wait $pid 2>/dev/null
  done
done

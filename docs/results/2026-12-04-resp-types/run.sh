#!/bin/bash
# Side by side under redis-benchmark, three interleaved rounds: the RESP
# server before this stop (c560768), after it, and redis-server 7.0.
# Server on core 0, redis-benchmark on core 1, one server at a time.
# Usage: run.sh OLD_CF NEW_CF > table.txt
set -u
old=$1; new=$2
port=6421
common=(-p $port -n 200000 -P 16 -c 50 -d 64 -q)
base_tests=set,get,incr,lpush,rpop,mset
new_tests=hset,sadd,spop,zadd,zpopmin
start() {
  # The previous server's port must be free first.
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
for round in 1 2 3; do
  for sys in old new redis; do
    start $sys
    tests=$base_tests
    [ $sys != old ] && tests=$base_tests,$new_tests
    taskset -c 1 redis-benchmark "${common[@]}" -t $tests 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$round $sys /"
    kill $pid; wait $pid 2>/dev/null
  done
done

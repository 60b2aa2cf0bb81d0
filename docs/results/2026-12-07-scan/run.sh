#!/bin/bash
# SCAN over a million keys: the RESP server before the stable cursor
# (OLD_CF), after it (NEW_CF) and redis-server, side by side, ROUNDS
# interleaved rounds, the server on core 0 and the clients on core 1.
# For each: the keys loaded with redis-cli --pipe, then
#   full   - seconds for `redis-cli --scan` to list every key (checked:
#            every one of the N keys, none missing),
#   call   - redis-benchmark's requests/s and p50 for `SCAN 0 COUNT 10`,
#   set/get - redis-benchmark -P 16 -c 50 (the hot path, unchanged?).
# Usage: [ROUNDS=n] [N=keys] run.sh OLD_CF NEW_CF
set -u
old=$1; new=$2; port=6451; n=${N:-1000000}
dir=$(mktemp -d)
python3 - "$n" >"$dir/load.resp" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout
for i in range(n):
    k = f"key:{i}"
    out.write(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n$1\r\nv\r\n")
PY
for round in $(seq "${ROUNDS:-3}"); do
  for sys in old new redis; do
    for _ in $(seq 100); do ss -ltn | grep -q ":$port " || break; sleep 0.1; done
    case $sys in
      redis) taskset -c 0 redis-server --port $port --save '' --appendonly no --dir "$dir" >/dev/null 2>&1 & ;;
      *) bin=$old; [ $sys = new ] && bin=$new
         taskset -c 0 "$bin" kv-server --protocol resp --transport tcp --addr 127.0.0.1:$port --workload echo >/dev/null 2>&1 & ;;
    esac
    pid=$!
    for _ in $(seq 100); do redis-cli -p $port PING >/dev/null 2>&1 && break; sleep 0.1; done
    kill -0 $pid 2>/dev/null && redis-cli -p $port PING >/dev/null 2>&1 || { echo "$sys did not start" >&2; exit 1; }
    taskset -c 1 redis-cli -p $port --pipe <"$dir/load.resp" >/dev/null
    [ "$(redis-cli -p $port DBSIZE)" = "$n" ] || { echo "$sys: DBSIZE is not $n" >&2; exit 1; }
    t0=$(date +%s.%N)
    got=$(taskset -c 1 redis-cli -p $port --scan | sort -u | wc -l)
    t1=$(date +%s.%N)
    [ "$got" = "$n" ] || { echo "$sys: --scan listed $got distinct keys of $n" >&2; exit 1; }
    full=$(echo "$t1 - $t0" | bc)
    call=$(taskset -c 1 redis-benchmark -p $port -n 2000 -c 1 --csv SCAN 0 COUNT 10 2>/dev/null | tail -1 | cut -d, -f2,5 | tr -d '"')
    sg=$(taskset -c 1 redis-benchmark -p $port -t set,get -n 300000 -P 16 -c 50 -r 1000000 --csv 2>/dev/null | tail -2 | cut -d, -f2 | tr -d '"' | paste -sd' ')
    echo "$round $sys full_s=$full scan_call_rps,p50_ms=$call set,get_rps=$sg"
    kill $pid; wait $pid 2>/dev/null
  done
done
rm -rf "$dir"

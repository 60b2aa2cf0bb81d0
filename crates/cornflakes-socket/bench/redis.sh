#!/usr/bin/env bash
# Unmodified redis-server + redis-benchmark GET, over kernel loopback TCP and
# through libcfsocket, in the same run, alternating; server pinned to core 0,
# client to core 1.
#
#   crates/cornflakes-socket/bench/redis.sh [requests -c 1] [requests -c 50] [rounds]
#
# Needs redis-server, redis-benchmark, taskset, target/release/libcfsocket.so
# and a cf with `socket-monitor`. Writes target/sockets-bench/redis.tsv.
set -euo pipefail
n1=${1:-10000}; n50=${2:-50000}; rounds=${3:-2}
root=$(cd "$(dirname "$0")/../../.." && pwd)
lib=$root/target/release/libcfsocket.so
cf=${CF:-$root/target/release/cf}
[ -x "$root/target/debug/cf" ] && [ "$root/target/debug/cf" -nt "$cf" ] && cf=$root/target/debug/cf
[ -e "$lib" ] || { echo "missing $lib: cargo build --release -p cornflakes-socket-preload" >&2; exit 1; }
for t in redis-server redis-benchmark taskset; do command -v $t >/dev/null || { echo "$t not installed" >&2; exit 1; }; done
out=$root/target/sockets-bench; mkdir -p "$out"; tsv=$out/redis.tsv
export CFSOCKET_MONITOR=@cf-redis-bench-$$
"$cf" socket-monitor & mon=$!
sleep 0.5
kill -0 $mon 2>/dev/null || { echo "the monitor did not start ($cf socket-monitor); is cf current?" >&2; exit 1; }
port=$((20000 + $$ % 20000))
taskset -c 0 redis-server --port $port --save '' --appendonly no >/dev/null & kern=$!
LD_PRELOAD=$lib taskset -c 0 redis-server --port $((port + 1)) --save '' --appendonly no >/dev/null & ring=$!
trap 'kill $kern $ring $mon 2>/dev/null || true' EXIT
sleep 1
printf 'mode\tclients\trequests_per_s\tp50_ms\tload1\n' > "$tsv"
bench() { # mode port clients requests preload
  local line
  line=$(LD_PRELOAD=$5 taskset -c 1 redis-benchmark -p "$2" -t get -c "$3" -n "$4" -q 2>&1 | tr '\r' '\n' | grep 'requests per second' || true)
  [ -n "$line" ] || { echo "$1 -c $3: redis-benchmark failed" >&2; return; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$3" "$(awk '{print $2}' <<<"$line")" "$(grep -o 'p50=[0-9.]*' <<<"$line" | cut -d= -f2)" \
    "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$tsv"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds" >&2
  bench kernel $port 1 "$n1" ""
  bench cfsocket $((port + 1)) 1 "$n1" "$lib"
  bench kernel $port 50 "$n50" ""
  bench cfsocket $((port + 1)) 50 "$n50" "$lib"
done
echo "written $tsv" >&2

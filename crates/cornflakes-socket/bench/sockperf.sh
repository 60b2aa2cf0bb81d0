#!/usr/bin/env bash
# sockperf ping-pong over kernel loopback TCP and through libcfsocket, in the
# same run, alternating, server pinned to core 0 and client to core 1.
#
#   crates/cornflakes-socket/bench/sockperf.sh [seconds per run] [rounds] [message bytes]
#
# Needs: sockperf, taskset, target/release/{cf,libcfsocket.so}
#   (cargo build --release -p cf -p cornflakes-socket-preload).
# Prints one line per run (mean, p50, p99, p99.9 in us, load average) and
# writes them to target/sockets-bench/sockperf.tsv.
set -euo pipefail
secs=${1:-5}; rounds=${2:-3}; size=${3:-64}
root=$(cd "$(dirname "$0")/../../.." && pwd)
lib=$root/target/release/libcfsocket.so
# The newer of the release and debug `cf` (the monitor is off the data path).
cf=${CF:-$root/target/release/cf}
[ -x "$root/target/debug/cf" ] && [ "$root/target/debug/cf" -nt "$cf" ] && cf=$root/target/debug/cf
for f in "$lib" "$cf"; do [ -e "$f" ] || { echo "missing $f: cargo build --release -p cf -p cornflakes-socket-preload" >&2; exit 1; }; done
command -v sockperf >/dev/null || { echo "sockperf not installed (scripts/setup.sh installs it)" >&2; exit 1; }
out=$root/target/sockets-bench; mkdir -p "$out"; tsv=$out/sockperf.tsv
export CFSOCKET_MONITOR=@cf-sockperf-bench-$$
"$cf" socket-monitor & mon=$!
trap 'kill $mon 2>/dev/null || true' EXIT
sleep 0.5
kill -0 $mon 2>/dev/null || { echo "the monitor did not start ($cf socket-monitor); is cf current?" >&2; exit 1; }
port=$((20000 + $$ % 20000))
printf 'mode\tmsg_bytes\tmean_us\tp50_us\tp99_us\tp999_us\tload1\n' > "$tsv"
run() { # mode preload
  local mode=$1 pre=$2 port=$3
  LD_PRELOAD=$pre taskset -c 0 sockperf sr --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 & local srv=$!
  sleep 0.5
  local log; log=$(LD_PRELOAD=$pre taskset -c 1 sockperf pp --tcp -i 127.0.0.1 -p "$port" -m "$size" -t "$secs" 2>&1) || true
  kill $srv 2>/dev/null || true; wait $srv 2>/dev/null || true
  local mean p50 p99 p999 load
  mean=$(grep -o 'avg-latency=[0-9.]*' <<<"$log" | cut -d= -f2)
  p50=$(awk '/percentile 50.000/ {print $NF}' <<<"$log")
  p99=$(awk '/percentile 99.000/ {print $NF}' <<<"$log")
  p999=$(awk '/percentile 99.900/ {print $NF}' <<<"$log")
  load=$(cut -d' ' -f1 /proc/loadavg)
  [ -n "$mean" ] || { echo "$mode: sockperf failed:"; echo "$log" | tail -5; return; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$size" "$mean" "$p50" "$p99" "$p999" "$load" | tee -a "$tsv"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds" >&2
  run kernel "" $((port + 2 * r))
  run cfsocket "$lib" $((port + 2 * r + 1))
done
echo "written $tsv" >&2

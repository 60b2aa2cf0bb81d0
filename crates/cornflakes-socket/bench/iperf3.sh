#!/usr/bin/env bash
# Unmodified iperf3 (one TCP stream, 127.0.0.1) over kernel loopback and
# through libcfsocket, alternating in one run; server core 0, client core 1.
# The server binds 127.0.0.1 (-B): its default is an IPv6 socket, which the
# library leaves to the kernel.
#
#   crates/cornflakes-socket/bench/iperf3.sh [seconds] [rounds]
#
# Writes target/sockets-bench/iperf3.tsv.
set -euo pipefail
secs=${1:-5}; rounds=${2:-2}
root=$(cd "$(dirname "$0")/../../.." && pwd)
lib=$root/target/release/libcfsocket.so
cf=${CF:-$root/target/release/cf}
[ -x "$root/target/debug/cf" ] && [ "$root/target/debug/cf" -nt "$cf" ] && cf=$root/target/debug/cf
[ -e "$lib" ] || { echo "missing $lib: cargo build --release -p cornflakes-socket-preload" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 not installed" >&2; exit 1; }
out=$root/target/sockets-bench; mkdir -p "$out"; tsv=$out/iperf3.tsv
export CFSOCKET_MONITOR=@cf-iperf3-bench-$$
"$cf" socket-monitor & mon=$!
trap 'kill $mon 2>/dev/null || true' EXIT
sleep 0.5
kill -0 $mon 2>/dev/null || { echo "the monitor did not start ($cf socket-monitor); is cf current?" >&2; exit 1; }
port=$((20000 + $$ % 20000))
printf 'mode\tgbit_per_s\tload1\n' > "$tsv"
run() { # mode preload port
  LD_PRELOAD=$2 taskset -c 0 iperf3 -s -B 127.0.0.1 -p "$3" -1 >/dev/null 2>&1 & local srv=$!
  sleep 0.5
  local bps
  bps=$(LD_PRELOAD=$2 taskset -c 1 iperf3 -c 127.0.0.1 -p "$3" -t "$secs" -J 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' || true)
  wait $srv 2>/dev/null || true
  [ -n "$bps" ] || { echo "$1: iperf3 failed" >&2; return; }
  printf '%s\t%.2f\t%s\n' "$1" "$(python3 -c "print($bps/1e9)")" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$tsv"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds" >&2
  run kernel "" $((port + 2 * r))
  run cfsocket "$lib" $((port + 2 * r + 1))
done
echo "written $tsv" >&2

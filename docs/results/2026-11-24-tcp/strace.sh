#!/usr/bin/env bash
# Syscalls per request of the server: strace -c on the running server for a fixed load.
set -u
for sys in cornflakes tokio-prost protobuf; do
  coproc SRV { exec ./cf kv-server --system $sys --transport tcp --addr 127.0.0.1:0 --workload twitter:keys=20000 --core 0 --exit-with-parent 2>/dev/null; }
  read -r line <&"${SRV[0]}"; addr=${line#READY }; pid=$SRV_PID
  strace -c -f -p $pid -o strace.$sys.txt & st=$!
  sleep 1
  ./cf loadgen --system $sys --transport tcp --addr $addr --workload twitter:keys=20000 --rate 5000 --seconds 2 --warmup 0.5 --core 1 2>/dev/null | tail -1 | python3 -c 'import json,sys; r=json.load(sys.stdin); print("'$sys'", "completed", r["points"][0]["completed"], "errors", r["errors"])'
  echo >&"${SRV[1]}"; read -r stats <&"${SRV[0]}"; echo "$sys $stats"
  kill -INT $st; wait $st
  exec {SRV[1]}>&-; wait $pid 2>/dev/null
done

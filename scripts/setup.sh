#!/usr/bin/env bash
# Installs what the project needs beyond a stable Rust toolchain; idempotent.
# .ci/run calls it; on a fresh machine run it once (as root for the system
# parts): the Debian packages of the real programs that tests and
# benchmarks talk to, and the nightly toolchain with Miri and rust-src, for
# scripts/miri.sh.
set -euo pipefail

# Real partners: redis-server/redis-cli/redis-benchmark (the RESP server's
# tests and `cf redis-compare`), protoc (protobuf-wire golden checks),
# iverilog/verilator/yosys (the varint block: testbench, lint, synthesis),
# and the programs the drop-in socket layer is measured with (nginx, wrk,
# sockperf, iperf3); valgrind for instruction counts (cf offload, scripts/bench-*).
PACKAGES=(redis-server redis-tools protobuf-compiler iverilog verilator yosys valgrind nginx wrk sockperf iperf3 iproute2)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}; run this script as root to install them" >&2
  else
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # The Debian package starts a redis-server on port 6379 and an nginx on
    # port 80; tests start their own on free ports, so stop these.
    if command -v systemctl >/dev/null 2>&1; then systemctl stop redis-server nginx 2>/dev/null || true; fi
    pkill -x redis-server 2>/dev/null || true
    pkill -x nginx 2>/dev/null || true
  fi
fi

if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "setup: installing the nightly toolchain with miri and rust-src"
  rustup toolchain install nightly --profile minimal --component miri,rust-src
fi
cargo +nightly miri setup >/dev/null

#!/usr/bin/env bash
# The quiet-machine measurements of the 2026-11-24 stop, in one go (~7 min).
# Run from the repository root as root (namespaces), with nothing else running.
set -u
cf=./target/release/cf
out=docs/results/2026-11-24-quiet
log() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }
log "tcp pingpong vs std::net"
for s in 8 65536; do $cf pingpong --transport tcp --size $s --iters 20000 --warmup 2000 2>&1 | tail -4; done
log "16 MiB bulk"
$cf bulk --size 16M --seconds 3 --repeats 3 2>&1 | tail -6
log "tcp compare across namespaces"
$cf compare --transport tcp --netns --mtu 1500 --workload "echo:fields=2,size=2048" twitter cdn \
    --systems cornflakes,tokio-prost,protobuf,flatbuffers,capnp --seconds 0.5 --warmup 0.2 --out $out/tcp-netns 2>&1 \
    | grep -v "^kv-server\|preloaded\|^\[" 
log "done"

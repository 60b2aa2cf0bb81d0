#!/bin/bash
cd /work/main
for r in 1 2; do
  echo "== run$r $(date -u +%T)"
  target/release/cf compare --out /tmp/runs/run$r > /tmp/runs/run$r.log 2>&1
  echo "== run$r done rc=$? $(date -u +%T)"
done

#!/bin/bash
cd /work/main
for r in 1 2; do
  s=$(date +%s); echo "== run$r $(date -u +%T)"
  target/release/cf compare --out /tmp/runs/run$r > /tmp/runs/run$r.log 2>&1
  rc=$?; e=$(date +%s)
  echo "run$r $((e-s)) s exit $rc ($(date -u -d @$s +%T)-$(date -u -d @$e +%T) UTC)" >> /tmp/runs/times.txt
done
echo "== all done $(date -u +%T)"

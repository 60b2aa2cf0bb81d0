#!/bin/bash
for m in in-place default; do
 F=""; [ $m = in-place ] && F=--in-place
 for b in base wait; do
  echo "== $m $b $(date -u +%T)"
  /tmp/prof/cf-$b compare --workload echo $F --out /tmp/ab/f-$m-$b > /tmp/ab/f-$m-$b.log 2>&1
 done
done
echo "== done $(date -u +%T)"

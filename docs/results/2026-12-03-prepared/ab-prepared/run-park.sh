#!/bin/bash
for r in 3 4; do
 for b in new park; do
  echo "== round $r $b $(date -u +%T)"
  /tmp/prof/cf-$b compare --workload echo --in-place --out /tmp/ab/r$r-$b > /tmp/ab/r$r-$b.log 2>&1
 done
done

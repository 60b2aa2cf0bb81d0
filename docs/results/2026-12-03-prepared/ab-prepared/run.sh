#!/bin/bash
# A/B: echo in place, base vs new build, in turns
for r in 1 2; do
 for b in base new; do
  echo "== round $r $b $(date -u +%T)"
  /tmp/prof/cf-$b compare --workload echo --in-place --out /tmp/ab/r$r-$b > /tmp/ab/r$r-$b.log 2>&1
  grep -A12 "requests/s" /tmp/ab/r$r-$b/tables.txt 2>/dev/null | head -20
 done
done

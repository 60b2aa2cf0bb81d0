#!/bin/bash
# Two builds of cf in turns: `cf compare --workload W --systems cornflakes
# rkyv --repeats 1` (about 30 s each), ROUNDS rounds, old build first.
# usage: run.sh OLD_CF NEW_CF WORKLOAD ROUNDS
set -eu
old=$1 new=$2 workload=$3 rounds=$4
out=${OUT:-/tmp/size-tables}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for b in old new; do
    bin=$old; [ "$b" = new ] && bin=$new
    "$bin" compare --workload "$workload" --systems cornflakes rkyv --repeats 1 --out "$out/$workload-$b-$r" \
      > "$out/$workload-$b-$r.txt" 2> "$out/$workload-$b-$r.log"
    echo "$r $b $(grep -E '^\s*(cornflakes|rkyv) ' "$out/$workload-$b-$r.txt" | awk '{printf "%s %s %s  ", $1, $2, $7}')"
  done
done

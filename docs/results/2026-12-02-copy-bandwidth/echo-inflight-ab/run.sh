#!/bin/bash
# Echo side by side: Conn::inflight in a VecDeque (old, /tmp/cf-prof = 30153b3) or a Vec
# (new, /tmp/cf-vec: the experiment described in ../README.md, not kept), in turns, two rounds.
set -e
for round in 1 2; do
  for build in old new; do
    bin=/tmp/cf-prof; [ $build = new ] && bin=/tmp/cf-vec
    echo "== round $round build $build $(date +%T)"
    $bin compare --workload echo --systems cornflakes rkyv raw protobuf --repeats 3 --out out-$build-$round > log-$build-$round.txt 2>&1
    grep -A8 '^system' out-$build-$round/tables.txt 2>/dev/null | head -9 || tail -n 30 log-$build-$round.txt | head -20
  done
done
echo "== done $(date +%T)"

#!/bin/bash
# Echo side by side: the load generator's values in the private pool (old)
# or the shared pool (new), in turns, two rounds.
set -e
for round in 1 2; do
  for build in old new; do
    bin=/tmp/cf-base; [ $build = new ] && bin=/tmp/cf-new
    echo "== round $round build $build $(date +%T)"
    $bin compare --workload echo --systems cornflakes rkyv raw protobuf --repeats 3 --out out-$build-$round > log-$build-$round.txt 2>&1
    tail -n 30 log-$build-$round.txt | grep -E "echo|cornflakes|rkyv|raw|protobuf" | head -20
  done
done
echo "== done $(date +%T)"

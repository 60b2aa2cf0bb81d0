#!/bin/bash
# Echo with 8192 distinct payloads (32 MiB: more than either core's L2, as
# much as the L3), the load generator's values in the private pool (old)
# or the shared pool (new), in turns, two rounds.
set -e
for round in 1 2; do
  for build in old new; do
    bin=/tmp/cf-keys-$build
    echo "== round $round build $build $(date +%T)"
    $bin compare --workload echo:keys=8192 --systems cornflakes rkyv raw protobuf --repeats 3 --out out-$build-$round > log-$build-$round.txt 2>&1
    grep -E "^(cornflakes|rkyv|raw|protobuf) |cornflakes_over" log-$build-$round.txt
  done
done
echo "== done $(date +%T)"

#!/bin/sh
# The spin A/B of docs/results/2026-12-02-tick/README.md: cf-A is the build
# before the change (c7159a5's datapath), cf-B/cf-C the build with it (B:
# first version, C: the committed one, same rule). Rounds alternate the
# builds; each run is cf tails at fixed rates (10 % and 50 % of the probe),
# two repeats, no machine watch. Set A and NEW to the two binaries.
set -e
A=${A:-/tmp/cf-A}; NEW=${NEW:-/tmp/cf-C}
for round in 1 2 3; do
  for v in A NEW; do
    eval bin=\$$v
    $bin tails --rates 90000,450000 --repeats 2 --machine-seconds 0 --out ab2/$v-$round
    $bin tails --system protobuf --rates 55000,275000 --repeats 2 --machine-seconds 0 --out ab2/pb-$v-$round
  done
done

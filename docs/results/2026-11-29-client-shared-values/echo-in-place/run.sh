#!/bin/bash
# Echo, the default (untrusted) mode and --in-place (trusted peers both
# ways), one build, in turns.
set -e
for mode in default in-place; do
  flag=""; [ $mode = in-place ] && flag=--in-place
  echo "== $mode $(date +%T)"
  /tmp/cf-keys-new compare --workload echo --systems cornflakes rkyv raw protobuf $flag --repeats 3 --out out-$mode-2 > log-$mode-2.txt 2>&1
  grep -E "^(cornflakes|rkyv|raw|protobuf) |cornflakes_over" log-$mode-2.txt
done
echo "== done $(date +%T)"

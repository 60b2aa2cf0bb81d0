#!/bin/bash
# Experiment (not committed): the gather's runs of 2048 B or more with
# streaming stores (CF_EXP_STREAM_GATHER=1), echo --in-place, in turns.
set -e
for round in 1 2; do
  for v in plain stream; do
    echo "== round $round $v $(date +%T)"
    if [ $v = stream ]; then export CF_EXP_STREAM_GATHER=1; else unset CF_EXP_STREAM_GATHER; fi
    /tmp/cf-exp compare --workload echo --systems cornflakes rkyv --in-place --repeats 3 --out out-$v-$round > log-$v-$round.txt 2>&1
    grep -E "^(cornflakes|rkyv) |cornflakes_over_best_library" log-$v-$round.txt
  done
done
unset CF_EXP_STREAM_GATHER
echo "== default mode, plain $(date +%T)"
/tmp/cf-exp compare --workload echo --systems cornflakes rkyv --repeats 3 --out out-default > log-default.txt 2>&1
grep -E "^(cornflakes|rkyv) |cornflakes_over_best_library" log-default.txt
echo "== done $(date +%T)"

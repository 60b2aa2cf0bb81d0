#!/usr/bin/env bash
# Two back-to-back default runs of the README's main job on this machine
# (no calibration file: the paper's 512 B threshold, as a fresh user gets).
set -u
cd "$(dirname "$0")"
bin=../../../target/release/cf
for r in ${RUNS:-run1 run2}; do
  echo "$r start $(date -u +%FT%TZ)" >> times.txt
  $bin compare --out $r > table-$r.txt 2> log-$r.txt
  echo "$r end $(date -u +%FT%TZ) rc $?" >> times.txt
done

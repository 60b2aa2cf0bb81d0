#!/bin/bash
# CDN with and without rep movsb (glibc tunable, every process), in turns.
for round in 1 2; do
  for mode in memcpy tunable; do
    if [ $mode = tunable ]; then export GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=2000000; else unset GLIBC_TUNABLES; fi
    /tmp/cf-head compare --workload cdn --systems cornflakes cornflakes-only-copy protobuf rkyv --repeats 2 --out /tmp/rm/$mode-$round > /tmp/rm/$mode-$round.log 2>&1
  done
done

#!/bin/bash
for round in 1 2; do
  /tmp/cf-vec compare --workload echo --systems cornflakes rkyv raw --repeats 2 --out /tmp/echoab/plain-$round > /tmp/echoab/plain-$round.log 2>&1
  GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=2000000 /tmp/cf-vec compare --workload echo --systems cornflakes rkyv raw --repeats 2 --out /tmp/echoab/norep-$round > /tmp/echoab/norep-$round.log 2>&1
done
echo done > /tmp/echoab/rc

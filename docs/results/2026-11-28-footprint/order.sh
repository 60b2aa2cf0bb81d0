#!/bin/bash
# Google 1-4, every default system, hugepages reserved (auto) and not (off)
# in turns: each system's maximum and server busy capacity, by start order.
CF=${CF:-cf}
for r in 1 2; do for hp in auto off; do
  $CF compare --workload google:max=4 --hugepages $hp --out order/$hp-$r > order/$hp-$r.log 2>&1
done; done

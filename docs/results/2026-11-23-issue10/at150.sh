#!/bin/bash
# the 150 k check at a fixed rate: server on core 0, `cf loadgen --rate 150000` (2 s, 3 times) on core 1
/work/wt-udp/target/release/cf kv-server --transport udp --workload google:max=4 --system cornflakes --addr 127.0.0.1:7050 --core 0 > /dev/null 2>&1 &
SP=$!; sleep 3
for i in 1 2 3; do
  /work/wt-udp/target/release/cf loadgen --transport udp --workload google:max=4 --system cornflakes --addr 127.0.0.1:7050 --core 1 --seconds 2 --rate 150000 2>&1 | grep '^offered'
done
kill $SP

#!/bin/bash
# the 150 k check: cf kv-server (udp, google:max=4, cornflakes) on core 0, a cf loadgen sweep on core 1
/work/wt-udp/target/release/cf kv-server --transport udp --workload google:max=4 --system cornflakes --addr 127.0.0.1:7040 --core 0 > /dev/null 2>&1 &
SP=$!; sleep 3
/work/wt-udp/target/release/cf loadgen --transport udp --workload google:max=4 --system cornflakes --addr 127.0.0.1:7040 --core 1 --seconds 1
/work/wt-udp/target/release/cf loadgen --transport udp --workload google:max=4 --system cornflakes --addr 127.0.0.1:7040 --core 1 --seconds 2 --rate 150000
kill $SP

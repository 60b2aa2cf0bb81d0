#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces NAME-a and NAME-b joined by
# a veth pair (NAME-a has 192.0.2.1/24, NAME-b has 192.0.2.2/24; TEST-NET-1,
# reachable only inside them). Needs root and iproute2. Used by
# crates/cornflakes-datapath/tests/tcp_netns.rs.
#
#   scripts/netns.sh up NAME [MTU]          create (MTU default 1500)
#   scripts/netns.sh down NAME              remove (deleting a namespace deletes its veth end)
#   scripts/netns.sh exec NAME a|b CMD...   run CMD in one namespace
#   scripts/netns.sh run NAME MTU SERVER... -- CLIENT...
#       up; the server in NAME-b in the background; the client in NAME-a;
#       then the server is stopped and the namespaces removed, even on failure.
#       Example: scripts/netns.sh run cf 9000 target/release/cf kv-server --transport tcp \
#                  --addr 192.0.2.2:7000 -- target/release/cf loadgen --transport tcp --addr 192.0.2.2:7000 ...
set -euo pipefail

die() { echo "netns.sh: $*" >&2; exit 2; }

up() {
    local name=$1 mtu=${2:-1500}
    [[ $(id -u) == 0 ]] || die "needs root to create network namespaces"
    command -v ip >/dev/null || die "needs iproute2 (the ip command)"
    ip netns add "$name-a"
    ip netns add "$name-b"
    ip link add cfa0 netns "$name-a" mtu "$mtu" type veth peer name cfb0 netns "$name-b" mtu "$mtu"
    ip -n "$name-a" addr add 192.0.2.1/24 dev cfa0
    ip -n "$name-b" addr add 192.0.2.2/24 dev cfb0
    for ns in "$name-a" "$name-b"; do ip -n "$ns" link set lo up; done
    ip -n "$name-a" link set cfa0 up
    ip -n "$name-b" link set cfb0 up
}

down() {
    local name=$1
    ip netns del "$name-a" 2>/dev/null || true
    ip netns del "$name-b" 2>/dev/null || true
}

case ${1:-} in
    up) [[ $# -ge 2 ]] || die "usage: up NAME [MTU]"; up "$2" "${3:-1500}" ;;
    down) [[ $# -eq 2 ]] || die "usage: down NAME"; down "$2" ;;
    exec)
        [[ $# -ge 4 && ( $3 == a || $3 == b ) ]] || die "usage: exec NAME a|b CMD..."
        name=$2 side=$3; shift 3
        exec ip netns exec "$name-$side" "$@" ;;
    run)
        [[ $# -ge 5 ]] || die "usage: run NAME MTU SERVER... -- CLIENT..."
        name=$2 mtu=$3; shift 3
        server=()
        while [[ $# -gt 0 && $1 != -- ]]; do server+=("$1"); shift; done
        [[ ${1:-} == -- ]] || die "run: missing -- between the server and the client"
        shift
        up "$name" "$mtu"
        pid=
        trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; down "$name"' EXIT
        ip netns exec "$name-b" "${server[@]}" &
        pid=$!
        sleep 1
        ip netns exec "$name-a" "$@" ;;
    *) die "usage: netns.sh up|down|exec|run ... (see the comment at the top)" ;;
esac

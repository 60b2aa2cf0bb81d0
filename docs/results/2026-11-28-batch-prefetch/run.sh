#!/bin/bash
# Two builds of cf in turns on one workload: the hybrid, only-sg and
# only-copy side by side in each run, ROUNDS rounds, old build first.
# usage: [OUT=dir] [FIRST_ROUND=n] run.sh OLD_CF NEW_CF WORKLOAD ROUNDS [SYSTEMS...]
# (the hugepages/ runs: OUT=hugepages, with 5120 hugepages reserved by
# hand; rounds 3-4 with FIRST_ROUND=3)
set -eu
old=$1 new=$2 workload=$3 rounds=$4
shift 4
systems=${*:-cornflakes cornflakes-only-sg cornflakes-only-copy}
here=$(cd "$(dirname "$0")" && pwd)/${OUT:-.}
tag=$(echo "$workload" | tr ':=,' '---')
for round in $(seq "${FIRST_ROUND:-1}" "$rounds"); do
  for build in old new; do
    bin=$old; [ "$build" = new ] && bin=$new
    out=$here/$tag-$build-$round
    echo "== round $round, $build ($bin), $(date -u +%T)"
    # shellcheck disable=SC2086
    "$bin" compare --workload "$workload" --systems $systems --out "$out" > "$out.txt" 2> "$out.log"
    grep -E "^\s*(cornflakes|protobuf|flatbuffers|capnp|rkyv)" "$out.txt" | head -12 || true
  done
done

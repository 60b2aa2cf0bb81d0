#!/usr/bin/env bash
# Runs the runtime's tests under Miri: pools (heap-backed under cfg(miri)),
# RcBuf/RcBufMut, the arena, the wire format and the generated code; and the
# unit tests of the fenced unsafe modules of the baselines (pinned
# FlatBuffers allocator, Cap'n Proto segment allocator) and of the
# key-value store (prost views, store). The datapaths need real
# mmap/memfd/io_uring and are covered by scripts/sanitizers.sh instead.
# Takes about 5-8 minutes on the project's 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."

# Isolation off: the regression tests read their saved inputs from disk.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
cargo +nightly miri test -p cornflakes --lib --tests
cargo +nightly miri test -p cornflakes-tests --tests
cargo +nightly miri test -p cornflakes-baselines -p cornflakes-kv --lib
# The C API's handles (Box round trips through raw pointers, NULL checks,
# getters' pointers into owned packets), called as C would.
cargo +nightly miri test -p cornflakes-capi --lib

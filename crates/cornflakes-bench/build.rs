//! Generates the Cornflakes message types of `proto/shapes.proto`. The
//! baselines' generated code is checked in, in `crates/cornflakes-baselines`
//! (see `scripts/regen-baselines.sh`), so nothing else runs here.

fn main() -> Result<(), cornflakes_build::Error> {
    cornflakes_build::compile_protos(&["proto/shapes.proto"], &["proto"])?;
    // The same schema with the protobuf wire format (`cornflakes-protobuf`).
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or(cornflakes_build::Error::NoOutDir)?);
    cornflakes_build::Config::new()
        .wire(cornflakes_build::Wire::Protobuf)
        .out_dir(out.join("protowire"))
        .compile_protos(&["proto/shapes.proto"], &["proto"])?;
    Ok(())
}

fn main() -> Result<(), cornflakes_build::Error> {
    // The generator's golden schema: compiling it here proves the golden
    // output builds, and the tests exercise it.
    cornflakes_build::compile_protos(
        &["../cornflakes-build/tests/golden/example.proto"],
        &["../cornflakes-build/tests/golden"],
    )?;
    cornflakes_build::compile_protos(&["proto/wide.proto"], &["proto"])
}

fn main() -> Result<(), cornflakes_build::Error> {
    cornflakes_build::compile_protos(&["proto/echo.proto"], &["proto"])
}

//! Unsupported schema features are errors that name file, line and feature.

use cornflakes_build::{Config, Error};

fn generate(source: &str) -> Result<Vec<cornflakes_build::GeneratedFile>, Error> {
    let dir = tempdir();
    std::fs::write(dir.join("s.proto"), source).unwrap();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    config.generate(&[dir.join("s.proto")], &[&dir])
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir =
        std::env::temp_dir().join(format!("cf-build-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn unsupported(source: &str) -> cornflakes_build::Unsupported {
    match generate(source) {
        Err(Error::Unsupported(u)) => u,
        other => panic!("expected an Unsupported error, got {other:?}"),
    }
}

#[test]
fn oneof_is_rejected_with_its_line() {
    let u = unsupported(
        "syntax = \"proto3\";\nmessage M {\n  oneof choice {\n    uint32 a = 1;\n    string b = 2;\n  }\n}\n",
    );
    assert_eq!((u.file.as_str(), u.line, u.feature), ("s.proto", 3, "oneof"));
    assert!(u.to_string().starts_with("s.proto:3:3: oneof is not supported"), "{u}");
}

#[test]
fn map_is_rejected_with_its_line() {
    let u = unsupported("syntax = \"proto3\";\nmessage M {\n  uint32 x = 1;\n  map<string, bytes> m = 2;\n}\n");
    assert_eq!((u.line, u.feature), (4, "map"));
}

#[test]
fn enums_are_rejected() {
    let u = unsupported("syntax = \"proto3\";\nenum Color {\n  RED = 0;\n}\nmessage M { uint32 x = 1; }\n");
    assert_eq!((u.line, u.feature), (2, "enum"));
    let u = unsupported("syntax = \"proto3\";\nmessage M {\n  enum E { A = 0; }\n  uint32 x = 1;\n}\n");
    assert_eq!((u.line, u.feature), (3, "enum"));
}

#[test]
fn proto2_is_rejected() {
    let u = unsupported("syntax = \"proto2\";\nmessage M { optional uint32 x = 1; }\n");
    assert_eq!((u.line, u.feature), (1, "non-proto3 syntax"));
}

#[test]
fn proto3_optional_is_accepted() {
    let files = generate("syntax = \"proto3\";\nmessage M { optional uint32 x = 1; }\n").unwrap();
    assert!(files[0].code.contains("pub fn has_x"));
    assert_eq!(files[0].name, "_.rs");
}

#[test]
fn parse_errors_carry_the_location() {
    let err = generate("syntax = \"proto3\";\nmessage M {\n  Bogus b = 1;\n}\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("s.proto:3:3"), "{text}");
    assert!(text.contains("Bogus"), "{text}");
}

#[test]
fn imports_across_packages_resolve_to_relative_paths() {
    let dir = tempdir();
    std::fs::write(dir.join("a.proto"), "syntax = \"proto3\";\npackage pa.inner;\nmessage A { uint32 x = 1; }\n")
        .unwrap();
    std::fs::write(dir.join("b.proto"), "syntax = \"proto3\";\npackage pb;\nimport \"a.proto\";\nmessage B { pa.inner.A a = 1; repeated pa.inner.A list = 2; }\n").unwrap();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    let files = config.generate(&[dir.join("a.proto"), dir.join("b.proto")], &[&dir]).unwrap();
    let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["pa.inner.rs", "pb.rs"]);
    assert!(files[1].code.contains("super::pa::inner::A<'a>"), "{}", files[1].code);
}

//! Golden-file test: the generator's output for `golden/example.proto` must
//! equal the checked-in `golden/example.rs`. After an intended change to the
//! generator, regenerate with `UPDATE_GOLDEN=1 cargo test -p cornflakes-build`.
//! (`cornflakes-tests` compiles and exercises the same output.)

use std::path::Path;

#[test]
fn example_matches_golden_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut config = cornflakes_build::Config::new();
    config.emit_rerun_if_changed(false);
    let files = config.generate(&[dir.join("example.proto")], &[&dir]).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].name, "example.rs");
    let golden = dir.join("example.rs");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &files[0].code).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).expect("golden file exists (UPDATE_GOLDEN=1 creates it)");
    assert!(
        files[0].code == expected,
        "generated code differs from {}; if intended, rerun with UPDATE_GOLDEN=1",
        golden.display()
    );
}

/// `::cornflakes::well_known` is this generator's output for Google's
/// well-known types (bundled by protox), checked in. Regenerate with
/// `UPDATE_GOLDEN=1 cargo test -p cornflakes-build`.
#[test]
fn well_known_types_match_the_runtime() {
    let mut config = cornflakes_build::Config::new();
    config.emit_rerun_if_changed(false).clear_extern_paths().test_samples(true);
    let files = config.generate(&cornflakes_build::WELL_KNOWN_FILES, &[] as &[&str]).unwrap();
    assert_eq!(files.len(), 1);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cornflakes/src/well_known/google.protobuf.rs");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &files[0].code).unwrap();
    }
    let expected = std::fs::read_to_string(&path).expect("checked-in file exists (UPDATE_GOLDEN=1 creates it)");
    assert!(files[0].code == expected, "generated code differs from {}; rerun with UPDATE_GOLDEN=1", path.display());
}

/// `::cornflakes::well_known::protowire`: the same types generated with
/// `Wire::Protobuf`, which protobuf-wire schemas map `.google.protobuf` to.
#[test]
fn protobuf_wire_well_known_types_match_the_runtime() {
    let mut config = cornflakes_build::Config::new();
    config.emit_rerun_if_changed(false).clear_extern_paths().wire(cornflakes_build::Wire::Protobuf);
    let files = config.generate(&cornflakes_build::WELL_KNOWN_FILES, &[] as &[&str]).unwrap();
    assert_eq!(files.len(), 1);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cornflakes/src/well_known/protowire/google.protobuf.rs");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &files[0].code).unwrap();
    }
    let expected = std::fs::read_to_string(&path).expect("checked-in file exists (UPDATE_GOLDEN=1 creates it)");
    assert!(files[0].code == expected, "generated code differs from {}; rerun with UPDATE_GOLDEN=1", path.display());
}

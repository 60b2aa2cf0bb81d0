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
fn oneof_map_and_enums_generate_code() {
    let files = generate(
        "syntax = \"proto3\";\nenum Color { COLOR_UNSPECIFIED = 0; COLOR_RED = 1; }\nmessage M {\n  oneof choice {\n    uint32 a = 1;\n    string b = 2;\n  }\n  map<string, bytes> m = 3;\n  Color c = 4;\n  enum E { A = 0; }\n  E e = 5;\n}\n",
    )
    .unwrap();
    let code = &files[0].code;
    assert!(code.contains("pub enum Choice<'a>"), "{code}");
    assert!(code.contains("pub enum Color"), "{code}");
    assert!(code.contains("Red = 1"), "prefix stripped as prost does: {code}");
    assert!(code.contains("pub fn insert_m("), "{code}");
    assert!(code.contains("pub fn get_c_raw("), "{code}");
}

#[test]
fn extensions_are_rejected_with_their_line() {
    let u = unsupported(
        "syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\nextend google.protobuf.FieldOptions {\n  uint32 my_option = 50000;\n}\nmessage M { uint32 x = 1; }\n",
    );
    assert_eq!((u.line, u.feature), (4, "extension"));
    assert!(u.line > 0 && u.column > 0);
}

#[test]
fn proto2_groups_are_rejected_with_a_line() {
    let u = unsupported("syntax = \"proto2\";\nmessage M {\n  optional group G = 1 { optional uint32 x = 2; }\n}\n");
    assert_eq!(u.feature, "non-proto3 syntax");
    assert!(u.line > 0 && u.column > 0, "{u}");
}

#[test]
fn unused_and_well_known_imports_are_accepted() {
    let files = generate(
        "syntax = \"proto3\";\nimport \"google/protobuf/struct.proto\";\nimport \"google/protobuf/timestamp.proto\";\nmessage M { google.protobuf.Timestamp t = 1; }\n",
    )
    .unwrap();
    assert!(files[0].code.contains("::cornflakes::well_known::Timestamp<'a>"), "{}", files[0].code);
}

#[test]
fn keyword_packages_are_escaped() {
    let dir = tempdir();
    std::fs::write(
        dir.join("a.proto"),
        "syntax = \"proto3\";\npackage acme.type;\nmessage Money { int64 units = 1; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.proto"),
        "syntax = \"proto3\";\npackage acme.shop;\nimport \"a.proto\";\nmessage Price { acme.type.Money money = 1; }\n",
    )
    .unwrap();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    let files = config.generate(&[dir.join("a.proto"), dir.join("b.proto")], &[&dir]).unwrap();
    assert!(files[0].code.contains("super::r#type::Money<'a>"), "{}", files[0].code);
}

#[test]
fn accessor_collisions_are_reported_with_both_names() {
    for (a, b, method) in [
        ("foo", "foo_copied", "set_foo_copied"),
        ("bar", "bar_field", "set_bar_field"),
        ("items", "mut_items", "get_mut_items"),
    ] {
        let source = format!(
            "syntax = \"proto3\";\nmessage M {{\n  {} {a} = 1;\n  string {b} = 2;\n}}\n",
            if a == "items" { "repeated string" } else { "string" }
        );
        let u = unsupported(&source);
        assert_eq!(u.feature, "a Rust name collision");
        assert_eq!(u.line, 2, "{u}");
        assert!(u.detail.contains(method) && u.detail.contains(a) && u.detail.contains(b), "{u}");
    }
}

#[test]
fn internal_names_cannot_collide_with_fields() {
    let files = generate(
        "syntax = \"proto3\";\nmessage M {\n  uint32 arena = 1;\n  uint32 bitmap = 2;\n  uint32 __cf_arena = 3;\n}\n",
    )
    .unwrap();
    assert!(files[0].code.contains("pub fn get_arena"));
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

#[test]
fn extern_paths_map_packages_to_rust_paths() {
    let dir = tempdir();
    std::fs::write(
        dir.join("a.proto"),
        "syntax = \"proto3\";\npackage acme.common;\nmessage Id { uint64 v = 1; message Sub { uint32 x = 1; } }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.proto"),
        "syntax = \"proto3\";\npackage shop;\nimport \"a.proto\";\nmessage Order { acme.common.Id id = 1; acme.common.Id.Sub sub = 2; }\n",
    )
    .unwrap();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false).extern_path(".acme", "::acme_types");
    let files = config.generate(&[dir.join("b.proto")], &[&dir]).unwrap();
    assert_eq!(files.len(), 1, "only the requested file is generated");
    let code = &files[0].code;
    assert!(code.contains("::acme_types::common::Id<'a>"), "{code}");
    assert!(code.contains("::acme_types::common::id::Sub<'a>"), "{code}");
}

#[test]
fn reserved_numbers_below_the_highest_field_keep_their_bits_up_to_a_limit() {
    // Reserved below the highest field: slots (here two bitmap words for
    // 33 ordinals); above it, and `to max`, nothing.
    let files = generate(
        "syntax = \"proto3\";\nmessage M {\n  reserved 2 to 32, 200 to max;\n  uint32 a = 1;\n  uint32 b = 40;\n}\n",
    )
    .unwrap();
    let code = &files[0].code;
    assert!(code.contains("__cf_bitmap: [u32; 2]"), "{code}");
    let flat: String = code.split_whitespace().collect();
    assert!(flat.contains("refuse_reserved(&bitmap,&[(1,2),(2,3),"), "{code}");
    assert!(flat.contains("(31,32),]") || flat.contains("(31,32)]"), "the last reserved slot: {code}");
    assert!(!flat.contains("(32,200)"), "nothing above the highest field: {code}");
    let u = unsupported(
        "syntax = \"proto3\";\nmessage M {\n  uint32 a = 1;\n  reserved 2 to 5000;\n  uint32 b = 6000;\n}\n",
    );
    assert_eq!((u.line, u.feature), (4, "a large reserved range"));
    assert!(u.detail.contains("more than 1024 numbers below its highest field number 6000"), "{u}");
}

#[test]
fn imported_files_are_generated_unless_extern_or_unusable() {
    let dir = tempdir();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("common.proto", "syntax = \"proto3\";\npackage acme.common;\nmessage Meta { string id = 1; }\n");
    write("legacy.proto", "syntax = \"proto2\";\npackage acme.legacy;\nmessage Old { optional int32 x = 1; }\n");
    write(
        "store.proto",
        "syntax = \"proto3\";\npackage acme.store;\nimport \"common.proto\";\nimport \"legacy.proto\";\nmessage Item { acme.common.Meta meta = 1; }\n",
    );
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    // Only the top-level file is listed, as with prost-build.
    let files = config.generate(&[dir.join("store.proto")], &[&dir]).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["acme.common.rs", "acme.store.rs"], "the proto2 import is left out, not an error");
    assert!(files[0].code.contains("pub struct Meta<'a>"), "{}", files[0].code);
    // An extern path says the application provides the package.
    config.extern_path(".acme.common", "::acme_common");
    let files = config.generate(&[dir.join("store.proto")], &[&dir]).unwrap();
    assert_eq!(files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["acme.store.rs"]);
    assert!(files[0].code.contains("::acme_common::Meta<'a>"), "{}", files[0].code);
}

#[test]
fn a_missing_file_and_an_edition_get_errors_that_say_so() {
    let dir = tempdir();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    let err = config.generate(&[dir.join("nope.proto")], &[&dir]).unwrap_err();
    assert!(err.to_string().contains("nope.proto: no such file"), "{err}");
    std::fs::write(dir.join("e.proto"), "edition = \"2023\";\nmessage M { int32 x = 1; }\n").unwrap();
    let err = config.generate(&[dir.join("e.proto")], &[&dir]).unwrap_err();
    assert!(err.to_string().contains("protobuf editions (`edition = ...`) are not supported"), "{err}");
}

#[test]
fn a_field_of_a_type_that_is_not_generated_is_an_error_that_says_why() {
    let dir = tempdir();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("legacy.proto", "syntax = \"proto2\";\npackage acme.legacy;\nmessage Old { optional int32 x = 1; }\n");
    // Uses the proto2 import's type through a second proto3 import.
    write(
        "middle.proto",
        "syntax = \"proto3\";\npackage acme.middle;\nimport \"legacy.proto\";\nmessage Wrap { acme.legacy.Old old = 1; }\n",
    );
    write(
        "top.proto",
        "syntax = \"proto3\";\npackage acme.top;\nimport \"middle.proto\";\nmessage Item {\n  uint32 id = 1;\n  map<string, acme.middle.Wrap> by_name = 2;\n}\n",
    );
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    let u = match config.generate(&[dir.join("top.proto")], &[&dir]) {
        Err(Error::Unsupported(u)) => u,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!((u.file.as_str(), u.line), ("top.proto", 6), "{u}");
    assert!(u.detail.contains("field by_name uses acme.middle.Wrap"), "{u}");
    assert!(u.detail.contains("middle.proto is not generated") && u.detail.contains("legacy.proto"), "{u}");

    // A Google file that `::cornflakes::well_known` does not hold.
    let u = unsupported(
        "syntax = \"proto3\";\nimport \"google/protobuf/api.proto\";\nmessage M {\n  google.protobuf.Api api = 1;\n}\n",
    );
    assert_eq!(u.line, 4, "{u}");
    assert!(u.detail.contains("google/protobuf/api.proto is not among the well-known files"), "{u}");
    assert!(u.detail.contains("clear_extern_paths"), "{u}");
}

#[test]
fn collisions_across_files_of_a_package_and_in_enums_are_reported() {
    let dir = tempdir();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("a.proto", "syntax = \"proto3\";\npackage same;\nmessage HTTPServer { uint32 x = 1; }\n");
    write("b.proto", "syntax = \"proto3\";\npackage same;\n\nmessage HttpServer { uint32 y = 1; }\n");
    let mut config = Config::new();
    config.emit_rerun_if_changed(false);
    let u = match config.generate(&[dir.join("a.proto"), dir.join("b.proto")], &[&dir]) {
        Err(Error::Unsupported(u)) => u,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!((u.file.as_str(), u.line, u.feature), ("b.proto", 4, "a Rust name collision"), "{u}");
    assert!(u.detail.contains("HttpServer") && u.detail.contains("a.proto"), "{u}");

    // Two values that are one variant once the prefix is stripped.
    let u = unsupported("syntax = \"proto3\";\nenum Color {\n  COLOR_RED = 0;\n  RED = 1;\n}\n");
    assert_eq!((u.line, u.feature), (2, "a Rust name collision"), "{u}");
    assert!(u.detail.contains("COLOR_RED") && u.detail.contains("RED") && u.detail.contains("`Red`"), "{u}");
    let u = unsupported("syntax = \"proto3\";\nmessage M {\n  enum E {\n    E_A = 0;\n    A = 1;\n  }\n}\n");
    assert_eq!(u.line, 3, "nested enums too: {u}");
    // Two top-level enums: the second one's line.
    let u = unsupported("syntax = \"proto3\";\nenum HTTPStatus { H_A = 0; }\n\nenum HttpStatus { H_B = 0; }\n");
    assert_eq!(u.line, 4, "{u}");
}

#[test]
fn schema_comments_reach_the_docs_safely() {
    let files = generate(
        "syntax = \"proto3\";\n// A user.\n//\n//     indented();\n// ```\n// fenced();\n// ```\n// See [RFC 1].\nmessage User {\n  // Unique per server.\n  uint64 id = 1;\n}\n// Colors.\nenum Color {\n  // Nothing.\n  COLOR_NONE = 0;\n}\n",
    )
    .unwrap();
    let code = &files[0].code;
    for want in [
        "/// A user.\n",
        "/// indented();\n",
        "/// ```text\n",
        "/// fenced();\n",
        "/// See \\[RFC 1\\].\n",
        "/// Unique per server.\n",
        "/// Colors.\n",
        "/// Nothing.\n",
    ] {
        assert!(code.contains(want), "{want:?} not in\n{code}");
    }
    // The field's comment is on its getter.
    let at = code.find("/// Unique per server.").unwrap();
    assert_eq!(code[at..].find("pub fn"), code[at..].find("pub fn get_id"), "{code}");
}

#[test]
fn include_file_nests_one_module_per_package_segment() {
    let dir = tempdir();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("a.proto", "syntax = \"proto3\";\npackage acme.type;\nmessage A { uint32 x = 1; }\n");
    write(
        "b.proto",
        "syntax = \"proto3\";\npackage acme.shop.v1;\nimport \"a.proto\";\nmessage B { acme.type.A a = 1; }\n",
    );
    let out = dir.join("out");
    let mut config = Config::new();
    config.emit_rerun_if_changed(false).out_dir(&out).include_file("protos.rs");
    let written = config.compile_protos(&[dir.join("b.proto")], &[&dir]).unwrap();
    assert_eq!(written.last(), Some(&out.join("protos.rs")));
    let code = std::fs::read_to_string(out.join("protos.rs")).unwrap();
    let want = "pub mod acme {\n/// Proto package `acme.shop`.\npub mod shop {\n/// Proto package `acme.shop.v1`.\npub mod v1 {\ninclude!(\"acme.shop.v1.rs\");\n}\n}\n/// Proto package `acme.type`.\npub mod r#type {\ninclude!(\"acme.type.rs\");\n}\n}\n";
    assert!(code.ends_with(want), "{code}");
}

/// Attributes land on the types their proto path matches, by prost-build's
/// rules, and an attribute that is not Rust is refused by name.
#[test]
fn attributes_go_where_their_paths_point() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cornflakes-tests/proto/corpus");
    let generate = |config: &mut cornflakes_build::Config| {
        config.emit_rerun_if_changed(false).generate(&[dir.join("payments.proto")], &[&dir])
    };
    let mut config = cornflakes_build::Config::new();
    config
        .type_attribute(".acme.payments.Charge", "#[doc(alias = \"charge_tree\")]")
        .message_attribute("Card", "#[doc(alias = \"card_only\")]")
        .enum_attribute(".", "#[doc(alias = \"any_enum\")]");
    let files = generate(&mut config).unwrap();
    let code = &files.iter().find(|f| f.package == "acme.payments").unwrap().code;
    // The item each attribute precedes (derives and doc lines between).
    let items_after = |attribute: &str| -> Vec<String> {
        let lines: Vec<&str> = code.lines().map(str::trim).collect();
        (0..lines.len())
            .filter(|&i| lines[i].contains(attribute))
            .filter_map(|i| lines[i..].iter().find(|l| l.starts_with("pub struct") || l.starts_with("pub enum")))
            .map(|l| l.split([' ', '<', '{']).nth(2).unwrap_or_default().to_owned())
            .collect()
    };
    // A map field's entry is a message nested in Charge here (prost has none).
    assert_eq!(
        items_after("charge_tree"),
        ["Charge", "State", "Method", "MetadataEntry"],
        "the message and what is nested in it"
    );
    assert_eq!(items_after("card_only"), ["Card"], "a relative path matches the end of the name");
    assert_eq!(items_after("any_enum"), ["Currency", "State", "Method"], "every enum and oneof, no message");

    let mut bad = cornflakes_build::Config::new();
    bad.type_attribute(".", "derive(Hash)");
    let err = generate(&mut bad).unwrap_err();
    assert!(err.to_string().contains("\"derive(Hash)\" for \".\" is not a Rust attribute"), "{err}");
}

/// `file_descriptor_set_path` writes what `protoc --include_imports
/// --descriptor_set_out` writes for the same schema: the same files, in
/// the same order, with the same messages, fields and enums (source info
/// aside, whose spans the two parsers record differently).
#[test]
fn the_descriptor_set_is_what_protoc_writes() {
    use prost::Message as _;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cornflakes-tests/proto/corpus");
    let out = std::env::temp_dir().join(format!("cf-descriptors-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let mut config = cornflakes_build::Config::new();
    config.emit_rerun_if_changed(false).out_dir(&out).file_descriptor_set_path("set.bin");
    config.compile_protos(&[dir.join("payments.proto")], &[&dir]).unwrap();
    let ours = prost_types::FileDescriptorSet::decode(&*std::fs::read(out.join("set.bin")).unwrap()).unwrap();
    let names: Vec<&str> = ours.file.iter().map(|f| f.name()).collect();
    assert!(names.contains(&"payments.proto") && names.contains(&"google/protobuf/timestamp.proto"), "{names:?}");
    let charge = ours.file.iter().find(|f| f.name() == "payments.proto").unwrap();
    assert!(charge.message_type.iter().any(|m| m.name() == "Charge" && m.field.len() == 11));

    let protoc = std::process::Command::new("protoc")
        .arg(format!("-I{}", dir.display()))
        .arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", out.join("protoc.bin").display()))
        .arg("payments.proto")
        .current_dir(&dir)
        .status();
    match protoc {
        Ok(s) if s.success() => {
            let theirs =
                prost_types::FileDescriptorSet::decode(&*std::fs::read(out.join("protoc.bin")).unwrap()).unwrap();
            let strip = |set: &prost_types::FileDescriptorSet| {
                let mut set = set.clone();
                for f in &mut set.file {
                    f.source_code_info = None;
                }
                set
            };
            assert_eq!(strip(&ours), strip(&theirs));
        }
        _ => eprintln!("SKIPPED the protoc comparison: protoc not found (scripts/setup.sh installs protobuf-compiler)"),
    }
    let _ = std::fs::remove_dir_all(&out);
}

//! The protobuf wire option (`Config::wire(Wire::Protobuf)`, `--wire
//! protobuf`): what it adds to generated code, and what it refuses. The
//! encoding itself is tested against prost and protoc in
//! `cornflakes-tests` (tests/protowire_*.rs).

use cornflakes_build::{Config, Error, Wire};

fn generate(source: &str, wire: Wire) -> Result<Vec<cornflakes_build::GeneratedFile>, Error> {
    let dir = std::env::temp_dir().join(format!("cf-build-pw-{}-{}", std::process::id(), source.len()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s.proto"), source).unwrap();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false).wire(wire);
    config.generate(&[dir.join("s.proto")], &[&dir])
}

const SCHEMA: &str = "syntax = \"proto3\";\nmessage M {\n  sint32 a = 1;\n  repeated fixed64 b = 2;\n  repeated int32 c = 3 [packed = false];\n  bytes d = 300;\n}\n";

#[test]
fn protobuf_wire_adds_the_proto_impl_with_precomputed_keys() {
    let pretty = &generate(SCHEMA, Wire::Protobuf).unwrap()[0].code;
    // Compared without whitespace: prettyplease breaks long paths.
    let code: String = pretty.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(code.contains("ProtoImpl<'a>forM<'a>"), "{code}");
    assert!(code.contains("__cf_size:::cornflakes::__private::pw::CachedSize"), "{code}");
    // Keys: field 1 varint = 0x08, field 2 packed = 0x12, field 3 unpacked
    // varint = 0x18, field 300 length-delimited = 0xe2 0x12.
    for key in ["&[0x08]", "&[0x12]", "&[0x18]", "&[0xe2,0x12]"] {
        assert!(code.contains(key), "key {key} missing: {code}");
    }
    assert!(code.contains("pw::Sint32"), "{code}");
    assert!(code.contains("put_packed::<::cornflakes::__private::pw::Fixed64"), "{code}");
    assert!(code.contains("put_unpacked::<::cornflakes::__private::pw::Int32"), "{code}");
}

#[test]
fn the_default_wire_generates_no_protobuf_code() {
    let code = &generate(SCHEMA, Wire::Cornflakes).unwrap()[0].code;
    assert!(!code.contains("ProtoImpl"), "{code}");
    assert!(!code.contains("__cf_size"), "{code}");
}

#[test]
fn extern_messages_are_refused_with_the_protobuf_wire_but_the_well_known_types_are_not() {
    let schema = "syntax = \"proto3\";\nimport \"google/protobuf/timestamp.proto\";\nmessage Event {\n  google.protobuf.Timestamp at = 1;\n}\n";
    assert!(generate(schema, Wire::Cornflakes).is_ok());
    // The runtime has the well-known types with protobuf-wire code.
    let files = generate(schema, Wire::Protobuf).unwrap();
    assert!(files[0].code.contains("::cornflakes::well_known::protowire::Timestamp"), "{}", files[0].code);
    // Another crate's types may have none: refused, saying where.
    let dir = std::env::temp_dir().join(format!("cf-build-pw-extern-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s.proto"), schema).unwrap();
    let mut config = Config::new();
    config.emit_rerun_if_changed(false).wire(Wire::Protobuf).extern_path(".google.protobuf", "::my_types");
    match config.generate(&[dir.join("s.proto")], &[&dir]) {
        Err(Error::Unsupported(u)) => {
            assert_eq!(u.line, 3, "{u}");
            assert!(u.to_string().contains("Event.at"), "{u}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

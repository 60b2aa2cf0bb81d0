//! Golden check against Google's own implementation: messages encoded by
//! the protobuf wire format (`Wire::Protobuf`), sent through
//! serialize-and-send (zero-copy payloads included) and gathered, are
//! decoded by `protoc --decode` into the text in `vectors/protowire/*.txt`;
//! and `protoc --encode` of that text is decoded by ours into the same
//! values and re-encoded to the same bytes (but for one map entry: C++
//! writes a default map value, prost and ours do not). The golden text is
//! written by hand from the values set in `every_kind`; protoc prints a map
//! entry's value even when it was not sent (`value: ""`).
//!
//! Needs `protoc` (Debian `protobuf-compiler`, installed by
//! `scripts/setup.sh`); without it each test prints why and passes (under CI it fails).
// Runs external programs, which Miri cannot (scripts/miri.sh runs this crate's tests).
#![cfg(not(miri))]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cornflakes::protowire::{gather, ProtoMessage};
use cornflakes::{Arena, Pool};
use cornflakes_tests::pwtest;

fn protoc_available() -> bool {
    match Command::new("protoc").arg("--version").output() {
        Ok(out) if out.status.success() => true,
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "a test partner is missing under CI: scripts/setup.sh must install it"
            );
            eprintln!("SKIPPED: protoc not found; install Debian's protobuf-compiler (scripts/setup.sh) to run the golden check");
            false
        }
    }
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Runs `protoc --<mode>=pwtest.<ty>` with `input` on stdin.
fn protoc(mode: &str, ty: &str, input: &[u8]) -> Vec<u8> {
    let mut child = Command::new("protoc")
        .arg(format!("--{mode}=pwtest.{ty}"))
        .arg("-I")
        .arg(dir().join("proto/protowire"))
        .arg("pwtest.proto")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc runs");
    child.stdin.take().expect("stdin").write_all(input).expect("write to protoc");
    let out = child.wait_with_output().expect("protoc finishes");
    assert!(out.status.success(), "protoc --{mode} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn golden(name: &str) -> String {
    let path = dir().join("vectors/protowire").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Serialize-and-send, gathered as the receiver sees it.
fn wire(m: &pwtest::Tree<'_>) -> Vec<u8> {
    let layout = m.proto_layout();
    let mut copied = vec![0u8; layout.copy_len];
    let mut zc = Vec::new();
    m.write_proto(&layout, &mut copied, |at, b| zc.push((at, b.clone()))).unwrap();
    gather(&copied, &zc)
}

/// Every scalar type at an edge value, repeated packed and unpacked, a
/// oneof holding a message, a map, and a 600-byte zero-copy payload.
fn every_kind<'a>(arena: &'a Arena, pool: &Pool) -> pwtest::Tree<'a> {
    let mut t = pwtest::Tree::new_in(arena);
    let s = t.get_mut_scalars();
    s.set_f_double(-1.5);
    s.set_f_float(0.25);
    s.set_f_int32(-1);
    s.set_f_int64(i64::MIN);
    s.set_f_uint32(u32::MAX);
    s.set_f_uint64(u64::MAX);
    s.set_f_sint32(-2);
    s.set_f_sint64(i64::MAX);
    s.set_f_fixed32(7);
    s.set_f_fixed64(1 << 40);
    s.set_f_sfixed32(-3);
    s.set_f_sfixed64(-4);
    s.set_f_bool(true);
    s.set_f_string("héllo");
    s.set_f_bytes(b"\x00\x01\xff");
    s.set_f_enum(pwtest::Color::Blue);
    let r = t.get_mut_repeats();
    for v in [0, 1, -1, 300] {
        r.get_mut_r_int32().append(v);
        r.get_mut_u_int32().append(v);
        r.get_mut_r_sint32().append(v);
        r.get_mut_u_sint64().append(i64::from(v));
    }
    r.get_mut_r_fixed64().append(5);
    r.get_mut_r_double().append(2.5);
    r.get_mut_u_double().append(-0.5);
    r.get_mut_r_bool().append(false);
    r.get_mut_r_bool().append(true);
    r.append_r_enum(pwtest::Color::Red);
    r.get_mut_u_enum().append(7); // unknown to the schema: kept
    r.append_r_string("a");
    r.append_r_string("");
    r.append_r_bytes(b"b");
    let mut child = pwtest::Tree::new_in(arena);
    child.set_opt_int32(0); // explicit presence: sent although 0
    t.append_children(child);
    t.set_opt_string("opt");
    let mut c = pwtest::Scalars::new_in(arena);
    c.set_f_uint32(9);
    t.set_c_msg(c);
    t.insert_labels("k1", b"v1");
    t.insert_labels("k2", b"");
    t.set_after_oneof(11);
    t.set_big_buf(pool.alloc_copy(&[b'z'; 600]).unwrap());
    assert!(t.get_big().is_zero_copy());
    t
}

#[test]
fn protoc_decodes_what_we_send() {
    if !protoc_available() {
        return;
    }
    let pool = Pool::new().unwrap();
    let arena = Arena::new(&pool);
    let m = every_kind(&arena, &pool);
    let text = String::from_utf8(protoc("decode", "Tree", &wire(&m))).unwrap();
    assert_eq!(text, golden("every_kind.txt"), "protoc --decode output differs from the golden text");

    let empty = pwtest::Tree::new_in(&arena);
    assert!(wire(&empty).is_empty());
    assert_eq!(protoc("decode", "Tree", &[]), b"");
}

#[test]
fn we_decode_what_protoc_encodes() {
    if !protoc_available() {
        return;
    }
    let pool = Pool::new().unwrap();
    let arena = Arena::new(&pool);
    let bytes = protoc("encode", "Tree", golden("every_kind.txt").as_bytes());
    let pkt = pool.alloc_copy(&bytes).unwrap();
    let decoded = pwtest::Tree::deserialize_proto(&pkt, &arena).expect("ours decodes protoc's bytes");
    let expected = every_kind(&arena, &pool);
    assert_eq!(decoded, expected);
    // protoc (C++) writes a map entry's value even when it is the default
    // (`labels { key: "k2" }` becomes `82 06 0a 02 6b 32 12 00`); prost and
    // ours leave it out (`82 04 0a 02 6b 32`). Apart from that entry, the
    // bytes are the same.
    let ours = wire(&decoded);
    assert_eq!(ours, wire(&expected));
    let cxx_entry = [0x52, 0x06, 0x0a, 0x02, b'k', b'2', 0x12, 0x00];
    let our_entry = [0x52, 0x04, 0x0a, 0x02, b'k', b'2'];
    let at = bytes.windows(cxx_entry.len()).position(|w| w == cxx_entry).expect("protoc's k2 entry");
    let mut cxx_as_ours = bytes[..at].to_vec();
    cxx_as_ours.extend_from_slice(&our_entry);
    cxx_as_ours.extend_from_slice(&bytes[at + cxx_entry.len()..]);
    assert_eq!(ours, cxx_as_ours);
    assert!(decoded.get_big().is_zero_copy(), "600 bytes decode as a reference into the packet");
}

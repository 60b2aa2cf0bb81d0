//! Hex test vectors of the wire format (`vectors/*.hex`, explained in
//! `docs/wire-format.md`), checked in both directions: encoding the message
//! gives exactly the file's bytes, and decoding the file gives the message.
//!
//! Set `UPDATE_VECTORS=1` to write missing vector files from the encoder
//! (then check them by hand against the specification).

use cornflakes::{Arena, Message, Pool};
use cornflakes_tests::example::{node::Leaf, GetM, Inner, Node};
use cornflakes_tests::wide::Wide;

fn parse_hex(text: &str) -> Vec<u8> {
    let digits: String =
        text.lines().map(|l| l.split('#').next().unwrap()).flat_map(|l| l.split_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap()).collect()
}

fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(16) {
        let line: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&line.join(" "));
        out.push('\n');
    }
    out
}

/// Compares `bytes` with the vector file `name`.
fn check_vector(name: &str, bytes: &[u8]) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors").join(name);
    if !path.exists() && std::env::var_os("UPDATE_VECTORS").is_some() {
        std::fs::write(&path, format!("# {name}: see docs/wire-format.md\n{}", to_hex(bytes))).unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("missing vector {}", path.display()));
    let expected = parse_hex(&text);
    assert!(expected == bytes, "encoding differs from {name}:\nexpected\n{}got\n{}", to_hex(&expected), to_hex(bytes));
    expected
}

#[test]
fn inner_small() {
    let arena = Arena::copying();
    let mut m = Inner::new_in(&arena);
    m.set_a(0x0102_0304);
    m.set_data(b"hi");
    let bytes = check_vector("inner_small.hex", &m.serialize_to_vec().unwrap());
    let back = Inner::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!((back.get_a(), back.get_data().as_bytes()), (0x0102_0304, &b"hi"[..]));
}

#[test]
fn inner_empty() {
    let arena = Arena::copying();
    let m = Inner::new_in(&arena);
    let bytes = check_vector("inner_empty.hex", &m.serialize_to_vec().unwrap());
    let back = Inner::deserialize_from_slice(&bytes, &arena).unwrap();
    assert!(!back.has_a() && !back.has_data());
}

/// The paper's Figure 4: an integer and a list of three values, the first
/// long enough to be zero-copy; copied data precede zero-copy data.
#[test]
fn getm_figure4() {
    let pool = Pool::new().unwrap();
    let arena = Arena::new(&pool);
    let val1 = pool.alloc_copy(&[0x11; 600]).unwrap();
    let mut m = GetM::new_in(&arena);
    m.set_id(7);
    m.init_vals(3);
    m.append_vals(&val1);
    m.append_vals(b"val2");
    m.append_vals(b"val3");
    let layout = m.layout();
    assert_eq!(layout.zero_copy_entries, 1);
    let bytes = check_vector("getm_figure4.hex", &m.serialize_to_vec().unwrap());
    // Decoding from a pool buffer makes val1 zero-copy again.
    let pkt = pool.alloc_copy(&bytes).unwrap();
    let back = GetM::deserialize(&pkt, &arena).unwrap();
    assert_eq!(back.get_id(), 7);
    let vals: Vec<&[u8]> = back.get_vals().iter().map(|v| v.as_bytes()).collect();
    assert_eq!(vals, [&[0x11; 600][..], b"val2", b"val3"]);
    assert!(back.get_vals()[0].is_zero_copy() && !back.get_vals()[1].is_zero_copy());
}

/// 40 fields: two bitmap words; only fields 1, 33 and 40 present.
#[test]
fn wide_two_word_bitmap() {
    let arena = Arena::copying();
    let mut m = Wide::new_in(&arena);
    m.set_f1(1);
    m.set_f33(33);
    m.set_f40(40);
    let bytes = check_vector("wide_two_words.hex", &m.serialize_to_vec().unwrap());
    let back = Wide::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!((back.get_f1(), back.get_f33(), back.get_f40()), (1, 33, 40));
    assert!(!back.has_f2() && !back.has_f32());
}

/// Nested messages and a list of nested messages, depth-first.
#[test]
fn node_nested() {
    let arena = Arena::copying();
    let mut root = Node::new_in(&arena);
    root.set_value(1);
    let mut left = Node::new_in(&arena);
    left.set_value(2);
    root.set_left(left);
    let mut leaf = Leaf::new_in(&arena);
    leaf.set_type("x");
    root.append_leaves(leaf);
    let bytes = check_vector("node_nested.hex", &root.serialize_to_vec().unwrap());
    let back = Node::deserialize_from_slice(&bytes, &arena).unwrap();
    assert_eq!(back, root);
    assert_eq!(back.get_left().unwrap().get_value(), 2);
    assert_eq!(back.get_leaves()[0].get_type().as_str().unwrap(), "x");
}

//! Hand-built malicious messages: each test spells out the bytes of one
//! attack on the decoder (in the style of capnproto-rust's
//! `tests/far_pointer_oob.rs`) and asserts the exact `DecodeError` it must
//! produce. The decoder must never panic, read out of bounds, recurse
//! without bound or allocate more than a constant times the input length.
//!
//! Field bits used below (bit k = k-th field in field-number order):
//!
//! ```text
//! GetM:       0 id (u32)  1 keys (list<string>)  2 vals (list<bytes>)
//! Inner:      0 a (u32)   1 data (bytes)
//! Node:       0 value (u32)  1 left (Node)  2 right (Node)  3 leaves (list<Leaf>)
//! Leaf:       0 type (string)
//! Everything: 4 flag (bool)  7 text (string)  8 data (bytes)  9 inner (Inner)
//!             14 r_flag (list<bool>)  19 r_inner (list<Inner>)  22 tree (Node)
//! ```
//!
//! Entries: bool 1 byte, u32 4, bytes/string (offset u32, len u32), nested
//! message (offset u32 of its header), list (count u32, table offset u32);
//! all little-endian, offsets absolute from the start of the message.

use cornflakes::{Arena, CfBytes, DecodeError, DecodeOptions, Message, Pool, RcBuf};
use cornflakes_tests::example::{node::Leaf, Everything, GetM, Inner, Node};

/// Little-endian bytes, written field by field.
#[derive(Default)]
struct Wire(Vec<u8>);

impl Wire {
    fn new() -> Self {
        Wire::default()
    }

    /// An object header: word count, then the bitmap words.
    fn header(&mut self, bitmap: &[u32]) -> &mut Self {
        self.u32(bitmap.len() as u32);
        for &w in bitmap {
            self.u32(w);
        }
        self
    }

    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn bytes(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// Bytes the arena may take for a decode of `len` input bytes that fails
/// early: a generous constant, far below what the attacks ask for.
const SMALL_ARENA: usize = 64 << 10;

/// A small pool for tests that decode from pool memory.
fn pool() -> Pool {
    Pool::new().expect("pool")
}

/// Copies `data` into a pool buffer, as a receive path would.
fn packet(pool: &Pool, data: &[u8]) -> RcBuf {
    pool.alloc_copy(data).expect("pool buffer")
}

// ---------------------------------------------------------------------------
// Truncation
// ---------------------------------------------------------------------------

/// Attack: fewer than four bytes, so not even the bitmap word count fits.
/// A decoder that reads the count unconditionally reads past the end.
#[test]
fn truncated_word_count() {
    let arena = Arena::copying();
    assert_eq!(
        Everything::deserialize_from_slice(&[], &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 0, need: 4, len: 0 }
    );
    assert_eq!(
        GetM::deserialize_from_slice(&[1, 0, 0], &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 0, need: 4, len: 3 }
    );
}

/// Attack: the word count promises one bitmap word that is not there.
#[test]
fn truncated_bitmap() {
    let arena = Arena::copying();
    let msg = Wire::new().u32(1).bytes();
    assert_eq!(
        Node::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 0, need: 8, len: 4 }
    );
}

/// Attack: the bitmap marks `id` present but the message ends before its
/// entry.
#[test]
fn truncated_entry() {
    let arena = Arena::copying();
    let msg = Wire::new().header(&[0b1]).raw(&[7, 0]).bytes();
    assert_eq!(
        GetM::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 8, need: 4, len: 10 }
    );
}

/// Attack: a valid message cut short anywhere. Every byte of an honest
/// message is read (there is no padding), so every strict prefix must fail
/// with `OutOfBounds`, from a slice and from a pool buffer.
#[test]
fn every_truncation_of_a_valid_message_fails() {
    let arena = Arena::copying();
    let mut m = Everything::new_in(&arena);
    m.set_i32(-1);
    m.set_flag(true);
    m.set_text("text");
    m.set_data(b"data");
    let mut inner = Inner::new_in(&arena);
    inner.set_a(5);
    inner.set_data(b"inner data");
    m.set_inner(inner);
    m.append_r_flag(true);
    m.append_r_text("one");
    m.append_r_inner(Inner::new_in(&arena));
    let mut tree = Node::new_in(&arena);
    tree.set_left(Node::new_in(&arena));
    let mut leaf = Leaf::new_in(&arena);
    leaf.set_type("leaf");
    tree.append_leaves(leaf);
    m.set_tree(tree);
    m.set_far(9);
    let full = m.serialize_to_vec().unwrap();
    assert!(Everything::deserialize_from_slice(&full, &arena).is_ok());

    let pool = pool();
    for cut in 0..full.len() {
        let decode = Arena::copying();
        let err = Everything::deserialize_from_slice(&full[..cut], &decode).unwrap_err();
        assert!(matches!(err, DecodeError::OutOfBounds { len, .. } if len == cut), "cut at {cut}: {err:?}");

        let pkt = packet(&pool, &full[..cut]);
        let zero_copy = Arena::with_threshold(Some(&pool), 0);
        let err = Everything::deserialize(&pkt, &zero_copy).unwrap_err();
        assert!(matches!(err, DecodeError::OutOfBounds { len, .. } if len == cut), "cut at {cut}: {err:?}");
        assert_eq!(pkt.ref_count(), 1, "a failed decode must release what it took");
    }
}

// ---------------------------------------------------------------------------
// Sizes that overflow
// ---------------------------------------------------------------------------

/// Attack: a bitmap word count of 0xFFFFFFFF. The header would be
/// 4 + 4 * 0xFFFFFFFF bytes: a decoder that computes this in u32 wraps to 0
/// and reads garbage; one that trusts it loops over 4 billion words or
/// allocates 16 GiB for the bitmap. It must fail on the bounds check.
#[test]
fn bitmap_word_count_u32_max() {
    let arena = Arena::copying();
    let msg = Wire::new().u32(u32::MAX).u32(0xFFFF_FFFF).u32(0).bytes();
    assert_eq!(
        Everything::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 0, need: 4 + 4 * u64::from(u32::MAX), len: 12 }
    );
    assert!(arena.allocated_bytes() < SMALL_ARENA);
}

/// Attack: a bytes entry whose offset + length overflows u32
/// (0xFFFF_FFF0 + 0x20 wraps to 0x10, which equals the message length).
/// A decoder that adds in u32 would accept the range and then slice
/// `[0xFFFF_FFF0..0x10]`; the sum must be taken without wrapping.
#[test]
fn bytes_offset_plus_length_overflows_u32() {
    let msg = Wire::new().header(&[0b10]).u32(0xFFFF_FFF0).u32(0x20).bytes();
    assert_eq!(msg.len(), 0x10);
    let arena = Arena::copying();
    assert_eq!(
        Inner::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 0xFFFF_FFF0, need: 0x20, len: 16 }
    );
    // The zero-copy path checks the same range before making a reference.
    let pool = pool();
    let pkt = packet(&pool, &msg);
    let zero_copy = Arena::with_threshold(Some(&pool), 0);
    assert_eq!(
        Inner::deserialize(&pkt, &zero_copy).unwrap_err(),
        DecodeError::OutOfBounds { at: 0xFFFF_FFF0, need: 0x20, len: 16 }
    );
    assert_eq!(pkt.ref_count(), 1);
}

/// Attack: a bytes entry with an in-bounds offset and a length of
/// 0xFFFFFFFF: the data would run 4 GiB past the end of the message.
#[test]
fn bytes_length_past_the_end() {
    let msg = Wire::new().header(&[0b10]).u32(8).u32(u32::MAX).bytes();
    let arena = Arena::copying();
    assert_eq!(
        Inner::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 8, need: u64::from(u32::MAX), len: 16 }
    );
}

/// Attack: an empty bytes field whose offset lies past the end. Even a
/// zero-length read must start inside the message (or exactly at its end),
/// or an empty slice would be formed from a wild pointer.
#[test]
fn empty_bytes_offset_past_the_end() {
    let arena = Arena::copying();
    let past = Wire::new().header(&[0b10]).u32(17).u32(0).bytes();
    assert_eq!(
        Inner::deserialize_from_slice(&past, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 17, need: 0, len: 16 }
    );
    // Exactly at the end is a valid empty field, which proto3 reads as
    // unset (an empty `bytes` is its default).
    let at_end = Wire::new().header(&[0b10]).u32(16).u32(0).bytes();
    let m = Inner::deserialize_from_slice(&at_end, &arena).unwrap();
    assert!(!m.has_data() && m.get_data().is_empty());
}

/// Attack: a list count of 0xFFFFFFFF in a 16-byte message. A decoder that
/// reserves `count` elements up front allocates 0xFFFFFFFF * 24 bytes
/// (about 100 GiB) before reading a single one; the table must be checked
/// against the input first, so the arena stays small.
#[test]
fn list_count_u32_max() {
    let msg = Wire::new().header(&[0b100]).u32(u32::MAX).u32(8).bytes();
    assert_eq!(msg.len(), 16);
    let arena = Arena::copying();
    assert_eq!(
        GetM::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: 8, need: 8 * u64::from(u32::MAX), len: 16 }
    );
    assert!(arena.allocated_bytes() < SMALL_ARENA, "arena took {} bytes", arena.allocated_bytes());

    // The same with one-byte elements (list<bool>) and nested messages
    // (list<Inner>, 4-byte entries), through the zero-copy path.
    let pool = pool();
    let zero_copy = Arena::with_threshold(Some(&pool), 0);
    let flags = Wire::new().header(&[1 << 14]).u32(u32::MAX).u32(0).bytes();
    let pkt = packet(&pool, &flags);
    assert_eq!(
        Everything::deserialize(&pkt, &zero_copy).unwrap_err(),
        DecodeError::OutOfBounds { at: 0, need: u64::from(u32::MAX), len: 16 }
    );
    let inners = Wire::new().header(&[1 << 19]).u32(u32::MAX).u32(0).bytes();
    let pkt = packet(&pool, &inners);
    assert_eq!(
        Everything::deserialize(&pkt, &zero_copy).unwrap_err(),
        DecodeError::OutOfBounds { at: 0, need: 4 * u64::from(u32::MAX), len: 16 }
    );
    assert!(zero_copy.allocated_bytes() < SMALL_ARENA, "arena took {} bytes", zero_copy.allocated_bytes());
}

/// Attack: a list whose table fits (so its count is believed) but whose
/// elements are all bad. The decoder may reserve the list before failing,
/// but only a constant times the input: each 4-byte table entry becomes one
/// in-memory `Inner` of a few dozen bytes.
#[test]
fn list_allocation_is_proportional_to_the_input() {
    const COUNT: u32 = 1000;
    let mut w = Wire::new();
    w.header(&[1 << 19]).u32(COUNT).u32(16);
    for _ in 0..COUNT {
        w.u32(u32::MAX - 3); // every element's header lies out of bounds
    }
    let msg = w.bytes();
    let arena = Arena::copying();
    assert_eq!(
        Everything::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::OutOfBounds { at: u64::from(u32::MAX - 3), need: 4, len: msg.len() }
    );
    // 1000 elements of 40 bytes for 4016 input bytes: about 10 times.
    let bound = 16 * msg.len();
    assert!(
        arena.allocated_bytes() <= bound,
        "arena took {} bytes for {} input bytes",
        arena.allocated_bytes(),
        msg.len()
    );
}

// ---------------------------------------------------------------------------
// Cycles, depth and amplification
// ---------------------------------------------------------------------------

/// Attack: a `Node` whose `left` offset points at its own header, a cycle
/// a naive recursive decoder follows until the stack overflows. The
/// traversal budget (header bytes visited may not exceed the input length,
/// at least 64) stops it after eight visits of the 8-byte header prefix;
/// with the budget lifted, the depth limit stops it at 64 levels.
#[test]
fn nested_offset_points_to_itself() {
    // Node at 0: W=1, bitmap {left}, left = 0.
    let msg = Wire::new().header(&[0b10]).u32(0).bytes();
    let arena = Arena::copying();
    assert_eq!(Node::deserialize_from_slice(&msg, &arena).unwrap_err(), DecodeError::TraversalLimit(64));

    let no_budget = DecodeOptions { traversal_limit: 1 << 20, ..DecodeOptions::default() };
    assert_eq!(Node::deserialize_with_options(&msg, None, &arena, no_budget).unwrap_err(), DecodeError::TooDeep(64));
    let shallow = DecodeOptions { max_depth: 3, traversal_limit: 1 << 20, ..DecodeOptions::default() };
    assert_eq!(Node::deserialize_with_options(&msg, None, &arena, shallow).unwrap_err(), DecodeError::TooDeep(3));

    // A two-node cycle (0 -> 12 -> 0) through a nested field of Everything.
    let two = Wire::new()
        .header(&[1 << 22]) // Everything at 0: tree = 12
        .u32(12)
        .header(&[0b100]) // Node at 12: right = 24
        .u32(24)
        .header(&[0b10]) // Node at 24: left = 12
        .u32(12)
        .bytes();
    assert_eq!(Everything::deserialize_from_slice(&two, &arena).unwrap_err(), DecodeError::TraversalLimit(64));
}

/// Builds a chain of `n` nodes through `left`, the way an honest sender
/// would.
fn chain(arena: &Arena, n: u32) -> Node<'_> {
    let mut node = Node::new_in(arena);
    node.set_value(0);
    for i in 1..n {
        let mut parent = Node::new_in(arena);
        parent.set_value(i);
        parent.set_left(node);
        node = parent;
    }
    node
}

/// Attack: an honest-looking but deep recursive chain (each node visited
/// once, so within the traversal budget). Decoding recurses once per level;
/// 64 levels are accepted, 65 are `TooDeep`, and so is a chain of 10 000.
#[test]
fn recursive_chain_deeper_than_64() {
    let arena = Arena::copying();
    let ok = chain(&arena, 64).serialize_to_vec().unwrap();
    let decoded = Node::deserialize_from_slice(&ok, &arena).unwrap();
    assert_eq!(decoded.get_value(), 63);

    let deep = chain(&arena, 65).serialize_to_vec().unwrap();
    assert_eq!(Node::deserialize_from_slice(&deep, &arena).unwrap_err(), DecodeError::TooDeep(64));

    // Hand-built: 10 000 nodes of 12 bytes, node k's left at 12 (k + 1).
    let mut w = Wire::new();
    for k in 0..10_000u32 {
        w.header(&[0b10]).u32(12 * (k + 1));
    }
    w.header(&[0]);
    assert_eq!(Node::deserialize_from_slice(&w.bytes(), &arena).unwrap_err(), DecodeError::TooDeep(64));

    // `Everything` counts as a level: a 64-node tree under it is too deep.
    let mut top = Everything::new_in(&arena);
    top.set_tree(chain(&arena, 64));
    let msg = top.serialize_to_vec().unwrap();
    assert_eq!(Everything::deserialize_from_slice(&msg, &arena).unwrap_err(), DecodeError::TooDeep(64));
}

/// Attack: amplification. Every entry of `r_inner` points at the same
/// `Inner` header, whose bitmap claims 64 words (a "newer schema"): a 536-
/// byte message would decode into 64 visits of a 260-byte header prefix,
/// 16 KiB of traversal (30 times the input), and nesting such fan-outs
/// multiplies the factors (see `diamond_dag_amplification`). Headers visited
/// are charged to a budget of the input length, so it fails; the honest
/// equivalent, with 64 distinct copies, decodes.
#[test]
fn shared_nested_header_amplification() {
    const COUNT: u32 = 64;
    const INNER_LEN: u32 = 4 + 4 * 64 + 4; // word count, 64 words, entry `a`

    let inner_header = |w: &mut Wire, a: u32| {
        let mut bitmap = [0u32; 64];
        bitmap[0] = 0b1; // `a`
        w.header(&bitmap).u32(a);
    };

    // Shared: Everything at 0 (16 bytes), table at 16, one Inner after it.
    let shared_at = 16 + 4 * COUNT;
    let mut w = Wire::new();
    w.header(&[1 << 19]).u32(COUNT).u32(16);
    for _ in 0..COUNT {
        w.u32(shared_at);
    }
    inner_header(&mut w, 7);
    let shared = w.bytes();
    assert_eq!(shared.len(), 536);
    let arena = Arena::copying();
    assert_eq!(Everything::deserialize_from_slice(&shared, &arena).unwrap_err(), DecodeError::TraversalLimit(536));

    // Honest: one Inner per entry.
    let mut w = Wire::new();
    w.header(&[1 << 19]).u32(COUNT).u32(16);
    for i in 0..COUNT {
        w.u32(shared_at + i * INNER_LEN);
    }
    for i in 0..COUNT {
        inner_header(&mut w, i);
    }
    let honest = w.bytes();
    let m = Everything::deserialize_from_slice(&honest, &arena).unwrap();
    assert_eq!(m.get_r_inner().len(), COUNT as usize);
    assert!(m.get_r_inner().iter().enumerate().all(|(i, inner)| inner.get_a() == i as u32));
}

/// Attack: an exponential DAG. Node k's `left` and `right` both point at
/// node k + 1, so 30 nodes (480 bytes) unfold into 2^30 visits, all within
/// the depth limit. The traversal budget stops it after 60 header visits.
#[test]
fn diamond_dag_amplification() {
    const NODES: u32 = 30;
    let mut w = Wire::new();
    for k in 0..NODES {
        let next = 16 * (k + 1);
        if k + 1 < NODES {
            w.header(&[0b110]).u32(next).u32(next);
        } else {
            w.header(&[0b1]).u32(k).u32(0); // last: value only, 4 bytes spare
        }
    }
    let msg = w.bytes();
    assert_eq!(msg.len(), 480);
    let arena = Arena::copying();
    assert_eq!(Node::deserialize_from_slice(&msg, &arena).unwrap_err(), DecodeError::TraversalLimit(480));
    assert!(arena.allocated_bytes() < SMALL_ARENA);
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// Attack: a bool byte other than 0 or 1. Turning it into a Rust `bool`
/// without checking is undefined behavior.
#[test]
fn invalid_bool_byte() {
    let arena = Arena::copying();
    let msg = Wire::new().header(&[1 << 4]).u8(2).bytes();
    assert_eq!(
        Everything::deserialize_from_slice(&msg, &arena).unwrap_err(),
        DecodeError::InvalidBool { at: 8, value: 2 }
    );

    // In a list<bool> table: the third element is 0xFF.
    let list = Wire::new().header(&[1 << 14]).u32(3).u32(16).raw(&[1, 0, 0xFF]).bytes();
    assert_eq!(
        Everything::deserialize_from_slice(&list, &arena).unwrap_err(),
        DecodeError::InvalidBool { at: 18, value: 0xFF }
    );
}

/// Not an error: a string field holding invalid UTF-8 decodes (strings are
/// checked when read, not on the receive path), keeps its bytes, and
/// `as_str` reports the error. Re-sending it forwards the bytes unchanged.
#[test]
fn invalid_utf8_string_is_reported_by_as_str() {
    let bad: &[u8] = &[b'o', b'k', 0xC3, 0x28, 0xFF];
    let arena = Arena::copying();
    let msg = Wire::new().header(&[1 << 7]).u32(16).u32(bad.len() as u32).raw(bad).bytes();
    let m = Everything::deserialize_from_slice(&msg, &arena).unwrap();
    assert_eq!(m.get_text().as_bytes(), bad);
    let err = m.get_text().as_str().unwrap_err();
    assert_eq!(err.valid_up_to(), 2);
    assert_eq!(m.serialize_to_vec().unwrap(), msg);

    // The same bytes as a zero-copy string, and as a Leaf's `type`.
    let pool = pool();
    let pkt = packet(&pool, &msg);
    let zero_copy = Arena::with_threshold(Some(&pool), 0);
    let m = Everything::deserialize(&pkt, &zero_copy).unwrap();
    assert!(m.get_text().is_zero_copy());
    assert!(m.get_text().as_str().is_err());

    let leaves = Wire::new()
        .header(&[0b1000]) // Node: leaves
        .u32(1)
        .u32(16)
        .u32(20) // table: one Leaf at 20
        .header(&[0b1])
        .u32(36)
        .u32(bad.len() as u32)
        .raw(bad)
        .bytes();
    let node = Node::deserialize_from_slice(&leaves, &arena).unwrap();
    assert!(node.get_leaves()[0].get_type().as_str().is_err());
}

// ---------------------------------------------------------------------------
// Schema evolution
// ---------------------------------------------------------------------------

/// Not an error: a newer schema's `Inner` with more fields. Bits past the
/// last known field, whole extra bitmap words, and the entries of those
/// fields (which follow the known ones) are ignored.
#[test]
fn unknown_bits_and_words_from_a_newer_schema_are_ignored() {
    let arena = Arena::copying();
    // Inner v2: fields a, data, plus a u64 (bit 2) and bits 3..31 set.
    let v2 = Wire::new()
        .header(&[0xFFFF_FFFF])
        .u32(42) // a
        .u32(28) // data offset
        .u32(3) // data len
        .u64(u64::MAX) // entry of the unknown field 2
        .raw(b"abc")
        .bytes();
    let m = Inner::deserialize_from_slice(&v2, &arena).unwrap();
    assert_eq!((m.get_a(), m.get_data().as_bytes()), (42, &b"abc"[..]));
    // Re-encoding keeps only the fields this schema knows.
    let mut expected = Inner::new_in(&arena);
    expected.set_a(42);
    expected.set_data(b"abc");
    assert_eq!(m, expected);
    assert_eq!(m.serialize_to_vec().unwrap(), expected.serialize_to_vec().unwrap());

    // Inner v3: three bitmap words, the extra ones all set.
    let v3 = Wire::new()
        .header(&[0b11, u32::MAX, u32::MAX])
        .u32(42)
        .u32(36)
        .u32(3)
        .u64(0) // entries of unknown fields, never read
        .raw(b"abc")
        .bytes();
    let m = Inner::deserialize_from_slice(&v3, &arena).unwrap();
    assert_eq!(m, expected);

    // The same Inner v3 nested in Everything and in a list.
    // Everything at 0 (20 bytes): inner = 24, r_inner = (1, table at 20).
    let mut w = Wire::new();
    w.header(&[(1 << 9) | (1 << 19)]).u32(24).u32(1).u32(20);
    w.u32(24); // r_inner's table: the same header, visited twice
    let inner_at = w.len() as u32;
    assert_eq!(inner_at, 24);
    let data_at = inner_at + 16 + 12 + 8;
    w.header(&[0b11, u32::MAX, u32::MAX]).u32(42).u32(data_at).u32(3).u64(0).raw(b"abc");
    let nested = w.bytes();
    // The shared header is charged twice (prefix and entries), so this
    // aliasing needs a traversal limit above 1.
    assert!(matches!(Everything::deserialize_from_slice(&nested, &arena), Err(DecodeError::TraversalLimit(_))));
    let twice = cornflakes::DecodeOptions { traversal_limit: 2, ..Default::default() };
    let m = Everything::deserialize_with_options(&nested, None, &arena, twice).unwrap();
    assert_eq!(m.get_inner(), Some(&expected));
    assert_eq!(&m.get_r_inner()[..], std::slice::from_ref(&expected));
}

/// Not an error: messages from older schemas. An `Everything` from a
/// version that had only the first nine fields (bits 0..=8), and objects
/// with no bitmap words at all (W = 0), decode with the rest unset.
#[test]
fn older_schema_sized_messages_decode() {
    let arena = Arena::copying();
    let v1 = Wire::new()
        .header(&[0x1FF])
        .u32(-5i32 as u32) // i32
        .u64(-6i64 as u64) // i64
        .u32(7) // u32
        .u64(8) // u64
        .u8(1) // flag
        .u32(1.5f32.to_bits()) // f32
        .u64(2.5f64.to_bits()) // f64
        .u32(61) // text at 61
        .u32(2)
        .u32(63) // data at 63
        .u32(1)
        .raw(b"hi!")
        .bytes();
    assert_eq!(v1.len(), 64);
    let m = Everything::deserialize_from_slice(&v1, &arena).unwrap();
    assert_eq!((m.get_i32(), m.get_i64(), m.get_u32(), m.get_u64()), (-5, -6, 7, 8));
    assert!(m.get_flag());
    assert_eq!((m.get_f32(), m.get_f64()), (1.5, 2.5));
    assert_eq!(m.get_text().as_str(), Ok("hi"));
    assert_eq!(m.get_data().as_bytes(), b"!");
    assert!(!m.has_inner() && !m.has_r_i32() && !m.has_maybe() && !m.has_far() && !m.has_tree());
    assert_eq!(m.serialize_to_vec().unwrap(), v1, "the same fields encode the same way today");

    // W = 0: a header with no bitmap words.
    let empty = Wire::new().u32(0).bytes();
    assert_eq!(Everything::deserialize_from_slice(&empty, &arena).unwrap(), Everything::new_in(&arena));
    assert_eq!(GetM::deserialize_from_slice(&empty, &arena).unwrap(), GetM::new_in(&arena));
    assert_eq!(Node::deserialize_from_slice(&empty, &arena).unwrap(), Node::new_in(&arena));
}

// ---------------------------------------------------------------------------
// Zero-copy decode keeps the packet alive
// ---------------------------------------------------------------------------

/// A message decoded from a pool buffer with threshold 0 holds its non-empty
/// bytes and string fields as references into the packet. Each holds one
/// count on the packet's slot, so clones of those references keep the
/// packet alive (and its bytes intact) after the message and the `RcBuf`
/// handle it was decoded from are dropped.
#[test]
fn zero_copy_fields_keep_the_packet_alive() {
    let pool = pool();
    let big = vec![0x5Au8; 600];
    let wire = {
        let arena = Arena::copying();
        let mut m = GetM::new_in(&arena);
        m.set_id(1);
        m.append_keys("key");
        m.append_keys("");
        m.append_vals(&big);
        m.append_vals(b"v");
        m.serialize_to_vec().unwrap()
    };
    let live_before = pool.stats().live_slots;
    let pkt = packet(&pool, &wire);
    assert_eq!(pkt.ref_count(), 1);

    let arena = Arena::with_threshold(Some(&pool), 0);
    let m = GetM::deserialize(&pkt, &arena).unwrap();
    let keys = m.get_keys();
    let vals = m.get_vals();
    assert!(keys[0].is_zero_copy() && vals[0].is_zero_copy() && vals[1].is_zero_copy());
    assert!(!keys[1].is_zero_copy(), "an empty field is never a reference");
    assert_eq!(pkt.ref_count(), 1 + 3);

    let held: Vec<RcBuf> = [keys[0].as_cf_bytes(), &vals[0], &vals[1]]
        .into_iter()
        .map(|f| match f {
            CfBytes::ZeroCopy(buf) => buf.clone(),
            CfBytes::Copied(_) => unreachable!("checked zero-copy above"),
        })
        .collect();
    assert_eq!(pkt.ref_count(), 1 + 3 + 3);
    drop(m);
    assert_eq!(pkt.ref_count(), 1 + 3);
    drop(pkt);

    // The packet's slot is still allocated and its bytes are intact.
    assert_eq!(pool.stats().live_slots, live_before + 1);
    assert!(held.iter().all(|b| b.ref_count() == 3));
    assert_eq!(&held[0][..], b"key");
    assert_eq!(&held[1][..], &big[..]);
    assert_eq!(&held[2][..], b"v");
    drop(held);
    assert_eq!(pool.stats().live_slots, live_before);

    // With the default threshold (512) only the 600-byte value is a reference.
    let pkt = packet(&pool, &wire);
    let hybrid = Arena::new(&pool);
    let m = GetM::deserialize(&pkt, &hybrid).unwrap();
    assert!(m.get_vals()[0].is_zero_copy());
    assert!(!m.get_keys()[0].is_zero_copy() && !m.get_vals()[1].is_zero_copy());
    assert_eq!(pkt.ref_count(), 2);
}

// ---------------------------------------------------------------------------
// Re-encoding decoded input
// ---------------------------------------------------------------------------

/// `Everything` whose `r_data` holds `count` entries that all name the same
/// `len`-byte range (allowed: bytes data is not charged to the traversal
/// budget, only headers and tables are).
fn aliased_r_data(count: u32, len: u32) -> Vec<u8> {
    let table = 16;
    let data = table + 8 * count;
    let mut w = Wire::new();
    w.header(&[1 << 18]).u32(count).u32(table);
    for _ in 0..count {
        w.u32(data).u32(len);
    }
    w.raw(&vec![0xAB; len as usize]);
    w.bytes()
}

/// Attack: data aliasing. 4096 bytes entries all naming one 32 KiB range:
/// a 64 KiB message that decodes (cheaply: the fields borrow) into a
/// message whose serialization is 128 MiB, so a service that decodes and
/// forwards (or logs, or copies) the message does work and allocation
/// quadratic in the input. An honest message never names a byte twice, so
/// charging each bytes field's length to the traversal budget (as Cap'n
/// Proto charges Data and Text) would reject this and accept every honest
/// message.
#[test]
fn aliased_bytes_amplify_the_decoded_message() {
    let msg = aliased_r_data(4096, 32 << 10);
    assert_eq!(msg.len(), 16 + 8 * 4096 + (32 << 10));
    let arena = Arena::copying();
    // Bytes data is charged to the traversal budget: the second entry
    // naming the same 32 KiB already exceeds it.
    assert_eq!(Everything::deserialize_from_slice(&msg, &arena).unwrap_err(), DecodeError::TraversalLimit(msg.len()));
}

/// The same aliasing taken past 4 GiB. Decoding rejects it; and a caller
/// who lifts the traversal limit gets a decoded message whose re-encoding
/// fails with `EncodeError::TooLarge` instead of panicking, so a
/// receive-and-forward path cannot be crashed remotely.
#[test]
fn serialize_to_vec_of_an_aliased_message_does_not_panic() {
    let msg = aliased_r_data(16 << 10, 256 << 10);
    let arena = Arena::copying();
    assert!(matches!(Everything::deserialize_from_slice(&msg, &arena), Err(DecodeError::TraversalLimit(_))));
    let lifted = cornflakes::DecodeOptions { traversal_limit: 1 << 20, ..Default::default() };
    let m = Everything::deserialize_with_options(&msg, None, &arena, lifted).unwrap();
    assert!(m.layout().total_len() > u32::MAX as usize);
    let mut small = [0u8; 16];
    assert!(matches!(m.serialize_into(&mut small), Err(cornflakes::EncodeError::BufferTooSmall { .. })));
    assert!(matches!(m.serialize_to_vec(), Err(cornflakes::EncodeError::TooLarge(_))));
}

/// Issue 11: a list whose entries all alias one small header (entries
/// included) used to decode and re-encode to many times the input length.
/// The header's entries are now charged every time the header is decoded,
/// so with the default limits a decoded message re-encodes to at most the
/// input length, whatever the number of aliases.
#[test]
fn aliased_headers_never_re_encode_larger_than_the_input() {
    let arena = Arena::copying();
    for count in 0..40u32 {
        // Everything at 0 (16 bytes: r_inner = (count, table at 16)), the
        // table, then one Inner { a = 7, data = "hi" } that every entry names.
        let inner_at = 16 + 4 * count;
        let mut w = Wire::new();
        w.header(&[1 << 19]).u32(count).u32(16);
        for _ in 0..count {
            w.u32(inner_at);
        }
        w.header(&[0b11]).u32(7).u32(inner_at + 20).u32(2).raw(b"hi");
        let input = w.bytes();
        match Everything::deserialize_from_slice(&input, &arena) {
            Ok(m) => {
                let out = m.serialize_to_vec().unwrap();
                assert!(
                    out.len() <= input.len(),
                    "{count} aliases: {} bytes re-encoded from {}",
                    out.len(),
                    input.len()
                );
            }
            Err(e) => assert!(matches!(e, DecodeError::TraversalLimit(_)), "{count}: {e:?}"),
        };
    }
}

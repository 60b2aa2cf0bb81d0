//! The engine's table-driven encoder and decoder against prost, on random
//! messages of `proto/offload.proto`: every scalar type, presence, nested
//! and recursive messages, repeated packed and unpacked fields, and bytes
//! fields sent zero-copy from registered pool buffers.

mod common;

use common::{Builder, Everything, Inner, Pair, Reader};
use cornflakes::Pool;
use cornflakes_datapath::Segment;
use cornflakes_offload::{Arena, Decoder, Encoder};
use proptest::prelude::*;
use prost::Message as _;

fn inner_strategy() -> impl Strategy<Value = Inner> {
    let leaf = (any::<i32>(), ".{0,12}", prop::collection::vec(any::<i64>(), 0..5))
        .prop_map(|(id, name, deltas)| Inner { id, name, deltas, child: None });
    leaf.prop_recursive(4, 8, 1, |inner| {
        (any::<i32>(), ".{0,12}", prop::collection::vec(any::<i64>(), 0..5), prop::option::of(inner))
            .prop_map(|(id, name, deltas, child)| Inner { id, name, deltas, child: child.map(Box::new) })
    })
}

/// Values that stress one type: zero (the default), the extremes, small and
/// random ones.
fn edgy<T: Arbitrary + Clone + 'static>(edges: Vec<T>) -> impl Strategy<Value = T> {
    prop_oneof![2 => prop::sample::select(edges), 3 => any::<T>()]
}

fn v<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Vec<T>> {
    prop::collection::vec(s, 0..6)
}

fn everything_strategy() -> impl Strategy<Value = Everything> {
    let i32s = || edgy(vec![0, 1, -1, i32::MIN, i32::MAX, 127, 128, -128]);
    let i64s = || edgy(vec![0, 1, -1, i64::MIN, i64::MAX, 1 << 35]);
    let u32s = || edgy(vec![0, 1, u32::MAX, 127, 128, 16383, 16384]);
    let u64s = || edgy(vec![0, 1, u64::MAX, 127, 128, 1 << 63]);
    let f32s = || edgy(vec![0.0f32, -0.0, 1.5, f32::NAN, f32::INFINITY, f32::MIN_POSITIVE]);
    let f64s = || edgy(vec![0.0f64, -0.0, 1.5, f64::NAN, f64::NEG_INFINITY]);
    let colors = || prop::sample::select(vec![0, 1, -2, 7]);
    let bytes = || {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..8),
            prop::collection::vec(any::<u8>(), 500..700), // around the zero-copy threshold
        ]
    };
    let singular = (
        (i32s(), i64s(), u32s(), u64s(), i32s(), i64s(), u32s(), u64s(), i32s(), i64s()),
        (f32s(), f64s(), any::<bool>(), colors(), ".{0,16}", bytes(), prop::option::of(inner_strategy())),
        (prop::option::of(i32s()), u64s()),
    );
    let repeated = (
        (v(i32s()), v(i64s()), v(u32s()), v(u64s()), v(i32s()), v(i64s()), v(u32s()), v(u64s()), v(i32s()), v(i64s())),
        (
            v(f32s()),
            v(f64s()),
            v(any::<bool>()),
            v(colors()),
            v(".{0,8}"),
            v(bytes()),
            prop::collection::vec(inner_strategy(), 0..3),
        ),
        (v(i32s()), v(i64s()), v(u32s()), v(f64s()), v(any::<bool>())),
    );
    (singular, repeated).prop_map(|(s, r)| {
        let (
            (i32, i64, u32, u64, s32, s64, f32, f64, sf32, sf64),
            (fl, db, flag, color, text, data, inner),
            (maybe, big_number),
        ) = s;
        let (
            (r_i32, r_i64, r_u32, r_u64, r_s32, r_s64, r_f32, r_f64, r_sf32, r_sf64),
            (r_fl, r_db, r_flag, r_color, r_text, r_data, r_inner),
            (u_i32, u_s64, u_f32, u_db, u_flag),
        ) = r;
        Everything {
            i32,
            i64,
            u32,
            u64,
            s32,
            s64,
            f32,
            f64,
            sf32,
            sf64,
            fl,
            db,
            flag,
            color,
            text,
            data,
            inner,
            maybe,
            r_i32,
            r_i64,
            r_u32,
            r_u64,
            r_s32,
            r_s64,
            r_f32,
            r_f64,
            r_sf32,
            r_sf64,
            r_fl,
            r_db,
            r_flag,
            r_color,
            r_text,
            r_data,
            r_inner,
            u_i32,
            u_s64,
            u_f32,
            u_db,
            u_flag,
            big_number,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Ours encodes byte-identically to prost, whether bytes fields are in
    /// the arena (copied) or registered (zero-copy at >= 512 B).
    #[test]
    fn encode_is_byte_identical_to_prost(m in everything_strategy(), register in any::<bool>()) {
        let set = common::schemas();
        let pool = Pool::new().unwrap();
        let mut b = Builder::new(set);
        if register {
            b.pool = Some(&pool);
            b.register_from = 1;
        }
        let root = b.everything(&m);
        let mut enc = Encoder::new(512);
        let len = enc.encode(set, set.id("offload.Everything").unwrap(), &b.arena, root, &b.registered).unwrap();
        let expected = m.encode_to_vec();
        prop_assert_eq!(len, expected.len());
        prop_assert_eq!(enc.to_vec(), expected.clone());
        // The segments say the same, and every large registered field went
        // zero-copy.
        let mut joined = Vec::new();
        let mut zc = 0;
        for s in enc.segments() {
            match s {
                Segment::Copy(c) => joined.extend_from_slice(c),
                Segment::ZeroCopy(z) => { zc += 1; joined.extend_from_slice(&z) }
            }
        }
        prop_assert_eq!(joined, expected);
        let large = [&m.data].into_iter().chain(m.r_data.iter()).filter(|d| d.len() >= 512).count();
        prop_assert_eq!(zc, if register { large } else { 0 });
    }

    /// Ours decodes prost's bytes into the same values (and re-encodes
    /// them to the same bytes, which also covers NaN floats).
    #[test]
    fn decode_reads_what_prost_wrote(m in everything_strategy()) {
        let set = common::schemas();
        let bytes = m.encode_to_vec();
        let mut arena = Arena::new();
        let id = set.id("offload.Everything").unwrap();
        let root = Decoder::new().decode(set, id, &bytes, &mut arena).unwrap();
        let back = Reader { set, arena: &arena }.everything(root);
        prop_assert_eq!(back.encode_to_vec(), bytes.clone());
        let mut enc = Encoder::new(usize::MAX);
        enc.encode(set, id, &arena, root, &[]).unwrap();
        prop_assert_eq!(enc.to_vec(), bytes);
    }

    /// The paper's two-field message, at any size.
    #[test]
    fn pair_round_trips(a in prop::collection::vec(any::<u8>(), 0..5000), b in prop::collection::vec(any::<u8>(), 0..5000)) {
        let set = common::schemas();
        let pool = Pool::new().unwrap();
        let m = Pair { a, b };
        let mut builder = Builder::new(set);
        builder.pool = Some(&pool);
        builder.register_from = 0;
        let root = builder.pair(&m);
        let id = set.id("offload.Pair").unwrap();
        let mut enc = Encoder::new(512);
        enc.encode(set, id, &builder.arena, root, &builder.registered).unwrap();
        prop_assert_eq!(enc.to_vec(), m.encode_to_vec());
        let mut arena = Arena::new();
        let root = Decoder::new().decode(set, id, &enc.to_vec(), &mut arena).unwrap();
        prop_assert_eq!(Reader { set, arena: &arena }.pair(root), m);
    }
}

/// Packed and unpacked encodings of a repeated scalar are both accepted
/// (proto3 requires it), and split runs append, as prost does.
#[test]
fn packed_and_unpacked_both_decode_and_append() {
    let set = common::schemas();
    let id = set.id("offload.Everything").unwrap();
    let packed = Everything { r_i32: vec![1, -1, 300], ..Default::default() }.encode_to_vec();
    let mut wire = packed.clone();
    wire.extend_from_slice(&packed); // two runs: the list has six items
    let mut arena = Arena::new();
    let root = Decoder::new().decode(set, id, &wire, &mut arena).unwrap();
    let back = Reader { set, arena: &arena }.everything(root);
    assert_eq!(back.r_i32, vec![1, -1, 300, 1, -1, 300]);
    assert_eq!(Everything::decode(&wire[..]).unwrap().r_i32, back.r_i32, "prost agrees");
    // Field 20 as three unpacked varints (key 0xa0 0x01 = 20 << 3 | 0).
    let unpacked_20 = [0xa0, 0x01, 0x05, 0xa0, 0x01, 0x06, 0xa0, 0x01, 0x07];
    let mut arena = Arena::new();
    let root = Decoder::new().decode(set, id, &unpacked_20, &mut arena).unwrap();
    let back = Reader { set, arena: &arena }.everything(root);
    assert_eq!(back.r_i32, vec![5, 6, 7]);
    assert_eq!(Everything::decode(&unpacked_20[..]).unwrap().r_i32, back.r_i32, "prost agrees");
}

/// A message field seen twice merges, as in prost.
#[test]
fn repeated_nested_message_merges() {
    let set = common::schemas();
    let id = set.id("offload.Everything").unwrap();
    let one = Everything { inner: Some(Inner { id: 4, deltas: vec![1], ..Default::default() }), ..Default::default() };
    let two = Everything {
        inner: Some(Inner { name: "x".into(), deltas: vec![2], ..Default::default() }),
        ..Default::default()
    };
    let mut wire = one.encode_to_vec();
    wire.extend_from_slice(&two.encode_to_vec());
    let mut arena = Arena::new();
    let root = Decoder::new().decode(set, id, &wire, &mut arena).unwrap();
    let back = Reader { set, arena: &arena }.everything(root);
    assert_eq!(back, Everything::decode(&wire[..]).unwrap());
    assert_eq!(back.inner.unwrap(), Inner { id: 4, name: "x".into(), deltas: vec![1, 2], child: None });
}

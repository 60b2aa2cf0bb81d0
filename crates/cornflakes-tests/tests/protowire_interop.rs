//! Interop of the protobuf wire format (`Wire::Protobuf`) with prost, over
//! `proto/protowire/pwtest.proto`: every scalar type, singular and repeated
//! (packed and unpacked), strings, bytes (copied and zero-copy), enums
//! (unknown values included), nested and recursive messages, `optional`, a
//! oneof and a map.
//!
//! - ours-encode -> prost-decode gives the same values, and the bytes are
//!   identical to prost's encoding of those values;
//! - prost-encode -> ours-decode gives the same values;
//! - what serialize-and-send posts (copied buffer and zero-copy payloads,
//!   gathered) is those same bytes;
//! - on truncated and corrupted inputs, whatever prost accepts we accept
//!   with the same values, and whatever we reject prost rejects;
//! - both refuse the same nesting depth.
//!
//! The prost types below are what prost-build generates for the schema
//! (written out, since the tests do not run protoc at build time), with
//! `btree_map` for the map so that prost's order is defined.

use std::collections::BTreeMap;

use cornflakes::protowire::{gather, ProtoMessage};
use cornflakes::{Arena, Pool, RcBuf};
use cornflakes_tests::pwtest::{self, tree, Color};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use prost::Message as _;

pub mod pb {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum Color {
        Unspecified = 0,
        Red = 1,
        Blue = 2,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Scalars {
        #[prost(double, tag = "1")]
        pub f_double: f64,
        #[prost(float, tag = "2")]
        pub f_float: f32,
        #[prost(int32, tag = "3")]
        pub f_int32: i32,
        #[prost(int64, tag = "4")]
        pub f_int64: i64,
        #[prost(uint32, tag = "5")]
        pub f_uint32: u32,
        #[prost(uint64, tag = "6")]
        pub f_uint64: u64,
        #[prost(sint32, tag = "7")]
        pub f_sint32: i32,
        #[prost(sint64, tag = "8")]
        pub f_sint64: i64,
        #[prost(fixed32, tag = "9")]
        pub f_fixed32: u32,
        #[prost(fixed64, tag = "10")]
        pub f_fixed64: u64,
        #[prost(sfixed32, tag = "11")]
        pub f_sfixed32: i32,
        #[prost(sfixed64, tag = "12")]
        pub f_sfixed64: i64,
        #[prost(bool, tag = "13")]
        pub f_bool: bool,
        #[prost(string, tag = "14")]
        pub f_string: String,
        #[prost(bytes = "vec", tag = "15")]
        pub f_bytes: Vec<u8>,
        #[prost(enumeration = "Color", tag = "16")]
        pub f_enum: i32,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Repeats {
        #[prost(double, repeated, tag = "1")]
        pub r_double: Vec<f64>,
        #[prost(float, repeated, tag = "2")]
        pub r_float: Vec<f32>,
        #[prost(int32, repeated, tag = "3")]
        pub r_int32: Vec<i32>,
        #[prost(int64, repeated, tag = "4")]
        pub r_int64: Vec<i64>,
        #[prost(uint32, repeated, tag = "5")]
        pub r_uint32: Vec<u32>,
        #[prost(uint64, repeated, tag = "6")]
        pub r_uint64: Vec<u64>,
        #[prost(sint32, repeated, tag = "7")]
        pub r_sint32: Vec<i32>,
        #[prost(sint64, repeated, tag = "8")]
        pub r_sint64: Vec<i64>,
        #[prost(fixed32, repeated, tag = "9")]
        pub r_fixed32: Vec<u32>,
        #[prost(fixed64, repeated, tag = "10")]
        pub r_fixed64: Vec<u64>,
        #[prost(sfixed32, repeated, tag = "11")]
        pub r_sfixed32: Vec<i32>,
        #[prost(sfixed64, repeated, tag = "12")]
        pub r_sfixed64: Vec<i64>,
        #[prost(bool, repeated, tag = "13")]
        pub r_bool: Vec<bool>,
        #[prost(string, repeated, tag = "14")]
        pub r_string: Vec<String>,
        #[prost(bytes = "vec", repeated, tag = "15")]
        pub r_bytes: Vec<Vec<u8>>,
        #[prost(enumeration = "Color", repeated, tag = "16")]
        pub r_enum: Vec<i32>,
        #[prost(int32, repeated, packed = "false", tag = "17")]
        pub u_int32: Vec<i32>,
        #[prost(sint64, repeated, packed = "false", tag = "18")]
        pub u_sint64: Vec<i64>,
        #[prost(fixed32, repeated, packed = "false", tag = "19")]
        pub u_fixed32: Vec<u32>,
        #[prost(double, repeated, packed = "false", tag = "20")]
        pub u_double: Vec<f64>,
        #[prost(enumeration = "Color", repeated, packed = "false", tag = "21")]
        pub u_enum: Vec<i32>,
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Tree {
        #[prost(message, optional, tag = "1")]
        pub scalars: Option<Scalars>,
        #[prost(message, optional, tag = "2")]
        pub repeats: Option<Repeats>,
        #[prost(message, repeated, tag = "3")]
        pub children: Vec<Tree>,
        #[prost(int32, optional, tag = "4")]
        pub opt_int32: Option<i32>,
        #[prost(string, optional, tag = "5")]
        pub opt_string: Option<String>,
        #[prost(oneof = "tree::Choice", tags = "6, 7, 8, 9")]
        pub choice: Option<tree::Choice>,
        #[prost(btree_map = "string, bytes", tag = "10")]
        pub labels: ::std::collections::BTreeMap<String, Vec<u8>>,
        #[prost(int32, tag = "11")]
        pub after_oneof: i32,
        #[prost(bytes = "vec", tag = "12")]
        pub big: Vec<u8>,
    }
    pub mod tree {
        #[derive(Clone, PartialEq, ::prost::Oneof)]
        pub enum Choice {
            #[prost(uint64, tag = "6")]
            CUint64(u64),
            #[prost(string, tag = "7")]
            CString(String),
            #[prost(message, tag = "8")]
            CMsg(super::Scalars),
            #[prost(enumeration = "super::Color", tag = "9")]
            CEnum(i32),
        }
    }
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Order {
        #[prost(int32, tag = "1")]
        pub a: i32,
        #[prost(oneof = "order::Pick", tags = "2, 9")]
        pub pick: Option<order::Pick>,
        #[prost(int32, tag = "5")]
        pub mid: i32,
    }
    pub mod order {
        #[derive(Clone, PartialEq, ::prost::Oneof)]
        pub enum Pick {
            #[prost(int32, tag = "2")]
            Low(i32),
            #[prost(int32, tag = "9")]
            High(i32),
        }
    }
}

// ---------------------------------------------------------------- strategies

/// Floats without NaN (NaN != NaN would fail the equality checks; NaN
/// itself is covered by `nan_and_negative_zero`).
fn f64s() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(-0.0), any::<f64>().prop_filter("not NaN", |f| !f.is_nan())]
}
fn f32s() -> impl Strategy<Value = f32> {
    prop_oneof![Just(0.0f32), any::<f32>().prop_filter("not NaN", |f| !f.is_nan())]
}
/// Integers biased to zero (absent) and the extremes.
fn ints<T: Arbitrary + Copy + Default + std::fmt::Debug + 'static>(edges: [T; 2]) -> impl Strategy<Value = T> {
    prop_oneof![2 => Just(T::default()), 1 => Just(edges[0]), 1 => Just(edges[1]), 6 => any::<T>()]
}
/// Bytes: mostly short, sometimes past the 512-byte zero-copy threshold.
fn blob() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![6 => prop::collection::vec(any::<u8>(), 0..24), 1 => prop::collection::vec(any::<u8>(), 500..1100)]
}
fn text() -> impl Strategy<Value = String> {
    prop_oneof![4 => "\\PC{0,12}", 1 => "[a-z]{510,700}"]
}

fn scalars() -> BoxedStrategy<pb::Scalars> {
    (
        (f64s(), f32s(), ints([i32::MIN, -1]), ints([i64::MIN, -1]), ints([u32::MAX, 128])),
        (ints([u64::MAX, 16384]), ints([i32::MIN, i32::MAX]), ints([i64::MIN, i64::MAX]), any::<u32>(), any::<u64>()),
        (any::<i32>(), any::<i64>(), any::<bool>(), text(), blob(), ints([-1, 7])),
    )
        .prop_map(|(a, b, c)| pb::Scalars {
            f_double: a.0,
            f_float: a.1,
            f_int32: a.2,
            f_int64: a.3,
            f_uint32: a.4,
            f_uint64: b.0,
            f_sint32: b.1,
            f_sint64: b.2,
            f_fixed32: b.3,
            f_fixed64: b.4,
            f_sfixed32: c.0,
            f_sfixed64: c.1,
            f_bool: c.2,
            f_string: c.3,
            f_bytes: c.4,
            f_enum: c.5,
        })
        .boxed()
}

fn list<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Vec<T>> {
    prop::collection::vec(s, 0..5)
}

fn repeats() -> BoxedStrategy<pb::Repeats> {
    (
        (list(f64s()), list(f32s()), list(any::<i32>()), list(any::<i64>()), list(any::<u32>())),
        (list(any::<u64>()), list(any::<i32>()), list(any::<i64>()), list(any::<u32>()), list(any::<u64>())),
        (list(any::<i32>()), list(any::<i64>()), list(any::<bool>()), list(text()), list(blob()), list(-2..4i32)),
        (list(any::<i32>()), list(any::<i64>()), list(any::<u32>()), list(f64s()), list(any::<i32>())),
    )
        .prop_map(|(a, b, c, d)| pb::Repeats {
            r_double: a.0,
            r_float: a.1,
            r_int32: a.2,
            r_int64: a.3,
            r_uint32: a.4,
            r_uint64: b.0,
            r_sint32: b.1,
            r_sint64: b.2,
            r_fixed32: b.3,
            r_fixed64: b.4,
            r_sfixed32: c.0,
            r_sfixed64: c.1,
            r_bool: c.2,
            r_string: c.3,
            r_bytes: c.4,
            r_enum: c.5,
            u_int32: d.0,
            u_sint64: d.1,
            u_fixed32: d.2,
            u_double: d.3,
            u_enum: d.4,
        })
        .boxed()
}

fn choice() -> impl Strategy<Value = Option<pb::tree::Choice>> {
    prop_oneof![
        Just(None),
        ints([0, u64::MAX]).prop_map(|v| Some(pb::tree::Choice::CUint64(v))),
        text().prop_map(|v| Some(pb::tree::Choice::CString(v))),
        scalars().prop_map(|v| Some(pb::tree::Choice::CMsg(v))),
        (0..3i32).prop_map(|v| Some(pb::tree::Choice::CEnum(v))),
    ]
}

fn leaf() -> BoxedStrategy<pb::Tree> {
    (
        prop::option::of(scalars()),
        prop::option::of(repeats()),
        prop::option::of(any::<i32>()),
        prop::option::of(text()),
        choice(),
        prop::collection::btree_map("[a-z]{0,4}", blob(), 0..3),
        any::<i32>(),
        blob(),
    )
        .prop_map(|(scalars, repeats, opt_int32, opt_string, choice, labels, after_oneof, big)| pb::Tree {
            scalars,
            repeats,
            children: Vec::new(),
            opt_int32,
            opt_string,
            choice,
            labels,
            after_oneof,
            big,
        })
        .boxed()
}

fn trees() -> BoxedStrategy<pb::Tree> {
    leaf()
        .prop_recursive(3, 8, 3, |inner| {
            (leaf(), prop::collection::vec(inner, 0..3)).prop_map(|(mut t, children)| {
                t.children = children;
                t
            })
        })
        .boxed()
}

// ------------------------------------------------- building and reading ours

/// Bytes put into a pool buffer first, so that values of at least the
/// threshold are sent zero-copy (`set_x_buf`).
fn pooled(pool: &Pool, v: &[u8]) -> RcBuf {
    pool.alloc_copy(v).expect("pool allocation")
}

fn build_scalars<'a>(arena: &'a Arena, pool: &Pool, v: &'a pb::Scalars) -> pwtest::Scalars<'a> {
    let mut m = pwtest::Scalars::new_in(arena);
    m.set_f_double(v.f_double);
    m.set_f_float(v.f_float);
    m.set_f_int32(v.f_int32);
    m.set_f_int64(v.f_int64);
    m.set_f_uint32(v.f_uint32);
    m.set_f_uint64(v.f_uint64);
    m.set_f_sint32(v.f_sint32);
    m.set_f_sint64(v.f_sint64);
    m.set_f_fixed32(v.f_fixed32);
    m.set_f_fixed64(v.f_fixed64);
    m.set_f_sfixed32(v.f_sfixed32);
    m.set_f_sfixed64(v.f_sfixed64);
    m.set_f_bool(v.f_bool);
    m.set_f_string(&v.f_string);
    m.set_f_bytes_buf(pooled(pool, &v.f_bytes));
    m.set_f_enum_raw(v.f_enum);
    m
}

fn build_repeats<'a>(arena: &'a Arena, pool: &Pool, v: &'a pb::Repeats) -> pwtest::Repeats<'a> {
    let mut m = pwtest::Repeats::new_in(arena);
    macro_rules! copy_list {
        ($($f:ident => $get:ident),*) => {$(
            for &x in &v.$f {
                m.$get().append(x);
            }
        )*};
    }
    copy_list!(
        r_double => get_mut_r_double,
        r_float => get_mut_r_float,
        r_int32 => get_mut_r_int32,
        r_int64 => get_mut_r_int64,
        r_uint32 => get_mut_r_uint32,
        r_uint64 => get_mut_r_uint64,
        r_sint32 => get_mut_r_sint32,
        r_sint64 => get_mut_r_sint64,
        r_fixed32 => get_mut_r_fixed32,
        r_fixed64 => get_mut_r_fixed64,
        r_sfixed32 => get_mut_r_sfixed32,
        r_sfixed64 => get_mut_r_sfixed64,
        r_bool => get_mut_r_bool,
        r_enum => get_mut_r_enum,
        u_int32 => get_mut_u_int32,
        u_sint64 => get_mut_u_sint64,
        u_fixed32 => get_mut_u_fixed32,
        u_double => get_mut_u_double,
        u_enum => get_mut_u_enum
    );
    for s in &v.r_string {
        m.append_r_string(s);
    }
    for b in &v.r_bytes {
        let field = cornflakes::CfBytes::from_rcbuf(pooled(pool, b), arena);
        m.get_mut_r_bytes().append(field);
    }
    m
}

/// Our message with the values of `v`.
pub fn build<'a>(arena: &'a Arena, pool: &Pool, v: &'a pb::Tree) -> pwtest::Tree<'a> {
    let mut m = pwtest::Tree::new_in(arena);
    if let Some(s) = &v.scalars {
        m.set_scalars(build_scalars(arena, pool, s));
    }
    if let Some(r) = &v.repeats {
        m.set_repeats(build_repeats(arena, pool, r));
    }
    for c in &v.children {
        m.append_children(build(arena, pool, c));
    }
    if let Some(x) = v.opt_int32 {
        m.set_opt_int32(x);
    }
    if let Some(s) = &v.opt_string {
        m.set_opt_string(s);
    }
    match &v.choice {
        None => {}
        Some(pb::tree::Choice::CUint64(x)) => m.set_c_uint64(*x),
        Some(pb::tree::Choice::CString(s)) => m.set_c_string(s),
        Some(pb::tree::Choice::CMsg(s)) => m.set_c_msg(build_scalars(arena, pool, s)),
        Some(pb::tree::Choice::CEnum(e)) => m.set_c_enum(Color::try_from(*e).expect("generated in range")),
    }
    for (k, val) in &v.labels {
        m.insert_labels(k, val);
    }
    m.set_after_oneof(v.after_oneof);
    m.set_big_buf(pooled(pool, &v.big));
    m
}

fn text_of(s: &cornflakes::CfString<'_>) -> String {
    s.as_str().expect("UTF-8").to_owned()
}

fn read_scalars(m: &pwtest::Scalars<'_>) -> pb::Scalars {
    pb::Scalars {
        f_double: m.get_f_double(),
        f_float: m.get_f_float(),
        f_int32: m.get_f_int32(),
        f_int64: m.get_f_int64(),
        f_uint32: m.get_f_uint32(),
        f_uint64: m.get_f_uint64(),
        f_sint32: m.get_f_sint32(),
        f_sint64: m.get_f_sint64(),
        f_fixed32: m.get_f_fixed32(),
        f_fixed64: m.get_f_fixed64(),
        f_sfixed32: m.get_f_sfixed32(),
        f_sfixed64: m.get_f_sfixed64(),
        f_bool: m.get_f_bool(),
        f_string: text_of(m.get_f_string()),
        f_bytes: m.get_f_bytes().to_vec(),
        f_enum: m.get_f_enum_raw(),
    }
}

fn read_repeats(m: &pwtest::Repeats<'_>) -> pb::Repeats {
    pb::Repeats {
        r_double: m.get_r_double().to_vec(),
        r_float: m.get_r_float().to_vec(),
        r_int32: m.get_r_int32().to_vec(),
        r_int64: m.get_r_int64().to_vec(),
        r_uint32: m.get_r_uint32().to_vec(),
        r_uint64: m.get_r_uint64().to_vec(),
        r_sint32: m.get_r_sint32().to_vec(),
        r_sint64: m.get_r_sint64().to_vec(),
        r_fixed32: m.get_r_fixed32().to_vec(),
        r_fixed64: m.get_r_fixed64().to_vec(),
        r_sfixed32: m.get_r_sfixed32().to_vec(),
        r_sfixed64: m.get_r_sfixed64().to_vec(),
        r_bool: m.get_r_bool().to_vec(),
        r_string: m.get_r_string().iter().map(text_of).collect(),
        r_bytes: m.get_r_bytes().iter().map(|b| b.to_vec()).collect(),
        r_enum: m.get_r_enum().to_vec(),
        u_int32: m.get_u_int32().to_vec(),
        u_sint64: m.get_u_sint64().to_vec(),
        u_fixed32: m.get_u_fixed32().to_vec(),
        u_double: m.get_u_double().to_vec(),
        u_enum: m.get_u_enum().to_vec(),
    }
}

/// The values of our (decoded) message, as prost's type.
pub fn read(m: &pwtest::Tree<'_>) -> pb::Tree {
    pb::Tree {
        scalars: m.get_scalars().map(read_scalars),
        repeats: m.get_repeats().map(read_repeats),
        children: m.get_children().iter().map(read).collect(),
        opt_int32: m.has_opt_int32().then(|| m.get_opt_int32()),
        opt_string: m.has_opt_string().then(|| text_of(m.get_opt_string())),
        choice: m.get_choice().map(|c| match c {
            tree::Choice::CUint64(x) => pb::tree::Choice::CUint64(*x),
            tree::Choice::CString(s) => pb::tree::Choice::CString(text_of(s)),
            tree::Choice::CMsg(s) => pb::tree::Choice::CMsg(read_scalars(s)),
            tree::Choice::CEnum(e) => pb::tree::Choice::CEnum(*e),
        }),
        // Last one wins, as in prost.
        labels: m
            .get_labels()
            .iter()
            .map(|e| (text_of(e.get_key()), e.get_value().to_vec()))
            .collect::<BTreeMap<_, _>>(),
        after_oneof: m.get_after_oneof(),
        big: m.get_big().to_vec(),
    }
}

/// Serialize-and-send: the copied buffer and the zero-copy payloads as a
/// transmit path would post them, gathered; plus the number of payloads.
fn send(m: &pwtest::Tree<'_>) -> (Vec<u8>, usize) {
    let layout = m.proto_layout();
    let mut copied = vec![0u8; layout.copy_len];
    let mut zero_copy = Vec::new();
    m.write_proto(&layout, &mut copied, |at, buf| zero_copy.push((at, buf.clone()))).expect("buffer sized by layout");
    assert_eq!(zero_copy.len(), layout.zero_copy_entries);
    assert_eq!(zero_copy.iter().map(|(_, b)| b.len()).sum::<usize>(), layout.zero_copy_len);
    (gather(&copied, &zero_copy), zero_copy.len())
}

/// Checks one value both ways; returns whether ours was byte-identical to
/// prost's (asserted too) and how many payloads went zero-copy.
fn check_both_ways(pool: &Pool, v: &pb::Tree) -> usize {
    let arena = Arena::new(pool);
    let ours = build(&arena, pool, v);
    let prost_bytes = v.encode_to_vec();
    let (sent, zero_copy) = send(&ours);
    assert_eq!(sent, prost_bytes, "serialize-and-send differs from prost's bytes");
    assert_eq!(ours.serialize_proto_to_vec(), prost_bytes);
    assert_eq!(ours.proto_layout().total_len(), v.encoded_len());
    assert_eq!(ours.proto_encoded_len(), v.encoded_len());
    // prost's names, on a type generated with Wire::Protobuf, are protobuf's.
    assert_eq!((ours.encoded_len(), ours.encode_to_vec()), (v.encoded_len(), prost_bytes.clone()));
    let slice_arena = Arena::new(pool);
    assert_eq!(&read(&pwtest::Tree::decode(&prost_bytes, &slice_arena).expect("decodes prost's")), v);
    // ours -> prost
    let back = pb::Tree::decode(&sent[..]).expect("prost decodes ours");
    assert_eq!(&back, v);
    // prost -> ours, zero-copy from a received pool buffer
    let pkt = pooled(pool, &prost_bytes);
    let rx = Arena::new(pool);
    let decoded = pwtest::Tree::deserialize_proto(&pkt, &rx).expect("ours decodes prost's");
    assert_eq!(&read(&decoded), v);
    // and what we decoded re-encodes to the same bytes
    assert_eq!(decoded.serialize_proto_to_vec(), prost_bytes);
    zero_copy
}

proptest! {
    // Under Miri (scripts/miri.sh) a few cases check memory safety of the
    // zero-copy paths; the equivalence with prost is the native run's job.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn interop_with_prost(v in trees()) {
        let pool = Pool::new().unwrap();
        check_both_ways(&pool, &v);
    }

    /// Truncated or corrupted input: whatever prost accepts, ours accepts
    /// with the same values; whatever ours rejects, prost rejects (prost is
    /// stricter only on UTF-8, which ours checks when a string is read).
    #[test]
    #[cfg_attr(miri, ignore)] // agreement with prost, not memory safety: minutes under Miri
    fn malformed_input_agrees_with_prost(v in trees(), cut in any::<prop::sample::Index>(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let mut bytes = v.encode_to_vec();
        if !bytes.is_empty() {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        for (at, x) in flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
        }
        let arena = Arena::copying();
        let ours = pwtest::Tree::deserialize_proto_from_slice(&bytes, &arena);
        match pb::Tree::decode(&bytes[..]) {
            Ok(theirs) => {
                let ours = ours.expect("prost accepts, so must we");
                prop_assert_eq!(read(&ours), theirs);
            }
            Err(_) => {
                // Either we reject too, or prost failed only on UTF-8.
                if let Ok(ours) = ours {
                    prop_assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&ours))).is_err(),
                        "prost rejects, ours accepts, and every string is UTF-8");
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // covered by the fuzz target; minutes under Miri
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let arena = Arena::copying();
        let ours = pwtest::Tree::deserialize_proto_from_slice(&bytes, &arena);
        if let Ok(theirs) = pb::Tree::decode(&bytes[..]) {
            prop_assert_eq!(read(&ours.expect("prost accepts")), theirs);
        }
    }
}

/// The figure: 100 000 random messages, every one byte-identical to
/// prost's encoding (and decoded equal both ways). About a minute in a
/// release build: `cargo test --release -p cornflakes-tests --test
/// protowire_interop -- --ignored --nocapture`.
#[test]
#[ignore]
fn hundred_thousand_messages_byte_identical() {
    let pool = Pool::new().unwrap();
    let mut runner = TestRunner::deterministic();
    let strategy = trees();
    let (mut identical, mut zero_copy, mut bytes) = (0usize, 0usize, 0usize);
    for i in 0..100_000 {
        let v = strategy.new_tree(&mut runner).expect("a value").current();
        bytes += v.encoded_len();
        zero_copy += check_both_ways(&pool, &v);
        identical += 1;
        if (i + 1) % 20_000 == 0 {
            eprintln!("{} messages checked", i + 1);
        }
    }
    println!(
        "{identical} of 100000 random messages byte-identical to prost ({bytes} bytes, {zero_copy} zero-copy payloads)"
    );
    assert_eq!(identical, 100_000);
}

#[test]
fn a_oneof_goes_where_its_lowest_member_goes() {
    let arena = Arena::copying();
    let mut m = pwtest::Order::new_in(&arena);
    m.set_a(1);
    m.set_mid(5);
    m.set_high(9);
    // a = 1, high = 9 (the oneof sorts at field 2), then mid = 5.
    assert_eq!(m.serialize_proto_to_vec(), [0x08, 1, 0x48, 9, 0x28, 5]);
    let theirs = pb::Order { a: 1, mid: 5, pick: Some(pb::order::Pick::High(9)) };
    assert_eq!(theirs.encode_to_vec(), m.serialize_proto_to_vec());
}

#[test]
fn nan_and_negative_zero() {
    let arena = Arena::copying();
    let mut m = pwtest::Scalars::new_in(&arena);
    m.set_f_double(-0.0);
    assert!(m.serialize_proto_to_vec().is_empty(), "-0.0 is the default, as in prost");
    m.set_f_double(f64::NAN);
    let theirs = pb::Scalars { f_double: f64::NAN, ..Default::default() };
    assert_eq!(m.serialize_proto_to_vec(), theirs.encode_to_vec());
}

/// A chain of `depth` nested `Tree`s (through `children`).
fn nested_bytes(depth: usize) -> Vec<u8> {
    let mut v = pb::Tree::default();
    for _ in 0..depth {
        v = pb::Tree { children: vec![v], ..Default::default() };
    }
    v.encode_to_vec()
}

#[test]
fn recursion_limit_is_prosts() {
    for depth in [99, 100, 101, 150] {
        let bytes = nested_bytes(depth);
        let arena = Arena::copying();
        let ours = pwtest::Tree::deserialize_proto_from_slice(&bytes, &arena);
        let theirs = pb::Tree::decode(&bytes[..]);
        assert_eq!(ours.is_ok(), theirs.is_ok(), "depth {depth}: ours {ours:?}");
        if depth > 100 {
            assert_eq!(ours.unwrap_err(), cornflakes::protowire::ProtoDecodeError::RecursionLimit);
        }
    }
}

#[test]
fn unknown_fields_are_skipped_groups_included() {
    // Field 99 varint, field 98 fixed64, field 97 length-delimited, field
    // 96 a group holding field 1, field 95 fixed32; then a known field.
    let mut bytes = vec![0x98, 0x06, 0x96, 0x01];
    bytes.extend([0x91, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]);
    bytes.extend([0x8a, 0x06, 2, b'h', b'i']);
    bytes.extend([0x83, 0x06, 0x08, 0x01, 0x84, 0x06]);
    bytes.extend([0xfd, 0x05, 1, 2, 3, 4]);
    bytes.extend([0x58, 42]); // after_oneof = 42
    let arena = Arena::copying();
    let ours = pwtest::Tree::deserialize_proto_from_slice(&bytes, &arena).expect("unknown fields skipped");
    assert_eq!(ours.get_after_oneof(), 42);
    assert_eq!(pb::Tree::decode(&bytes[..]).unwrap().after_oneof, 42);
    // An end-group key with no start, and a group closed by another field.
    for bad in [&[0x84u8, 0x06][..], &[0x83, 0x06, 0x8c, 0x06][..]] {
        assert!(pwtest::Tree::deserialize_proto_from_slice(bad, &arena).is_err());
        assert!(pb::Tree::decode(bad).is_err());
    }
}

#[test]
fn malformed_inputs_are_errors() {
    use cornflakes::protowire::ProtoDecodeError as E;
    let arena = Arena::copying();
    let decode = |b: &[u8]| pwtest::Tree::deserialize_proto_from_slice(b, &arena).map(drop);
    // Field 0, wire types 6 and 7, a key above u32.
    assert!(matches!(decode(&[0x00, 0x00]), Err(E::InvalidKey { .. })));
    assert!(matches!(decode(&[0x0e]), Err(E::InvalidKey { .. })));
    assert!(matches!(decode(&[0x0f]), Err(E::InvalidKey { .. })));
    assert!(matches!(decode(&[0x80, 0x80, 0x80, 0x80, 0x10]), Err(E::InvalidKey { .. })));
    // An 11-byte varint, and a 10th byte above 1.
    assert!(matches!(
        decode(&[0x58, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        Err(E::InvalidVarint(1))
    ));
    assert!(matches!(
        decode(&[0x58, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
        Err(E::InvalidVarint(1))
    ));
    // Truncated varint, fixed value, and a length past the end.
    assert!(matches!(decode(&[0x58, 0x80]), Err(E::Truncated { .. })));
    assert!(matches!(decode(&[0x0a, 0x05, 0x09, 1, 2]), Err(E::Truncated { .. })));
    assert!(matches!(decode(&[0x62, 0x03, b'a']), Err(E::Truncated { .. })));
    // A nested message whose length cuts its own field in two.
    assert!(matches!(decode(&[0x0a, 0x01, 0x18, 0x01]), Err(E::Truncated { .. })));
    // A known field with the wrong wire type: after_oneof (11) as fixed32.
    assert!(matches!(decode(&[0x5d, 1, 2, 3, 4]), Err(E::WrongWireType { field: 11, got: 5, expected: 0 })));
    assert!(pb::Tree::decode(&[0x5d, 1, 2, 3, 4][..]).is_err());
}

#[test]
fn long_fields_decode_zero_copy_into_the_packet() {
    let pool = Pool::new().unwrap();
    let v = pb::Tree { big: vec![7; 4096], opt_string: Some("short".into()), ..Default::default() };
    let pkt = pooled(&pool, &v.encode_to_vec());
    let arena = Arena::new(&pool);
    let m = pwtest::Tree::deserialize_proto(&pkt, &arena).unwrap();
    assert!(m.get_big().is_zero_copy(), "4096 bytes: a counted reference into the packet");
    assert!(!m.get_opt_string().is_zero_copy());
    // And sent back without a copy: its payload is a zero-copy segment.
    let (sent, zero_copy) = send(&m);
    assert_eq!((sent, zero_copy), (v.encode_to_vec(), 1));
}

#[test]
fn strings_are_checked_only_when_read() {
    // opt_string = "\xff": prost refuses it, ours decodes and refuses to
    // read it as text.
    let bytes = [0x2a, 0x01, 0xff];
    assert!(pb::Tree::decode(&bytes[..]).is_err());
    let arena = Arena::copying();
    let m = pwtest::Tree::deserialize_proto_from_slice(&bytes, &arena).unwrap();
    assert!(m.get_opt_string().as_str().is_err());
    assert_eq!(m.get_opt_string().as_bytes(), [0xff]);
}

//! Property tests: messages with every field type round-trip through
//! serialize and deserialize in copy-only, zero-copy-only and hybrid modes,
//! and the two transmit forms (one contiguous buffer; first segment plus
//! zero-copy segments) produce the same bytes.

use cornflakes::{Arena, Message, Pool, RcBuf};
use cornflakes_tests::example::{Everything, Inner, Node};
use proptest::collection::vec;
use proptest::prelude::*;

/// Field values as plain data; `B` is `Vec<u8>` when generated and `RcBuf`
/// once moved into the pool.
#[derive(Clone, Debug)]
struct InnerModel<B> {
    a: Option<u32>,
    data: Option<B>,
}

#[derive(Clone, Debug)]
struct NodeModel<B> {
    value: Option<u32>,
    left: Option<Box<NodeModel<B>>>,
    right: Option<Box<NodeModel<B>>>,
    leaves: Option<Vec<Option<B>>>,
}

#[derive(Clone, Debug)]
struct Model<B> {
    i32: Option<i32>,
    i64: Option<i64>,
    u32: Option<u32>,
    u64: Option<u64>,
    flag: Option<bool>,
    f32: Option<f32>,
    f64: Option<f64>,
    text: Option<B>,
    data: Option<B>,
    inner: Option<InnerModel<B>>,
    r_i32: Option<Vec<i32>>,
    r_i64: Option<Vec<i64>>,
    r_u32: Option<Vec<u32>>,
    r_u64: Option<Vec<u64>>,
    r_flag: Option<Vec<bool>>,
    r_f32: Option<Vec<f32>>,
    r_f64: Option<Vec<f64>>,
    r_text: Option<Vec<B>>,
    r_data: Option<Vec<B>>,
    r_inner: Option<Vec<InnerModel<B>>>,
    maybe: Option<u32>,
    far: Option<u64>,
    tree: Option<NodeModel<B>>,
}

/// Lengths on both sides of the thresholds under test (0, 512).
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..16), vec(any::<u8>(), 500..530), vec(any::<u8>(), 1000..2100)]
}

fn text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof!["\\PC{0,12}", "[a-zé]{500,530}"].prop_map(String::into_bytes)
}

fn inner() -> impl Strategy<Value = InnerModel<Vec<u8>>> {
    (any::<Option<u32>>(), proptest::option::of(bytes())).prop_map(|(a, data)| InnerModel { a, data })
}

fn node() -> impl Strategy<Value = NodeModel<Vec<u8>>> {
    let leaf = (any::<Option<u32>>(), proptest::option::of(vec(proptest::option::of(text()), 0..3)))
        .prop_map(|(value, leaves)| NodeModel { value, left: None, right: None, leaves });
    leaf.prop_recursive(4, 16, 2, |child| {
        (
            any::<Option<u32>>(),
            proptest::option::of(child.clone()),
            proptest::option::of(child),
            proptest::option::of(vec(proptest::option::of(text()), 0..3)),
        )
            .prop_map(|(value, l, r, leaves)| NodeModel {
                value,
                left: l.map(Box::new),
                right: r.map(Box::new),
                leaves,
            })
    })
}

fn model() -> impl Strategy<Value = Model<Vec<u8>>> {
    use proptest::option::of;
    let scalars = (
        any::<Option<i32>>(),
        any::<Option<i64>>(),
        any::<Option<u32>>(),
        any::<Option<u64>>(),
        any::<Option<bool>>(),
        any::<Option<f32>>(),
        any::<Option<f64>>(),
        any::<Option<u32>>(),
        any::<Option<u64>>(),
    );
    let singles = (of(text()), of(bytes()), of(inner()), of(node()));
    let lists = (
        of(vec(any::<i32>(), 0..5)),
        of(vec(any::<i64>(), 0..5)),
        of(vec(any::<u32>(), 0..5)),
        of(vec(any::<u64>(), 0..5)),
        of(vec(any::<bool>(), 0..5)),
        of(vec(any::<f32>(), 0..5)),
        of(vec(any::<f64>(), 0..5)),
        of(vec(text(), 0..4)),
        of(vec(bytes(), 0..4)),
        of(vec(inner(), 0..3)),
    );
    (scalars, singles, lists).prop_map(|(s, o, l)| Model {
        i32: s.0,
        i64: s.1,
        u32: s.2,
        u64: s.3,
        flag: s.4,
        f32: s.5,
        f64: s.6,
        maybe: s.7,
        far: s.8,
        text: o.0,
        data: o.1,
        inner: o.2,
        tree: o.3,
        r_i32: l.0,
        r_i64: l.1,
        r_u32: l.2,
        r_u64: l.3,
        r_flag: l.4,
        r_f32: l.5,
        r_f64: l.6,
        r_text: l.7,
        r_data: l.8,
        r_inner: l.9,
    })
}

// ---- moving generated values into the pool ----

fn pooled_inner(m: &InnerModel<Vec<u8>>, pool: &Pool) -> InnerModel<RcBuf> {
    InnerModel { a: m.a, data: m.data.as_ref().map(|d| pool.alloc_copy(d).unwrap()) }
}

fn pooled_node(m: &NodeModel<Vec<u8>>, pool: &Pool) -> NodeModel<RcBuf> {
    NodeModel {
        value: m.value,
        left: m.left.as_ref().map(|n| Box::new(pooled_node(n, pool))),
        right: m.right.as_ref().map(|n| Box::new(pooled_node(n, pool))),
        leaves: m.leaves.as_ref().map(|l| l.iter().map(|t| t.as_ref().map(|t| pool.alloc_copy(t).unwrap())).collect()),
    }
}

fn pooled(m: &Model<Vec<u8>>, pool: &Pool) -> Model<RcBuf> {
    let buf = |d: &Vec<u8>| pool.alloc_copy(d).unwrap();
    Model {
        i32: m.i32,
        i64: m.i64,
        u32: m.u32,
        u64: m.u64,
        flag: m.flag,
        f32: m.f32,
        f64: m.f64,
        maybe: m.maybe,
        far: m.far,
        text: m.text.as_ref().map(buf),
        data: m.data.as_ref().map(buf),
        inner: m.inner.as_ref().map(|i| pooled_inner(i, pool)),
        tree: m.tree.as_ref().map(|n| pooled_node(n, pool)),
        r_i32: m.r_i32.clone(),
        r_i64: m.r_i64.clone(),
        r_u32: m.r_u32.clone(),
        r_u64: m.r_u64.clone(),
        r_flag: m.r_flag.clone(),
        r_f32: m.r_f32.clone(),
        r_f64: m.r_f64.clone(),
        r_text: m.r_text.as_ref().map(|l| l.iter().map(buf).collect()),
        r_data: m.r_data.as_ref().map(|l| l.iter().map(buf).collect()),
        r_inner: m.r_inner.as_ref().map(|l| l.iter().map(|i| pooled_inner(i, pool)).collect()),
    }
}

// ---- building messages with the generated setters ----

fn s(b: &RcBuf) -> &str {
    std::str::from_utf8(b).expect("generated text is UTF-8")
}

fn build_inner<'a>(m: &'a InnerModel<RcBuf>, arena: &'a Arena) -> Inner<'a> {
    let mut out = Inner::new_in(arena);
    if let Some(a) = m.a {
        out.set_a(a);
    }
    if let Some(d) = &m.data {
        out.set_data(d);
    }
    out
}

fn build_node<'a>(m: &'a NodeModel<RcBuf>, arena: &'a Arena) -> Node<'a> {
    let mut out = Node::new_in(arena);
    if let Some(v) = m.value {
        out.set_value(v);
    }
    if let Some(l) = &m.left {
        out.set_left(build_node(l, arena));
    }
    if let Some(r) = &m.right {
        *out.get_mut_right() = build_node(r, arena);
    }
    if let Some(leaves) = &m.leaves {
        out.init_leaves(leaves.len());
        for t in leaves {
            let mut leaf = cornflakes_tests::example::node::Leaf::new_in(arena);
            if let Some(t) = t {
                leaf.set_type(s(t));
            }
            out.append_leaves(leaf);
        }
    }
    out
}

fn build<'a>(m: &'a Model<RcBuf>, arena: &'a Arena) -> Everything<'a> {
    let mut e = Everything::new_in(arena);
    macro_rules! scalar {
        ($($f:ident => $set:ident),*) => {$( if let Some(v) = m.$f { e.$set(v); } )*};
    }
    scalar!(i32 => set_i32, i64 => set_i64, u32 => set_u32, u64 => set_u64, flag => set_flag,
            f32 => set_f32, f64 => set_f64, maybe => set_maybe, far => set_far);
    if let Some(t) = &m.text {
        e.set_text(s(t));
    }
    if let Some(d) = &m.data {
        e.set_data(d);
    }
    if let Some(i) = &m.inner {
        e.set_inner(build_inner(i, arena));
    }
    if let Some(t) = &m.tree {
        e.set_tree(build_node(t, arena));
    }
    macro_rules! list {
        ($($f:ident => $init:ident, $append:ident);*) => {$(
            if let Some(l) = &m.$f { e.$init(l.len()); for v in l { e.$append(*v); } }
        )*};
    }
    list!(r_i32 => init_r_i32, append_r_i32; r_i64 => init_r_i64, append_r_i64; r_u32 => init_r_u32, append_r_u32;
          r_u64 => init_r_u64, append_r_u64; r_flag => init_r_flag, append_r_flag; r_f32 => init_r_f32, append_r_f32;
          r_f64 => init_r_f64, append_r_f64);
    if let Some(l) = &m.r_text {
        e.init_r_text(l.len());
        for t in l {
            e.append_r_text(s(t));
        }
    }
    if let Some(l) = &m.r_data {
        // Through get_mut, as an application filling a list would.
        let list = e.get_mut_r_data();
        for d in l {
            list.append(cornflakes::CfBytes::new(d, arena));
        }
    }
    if let Some(l) = &m.r_inner {
        e.init_r_inner(l.len());
        for i in l {
            e.append_r_inner(build_inner(i, arena));
        }
    }
    e
}

// ---- checking decoded messages against the model ----

/// Checks a decoded bytes field: content, and that it is zero-copy exactly
/// when the decode was from a pool buffer and it is long enough.
fn check_bytes(got: &cornflakes::CfBytes<'_>, want: &[u8], zc_expected: impl Fn(usize) -> bool) {
    assert_eq!(got.as_bytes(), want);
    assert_eq!(got.is_zero_copy(), zc_expected(want.len()), "zero-copy status of a {}-byte field", want.len());
}

fn check_inner(got: &Inner<'_>, want: &InnerModel<RcBuf>, zc: &impl Fn(usize) -> bool) {
    // proto3: a field without `optional` is present when not its default.
    assert_eq!(got.has_a(), want.a.is_some_and(|a| a != 0));
    assert_eq!(got.get_a(), want.a.unwrap_or(0));
    assert_eq!(got.has_data(), want.data.as_ref().is_some_and(|d| !d.is_empty()));
    check_bytes(got.get_data(), want.data.as_deref().unwrap_or(&[]), zc);
}

fn check_node(got: &Node<'_>, want: &NodeModel<RcBuf>, zc: &impl Fn(usize) -> bool) {
    assert_eq!(got.get_value(), want.value.unwrap_or(0));
    assert_eq!(got.has_value(), want.value.is_some_and(|v| v != 0));
    match (&want.left, got.get_left()) {
        (Some(w), Some(g)) => check_node(g, w, zc),
        (None, None) => {}
        other => panic!("left presence differs: {other:?}"),
    }
    match (&want.right, got.get_right()) {
        (Some(w), Some(g)) => check_node(g, w, zc),
        (None, None) => {}
        other => panic!("right presence differs: {other:?}"),
    }
    assert_eq!(got.has_leaves(), want.leaves.as_ref().is_some_and(|l| !l.is_empty()));
    let leaves = want.leaves.as_deref().unwrap_or(&[]);
    assert_eq!(got.get_leaves().len(), leaves.len());
    for (g, w) in got.get_leaves().iter().zip(leaves) {
        assert_eq!(g.has_type(), w.as_ref().is_some_and(|t| !t.is_empty()));
        assert_eq!(g.get_type().as_str().unwrap(), w.as_ref().map(s).unwrap_or(""));
        check_bytes(g.get_type().as_cf_bytes(), w.as_deref().unwrap_or(&[]), zc);
    }
}

fn check(got: &Everything<'_>, want: &Model<RcBuf>, zc: impl Fn(usize) -> bool) {
    macro_rules! scalar {
        ($($f:ident => $get:ident, $has:ident);*) => {$(
            // proto3: present when not the default.
            assert_eq!(got.$has(), want.$f.is_some_and(|v| v != Default::default()), stringify!($f));
            assert_eq!(got.$get(), want.$f.unwrap_or_default(), stringify!($f));
        )*};
    }
    scalar!(i32 => get_i32, has_i32; i64 => get_i64, has_i64; u32 => get_u32, has_u32; u64 => get_u64, has_u64;
            flag => get_flag, has_flag; far => get_far, has_far);
    // `optional`: present whenever set, even to 0.
    assert_eq!(got.has_maybe(), want.maybe.is_some());
    assert_eq!(got.get_maybe(), want.maybe.unwrap_or_default());
    // Floats compare by bits, so NaN payloads must survive too; -0.0 equals
    // the default 0.0, so it is not sent and reads back as 0.0 (as in prost).
    // (a message built in memory still holds the -0.0 it was given).
    let (f32_want, f64_want) = (want.f32.unwrap_or_default(), want.f64.unwrap_or_default());
    if f32_want == 0.0 {
        assert_eq!(got.get_f32(), 0.0);
    } else {
        assert_eq!(got.get_f32().to_bits(), f32_want.to_bits());
    }
    if f64_want == 0.0 {
        assert_eq!(got.get_f64(), 0.0);
    } else {
        assert_eq!(got.get_f64().to_bits(), f64_want.to_bits());
    }
    assert_eq!(got.has_text(), want.text.as_ref().is_some_and(|t| !t.is_empty()));
    check_bytes(got.get_text().as_cf_bytes(), want.text.as_deref().unwrap_or(&[]), &zc);
    assert_eq!(got.has_data(), want.data.as_ref().is_some_and(|d| !d.is_empty()));
    check_bytes(got.get_data(), want.data.as_deref().unwrap_or(&[]), &zc);
    match (&want.inner, got.get_inner()) {
        (Some(w), Some(g)) => check_inner(g, w, &zc),
        (None, None) => {}
        other => panic!("inner presence differs: {other:?}"),
    }
    match (&want.tree, got.get_tree()) {
        (Some(w), Some(g)) => check_node(g, w, &zc),
        (None, None) => {}
        other => panic!("tree presence differs: {other:?}"),
    }
    macro_rules! list {
        ($($f:ident => $get:ident, $has:ident);*) => {$(
            assert_eq!(got.$has(), want.$f.as_ref().is_some_and(|l| !l.is_empty()), stringify!($f));
            assert_eq!(&got.$get()[..], want.$f.as_deref().unwrap_or(&[]), stringify!($f));
        )*};
    }
    list!(r_i32 => get_r_i32, has_r_i32; r_i64 => get_r_i64, has_r_i64; r_u32 => get_r_u32, has_r_u32;
          r_u64 => get_r_u64, has_r_u64; r_flag => get_r_flag, has_r_flag);
    let bits32: Vec<u32> = got.get_r_f32().iter().map(|f| f.to_bits()).collect();
    assert_eq!(bits32, want.r_f32.iter().flatten().map(|f| f.to_bits()).collect::<Vec<_>>());
    let bits64: Vec<u64> = got.get_r_f64().iter().map(|f| f.to_bits()).collect();
    assert_eq!(bits64, want.r_f64.iter().flatten().map(|f| f.to_bits()).collect::<Vec<_>>());
    let texts = want.r_text.as_deref().unwrap_or(&[]);
    assert_eq!(got.get_r_text().len(), texts.len());
    for (g, w) in got.get_r_text().iter().zip(texts) {
        check_bytes(g.as_cf_bytes(), w, &zc);
    }
    let datas = want.r_data.as_deref().unwrap_or(&[]);
    assert_eq!(got.get_r_data().len(), datas.len());
    for (g, w) in got.get_r_data().iter().zip(datas) {
        check_bytes(g, w, &zc);
    }
    let inners = want.r_inner.as_deref().unwrap_or(&[]);
    assert_eq!(got.get_r_inner().len(), inners.len());
    for (g, w) in got.get_r_inner().iter().zip(inners) {
        check_inner(g, w, &zc);
    }
}

/// Serializes through the transmit-path interface: first segment, then the
/// zero-copy segments in the order visited.
fn segments(msg: &Everything<'_>) -> (Vec<u8>, usize) {
    let layout = msg.layout();
    let mut out = vec![0u8; layout.first_segment_len()];
    msg.write_header_and_copies(&layout, &mut out).unwrap();
    let mut entries = 0;
    msg.for_each_zero_copy(|seg| {
        out.extend_from_slice(seg);
        entries += 1;
    });
    assert_eq!(entries, layout.zero_copy_entries);
    assert_eq!(out.len(), layout.total_len());
    (out, entries)
}

fn round_trip(model: &Model<Vec<u8>>, threshold: usize) {
    let pool = Pool::new().unwrap();
    let values = pooled(model, &pool);
    let arena = Arena::with_threshold(Some(&pool), threshold);
    let msg = build(&values, &arena);
    check(&msg, &values, |len| len >= threshold && len > 0);

    let contiguous = msg.serialize_to_vec().unwrap();
    let (segmented, _) = segments(&msg);
    assert!(contiguous == segmented, "the two transmit forms produced different bytes");

    // Decoded from plain memory: everything borrowed.
    let decode_arena = Arena::with_threshold(Some(&pool), threshold);
    let back = Everything::deserialize_from_slice(&contiguous, &decode_arena).unwrap();
    check(&back, &values, |_| false);
    // Re-encoded, every field is now a copy, so the data order may differ
    // from the original (copied data precedes zero-copy data); the content
    // may not.
    let reencoded = back.serialize_to_vec().unwrap();
    check(&Everything::deserialize_from_slice(&reencoded, &decode_arena).unwrap(), &values, |_| false);

    // Decoded from a received pool buffer: long fields reference it.
    let pkt = pool.alloc_copy(&contiguous).unwrap();
    let back = Everything::deserialize(&pkt, &decode_arena).unwrap();
    check(&back, &values, |len| len >= threshold && len > 0);
    // Same copy/zero-copy split as the original: encoding is deterministic,
    // so the bytes are identical.
    assert!(back.serialize_to_vec().unwrap() == contiguous, "re-encoding a decoded message changed its bytes");
}

proptest! {
    // Miri interprets every case: a handful shows aliasing bugs as well as 64.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 64 },
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn round_trip_hybrid(m in model()) {
        round_trip(&m, cornflakes::field::DEFAULT_THRESHOLD);
    }

    #[test]
    fn round_trip_only_copy(m in model()) {
        round_trip(&m, cornflakes::field::ONLY_COPY);
    }

    #[test]
    fn round_trip_only_zero_copy(m in model()) {
        round_trip(&m, cornflakes::field::ONLY_ZERO_COPY);
    }
}

#[test]
fn heap_values_are_copied_transparently() {
    let pool = Pool::new().unwrap();
    let arena = Arena::with_threshold(Some(&pool), 0);
    let heap = vec![9u8; 4096];
    let mut m = Inner::new_in(&arena);
    m.set_data(&heap);
    assert!(!m.get_data().is_zero_copy(), "memory outside the pool cannot be zero-copy");
    let bytes = m.serialize_to_vec().unwrap();
    assert_eq!(Inner::deserialize_from_slice(&bytes, &arena).unwrap().get_data().as_bytes(), &heap[..]);
}

#[test]
fn a_value_dropped_by_the_application_stays_alive_in_the_message() {
    let pool = Pool::new().unwrap();
    let arena = Arena::new(&pool);
    let value = pool.alloc_copy(&[5u8; 1024]).unwrap();
    // The application hands the message its own reference, then drops its
    // handle (as a KV store does when a put replaces the value).
    let field = cornflakes::CfBytes::from_rcbuf(value.clone(), &arena);
    assert!(field.is_zero_copy());
    assert_eq!(value.ref_count(), 2);
    let mut m = Inner::new_in(&arena);
    m.set_data_field(field);
    drop(value);
    assert_eq!(pool.stats().live_slots, 1, "the message still holds the value");
    assert_eq!(m.serialize_to_vec().unwrap().len(), 4 + 4 + 8 + 1024);
    drop(m);
    assert_eq!(pool.stats().live_slots, 0, "released with the message");
}

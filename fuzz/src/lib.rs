//! The checks behind the `decode` fuzz target, kept in a library so that
//! the seed generator (`examples/seed_corpus.rs`) can run them on its seeds.
//!
//! For each input and each of `Everything`, `Node` and `GetM`, [`check`]
//! decodes three ways:
//!
//! 1. `deserialize_from_slice` with a copying arena;
//! 2. `deserialize` from a pool buffer holding the input, threshold 0
//!    (every non-empty bytes field must come back zero-copy);
//! 3. the same with threshold 512 (the hybrid rule).
//!
//! A decode may fail (with a `DecodeError`), but must not panic. When it
//! succeeds, [`check`] reads every field through the generated accessors
//! (strings through `as_str`), checks that unset fields hold their
//! defaults, that zero-copy fields obey the threshold and point into the
//! packet and that the packet's reference count accounts for them, then
//! re-serializes with `serialize_to_vec`, decodes that again and asserts
//! the two decodes are equal: by `PartialEq` when no float is NaN, and
//! always by a digest of every field value (floats by their bits).

use std::hash::{DefaultHasher, Hash, Hasher};

use cornflakes::mem::HugePages;
use cornflakes::{Arena, CfBytes, CfString, Message, Pool, PoolConfig, RcBuf};
use cornflakes_tests::example::{node::Leaf, Everything, GetM, Inner, Node};

thread_local! {
    // One pool for the whole run: creating one maps memory, too slow per input.
    static POOL: Pool = Pool::with_config(PoolConfig {
        max_bytes: 64 << 20,
        hugepages: HugePages::Never,
        lock: false,
    })
    .expect("cannot create the fuzzing pool");
}

/// Runs every decoder on `data`; panics when an invariant breaks.
pub fn check(data: &[u8]) {
    POOL.with(|pool| {
        check_schema::<EverythingS>(data, pool);
        check_schema::<NodeS>(data, pool);
        check_schema::<GetMS>(data, pool);
    });
}

/// A message type of the example schema, named without its lifetime.
pub trait Schema {
    /// The generated type.
    type Msg<'a>: Message<'a> + Walk + PartialEq + std::fmt::Debug;
}

/// `Everything`.
pub struct EverythingS;
impl Schema for EverythingS {
    type Msg<'a> = Everything<'a>;
}

/// `Node`.
pub struct NodeS;
impl Schema for NodeS {
    type Msg<'a> = Node<'a>;
}

/// `GetM`.
pub struct GetMS;
impl Schema for GetMS {
    type Msg<'a> = GetM<'a>;
}

fn check_schema<S: Schema>(data: &[u8], pool: &Pool) {
    // From a plain slice: every field borrows from `data`.
    {
        let arena = Arena::copying();
        let again = Arena::copying();
        // Declared before the first decode so that both decodes can share
        // one lifetime (the generated types are invariant in it).
        let bytes;
        if let Ok(first) = S::Msg::deserialize_from_slice(data, &arena) {
            let mut w = Walker::new(None, usize::MAX);
            first.walk(&mut w);
            assert_eq!(w.zero_copy, 0, "a slice decode produced zero-copy fields");
            bytes = first.serialize_to_vec().unwrap();
            roundtrip::<S>(&first, &w, &bytes, &again);
        };
    }

    // From a pool buffer: long fields become references into it.
    for threshold in [0, 512] {
        let pkt = pool.alloc_copy(data).expect("pool allocation for the input");
        let arena = Arena::with_threshold(Some(pool), threshold);
        let again = Arena::copying();
        let bytes;
        if let Ok(first) = S::Msg::deserialize(&pkt, &arena) {
            let mut w = Walker::new(Some(&pkt), threshold);
            first.walk(&mut w);
            // Every zero-copy field holds one count on the packet's slot.
            assert_eq!(pkt.ref_count() as usize, 1 + w.zero_copy, "zero-copy references miscounted");
            bytes = first.serialize_to_vec().unwrap();
            roundtrip::<S>(&first, &w, &bytes, &again);
        }
        // Dropping the message released every reference it took.
        assert_eq!(pkt.ref_count(), 1, "a decode leaked or over-released references");
    }
}

/// Decodes `bytes`, the serialization of `first`, and compares.
fn roundtrip<'a, S: Schema>(first: &S::Msg<'a>, walked: &Walker, bytes: &'a [u8], arena: &'a Arena) {
    assert_eq!(first.layout().total_len(), bytes.len());
    let second = S::Msg::deserialize_from_slice(bytes, arena)
        .unwrap_or_else(|e| panic!("re-serialized message does not decode: {e}\n{first:?}"));
    let mut w = Walker::new(None, usize::MAX);
    second.walk(&mut w);
    assert_eq!(walked.digest(), w.digest(), "decode(serialize(m)) differs from m\n{first:?}\n{second:?}");
    assert_eq!(walked.nan, w.nan);
    if !walked.nan {
        assert_eq!(*first, second);
    }
    // An all-copied message lays its data out in wire order, so serializing
    // it is a fixed point of decode-then-serialize. (A message with
    // zero-copy fields places their data after the copied data instead.)
    let again = second.serialize_to_vec().unwrap();
    if walked.zero_copy == 0 {
        assert_eq!(again, bytes, "serialize(decode(bytes)) != bytes");
    } else {
        let arena = Arena::copying();
        let third = S::Msg::deserialize_from_slice(&again, &arena).expect("serialization of a decoded message");
        assert_eq!(third.serialize_to_vec().unwrap(), again, "serialize(decode(bytes)) != bytes");
    }
}

/// Reads every field of a decoded message into a digest.
pub trait Walk {
    /// Reads every field, recursing into nested messages.
    fn walk(&self, w: &mut Walker);
}

/// What [`Walk`] accumulates, and the zero-copy rule it checks.
pub struct Walker {
    hasher: DefaultHasher,
    /// Some float field or element is NaN (so `PartialEq` cannot hold).
    pub nan: bool,
    /// Zero-copy fields seen.
    pub zero_copy: usize,
    /// The packet decoded from, as an address range, when from a pool.
    pkt: Option<(usize, usize)>,
    threshold: usize,
}

impl Walker {
    fn new(pkt: Option<&RcBuf>, threshold: usize) -> Self {
        Walker {
            hasher: DefaultHasher::new(),
            nan: false,
            zero_copy: 0,
            pkt: pkt.map(|p| (p.as_ptr() as usize, p.as_ptr() as usize + p.len())),
            threshold,
        }
    }

    fn digest(&self) -> u64 {
        self.hasher.finish()
    }

    fn tag(&mut self, tag: &'static str, present: bool) {
        tag.hash(&mut self.hasher);
        present.hash(&mut self.hasher);
    }

    fn scalar<T: Hash + Default + PartialEq + std::fmt::Debug>(&mut self, tag: &'static str, present: bool, v: T) {
        self.tag(tag, present);
        if !present {
            assert_eq!(v, T::default(), "unset field {tag} is not its default");
        }
        v.hash(&mut self.hasher);
    }

    fn f32(&mut self, v: f32) {
        self.nan |= v.is_nan();
        v.to_bits().hash(&mut self.hasher);
    }

    fn f64(&mut self, v: f64) {
        self.nan |= v.is_nan();
        v.to_bits().hash(&mut self.hasher);
    }

    fn bytes(&mut self, b: &CfBytes<'_>) {
        let data = b.as_bytes();
        assert_eq!(data.len(), b.len());
        data.hash(&mut self.hasher);
        let len = b.len();
        match self.pkt {
            Some((start, end)) => {
                let at = data.as_ptr() as usize;
                // Every field of a decoded message lies in the packet.
                assert!(len == 0 || (start <= at && at + len <= end), "field outside the packet");
                let should = len > 0 && len >= self.threshold;
                assert_eq!(b.is_zero_copy(), should, "zero-copy rule broken for a {len}-byte field");
            }
            None => assert!(!b.is_zero_copy()),
        }
        if b.is_zero_copy() {
            self.zero_copy += 1;
        }
    }

    fn string(&mut self, s: &CfString<'_>) {
        self.bytes(s.as_cf_bytes());
        let utf8 = std::str::from_utf8(s.as_bytes()).is_ok();
        match s.as_str() {
            Ok(text) => {
                assert!(utf8);
                assert_eq!(text.as_bytes(), s.as_bytes());
                text.chars().count().hash(&mut self.hasher);
            }
            Err(_) => assert!(!utf8),
        }
        assert_eq!(s.len(), s.as_bytes().len());
        assert_eq!(s.is_empty(), s.as_bytes().is_empty());
    }

    fn list_len(&mut self, tag: &'static str, present: bool, len: usize) {
        self.tag(tag, present);
        if !present {
            assert_eq!(len, 0, "unset list {tag} is not empty");
        }
        len.hash(&mut self.hasher);
    }

    fn nested<M: Walk>(&mut self, tag: &'static str, present: bool, m: Option<&M>) {
        self.tag(tag, present);
        assert_eq!(present, m.is_some(), "presence bit of {tag} disagrees with the field");
        if let Some(m) = m {
            m.walk(self);
        }
    }
}

impl Walk for Inner<'_> {
    fn walk(&self, w: &mut Walker) {
        w.scalar("a", self.has_a(), self.get_a());
        w.tag("data", self.has_data());
        assert!(self.has_data() || self.get_data().is_empty());
        w.bytes(self.get_data());
    }
}

impl Walk for Leaf<'_> {
    fn walk(&self, w: &mut Walker) {
        w.tag("type", self.has_type());
        assert!(self.has_type() || self.get_type().is_empty());
        w.string(self.get_type());
    }
}

impl Walk for Node<'_> {
    fn walk(&self, w: &mut Walker) {
        w.scalar("value", self.has_value(), self.get_value());
        w.nested("left", self.has_left(), self.get_left());
        w.nested("right", self.has_right(), self.get_right());
        w.list_len("leaves", self.has_leaves(), self.get_leaves().len());
        for leaf in self.get_leaves() {
            leaf.walk(w);
        }
    }
}

impl Walk for GetM<'_> {
    fn walk(&self, w: &mut Walker) {
        w.scalar("id", self.has_id(), self.get_id());
        w.list_len("keys", self.has_keys(), self.get_keys().len());
        for k in self.get_keys() {
            w.string(k);
        }
        w.list_len("vals", self.has_vals(), self.get_vals().len());
        for v in self.get_vals() {
            w.bytes(v);
        }
    }
}

impl Walk for Everything<'_> {
    fn walk(&self, w: &mut Walker) {
        w.scalar("i32", self.has_i32(), self.get_i32());
        w.scalar("i64", self.has_i64(), self.get_i64());
        w.scalar("u32", self.has_u32(), self.get_u32());
        w.scalar("u64", self.has_u64(), self.get_u64());
        w.scalar("flag", self.has_flag(), self.get_flag());
        w.scalar("f32", self.has_f32(), self.get_f32().to_bits());
        w.f32(self.get_f32());
        w.scalar("f64", self.has_f64(), self.get_f64().to_bits());
        w.f64(self.get_f64());
        w.tag("text", self.has_text());
        assert!(self.has_text() || self.get_text().is_empty());
        w.string(self.get_text());
        w.tag("data", self.has_data());
        assert!(self.has_data() || self.get_data().is_empty());
        w.bytes(self.get_data());
        w.nested("inner", self.has_inner(), self.get_inner());

        w.list_len("r_i32", self.has_r_i32(), self.get_r_i32().len());
        self.get_r_i32().hash(&mut w.hasher);
        w.list_len("r_i64", self.has_r_i64(), self.get_r_i64().len());
        self.get_r_i64().hash(&mut w.hasher);
        w.list_len("r_u32", self.has_r_u32(), self.get_r_u32().len());
        self.get_r_u32().hash(&mut w.hasher);
        w.list_len("r_u64", self.has_r_u64(), self.get_r_u64().len());
        self.get_r_u64().hash(&mut w.hasher);
        w.list_len("r_flag", self.has_r_flag(), self.get_r_flag().len());
        self.get_r_flag().hash(&mut w.hasher);
        w.list_len("r_f32", self.has_r_f32(), self.get_r_f32().len());
        for &v in self.get_r_f32() {
            w.f32(v);
        }
        w.list_len("r_f64", self.has_r_f64(), self.get_r_f64().len());
        for &v in self.get_r_f64() {
            w.f64(v);
        }
        w.list_len("r_text", self.has_r_text(), self.get_r_text().len());
        for s in self.get_r_text() {
            w.string(s);
        }
        w.list_len("r_data", self.has_r_data(), self.get_r_data().len());
        for b in self.get_r_data() {
            w.bytes(b);
        }
        w.list_len("r_inner", self.has_r_inner(), self.get_r_inner().len());
        for m in self.get_r_inner() {
            m.walk(w);
        }

        w.scalar("maybe", self.has_maybe(), self.get_maybe());
        w.scalar("far", self.has_far(), self.get_far());
        w.nested("tree", self.has_tree(), self.get_tree());
    }
}

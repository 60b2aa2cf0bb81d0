//! Cap'n Proto 0.27, with the code capnpc-rust 0.27 generates from
//! `shapes.capnp` ([`shapes_capnp`](cornflakes_baselines::shapes_capnp)).
//!
//! - **serialize**: a `message::Builder` over one reused
//!   `ScratchSpaceHeapAllocator` whose scratch space is the pinned transmit
//!   buffer (after its first [`TABLE_LEN`] bytes), so the message's segment
//!   is built in pinned memory; setting a bytes field copies it into the
//!   segment. Then the segment table is written into the first
//!   [`TABLE_LEN`] bytes of the transmit buffer and the segments are
//!   visited: Cap'n Proto sends its segments as a list, no flattening (the
//!   paper's "non-contiguous list of buffers"). Dropping the builder zeroes
//!   the used part of the scratch space, as the allocator requires.
//! - **decode**: `serialize::read_message_from_flat_slice_no_alloc` (the
//!   no-allocation variant of `read_message_from_flat_slice`) with default
//!   `ReaderOptions` on the received pool buffer, then every field is read
//!   through `get_root`.

use std::hint::black_box;

use cornflakes_baselines::capnp::message::{self, ReaderOptions, ScratchSpaceHeapAllocator};
use cornflakes_baselines::capnp::serialize;
use cornflakes_baselines::shapes_capnp::{inner, outer, repeated, single};

use crate::{digest, Case, Fixture, Input, WithCase};

/// Bytes at the front of the transmit buffer reserved for the segment
/// table (room for 15 segments; the shapes need one).
pub const TABLE_LEN: usize = 64;

/// Builds the Cap'n Proto case for `input` and runs `f` with it.
pub fn with_case<F: WithCase>(fixture: &mut Fixture, input: &Input, f: F) -> F::Output {
    let (vals, tx, pool) = fixture.split();
    let (table, scratch) = tx.split_at_mut(TABLE_LEN);
    let common = Common { table, alloc: ScratchSpaceHeapAllocator::new(scratch), rx: super::receive(pool, &[]), pool };
    match input {
        Input::Single(_) => f.run(&mut SingleCase { c: common, data: &vals[0] }),
        Input::Repeated(_) => f.run(&mut RepeatedCase { c: common, vals }),
        Input::Nested { id, a, .. } => {
            f.run(&mut NestedCase { c: common, id: *id, data: &vals[0], a: *a, inner_data: &vals[1] })
        }
    }
}

/// Writes the standard segment table (segment count minus one, each
/// segment's length in words, padded to a word) for `segments` into
/// `table`; returns its length.
///
/// # Panics
///
/// When `table` is too short (more than 15 segments).
#[inline(always)]
pub fn write_segment_table(table: &mut [u8], segments: &[&[u8]]) -> usize {
    let n = segments.len();
    let len = (4 + 4 * n).next_multiple_of(8);
    let table = &mut table[..len];
    table[0..4].copy_from_slice(&((n - 1) as u32).to_le_bytes());
    for (i, seg) in segments.iter().enumerate() {
        let words = (seg.len() / 8) as u32;
        table[4 + 4 * i..8 + 4 * i].copy_from_slice(&words.to_le_bytes());
    }
    if n.is_multiple_of(2) {
        table[len - 4..].fill(0);
    }
    len
}

/// What every Cap'n Proto case holds.
struct Common<'f> {
    table: &'f mut [u8],
    alloc: ScratchSpaceHeapAllocator<'f>,
    rx: cornflakes::RcBuf,
    pool: &'f cornflakes::Pool,
}

impl Common<'_> {
    /// Writes the segment table and visits the table and each segment.
    #[inline(always)]
    fn transmit<A: message::Allocator>(table: &mut [u8], msg: &message::Builder<A>, mut visit: impl FnMut(&[u8])) {
        let segments = msg.get_segments_for_output();
        let len = write_segment_table(table, &segments);
        visit(&table[..len]);
        for seg in segments.iter() {
            visit(seg);
        }
    }

    fn receive(&mut self, wire: &[u8]) {
        self.rx = super::receive(self.pool, wire);
    }

    #[inline(always)]
    fn reader(&self) -> message::Reader<serialize::NoAllocSliceSegments<'_>> {
        serialize::read_message_from_flat_slice_no_alloc(&mut self.rx.as_slice(), ReaderOptions::new()).expect("decode")
    }
}

fn visit_black_box(b: &[u8]) {
    black_box(b);
}

fn collect(segments: &mut Vec<Vec<u8>>) -> impl FnMut(&[u8]) + '_ {
    |b| segments.push(b.to_vec())
}

/// Shapes (a), (b).
struct SingleCase<'f> {
    c: Common<'f>,
    data: &'f [u8],
}

impl SingleCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnMut(&[u8])) {
        let mut msg = message::Builder::new(&mut self.c.alloc);
        msg.init_root::<single::Builder>().set_data(self.data);
        Common::transmit(self.c.table, &msg, visit);
    }
}

impl Case for SingleCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.send(collect(&mut out));
        out
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let reader = self.c.reader();
        let root = reader.get_root::<single::Reader>().expect("decode");
        digest(root.get_data().expect("decode"))
    }

    fn decode_owned(&mut self) -> Input {
        let reader = self.c.reader();
        let root = reader.get_root::<single::Reader>().expect("decode");
        assert!(root.has_data());
        Input::Single(root.get_data().expect("decode").to_vec())
    }
}

/// Shapes (c), (d), (e).
struct RepeatedCase<'f> {
    c: Common<'f>,
    vals: &'f [cornflakes::RcBuf],
}

impl RepeatedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnMut(&[u8])) {
        let mut msg = message::Builder::new(&mut self.c.alloc);
        let mut list = msg.init_root::<repeated::Builder>().init_vals(self.vals.len() as u32);
        for (i, v) in self.vals.iter().enumerate() {
            list.set(i as u32, v);
        }
        Common::transmit(self.c.table, &msg, visit);
    }
}

impl Case for RepeatedCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.send(collect(&mut out));
        out
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let reader = self.c.reader();
        let root = reader.get_root::<repeated::Reader>().expect("decode");
        let vals = root.get_vals().expect("decode");
        vals.iter().fold(0u64, |s, v| s.wrapping_add(digest(v.expect("decode"))))
    }

    fn decode_owned(&mut self) -> Input {
        let reader = self.c.reader();
        let root = reader.get_root::<repeated::Reader>().expect("decode");
        let vals = root.get_vals().expect("decode");
        Input::Repeated(vals.iter().map(|v| v.expect("decode").to_vec()).collect())
    }
}

/// Shape (f).
struct NestedCase<'f> {
    c: Common<'f>,
    id: u64,
    data: &'f [u8],
    a: u32,
    inner_data: &'f [u8],
}

impl NestedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnMut(&[u8])) {
        let mut msg = message::Builder::new(&mut self.c.alloc);
        let mut root = msg.init_root::<outer::Builder>();
        root.set_id(self.id);
        root.set_data(self.data);
        let mut inner: inner::Builder = root.init_inner();
        inner.set_a(self.a);
        inner.set_data(self.inner_data);
        Common::transmit(self.c.table, &msg, visit);
    }
}

impl Case for NestedCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.send(collect(&mut out));
        out
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let reader = self.c.reader();
        let root = reader.get_root::<outer::Reader>().expect("decode");
        let inner = root.get_inner().expect("decode");
        root.get_id()
            .wrapping_add(digest(root.get_data().expect("decode")))
            .wrapping_add(u64::from(inner.get_a()))
            .wrapping_add(digest(inner.get_data().expect("decode")))
    }

    fn decode_owned(&mut self) -> Input {
        let reader = self.c.reader();
        let root = reader.get_root::<outer::Reader>().expect("decode");
        assert!(root.has_inner());
        let inner = root.get_inner().expect("decode");
        Input::Nested {
            id: root.get_id(),
            data: root.get_data().expect("decode").to_vec(),
            a: inner.get_a(),
            inner_data: inner.get_data().expect("decode").to_vec(),
        }
    }
}

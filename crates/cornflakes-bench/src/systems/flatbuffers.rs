//! FlatBuffers 25.12, with the code flatc 25.12.19 generates from
//! `shapes.fbs` ([`shapes_fb`](cornflakes_baselines::shapes_fb)).
//!
//! - **serialize**: one `FlatBufferBuilder` per case, reused and `reset`
//!   each iteration, whose [`Allocator`](flatbuffers::Allocator) is the
//!   pinned transmit buffer itself ([`SliceAlloc`]): the builder writes the
//!   finished message straight into pinned memory (at the buffer's tail, as
//!   FlatBuffers builds back to front), so no copy into a transmit buffer
//!   is needed. Values are copied in with `create_vector`; a repeated bytes
//!   field is a vector of `Blob` tables (FlatBuffers has no vector of
//!   vectors). The finished bytes are visited as one contiguous buffer.
//! - **decode**: verified `flatbuffers::root::<T>()` on the received pool
//!   buffer, then every field is read.

use std::hint::black_box;

use cornflakes_baselines::fb_alloc::SliceAlloc;
use cornflakes_baselines::flatbuffers::{self, FlatBufferBuilder, WIPOffset};
use cornflakes_baselines::shapes_fb::shapes as fb;

use crate::{digest, Case, Fixture, Input, WithCase};

/// Builds the FlatBuffers case for `input` and runs `f` with it.
pub fn with_case<F: WithCase>(fixture: &mut Fixture, input: &Input, f: F) -> F::Output {
    let (vals, tx, pool) = fixture.split();
    let common = Common { builder: FlatBufferBuilder::new_in(SliceAlloc(tx)), rx: super::receive(pool, &[]), pool };
    match input {
        Input::Single(_) => f.run(&mut SingleCase { c: common, data: &vals[0] }),
        Input::Repeated(_) => f.run(&mut RepeatedCase { c: common, vals, offsets: Vec::with_capacity(vals.len()) }),
        Input::Nested { id, a, .. } => {
            f.run(&mut NestedCase { c: common, id: *id, data: &vals[0], a: *a, inner_data: &vals[1] })
        }
    }
}

/// What every FlatBuffers case holds.
struct Common<'f> {
    builder: FlatBufferBuilder<'f, SliceAlloc<'f>>,
    rx: cornflakes::RcBuf,
    pool: &'f cornflakes::Pool,
}

impl Common<'_> {
    /// Finishes the message, visits the finished bytes (in place in the
    /// transmit buffer) and resets the builder for the next message.
    #[inline(always)]
    fn finish<T>(&mut self, root: WIPOffset<T>, visit: impl FnOnce(&[u8])) {
        self.builder.finish_minimal(root);
        visit(self.builder.finished_data());
        self.builder.reset();
    }

    fn receive(&mut self, wire: &[u8]) {
        self.rx = super::receive(self.pool, wire);
    }
}

fn visit_black_box(b: &[u8]) {
    black_box(b);
}

/// Shapes (a), (b).
struct SingleCase<'f> {
    c: Common<'f>,
    data: &'f [u8],
}

impl SingleCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) {
        let b = &mut self.c.builder;
        let data = b.create_vector(self.data);
        let root = fb::Single::create(b, &fb::SingleArgs { data: Some(data) });
        self.c.finish(root, visit);
    }
}

impl Case for SingleCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.send(|b| out = b.to_vec());
        vec![out]
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let msg = flatbuffers::root::<fb::Single>(&self.c.rx).expect("decode");
        digest(msg.data().expect("data is set").bytes())
    }

    fn decode_owned(&mut self) -> Input {
        let msg = flatbuffers::root::<fb::Single>(&self.c.rx).expect("decode");
        Input::Single(msg.data().expect("data is set").bytes().to_vec())
    }
}

/// Shapes (c), (d), (e).
struct RepeatedCase<'f> {
    c: Common<'f>,
    vals: &'f [cornflakes::RcBuf],
    /// Offsets of the `Blob` tables, reused.
    offsets: Vec<WIPOffset<fb::Blob<'f>>>,
}

impl RepeatedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) {
        let b = &mut self.c.builder;
        for v in self.vals {
            let data = b.create_vector(v.as_slice());
            self.offsets.push(fb::Blob::create(b, &fb::BlobArgs { data: Some(data) }));
        }
        let vals = b.create_vector(&self.offsets);
        let root = fb::Repeated::create(b, &fb::RepeatedArgs { vals: Some(vals) });
        self.offsets.clear();
        self.c.finish(root, visit);
    }
}

impl Case for RepeatedCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.send(|b| out = b.to_vec());
        vec![out]
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let msg = flatbuffers::root::<fb::Repeated>(&self.c.rx).expect("decode");
        let vals = msg.vals().expect("vals is set");
        vals.iter().fold(0u64, |s, v| s.wrapping_add(digest(v.data().expect("data is set").bytes())))
    }

    fn decode_owned(&mut self) -> Input {
        let msg = flatbuffers::root::<fb::Repeated>(&self.c.rx).expect("decode");
        let vals = msg.vals().expect("vals is set");
        Input::Repeated(vals.iter().map(|v| v.data().expect("data is set").bytes().to_vec()).collect())
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
    fn send(&mut self, visit: impl FnOnce(&[u8])) {
        let b = &mut self.c.builder;
        let inner_data = b.create_vector(self.inner_data);
        let inner = fb::Inner::create(b, &fb::InnerArgs { a: self.a, data: Some(inner_data) });
        let data = b.create_vector(self.data);
        let root = fb::Outer::create(b, &fb::OuterArgs { id: self.id, data: Some(data), inner: Some(inner) });
        self.c.finish(root, visit);
    }
}

impl Case for NestedCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.send(|b| out = b.to_vec());
        vec![out]
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let msg = flatbuffers::root::<fb::Outer>(&self.c.rx).expect("decode");
        let inner = msg.inner().expect("inner is set");
        msg.id()
            .wrapping_add(digest(msg.data().expect("data is set").bytes()))
            .wrapping_add(u64::from(inner.a()))
            .wrapping_add(digest(inner.data().expect("data is set").bytes()))
    }

    fn decode_owned(&mut self) -> Input {
        let msg = flatbuffers::root::<fb::Outer>(&self.c.rx).expect("decode");
        let inner = msg.inner().expect("inner is set");
        Input::Nested {
            id: msg.id(),
            data: msg.data().expect("data is set").bytes().to_vec(),
            a: inner.a(),
            inner_data: inner.data().expect("data is set").bytes().to_vec(),
        }
    }
}

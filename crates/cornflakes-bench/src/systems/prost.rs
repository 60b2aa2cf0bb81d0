//! prost 0.14 (protobuf), with `bytes::Bytes` fields: its best case for
//! bytes, since setting a field clones a reference and decoding from a
//! `Bytes` slices it instead of copying.
//!
//! No `protoc` is needed: the message structs mirror `proto/shapes.proto`
//! with `#[derive(prost::Message)]` written by hand, which is what
//! prost-build would emit.
//!
//! - **serialize**: build the message by cloning pre-made `Bytes` values
//!   (one atomic count increment each), `encode` it straight into the pinned
//!   transmit buffer (as `&mut [u8]`), visit the encoded bytes. Protobuf
//!   copies every field, so there is nothing to send by reference. The
//!   `Repeated` message struct is kept between iterations and cleared, so
//!   its `Vec` is not reallocated each time (prost's best case; a fresh
//!   `Vec` would add a malloc/free).
//! - **decode**: `merge` the received message (a `Bytes`, cloned: one
//!   count increment) into a reused, cleared message, so `bytes` fields are
//!   slices of the received buffer, then read every field.
//!
//! The received buffer is a heap `Bytes` (a copy of the serialized output),
//! not pool memory: `Bytes` needs a `Send` owner and `RcBuf` is not `Send`.

use std::hint::black_box;

use cornflakes_baselines::bytes::Bytes;
use cornflakes_baselines::prost::{self, Message as _};
use cornflakes_baselines::shapes_pb as pb;

use crate::{digest, Case, Fixture, Input, WithCase};

/// Builds the prost case for `input` and runs `f` with it.
pub fn with_case<F: WithCase>(fixture: &mut Fixture, input: &Input, f: F) -> F::Output {
    let (_, tx, _) = fixture.split();
    let common = Common { tx, rx: Bytes::new() };
    match input {
        Input::Single(d) => f.run(&mut SingleCase { c: common, data: Bytes::copy_from_slice(d) }),
        Input::Repeated(v) => f.run(&mut RepeatedCase {
            c: common,
            vals: v.iter().map(|d| Bytes::copy_from_slice(d)).collect(),
            msg: pb::Repeated { vals: Vec::with_capacity(v.len()) },
            out: pb::Repeated { vals: Vec::with_capacity(v.len()) },
        }),
        Input::Nested { id, data, a, inner_data } => f.run(&mut NestedCase {
            c: common,
            id: *id,
            data: Bytes::copy_from_slice(data),
            a: *a,
            inner_data: Bytes::copy_from_slice(inner_data),
        }),
    }
}

/// What every prost case holds.
struct Common<'f> {
    tx: &'f mut [u8],
    rx: Bytes,
}

/// Encodes `msg` into the front of `tx`, visits the encoded bytes and
/// returns their length.
#[inline(always)]
fn transmit<M: prost::Message>(msg: &M, tx: &mut [u8], visit: impl FnOnce(&[u8])) -> usize {
    let cap = tx.len();
    let mut buf = &mut tx[..];
    msg.encode(&mut buf).expect("the transmit buffer holds the message");
    let len = cap - buf.len();
    visit(&tx[..len]);
    len
}

fn visit_black_box(b: &[u8]) {
    black_box(b);
}

/// Shapes (a), (b).
struct SingleCase<'f> {
    c: Common<'f>,
    data: Bytes,
}

impl SingleCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) -> usize {
        let msg = pb::Single { data: self.data.clone() };
        transmit(&msg, self.c.tx, visit)
    }
}

impl Case for SingleCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let len = self.send(|_| {});
        vec![self.c.tx[..len].to_vec()]
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.rx = Bytes::copy_from_slice(wire);
    }

    fn decode(&mut self) -> u64 {
        let msg = pb::Single::decode(self.c.rx.clone()).expect("decode");
        digest(&msg.data)
    }

    fn decode_owned(&mut self) -> Input {
        let msg = pb::Single::decode(self.c.rx.clone()).expect("decode");
        Input::Single(msg.data.to_vec())
    }
}

/// Shapes (c), (d), (e).
struct RepeatedCase<'f> {
    c: Common<'f>,
    vals: Vec<Bytes>,
    /// Reused for serialize.
    msg: pb::Repeated,
    /// Reused for decode.
    out: pb::Repeated,
}

impl RepeatedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) -> usize {
        self.msg.vals.extend(self.vals.iter().cloned());
        let len = transmit(&self.msg, self.c.tx, visit);
        self.msg.vals.clear();
        len
    }
}

impl Case for RepeatedCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let len = self.send(|_| {});
        vec![self.c.tx[..len].to_vec()]
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.rx = Bytes::copy_from_slice(wire);
    }

    fn decode(&mut self) -> u64 {
        self.out.merge(self.c.rx.clone()).expect("decode");
        let sum = self.out.vals.iter().fold(0u64, |s, v| s.wrapping_add(digest(v)));
        self.out.clear();
        sum
    }

    fn decode_owned(&mut self) -> Input {
        self.out.merge(self.c.rx.clone()).expect("decode");
        let out = Input::Repeated(self.out.vals.iter().map(|v| v.to_vec()).collect());
        self.out.clear();
        out
    }
}

/// Shape (f).
struct NestedCase<'f> {
    c: Common<'f>,
    id: u64,
    data: Bytes,
    a: u32,
    inner_data: Bytes,
}

impl NestedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) -> usize {
        let msg = pb::Outer {
            id: self.id,
            data: self.data.clone(),
            inner: Some(pb::Inner { a: self.a, data: self.inner_data.clone() }),
        };
        transmit(&msg, self.c.tx, visit)
    }
}

impl Case for NestedCase<'_> {
    fn serialize(&mut self) {
        self.send(visit_black_box);
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let len = self.send(|_| {});
        vec![self.c.tx[..len].to_vec()]
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.rx = Bytes::copy_from_slice(wire);
    }

    fn decode(&mut self) -> u64 {
        let msg = pb::Outer::decode(self.c.rx.clone()).expect("decode");
        let inner = msg.inner.as_ref().expect("inner is set");
        msg.id.wrapping_add(digest(&msg.data)).wrapping_add(u64::from(inner.a)).wrapping_add(digest(&inner.data))
    }

    fn decode_owned(&mut self) -> Input {
        let msg = pb::Outer::decode(self.c.rx.clone()).expect("decode");
        let inner = msg.inner.expect("inner is set");
        Input::Nested { id: msg.id, data: msg.data.to_vec(), a: inner.a, inner_data: inner.data.to_vec() }
    }
}

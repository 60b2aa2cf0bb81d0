//! rkyv 0.8: zero-copy deserialization, the fastest Rust format people
//! reach for, at its best for this benchmark.
//!
//! - **serialize**: the message structs borrow the pinned values (`&[u8]`
//!   fields archived with `InlineAsBox`, so nothing is copied into an owned
//!   `Vec` first); `to_bytes_in` writes the archive straight into the
//!   pinned transmit buffer (`ser::writer::Buffer` over the slice). rkyv has
//!   no scatter-gather output: every value is copied into the archive, and
//!   the finished bytes are visited as one contiguous buffer. The
//!   `Repeated` list of references is a reused `Vec`, cleared each time
//!   (as prost's case does).
//! - **decode**: validated `rkyv::access` (bytecheck) on the received pool
//!   buffer (pool buffers are aligned as rkyv needs), then every field is
//!   read in place.

use std::hint::black_box;

use cornflakes::{Pool, RcBuf};
use rkyv::api::high::HighSerializer;
use rkyv::rancor::Error;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::ser::writer::Buffer;
use rkyv::with::{InlineAsBox, Map};
use rkyv::{Archive, Serialize};

use crate::{digest, Case, Fixture, Input, WithCase};

/// `Single { bytes data }`.
#[derive(Archive, Serialize)]
pub struct Single<'a> {
    #[rkyv(with = InlineAsBox)]
    data: &'a [u8],
}

/// `Repeated { repeated bytes vals }`.
#[derive(Archive, Serialize)]
pub struct Repeated<'a> {
    #[rkyv(with = Map<InlineAsBox>)]
    vals: Vec<&'a [u8]>,
}

/// `Inner { uint32 a; bytes data }`.
#[derive(Archive, Serialize)]
pub struct Inner<'a> {
    a: u32,
    #[rkyv(with = InlineAsBox)]
    data: &'a [u8],
}

/// `Outer { uint64 id; bytes data; Inner inner }`.
#[derive(Archive, Serialize)]
pub struct Outer<'a> {
    id: u64,
    #[rkyv(with = InlineAsBox)]
    data: &'a [u8],
    inner: Inner<'a>,
}

/// Builds the rkyv case for `input` and runs `f` with it.
pub fn with_case<F: WithCase>(fixture: &mut Fixture, input: &Input, f: F) -> F::Output {
    let (vals, tx, pool) = fixture.split();
    let common = Common { tx, rx: super::receive(pool, &[]), pool };
    match input {
        Input::Single(_) => f.run(&mut SingleCase { c: common, data: &vals[0] }),
        Input::Repeated(_) => {
            f.run(&mut RepeatedCase { c: common, vals, refs: Repeated { vals: Vec::with_capacity(vals.len()) } })
        }
        Input::Nested { id, a, .. } => {
            f.run(&mut NestedCase { c: common, id: *id, data: &vals[0], a: *a, inner_data: &vals[1] })
        }
    }
}

/// What every rkyv case holds.
struct Common<'f> {
    tx: &'f mut [u8],
    rx: RcBuf,
    pool: &'f Pool,
}

impl Common<'_> {
    fn receive(&mut self, wire: &[u8]) {
        self.rx = super::receive(self.pool, wire);
    }
}

/// Archives `msg` into the front of `tx`, visits the archive and returns
/// its length.
#[inline(always)]
fn transmit<T>(msg: &T, tx: &mut [u8], visit: impl FnOnce(&[u8])) -> usize
where
    T: for<'b, 'x> Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'x>, Error>>,
{
    let len = archive(msg, &mut *tx);
    visit(&tx[..len]);
    len
}

#[inline(always)]
fn archive<'b, T>(msg: &T, tx: &'b mut [u8]) -> usize
where
    T: for<'x> Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'x>, Error>>,
{
    rkyv::api::high::to_bytes_in::<_, Error>(msg, Buffer::from(tx))
        .expect("the transmit buffer holds the archive")
        .len()
}

fn visit_black_box(b: &[u8]) {
    black_box(b);
}

/// Shapes (a), (b).
struct SingleCase<'f> {
    c: Common<'f>,
    data: &'f RcBuf,
}

impl SingleCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) -> usize {
        let msg = Single { data: self.data };
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
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let m = rkyv::access::<ArchivedSingle, Error>(&self.c.rx).expect("decode");
        digest(&m.data)
    }

    fn decode_owned(&mut self) -> Input {
        let m = rkyv::access::<ArchivedSingle, Error>(&self.c.rx).expect("decode");
        Input::Single(m.data.to_vec())
    }
}

/// Shapes (c), (d), (e).
struct RepeatedCase<'f> {
    c: Common<'f>,
    vals: &'f [RcBuf],
    /// Reused for serialize.
    refs: Repeated<'f>,
}

impl RepeatedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) -> usize {
        self.refs.vals.extend(self.vals.iter().map(|v| &v[..]));
        let len = transmit(&self.refs, self.c.tx, visit);
        self.refs.vals.clear();
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
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let m = rkyv::access::<ArchivedRepeated, Error>(&self.c.rx).expect("decode");
        m.vals.iter().fold(0u64, |s, v| s.wrapping_add(digest(v)))
    }

    fn decode_owned(&mut self) -> Input {
        let m = rkyv::access::<ArchivedRepeated, Error>(&self.c.rx).expect("decode");
        Input::Repeated(m.vals.iter().map(|v| v.to_vec()).collect())
    }
}

/// Shape (f).
struct NestedCase<'f> {
    c: Common<'f>,
    id: u64,
    data: &'f RcBuf,
    a: u32,
    inner_data: &'f RcBuf,
}

impl NestedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnOnce(&[u8])) -> usize {
        let msg = Outer { id: self.id, data: self.data, inner: Inner { a: self.a, data: self.inner_data } };
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
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let m = rkyv::access::<ArchivedOuter, Error>(&self.c.rx).expect("decode");
        m.id.to_native()
            .wrapping_add(digest(&m.data))
            .wrapping_add(u64::from(m.inner.a.to_native()))
            .wrapping_add(digest(&m.inner.data))
    }

    fn decode_owned(&mut self) -> Input {
        let m = rkyv::access::<ArchivedOuter, Error>(&self.c.rx).expect("decode");
        Input::Nested {
            id: m.id.to_native(),
            data: m.data.to_vec(),
            a: m.inner.a.to_native(),
            inner_data: m.inner.data.to_vec(),
        }
    }
}

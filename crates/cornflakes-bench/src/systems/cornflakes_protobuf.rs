//! Cornflakes' hybrid rule on the protobuf wire format: the message types
//! `cornflakes-build` generates from `proto/shapes.proto` with
//! `Wire::Protobuf` ([`crate::cf_pw_shapes`]). The bytes on the wire are
//! standard proto3, the same as prost's (checked by `tests/cases_check.rs`).
//!
//! - **serialize**: a new message in the case's [`Arena`] (threshold 512,
//!   the fixture's pool), fields set from the pool-resident values with the
//!   generated setters (the hybrid rule, as for `cornflakes`), then
//!   `proto_layout` (one size pass) and `write_proto` into the pinned
//!   transmit buffer: keys, lengths and copied fields are written there,
//!   each zero-copy payload is visited with the offset it follows (what a
//!   scatter-gather transmit path posts). The message is dropped and the
//!   arena reset inside the iteration.
//! - **decode**: `ProtoMessage::deserialize_proto` of the received pool
//!   buffer (fields of at least 512 bytes become counted references into
//!   it, shorter ones borrow), then every field is read; drop and reset.

use std::hint::black_box;

use cornflakes::protowire::ProtoMessage;
use cornflakes::{Arena, Pool, RcBuf};

use crate::cf_pw_shapes::{Outer, Repeated, Single};
use crate::{digest, Case, Fixture, Input, WithCase};

/// Builds the Cornflakes case for `input` and runs `f` with it.
pub fn with_case<F: WithCase>(fixture: &mut Fixture, input: &Input, f: F) -> F::Output {
    let (vals, tx, pool) = fixture.split();
    let common = Common { arena: Arena::new(pool), tx, rx: super::receive(pool, &[]), pool: pool.clone() };
    match input {
        Input::Single(_) => f.run(&mut SingleCase { c: common, data: &vals[0] }),
        Input::Repeated(_) => f.run(&mut RepeatedCase { c: common, vals }),
        Input::Nested { id, a, .. } => {
            f.run(&mut NestedCase { c: common, id: *id, data: &vals[0], a: *a, inner_data: &vals[1] })
        }
    }
}

/// What every Cornflakes case holds.
struct Common<'f> {
    arena: Arena,
    tx: &'f mut [u8],
    rx: RcBuf,
    pool: Pool,
}

impl Common<'_> {
    fn receive(&mut self, wire: &[u8]) {
        self.rx = super::receive(&self.pool, wire);
    }
}

/// Writes `msg`'s copied bytes into `tx` and passes each zero-copy payload,
/// with the offset in `tx` it follows, to `visit`; returns the length
/// written into `tx`. The transmit path of the benchmark: what `serialize`
/// times.
#[inline(always)]
fn transmit<'a, M: ProtoMessage<'a>>(msg: &M, tx: &mut [u8], visit: impl FnMut(usize, &RcBuf)) -> usize {
    let layout = msg.proto_layout();
    msg.write_proto(&layout, tx, visit).expect("the transmit buffer holds the copied bytes");
    layout.copy_len
}

/// Collects what [`transmit`] posts, in wire order: copied bytes up to the
/// first payload, the payload, copied bytes up to the next, and so on.
fn collect(tx: &[u8], copied_len: usize, zero_copy: Vec<(usize, Vec<u8>)>) -> Vec<Vec<u8>> {
    let mut segments = Vec::new();
    let mut from = 0;
    for (at, payload) in zero_copy {
        if at > from {
            segments.push(tx[from..at].to_vec());
        }
        segments.push(payload);
        from = at;
    }
    if copied_len > from {
        segments.push(tx[from..copied_len].to_vec());
    }
    segments
}

/// Shapes (a), (b).
struct SingleCase<'f> {
    c: Common<'f>,
    data: &'f RcBuf,
}

impl SingleCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnMut(usize, &RcBuf)) -> usize {
        let len = {
            let mut msg = Single::new_in(&self.c.arena);
            msg.set_data(self.data);
            transmit(&msg, self.c.tx, visit)
        };
        self.c.arena.reset();
        len
    }
}

impl Case for SingleCase<'_> {
    fn serialize(&mut self) {
        self.send(|at, b| {
            black_box((at, b));
        });
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut zc = Vec::new();
        let len = self.send(|at, b| zc.push((at, b.to_vec())));
        collect(self.c.tx, len, zc)
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let sum = {
            let msg = Single::deserialize_proto(&self.c.rx, &self.c.arena).expect("decode");
            digest(msg.get_data())
        };
        self.c.arena.reset();
        sum
    }

    fn decode_owned(&mut self) -> Input {
        let out = {
            let msg = Single::deserialize_proto(&self.c.rx, &self.c.arena).expect("decode");
            assert!(msg.has_data());
            Input::Single(msg.get_data().to_vec())
        };
        self.c.arena.reset();
        out
    }
}

/// Shapes (c), (d), (e).
struct RepeatedCase<'f> {
    c: Common<'f>,
    vals: &'f [RcBuf],
}

impl RepeatedCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnMut(usize, &RcBuf)) -> usize {
        let len = {
            let mut msg = Repeated::new_in(&self.c.arena);
            msg.init_vals(self.vals.len());
            for v in self.vals {
                msg.append_vals(v);
            }
            transmit(&msg, self.c.tx, visit)
        };
        self.c.arena.reset();
        len
    }
}

impl Case for RepeatedCase<'_> {
    fn serialize(&mut self) {
        self.send(|at, b| {
            black_box((at, b));
        });
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut zc = Vec::new();
        let len = self.send(|at, b| zc.push((at, b.to_vec())));
        collect(self.c.tx, len, zc)
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let sum = {
            let msg = Repeated::deserialize_proto(&self.c.rx, &self.c.arena).expect("decode");
            msg.get_vals().iter().fold(0u64, |s, v| s.wrapping_add(digest(v)))
        };
        self.c.arena.reset();
        sum
    }

    fn decode_owned(&mut self) -> Input {
        let out = {
            let msg = Repeated::deserialize_proto(&self.c.rx, &self.c.arena).expect("decode");
            Input::Repeated(msg.get_vals().iter().map(|v| v.to_vec()).collect())
        };
        self.c.arena.reset();
        out
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
    fn send(&mut self, visit: impl FnMut(usize, &RcBuf)) -> usize {
        let len = {
            let mut msg = Outer::new_in(&self.c.arena);
            msg.set_id(self.id);
            msg.set_data(self.data);
            let inner = msg.get_mut_inner();
            inner.set_a(self.a);
            inner.set_data(self.inner_data);
            transmit(&msg, self.c.tx, visit)
        };
        self.c.arena.reset();
        len
    }
}

impl Case for NestedCase<'_> {
    fn serialize(&mut self) {
        self.send(|at, b| {
            black_box((at, b));
        });
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut zc = Vec::new();
        let len = self.send(|at, b| zc.push((at, b.to_vec())));
        collect(self.c.tx, len, zc)
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let sum = {
            let msg = Outer::deserialize_proto(&self.c.rx, &self.c.arena).expect("decode");
            let inner = msg.get_inner().expect("inner is set");
            msg.get_id()
                .wrapping_add(digest(msg.get_data()))
                .wrapping_add(u64::from(inner.get_a()))
                .wrapping_add(digest(inner.get_data()))
        };
        self.c.arena.reset();
        sum
    }

    fn decode_owned(&mut self) -> Input {
        let out = {
            let msg = Outer::deserialize_proto(&self.c.rx, &self.c.arena).expect("decode");
            let inner = msg.get_inner().expect("inner is set");
            assert!(msg.has_id() && msg.has_data() && inner.has_a() && inner.has_data());
            Input::Nested {
                id: msg.get_id(),
                data: msg.get_data().to_vec(),
                a: inner.get_a(),
                inner_data: inner.get_data().to_vec(),
            }
        };
        self.c.arena.reset();
        out
    }
}

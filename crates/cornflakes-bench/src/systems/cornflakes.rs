//! Cornflakes, with the message types `cornflakes-build` generates from
//! `proto/shapes.proto` ([`crate::cf_shapes`]).
//!
//! - **serialize**: a new message in the case's [`Arena`] (threshold 512,
//!   the fixture's pool), fields set from the pool-resident values with the
//!   generated setters (each runs the hybrid rule; a value of at least 512
//!   bytes is `recover`ed and its count taken), then `layout`,
//!   `write_header_and_copies` into the pinned transmit buffer and
//!   `for_each_zero_copy`. The message is dropped (releasing its counts)
//!   and the arena reset inside the iteration.
//! - **decode**: `Message::deserialize` of the received pool buffer (fields
//!   of at least 512 bytes become counted references into it, shorter ones
//!   borrow), then every field is read; drop and reset as above.

use std::hint::black_box;

use cornflakes::{Arena, Message, Pool, RcBuf};

use crate::cf_shapes::{Outer, Repeated, Single};
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

/// Writes `msg` into `tx` and passes each zero-copy buffer to `visit`;
/// returns the length written into `tx`. The transmit path of the
/// benchmark: what `serialize` times.
#[inline(always)]
fn transmit<'a, M: Message<'a>>(msg: &M, tx: &mut [u8], visit: impl FnMut(&RcBuf)) -> usize {
    let layout = msg.layout();
    msg.write_header_and_copies(&layout, tx).expect("the transmit buffer holds the first segment");
    msg.for_each_zero_copy(visit);
    layout.first_segment_len()
}

/// Collects what [`transmit`] posts: the first segment, then each zero-copy
/// buffer.
fn collect(tx: &[u8], first_len: usize, zero_copy: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut segments = vec![tx[..first_len].to_vec()];
    segments.extend(zero_copy);
    segments
}

/// Shapes (a), (b).
struct SingleCase<'f> {
    c: Common<'f>,
    data: &'f RcBuf,
}

impl SingleCase<'_> {
    #[inline(always)]
    fn send(&mut self, visit: impl FnMut(&RcBuf)) -> usize {
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
        self.send(|b| {
            black_box(b);
        });
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut zc = Vec::new();
        let len = self.send(|b| zc.push(b.to_vec()));
        collect(self.c.tx, len, zc)
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let sum = {
            let msg = Single::deserialize(&self.c.rx, &self.c.arena).expect("decode");
            digest(msg.get_data())
        };
        self.c.arena.reset();
        sum
    }

    fn decode_owned(&mut self) -> Input {
        let out = {
            let msg = Single::deserialize(&self.c.rx, &self.c.arena).expect("decode");
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
    fn send(&mut self, visit: impl FnMut(&RcBuf)) -> usize {
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
        self.send(|b| {
            black_box(b);
        });
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut zc = Vec::new();
        let len = self.send(|b| zc.push(b.to_vec()));
        collect(self.c.tx, len, zc)
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let sum = {
            let msg = Repeated::deserialize(&self.c.rx, &self.c.arena).expect("decode");
            msg.get_vals().iter().fold(0u64, |s, v| s.wrapping_add(digest(v)))
        };
        self.c.arena.reset();
        sum
    }

    fn decode_owned(&mut self) -> Input {
        let out = {
            let msg = Repeated::deserialize(&self.c.rx, &self.c.arena).expect("decode");
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
    fn send(&mut self, visit: impl FnMut(&RcBuf)) -> usize {
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
        self.send(|b| {
            black_box(b);
        });
    }

    fn wire(&mut self) -> Vec<Vec<u8>> {
        let mut zc = Vec::new();
        let len = self.send(|b| zc.push(b.to_vec()));
        collect(self.c.tx, len, zc)
    }

    fn receive(&mut self, wire: &[u8]) {
        self.c.receive(wire);
    }

    fn decode(&mut self) -> u64 {
        let sum = {
            let msg = Outer::deserialize(&self.c.rx, &self.c.arena).expect("decode");
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
            let msg = Outer::deserialize(&self.c.rx, &self.c.arena).expect("decode");
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

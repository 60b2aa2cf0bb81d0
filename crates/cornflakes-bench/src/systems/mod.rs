//! One module per system, each with a `with_case` that builds its case for
//! an [`Input`](crate::Input) from the shared [`Fixture`](crate::Fixture).
//!
//! Every case keeps what it reuses between iterations (arena, builder,
//! allocator, message struct) and borrows the fixture's pinned values and
//! transmit buffer; the receive buffer for decode is made once from the
//! system's own serialized output and lives in the same pool.

pub mod capnp;
pub mod cornflakes;
pub mod cornflakes_protobuf;
pub mod flatbuffers;
pub mod prost;
pub mod rkyv;

use ::cornflakes::{Pool, RcBuf};

/// Copies `wire` into a fresh pool buffer, as a received packet would be.
pub(crate) fn receive(pool: &Pool, wire: &[u8]) -> RcBuf {
    pool.alloc_copy(wire).expect("pool allocation")
}

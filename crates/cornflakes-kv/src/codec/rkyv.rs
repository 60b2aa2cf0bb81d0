//! rkyv 0.8, the zero-copy deserialization format Rust users reach for,
//! speaking the logical schema of `proto/kv.proto` (rkyv has no schema
//! language: the messages are Rust structs).
//!
//! # Receive
//!
//! `rkyv::access` validates the archive (bytecheck: every relative pointer
//! and length checked against the buffer) and the request's keys and values
//! are read in place, as slices of the received buffer: no copy. An archive
//! must be aligned for its root type; a payload that is not (a datapath may
//! deliver a message at any offset) is first copied into an aligned
//! scratch buffer. Keys are checked to be UTF-8 (the schema's `string`).
//!
//! # Send
//!
//! The response borrows the values (`&[u8]` fields archived with
//! `InlineAsBox`), so the archive is written with one copy of each value,
//! straight into its send buffer: rkyv has no scatter-gather output, and no
//! way to know the archive's length before writing it, so the buffer is
//! sized for an upper bound (values plus a fixed overhead per value):
//!
//! - bound of at least [`ZERO_COPY_MIN`] bytes: a pinned pool buffer from
//!   [`Datapath::alloc`], sent zero-copy as [`Segment::ZeroCopy`];
//! - shorter: a reused heap buffer, copied by the datapath.
//!
//! The list of values is a `Vec<&[u8]>` built per message (rkyv archives a
//! borrowed list through `Map<InlineAsBox>` over a `Vec`): one allocation
//! per message that prost's reused message avoids.

use ::cornflakes::{Pool, RcBuf};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};
use rkyv::api::high::HighSerializer;
use rkyv::rancor::Error;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::ser::writer::Buffer;
use rkyv::util::AlignedVec;
use rkyv::with::{InlineAsBox, Map};
use rkyv::{Archive, Serialize};

use super::{push, ClientCodec, HandleError, Malformed, Request, ResponseVals, ServerCodec};
use crate::phase;
use crate::protocol::Status;
use crate::store::Store;

pub use super::ZERO_COPY_MIN;

/// A request: `KvRequest` of `proto/kv.proto`.
#[derive(Archive, Serialize)]
pub struct KvRequest<'a> {
    /// [`Op`](crate::Op) as a number.
    pub op: u32,
    /// Keys (UTF-8).
    #[rkyv(with = Map<InlineAsBox>)]
    pub keys: Vec<&'a [u8]>,
    /// Values (puts, echo).
    #[rkyv(with = Map<InlineAsBox>)]
    pub vals: Vec<&'a [u8]>,
    /// Element index (get-from-list).
    pub index: u32,
}

/// A response: `KvResponse` of `proto/kv.proto`.
#[derive(Archive, Serialize)]
pub struct KvResponse<'a> {
    /// [`Status`] as a number.
    pub status: u32,
    /// Values.
    #[rkyv(with = Map<InlineAsBox>)]
    pub vals: Vec<&'a [u8]>,
}

/// Alignment an archive is read at (rkyv's largest for these types; 16
/// leaves room).
const ALIGN: usize = 16;

/// Bytes of archive beyond the values, at most: the root, one 8-byte box
/// per entry, and alignment padding per entry and section.
fn bound(entries: &[&[u8]]) -> usize {
    64 + entries.iter().map(|e| e.len() + 16).sum::<usize>()
}

/// `payload` if it is aligned for an archive, else a copy in `scratch`.
fn aligned<'p>(payload: &'p [u8], scratch: &'p mut AlignedVec<ALIGN>) -> &'p [u8] {
    if (payload.as_ptr() as usize).is_multiple_of(ALIGN) {
        payload
    } else {
        scratch.clear();
        scratch.extend_from_slice(payload);
        scratch
    }
}

/// Archives `msg` (whose entries total `bound` bytes at most) and pushes
/// it once: into a fresh pinned buffer sent zero-copy when the bound is at
/// least [`ZERO_COPY_MIN`] (and the pool has one), else into `heap`.
fn push_archived<D: Datapath, T>(
    dp: &mut D,
    heap: &mut Vec<u8>,
    conn: ConnId,
    msg_id: u32,
    msg: &T,
    bound: usize,
    retry: bool,
) -> Result<(), SendError>
where
    T: for<'b, 'x> Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'x>, Error>>,
{
    let pinned = if bound >= ZERO_COPY_MIN { dp.alloc(bound).ok() } else { None };
    match pinned {
        Some(mut buf) => {
            let len = archive(msg, &mut buf[..]);
            let segments = [Segment::ZeroCopy(buf.freeze().slice(..len))];
            push(dp, retry, |dp| dp.push_segments(conn, msg_id, &segments))
        }
        None => {
            heap.resize(bound, 0);
            let len = archive(msg, &mut heap[..]);
            let segments = [Segment::Copy(&heap[..len])];
            push(dp, retry, |dp| dp.push_segments(conn, msg_id, &segments))
        }
    }
}

/// Archives `msg` into the front of `out`; its length.
fn archive<'b, T>(msg: &T, out: &'b mut [u8]) -> usize
where
    T: for<'x> Serialize<HighSerializer<Buffer<'b>, ArenaHandle<'x>, Error>>,
{
    rkyv::api::high::to_bytes_in::<_, Error>(msg, Buffer::from(out)).expect("the archive fits its computed bound").len()
}

/// Sends `status` and `vals` in reply to `rx`; a response the datapath
/// cannot carry is replaced by [`Status::TooLarge`].
fn respond<D: Datapath>(
    dp: &mut D,
    heap: &mut Vec<u8>,
    rx: &Received,
    status: Status,
    vals: &[&[u8]],
) -> Result<(), SendError> {
    let msg = phase::set_value(|| KvResponse { status: status as u32, vals: vals.to_vec() });
    match phase::serialize_send(|| push_archived(dp, heap, rx.conn, rx.msg_id, &msg, bound(vals), true)) {
        Err(SendError::TooLarge { .. }) => {
            let msg = KvResponse { status: Status::TooLarge as u32, vals: Vec::new() };
            push_archived(dp, heap, rx.conn, rx.msg_id, &msg, bound(&[]), true)
        }
        other => other,
    }
}

/// The rkyv server codec.
pub struct RkyvServer {
    heap: Vec<u8>,
    scratch: AlignedVec<ALIGN>,
}

impl RkyvServer {
    /// A server codec (the pool is the datapath's, reached through it).
    pub fn new(_pool: &Pool) -> Self {
        RkyvServer { heap: Vec::new(), scratch: AlignedVec::new() }
    }
}

impl ServerCodec for RkyvServer {
    fn handle<D: Datapath>(&mut self, dp: &mut D, store: &mut Store, rx: &Received) -> Result<(), HandleError> {
        let Self { heap, scratch } = self;
        let req = phase::deserialize(|| {
            let bytes = aligned(&rx.payload, scratch);
            let msg = rkyv::access::<ArchivedKvRequest, Error>(bytes).map_err(|_| HandleError::Malformed)?;
            if !msg.keys.iter().all(|k| std::str::from_utf8(k).is_ok()) {
                return Err(HandleError::Malformed);
            }
            Ok(Request {
                op: msg.op.to_native(),
                keys: msg.keys.iter().map(|k| &k[..]).collect(),
                vals: msg.vals.iter().map(|v| &v[..]).collect(),
                index: msg.index.to_native(),
            })
        })?;
        let mut vals = ResponseVals::new();
        let status = phase::store(|| store.execute(&req, &mut vals));
        Ok(respond(dp, heap, rx, status, &vals)?)
    }
}

/// The rkyv client codec.
pub struct RkyvClient {
    heap: Vec<u8>,
    scratch: AlignedVec<ALIGN>,
}

impl RkyvClient {
    /// A client codec (the pool is the datapath's, reached through it).
    pub fn new(_pool: &Pool) -> Self {
        RkyvClient { heap: Vec::new(), scratch: AlignedVec::new() }
    }
}

impl ClientCodec for RkyvClient {
    fn send_request<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        msg_id: u32,
        req: &Request<'_>,
    ) -> Result<(), SendError> {
        let msg = KvRequest { op: req.op, keys: req.keys.to_vec(), vals: req.vals.to_vec(), index: req.index };
        let bound = bound(&req.keys[..]) + bound(&req.vals[..]);
        push_archived(dp, &mut self.heap, conn, msg_id, &msg, bound, false)
    }

    fn read_response(&mut self, payload: &RcBuf, check: &mut dyn FnMut(Status, &[&[u8]])) -> Result<(), Malformed> {
        let bytes = aligned(payload, &mut self.scratch);
        let msg = rkyv::access::<ArchivedKvResponse, Error>(bytes).map_err(|_| Malformed)?;
        let status = Status::from_u32(msg.status.to_native()).ok_or(Malformed)?;
        let vals: ResponseVals<'_> = msg.vals.iter().map(|v| &v[..]).collect();
        check(status, &vals);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_for_any_number_and_size_of_values() {
        for n in [0usize, 1, 2, 7, 64] {
            for len in [0usize, 1, 3, 8, 511, 4096] {
                let data = vec![0xA5u8; len];
                let vals: Vec<&[u8]> = (0..n).map(|_| &data[..]).collect();
                let msg = KvResponse { status: 1, vals: vals.clone() };
                let mut out = vec![0u8; bound(&vals)];
                let written = archive(&msg, &mut out[..]);
                assert!(written <= out.len());
                let req = KvRequest { op: 2, keys: vals.clone(), vals: vals.clone(), index: 3 };
                let mut out = vec![0u8; bound(&vals) * 2];
                archive(&req, &mut out[..]);
            }
        }
    }
}

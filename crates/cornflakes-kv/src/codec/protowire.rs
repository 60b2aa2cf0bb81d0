//! Cornflakes' hybrid rule on the protobuf wire format
//! (`cornflakes-protobuf`): the messages of `proto/kv.proto` generated with
//! `cornflakes_build::Wire::Protobuf`, so requests and responses are
//! standard proto3 (what prost writes; any protobuf peer can read them).
//!
//! - **Receive**: `deserialize_proto` of the received buffer; keys and
//!   values are views of it (values of at least 512 bytes as counted
//!   references), strings unchecked until read as text.
//! - **Send**: values referencing stored pool buffers of at least the
//!   threshold are zero-copy. `proto_layout` sizes the message in one pass,
//!   `write_proto` writes keys, lengths and copied fields into a reused
//!   buffer and reports each zero-copy payload with the offset it follows;
//!   the datapath gets copied runs and payloads in wire order as a segment
//!   list. Unlike Cornflakes' own format, the datapath has no object
//!   interface for this wire format yet (`push_message` takes a Cornflakes
//!   `Message`), so the copied bytes are copied once more, by the datapath,
//!   from the reused buffer into the packet: keys, lengths and short values
//!   only, never a large value.

use ::cornflakes::protowire::ProtoMessage;
use ::cornflakes::{Arena, CfBytes, CfString, Pool, RcBuf};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};

use super::{push, ClientCodec, HandleError, Malformed, Request, ResponseVals, ServerCodec};
use crate::kv_pw::{KvRequest, KvResponse};
use crate::phase;
use crate::protocol::{Op, Status};
use crate::store::Store;

/// Buffers reused across messages by [`send`].
#[derive(Default)]
struct Scratch {
    copied: Vec<u8>,
    zero_copy: Vec<(usize, RcBuf)>,
}

/// Encodes `msg` and pushes it as copied runs and zero-copy payloads, in
/// wire order; retried on back-pressure when `retry` (a server).
fn send<'a, D: Datapath, M: ProtoMessage<'a>>(
    dp: &mut D,
    scratch: &mut Scratch,
    conn: ConnId,
    msg_id: u32,
    msg: &M,
    retry: bool,
) -> Result<(), SendError> {
    let layout = msg.proto_layout();
    let Scratch { copied, zero_copy } = scratch;
    copied.clear();
    copied.resize(layout.copy_len, 0);
    zero_copy.clear();
    msg.write_proto(&layout, copied, |at, buf| zero_copy.push((at, buf.clone())))?;
    let mut segments = Vec::with_capacity(2 * zero_copy.len() + 1);
    let mut from = 0;
    for (at, buf) in zero_copy.drain(..) {
        segments.push(Segment::Copy(&copied[from..at]));
        segments.push(Segment::ZeroCopy(buf));
        from = at;
    }
    segments.push(Segment::Copy(&copied[from..]));
    match push(dp, retry, |dp| dp.push_segments(conn, msg_id, &segments)) {
        // Each zero-copy payload needs its own copied run (key and length)
        // before it: 2n + 1 segments, more than a datapath takes for many
        // values (twitter's get-many). Then the message is gathered into
        // one pinned buffer and sent as one segment, as prost's is.
        Err(SendError::TooManySegments { .. }) => {
            let mut whole = dp.alloc(layout.total_len())?;
            let out = whole.as_mut_slice();
            let mut at = 0;
            for segment in &segments {
                let bytes: &[u8] = match segment {
                    Segment::Copy(b) => b,
                    Segment::ZeroCopy(b) => b,
                };
                out[at..at + bytes.len()].copy_from_slice(bytes);
                at += bytes.len();
            }
            debug_assert_eq!(at, layout.total_len());
            let whole = whole.freeze();
            push(dp, retry, |dp| dp.push_segments(conn, msg_id, &[Segment::ZeroCopy(whole.clone())]))
        }
        other => other,
    }
}

/// The `cornflakes-protobuf` server codec.
pub struct ProtowireServer {
    arena: Arena,
    scratch: Scratch,
}

impl ProtowireServer {
    /// Values in `pool` of at least `threshold` bytes are sent zero-copy.
    pub fn new(pool: &Pool, threshold: usize) -> Self {
        ProtowireServer { arena: Arena::with_threshold(Some(pool), threshold), scratch: Scratch::default() }
    }

    /// Sends `resp`, or a bare `TooLarge` status when it cannot be sent.
    fn respond<D: Datapath>(
        arena: &Arena,
        scratch: &mut Scratch,
        dp: &mut D,
        rx: &Received,
        resp: &KvResponse<'_>,
    ) -> Result<(), HandleError> {
        match send(dp, scratch, rx.conn, rx.msg_id, resp, true) {
            Err(SendError::TooLarge { .. }) => {
                let mut err = KvResponse::new_in(arena);
                err.set_status(Status::TooLarge as u32);
                send(dp, scratch, rx.conn, rx.msg_id, &err, true)?;
                Ok(())
            }
            other => Ok(other?),
        }
    }
}

impl ServerCodec for ProtowireServer {
    fn handle<D: Datapath>(&mut self, dp: &mut D, store: &mut Store, rx: &Received) -> Result<(), HandleError> {
        let arena = &self.arena;
        let mut msg = phase::deserialize(|| KvRequest::deserialize_proto(&rx.payload, arena))
            .map_err(|_| HandleError::Malformed)?;
        if msg.get_op() == Op::Echo as u32 {
            // Its steps are marked as the other requests' are (`cf phases`).
            let resp = phase::set_value(|| {
                let mut resp = KvResponse::new_in(arena);
                // Echo: move the decoded values (views of the request) into the
                // response, as the Cornflakes codec does; the limits still apply.
                let value_bytes = msg.get_vals().iter().map(|v| v.len()).sum();
                let checked = store.limits().check_echo(msg.get_keys().len(), value_bytes);
                match checked {
                    Ok(()) => {
                        resp.set_status(Status::Ok as u32);
                        if !msg.get_vals().is_empty() {
                            std::mem::swap(resp.get_mut_vals(), msg.get_mut_vals());
                        }
                    }
                    Err(status) => resp.set_status(status as u32),
                }
                resp
            });
            let scratch = &mut self.scratch;
            return phase::serialize_send(|| Self::respond(arena, scratch, dp, rx, &resp));
        }
        let req = phase::deserialize(|| Request {
            op: msg.get_op(),
            keys: msg.get_keys().iter().map(|k| k.as_bytes()).collect(),
            vals: msg.get_vals().iter().map(|v| v.as_bytes()).collect(),
            index: msg.get_index(),
        });
        let mut vals = ResponseVals::new();
        let status = phase::store(|| store.execute(&req, &mut vals));
        let resp = phase::set_value(|| {
            let mut resp = KvResponse::new_in(arena);
            resp.set_status(status as u32);
            if !vals.is_empty() {
                resp.init_vals(vals.len());
                for v in vals {
                    resp.append_vals(v);
                }
            }
            resp
        });
        let scratch = &mut self.scratch;
        phase::serialize_send(|| Self::respond(arena, scratch, dp, rx, &resp))
    }

    fn end_batch(&mut self) {
        self.arena.reset();
    }
}

/// The `cornflakes-protobuf` client codec.
pub struct ProtowireClient {
    arena: Arena,
    scratch: Scratch,
}

impl ProtowireClient {
    /// A client whose values in `pool` of at least the default threshold
    /// are sent zero-copy.
    pub fn new(pool: &Pool) -> Self {
        ProtowireClient { arena: Arena::new(pool), scratch: Scratch::default() }
    }
}

impl ClientCodec for ProtowireClient {
    fn send_request<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        msg_id: u32,
        req: &Request<'_>,
    ) -> Result<(), SendError> {
        let arena = &self.arena;
        let mut msg = KvRequest::new_in(arena);
        msg.set_op(req.op);
        if !req.keys.is_empty() {
            let keys = msg.init_keys(req.keys.len());
            for &k in &req.keys {
                keys.append(CfString::from_unchecked_bytes(CfBytes::new(k, arena)));
            }
        }
        if !req.vals.is_empty() {
            msg.init_vals(req.vals.len());
            for &v in &req.vals {
                msg.append_vals(v);
            }
        }
        if req.index != 0 {
            msg.set_index(req.index);
        }
        send(dp, &mut self.scratch, conn, msg_id, &msg, false)
    }

    fn read_response(&mut self, payload: &RcBuf, check: &mut dyn FnMut(Status, &[&[u8]])) -> Result<(), Malformed> {
        let msg = KvResponse::deserialize_proto(payload, &self.arena).map_err(|_| Malformed)?;
        let status = Status::from_u32(msg.get_status()).ok_or(Malformed)?;
        let vals: ResponseVals<'_> = msg.get_vals().iter().map(|v| v.as_bytes()).collect();
        check(status, &vals);
        Ok(())
    }

    fn end_batch(&mut self) {
        self.arena.reset();
    }
}

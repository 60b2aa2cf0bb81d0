//! Cornflakes: requests decode zero-copy (keys and values are views of the
//! received buffer); responses reference stored values, each one copied or
//! sent zero-copy by the arena's threshold, and go out with
//! serialize-and-send, or, for the ablation, as an explicit segment list
//! written through an intermediate buffer.
//!
//! [`RawEchoServer`] is the "no serialization" limit of the echo
//! experiment: it returns the received bytes untouched; its client,
//! [`RawEchoClient`], reads the echoed request.

use ::cornflakes::{Arena, CfBytes, CfString, Message, Pool, RcBuf};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};

use super::{retry_full, ClientCodec, HandleError, Malformed, Request, ResponseVals, ServerCodec};
use crate::kv_proto::{KvRequest, KvResponse};
use crate::phase;
use crate::protocol::{Op, Status};
use crate::store::Store;

/// The Cornflakes server codec.
pub struct CornflakesServer {
    arena: Arena,
    serialize_and_send: bool,
}

impl CornflakesServer {
    /// Fields of at least `threshold` bytes are sent zero-copy (0: all;
    /// `usize::MAX`: none). Without `serialize_and_send`, responses are
    /// written into a buffer and sent as a segment list.
    pub fn new(pool: &Pool, threshold: usize, serialize_and_send: bool) -> Self {
        CornflakesServer { arena: Arena::with_threshold(Some(pool), threshold), serialize_and_send }
    }
}

/// Decodes a Cornflakes request into views of its buffer.
fn decode_request<'r>(msg: &'r KvRequest<'r>) -> Request<'r> {
    Request {
        op: msg.get_op(),
        keys: msg.get_keys().iter().map(|k| k.as_bytes()).collect(),
        vals: msg.get_vals().iter().map(|v| v.as_bytes()).collect(),
        index: msg.get_index(),
    }
}

impl CornflakesServer {
    /// Sends `resp`, or a bare `TooLarge` status when it cannot be sent.
    fn respond<D: Datapath>(&self, dp: &mut D, rx: &Received, resp: &KvResponse<'_>) -> Result<(), HandleError> {
        let sent = if self.serialize_and_send {
            retry_full(dp, |dp| dp.push_message(rx.conn, rx.msg_id, resp))
        } else {
            send_segments(dp, rx.conn, rx.msg_id, resp)
        };
        match sent {
            Err(SendError::TooLarge { .. }) => {
                let mut err = KvResponse::new_in(&self.arena);
                err.set_status(Status::TooLarge as u32);
                retry_full(dp, |dp| dp.push_message(rx.conn, rx.msg_id, &err))?;
                Ok(())
            }
            other => Ok(other?),
        }
    }
}

impl ServerCodec for CornflakesServer {
    fn handle<D: Datapath>(&mut self, dp: &mut D, store: &mut Store, rx: &Received) -> Result<(), HandleError> {
        let arena = &self.arena;
        let mut msg =
            phase::deserialize(|| KvRequest::deserialize(&rx.payload, arena)).map_err(|_| HandleError::Malformed)?;
        if msg.get_op() == Op::Echo as u32 {
            // Echo: the decoded values already are zero-copy references to
            // the received buffer (or borrowed short values); move the list
            // into the response instead of going through `&[u8]` views, the
            // store and a pool `recover` per value. The store's limits
            // still apply.
            let mut resp = KvResponse::new_in(arena);
            let limits = store.limits();
            let checked = limits
                .check_keys(msg.get_keys().len())
                .and_then(|()| limits.check_response(msg.get_vals().iter().map(|v| v.len()).sum()));
            match checked {
                Ok(()) => {
                    resp.set_status(Status::Ok as u32);
                    if !msg.get_vals().is_empty() {
                        std::mem::swap(resp.get_mut_vals(), msg.get_mut_vals());
                    }
                }
                Err(status) => resp.set_status(status as u32),
            }
            return self.respond(dp, rx, &resp);
        }
        let req = phase::deserialize(|| decode_request(&msg));
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
        phase::serialize_send(|| self.respond(dp, rx, &resp))
    }

    fn end_batch(&mut self) {
        self.arena.reset();
    }

    fn set_threshold(&mut self, threshold: usize) {
        self.arena.set_threshold(threshold);
    }
}

/// Without serialize-and-send: header and copied data go into a separate
/// pinned buffer first, the zero-copy entries into a segment vector, and
/// the datapath gets the list (what a stack without an object interface
/// has to do).
pub fn send_segments<'a, D: Datapath, M: Message<'a>>(
    dp: &mut D,
    conn: ConnId,
    msg_id: u32,
    msg: &M,
) -> Result<(), SendError> {
    let layout = msg.layout();
    let mut first = dp.alloc(layout.first_segment_len())?;
    msg.write_header_and_copies(&layout, &mut first)?;
    let mut segments = Vec::with_capacity(1 + layout.zero_copy_entries);
    let first = first.freeze();
    segments.push(Segment::Copy(&first));
    msg.for_each_zero_copy(|b| segments.push(Segment::ZeroCopy(b.clone())));
    retry_full(dp, |dp| dp.push_segments(conn, msg_id, &segments))
}

/// The Cornflakes client codec (hybrid, serialize-and-send).
pub struct CornflakesClient {
    arena: Arena,
}

impl CornflakesClient {
    /// A client whose values in `pool` of at least the default threshold
    /// are sent zero-copy.
    pub fn new(pool: &Pool) -> Self {
        CornflakesClient { arena: Arena::new(pool) }
    }
}

/// Builds a Cornflakes request from `req`.
fn encode_request<'a, 'r: 'a>(arena: &'a Arena, req: &Request<'r>) -> KvRequest<'a> {
    let mut msg = KvRequest::new_in(arena);
    msg.set_op(req.op);
    if !req.keys.is_empty() {
        let keys = msg.init_keys(req.keys.len());
        for &k in &req.keys {
            // Keys go out as bytes; the server compares bytes and never
            // asks for `&str`, and UTF-8 is checked lazily on read.
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
    msg
}

impl ClientCodec for CornflakesClient {
    fn send_request<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        msg_id: u32,
        req: &Request<'_>,
    ) -> Result<(), SendError> {
        let msg = encode_request(&self.arena, req);
        dp.push_message(conn, msg_id, &msg)
    }

    fn read_response(&mut self, payload: &RcBuf, check: &mut dyn FnMut(Status, &[&[u8]])) -> Result<(), Malformed> {
        let msg = KvResponse::deserialize(payload, &self.arena).map_err(|_| Malformed)?;
        let status = Status::from_u32(msg.get_status()).ok_or(Malformed)?;
        let vals: ResponseVals<'_> = msg.get_vals().iter().map(|v| v.as_bytes()).collect();
        check(status, &vals);
        Ok(())
    }

    fn end_batch(&mut self) {
        self.arena.reset();
    }
}

/// The raw echo server: sends the received buffer back as it is, without
/// deserializing (the paper's "no serialization" bound).
pub struct RawEchoServer;

impl ServerCodec for RawEchoServer {
    fn handle<D: Datapath>(&mut self, dp: &mut D, _store: &mut Store, rx: &Received) -> Result<(), HandleError> {
        retry_full(dp, |dp| dp.push_segments(rx.conn, rx.msg_id, &[Segment::ZeroCopy(rx.payload.clone())]))?;
        Ok(())
    }
}

/// The client of [`RawEchoServer`]: sends Cornflakes requests and reads
/// the echoed request as the response (status `Ok`, its values).
pub struct RawEchoClient {
    inner: CornflakesClient,
}

impl RawEchoClient {
    /// A raw-echo client over `pool`.
    pub fn new(pool: &Pool) -> Self {
        RawEchoClient { inner: CornflakesClient::new(pool) }
    }
}

impl ClientCodec for RawEchoClient {
    fn send_request<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        msg_id: u32,
        req: &Request<'_>,
    ) -> Result<(), SendError> {
        self.inner.send_request(dp, conn, msg_id, req)
    }

    fn read_response(&mut self, payload: &RcBuf, check: &mut dyn FnMut(Status, &[&[u8]])) -> Result<(), Malformed> {
        let msg = KvRequest::deserialize(payload, &self.inner.arena).map_err(|_| Malformed)?;
        let vals: ResponseVals<'_> = msg.get_vals().iter().map(|v| v.as_bytes()).collect();
        check(Status::Ok, &vals);
        Ok(())
    }

    fn end_batch(&mut self) {
        self.inner.end_batch();
    }
}

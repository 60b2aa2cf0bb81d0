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
use cornflakes_datapath::{ConnId, Datapath, InPlace, Received, Segment, SendError, Span};

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
            // Its steps are marked as the other requests' are (`cf phases`).
            let resp = phase::set_value(|| {
                let mut resp = KvResponse::new_in(arena);
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
            return phase::serialize_send(|| self.respond(dp, rx, &resp));
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

    /// An echo received in place is answered from where its values lie:
    /// the values the client left in its pool go back to it by reference
    /// ([`Datapath::push_spans`]: on shm to a client that accepts returns,
    /// neither side copies them), the short ones it copied are copied back.
    /// Everything else is gathered and handled as usual.
    fn handle_in_place<D: Datapath>(
        &mut self,
        dp: &mut D,
        store: &mut Store,
        msg: &InPlace,
    ) -> Result<(), HandleError> {
        if msg.as_local().is_none() {
            if let Some(echo) = phase::deserialize(|| echo_in_place(msg)) {
                let value_bytes = echo.vals.iter().map(Span::len).sum();
                if store.limits().check_echo(echo.keys, value_bytes).is_ok() {
                    return phase::serialize_send(|| self.echo_by_spans(dp, msg, &echo.vals));
                }
            }
        }
        let rx = super::gather_in_place(dp, msg)?;
        self.handle(dp, store, &rx)
    }

    fn end_batch(&mut self) {
        self.arena.reset();
    }

    fn set_threshold(&mut self, threshold: usize) {
        self.arena.set_threshold(threshold);
    }

    fn set_serialize_and_send(&mut self, on: bool) {
        self.serialize_and_send = on;
    }
}

impl CornflakesServer {
    /// Sends the `KvResponse` {status Ok, vals} whose values are `vals`,
    /// as spans: its header (written here, docs/wire-format.md: the values'
    /// data follow the header in order, which any decoder reads, since
    /// decoders follow offsets), then each value where it lies.
    fn echo_by_spans<D: Datapath>(&self, dp: &mut D, msg: &InPlace, vals: &[Span<'_>]) -> Result<(), HandleError> {
        // W = 1; bitmap: vals (ordinal 1; status Ok = 0 is not encoded);
        // the list entry (count, table offset); the table. (An empty
        // bitmap when there are no values.)
        let mut buf = [0u8; 16 + 8 * MAX_ECHO_SPANS];
        let mut len = 0;
        let mut put = |v: u32| {
            buf[len..len + 4].copy_from_slice(&v.to_le_bytes());
            len += 4;
        };
        if vals.len() > MAX_ECHO_SPANS {
            return Err(HandleError::Malformed);
        }
        if !vals.is_empty() {
            put(1);
            put(1 << 1);
            put(vals.len() as u32);
            put(16);
            let mut at = 16 + 8 * vals.len();
            for v in vals {
                put(u32::try_from(at).map_err(|_| HandleError::Malformed)?);
                put(v.len() as u32);
                at += v.len();
            }
        } else {
            put(1);
            put(0);
        }
        let header = &buf[..len];
        let mut spans = smallvec::SmallVec::<[Span<'_>; 8]>::with_capacity(1 + vals.len());
        spans.push(Span::Local(header));
        spans.extend(vals.iter().cloned());
        match retry_full(dp, |dp| dp.push_spans(msg.conn, msg.msg_id, &spans)) {
            // As `respond`: a reply too large is a bare status.
            Err(SendError::TooLarge { .. }) => {
                let mut err = KvResponse::new_in(&self.arena);
                err.set_status(Status::TooLarge as u32);
                retry_full(dp, |dp| dp.push_message(msg.conn, msg.msg_id, &err))?;
                Ok(())
            }
            other => Ok(other?),
        }
    }
}

/// An echo request read in place: how many keys it has, and its values.
struct EchoInPlace<'m> {
    keys: usize,
    vals: smallvec::SmallVec<[Span<'m>; 8]>,
}

/// Most values an echo answered by spans may have (each may take a
/// descriptor of the reply record); more are gathered and answered as
/// usual.
const MAX_ECHO_SPANS: usize = 32;

/// Reads a `KvRequest` whose header is in our memory
/// ([`InPlace::local_prefix`]) and whose values may be in the client's
/// pool: `None` when it is not an echo this reader answers (too many
/// values, a layout it does not follow, anything out of bounds), which is
/// then gathered and left to the generated decoder to accept or refuse.
fn echo_in_place(msg: &InPlace) -> Option<EchoInPlace<'_>> {
    // Ordinals: op 0 (4-byte entry), keys 1 and vals 2 (count, table
    // offset), index 3 (4 bytes).
    let head = msg.local_prefix();
    let u32_at = |at: usize| -> Result<u32, Malformed> {
        let b = head.get(at..at.checked_add(4).ok_or(Malformed)?).ok_or(Malformed)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let parse = || -> Result<Option<EchoInPlace<'_>>, Malformed> {
        let words = u32_at(0)? as usize;
        if words == 0 {
            return Ok(None);
        }
        if words > head.len() / 4 {
            return Err(Malformed);
        }
        let bitmap = u32_at(4)?;
        // Fields past `index` are not in this schema: not an echo we read.
        if bitmap & !0xF != 0 || (2..=words).any(|w| u32_at(4 * w).is_ok_and(|b| b != 0)) {
            return Ok(None);
        }
        let mut at = words.checked_mul(4).and_then(|b| b.checked_add(4)).ok_or(Malformed)?;
        if bitmap & 1 == 0 || u32_at(at)? != Op::Echo as u32 {
            return Ok(None);
        }
        at += 4;
        let mut keys = 0;
        if bitmap & 2 != 0 {
            keys = u32_at(at)? as usize;
            at += 8;
        }
        let mut vals = smallvec::SmallVec::new();
        if bitmap & 4 != 0 {
            let count = u32_at(at)? as usize;
            let table = u32_at(at + 4)? as usize;
            if count > MAX_ECHO_SPANS {
                return Ok(None);
            }
            if count.checked_mul(8).and_then(|n| n.checked_add(table)).is_none_or(|end| end > head.len()) {
                return Err(Malformed);
            }
            for i in 0..count {
                let entry = table + 8 * i;
                let (offset, len) = (u32_at(entry)? as usize, u32_at(entry + 4)? as usize);
                vals.push(msg.span(offset, len).ok_or(Malformed)?);
            }
        }
        Ok(Some(EchoInPlace { keys, vals }))
    };
    parse().ok().flatten()
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
        // The values are read and dropped, never kept or sent on: decoded
        // as views of the payload, without a reference count per value.
        let msg = KvResponse::deserialize_from_slice(payload, &self.arena).map_err(|_| Malformed)?;
        let status = Status::from_u32(msg.get_status()).ok_or(Malformed)?;
        let vals: ResponseVals<'_> = msg.get_vals().iter().map(|v| v.as_bytes()).collect();
        check(status, &vals);
        Ok(())
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn read_response_in_place(
        &mut self,
        msg: &InPlace,
        check: &mut dyn FnMut(Status, &[Span<'_>]),
    ) -> Result<(), Malformed> {
        let (status, vals) = response_in_place(msg)?;
        check(status, &vals);
        Ok(())
    }

    fn end_batch(&mut self) {
        self.arena.reset();
    }
}

/// Reads a `KvResponse` (docs/wire-format.md) whose header and copied data
/// are in our memory and whose zero-copy values may be left in the
/// server's pool: the header is parsed from [`InPlace::local_prefix`], every
/// value entry is resolved with [`InPlace::span`]. Bounds-checked like the
/// generated decoder; a value that is not one run of the message is
/// malformed.
fn response_in_place(msg: &InPlace) -> Result<(Status, smallvec::SmallVec<[Span<'_>; 8]>), Malformed> {
    // Ordinals: status 0 (4-byte entry), vals 1 (count, table offset).
    let head = msg.local_prefix();
    let u32_at = |at: usize| -> Result<u32, Malformed> {
        let b = head.get(at..at.checked_add(4).ok_or(Malformed)?).ok_or(Malformed)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let words = u32_at(0)? as usize;
    if words == 0 {
        return Ok((Status::from_u32(0).ok_or(Malformed)?, smallvec::SmallVec::new()));
    }
    let bitmap = u32_at(4)?;
    let mut at = words.checked_mul(4).and_then(|b| b.checked_add(4)).ok_or(Malformed)?;
    let mut status = 0;
    if bitmap & 1 != 0 {
        status = u32_at(at)?;
        at += 4;
    }
    let mut vals = smallvec::SmallVec::new();
    if bitmap & 2 != 0 {
        let count = u32_at(at)? as usize;
        let table = u32_at(at + 4)? as usize;
        // The table is in our memory: a count it cannot hold is malformed
        // before anything is allocated for it.
        if count.checked_mul(8).and_then(|n| n.checked_add(table)).is_none_or(|end| end > head.len()) {
            return Err(Malformed);
        }
        vals.reserve(count);
        for i in 0..count {
            let entry = table + 8 * i;
            let (offset, len) = (u32_at(entry)? as usize, u32_at(entry + 4)? as usize);
            vals.push(msg.span(offset, len).ok_or(Malformed)?);
        }
    }
    Ok((Status::from_u32(status).ok_or(Malformed)?, vals))
}

/// The raw echo server: sends the received buffer back as it is, without
/// deserializing (the paper's "no serialization" bound).
pub struct RawEchoServer;

impl ServerCodec for RawEchoServer {
    fn handle<D: Datapath>(&mut self, dp: &mut D, _store: &mut Store, rx: &Received) -> Result<(), HandleError> {
        retry_full(dp, |dp| dp.push_segments(rx.conn, rx.msg_id, &[Segment::ZeroCopy(rx.payload.clone())]))?;
        Ok(())
    }

    /// The received message sent back as it lies: received in place, its
    /// runs left in the client's pool go back by reference (to a client
    /// that accepts returns), as Cornflakes' echo does; the limit of that
    /// mode too.
    fn handle_in_place<D: Datapath>(
        &mut self,
        dp: &mut D,
        store: &mut Store,
        msg: &InPlace,
    ) -> Result<(), HandleError> {
        if let Some(local) = msg.as_local() {
            // Whole in our (shared) pool: sent by descriptor as it is.
            return self.handle(dp, store, &Received { conn: msg.conn, msg_id: msg.msg_id, payload: local.clone() });
        }
        let spans: smallvec::SmallVec<[Span<'_>; 8]> = msg.spans().collect();
        retry_full(dp, |dp| dp.push_spans(msg.conn, msg.msg_id, &spans))?;
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
        // Views of the payload, as in `CornflakesClient::read_response`.
        let msg = KvRequest::deserialize_from_slice(payload, &self.inner.arena).map_err(|_| Malformed)?;
        let vals: ResponseVals<'_> = msg.get_vals().iter().map(|v| v.as_bytes()).collect();
        check(Status::Ok, &vals);
        Ok(())
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    /// The echoed request read where its values lie (returned to us by
    /// reference, or left in the server's pool), as the Cornflakes client
    /// reads its responses; one the in-place reader does not follow is
    /// copied and decoded whole.
    fn read_response_in_place(
        &mut self,
        msg: &InPlace,
        check: &mut dyn FnMut(Status, &[Span<'_>]),
    ) -> Result<(), Malformed> {
        if let Some(echo) = echo_in_place(msg) {
            check(Status::Ok, &echo.vals);
            return Ok(());
        }
        let whole = msg.to_vec().map_err(|_| Malformed)?;
        let req = KvRequest::deserialize_from_slice(&whole, &self.inner.arena).map_err(|_| Malformed)?;
        let vals: smallvec::SmallVec<[Span<'_>; 8]> =
            req.get_vals().iter().map(|v| Span::Local(v.as_bytes())).collect();
        check(Status::Ok, &vals);
        Ok(())
    }

    fn end_batch(&mut self) {
        self.inner.end_batch();
    }
}

// Over the shared-memory datapath (memfds, mmap): not under Miri, which
// scripts/miri.sh runs on this crate's other unit tests.
#[cfg(all(test, not(miri)))]
mod tests {
    use std::time::{Duration, Instant};

    use cornflakes_datapath::shm::{LeaseLimits, ShmConfig, ShmDatapath};

    use super::*;

    /// A server and a client datapath; the client receives in place.
    fn pair() -> (ShmDatapath, ShmDatapath, ConnId) {
        let client = ShmConfig { receive_in_place: Some(LeaseLimits::default()), ..ShmConfig::default() };
        let mut server = ShmDatapath::new(ShmConfig::default()).unwrap();
        let mut client = ShmDatapath::new(client).unwrap();
        let (conn, _) = ShmDatapath::link(&mut server, &mut client).unwrap();
        (server, client, conn)
    }

    fn recv_one(dp: &mut ShmDatapath) -> InPlace {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.is_empty() {
            assert!(Instant::now() < deadline, "no message within 5 s");
            dp.recv_batch_in_place(&mut out, 1).unwrap();
        }
        out.pop().unwrap()
    }

    /// An echo received in place goes back by reference to a client that
    /// accepts returns: the client reads its own buffers, and the reply
    /// decodes the same way gathered (the generated decoder); a short
    /// value is copied both ways.
    #[test]
    fn an_echo_in_place_returns_the_clients_values_by_reference() {
        let trusted = ShmConfig { receive_in_place: Some(LeaseLimits::default()), ..ShmConfig::default() };
        let mut server = ShmDatapath::new(trusted.clone()).unwrap();
        let mut client = ShmDatapath::new(ShmConfig { accept_returns: true, ..trusted }).unwrap();
        let (_, conn) = ShmDatapath::link(&mut server, &mut client).unwrap();
        let vals: Vec<RcBuf> = [2048usize, 2048]
            .iter()
            .enumerate()
            .map(|(i, &n)| client.pool().alloc_copy(&vec![i as u8 + 1; n]).unwrap())
            .collect();
        let mut ccodec = CornflakesClient::new(client.pool());
        let req = Request {
            op: Op::Echo as u32,
            keys: smallvec::smallvec![],
            vals: smallvec::smallvec![&vals[0][..], &b"short"[..], &vals[1][..]],
            index: 0,
        };
        ccodec.send_request(&mut client, conn, 11, &req).unwrap();
        let got = recv_one(&mut server);
        assert_eq!(got.peer_segments(), 2);
        let mut store = Store::new(server.pool().clone(), crate::protocol::Limits::default());
        let mut scodec = CornflakesServer::new(server.pool(), 512, true);
        scodec.handle_in_place(&mut server, &mut store, &got).unwrap();
        drop(got);
        assert_eq!(server.shm_stats().returns_sent, 2);
        let reply = recv_one(&mut client);
        assert_eq!((reply.msg_id, reply.returned_segments()), (11, 2));
        let mut seen = Vec::new();
        ccodec
            .read_response_in_place(&reply, &mut |status, got| {
                assert_eq!(status, Status::Ok);
                for (v, want) in got.iter().zip([&vals[0][..], &b"short"[..], &vals[1][..]]) {
                    match v {
                        Span::Local(b) => seen.push((b.as_ptr() == want.as_ptr(), b.to_vec() == want)),
                        Span::Peer(_) => panic!("a value of ours left in the server's pool"),
                    }
                }
            })
            .unwrap();
        assert_eq!(seen, [(true, true), (false, true), (true, true)]);
        let whole = client.scratch_pool().alloc_copy(&reply.to_vec().unwrap()).unwrap();
        let mut gathered = Vec::new();
        ccodec.read_response(&whole, &mut |_, got| gathered = got.iter().map(|v| v.to_vec()).collect()).unwrap();
        assert_eq!(gathered, [vals[0].to_vec(), b"short".to_vec(), vals[1].to_vec()]);
    }

    /// Raw echo in place: the request goes back as it lies (its values by
    /// reference) and the raw client reads it in place.
    #[test]
    fn a_raw_echo_in_place_returns_the_values_and_is_read_in_place() {
        let trusted = ShmConfig { receive_in_place: Some(LeaseLimits::default()), ..ShmConfig::default() };
        let mut server = ShmDatapath::new(trusted.clone()).unwrap();
        let mut client = ShmDatapath::new(ShmConfig { accept_returns: true, ..trusted }).unwrap();
        let (_, conn) = ShmDatapath::link(&mut server, &mut client).unwrap();
        let value = client.pool().alloc_copy(&[7u8; 3000]).unwrap();
        let mut ccodec = RawEchoClient::new(client.pool());
        let req = Request {
            op: Op::Echo as u32,
            keys: smallvec::smallvec![],
            vals: smallvec::smallvec![&value[..], &b"tiny"[..]],
            index: 0,
        };
        ccodec.send_request(&mut client, conn, 3, &req).unwrap();
        let got = recv_one(&mut server);
        let mut store = Store::new(server.pool().clone(), crate::protocol::Limits::default());
        RawEchoServer.handle_in_place(&mut server, &mut store, &got).unwrap();
        drop(got);
        let reply = recv_one(&mut client);
        assert_eq!(reply.returned_segments(), 1);
        let mut seen = Vec::new();
        ccodec
            .read_response_in_place(&reply, &mut |status, vals| {
                assert_eq!(status, Status::Ok);
                seen = vals.iter().map(|v| v.to_vec().unwrap()).collect();
            })
            .unwrap();
        assert_eq!(seen, [vec![7u8; 3000], b"tiny".to_vec()]);
    }

    #[test]
    fn a_response_read_in_place_has_the_values_read_whole() {
        let (mut server, mut client, conn) = pair();
        let big: Vec<RcBuf> =
            [2000usize, 3000].iter().map(|&n| server.pool().alloc_copy(&vec![n as u8; n]).unwrap()).collect();
        let arena = Arena::new(server.pool());
        let mut resp = KvResponse::new_in(&arena);
        resp.set_status(Status::Ok as u32);
        resp.init_vals(3);
        resp.append_vals(&big[0][..]);
        resp.append_vals(b"tiny");
        resp.append_vals(&big[1][..]);
        server.push_message(conn, 5, &resp).unwrap();
        let msg = recv_one(&mut client);
        assert_eq!(msg.peer_segments(), 2, "the two large values stay in the server's pool");
        let mut codec = CornflakesClient::new(client.scratch_pool());
        let mut seen = None;
        codec
            .read_response_in_place(&msg, &mut |status, vals| {
                seen = Some((status, vals.iter().map(|v| v.to_vec().unwrap()).collect::<Vec<_>>()));
            })
            .unwrap();
        let expect = vec![vec![208u8; 2000], b"tiny".to_vec(), vec![184u8; 3000]];
        assert_eq!(seen, Some((Status::Ok, expect.clone())));
        // The same bytes gathered decode to the same values.
        let whole = client.scratch_pool().alloc_copy(&msg.to_vec().unwrap()).unwrap();
        let mut gathered = None;
        codec
            .read_response(&whole, &mut |status, vals| {
                gathered = Some((status, vals.iter().map(|v| v.to_vec()).collect::<Vec<_>>()));
            })
            .unwrap();
        assert_eq!(gathered, Some((Status::Ok, expect)));
    }

    #[test]
    fn a_hostile_header_before_a_pool_segment_is_malformed_never_a_panic() {
        let (mut server, mut client, conn) = pair();
        let value = server.pool().alloc_copy(&[7u8; 1000]).unwrap();
        let mut codec = CornflakesClient::new(client.scratch_pool());
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut ok, mut malformed) = (0, 0);
        for round in 0..2000u32 {
            // Valid-looking prefixes (one bitmap word, both fields) with
            // random entries, and plain noise.
            let mut head: Vec<u8> = (0..(next() % 40) as usize).map(|_| next() as u8).collect();
            if round % 2 == 0 && head.len() >= 24 {
                head[..8].copy_from_slice(&[1, 0, 0, 0, 3, 0, 0, 0]);
                head[8..12].copy_from_slice(&0u32.to_le_bytes());
                let count = (next() % 4) as u32;
                head[12..16].copy_from_slice(&count.to_le_bytes());
                head[16..20].copy_from_slice(&(next() as u32 % 64).to_le_bytes());
            }
            server.push_segments(conn, round, &[Segment::Copy(&head), Segment::ZeroCopy(value.clone())]).unwrap();
            let msg = recv_one(&mut client);
            match codec.read_response_in_place(&msg, &mut |_, vals| assert!(vals.len() <= 4)) {
                Ok(()) => ok += 1,
                Err(Malformed) => malformed += 1,
            }
            let _ = server.poll_completions();
        }
        assert!(malformed > 1000, "{ok} read, {malformed} malformed");
        // A count the header cannot hold is refused before anything is
        // reserved for it.
        let mut head = vec![1, 0, 0, 0, 2, 0, 0, 0];
        head.extend_from_slice(&u32::MAX.to_le_bytes());
        head.extend_from_slice(&16u32.to_le_bytes());
        server.push_segments(conn, 0, &[Segment::Copy(&head), Segment::ZeroCopy(value)]).unwrap();
        let msg = recv_one(&mut client);
        assert_eq!(codec.read_response_in_place(&msg, &mut |_, _| panic!("not a response")), Err(Malformed));
    }
}

//! Protocol Buffers with prost 0.14, the messages of `proto/kv.proto` as
//! hand-written `#[derive(prost::Message)]` structs ([`pb`], in
//! `cornflakes-baselines`; no `protoc`).
//!
//! # Receive
//!
//! The request is `merge`d into a message kept across requests (its
//! vectors keep their capacity) from a `Bytes` that *views* the received
//! buffer, so prost's `bytes` fields come out as slices of the packet: no
//! allocation and no copy per field. That view is built with
//! `Bytes::from_static` over the borrowed payload (module `views`, the one
//! piece of `unsafe` here): every `Bytes` made from it stays inside a
//! private, reused message that is cleared before the borrow ends, and
//! nothing outside that module ever sees one. The sound alternatives cost
//! more: `Bytes::copy_from_slice(payload)` copies the whole packet, and
//! `Vec<u8>` fields allocate and copy each value; `Bytes::from_owner` needs
//! a `Send` owner, which an `RcBuf` is not. Measured on this machine (one
//! core, merge + read + clear, `put` with a 10-byte key):
//!
//! | value  | `Vec<u8>` | copied `Bytes` | view    |
//! |--------|-----------|----------------|---------|
//! | 64 B   | 184 ns    | 142 ns         | 110 ns  |
//! | 4096 B | 382 ns    | 237 ns         | 123 ns  |
//!
//! Keys are `string` in the schema. prost decodes a `string` into a fresh
//! `String` (an allocation per key) after checking UTF-8; we declare them
//! `bytes` in the mirror (the wire format of the two is the same) and check
//! UTF-8 ourselves with `std::str::from_utf8`, so the proto3 rule is kept
//! (a key that is not UTF-8 makes the request malformed) without the
//! allocation.
//!
//! # Send
//!
//! The response message is filled with views of the values (stored buffers
//! or, for echo, the request's), so encoding copies each value exactly once:
//! from the store into the outgoing bytes. With owned fields prost would
//! copy every value twice (into the message, then into the encoding).
//! `encoded_len` is exact, so the encoding goes straight into a buffer of
//! that size:
//!
//! - at least [`ZERO_COPY_MIN`] bytes: a fresh pinned pool buffer, posted as
//!   one [`Segment::ZeroCopy`] (the datapath sends it without copying);
//! - shorter: a heap buffer reused across messages, posted as
//!   [`Segment::Copy`] (the datapath copies it into the ring).
//!
//! The split is measured, not assumed: on the shared-memory datapath a
//! zero-copy segment costs the sender ~45 ns more than a copied one of the
//! same length (pool allocation, descriptor, in-flight tracking,
//! completion), which the saved copy repays from about 512 bytes on (send
//! cost, sender side: 64 B 101 vs 147 ns, 512 B 129 vs 148 ns, 1 KiB 150 vs
//! 161 ns, 4 KiB 305 vs 213 ns, 64 KiB 4.9 vs 2.5 µs).

use ::cornflakes::{Pool, RcBuf};
use cornflakes_baselines::prost;
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};

use super::{push, ClientCodec, HandleError, Malformed, Request, ResponseVals, ServerCodec};
use crate::phase;
use crate::protocol::Status;
use crate::store::Store;

pub use super::ZERO_COPY_MIN;

/// The messages of `proto/kv.proto`, as prost-build would generate them
/// with `.bytes(["."])`, except that `keys` is declared `bytes` (same wire
/// format as `string`; UTF-8 is checked by the codec, see the module docs).
pub use cornflakes_baselines::kv_pb as pb;

/// Zero-copy use of prost's `Bytes` fields over borrowed memory. Everything
/// that touches a view lives here; outside, only `&[u8]` borrows with the
/// lifetime of the call are visible.
#[allow(unsafe_code)]
mod views {
    use cornflakes_baselines::bytes::Bytes;
    use cornflakes_baselines::prost::{self, Message as _};
    use smallvec::SmallVec;

    use super::pb;
    use crate::codec::{Malformed, Request, ResponseVals};

    /// A scratch vector that grew past this many entries (a hostile
    /// message) is freed rather than kept.
    const KEEP_CAPACITY: usize = 1024;

    /// A `Bytes` over `data` that neither owns nor copies it.
    ///
    /// # Safety
    ///
    /// The bytes of the result and of every clone or slice of it must not be
    /// read after the borrow of `data` ends. (Holding or dropping such a
    /// `Bytes` later is harmless: a static `Bytes` keeps only a pointer and
    /// a length, and its clone and drop never touch the bytes.)
    #[inline(always)]
    unsafe fn view(data: &[u8]) -> Bytes {
        // SAFETY: the caller reads the bytes only while `data` is borrowed
        // (see above); `from_static` itself only records pointer and length.
        Bytes::from_static(unsafe { &*std::ptr::from_ref::<[u8]>(data) })
    }

    fn clear_vec(v: &mut Vec<Bytes>) {
        if v.capacity() > KEEP_CAPACITY {
            *v = Vec::new();
        } else {
            v.clear();
        }
    }

    /// A message whose encoded form can be computed, and nothing else: the
    /// views inside cannot be reached through it.
    pub(super) struct Encodable<'m, M>(&'m M);

    impl<M: prost::Message> Encodable<'_, M> {
        /// Exact length of the encoding.
        #[inline]
        pub(super) fn encoded_len(&self) -> usize {
            self.0.encoded_len()
        }

        /// Encodes into `out`, which must be exactly `encoded_len` bytes.
        #[inline]
        pub(super) fn encode_to_slice(&self, mut out: &mut [u8]) {
            debug_assert_eq!(out.len(), self.encoded_len());
            self.0.encode(&mut out).expect("the buffer holds encoded_len bytes");
            debug_assert!(out.is_empty());
        }

        /// Encodes into `out` (cleared first).
        #[inline]
        pub(super) fn encode_to_vec(&self, out: &mut Vec<u8>) {
            out.clear();
            self.0.encode(out).expect("a vector grows");
        }
    }

    /// A request message reused across requests. Its `Bytes` fields are
    /// views of the buffer of the current call; it is cleared at the start
    /// and end of each call and never lent out. (No `Debug`: it may hold
    /// stale views after a panic; they are never read, only dropped.)
    #[derive(Default)]
    pub(super) struct RequestScratch(pb::KvRequest);

    impl RequestScratch {
        /// Decodes `payload` into a request whose fields borrow `payload`;
        /// `Malformed` when it is not a request or a key is not UTF-8.
        pub(super) fn decode<'p>(&mut self, payload: &'p [u8]) -> Result<Request<'p>, Malformed> {
            let msg = &mut self.0;
            msg.clear();
            // SAFETY: prost puts slices of this `Bytes` into `msg`'s fields
            // and nowhere else; they are turned into borrows of `payload`
            // below (by offset, without reading them) and cleared before we
            // return (an early return or a panic leaves them unread until
            // the next call clears them).
            let decoded = msg.merge(unsafe { view(payload) });
            let out = match decoded {
                Ok(()) => {
                    let keys: Option<SmallVec<[&[u8]; 4]>> = within(payload, &msg.keys);
                    keys.zip(within(payload, &msg.vals))
                        .filter(|(keys, _)| keys.iter().all(|k| std::str::from_utf8(k).is_ok()))
                        .map(|(keys, vals)| Request { op: msg.op, keys, vals, index: msg.index })
                        .ok_or(Malformed)
                }
                Err(_) => Err(Malformed),
            };
            msg.op = 0;
            msg.index = 0;
            clear_vec(&mut msg.keys);
            clear_vec(&mut msg.vals);
            out
        }

        /// Fills the message with views of `req` and calls `f` to encode it.
        pub(super) fn encode<R>(&mut self, req: &Request<'_>, f: impl FnOnce(&Encodable<'_, pb::KvRequest>) -> R) -> R {
            let msg = &mut self.0;
            msg.clear();
            msg.op = req.op;
            msg.index = req.index;
            // SAFETY: the views go into `msg` only, are read by `f` (through
            // `Encodable`, which gives no access to them) while `req` is
            // borrowed, and are cleared before we return.
            msg.keys.extend(req.keys.iter().map(|k| unsafe { view(k) }));
            // SAFETY: as for the keys.
            msg.vals.extend(req.vals.iter().map(|v| unsafe { view(v) }));
            let out = f(&Encodable(msg));
            clear_vec(&mut msg.keys);
            clear_vec(&mut msg.vals);
            out
        }
    }

    /// The same fields as borrows of `payload`, found by their offsets in
    /// it (bounds-checked, so a view that is not a slice of `payload` makes
    /// `None` rather than a wrong borrow).
    fn within<'p, V: FromIterator<&'p [u8]>>(payload: &'p [u8], fields: &[Bytes]) -> Option<V> {
        let base = payload.as_ptr() as usize;
        fields
            .iter()
            .map(|f| {
                let start = (f.as_ptr() as usize).checked_sub(base)?;
                payload.get(start..start.checked_add(f.len())?)
            })
            .collect()
    }

    /// A response message reused across responses; see [`RequestScratch`].
    #[derive(Default)]
    pub(super) struct ResponseScratch(pb::KvResponse);

    impl ResponseScratch {
        /// Decodes `payload` and calls `f` with its status and views of its
        /// values.
        pub(super) fn decode<R>(&mut self, payload: &[u8], f: impl FnOnce(u32, &[&[u8]]) -> R) -> Result<R, Malformed> {
            let msg = &mut self.0;
            msg.clear();
            // SAFETY: as in `RequestScratch::decode`.
            let decoded = msg.merge(unsafe { view(payload) });
            let out = match decoded {
                Ok(()) => {
                    let vals: ResponseVals<'_> = msg.vals.iter().map(|v| &v[..]).collect();
                    Ok(f(msg.status, &vals))
                }
                Err(_) => Err(Malformed),
            };
            clear_vec(&mut msg.vals);
            out
        }

        /// Fills the message with `status` and views of `vals` and calls
        /// `f` to encode it.
        pub(super) fn encode<R>(
            &mut self,
            status: u32,
            vals: &[&[u8]],
            f: impl FnOnce(&Encodable<'_, pb::KvResponse>) -> R,
        ) -> R {
            let msg = &mut self.0;
            crate::phase::set_value(|| {
                msg.clear();
                msg.status = status;
                // SAFETY: as in `RequestScratch::encode`.
                msg.vals.extend(vals.iter().map(|v| unsafe { view(v) }));
            });
            let out = crate::phase::serialize_send(|| f(&Encodable(msg)));
            clear_vec(&mut msg.vals);
            out
        }
    }

    /// The views' lifetime rule, exercised so that Miri checks it
    /// (`scripts/miri.sh`): every view is read while its input is borrowed,
    /// and a scratch reused after its input is gone reads nothing stale.
    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn views_are_read_only_while_their_input_lives() {
            let mut requests = RequestScratch::default();
            let value = vec![7u8; 600];
            let req = Request {
                op: 3,
                keys: [&b"alpha"[..], &b"beta"[..]].into_iter().collect(),
                vals: [&value[..]].into_iter().collect(),
                index: 9,
            };
            let mut wire = Vec::new();
            requests.encode(&req, |e| {
                assert_eq!(e.encoded_len(), 2 + 7 + 6 + 3 + 600 + 2);
                e.encode_to_vec(&mut wire);
            });
            drop(req);
            drop(value);
            for _ in 0..2 {
                let input = wire.clone();
                let r = requests.decode(&input).unwrap();
                // The fields are borrows of the input, not copies.
                let range = input.as_ptr_range();
                assert!(r.keys.iter().chain(&r.vals).all(|f| range.contains(&f.as_ptr())));
                let got = (r.op, r.keys.iter().map(|k| k.to_vec()).collect::<Vec<_>>(), r.vals[0].to_vec(), r.index);
                // The request borrows the input, so it goes first.
                drop(r);
                drop(input);
                assert_eq!(got, (3, vec![b"alpha".to_vec(), b"beta".to_vec()], vec![7u8; 600], 9));
            }
            assert!(requests.decode(&wire[..wire.len() - 1]).is_err(), "truncated");
            let mut not_utf8 = Vec::new();
            let bad = Request { op: 1, keys: [&[0xffu8, 0xfe][..]].into_iter().collect(), ..Request::default() };
            requests.encode(&bad, |e| e.encode_to_vec(&mut not_utf8));
            assert!(requests.decode(&not_utf8).is_err(), "a key that is not UTF-8");

            let mut responses = ResponseScratch::default();
            let vals: [&[u8]; 2] = [b"one", &[1u8; 300]];
            let mut wire = vec![0u8; 0];
            responses.encode(0, &vals, |e| {
                wire.resize(e.encoded_len(), 0);
                e.encode_to_slice(&mut wire);
            });
            let input = wire.clone();
            let got = responses.decode(&input, |status, v| (status, v.concat())).unwrap();
            drop(input);
            assert_eq!(got, (0, vals.concat()));
        }
    }
}

use views::{Encodable, RequestScratch, ResponseScratch};

/// Encodes `msg` and pushes it once: into a fresh pinned buffer sent
/// zero-copy when it is at least [`ZERO_COPY_MIN`] bytes (and the pool has
/// one), else into `heap` and copied.
fn push_encoded<D: Datapath, M: prost::Message>(
    dp: &mut D,
    heap: &mut Vec<u8>,
    conn: ConnId,
    msg_id: u32,
    msg: &Encodable<'_, M>,
    retry: bool,
) -> Result<(), SendError> {
    let len = msg.encoded_len();
    let pinned = if len >= ZERO_COPY_MIN { dp.alloc(len).ok() } else { None };
    match pinned {
        Some(mut buf) => {
            msg.encode_to_slice(&mut buf);
            let segments = [Segment::ZeroCopy(buf.freeze())];
            push(dp, retry, |dp| dp.push_segments(conn, msg_id, &segments))
        }
        // Short, or the pool cannot hold it (too large, exhausted): the
        // datapath copies it, or refuses it as too large.
        None => {
            msg.encode_to_vec(heap);
            let segments = [Segment::Copy(heap)];
            push(dp, retry, |dp| dp.push_segments(conn, msg_id, &segments))
        }
    }
}

/// The prost server codec.
pub struct ProstServer {
    req: RequestScratch,
    resp: ResponseScratch,
    heap: Vec<u8>,
}

impl ProstServer {
    /// A server codec (the pool is the datapath's, reached through it).
    pub fn new(_pool: &Pool) -> Self {
        ProstServer { req: RequestScratch::default(), resp: ResponseScratch::default(), heap: Vec::new() }
    }
}

/// Sends `status` and `vals` in reply to `rx`; a response the datapath
/// cannot carry is replaced by [`Status::TooLarge`].
fn respond<D: Datapath>(
    dp: &mut D,
    resp: &mut ResponseScratch,
    heap: &mut Vec<u8>,
    rx: &Received,
    status: Status,
    vals: &[&[u8]],
) -> Result<(), SendError> {
    let (conn, msg_id) = (rx.conn, rx.msg_id);
    match resp.encode(status as u32, vals, |m| push_encoded(dp, heap, conn, msg_id, m, true)) {
        Err(SendError::TooLarge { .. }) => {
            resp.encode(Status::TooLarge as u32, &[], |m| push_encoded(dp, heap, conn, msg_id, m, true))
        }
        other => other,
    }
}

impl ServerCodec for ProstServer {
    fn handle<D: Datapath>(&mut self, dp: &mut D, store: &mut Store, rx: &Received) -> Result<(), HandleError> {
        let Self { req, resp, heap } = self;
        let req = phase::deserialize(|| req.decode(&rx.payload)).map_err(|Malformed| HandleError::Malformed)?;
        let mut vals = ResponseVals::new();
        let status = phase::store(|| store.execute(&req, &mut vals));
        Ok(respond(dp, resp, heap, rx, status, &vals)?)
    }
}

/// The prost client codec.
pub struct ProstClient {
    req: RequestScratch,
    resp: ResponseScratch,
    heap: Vec<u8>,
}

impl ProstClient {
    /// A client codec (the pool is the datapath's, reached through it).
    pub fn new(_pool: &Pool) -> Self {
        ProstClient { req: RequestScratch::default(), resp: ResponseScratch::default(), heap: Vec::new() }
    }
}

impl ClientCodec for ProstClient {
    fn send_request<D: Datapath>(
        &mut self,
        dp: &mut D,
        conn: ConnId,
        msg_id: u32,
        req: &Request<'_>,
    ) -> Result<(), SendError> {
        let heap = &mut self.heap;
        self.req.encode(req, |m| push_encoded(dp, heap, conn, msg_id, m, false))
    }

    fn read_response(&mut self, payload: &RcBuf, check: &mut dyn FnMut(Status, &[&[u8]])) -> Result<(), Malformed> {
        self.resp.decode(payload, |status, vals| {
            check(Status::from_u32(status).ok_or(Malformed)?, vals);
            Ok(())
        })?
    }
}

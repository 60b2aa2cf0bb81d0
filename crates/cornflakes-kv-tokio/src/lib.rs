//! The `tokio-prost` baseline (issue 13): the key-value server a competent
//! Rust developer would write instead of using Cornflakes, answering the
//! same protocol as every other system so the same load generator (our tcp
//! datapath client with the prost codec) drives it and checks every
//! response.
//!
//! - A tokio **current-thread** runtime on the calling thread (the caller
//!   pins that thread to the server core), one task per connection
//!   ([`tokio::task::spawn_local`], so nothing needs `Send`).
//! - [`tokio::net::TcpListener`] / [`tokio::net::TcpStream`], `TCP_NODELAY`.
//! - Frames: [`LengthDelimitedCodec`] configured for the datapath's 8-byte
//!   header (u32 LE message id, u32 LE length; see
//!   `cornflakes-datapath/src/tcp/frame.rs`) reads requests; responses are
//!   written by [`KvFrames`]' encoder, which puts the request's id and the
//!   length in front of the prost encoding, written straight into the
//!   connection's write buffer. (`LengthDelimitedCodec`'s own encoder writes
//!   the length field first and nothing before it, so it cannot emit a
//!   header whose length is the second word; it would also need the
//!   encoding as a separate `Bytes` first: one more copy.)
//! - Messages: prost with `bytes::Bytes` fields (`cornflakes_baselines::kv_pb`,
//!   what prost-build generates with `.bytes(["."])`, keys declared `bytes`
//!   so a key is a slice of the frame instead of a fresh `String`: this
//!   favours the baseline). Decoding from the frame's `Bytes` makes every
//!   key and value a slice of it: no copy.
//! - Store: [`ValueStore`], keys to values held as `Bytes`, with the
//!   semantics of `cornflakes_kv::Store` (same operations, statuses and
//!   limits). A response's values are clones of the stored `Bytes`
//!   (reference counts), so the only copy of a value is prost's, into the
//!   write buffer.
//!
//! Pipelined requests already read are answered before one flush (one
//! `write` for the batch), as any tokio server using `feed` + `flush` does.
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use cornflakes_baselines::bytes::{Buf, BufMut, Bytes, BytesMut};
use cornflakes_baselines::prost::Message as _;
use cornflakes_kv::{Limits, Op, ServerStats, Status};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, Encoder, Framed, LengthDelimitedCodec};

/// The prost messages of `kv.proto` (fields of type `Bytes`).
pub use cornflakes_baselines::kv_pb as pb;

/// The frame header: message id, then the length of what follows (u32 LE
/// each), as the tcp datapath writes it.
pub const HEADER_LEN: usize = 8;

/// The largest message accepted: the tcp datapath's limit (its clients
/// cannot send more); a longer length closes the connection.
///
/// `LengthDelimitedCodec` reserves a frame's length in the read buffer as
/// soon as its header arrives. That reservation is virtual memory: only
/// the bytes actually received are touched. So a peer that announces 2 MiB
/// and sends 8 bytes costs address space, not memory. Address space is
/// bounded too, by [`MAX_CONNECTIONS`] x this limit.
pub const MAX_MESSAGE: usize = cornflakes_datapath::tcp::MAX_TCP_MESSAGE;

/// Connections served at once. Further ones are accepted and closed at
/// once, so the listener's backlog does not fill up.
pub const MAX_CONNECTIONS: usize = 1024;

/// One response on its way out: the request's id and the message.
#[derive(Debug)]
pub struct Response {
    /// The id of the request answered.
    pub msg_id: u32,
    /// The message.
    pub msg: pb::KvResponse,
}

/// The codec of a connection: `(msg_id, payload)` in, [`Response`] out.
#[derive(Debug)]
pub struct KvFrames {
    frames: LengthDelimitedCodec,
}

impl KvFrames {
    /// A codec accepting messages up to `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        let frames = LengthDelimitedCodec::builder()
            .little_endian()
            // The length is the header's second word...
            .length_field_offset(4)
            .length_field_type::<u32>()
            // Skip nothing: the frame keeps the id (the first word), so
            // it is the header plus the `len` bytes the length counts.
            .num_skip(0)
            .length_adjustment(HEADER_LEN as isize)
            .max_frame_length(max_message)
            .new_codec();
        KvFrames { frames }
    }
}

impl Default for KvFrames {
    fn default() -> Self {
        Self::new(MAX_MESSAGE)
    }
}

impl Decoder for KvFrames {
    type Item = (u32, Bytes);
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<(u32, Bytes)>> {
        let Some(mut frame) = self.frames.decode(src)? else { return Ok(None) };
        // The codec returns whole frames only: the header is there.
        let msg_id = frame.get_u32_le();
        frame.advance(4);
        Ok(Some((msg_id, frame.freeze())))
    }
}

impl Encoder<Response> for KvFrames {
    type Error = io::Error;

    fn encode(&mut self, item: Response, dst: &mut BytesMut) -> io::Result<()> {
        let len = item.msg.encoded_len();
        let len32 = u32::try_from(len).map_err(|_| io::Error::other("response longer than 4 GiB"))?;
        dst.reserve(HEADER_LEN + len);
        dst.put_u32_le(item.msg_id);
        dst.put_u32_le(len32);
        item.msg.encode(dst).map_err(io::Error::other)
    }
}

/// A value: its elements (one for a plain value).
pub type Value = smallvec::SmallVec<[Bytes; 1]>;

/// Keys to values as `Bytes`, with the semantics of `cornflakes_kv::Store`.
#[derive(Default)]
pub struct ValueStore {
    map: hashbrown::HashMap<Bytes, Value>,
    limits: Limits,
    value_bytes: usize,
}

impl ValueStore {
    /// An empty store enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        ValueStore { map: hashbrown::HashMap::new(), limits, value_bytes: 0 }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the store has no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of all values.
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// Sets `key` to a value of `sizes.len()` elements, each filled by
    /// `fill(element_index, bytes)` (used to preload a workload).
    pub fn insert_with(&mut self, key: &[u8], sizes: &[u32], mut fill: impl FnMut(usize, &mut [u8])) {
        let value = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let mut buf = vec![0u8; size as usize];
                fill(i, &mut buf);
                Bytes::from(buf)
            })
            .collect();
        self.swap_in(Bytes::copy_from_slice(key), value);
    }

    /// Runs `req`: its status and the values of the response (clones of
    /// stored `Bytes`, or the request's own for echo). On an error status
    /// the values are empty.
    pub fn execute(&mut self, req: &pb::KvRequest) -> (Status, Vec<Bytes>) {
        let mut out = Vec::new();
        match self.run(req, &mut out) {
            Ok(()) => (Status::Ok, out),
            Err(status) => (status, Vec::new()),
        }
    }

    fn run(&mut self, req: &pb::KvRequest, out: &mut Vec<Bytes>) -> Result<(), Status> {
        let op = Op::from_u32(req.op).ok_or(Status::UnknownOp)?;
        self.limits.check_keys(req.keys.len())?;
        let one_key = || match req.keys.as_slice() {
            [key] => Ok(key),
            _ => Err(Status::BadRequest),
        };
        let single = |v: &Value| match v.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(Status::BadRequest),
        };
        match op {
            Op::Get => out.push(single(self.map.get(one_key()?).ok_or(Status::NotFound)?)?),
            Op::GetM => {
                if req.keys.is_empty() {
                    return Err(Status::BadRequest);
                }
                for key in &req.keys {
                    out.push(single(self.map.get(key).ok_or(Status::NotFound)?)?);
                }
            }
            Op::GetList => out.extend(self.map.get(one_key()?).ok_or(Status::NotFound)?.iter().cloned()),
            Op::GetFromList => {
                let value = self.map.get(one_key()?).ok_or(Status::NotFound)?;
                out.push(value.get(req.index as usize).ok_or(Status::NotFound)?.clone());
            }
            Op::Put => {
                let key = one_key()?;
                self.put(key, &req.vals)?;
            }
            Op::PutM => {
                if req.keys.is_empty() || req.keys.len() != req.vals.len() {
                    return Err(Status::BadRequest);
                }
                for (key, val) in req.keys.iter().zip(&req.vals) {
                    self.put(key, std::slice::from_ref(val))?;
                }
            }
            Op::Append => {
                let key = one_key()?;
                let [val] = req.vals.as_slice() else { return Err(Status::BadRequest) };
                self.append(key, val)?;
            }
            Op::Echo => out.extend(req.vals.iter().cloned()),
        }
        self.limits.check_response(out.iter().map(|v| v.len()).sum())
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Status> {
        if key.is_empty() {
            Err(Status::BadRequest)
        } else if key.len() > self.limits.max_key {
            Err(Status::TooLarge)
        } else {
            Ok(())
        }
    }

    /// Copies the elements out of the request: a slice of the frame would
    /// keep the whole read buffer it came from alive.
    fn copy_in(&self, elems: &[Bytes]) -> Result<Value, Status> {
        elems
            .iter()
            .map(
                |e| if e.len() > self.limits.max_value { Err(Status::TooLarge) } else { Ok(Bytes::copy_from_slice(e)) },
            )
            .collect()
    }

    fn put(&mut self, key: &Bytes, elems: &[Bytes]) -> Result<(), Status> {
        self.check_key(key)?;
        if elems.is_empty() || elems.len() > self.limits.max_list {
            return Err(Status::BadRequest);
        }
        let value = self.copy_in(elems)?;
        self.swap_in(Bytes::copy_from_slice(key), value);
        Ok(())
    }

    fn append(&mut self, key: &Bytes, elem: &Bytes) -> Result<(), Status> {
        self.check_key(key)?;
        let len = self.map.get(key).map_or(0, |v| v.len());
        if len >= self.limits.max_list {
            return Err(Status::TooLarge);
        }
        let [elem] = self.copy_in(std::slice::from_ref(elem))?.into_inner().map_err(|_| Status::BadRequest)?;
        self.value_bytes += elem.len();
        self.map.entry(Bytes::copy_from_slice(key)).or_default().push(elem);
        Ok(())
    }

    fn swap_in(&mut self, key: Bytes, value: Value) {
        self.value_bytes += value.iter().map(|b| b.len()).sum::<usize>();
        if let Some(old) = self.map.insert(key, value) {
            self.value_bytes -= old.iter().map(|b| b.len()).sum::<usize>();
        }
    }
}

/// Decodes one request and runs it; `None` when it is not a request (or a
/// key is not UTF-8, which proto3 requires of a `string`).
pub fn handle(store: &mut ValueStore, payload: Bytes) -> Option<pb::KvResponse> {
    let req = pb::KvRequest::decode(payload).ok()?;
    if !req.keys.iter().all(|k| std::str::from_utf8(k).is_ok()) {
        return None;
    }
    let (status, vals) = store.execute(&req);
    Some(pb::KvResponse { status: status as u32, vals })
}

/// What the connection tasks share (one thread: no locks).
struct Shared {
    store: RefCell<ValueStore>,
    stats: Cell<ServerStats>,
    connections: Cell<usize>,
}

impl Shared {
    fn count(&self, f: impl FnOnce(&mut ServerStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }
}

/// How often [`serve`] calls its `keep_going`.
pub const CHECK_EVERY: Duration = Duration::from_millis(5);

/// Serves `listener` on a tokio current-thread runtime built on the calling
/// thread until `keep_going` (called every [`CHECK_EVERY`]) returns false;
/// returns the counters. Connections still open are closed then.
///
/// Counters: `handled` requests answered; `malformed` requests that did
/// not decode (dropped unanswered, as the other systems do) and
/// connections closed for a bad frame (a length over [`MAX_MESSAGE`]);
/// `dropped_full` responses lost with a connection that failed;
/// `busy_ns` the time from a batch of frames being read to its flush.
///
/// # Errors
///
/// When the runtime or the listener cannot be set up.
pub fn serve(
    listener: std::net::TcpListener,
    store: ValueStore,
    mut keep_going: impl FnMut(&ServerStats) -> bool,
) -> io::Result<ServerStats> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    let tasks = tokio::task::LocalSet::new();
    let shared = Rc::new(Shared {
        store: RefCell::new(store),
        stats: Cell::new(ServerStats::default()),
        connections: Cell::new(0),
    });
    listener.set_nonblocking(true)?;
    tasks.block_on(&runtime, async {
        let listener = TcpListener::from_std(listener)?;
        tokio::task::spawn_local(accept_loop(listener, shared.clone()));
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while keep_going(&shared.stats.get()) {
            tick.tick().await;
        }
        io::Result::Ok(())
    })?;
    // Dropping the set drops the connection tasks, closing their sockets.
    drop(tasks);
    Ok(shared.stats.get())
}

async fn accept_loop(listener: TcpListener, shared: Rc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if shared.connections.get() >= MAX_CONNECTIONS {
                    eprintln!("tokio-prost: {MAX_CONNECTIONS} connections open; closing the one from {peer}");
                    drop(stream);
                    continue;
                }
                shared.connections.set(shared.connections.get() + 1);
                let shared = shared.clone();
                tokio::task::spawn_local(async move {
                    serve_connection(stream, shared.clone()).await;
                    shared.connections.set(shared.connections.get() - 1);
                });
            }
            Err(e) => {
                // Out of descriptors, or a connection reset before accept:
                // the listener itself goes on.
                eprintln!("tokio-prost: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Answers one connection's requests until it closes or sends a bad frame.
async fn serve_connection(stream: TcpStream, shared: Rc<Shared>) {
    if stream.set_nodelay(true).is_err() {
        return;
    }
    let mut framed = Framed::new(stream, KvFrames::default());
    let mut answered = 0u64;
    let result: io::Result<()> = async {
        while let Some(frame) = framed.next().await {
            let start = Instant::now();
            let mut next = Some(frame);
            while let Some(frame) = next {
                let (msg_id, payload) = frame?;
                let response = handle(&mut shared.store.borrow_mut(), payload);
                match response {
                    Some(msg) => {
                        framed.feed(Response { msg_id, msg }).await?;
                        answered += 1;
                    }
                    None => shared.count(|s| s.malformed += 1),
                }
                // A frame already read (the client pipelines) is answered
                // before the flush; none ready: flush now.
                next = framed.next().now_or_never().flatten();
            }
            framed.flush().await?;
            let busy = start.elapsed().as_nanos() as u64;
            shared.count(|s| {
                s.handled += answered;
                s.busy_ns += busy;
            });
            answered = 0;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => {}
        // A length over the limit (LengthDelimitedCodec's error).
        Err(e) if e.kind() == io::ErrorKind::InvalidData => shared.count(|s| {
            s.malformed += 1;
            s.dropped_full += answered;
        }),
        Err(_) => shared.count(|s| s.dropped_full += answered),
    }
}

/// Binds `addr` (port 0: the kernel picks) for [`serve`].
///
/// # Errors
///
/// When the address cannot be bound.
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(addr)
}

#[cfg(test)]
mod tests;

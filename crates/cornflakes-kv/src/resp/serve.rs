//! The RESP serving loop over a raw byte-stream datapath (the tcp datapath
//! with [`Framing::Raw`](cornflakes_datapath::tcp::Framing::Raw)).
//!
//! Each connection has a buffer for the start of a command that has not
//! fully arrived. When it is empty (the usual case), commands are parsed
//! straight from the received pool buffer, without a copy; only an
//! incomplete tail is copied. All replies to what one receive carried
//! (pipelining) are built into one [`Reply`] and sent as one message: its
//! copied runs go into the first segment, values at or above the threshold
//! as zero-copy segments that hold a reference to the store's buffer until
//! the kernel is done (a SET that replaces the value meanwhile swaps in new
//! buffers and leaves the old ones to the send).
//!
//! A client that sends what Redis would refuse (see
//! [`cornflakes_resp::ProtocolError`]) gets Redis's error and is
//! disconnected; one whose incomplete command exceeds the query buffer
//! limit, or that reads nothing of its replies for
//! [`ServeOptions::not_reading`] (a reply larger than the datapath's queue
//! waits and goes out as the client reads), is disconnected without one. Each is counted; the others
//! are served on.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_datapath::tcp::TcpDatapath;
use cornflakes_datapath::{ConnId, Datapath, Received, RecvError, Segment, SendError};
use cornflakes_resp::{next_command, Limits, Next, Part, ProtocolError, Reply};
use hashbrown::HashMap;

use super::{After, ClientAddrs, RespDb, Session};
use crate::codec::{HandleError, ServerCodec};
use crate::server::ServerStats;

/// A datapath that carries a raw byte stream per connection and can close
/// one.
pub trait RawTransport: Datapath {
    /// Closes `conn` (queued replies are dropped).
    fn close_conn(&mut self, conn: ConnId);
    /// Messages queued on `conn` that its socket has not taken yet.
    fn queued_on(&self, conn: ConnId) -> usize;
    /// Bytes queued on `conn` that its socket has not taken yet.
    fn queued_bytes_on(&self, conn: ConnId) -> usize;
    /// `conn`'s addresses and socket, for CLIENT LIST (none known by
    /// default).
    fn addresses(&self, conn: ConnId) -> ClientAddrs {
        let _ = conn;
        ClientAddrs::default()
    }
}

impl RawTransport for TcpDatapath {
    fn close_conn(&mut self, conn: ConnId) {
        self.close(conn);
    }

    fn queued_on(&self, conn: ConnId) -> usize {
        self.queued(conn)
    }

    fn queued_bytes_on(&self, conn: ConnId) -> usize {
        self.queued_bytes(conn)
    }

    fn addresses(&self, conn: ConnId) -> ClientAddrs {
        ClientAddrs { peer: self.peer_addr(conn), local: self.conn_local_addr(conn), fd: self.conn_fd(conn) }
    }
}

/// Settings of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// What one client may send (Redis's limits, except the query buffer:
    /// see [`ServeOptions::default`]).
    pub limits: Limits,
    /// How long a connection being closed after its last reply (QUIT, a
    /// protocol error) waits for that reply to leave.
    pub close_linger: Duration,
    /// How long a client may leave a reply unread (the datapath's queue for
    /// it full, nothing taken) before it is disconnected; it holds the
    /// reply's values and its unread input meanwhile. Redis has no such
    /// bound for ordinary clients; a reply larger than the queue is sent as
    /// the client reads, however large.
    pub not_reading: Duration,
}

impl Default for ServeOptions {
    /// Redis's limits, but bulk arguments only as long as the store's
    /// largest value (1 MiB + 64 KiB for the command around it is not
    /// needed: a bulk is one argument) and 64 MiB of query buffer per
    /// connection (Redis: 1 GiB).
    fn default() -> Self {
        ServeOptions {
            limits: Limits { max_bulk_len: 1 << 20, max_query_buffer: 64 << 20, ..Limits::default() },
            close_linger: Duration::from_secs(1),
            not_reading: Duration::from_secs(30),
        }
    }
}

/// What the RESP server counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RespStats {
    /// Commands run.
    pub commands: u64,
    /// Connections seen.
    pub connections: u64,
    /// Connections closed for a protocol error (after Redis's error reply).
    pub protocol_errors: u64,
    /// Connections closed because an incomplete command exceeded the
    /// query buffer limit.
    pub query_buffer_full: u64,
    /// Connections closed because a reply could not be queued (the client
    /// does not read, or no buffer).
    pub reply_dropped: u64,
    /// Connections closed after QUIT.
    pub quit: u64,
    /// Connections CLIENT KILL closed (not counting one that killed itself,
    /// counted as QUIT).
    pub killed: u64,
    /// Nanoseconds spent on batches that held input.
    pub busy_ns: u64,
}

impl RespStats {
    /// The counters as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("integer fields always serialize")
    }
}

#[derive(Default)]
struct Conn {
    /// The start of a command that has not fully arrived.
    pending: Vec<u8>,
    /// The length `pending` must reach before that command can be complete
    /// (a large argument arrives in many reads: it is parsed once it is
    /// all there, not once per read).
    need: usize,
    session: Session,
    /// Set once the connection is to close after its replies leave.
    closing: bool,
    /// The rest of a reply the datapath's queue had no room for: sent as
    /// the client reads; its input waits in `pending` meanwhile.
    out: Option<Outbox>,
}

/// A reply being sent as room appears, from `at` on.
struct Outbox {
    reply: Reply<RcBuf>,
    at: Cursor,
    /// When a part of it last left (the client read).
    progress: Instant,
}

/// A position in a reply: the part, and for a copied part the byte in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cursor {
    part: usize,
    byte: usize,
}

/// How far [`send_reply`] got.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    /// All of it is queued (or the client has gone).
    Done,
    /// The queue is full from the cursor on: send the rest later.
    Blocked,
    /// The datapath refused it for another reason (no buffer): close.
    Failed,
}

/// Largest message one reply is sent as; longer replies go as several
/// (the datapath's limit is 2 MiB).
const CHUNK: usize = 1 << 20;

const WAIT: Duration = Duration::from_millis(100);

/// Bytes a subscriber may leave unread before it is disconnected (Redis's
/// `client-output-buffer-limit pubsub` hard limit).
const PUBSUB_LIMIT: usize = 32 << 20;

/// The RESP side's state between batches.
struct RespLoop {
    stats: RespStats,
    conns: HashMap<ConnId, Conn>,
    closing: Vec<(ConnId, Instant)>,
    rx: Vec<Received>,
    reply: Reply<RcBuf>,
    next_id: u64,
    /// Connections with a reply waiting for room ([`Conn::out`]).
    outboxes: usize,
    /// Connections by their session id, to deliver published messages
    /// (entries of closed connections go when met, or in a sweep).
    by_id: HashMap<u64, ConnId>,
    /// Connections closed during the current batch.
    closed_now: Vec<ConnId>,
    /// Connections whose waiting input may run now (unblocked, or their
    /// reply has left).
    resume: VecDeque<ConnId>,
}

impl RespLoop {
    fn new(threshold: usize) -> Self {
        RespLoop {
            stats: RespStats::default(),
            conns: HashMap::new(),
            closing: Vec::new(),
            rx: Vec::with_capacity(64),
            reply: Reply::new(threshold),
            next_id: 1,
            outboxes: 0,
            by_id: HashMap::new(),
            closed_now: Vec::new(),
            resume: VecDeque::new(),
        }
    }

    /// Receives and answers one batch; how many receives it held.
    fn batch<D: RawTransport>(
        &mut self,
        dp: &mut D,
        db: &mut RespDb,
        options: &ServeOptions,
    ) -> Result<usize, RecvError> {
        let batch_start = Instant::now();
        db.tick(batch_start);
        self.closed_now.clear();
        let n = match dp.recv_batch(&mut self.rx, 64) {
            Ok(0) => {
                // Idle: reclaim expired keys in bigger steps (~1 ms).
                db.expire_due(batch_start, 4096);
                let _ = dp.poll_completions();
                self.after_batch(dp, db, options);
                return Ok(0);
            }
            Ok(n) => n,
            Err(RecvError::Closed(conn)) => {
                forget_conn(&mut self.conns, conn, &mut self.outboxes, db);
                return Ok(0);
            }
            Err(e) => return Err(e),
        };
        // A few keys whose time is up per batch, so that under load too
        // they are reclaimed without a batch waiting long for them.
        db.expire_due(batch_start, 128);
        db.counters.connected_clients = self.conns.len();
        db.counters.total_connections = self.stats.connections;
        let mut rx = std::mem::take(&mut self.rx);
        for r in rx.drain(..) {
            // A connection closed during this batch: what else of its the
            // batch holds is dropped, never taken for a new connection.
            if !self.closed_now.is_empty() && self.closed_now.contains(&r.conn) {
                continue;
            }
            if !self.conns.contains_key(&r.conn) {
                self.stats.connections += 1;
                db.counters.connected_clients += 1;
                db.counters.total_connections += 1;
                let id = self.next_id;
                self.next_id += 1;
                self.by_id.insert(id, r.conn);
                self.conns.insert(r.conn, Conn { session: db.new_session(id), ..Conn::default() });
                db.client_connected(id, dp.addresses(r.conn));
            }
            self.run_conn(dp, db, options, r.conn, &r.payload);
        }
        self.rx = rx;
        self.resume_waiting(dp, db, options);
        self.deliver(dp, db);
        let _ = dp.flush();
        let _ = dp.poll_completions();
        self.after_batch(dp, db, options);
        self.stats.busy_ns += batch_start.elapsed().as_nanos() as u64;
        Ok(n)
    }

    /// What follows every batch, busy or idle: more of the replies waiting
    /// for room, the blocked clients woken or timed out and the input that
    /// waited behind them, published messages, and the connections done
    /// closing.
    fn after_batch<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb, options: &ServeOptions) {
        self.send_outboxes(dp, db, options);
        self.wake(dp, db, Instant::now());
        self.resume_waiting(dp, db, options);
        self.deliver(dp, db);
        close_finished(dp, &mut self.conns, &mut self.closing, &mut self.outboxes, db);
    }

    /// Runs what connection `id` sent (`input`) and the input it had
    /// waiting, command by command, until it is done, blocked, waiting for
    /// room for a reply, or closing (then the input waits, bounded). After
    /// a command that made a key someone waits on ready, those clients are
    /// answered before the next command runs, as in Redis.
    fn run_conn<D: RawTransport>(
        &mut self,
        dp: &mut D,
        db: &mut RespDb,
        options: &ServeOptions,
        id: ConnId,
        mut input: &[u8],
    ) {
        loop {
            let Some(conn) = self.conns.get_mut(&id) else { return };
            if conn.closing {
                return;
            }
            if conn.out.is_some() || db.is_blocked(conn.session.id) {
                // Its reply is still leaving, or it waits on keys.
                if !input.is_empty() {
                    if conn.pending.is_empty() {
                        conn.need = 0;
                    }
                    conn.pending.extend_from_slice(input);
                    if conn.pending.len() > options.limits.max_query_buffer {
                        self.stats.query_buffer_full += 1;
                        self.drop_conn(dp, db, id);
                    }
                }
                return;
            }
            if input.is_empty() && conn.pending.is_empty() {
                return;
            }
            self.reply.clear();
            let (end, stopped) = handle_input(db, conn, input, &options.limits, &mut self.reply, &mut self.stats);
            input = &[];
            if !queue_reply(dp, conn, id, &mut self.reply, &mut self.outboxes) {
                self.stats.reply_dropped += 1;
                self.drop_conn(dp, db, id);
                return;
            }
            if let Some(end) = end {
                begin_close(conn, end, &mut self.stats);
                self.closing.push((id, Instant::now() + options.close_linger));
                return;
            }
            if db.has_killed() {
                self.close_killed(dp, db);
            }
            if db.has_ready() {
                self.wake(dp, db, Instant::now());
            }
            if !stopped {
                return;
            }
        }
    }

    /// Sends their replies to the clients [`RespDb::take_woken`] unblocked
    /// (served, timed out, or named by CLIENT UNBLOCK); their input that
    /// waited runs in [`resume_waiting`](Self::resume_waiting).
    fn wake<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb, now: Instant) {
        if !db.has_woken(now) {
            return;
        }
        for (session, mut reply) in db.take_woken(now) {
            let Some(id) = self.by_id.get(&session).copied() else { continue };
            let Some(conn) = self.conns.get_mut(&id) else { continue };
            if conn.closing {
                continue;
            }
            if !queue_reply(dp, conn, id, &mut reply, &mut self.outboxes) {
                self.stats.reply_dropped += 1;
                self.drop_conn(dp, db, id);
                continue;
            }
            if !conn.pending.is_empty() {
                self.resume.push_back(id);
            }
        }
    }

    /// Runs the input that waited on connections that may go on now (a
    /// client unblocked, or a reply that has left).
    fn resume_waiting<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb, options: &ServeOptions) {
        while let Some(id) = self.resume.pop_front() {
            self.run_conn(dp, db, options, id, &[]);
        }
    }

    /// Closes the connections CLIENT KILL named (their replies dropped, as
    /// Redis frees them).
    fn close_killed<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb) {
        for session in db.take_killed() {
            if let Some(id) = self.by_id.remove(&session) {
                if self.conns.contains_key(&id) {
                    self.stats.killed += 1;
                    self.drop_conn(dp, db, id);
                }
            }
        }
    }

    /// Closes connection `id` at once and forgets it.
    fn drop_conn<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb, id: ConnId) {
        dp.close_conn(id);
        forget_conn(&mut self.conns, id, &mut self.outboxes, db);
        self.closed_now.push(id);
    }

    /// Sends more of each reply left waiting for room; once one has all
    /// left, the input that waited behind it goes on the list to resume.
    /// Disconnects a client that has read nothing for
    /// [`ServeOptions::not_reading`].
    fn send_outboxes<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb, options: &ServeOptions) {
        if self.outboxes == 0 {
            return;
        }
        let now = Instant::now();
        let mut dropped = Vec::new();
        for (&id, conn) in self.conns.iter_mut() {
            let Some(out) = conn.out.as_mut() else { continue };
            let before = out.at;
            match send_reply(dp, id, &out.reply, &mut out.at) {
                Sent::Done => {
                    conn.out = None;
                    self.outboxes -= 1;
                    if !conn.pending.is_empty() && !conn.closing {
                        self.resume.push_back(id);
                    }
                }
                Sent::Blocked => {
                    if out.at != before {
                        out.progress = now;
                    } else if now.duration_since(out.progress) > options.not_reading {
                        self.stats.reply_dropped += 1;
                        dropped.push(id);
                    }
                }
                Sent::Failed => {
                    self.stats.reply_dropped += 1;
                    dropped.push(id);
                }
            }
        }
        for id in dropped {
            dp.close_conn(id);
            // Its input waits for nothing now.
            self.resume.retain(|&r| r != id);
            forget_conn(&mut self.conns, id, &mut self.outboxes, db);
        }
        let _ = dp.flush();
    }

    /// Sends the messages PUBLISH left to their subscribers: behind a
    /// reply still leaving, or at once. A subscriber holding more than
    /// [`PUBSUB_LIMIT`] unread is disconnected, as Redis's
    /// `client-output-buffer-limit pubsub 32mb` does.
    fn deliver<D: RawTransport>(&mut self, dp: &mut D, db: &mut RespDb) {
        let messages = db.take_messages();
        if messages.is_empty() {
            return;
        }
        let mut dropped = Vec::new();
        for (id, message) in messages {
            let Some(conn) = self.by_id.get(&id).copied().filter(|c| self.conns.contains_key(c)) else {
                // Its connection has gone.
                self.by_id.remove(&id);
                db.end_session(id);
                continue;
            };
            let Some(state) = self.conns.get_mut(&conn) else { continue };
            if state.closing || dropped.contains(&conn) {
                continue;
            }
            // Unread: in the datapath's queue, and behind it in the outbox.
            let held = dp.queued_bytes_on(conn) + state.out.as_ref().map_or(0, |o| o.reply.len());
            if held + message.len() > PUBSUB_LIMIT {
                dropped.push(conn);
                continue;
            }
            let mut reply = Reply::new(db.threshold());
            reply.raw(&message);
            if !queue_reply(dp, state, conn, &mut reply, &mut self.outboxes) {
                dropped.push(conn);
            }
        }
        for conn in dropped {
            self.stats.reply_dropped += 1;
            dp.close_conn(conn);
            forget_conn(&mut self.conns, conn, &mut self.outboxes, db);
        }
        // Ids of connections that went without a message to meet.
        if self.by_id.len() > 2 * self.conns.len() + 64 {
            let conns = &self.conns;
            self.by_id.retain(|_, c| conns.contains_key(c));
        }
        let _ = dp.flush();
    }

    /// How long the loop may sleep: until a blocked client's time is up
    /// at the latest.
    fn wait_time(&self, db: &RespDb) -> Duration {
        let wait = if self.closing.is_empty() { WAIT } else { Duration::from_millis(1) };
        match db.next_deadline() {
            Some(at) => wait.min(at.saturating_duration_since(Instant::now())),
            None => wait,
        }
    }
}

/// Serves RESP on every connection of `dp` until `keep_going` returns
/// false or the datapath fails.
///
/// # Errors
///
/// When receiving fails for another reason than a client leaving.
pub fn serve<D: RawTransport>(
    dp: &mut D,
    db: &mut RespDb,
    options: &ServeOptions,
    mut keep_going: impl FnMut(&RespStats) -> bool,
) -> Result<RespStats, RecvError> {
    let mut resp = RespLoop::new(db.threshold());
    while keep_going(&resp.stats) && !db.shutting_down() {
        if resp.batch(dp, db, options)? == 0 {
            dp.wait(resp.wait_time(db))?;
        }
    }
    Ok(resp.stats)
}

/// Serves RESP on `dp` and, from the same store, the key-value protocol in
/// `codec`'s format on `kv` (issue 14, item 5: the same requests in both
/// formats, same store, same process). `kv` must share `dp`'s pool (the
/// store's values are sent zero-copy from it). When both are idle the loop
/// sleeps up to 50 µs on one ring, alternating, so either side waits at
/// most that long for the loop to notice it.
///
/// # Errors
///
/// When receiving fails on either datapath for another reason than a
/// client leaving.
pub fn serve_with_kv<D: RawTransport, K: Datapath, C: ServerCodec>(
    dp: &mut D,
    kv: &mut K,
    mut codec: C,
    db: &mut RespDb,
    options: &ServeOptions,
    mut keep_going: impl FnMut(&RespStats, &ServerStats) -> bool,
) -> Result<(RespStats, ServerStats), RecvError> {
    let mut resp = RespLoop::new(db.threshold());
    let mut kv_stats = ServerStats::default();
    let mut rx: Vec<Received> = Vec::with_capacity(32);
    let mut turn = false;
    while keep_going(&resp.stats, &kv_stats) && !db.shutting_down() {
        let got_resp = resp.batch(dp, db, options)?;
        let batch_start = Instant::now();
        let got_kv = match kv.recv_batch(&mut rx, 32) {
            Ok(n) => n,
            Err(RecvError::Closed(_)) => 0,
            Err(e) => return Err(e),
        };
        for r in rx.drain(..) {
            match codec.handle(kv, db.store_mut(), &r) {
                Ok(()) => kv_stats.handled += 1,
                Err(HandleError::Malformed) => kv_stats.malformed += 1,
                Err(HandleError::Send(SendError::Full | SendError::Backlogged(_) | SendError::Closed(_))) => {
                    kv_stats.dropped_full += 1
                }
                Err(HandleError::Send(SendError::Io(e))) => return Err(RecvError::Io(e)),
                Err(HandleError::Send(_)) => kv_stats.send_failed += 1,
            }
        }
        if got_kv > 0 {
            codec.end_batch();
            let _ = kv.flush();
            let _ = kv.poll_completions();
            kv_stats.busy_ns += batch_start.elapsed().as_nanos() as u64;
        }
        if got_resp == 0 && got_kv == 0 {
            let _ = kv.poll_completions();
            turn = !turn;
            if turn {
                dp.wait(IDLE_WAIT)?;
            } else {
                kv.wait(IDLE_WAIT)?;
            }
        }
    }
    Ok((resp.stats, kv_stats))
}

/// How long [`serve_with_kv`] sleeps on one ring when both are idle.
const IDLE_WAIT: Duration = Duration::from_micros(50);

/// Why a connection ends.
enum End {
    Quit,
    Protocol,
    QueryBufferFull,
}

/// Counts why `conn` ends and marks it to close once its replies have left
/// (the caller puts it on the closing list).
fn begin_close(conn: &mut Conn, end: End, stats: &mut RespStats) {
    match end {
        End::Quit => stats.quit += 1,
        End::Protocol => stats.protocol_errors += 1,
        End::QueryBufferFull => stats.query_buffer_full += 1,
    }
    conn.closing = true;
    conn.pending = Vec::new();
}

/// Runs the commands `input` completes on `conn`, appending replies;
/// why the connection ends, if it does, and whether it stopped before the
/// end of its input (a command blocked, or made a key someone waits on
/// ready: the rest is kept in `conn.pending`).
fn handle_input(
    db: &mut RespDb,
    conn: &mut Conn,
    input: &[u8],
    limits: &Limits,
    reply: &mut Reply<RcBuf>,
    stats: &mut RespStats,
) -> (Option<End>, bool) {
    if !conn.pending.is_empty() {
        conn.pending.extend_from_slice(input);
        if conn.pending.len() < conn.need {
            // Nothing can be complete yet; the limit still holds.
            return ((conn.pending.len() > limits.max_query_buffer).then_some(End::QueryBufferFull), false);
        }
    }
    let owned = (!conn.pending.is_empty()).then(|| std::mem::take(&mut conn.pending));
    let buf: &[u8] = owned.as_deref().unwrap_or(input);
    let mut at = 0;
    let mut end = None;
    let mut stopped = false;
    loop {
        match next_command(&buf[at..], limits) {
            Ok(Next::Command(cmd, used)) => {
                at += used;
                stats.commands += 1;
                match db.execute(&cmd, &mut conn.session, reply) {
                    After::Close => {
                        end = Some(End::Quit);
                        break;
                    }
                    After::Continue if !db.has_ready() => {}
                    // Blocked, or others to answer first: the rest waits.
                    After::Block | After::Continue => {
                        stopped = at < buf.len();
                        break;
                    }
                }
            }
            Ok(Next::Incomplete { need }) => {
                conn.need = need;
                break;
            }
            Err(ProtocolError::QueryBufferFull(_)) => {
                end = Some(End::QueryBufferFull);
                break;
            }
            Err(e) => {
                reply.error(&format!("ERR {e}"));
                end = Some(End::Protocol);
                break;
            }
        }
    }
    if end.is_none() && at >= buf.len() {
        conn.need = 0;
    }
    if end.is_none() && at < buf.len() {
        // Keep the unfinished command: the buffer itself when nothing was
        // taken from it (no copy of a large argument per read).
        match owned {
            Some(mut kept) => {
                kept.drain(..at);
                conn.pending = kept;
            }
            None => conn.pending.extend_from_slice(&input[at..]),
        }
    }
    if stopped {
        // What is kept may be whole commands.
        conn.need = 0;
    }
    (end, stopped)
}

/// Queues `reply` on `conn` (behind a reply still leaving, or at once; what
/// the datapath has no room for waits in the outbox); false when the
/// datapath refused it (close the connection). Leaves `reply` empty or
/// replaced.
fn queue_reply<D: Datapath>(
    dp: &mut D,
    conn: &mut Conn,
    id: ConnId,
    reply: &mut Reply<RcBuf>,
    outboxes: &mut usize,
) -> bool {
    if reply.is_empty() {
        return true;
    }
    if let Some(out) = conn.out.as_mut() {
        out.reply.append(reply);
        return true;
    }
    let mut at = Cursor::default();
    match send_reply(dp, id, reply, &mut at) {
        Sent::Done => true,
        Sent::Blocked => {
            let threshold = reply.threshold();
            let reply = std::mem::replace(reply, Reply::new(threshold));
            conn.out = Some(Outbox { reply, at, progress: Instant::now() });
            *outboxes += 1;
            true
        }
        Sent::Failed => false,
    }
}

/// Queues `reply` on `conn` from `at` on, as one message per [`CHUNK`],
/// moving `at` past what was queued; [`Sent::Blocked`] when the queue is
/// full (a client reading slower than its replies come, or one huge reply:
/// the rest goes as the client reads).
fn send_reply<D: Datapath>(dp: &mut D, conn: ConnId, reply: &Reply<RcBuf>, at: &mut Cursor) -> Sent {
    let mut segments: Vec<Segment<'_>> = Vec::with_capacity(reply.parts().len().min(64));
    let mut len = 0;
    // Where the segments not yet pushed start, and where the walk is.
    let mut walk = *at;
    let push = |dp: &mut D, segments: &mut Vec<Segment<'_>>| -> Sent {
        let result = dp.push_segments(conn, 0, segments);
        segments.clear();
        match result {
            // The client has gone: nothing to do.
            Ok(()) | Err(SendError::Closed(_)) => Sent::Done,
            Err(SendError::Full | SendError::Backlogged(_)) => Sent::Blocked,
            Err(_) => Sent::Failed,
        }
    };
    while let Some(part) = reply.parts().get(walk.part) {
        let (piece, next) = match part {
            Part::Copied(range) => {
                let run = &reply.copied()[range.clone()][walk.byte..];
                if run.is_empty() {
                    walk = Cursor { part: walk.part + 1, byte: 0 };
                    continue;
                }
                let piece = &run[..run.len().min(CHUNK)];
                let next = if piece.len() == run.len() {
                    Cursor { part: walk.part + 1, byte: 0 }
                } else {
                    Cursor { part: walk.part, byte: walk.byte + piece.len() }
                };
                (Segment::Copy(piece), next)
            }
            Part::Value(v) => (Segment::ZeroCopy(v.clone()), Cursor { part: walk.part + 1, byte: 0 }),
        };
        let piece_len = match &piece {
            Segment::Copy(b) => b.len(),
            Segment::ZeroCopy(b) => b.len(),
        };
        if len + piece_len > CHUNK && !segments.is_empty() {
            match push(dp, &mut segments) {
                Sent::Done => *at = walk,
                other => return other,
            }
            len = 0;
        }
        segments.push(piece);
        len += piece_len;
        walk = next;
    }
    if segments.is_empty() {
        return Sent::Done;
    }
    let sent = push(dp, &mut segments);
    if sent == Sent::Done {
        *at = walk;
    }
    sent
}

/// Closes the connections whose last replies have left (or that waited
/// longer than the linger).
fn close_finished<D: RawTransport>(
    dp: &mut D,
    conns: &mut HashMap<ConnId, Conn>,
    closing: &mut Vec<(ConnId, Instant)>,
    outboxes: &mut usize,
    db: &mut RespDb,
) {
    if closing.is_empty() {
        return;
    }
    let now = Instant::now();
    closing.retain(|&(conn, deadline)| {
        // A reply still waiting for room has not left either.
        let waiting = conns.get(&conn).is_some_and(|c| c.out.is_some());
        if (dp.queued_on(conn) == 0 && !waiting) || now >= deadline {
            dp.close_conn(conn);
            forget_conn(conns, conn, outboxes, db);
            false
        } else {
            true
        }
    });
}

/// Drops what is kept of connection `id`: its state, its place among the
/// outboxes, and its subscriptions.
fn forget_conn(conns: &mut HashMap<ConnId, Conn>, id: ConnId, outboxes: &mut usize, db: &mut RespDb) {
    if let Some(c) = conns.remove(&id) {
        if c.out.is_some() {
            *outboxes -= 1;
        }
        db.end_session(c.session.id);
    }
}

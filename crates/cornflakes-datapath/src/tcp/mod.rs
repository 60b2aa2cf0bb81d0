//! TCP datapath: any two hosts, Linux TCP sockets driven through io_uring,
//! messages of any size up to a configurable limit (64 MiB by default),
//! many connections.
//!
//! # Contract
//!
//! - One [`TcpDatapath`] is one ring, one [`Pool`] and any number of
//!   listeners and connections (up to [`TcpConfig::max_connections`]), all
//!   on one thread. [`TcpDatapath::listen`] binds (IPv4 or IPv6);
//!   connections are accepted by the ring, without a call, and appear in
//!   [`TcpDatapath::connections`] and as the `conn` of their messages.
//!   [`TcpDatapath::connect`] dials (blocking until the handshake is done).
//!   Every socket has `TCP_NODELAY`.
//! - **Framing** ([`Framing::Length`], the default): each message is the
//!   crate's 8-byte packet header, whose second word carries the message
//!   length (see [`read_frame_header`]), then the message.
//!   [`Framing::Raw`] carries a self-delimiting protocol (RESP) instead:
//!   no header is sent, and each receive is delivered as it arrived.
//!   A peer that announces more than [`TcpConfig::max_message`] (default
//!   [`MAX_TCP_MESSAGE`], 64 MiB; a received message is one contiguous
//!   pool buffer, above 2 MiB a run of whole pool regions, see
//!   [`cornflakes::mem`]) is disconnected and counted ([`TcpStats::bad_frames`]); a peer
//!   that closes mid-message is counted ([`TcpStats::truncated_frames`]).
//!   Both also count in [`DatapathStats::dropped_malformed`]. No input
//!   panics, and what a peer makes us allocate is bounded by one receive
//!   buffer plus one message per connection. With the 64 MiB default,
//!   that times [`TcpConfig::max_connections`] can exceed the pool: peers
//!   that announce large messages and stall can exhaust it, which is
//!   back-pressure on every connection (receives wait for memory), not a
//!   crash. Lower `max_message` where peers are not trusted.
//! - **Sending** (`push_*`) queues the message on its connection and never
//!   blocks; [`Datapath::flush`] posts the queued messages of each
//!   connection as one `sendmsg` (up to 64 iovecs), one send in flight per
//!   connection so the byte stream keeps their order. A partial send posts
//!   the rest when it completes. A connection whose peer does not read
//!   keeps its messages queued up to [`TcpConfig::max_queued_messages`] /
//!   [`TcpConfig::max_queued_bytes`]; beyond, a send fails at once with
//!   [`SendError::Backlogged`] (compare the shm datapath's parking), so one
//!   slow peer never holds up the others. A send to a closed or unknown
//!   connection is [`SendError::Closed`]; a message over the limit is
//!   [`SendError::TooLarge`].
//! - **Zero-copy buffers** are referenced until the kernel is done with
//!   them: a plain `sendmsg` until its completion (the kernel has copied),
//!   `SENDMSG_ZC` until its notification. A value the application frees or
//!   whose pool slot is reused stays intact on the wire.
//! - **Closing**: a peer that closes or resets, bad input, a failed send,
//!   or [`TcpDatapath::close`] shuts the socket down; the connection's
//!   requests in the kernel then finish and release their references, and
//!   its slot is freed. Each connection that the *peer or an error* closed
//!   is reported once by [`Datapath::recv_batch`] as
//!   [`RecvError::Closed`], after the messages it sent before.
//! - **Waiting**: [`Datapath::wait`] sleeps in the kernel
//!   (`io_uring_enter` with a timeout) after spinning for
//!   [`TcpConfig::busy_poll`]; an idle datapath uses no CPU.
//! - **Dropping** shuts every socket down and waits up to
//!   [`TcpConfig::close_linger`] for the kernel's requests to finish; it
//!   leaks the ring and the buffers rather than free memory the kernel may
//!   still touch ([`TcpStats::leaked_on_drop`]).
//!
//! # Memory
//!
//! ```text
//!  send: connection queue (in order)                 one SENDMSG(_ZC), ≤ 64 iovecs
//!   msg 1: [hdr│obj hdr│copies] [value A] [value B]   iov: msg1[head_sent..], A, B,
//!   msg 2: [hdr│copies]                                     msg2 ...
//!   (first segment: one new pool buffer per message; values: the app's RcBufs)
//!   a ZC send clones the RcBufs it covers into its op slot until the
//!   notification; a plain one is covered by the queue until its result.
//!
//!  receive: one RECV per connection into its pool buffer (recv_buffer bytes)
//!   ┌hdr│msg 1──────┬hdr│msg 2─────┬hdr│msg 3 (partial)┐
//!   └──────────────┴──────────────┴───────────────────┘
//!   msgs 1 and 2 are delivered as slices of the frozen buffer (no copy);
//!   the partial tail is copied into a new buffer sized for msg 3
//!   (recv_buffer, or 8 + its length when larger), and the next RECV
//!   continues there: a message larger than the buffer is reassembled in
//!   one pool buffer with one copy of at most one buffer's worth.
//! ```
//!
//! # Receive modes
//!
//! [`RecvMode::Single`] (the default) is the picture above: one `RECV` in
//! flight per connection, into that connection's pool buffer.
//! [`RecvMode::Multishot`] posts one multishot `RECV` per connection and
//! lets the kernel pick buffers from a provided-buffer ring of
//! [`TcpConfig::recv_ring_buffers`] pool buffers shared by all
//! connections (see the `multishot` and `bufring` modules): frames inside
//! one buffer are delivered in place, a frame spanning buffers is copied
//! into one pool buffer of its size. An empty ring (`ENOBUFS`) is
//! back-pressure ([`TcpStats::recv_ring_empty`]): the ring is refilled only
//! while fewer than [`TcpConfig::max_ready`] messages wait, and receives are
//! posted again once it has buffers.
//!
//! Measured on the 2-core VM, 2026-11-24, both modes side by side in one
//! run, server core 0, client core 1, but with the machine shared with
//! other builds (load average 7 to 17, so the figures are noisy):
//!
//! | | Single | Multishot |
//! |---|---|---|
//! | 8 B ping-pong p50 (3 runs, median; two sessions, load 11 / 7) | 37.1 / 30.5 µs | 35.8 / 35.3 µs |
//! | 8 B ping-pong p99 | 28 / 20 ms | 28 / 20 ms (scheduler noise) |
//! | 256 connections × 4 in flight, 64 B | 45 / 51 k/s | 43 / 52 k/s |
//! | 16 MiB one way (`cf bulk`), vs blocking `std::net` in the same run (load 17 / 10) | 1.04x / 0.94x | 0.65x / 0.66x |
//!
//! (`cargo run --release -p cornflakes-datapath --example tcp_recv_modes`
//! and `cf bulk --recv-mode single|multishot`.) Small messages show no
//! difference beyond the noise; large ones lose a third of their
//! throughput to the copy out of the ring's buffers, which `Single` avoids
//! by receiving a large message in place. Hence `Single` is the default.
//! To revisit on a quiet machine.
//!
//! # Zero-copy break-even
//!
//! `SENDMSG_ZC` pins pages and costs a second completion (the
//! notification); it pays only above some segment size on a NIC that does
//! scatter-gather DMA (public figures: near 3 KB). On loopback and veth the
//! kernel copies anyway (the notification says so, counted in
//! [`DatapathStats::zero_copy_copied`]), so it never pays there. Hence
//! [`TcpConfig::zero_copy_min`]: 16 KiB by default, `usize::MAX` (never) in
//! [`TcpConfig::loopback`]. [`TcpDatapath::probe_zero_copy`] measures the
//! break-even on a path (plain against zero-copy sends of 1 KiB to 1 MiB to
//! a peer that discards, [`DiscardSink`] or `cf zc-sink`) and sets
//! `zero_copy_min` to it, or to never when the notifications say the
//! kernel copied; [`TcpConfig::zero_copy_probe`] runs it at start-up and
//! [`TcpDatapath::zero_copy_probe`] reports what it chose and why. `cf
//! zc-probe` prints the table. On loopback and across the veth pair of
//! `scripts/netns.sh` (2026-11-24) every notification said "copied", and
//! zero-copy cost the sender 1.3x to 3.5x the CPU per byte of a plain send
//! below 256 KiB: the probe chooses never. Fixed buffers are not used for
//! TCP sends (the `io-uring` crate's `SendMsgZc` has no buffer index).
//!
//! # Layout
//!
//! | module | owns |
//! |---|---|
//! | `config` | [`TcpConfig`], [`TcpError`], [`MAX_TCP_MESSAGE`] |
//! | `frame` | the frame header: id and length |
//! | `conn` | the connection table, per-connection state, generations |
//! | `send` | queueing messages, building one send from a queue, partial sends |
//! | `recv` | [`RecvMode::Single`]: posting receives, parsing frames, reassembly, bad input |
//! | `multishot` | [`RecvMode::Multishot`]: the multishot receive, chunks, assembly, refilling the ring |
//! | `bufring` | the provided-buffer ring shared with the kernel (unsafe: raw entry writes) |
//! | `probe` | the zero-copy break-even probe, [`DiscardSink`] |
//! | `completion` | accept, dispatching completions, waiting, closing, drop |
//! | `sys` | the unsafe edge: raw submission entries, socket calls |
//!
//! Messages above 2 MiB (up to [`TcpConfig::max_message`], 64 MiB by
//! default) are received into one contiguous pool buffer: a *run* of pool
//! regions (see [`cornflakes::mem`]). `cf bulk` measures 16 MiB messages
//! against a blocking `std::net` `write_all`/`read_exact` loop.

mod bufring;
mod completion;
mod config;
mod conn;
mod frame;
mod multishot;
mod probe;
mod recv;
mod send;
mod sys;

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use cornflakes::{Message, Pool};
use io_uring::{opcode, IoUring};

pub use self::config::{Framing, RecvMode, TcpConfig, TcpError, FRAME_MAX_MESSAGE, MAX_TCP_MESSAGE};
pub use self::frame::{read_frame_header, write_frame_header};
pub use self::probe::{DiscardSink, ZcProbe, ZcProbeRow, PROBE_SIZES};

use self::conn::{Conn, ConnTable, State};
use self::send::SendOp;
use crate::{ConnId, Datapath, DatapathStats, Received, RecvError, Segment, SendError};

/// Counters specific to the TCP datapath.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections dialled.
    pub connected: u64,
    /// Accepted connections closed at once: the table was full.
    pub rejected: u64,
    /// Connections the peer closed (end of stream).
    pub peer_closed: u64,
    /// Connections that failed (reset, or a receive or send error).
    pub errors: u64,
    /// Connections closed because a frame announced more than
    /// [`TcpConfig::max_message`].
    pub bad_frames: u64,
    /// Connections that ended in the middle of a frame.
    pub truncated_frames: u64,
    /// `SENDMSG` requests.
    pub sendmsg: u64,
    /// `SENDMSG_ZC` requests.
    pub sendmsg_zc: u64,
    /// Zero-copy notifications.
    pub notifications: u64,
    /// Sends the socket took only part of (the rest was posted again).
    pub partial_sends: u64,
    /// Sends refused with [`SendError::Backlogged`].
    pub backlogged: u64,
    /// Messages reassembled from more than one receive buffer.
    pub reassembled: u64,
    /// Times a receive was not posted: [`TcpConfig::max_ready`] messages
    /// waited for the application, or the pool had no buffer.
    pub recv_held_back: u64,
    /// Requests still in the kernel when the datapath was dropped (their
    /// memory was leaked).
    pub leaked_on_drop: u64,
    /// `io_uring_enter` calls that submitted.
    pub submits: u64,
    /// Accepts that found the submission queue full and were posted later.
    pub accepts_deferred: u64,
    /// Multishot receives ended by an empty buffer ring (`ENOBUFS`):
    /// back-pressure, posted again once buffers were back.
    pub recv_ring_empty: u64,
}

/// The Linux TCP datapath. See the module docs.
pub struct TcpDatapath {
    // Field order is drop order: the ring goes before everything whose
    // memory it references (Drop waits for or leaks outstanding requests).
    /// Dropped by hand in `Drop`, or leaked when the kernel still holds
    /// requests.
    ring: ManuallyDrop<IoUring>,
    /// Boxed: the kernel holds pointers into each op while the vector
    /// grows.
    #[allow(clippy::vec_box)]
    send_ops: Vec<Box<SendOp>>,
    free_ops: Vec<u32>,
    conns: ConnTable,
    listeners: Vec<TcpListener>,
    /// [`RecvMode::Multishot`]: the provided-buffer ring. Dropped after
    /// the io_uring (closed in `Drop`), or leaked with it.
    bufring: Option<bufring::BufRing>,
    /// Listeners whose accept found the submission queue full: posted
    /// again by `pump`.
    accept_later: Vec<usize>,
    pool: Pool,
    /// Connections with a receive or send to post (see `pump`).
    want: Vec<u32>,
    want_spare: Vec<u32>,
    ready: VecDeque<Received>,
    /// Connections closed by the peer or an error, to report once.
    closed: VecDeque<ConnId>,
    config: TcpConfig,
    zc_supported: bool,
    /// The last zero-copy probe's result.
    zc_probe: Option<ZcProbe>,
    /// Requests in the kernel (receives, sends until their last
    /// completion, accepts).
    kernel_ops: usize,
    /// Sends released in the current `poll_completions`.
    released: usize,
    /// Set by `Drop`: nothing is delivered, reposted or accepted.
    closing: bool,
    /// Ends a kernel wait from another thread (its poll request is not
    /// among `kernel_ops`: it holds no memory, and `Drop` need not wait
    /// for it).
    waker: crate::uring::RingWaker,
    cqes: Vec<(u64, i32, u32)>,
    /// Scratch for the frames of one receive buffer.
    frames: Vec<(u32, usize, usize)>,
    stats: DatapathStats,
    tcp: TcpStats,
    /// Tests: `submit` takes nothing, as a busy kernel would.
    #[cfg(test)]
    hold_submits: bool,
}

impl std::fmt::Debug for TcpDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpDatapath")
            .field("connections", &self.conns.live)
            .field("zero_copy_min", &self.config.zero_copy_min)
            .field("stats", &self.stats)
            .field("tcp", &self.tcp)
            .finish()
    }
}

impl TcpDatapath {
    /// A datapath with no listener and no connection.
    ///
    /// # Errors
    ///
    /// [`TcpError::Config`], [`TcpError::Pool`], [`TcpError::Ring`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
    ///
    /// let dp = TcpDatapath::new(TcpConfig::loopback())?;
    /// assert_eq!(dp.connections().count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(mut config: TcpConfig) -> Result<Self, TcpError> {
        config.check()?;
        let pool = match config.pool.take() {
            Some(p) => p,
            None => Pool::with_config(config.pool_config.clone()).map_err(TcpError::Pool)?,
        };
        let ring = IoUring::builder()
            .setup_cqsize(config.ring_entries * 4)
            .build(config.ring_entries)
            .map_err(TcpError::Ring)?;
        let mut probe = io_uring::Probe::new();
        let zc_supported =
            ring.submitter().register_probe(&mut probe).is_ok() && probe.is_supported(opcode::SendMsgZc::CODE);
        let bufring = match config.recv_mode {
            RecvMode::Single => None,
            RecvMode::Multishot => {
                Some(bufring::BufRing::register(&ring, config.recv_ring_buffers).map_err(TcpError::BufRing)?)
            }
        };
        let probe_sink = config.zero_copy_probe;
        let mut dp = Self {
            ring: ManuallyDrop::new(ring),
            send_ops: Vec::new(),
            free_ops: Vec::new(),
            conns: ConnTable::default(),
            listeners: Vec::new(),
            accept_later: Vec::new(),
            bufring,
            pool,
            want: Vec::new(),
            want_spare: Vec::new(),
            ready: VecDeque::new(),
            closed: VecDeque::new(),
            config,
            zc_supported,
            zc_probe: None,
            kernel_ops: 0,
            released: 0,
            closing: false,
            waker: Default::default(),
            cqes: Vec::new(),
            frames: Vec::new(),
            stats: DatapathStats::default(),
            tcp: TcpStats::default(),
            #[cfg(test)]
            hold_submits: false,
        };
        if let Some(sink) = probe_sink {
            dp.probe_zero_copy(sink, &PROBE_SIZES, Duration::from_millis(10))?;
        }
        Ok(dp)
    }

    /// A datapath listening on `addr` (port 0: the kernel picks; see
    /// [`TcpDatapath::local_addrs`]).
    ///
    /// # Errors
    ///
    /// As [`TcpDatapath::new`] and [`TcpDatapath::listen`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
    ///
    /// let server = TcpDatapath::bind("[::1]:0".parse()?, TcpConfig::loopback())?;
    /// assert!(server.local_addrs()[0].is_ipv6());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind(addr: SocketAddr, config: TcpConfig) -> Result<Self, TcpError> {
        let mut dp = Self::new(config)?;
        dp.listen(addr)?;
        Ok(dp)
    }

    /// Listens on `addr` too; returns the address bound. Connections are
    /// accepted as completions are processed (any call but `push_*`).
    ///
    /// # Errors
    ///
    /// [`TcpError::Listen`].
    pub fn listen(&mut self, addr: SocketAddr) -> Result<SocketAddr, TcpError> {
        let err = |error| TcpError::Listen { addr, error };
        let listener = TcpListener::bind(addr).map_err(err)?;
        sys::set_backlog(&listener, self.config.backlog).map_err(err)?;
        let local = listener.local_addr().map_err(err)?;
        self.listeners.push(listener);
        self.post_accept(self.listeners.len() - 1);
        self.submit().map_err(err)?;
        Ok(local)
    }

    /// Dials `addr` (blocking until the handshake completes, up to 10 s)
    /// and returns the connection.
    ///
    /// # Errors
    ///
    /// [`TcpError::Connect`]; [`TcpError::TooManyConnections`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = TcpDatapath::bind("127.0.0.1:0".parse()?, TcpConfig::loopback())?;
    /// let mut client = TcpDatapath::new(TcpConfig::loopback())?;
    /// let conn = client.connect(server.local_addrs()[0])?;
    /// client.push_buf(conn, 1, b"ping")?;
    /// client.flush()?;
    /// let mut out = Vec::new();
    /// while server.recv_batch(&mut out, 32)? == 0 {
    ///     server.wait(std::time::Duration::from_millis(100))?;
    /// }
    /// assert_eq!((out[0].msg_id, &out[0].payload[..]), (1, &b"ping"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect(&mut self, addr: SocketAddr) -> Result<ConnId, TcpError> {
        let err = |error| TcpError::Connect { addr, error };
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(err)?;
        stream.set_nodelay(true).map_err(err)?;
        let id = self.adopt(stream).ok_or(TcpError::TooManyConnections(self.config.max_connections))?;
        self.tcp.connected += 1;
        self.pump().map_err(err)?;
        Ok(id)
    }

    /// Adds a connected socket: table slot, first receive queued.
    fn adopt(&mut self, stream: TcpStream) -> Option<ConnId> {
        let (index, id) = self.conns.insert(Conn::new(stream), self.config.max_connections)?;
        self.mark_recv(index);
        Some(id)
    }

    /// A handle that wakes this datapath's [`Datapath::wait`](crate::Datapath::wait)
    /// from any thread. The first call makes an eventfd, which the ring
    /// then watches with a poll request; datapaths that never call it have
    /// none.
    ///
    /// # Errors
    ///
    /// The eventfd could not be made (out of file descriptors).
    pub fn waker(&mut self) -> std::io::Result<crate::Waker> {
        self.waker.waker()
    }

    /// Addresses of the listeners, in the order they were added.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// Open connections.
    pub fn connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.conn.as_ref().is_some_and(|c| c.state == State::Open))
            .map(|(i, s)| conn::conn_id(i, s.generation))
    }

    /// The peer's address; `None` for a closed or unknown connection.
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.stream(conn)?.peer_addr().ok()
    }

    /// This end's address of `conn` (which of the listening addresses it
    /// came to); `None` for a closed or unknown connection.
    pub fn conn_local_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.stream(conn)?.local_addr().ok()
    }

    /// The file descriptor of `conn`'s socket (for listings such as Redis's
    /// CLIENT LIST); `None` for a closed or unknown connection.
    pub fn conn_fd(&self, conn: ConnId) -> Option<i32> {
        use std::os::fd::AsRawFd;
        Some(self.stream(conn)?.as_raw_fd())
    }

    fn stream(&self, conn: ConnId) -> Option<&std::net::TcpStream> {
        let i = self.conns.index(conn)?;
        Some(&self.conns.slots[i].conn.as_ref()?.stream)
    }

    /// Closes `conn` (shuts its socket down; queued messages are dropped,
    /// in-flight ones release their buffers as the kernel finishes).
    /// Nothing more is received from it, not even what had arrived and
    /// waited for [`recv_batch`](Datapath::recv_batch): an application
    /// that closed a connection (after `QUIT`, a protocol error) never
    /// sees, and so never runs, input sent after that. Not reported as
    /// [`RecvError::Closed`]. No effect on an unknown id.
    pub fn close(&mut self, conn: ConnId) {
        if let Some(i) = self.conns.index(conn) {
            self.begin_close(i, false);
            self.ready.retain(|r| r.conn != conn);
        }
    }

    /// Whether the kernel has `SENDMSG_ZC` (probed at start-up).
    pub fn zero_copy_supported(&self) -> bool {
        self.zc_supported
    }

    /// The settings in use.
    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// Messages queued on `conn`, not yet accepted by its socket.
    pub fn queued(&self, conn: ConnId) -> usize {
        self.conns.index(conn).and_then(|i| self.conns.slots[i].conn.as_ref()).map_or(0, |c| c.queue.len())
    }

    /// Bytes queued on `conn`, not yet accepted by its socket (what
    /// [`TcpConfig::max_queued_bytes`] bounds).
    pub fn queued_bytes(&self, conn: ConnId) -> usize {
        self.conns.index(conn).and_then(|i| self.conns.slots[i].conn.as_ref()).map_or(0, |c| c.queued_bytes)
    }

    /// Sends not yet finished: messages queued on any connection plus
    /// send requests awaiting their completion or notification. O(number
    /// of connections); for tests and shutdown.
    pub fn in_flight(&self) -> usize {
        let queued: usize = self.conns.slots.iter().filter_map(|s| s.conn.as_ref()).map(|c| c.queue.len()).sum();
        queued + self.send_ops.iter().filter(|o| o.busy).count()
    }

    /// TCP-specific counters.
    pub fn tcp_stats(&self) -> TcpStats {
        self.tcp
    }
}

impl Datapath for TcpDatapath {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
        self.reap();
        // A closed connection is reported once the application has taken
        // the messages it sent before, even while others keep sending
        // (the scan of `ready` runs only while a close waits).
        if let Some(&conn) = self.closed.front() {
            if !self.ready.iter().any(|r| r.conn == conn) {
                self.closed.pop_front();
                self.pump()?;
                return Err(RecvError::Closed(conn));
            }
        }
        let n = self.take_ready(out, max);
        self.pump()?;
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        self.wait_for_ready(timeout)
    }

    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError> {
        self.queue_message(conn, msg_id, msg)
    }

    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        self.queue_segments(conn, msg_id, segments)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.pump()?;
        Ok(())
    }

    fn poll_completions(&mut self) -> Result<usize, SendError> {
        self.released = 0;
        self.reap();
        self.pump()?;
        Ok(self.released)
    }

    fn stats(&self) -> DatapathStats {
        self.stats
    }
}

/// What the fuzz targets in `fuzz/` call; not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    /// The receive path's frame scan (see the `recv` module) of the bytes
    /// one connection has received: the complete frames as (message id,
    /// offset of the message, its length), the bytes they use, the bytes
    /// the next frame needs, and whether a frame announced more than
    /// `max_message` (which closes the connection).
    pub fn scan_frames(bytes: &[u8], max_message: usize) -> (Vec<(u32, usize, usize)>, usize, usize, bool) {
        let mut out = Vec::new();
        let s = super::recv::scan(bytes, max_message, &mut out);
        debug_assert_eq!(s.frames, out.len());
        (out, s.consumed, s.next_frame, s.bad)
    }

    /// The multishot receive path's assembly (see the `multishot`
    /// module) of `chunks`, as if the kernel had filled one ring buffer
    /// with each, on a fresh connection of a per-thread datapath: the
    /// messages delivered (id, bytes), and whether the connection was
    /// closed for a frame over `max_message`.
    pub fn assemble_chunks(chunks: &[&[u8]], max_message: usize) -> (Vec<(u32, Vec<u8>)>, bool) {
        use std::cell::RefCell;

        use super::{RecvMode, TcpConfig, TcpDatapath};
        use crate::Datapath;

        thread_local! {
            static DP: RefCell<Option<(TcpDatapath, std::net::TcpListener)>> = const { RefCell::new(None) };
        }
        DP.with(|cell| {
            let mut cell = cell.borrow_mut();
            let (dp, listener) = cell.get_or_insert_with(|| {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
                let config =
                    TcpConfig { recv_mode: RecvMode::Multishot, recv_ring_buffers: 8, ..TcpConfig::loopback() };
                (TcpDatapath::new(config).expect("a datapath"), listener)
            });
            dp.config.max_message = max_message;
            let conn = dp.connect(listener.local_addr().expect("bound")).expect("connect on loopback");
            // Accept and drop the peer's end; it never sends.
            let _ = listener.accept();
            let i = dp.conns.index(conn).expect("just connected");
            for chunk in chunks {
                if dp.conns.get_mut(i).is_none_or(|c| c.state != super::conn::State::Open) {
                    break;
                }
                let buf = dp.pool.alloc_copy(chunk).expect("pool room for a fuzz input");
                assert!(dp.consume(i, buf).is_none(), "the pool has room");
            }
            let closed = dp.conns.get_mut(i).is_none_or(|c| c.state != super::conn::State::Open);
            let out: Vec<(u32, Vec<u8>)> =
                dp.ready.drain(..).map(|r| (r.msg_id, r.payload.as_slice().to_vec())).collect();
            dp.close(conn);
            // Let the kernel finish with the connection before the next input.
            let mut ignored = Vec::new();
            while dp.conns.index(conn).is_some() {
                let _ = dp.recv_batch(&mut ignored, usize::MAX);
                let _ = dp.wait(std::time::Duration::from_millis(1));
                ignored.clear();
            }
            (out, closed)
        })
    }
}

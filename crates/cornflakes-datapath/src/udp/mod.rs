//! UDP datapath: any two hosts, Linux UDP sockets driven through io_uring,
//! with zero-copy scatter-gather sends out of the pinned pool.
//!
//! # Contract
//!
//! - One [`UdpDatapath`] is one socket, one ring and one [`Pool`], all on
//!   one thread. Peers are numbered [`ConnId`]s: [`UdpDatapath::connect`]
//!   registers one; a datagram from an unknown address registers its sender
//!   (up to [`UdpConfig::max_peers`]; beyond, it is dropped and counted in
//!   [`UdpStats::dropped_unknown_peer`]).
//! - Every datagram is one message: the 8-byte packet header
//!   ([`crate::write_packet_header`]) then the message. A message that does
//!   not fit the peer's limit ([`UdpConfig::max_payload`], lowered to the
//!   route MTU for connected peers) fails with [`SendError::TooLarge`]; it
//!   is never truncated or fragmented by us.
//! - Received datagrams that are truncated, shorter than the packet header
//!   or carry a nonzero reserved word are dropped and counted in
//!   [`DatapathStats::dropped_malformed`]. No input panics.
//! - `push_*` only queue submission entries; [`Datapath::flush`] submits
//!   them with one system call. No room in the submission queue or the
//!   in-flight table is [`SendError::Full`]: call
//!   [`Datapath::poll_completions`] (or receive) and retry.
//! - Zero-copy buffers stay referenced until the kernel's notification
//!   says it is done with them (a plain `sendmsg` releases at its
//!   completion), so a value the application drops stays intact on the
//!   wire.
//!
//! # Memory
//!
//! ```text
//!  push_message(conn, id, msg)
//!    first segment (new pool buffer)               zero-copy fields (already in the pool)
//!    ┌────────┬──────────────────────────────┐     ┌───────────┐  ┌───────────┐
//!    │ pkt hdr│ object headers │ copied data │     │ value A   │  │ value B   │
//!    └────────┴──────────────────────────────┘     └───────────┘  └───────────┘
//!         ▲ iov[0]                                      ▲ iov[1]       ▲ iov[2]
//!  send slot i (in-flight table, never moves):
//!    msghdr ─► iovecs [iov0, iov1, iov2]    name ─► peer sockaddr copy
//!    bufs: [first, A.clone(), B.clone()]  ── dropped at the last completion
//!  SQE: SENDMSG_ZC, fixed buffer c when all iovecs lie in registered chunk c
//!  CQEs: result (F_MORE) ... then notification (F_NOTIF, res & COPIED?)
//!
//!  receive slot j: RECVMSG into a pool buffer of max_payload + 1 bytes
//!    ┌────────┬───────── message ─────────┐
//!    │ pkt hdr│ payload = buf.slice(8..n) │ ─► Received { conn, msg_id, payload }
//!    └────────┴───────────────────────────┘    (the slot reposts with a new buffer)
//! ```
//!
//! # Send modes
//!
//! At bind the running kernel is probed ([`KernelSupport`]). In
//! [`SendMode::Auto`], a message with zero-copy segments goes out with
//! `SENDMSG_ZC` (with a fixed buffer when the kernel takes one there,
//! Linux 6.15, and all segments lie in one registered chunk), else plain
//! `SENDMSG`; a message with only its first segment always uses plain
//! `SENDMSG` (its bytes were just copied; pinning them gains nothing).
//! `SEND_ZC` carries one segment only, so it is used when forced
//! ([`SendMode::SendZc`]) or as the zero-copy path on a kernel with
//! `SEND_ZC` but no `SENDMSG_ZC` (6.0), for single-segment messages.
//!
//! On loopback and veth the kernel copies zero-copy sends anyway; the
//! notification says so and [`DatapathStats::zero_copy_copied`] counts it.
//!
//! # Receives
//!
//! Every posted receive waits on the socket and every datagram wakes all of
//! them (all but one find nothing and re-arm), which on a 2-core VM doubled
//! the ping-pong round trip with 32 posted (35 µs against 15 µs with one).
//! So the number posted adapts between 1 and [`UdpConfig::recv_buffers`]:
//! it doubles when every posted receive completed in one pass over the
//! completion queue (a burst) and halves when only one did. Datagrams that
//! arrive meanwhile wait in the socket's buffer ([`UdpConfig::socket_buffer`]);
//! the kernel's count of those it dropped for lack of room there
//! (`SO_RXQ_OVFL`) is [`DatapathStats::dropped_no_buffer`].
//!
//! Like a NIC's receive ring, the buffers held for receiving are bounded:
//! posted receives plus messages delivered but not yet taken by
//! [`Datapath::recv_batch`] never exceed [`UdpConfig::recv_buffers`]. An
//! application that falls behind stops the reposting
//! ([`UdpStats::recv_held_back`]); datagrams then queue in the socket
//! buffer and beyond it are dropped and counted by the kernel, and the pool
//! memory pinned by receives stays at `recv_buffers` buffers.
//!
//! # Layout
//!
//! | module | owns |
//! |---|---|
//! | `config` | [`UdpConfig`], [`SendMode`], [`TaskRun`], the UDP size limits, and the checks run at bind |
//! | `error` | [`BindError`]: why set-up failed (hot paths use [`SendError`] and [`RecvError`]) |
//! | `setup` | [`UdpDatapath::bind`] (socket, ring, fixed buffers, slots) and `Drop` (cancel, wait, or leak) |
//! | `peers` | remote addresses numbered as [`ConnId`]s: explicit, learned, path MTU |
//! | `recv` | receive slots, posting `RECVMSG`, the check of each datagram, how many are posted (adaptive, bounded) |
//! | `send` | send slots, first-segment assembly, choosing `SENDMSG`/`SENDMSG_ZC`/`SEND_ZC`, queueing |
//! | `completion` | submitting, entering the kernel, waiting, dispatching completions and zero-copy notifications |
//! | `probe` | [`KernelSupport`]: which zero-copy features the running kernel has |
//! | `fixed` | the pool's regions as io_uring fixed buffers |
//! | `sys` | the unsafe edge: kernel-layout addresses, raw submission entries, socket options |
//!
//! This file holds the [`UdpDatapath`] state they share and its
//! [`Datapath`] implementation, which calls into them.

mod completion;
mod config;
mod error;
mod fixed;
mod peers;
mod probe;
mod recv;
mod send;
mod setup;
mod sys;

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use cornflakes::{Message, Pool};
use io_uring::IoUring;

pub use self::config::{SendMode, TaskRun, UdpConfig, ETHERNET_UDP_PAYLOAD, MAX_IOVECS, MAX_UDP_PAYLOAD};
pub use self::error::BindError;
pub use self::probe::KernelSupport;

use self::fixed::FixedBuffers;
use self::peers::PeerTable;
use self::recv::RecvSlot;
use self::send::SendSlot;
use crate::{ConnId, Datapath, DatapathStats, Received, RecvError, Segment, SendError, PACKET_HEADER_LEN};

/// Counters specific to the UDP datapath.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Messages sent with `SENDMSG_ZC`, without a fixed buffer.
    pub sendmsg_zc: u64,
    /// Messages sent with `SENDMSG_ZC` from a fixed buffer.
    pub sendmsg_zc_fixed: u64,
    /// Messages sent with `SEND_ZC`, without a fixed buffer.
    pub send_zc: u64,
    /// Messages sent with `SEND_ZC` from a fixed buffer.
    pub send_zc_fixed: u64,
    /// Messages sent with plain `SENDMSG`.
    pub sendmsg: u64,
    /// Zero-copy notifications received.
    pub notifications: u64,
    /// Sends the kernel failed (the datagram is lost; see
    /// [`UdpDatapath::last_send_error`]).
    pub send_errors: u64,
    /// Receive requests the kernel failed (reposted).
    pub recv_errors: u64,
    /// Datagrams dropped because the peer table was full.
    pub dropped_unknown_peer: u64,
    /// Times receives were left unposted because
    /// [`UdpConfig::recv_buffers`] messages awaited the application.
    pub recv_held_back: u64,
    /// Fixed-buffer registrations (initial and after pool growth).
    pub fixed_buffer_updates: u64,
    /// `io_uring_enter` calls that submitted.
    pub submits: u64,
}

/// The Linux UDP datapath. See the module docs.
pub struct UdpDatapath {
    // Field order is drop order: the ring goes before the slots and the
    // pool whose memory it references.
    ring: IoUring,
    recv_slots: Box<[RecvSlot]>,
    send_slots: Box<[SendSlot]>,
    socket: UdpSocket,
    fixed: FixedBuffers,
    pool: Pool,
    /// Send slots free for a new send (a stack).
    free_sends: Vec<u32>,
    /// Receive slots not posted (a stack).
    idle_recvs: Vec<u32>,
    /// Delivered messages the application has not taken yet.
    ready: VecDeque<Received>,
    peers: PeerTable,
    config: UdpConfig,
    support: KernelSupport,
    local: SocketAddr,
    /// Bytes of each receive buffer (`max_payload + 1`).
    recv_len: usize,
    /// Whether the socket reports its drop count (`SO_RXQ_OVFL`).
    rxq_ovfl: bool,
    recv_posted: usize,
    /// Receives to keep posted now (adapts between 1 and `recv_buffers`).
    recv_target: usize,
    /// Receive completions in the current reap.
    recv_done: usize,
    /// Receives queued but not yet submitted to the kernel.
    recv_unsubmitted: usize,
    in_flight: usize,
    /// Sends released in the current `poll_completions`.
    released: usize,
    /// Set by `Drop`: completed receives are not delivered or reposted.
    closing: bool,
    /// Ends a kernel wait from another thread.
    waker: crate::uring::RingWaker,
    /// Scratch for one pass over the completion queue.
    cqes: Vec<(u64, i32, u32)>,
    last_send_error: Option<i32>,
    stats: DatapathStats,
    udp_stats: UdpStats,
}

impl std::fmt::Debug for UdpDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpDatapath")
            .field("local", &self.local)
            .field("support", &self.support)
            .field("mode", &self.config.send_mode)
            .field("stats", &self.stats)
            .field("udp_stats", &self.udp_stats)
            .finish()
    }
}

impl UdpDatapath {
    /// Registers `peer` and returns its id (the existing id when known).
    /// Explicit peers do not count against [`UdpConfig::max_peers`]. With
    /// [`UdpConfig::probe_path_mtu`], the peer's message limit is lowered to
    /// its route's MTU.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    ///
    /// let server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// assert_eq!(client.connect(server.local_addr()), conn, "known peers keep their id");
    /// assert_eq!(client.peer_addr(conn), Some(server.local_addr()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect(&mut self, peer: SocketAddr) -> ConnId {
        self.peers.connect(peer, self.config.probe_path_mtu)
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

    /// The address this datapath is bound to.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// assert!(dp.local_addr().ip().is_loopback());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address of a peer; `None` for an id this datapath did not give.
    ///
    /// # Examples
    ///
    /// See [`UdpDatapath::connect`].
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.peers.get(conn).map(|p| p.addr)
    }

    /// The largest message (without the packet header) `conn` takes;
    /// `None` for an unknown id.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath, ETHERNET_UDP_PAYLOAD};
    /// use cornflakes_datapath::PACKET_HEADER_LEN;
    ///
    /// let mut dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::default())?;
    /// let conn = dp.connect("127.0.0.1:9".parse()?);
    /// assert_eq!(dp.max_message_len(conn), Some(ETHERNET_UDP_PAYLOAD - PACKET_HEADER_LEN));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_message_len(&self, conn: ConnId) -> Option<usize> {
        self.peers.get(conn).map(|p| p.max_payload - PACKET_HEADER_LEN)
    }

    /// What the running kernel supports, as probed at bind.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{SendMode, UdpConfig, UdpDatapath};
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// // Force SENDMSG_ZC only where the kernel has it.
    /// let mode = if dp.kernel_support().sendmsg_zc { SendMode::SendMsgZc } else { SendMode::SendMsg };
    /// # let _ = mode;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kernel_support(&self) -> KernelSupport {
        self.support
    }

    /// Whether the pool is registered as fixed buffers (false when
    /// [`UdpConfig::register_buffers`] is off or the kernel refused).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    ///
    /// let config = UdpConfig { register_buffers: false, ..UdpConfig::loopback() };
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, config)?;
    /// assert!(!dp.fixed_buffers());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fixed_buffers(&self) -> bool {
        self.fixed.enabled()
    }

    /// Sends awaiting completion or notification.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// client.push_buf(conn, 1, b"ping")?;
    /// assert_eq!(client.in_flight(), 1);
    /// client.flush()?;
    /// while client.in_flight() > 0 {
    ///     client.poll_completions()?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// UDP-specific counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// assert_eq!(dp.udp_stats().send_errors, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn udp_stats(&self) -> UdpStats {
        self.udp_stats
    }

    /// How completions reach the datapath (after any fallback at bind).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{TaskRun, UdpConfig, UdpDatapath};
    ///
    /// let config = UdpConfig { task_run: TaskRun::Signal, ..UdpConfig::loopback() };
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, config)?;
    /// assert_eq!(dp.task_run(), TaskRun::Signal);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_run(&self) -> TaskRun {
        self.config.task_run
    }

    /// The errno of the last send the kernel failed (such a send is lost
    /// and counted in [`UdpStats::send_errors`]; a datagram is never
    /// retried).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// assert!(dp.last_send_error().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last_send_error(&self) -> Option<io::Error> {
        self.last_send_error.map(io::Error::from_raw_os_error)
    }
}

impl Datapath for UdpDatapath {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
        self.reap();
        self.submit_reposts_if_low()?;
        Ok(self.take_ready(out, max))
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        self.wait_for_ready(timeout)
    }

    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError> {
        self.send_message(conn, msg_id, msg)
    }

    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        self.send_segments(conn, msg_id, segments)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        self.flush_queued()
    }

    fn poll_completions(&mut self) -> Result<usize, SendError> {
        self.release_completed()
    }

    fn stats(&self) -> DatapathStats {
        self.stats
    }
}

/// What the fuzz targets in `fuzz/` call; not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    /// The receive path's check of one completed datagram (see the `recv`
    /// module): the message id when it is delivered as
    /// `buf[PACKET_HEADER_LEN..len]`, `None` when it is dropped.
    pub fn check_datagram(buf: &[u8], len: usize, msg_flags: i32, max_payload: usize) -> Option<u32> {
        super::recv::check_datagram(buf, len, msg_flags, max_payload)
    }
}

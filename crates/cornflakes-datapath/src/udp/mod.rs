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

mod fixed;
mod probe;
mod sys;

use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use cornflakes::{Message, Pool, PoolConfig, RcBuf, RcBufMut};
use io_uring::{cqueue, opcode, types, IoUring};

pub use probe::KernelSupport;

use self::fixed::FixedBuffers;
use self::sys::RawAddr;
use crate::{
    read_packet_header, write_packet_header, ConnId, Datapath, DatapathStats, Received, RecvError, Segment, SendError,
    PACKET_HEADER_LEN,
};

/// Largest UDP payload over IPv4 (65535 - 20 - 8).
pub const MAX_UDP_PAYLOAD: usize = 65507;
/// UDP payload of one 1500-byte Ethernet frame over IPv4 (1500 - 20 - 8).
pub const ETHERNET_UDP_PAYLOAD: usize = 1472;
/// Most iovecs one `sendmsg` takes (`UIO_MAXIOV`).
pub const MAX_IOVECS: usize = 1024;

/// How sends reach the kernel; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendMode {
    /// Pick per message from what the kernel supports.
    #[default]
    Auto,
    /// Every message with `SENDMSG_ZC` (fails at bind without it).
    SendMsgZc,
    /// Single-segment messages with `SEND_ZC`, the others with plain
    /// `SENDMSG` (fails at bind without `SEND_ZC`).
    SendZc,
    /// Every message with plain `SENDMSG` (the kernel copies at send).
    SendMsg,
}

/// Where the kernel finishes receives and sends (io_uring "task work") and
/// how the datapath learns about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskRun {
    /// The kernel interrupts the thread (an IPI when it is running) to
    /// complete requests; completions appear in the queue by themselves.
    Signal,
    /// `IORING_SETUP_COOP_TASKRUN | TASKRUN_FLAG` (Linux 5.19): no
    /// interrupt; the kernel raises a flag and the datapath enters the
    /// kernel when it sees it while polling.
    #[default]
    Cooperative,
    /// `IORING_SETUP_DEFER_TASKRUN | SINGLE_ISSUER | TASKRUN_FLAG` (Linux
    /// 6.1): work runs only when the datapath enters the kernel, which it
    /// does when the flag is up or it waits.
    Deferred,
}

/// Configuration of a [`UdpDatapath`].
#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// Use this pool (share it with the application); when `None`, a pool
    /// is created from `pool_config`.
    pub pool: Option<Pool>,
    /// Configuration of the pool created when `pool` is `None`.
    pub pool_config: PoolConfig,
    /// Submission queue entries (rounded up to a power of two by the
    /// kernel). Default 256.
    pub sq_entries: u32,
    /// Completion queue entries; 0 picks enough for every send (two
    /// completions each) and receive in flight. Default 0.
    pub cq_entries: u32,
    /// Most receive requests posted at once, each with a pool buffer of
    /// `max_payload + 1` bytes. Between 1 and this many are posted,
    /// adapting to the traffic (see the module docs). Default 32.
    pub recv_buffers: usize,
    /// Sends in flight (awaiting completion or notification) before
    /// [`SendError::Full`]. Default 256.
    pub max_in_flight: usize,
    /// Most segments (iovecs) in one message, at most [`MAX_IOVECS`].
    /// Default 64.
    pub max_segments: usize,
    /// Most bytes of one datagram's UDP payload: packet header plus
    /// message. Default [`ETHERNET_UDP_PAYLOAD`]; up to
    /// [`MAX_UDP_PAYLOAD`] (loopback).
    pub max_payload: usize,
    /// Lower the limit for a peer registered with
    /// [`UdpDatapath::connect`] to its route's MTU (`IP_MTU`). Default true.
    pub probe_path_mtu: bool,
    /// Learn peers from received datagrams. Default true.
    pub learn_peers: bool,
    /// Most learned peers; datagrams from further addresses are dropped.
    /// Default 4096.
    pub max_peers: usize,
    /// How to send. Default [`SendMode::Auto`].
    pub send_mode: SendMode,
    /// Register the pool as io_uring fixed buffers. Default true.
    pub register_buffers: bool,
    /// Socket buffer sizes to request (`SO_RCVBUF`, `SO_SNDBUF`; capped by
    /// the kernel's maxima); 0 keeps the defaults. Default 4 MiB.
    pub socket_buffer: usize,
    /// How long [`Datapath::wait`] spins on the completion queue before
    /// sleeping in the kernel. Default 0.
    pub busy_poll: Duration,
    /// How completions reach the datapath. Default
    /// [`TaskRun::Cooperative`]; falls back to [`TaskRun::Signal`] on
    /// kernels without it.
    pub task_run: TaskRun,
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            pool: None,
            pool_config: PoolConfig::default(),
            sq_entries: 256,
            cq_entries: 0,
            recv_buffers: 32,
            max_in_flight: 256,
            max_segments: 64,
            max_payload: ETHERNET_UDP_PAYLOAD,
            probe_path_mtu: true,
            learn_peers: true,
            max_peers: 4096,
            send_mode: SendMode::Auto,
            register_buffers: true,
            socket_buffer: 4 << 20,
            busy_poll: Duration::ZERO,
            task_run: TaskRun::default(),
        }
    }
}

impl UdpConfig {
    /// Defaults, with datagrams up to [`MAX_UDP_PAYLOAD`] (for loopback).
    pub fn loopback() -> Self {
        Self { max_payload: MAX_UDP_PAYLOAD, ..Self::default() }
    }

    fn check(&self) -> io::Result<()> {
        let bad = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, format!("UdpConfig: {what}")));
        if self.max_payload <= PACKET_HEADER_LEN || self.max_payload > MAX_UDP_PAYLOAD {
            return bad("max_payload must be between 9 and 65507");
        }
        if self.recv_buffers == 0 || self.max_in_flight == 0 {
            return bad("recv_buffers and max_in_flight must be positive");
        }
        if self.max_segments == 0 || self.max_segments > MAX_IOVECS {
            return bad("max_segments must be between 1 and 1024");
        }
        if (self.sq_entries as usize) <= self.recv_buffers {
            return bad("sq_entries must exceed recv_buffers");
        }
        if self.max_in_flight >= 1 << 24 || self.recv_buffers >= 1 << 24 {
            return bad("too many slots");
        }
        Ok(())
    }
}

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
    /// Fixed-buffer registrations (initial and after pool growth).
    pub fixed_buffer_updates: u64,
    /// `io_uring_enter` calls that submitted.
    pub submits: u64,
}

#[derive(Clone, Copy)]
struct Peer {
    addr: SocketAddr,
    raw: RawAddr,
    /// Most bytes of packet header plus message for this peer.
    max_payload: usize,
}

/// Kernel-visible part of a receive slot; written by the kernel while the
/// request is posted.
struct RecvRaw {
    msg: libc::msghdr,
    iov: libc::iovec,
    addr: RawAddr,
    control: [u64; sys::CONTROL_WORDS],
}

struct RecvSlot {
    raw: Box<UnsafeCell<RecvRaw>>,
    /// The receive buffer; writable, and so unreachable from the
    /// application, while the kernel may write into it.
    buf: Option<RcBufMut>,
    posted: bool,
}

struct SendSlot {
    msg: libc::msghdr,
    iovs: Box<[libc::iovec]>,
    addr: RawAddr,
    /// References held until the last completion: first segment, then
    /// zero-copy segments.
    bufs: Vec<RcBuf>,
    busy: bool,
    got_result: bool,
    more: bool,
    notified: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `IORING_OP_SENDMSG`.
    Msg,
    /// `IORING_OP_SENDMSG_ZC`.
    MsgZc,
    /// `IORING_OP_SEND_ZC`.
    Zc,
}

const KIND_SHIFT: u32 = 56;
const KIND_RECV: u64 = 1;
const KIND_SEND: u64 = 2;
const KIND_CANCEL: u64 = 3;

#[inline(always)]
fn user_data(kind: u64, index: usize) -> u64 {
    (kind << KIND_SHIFT) | index as u64
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
    free_sends: Vec<u32>,
    idle_recvs: Vec<u32>,
    ready: VecDeque<Received>,
    peers: Vec<Peer>,
    peer_ids: HashMap<SocketAddr, ConnId>,
    last_peer: Option<(SocketAddr, ConnId)>,
    learned: usize,
    config: UdpConfig,
    support: KernelSupport,
    local: SocketAddr,
    recv_len: usize,
    rxq_ovfl: bool,
    recv_posted: usize,
    /// Receives to keep posted now (adapts between 1 and `recv_buffers`).
    recv_target: usize,
    /// Receive completions in the current reap.
    recv_done: usize,
    recv_unsubmitted: usize,
    in_flight: usize,
    released: usize,
    closing: bool,
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
    /// Binds a UDP socket at `local`, creates the ring, registers the pool
    /// and posts the receives. Fails when a forced send mode is not
    /// supported by the running kernel ([`io::ErrorKind::Unsupported`]).
    pub fn bind(local: SocketAddr, mut config: UdpConfig) -> io::Result<Self> {
        config.check()?;
        let support = KernelSupport::probe();
        let unsupported = |what: &str| {
            Err(io::Error::new(io::ErrorKind::Unsupported, format!("this kernel's io_uring lacks {what}")))
        };
        match config.send_mode {
            SendMode::SendMsgZc if !support.sendmsg_zc => return unsupported("SENDMSG_ZC (Linux 6.1)"),
            SendMode::SendZc if !support.send_zc => return unsupported("SEND_ZC (Linux 6.0)"),
            _ => {}
        }
        let pool = match config.pool.take() {
            Some(p) => p,
            None => Pool::with_config(config.pool_config.clone()).map_err(io::Error::other)?,
        };
        let socket = UdpSocket::bind(local)?;
        let local = socket.local_addr()?;
        if config.socket_buffer > 0 {
            // Best effort: the kernel caps these at net.core.{r,w}mem_max.
            let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&socket, config.socket_buffer);
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&socket, config.socket_buffer);
        }
        let rxq_ovfl = sys::enable_rxq_ovfl(&socket);

        let cq = if config.cq_entries > 0 {
            config.cq_entries
        } else {
            ((2 * config.max_in_flight + config.recv_buffers + 64).next_power_of_two() as u32).max(config.sq_entries)
        };
        let mut builder = IoUring::builder();
        builder.setup_cqsize(cq).setup_submit_all();
        match config.task_run {
            TaskRun::Signal => {}
            TaskRun::Cooperative => {
                builder.setup_coop_taskrun().setup_taskrun_flag();
            }
            TaskRun::Deferred => {
                builder.setup_defer_taskrun().setup_single_issuer().setup_taskrun_flag();
            }
        }
        let ring = match builder.build(config.sq_entries) {
            Ok(r) => r,
            Err(_) => {
                config.task_run = TaskRun::Signal;
                IoUring::builder().setup_cqsize(cq).build(config.sq_entries)?
            }
        };
        let fixed = FixedBuffers::new(&ring, &pool, config.register_buffers);

        let recv_slots = (0..config.recv_buffers)
            .map(|_| RecvSlot {
                raw: Box::new(UnsafeCell::new(RecvRaw {
                    msg: sys::empty_msghdr(),
                    iov: sys::empty_iovec(),
                    addr: RawAddr::empty(),
                    control: [0; sys::CONTROL_WORDS],
                })),
                buf: None,
                posted: false,
            })
            .collect();
        let send_slots = (0..config.max_in_flight)
            .map(|_| SendSlot {
                msg: sys::empty_msghdr(),
                iovs: vec![sys::empty_iovec(); config.max_segments].into_boxed_slice(),
                addr: RawAddr::empty(),
                bufs: Vec::with_capacity(config.max_segments),
                busy: false,
                got_result: false,
                more: false,
                notified: false,
            })
            .collect();
        let mut this = Self {
            ring,
            recv_slots,
            send_slots,
            socket,
            fixed,
            pool,
            free_sends: (0..config.max_in_flight as u32).rev().collect(),
            idle_recvs: (0..config.recv_buffers as u32).rev().collect(),
            ready: VecDeque::with_capacity(config.recv_buffers),
            peers: Vec::new(),
            peer_ids: HashMap::new(),
            last_peer: None,
            learned: 0,
            recv_len: config.max_payload + 1,
            config,
            support,
            local,
            rxq_ovfl,
            recv_posted: 0,
            recv_target: 1,
            recv_done: 0,
            recv_unsubmitted: 0,
            in_flight: 0,
            released: 0,
            closing: false,
            cqes: Vec::with_capacity(256),
            last_send_error: None,
            stats: DatapathStats::default(),
            udp_stats: UdpStats::default(),
        };
        this.udp_stats.fixed_buffer_updates = this.fixed.updates;
        this.post_idle_recvs();
        this.submit()?;
        Ok(this)
    }

    /// Registers `peer` and returns its id (the existing id when known).
    /// Explicit peers do not count against [`UdpConfig::max_peers`]. With
    /// [`UdpConfig::probe_path_mtu`], the peer's message limit is lowered to
    /// its route's MTU.
    pub fn connect(&mut self, peer: SocketAddr) -> ConnId {
        if let Some(&id) = self.peer_ids.get(&peer) {
            return id;
        }
        let mut max_payload = self.config.max_payload;
        if self.config.probe_path_mtu {
            if let Some(path) = path_max_payload(peer) {
                max_payload = max_payload.min(path);
            }
        }
        self.add_peer(peer, max_payload)
    }

    fn add_peer(&mut self, addr: SocketAddr, max_payload: usize) -> ConnId {
        let id = ConnId(self.peers.len() as u32);
        self.peers.push(Peer { addr, raw: RawAddr::new(&addr), max_payload });
        self.peer_ids.insert(addr, id);
        id
    }

    /// The address this datapath is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address of a peer.
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.peers.get(conn.0 as usize).map(|p| p.addr)
    }

    /// The largest message (without the packet header) `conn` takes.
    pub fn max_message_len(&self, conn: ConnId) -> Option<usize> {
        self.peers.get(conn.0 as usize).map(|p| p.max_payload - PACKET_HEADER_LEN)
    }

    /// What the running kernel supports, as probed at bind.
    pub fn kernel_support(&self) -> KernelSupport {
        self.support
    }

    /// Whether the pool is registered as fixed buffers.
    pub fn fixed_buffers(&self) -> bool {
        self.fixed.enabled()
    }

    /// Sends awaiting completion or notification.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// UDP-specific counters.
    pub fn udp_stats(&self) -> UdpStats {
        self.udp_stats
    }

    /// How completions reach the datapath (after any fallback at bind).
    pub fn task_run(&self) -> TaskRun {
        self.config.task_run
    }

    /// The errno of the last send the kernel failed.
    pub fn last_send_error(&self) -> Option<io::Error> {
        self.last_send_error.map(io::Error::from_raw_os_error)
    }

    // ---- receive side ----

    /// Posts receives on idle slots up to the current target (while they
    /// get a buffer and room in the submission queue).
    fn post_idle_recvs(&mut self) {
        while self.recv_posted < self.recv_target {
            let Some(&i) = self.idle_recvs.last() else { break };
            if !self.post_recv(i as usize) {
                break;
            }
            self.idle_recvs.pop();
        }
    }

    /// Posts slot `i`'s receive; false (slot stays idle) without a buffer
    /// or submission queue room.
    fn post_recv(&mut self, i: usize) -> bool {
        let slot = &mut self.recv_slots[i];
        debug_assert!(!slot.posted);
        if slot.buf.is_none() {
            match self.pool.alloc(self.recv_len) {
                Ok(b) => slot.buf = Some(b),
                Err(_) => return false,
            }
        }
        let buf = slot.buf.as_mut().expect("allocated above");
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let raw = slot.raw.get();
        // SAFETY: the slot is not posted, so the kernel does not touch
        // `raw`; the Box gives it a stable address until the slot is
        // dropped, which happens only once no request is posted.
        let entry = unsafe {
            let r = &mut *raw;
            r.iov = libc::iovec { iov_base: ptr.cast(), iov_len: len };
            r.msg = sys::empty_msghdr();
            r.msg.msg_name = r.addr.as_mut_ptr().cast();
            r.msg.msg_namelen = RawAddr::CAPACITY;
            r.msg.msg_iov = &mut r.iov;
            r.msg.msg_iovlen = 1;
            if self.rxq_ovfl {
                r.msg.msg_control = r.control.as_mut_ptr().cast();
                r.msg.msg_controllen = std::mem::size_of_val(&r.control) as _;
            }
            opcode::RecvMsg::new(types::Fd(self.socket.as_raw_fd()), &mut r.msg).build()
        };
        let entry = entry.user_data(user_data(KIND_RECV, i));
        // SAFETY: the header, iovec, address and control buffer live in the
        // slot's Box and the data in the slot's RcBuf (count 1, not read
        // until the completion); both stay until the completion is reaped,
        // and `Drop` waits for it or leaks them.
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            return false;
        }
        slot.posted = true;
        self.recv_posted += 1;
        self.recv_unsubmitted += 1;
        true
    }

    fn on_recv(&mut self, i: usize, res: i32) {
        let slot = &mut self.recv_slots[i];
        debug_assert!(slot.posted);
        slot.posted = false;
        self.recv_posted -= 1;
        if self.closing {
            slot.buf = None;
            return;
        }
        if res < 0 {
            if res != -libc::ECANCELED {
                self.udp_stats.recv_errors += 1;
            }
        } else {
            // SAFETY: the completion was reaped, so the kernel is done with
            // the slot's header, address and control data.
            let raw = unsafe { &*slot.raw.get() };
            if self.rxq_ovfl {
                // SAFETY: msg_control points at the slot's control words,
                // msg_controllen bytes of which the kernel wrote.
                if let Some(dropped) = unsafe { sys::rxq_ovfl_of(&raw.msg) } {
                    self.stats.dropped_no_buffer = u64::from(dropped);
                }
            }
            let len = res as usize;
            let truncated = raw.msg.msg_flags & libc::MSG_TRUNC != 0 || len > self.config.max_payload;
            let buf = slot.buf.as_ref().expect("a posted slot has a buffer");
            let header = if truncated { None } else { read_packet_header(&buf[..len]) };
            let from = raw.addr.socket_addr(raw.msg.msg_namelen);
            match (header, from) {
                (Some(msg_id), Some(from)) => match self.peer_of(from) {
                    Some(conn) => {
                        let buf = self.recv_slots[i].buf.take().expect("checked above");
                        let payload = buf.freeze().slice(PACKET_HEADER_LEN..len);
                        self.ready.push_back(Received { conn, msg_id, payload });
                        self.stats.received += 1;
                    }
                    None => self.udp_stats.dropped_unknown_peer += 1,
                },
                _ => self.stats.dropped_malformed += 1,
            }
        }
        self.recv_done += 1;
        self.idle_recvs.push(i as u32);
    }

    /// The id of `from`, learning it when allowed and there is room.
    #[inline]
    fn peer_of(&mut self, from: SocketAddr) -> Option<ConnId> {
        if let Some((addr, id)) = self.last_peer {
            if addr == from {
                return Some(id);
            }
        }
        let id = match self.peer_ids.get(&from) {
            Some(&id) => id,
            None => {
                if !self.config.learn_peers || self.learned >= self.config.max_peers {
                    return None;
                }
                self.learned += 1;
                self.add_peer(from, self.config.max_payload)
            }
        };
        self.last_peer = Some((from, id));
        Some(id)
    }

    // ---- send side ----

    /// The peer behind `conn`.
    #[inline]
    fn check_send(&self, conn: ConnId) -> Result<Peer, SendError> {
        let peer = *self.peers.get(conn.0 as usize).ok_or(SendError::Closed(conn))?;
        Ok(peer)
    }

    /// A free send slot, when the submission queue has room too.
    #[inline]
    fn reserve_slot(&mut self) -> Result<usize, SendError> {
        let Some(&i) = self.free_sends.last() else {
            return Err(SendError::Full);
        };
        if self.ring.submission().is_full() {
            return Err(SendError::Full);
        }
        Ok(i as usize)
    }

    /// Queues the send prepared in slot `i` (its `bufs` filled).
    fn queue_send(&mut self, i: usize, peer: &Peer, zero_copy: usize) -> Result<(), SendError> {
        self.fixed.sync_if_grown(&self.ring, &self.pool);
        self.udp_stats.fixed_buffer_updates = self.fixed.updates;
        let op = match self.config.send_mode {
            SendMode::Auto if zero_copy > 0 && self.support.sendmsg_zc => Op::MsgZc,
            SendMode::Auto if zero_copy > 0 && self.support.send_zc && self.send_slots[i].bufs.len() == 1 => Op::Zc,
            SendMode::Auto | SendMode::SendMsg => Op::Msg,
            SendMode::SendMsgZc => Op::MsgZc,
            SendMode::SendZc if self.send_slots[i].bufs.len() == 1 => Op::Zc,
            SendMode::SendZc => Op::Msg,
        };
        let zc_flags = if self.support.report_usage { sys::SEND_ZC_REPORT_USAGE } else { 0 };
        let fd = types::Fd(self.socket.as_raw_fd());
        let slot = &mut self.send_slots[i];
        let n = slot.bufs.len();
        for (iov, b) in slot.iovs.iter_mut().zip(&slot.bufs) {
            *iov = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
        }
        slot.addr = peer.raw;
        slot.msg = sys::empty_msghdr();
        slot.msg.msg_name = slot.addr.as_ptr() as *mut libc::c_void;
        slot.msg.msg_namelen = slot.addr.len();
        slot.msg.msg_iov = slot.iovs.as_mut_ptr();
        slot.msg.msg_iovlen = n as _;
        let entry = match op {
            Op::Msg => {
                self.udp_stats.sendmsg += 1;
                opcode::SendMsg::new(fd, &slot.msg).build()
            }
            Op::MsgZc => {
                let index = if self.support.sendmsg_zc_fixed { self.fixed.index_of(&slot.iovs[..n]) } else { None };
                let flags = zc_flags | if index.is_some() { sys::RECVSEND_FIXED_BUF } else { 0 };
                let mut e = opcode::SendMsgZc::new(fd, &slot.msg).ioprio(flags).build();
                match index {
                    Some(index) => {
                        sys::set_buf_index(&mut e, index);
                        self.udp_stats.sendmsg_zc_fixed += 1;
                    }
                    None => self.udp_stats.sendmsg_zc += 1,
                }
                e
            }
            Op::Zc => {
                let iov = slot.iovs[0];
                let index = self.fixed.index_of(&slot.iovs[..1]);
                if index.is_some() {
                    self.udp_stats.send_zc_fixed += 1;
                } else {
                    self.udp_stats.send_zc += 1;
                }
                opcode::SendZc::new(fd, iov.iov_base as *const u8, iov.iov_len as u32)
                    .buf_index(index)
                    .dest_addr(slot.addr.as_ptr())
                    .dest_addr_len(slot.addr.len())
                    .zc_flags(zc_flags)
                    .build()
            }
        };
        let entry = entry.user_data(user_data(KIND_SEND, i));
        // SAFETY: the header, iovecs and address live in slot `i` of a boxed
        // slice that never moves, the data in the RcBufs of `slot.bufs`; the
        // slot is reused only after its last completion (and notification)
        // is reaped, and `Drop` waits for that or leaks the slots.
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            slot.bufs.clear();
            return Err(SendError::Full);
        }
        slot.busy = true;
        slot.got_result = false;
        slot.more = false;
        slot.notified = false;
        self.free_sends.pop();
        self.in_flight += 1;
        self.stats.sent += 1;
        self.stats.zero_copy_segments += zero_copy as u64;
        Ok(())
    }

    fn on_send(&mut self, i: usize, res: i32, flags: u32) {
        let slot = &mut self.send_slots[i];
        if !slot.busy {
            return;
        }
        if cqueue::notif(flags) {
            self.udp_stats.notifications += 1;
            if res as u32 & sys::NOTIF_USAGE_ZC_COPIED != 0 {
                self.stats.zero_copy_copied += 1;
            }
            slot.notified = true;
            if !(slot.got_result && slot.more) {
                return;
            }
        } else {
            slot.got_result = true;
            slot.more = cqueue::more(flags);
            if res < 0 {
                self.udp_stats.send_errors += 1;
                self.last_send_error = Some(-res);
            }
            if slot.more && !slot.notified {
                return;
            }
        }
        slot.bufs.clear();
        slot.busy = false;
        self.free_sends.push(i as u32);
        self.in_flight -= 1;
        self.stats.completions += 1;
        self.released += 1;
    }

    // ---- ring ----

    /// Processes every completion in the queue; reposts receives.
    fn reap(&mut self) {
        if self.config.task_run != TaskRun::Signal && self.ring.submission().taskrun() {
            // Completions are waiting for us to enter the kernel.
            self.enter();
        }
        let mut cqes = std::mem::take(&mut self.cqes);
        self.recv_done = 0;
        loop {
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
            if cqes.is_empty() {
                break;
            }
            for &(ud, res, flags) in &cqes {
                let index = (ud & ((1 << KIND_SHIFT) - 1)) as usize;
                match ud >> KIND_SHIFT {
                    KIND_RECV => self.on_recv(index, res),
                    KIND_SEND => self.on_send(index, res, flags),
                    _ => {}
                }
            }
        }
        self.cqes = cqes;
        if self.closing {
            return;
        }
        // Every posted receive waits on the socket and is woken by every
        // datagram (all but one then find nothing and re-arm), so keep few
        // posted while traffic is light and more while it comes in bursts:
        // double when all posted receives completed in one pass, halve
        // when only one did.
        if self.recv_done > 0 {
            if self.recv_done >= self.recv_target {
                self.recv_target = (self.recv_target * 2).min(self.config.recv_buffers);
            } else if self.recv_done == 1 {
                self.recv_target = (self.recv_target / 2).max(1);
            }
        }
        if self.recv_posted < self.recv_target {
            self.post_idle_recvs();
        }
    }

    /// Submits queued entries (one `io_uring_enter`).
    fn submit(&mut self) -> io::Result<()> {
        if self.ring.submission().is_empty() {
            return Ok(());
        }
        loop {
            match self.ring.submit() {
                Ok(_) => {
                    self.udp_stats.submits += 1;
                    self.recv_unsubmitted = 0;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Enters the kernel to submit and to run pending completion work.
    fn enter(&mut self) {
        if self.ring.submit().is_ok() {
            self.udp_stats.submits += 1;
            self.recv_unsubmitted = 0;
        }
    }

    /// Submits reposted receives once fewer than half the receives are in
    /// the kernel, so that a receive-only loop keeps the socket fed without
    /// a system call per datagram.
    fn submit_reposts_if_low(&mut self) -> io::Result<()> {
        let in_kernel = self.recv_posted - self.recv_unsubmitted;
        if self.recv_unsubmitted > 0 && in_kernel * 2 < self.recv_target.max(2) {
            self.submit()?;
        }
        Ok(())
    }
}

/// The largest UDP payload the route to `peer` carries (`IP_MTU` of a
/// socket connected to it, minus IP and UDP headers).
fn path_max_payload(peer: SocketAddr) -> Option<usize> {
    let (any, overhead): (SocketAddr, usize) = match peer {
        SocketAddr::V4(_) => (SocketAddr::from(([0, 0, 0, 0], 0)), 28),
        SocketAddr::V6(_) => (SocketAddr::from(([0u16; 8], 0)), 48),
    };
    let s = UdpSocket::bind(any).ok()?;
    s.connect(peer).ok()?;
    let mtu = match peer {
        SocketAddr::V4(_) => rustix::net::sockopt::ip_mtu(&s).ok()?,
        SocketAddr::V6(_) => rustix::net::sockopt::ipv6_mtu(&s).ok()?,
    } as usize;
    Some(mtu.checked_sub(overhead)?.min(MAX_UDP_PAYLOAD))
}

impl Datapath for UdpDatapath {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
        self.reap();
        self.submit_reposts_if_low()?;
        let n = max.min(self.ready.len());
        out.extend(self.ready.drain(..n));
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        self.reap();
        if !self.ready.is_empty() {
            return Ok(true);
        }
        self.submit()?;
        let start = Instant::now();
        let spin = self.config.busy_poll.min(timeout);
        while start.elapsed() < spin {
            self.reap();
            if !self.ready.is_empty() {
                return Ok(true);
            }
            if self.recv_unsubmitted > 0 {
                self.submit()?;
            }
            std::hint::spin_loop();
        }
        loop {
            let Some(left) = timeout.checked_sub(start.elapsed()).filter(|d| !d.is_zero()) else {
                self.reap();
                return Ok(!self.ready.is_empty());
            };
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => self.recv_unsubmitted = 0,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
                Err(e) => return Err(e.into()),
            }
            self.reap();
            if !self.ready.is_empty() {
                return Ok(true);
            }
        }
    }

    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError> {
        let peer = self.check_send(conn)?;
        let layout = msg.layout();
        let len = layout.total_len();
        if PACKET_HEADER_LEN + len > peer.max_payload {
            return Err(SendError::TooLarge { len, max: peer.max_payload - PACKET_HEADER_LEN });
        }
        let count = 1 + layout.zero_copy_entries;
        if count > self.config.max_segments {
            return Err(SendError::TooManySegments { count, max: self.config.max_segments });
        }
        let i = self.reserve_slot()?;
        let mut first = self.pool.alloc(PACKET_HEADER_LEN + layout.first_segment_len())?;
        write_packet_header(&mut first, msg_id);
        msg.write_header_and_copies(&layout, &mut first[PACKET_HEADER_LEN..])?;
        let bufs = &mut self.send_slots[i].bufs;
        debug_assert!(bufs.is_empty());
        bufs.push(first.freeze());
        msg.for_each_zero_copy(|b| {
            if !b.is_empty() {
                bufs.push(b.clone());
            }
        });
        let zero_copy = bufs.len() - 1;
        self.queue_send(i, &peer, zero_copy)
    }

    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        let peer = self.check_send(conn)?;
        let (mut len, mut copied, mut count, mut after_zero_copy) = (0, 0, 1, false);
        for s in segments {
            match s {
                Segment::Copy(b) => {
                    len += b.len();
                    copied += b.len();
                    if after_zero_copy && !b.is_empty() {
                        count += 1;
                        after_zero_copy = false;
                    }
                }
                Segment::ZeroCopy(b) if !b.is_empty() => {
                    len += b.len();
                    count += 1;
                    after_zero_copy = true;
                }
                Segment::ZeroCopy(_) => {}
            }
        }
        if PACKET_HEADER_LEN + len > peer.max_payload {
            return Err(SendError::TooLarge { len, max: peer.max_payload - PACKET_HEADER_LEN });
        }
        if count > self.config.max_segments {
            return Err(SendError::TooManySegments { count, max: self.config.max_segments });
        }
        let i = self.reserve_slot()?;
        // All copied bytes go into one buffer; each run of copies between
        // zero-copy segments becomes a view of it, so wire order is kept.
        let mut first = self.pool.alloc(PACKET_HEADER_LEN + copied)?;
        let bytes = first.as_mut_slice();
        write_packet_header(bytes, msg_id);
        let mut at = PACKET_HEADER_LEN;
        for s in segments {
            if let Segment::Copy(b) = s {
                bytes[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
        }
        let first = first.freeze();
        let bufs = &mut self.send_slots[i].bufs;
        debug_assert!(bufs.is_empty());
        let (mut run_start, mut at, mut zero_copy) = (0, PACKET_HEADER_LEN, 0);
        for s in segments {
            match s {
                Segment::Copy(b) => at += b.len(),
                Segment::ZeroCopy(b) if !b.is_empty() => {
                    if at > run_start {
                        bufs.push(first.slice(run_start..at));
                    }
                    run_start = at;
                    bufs.push(b.clone());
                    zero_copy += 1;
                }
                Segment::ZeroCopy(_) => {}
            }
        }
        if at > run_start {
            bufs.push(first.slice(run_start..at));
        }
        drop(first);
        self.queue_send(i, &peer, zero_copy)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        match self.submit() {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {
                self.reap();
                Err(SendError::Full)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn poll_completions(&mut self) -> Result<usize, SendError> {
        self.released = 0;
        self.reap();
        self.submit_reposts_if_low()?;
        Ok(self.released)
    }

    fn stats(&self) -> DatapathStats {
        self.stats
    }
}

impl Drop for UdpDatapath {
    /// Cancels the posted receives and waits (up to two seconds) for every
    /// request to complete, so that the kernel never writes into or reads
    /// from memory that is reused; whatever is still owned by the kernel
    /// after that is leaked instead of freed.
    fn drop(&mut self) {
        self.closing = true;
        for i in 0..self.recv_slots.len() {
            if !self.recv_slots[i].posted {
                continue;
            }
            let entry = opcode::AsyncCancel::new(user_data(KIND_RECV, i)).build().user_data(user_data(KIND_CANCEL, i));
            // SAFETY: a cancel request points at no memory.
            while !unsafe { sys::push(&mut self.ring, &entry) } {
                if self.submit().is_err() {
                    break;
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let _ = self.submit();
            self.reap();
            if self.recv_posted == 0 && self.in_flight == 0 {
                return;
            }
            if Instant::now() >= deadline {
                break;
            }
            let ts = types::Timespec::from(Duration::from_millis(10));
            let _ = self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
        }
        // The kernel still owns some requests: leak what they point at.
        std::mem::forget(std::mem::take(&mut self.recv_slots));
        std::mem::forget(std::mem::take(&mut self.send_slots));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        let ud = user_data(KIND_SEND, 12345);
        assert_eq!(ud >> KIND_SHIFT, KIND_SEND);
        assert_eq!(ud & ((1 << KIND_SHIFT) - 1), 12345);
    }

    #[test]
    fn config_is_checked() {
        assert!(UdpConfig { max_payload: 8, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig { max_payload: 65508, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig { max_segments: 0, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig { recv_buffers: 300, ..UdpConfig::default() }.check().is_err());
        assert!(UdpConfig::loopback().check().is_ok());
    }
}

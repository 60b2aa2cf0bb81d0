//! Shared-memory datapath: processes on one host, talking through
//! SocksDirect-style rings (SocksDirect §4.2, §4.4) in memfds.
//!
//! # Layers
//!
//! - [`ring`]: one single-producer, single-consumer ring of variable-length
//!   records, with credits, usable on its own (the bare-ring benchmark).
//! - [`proto`]: the hello exchanged at set-up and the layout of a message
//!   record (descriptors, packet, inline segments).
//! - [`ShmDatapath`]: connections (two rings each), serialize-and-send into
//!   ring slots, gather on receive, completions, sleeping, peer death.
//!
//! # Contract
//!
//! - **Set-up** goes through a Unix-domain stream socket:
//!   [`ShmDatapath::listen`] binds one (connections are accepted by
//!   [`ShmDatapath::accept`], and automatically while waiting or idle),
//!   [`ShmDatapath::connect`] / [`ShmDatapath::connect_to`] dial one, and
//!   [`ShmDatapath::pair`] links two datapaths in one process. Each side
//!   creates, seals and sends the memfd of the ring it *consumes*, plus its
//!   pool's memfd (`SCM_RIGHTS`); see [`proto`]. The socket stays open for
//!   the life of the connection: it carries wake-up bytes and tells of the
//!   peer's death.
//! - **Sending** ([`Datapath::push_message`], [`Datapath::push_segments`])
//!   writes straight into the peer's ring and **publishes immediately**;
//!   [`Datapath::flush`] has nothing to do. A full ring is
//!   [`SendError::Full`] (receive, poll completions, retry); a body that
//!   can never fit (half the ring) or a message over the peer's limit is
//!   [`SendError::TooLarge`].
//! - **Receiving** ([`Datapath::recv_batch`]) never blocks and never trusts
//!   the peer: see *Hostile peers* below.
//! - **Threads**: a datapath, like its [`Pool`], stays on one thread.
//!
//! # Zero-copy: gather on receive
//!
//! ```text
//!  sender process                                   receiver process
//!  ┌──────────────┐  ring record (in receiver's    ┌──────────────────────┐
//!  │ pool memfd   │  inbox memfd, mapped by both)  │ pool buffer (RcBuf)  │
//!  │  ┌────────┐  │  ┌─────┬─────┬─────┬────────┐ │ ┌──────┬────────────┐ │
//!  │  │ value  │◄─┼──┤desc │desc │pkt  │ first  │ │ │first │ value …    │ │
//!  │  └────────┘  │  │     │     │hdr  │segment │─┼►│seg.  │ (gathered) │ │
//!  └──────┬───────┘  └─────┴─────┴─────┴────────┘ │ └──────┴────────────┘ │
//!         │ mapped read-only in the receiver ──────┼──────────▲            │
//! ```
//!
//! A zero-copy segment is not copied by the sender: the record carries a
//! descriptor (offset in the sender's pool memfd, length), the sender keeps
//! a clone of the [`RcBuf`] in an in-flight table, and the receiver, which
//! has the sender's pool memfd mapped read-only (re-mapped after an `fstat`
//! when a descriptor points past the mapping because the sender's pool
//! grew), copies the segment into one of its own pool buffers right after
//! the first segment, as a NIC's DMA engine would. [`Received::payload`] is
//! thus one contiguous buffer of the whole message.
//!
//! We gather rather than hand out views of the peer's memory in place
//! because a view in place would (1) keep the sender's buffer busy for as
//! long as the application holds the message, unbounded, (2) be memory the
//! peer can still write, so decoding would race with a hostile or buggy
//! sender, and (3) not be an [`RcBuf`] of our pool, so it could not be sent
//! on zero-copy or recovered. The copy on receive is the one a NIC would do;
//! the sender's copy is what zero-copy saves.
//!
//! # Completions
//!
//! A record holding pool descriptors sets [`proto::INFO_NEEDS_ACK`]. The
//! receiver counts such records as it consumes them (valid or not) and, at
//! the end of each `recv_batch`, stores the count in the ring's
//! acknowledgement word (a line the sender only reads). The sender numbers
//! these records the same way; [`Datapath::poll_completions`] reads the word
//! and drops the clones of every send up to it. A value the application
//! drops while its send is in flight thus stays intact until the receiver
//! has copied it. Messages without pool segments need no completion.
//!
//! # Credits, sleeping and waking (SocksDirect §4.2, §4.4)
//!
//! Credits are the ring's own (see [`ring`]): returned once per half ring.
//! [`Datapath::wait`] busy-polls every inbound ring for
//! [`ShmConfig::spin`] (50 µs by default), then sets the *sleeping* flag in
//! each inbound ring, checks the rings again (a `SeqCst` store then load:
//! with the sender's `SeqCst` publish then flag load, at least one side sees
//! the other, so no wake-up is lost), and sleeps in `poll` on the
//! connections' sockets. A sender that finds the flag set after publishing
//! clears it and writes one byte to the socket: one system call per sleep,
//! none while the receiver is awake ([`ShmStats::wakeups_sent`],
//! [`ShmStats::sleeps`]).
//!
//! We wake through the socket rather than a futex or eventfd because the
//! sleeper must watch the sockets anyway (peer death, new connections): one
//! `poll` covers all, and no descriptor from the peer is ever written to (a
//! hostile peer could pass a blocking pipe for an eventfd).
//!
//! # Peer death
//!
//! The socket reaches end-of-file (or errors) when the peer exits or is
//! killed. We look at it while sleeping, when sending finds the ring full,
//! after [`ShmConfig::idle_polls_per_check`] consecutive empty
//! `recv_batch` calls, and when a wake-up byte cannot be sent. A dead
//! connection's ring is drained of complete records, then the connection
//! is reclaimed (rings unmapped, in-flight buffers released, peer pool
//! unmapped) and reported once as [`RecvError::Closed`]; sends to it fail
//! with [`SendError::Closed`].
//!
//! # Hostile peers
//!
//! Everything read from shared memory is copied out once, then checked:
//! record headers against the ring (an impossible one means the ring is
//! corrupt: the connection is closed), descriptors against the descriptor
//! count and record length, pool offsets and lengths against the mapping of
//! the peer's pool, the total against [`ShmConfig::max_message`], and the
//! packet header. A malformed record is dropped and counted in
//! [`DatapathStats::dropped_malformed`]; serving continues. Ring memfds are
//! sealed against shrinking by their creator and checked by the other side.
//! So is the peer's pool memfd (`cornflakes::Pool` seals it against
//! shrinking): a peer whose pool file is not sealed is refused
//! ([`ShmConfig::require_sealed_peer_pool`]), since it could shrink the
//! file and make a gather fault (`SIGBUS`).

pub mod proto;
pub mod ring;
mod sys;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cornflakes::mem::MAX_ALLOC;
use cornflakes::{Message, Pool, PoolConfig, RcBuf};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::{RecvFlags, SendFlags};

use crate::{
    read_packet_header, write_packet_header, ConnId, Datapath, DatapathStats, Received, RecvError, Segment, SendError,
    PACKET_HEADER_LEN,
};
use proto::{Desc, Hello, DESC_INLINE, DESC_LEN, DESC_POOL, HELLO_LEN, INFO_DESC_MASK, INFO_NEEDS_ACK, MAX_SEGMENTS};
use ring::{PushError, RingError, DEFAULT_RING_SIZE};
pub use ring::{Ring, RingConsumer, RingCorrupt, RingProducer};
pub use sys::{recv_fds, send_fds};

/// How a [`ShmDatapath`] behaves.
#[derive(Clone, Debug)]
pub struct ShmConfig {
    /// Data bytes of each inbound ring (a power of two, 4 KiB to 1 GiB).
    /// Default 1 MiB. A message body in the ring is at most half of it.
    pub ring_size: usize,
    /// How long [`Datapath::wait`] busy-polls before sleeping. Default 50 µs.
    pub spin: Duration,
    /// Largest message accepted (payload after the packet header); at most
    /// the pool's largest buffer (2 MiB), the default.
    pub max_message: usize,
    /// Limit on connection set-up (reading the peer's hello). Default 5 s.
    pub handshake_timeout: Duration,
    /// Consecutive empty `recv_batch` calls between two checks of the
    /// sockets (peer death, new connections). Default 16384 (a few hundred
    /// microseconds of idle polling); a busy datapath never reaches it.
    pub idle_polls_per_check: u32,
    /// Largest peer pool mapped (address space, not memory). Default 1 TiB.
    pub max_peer_pool_bytes: usize,
    /// Refuse peers whose pool memfd is not sealed against shrinking.
    /// Default true (`cornflakes::Pool` seals its memfd).
    pub require_sealed_peer_pool: bool,
    /// The pool to create (ignored by [`ShmDatapath::with_pool`]).
    pub pool: PoolConfig,
}

impl Default for ShmConfig {
    fn default() -> Self {
        Self {
            ring_size: DEFAULT_RING_SIZE,
            spin: Duration::from_micros(50),
            max_message: MAX_ALLOC,
            handshake_timeout: Duration::from_secs(5),
            idle_polls_per_check: 16384,
            max_peer_pool_bytes: 1 << 40,
            require_sealed_peer_pool: true,
            pool: PoolConfig::default(),
        }
    }
}

/// Why creating a datapath or a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// The operating system refused.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The pool could not be created.
    #[error(transparent)]
    Pool(#[from] cornflakes::mem::PoolError),
    /// A ring could not be created or the peer's could not be attached.
    #[error(transparent)]
    Ring(#[from] RingError),
    /// The peer's hello was missing or wrong.
    #[error("connection set-up failed: {0}")]
    Handshake(&'static str),
    /// The configuration is unusable.
    #[error("bad configuration: {0}")]
    BadConfig(&'static str),
}

/// Counters specific to shared memory, beside [`DatapathStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShmStats {
    /// Wake-up bytes sent to sleeping peers (one system call each).
    pub wakeups_sent: u64,
    /// Times [`Datapath::wait`] went to sleep in `poll`.
    pub sleeps: u64,
    /// Non-blocking socket checks (idle receive, full ring).
    pub liveness_checks: u64,
    /// Re-mappings of a peer's pool after it grew.
    pub peer_pool_remaps: u64,
    /// Connections closed because their ring was corrupt.
    pub corrupt_rings: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Incoming connections whose set-up failed.
    pub handshake_failures: u64,
    /// Connections whose peer went away.
    pub peers_closed: u64,
}

/// The sender's pool memfd, mapped read-only.
struct PeerPool {
    fd: OwnedFd,
    map: Option<sys::Mapping>,
    len: usize,
}

impl PeerPool {
    /// Makes sure `end` bytes are mapped, re-mapping after `fstat` if the
    /// peer's pool grew. False when the file is not that long (or too long).
    #[cold]
    fn grow(&mut self, end: u64, max: usize, stats: &mut ShmStats) -> bool {
        let Ok(size) = sys::file_size(self.fd.as_fd()) else { return false };
        if end > size || size > max as u64 || size <= self.len as u64 {
            return false;
        }
        match sys::Mapping::map(self.fd.as_fd(), size as usize, false) {
            Ok(m) => {
                self.map = Some(m);
                self.len = size as usize;
                stats.peer_pool_remaps += 1;
                true
            }
            Err(_) => false,
        }
    }
}

/// One connection: a ring each way, the socket, the peer's pool.
struct Conn {
    tx: RingProducer,
    rx: RingConsumer,
    /// Sends holding pool descriptors, oldest first: (send number, buffer).
    inflight: VecDeque<(u64, RcBuf)>,
    /// Pool-descriptor sends so far (numbered from 1).
    zc_sent: u64,
    /// Highest send number the peer acknowledged.
    zc_acked: u64,
    /// Records needing acknowledgement consumed from `rx`.
    zc_received: u64,
    /// Last value published in `rx`'s acknowledgement word.
    zc_reported: u64,
    /// Scratch for the descriptors of the record being received.
    descs: Vec<Desc>,
    peer_max_message: usize,
    full_streak: u32,
    /// The peer is gone: drain `rx`, then reclaim.
    dead: bool,
    /// `rx` is corrupt: reclaim without draining.
    corrupt: bool,
    peer: PeerPool,
    sock: UnixStream,
}

struct Slot {
    generation: u16,
    conn: Option<Conn>,
}

/// Why a record was not delivered.
enum Discard {
    Malformed,
    NoBuffer,
}

/// A connection whose hello has been sent but not yet received.
struct PendingConn {
    sock: UnixStream,
    rx: RingConsumer,
}

/// The shared-memory datapath. See the [module docs](self).
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
/// use cornflakes_datapath::Datapath;
/// use std::time::Duration;
///
/// let (mut a, mut b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
/// let conn = a.connections().next().unwrap();
/// a.push_buf(conn, 7, b"hello").unwrap();
/// assert!(b.wait(Duration::from_secs(1)).unwrap());
/// let mut got = Vec::new();
/// b.recv_batch(&mut got, 8).unwrap();
/// assert_eq!((got[0].msg_id, &got[0].payload[..]), (7, &b"hello"[..]));
/// ```
pub struct ShmDatapath {
    slots: Vec<Slot>,
    free_slots: Vec<u16>,
    pool: Pool,
    stats: DatapathStats,
    shm: ShmStats,
    closed: VecDeque<ConnId>,
    idle_polls: u32,
    rr: usize,
    inflight_sends: usize,
    listener: Option<(UnixListener, PathBuf)>,
    config: ShmConfig,
}

impl std::fmt::Debug for ShmDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmDatapath")
            .field("connections", &self.connections().count())
            .field("stats", &self.stats)
            .field("shm", &self.shm)
            .finish()
    }
}

#[inline(always)]
fn conn_id(index: usize, generation: u16) -> ConnId {
    ConnId(((generation as u32) << 16) | index as u32)
}

impl ShmDatapath {
    /// A datapath with no connections and a new pool.
    pub fn new(config: ShmConfig) -> Result<Self, ShmError> {
        let pool = Pool::with_config(config.pool.clone())?;
        Self::with_pool(pool, config)
    }

    /// A datapath over an existing pool (whose memfd peers will map).
    pub fn with_pool(pool: Pool, mut config: ShmConfig) -> Result<Self, ShmError> {
        if !config.ring_size.is_power_of_two()
            || !(ring::MIN_RING_SIZE..=ring::MAX_RING_SIZE).contains(&config.ring_size)
        {
            return Err(ShmError::BadConfig("ring_size must be a power of two between 4 KiB and 1 GiB"));
        }
        config.max_message = config.max_message.min(MAX_ALLOC);
        Ok(Self {
            slots: Vec::new(),
            free_slots: Vec::new(),
            pool,
            stats: DatapathStats::default(),
            shm: ShmStats::default(),
            closed: VecDeque::new(),
            idle_polls: 0,
            rr: 0,
            inflight_sends: 0,
            listener: None,
            config,
        })
    }

    /// A datapath listening on the Unix socket `path` (a stale socket file
    /// left by a dead process is replaced; the file is removed on drop).
    pub fn listen(path: impl AsRef<Path>, config: ShmConfig) -> Result<Self, ShmError> {
        let mut dp = Self::new(config)?;
        dp.bind(path.as_ref())?;
        Ok(dp)
    }

    /// Starts listening on `path` (see [`listen`](Self::listen)).
    pub fn bind(&mut self, path: &Path) -> Result<(), ShmError> {
        let listener = match UnixListener::bind(path) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && UnixStream::connect(path).is_err() => {
                std::fs::remove_file(path)?;
                UnixListener::bind(path)?
            }
            Err(e) => return Err(e.into()),
        };
        listener.set_nonblocking(true)?;
        self.listener = Some((listener, path.to_path_buf()));
        Ok(())
    }

    /// A datapath with one connection, to the datapath listening at `path`
    /// (its id is the first of [`connections`](Self::connections)).
    pub fn connect(path: impl AsRef<Path>, config: ShmConfig) -> Result<Self, ShmError> {
        let mut dp = Self::new(config)?;
        dp.connect_to(path)?;
        Ok(dp)
    }

    /// Adds a connection to the datapath listening at `path`.
    pub fn connect_to(&mut self, path: impl AsRef<Path>) -> Result<ConnId, ShmError> {
        let sock = UnixStream::connect(path)?;
        let pending = self.start_handshake(sock)?;
        self.finish_handshake(pending)
    }

    /// Two connected datapaths in this process (tests, benchmarks).
    pub fn pair(config: ShmConfig) -> Result<(Self, Self), ShmError> {
        let mut a = Self::new(config.clone())?;
        let mut b = Self::new(config)?;
        Self::link(&mut a, &mut b)?;
        Ok((a, b))
    }

    /// Adds a connection between two datapaths of this process; returns
    /// its id on each side.
    pub fn link(a: &mut Self, b: &mut Self) -> Result<(ConnId, ConnId), ShmError> {
        let (sa, sb) = UnixStream::pair()?;
        let pa = a.start_handshake(sa)?;
        let pb = b.start_handshake(sb)?;
        Ok((a.finish_handshake(pa)?, b.finish_handshake(pb)?))
    }

    /// Accepts one connection, waiting up to `timeout` for it (the
    /// datapath also accepts by itself while waiting or idle).
    pub fn accept(&mut self, timeout: Duration) -> Result<ConnId, ShmError> {
        let Some((listener, _)) = &self.listener else {
            return Err(ShmError::BadConfig("accept on a datapath that is not listening"));
        };
        let deadline = Instant::now() + timeout;
        loop {
            match listener.accept() {
                Ok((sock, _)) => {
                    let id = self.handshake_accepted(sock)?;
                    self.shm.accepted += 1;
                    return Ok(id);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(ShmError::Io(io::ErrorKind::TimedOut.into()));
                    }
                    let mut fds = [PollFd::new(listener, PollFlags::IN)];
                    let ts = timespec(left);
                    match poll(&mut fds, Some(&ts)) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(ShmError::Io(e.into())),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn handshake_accepted(&mut self, sock: UnixStream) -> Result<ConnId, ShmError> {
        sock.set_nonblocking(false)?;
        let pending = self.start_handshake(sock)?;
        self.finish_handshake(pending)
    }

    /// Sends our hello (our inbound ring and pool memfds).
    fn start_handshake(&mut self, sock: UnixStream) -> Result<PendingConn, ShmError> {
        sock.set_read_timeout(Some(self.config.handshake_timeout.max(Duration::from_millis(1))))?;
        sock.set_write_timeout(Some(self.config.handshake_timeout.max(Duration::from_millis(1))))?;
        let rx = RingConsumer::create(self.config.ring_size)?;
        let hello = Hello {
            ring_size: self.config.ring_size as u64,
            max_message: self.config.max_message as u64,
            pid: std::process::id(),
        };
        send_fds(&sock, &hello.encode(), &[rx.memfd(), self.pool.backing_fd()])?;
        Ok(PendingConn { sock, rx })
    }

    /// Reads the peer's hello, maps its ring and pool, adds the connection.
    fn finish_handshake(&mut self, pending: PendingConn) -> Result<ConnId, ShmError> {
        let PendingConn { sock, rx } = pending;
        let mut buf = [0u8; HELLO_LEN];
        let mut got = 0;
        let mut fds = Vec::new();
        while got < HELLO_LEN {
            let (n, more) = recv_fds(&sock, &mut buf[got..]).map_err(|e| {
                if e.kind() == io::ErrorKind::WouldBlock {
                    ShmError::Handshake("timed out waiting for the peer's hello")
                } else {
                    ShmError::Io(e)
                }
            })?;
            if n == 0 {
                return Err(ShmError::Handshake("peer closed the socket during set-up"));
            }
            got += n;
            fds.extend(more);
        }
        let hello = Hello::decode(&buf).ok_or(ShmError::Handshake("bad hello"))?;
        if fds.len() != 2 {
            return Err(ShmError::Handshake("expected two descriptors with the hello"));
        }
        let pool_fd = fds.pop().expect("two descriptors");
        let ring_fd = fds.pop().expect("two descriptors");
        let tx = RingProducer::attach(ring_fd)?;
        if tx.size() as u64 != hello.ring_size {
            return Err(ShmError::Handshake("ring size disagrees with the hello"));
        }
        if self.config.require_sealed_peer_pool && !sys::is_shrink_sealed(pool_fd.as_fd()) {
            return Err(ShmError::Handshake("peer pool memfd is not sealed against shrinking"));
        }
        let pool_len = sys::file_size(pool_fd.as_fd())?;
        if pool_len > self.config.max_peer_pool_bytes as u64 {
            return Err(ShmError::Handshake("peer pool larger than max_peer_pool_bytes"));
        }
        let map =
            if pool_len == 0 { None } else { Some(sys::Mapping::map(pool_fd.as_fd(), pool_len as usize, false)?) };
        sock.set_nonblocking(true)?;
        let conn = Conn {
            tx,
            rx,
            inflight: VecDeque::with_capacity(64),
            zc_sent: 0,
            zc_acked: 0,
            zc_received: 0,
            zc_reported: 0,
            descs: Vec::with_capacity(MAX_SEGMENTS),
            peer_max_message: usize::try_from(hello.max_message).unwrap_or(usize::MAX).min(MAX_ALLOC),
            full_streak: 0,
            dead: false,
            corrupt: false,
            peer: PeerPool { fd: pool_fd, map, len: pool_len as usize },
            sock,
        };
        Ok(self.insert(conn))
    }

    fn insert(&mut self, conn: Conn) -> ConnId {
        if let Some(i) = self.free_slots.pop() {
            let slot = &mut self.slots[i as usize];
            slot.conn = Some(conn);
            conn_id(i as usize, slot.generation)
        } else {
            assert!(self.slots.len() < 1 << 16, "more than 65536 shared-memory connections");
            self.slots.push(Slot { generation: 0, conn: Some(conn) });
            conn_id(self.slots.len() - 1, 0)
        }
    }

    /// Open connections, in slot order.
    pub fn connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.conn.is_some()).map(|(i, s)| conn_id(i, s.generation))
    }

    /// Closes a connection: the peer sees it closed; its in-flight buffers
    /// are released. No `Closed` event is reported for it here.
    pub fn close(&mut self, conn: ConnId) {
        if let Some(i) = self.slot_index(conn) {
            self.reclaim(i, false);
        }
    }

    /// Counters specific to shared memory.
    pub fn shm_stats(&self) -> ShmStats {
        self.shm
    }

    /// Zero-copy buffers held for sends on `conn` not yet completed.
    pub fn inflight(&self, conn: ConnId) -> usize {
        self.slot_index(conn).and_then(|i| self.slots[i].conn.as_ref()).map_or(0, |c| c.inflight.len())
    }

    #[inline(always)]
    fn slot_index(&self, id: ConnId) -> Option<usize> {
        let i = (id.0 & 0xFFFF) as usize;
        let slot = self.slots.get(i)?;
        (slot.generation == (id.0 >> 16) as u16 && slot.conn.is_some()).then_some(i)
    }

    /// Drops a connection: unmaps its rings and the peer's pool, releases
    /// in-flight buffers, closes the socket.
    fn reclaim(&mut self, index: usize, report: bool) {
        let slot = &mut self.slots[index];
        let Some(conn) = slot.conn.take() else { return };
        let id = conn_id(index, slot.generation);
        slot.generation = slot.generation.wrapping_add(1);
        self.free_slots.push(index as u16);
        self.inflight_sends -= conn.inflight.len();
        drop(conn);
        if report {
            self.shm.peers_closed += 1;
            self.closed.push_back(id);
        }
    }

    /// Whether a receive may succeed now: a record at some ring head, a
    /// dead connection to report.
    #[inline]
    fn ready(&self) -> bool {
        !self.closed.is_empty() || self.slots.iter().flat_map(|s| &s.conn).any(|c| c.dead || c.rx.has_data())
    }

    fn set_sleeping(&self, sleeping: bool) {
        for c in self.slots.iter().flat_map(|s| &s.conn) {
            c.rx.set_sleeping(sleeping);
        }
    }

    /// Polls the listener and every live socket for up to `timeout`:
    /// drains wake-up bytes, marks dead peers, accepts connections.
    /// Returns whether a connection died or was accepted (a wake-up byte
    /// alone is not news: the caller looks at the rings).
    fn poll_sockets(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        let mut fds = Vec::with_capacity(self.slots.len() + 1);
        let mut owners = Vec::with_capacity(self.slots.len());
        let listening = self.listener.is_some();
        if let Some((l, _)) = &self.listener {
            fds.push(PollFd::new(l, PollFlags::IN));
        }
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(c) = s.conn.as_ref().filter(|c| !c.dead) {
                fds.push(PollFd::new(&c.sock, PollFlags::IN));
                owners.push(i);
            }
        }
        let ts = timespec(timeout);
        match poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(RecvError::Io(e.into())),
        }
        let revents: Vec<PollFlags> = fds.iter().map(|f| f.revents()).collect();
        drop(fds);
        let mut happened = false;
        let conn_events = if listening { &revents[1..] } else { &revents[..] };
        for (&i, &ev) in owners.iter().zip(conn_events) {
            if ev.is_empty() {
                continue;
            }
            let c = self.slots[i].conn.as_mut().expect("polled connection exists");
            if !drain_socket(&c.sock) || ev.intersects(PollFlags::ERR | PollFlags::NVAL) {
                c.dead = true;
                happened = true;
            }
        }
        if listening && !revents[0].is_empty() {
            happened |= self.accept_pending();
        }
        Ok(happened)
    }

    /// Accepts every connection waiting on the listener; set-up failures
    /// are counted, not returned.
    fn accept_pending(&mut self) -> bool {
        let mut any = false;
        loop {
            let Some((l, _)) = &self.listener else { return any };
            match l.accept() {
                Ok((sock, _)) => match self.handshake_accepted(sock) {
                    Ok(_) => {
                        self.shm.accepted += 1;
                        any = true;
                    }
                    Err(_) => self.shm.handshake_failures += 1,
                },
                Err(_) => return any,
            }
        }
    }

    /// Cheap periodic check when idle: one non-blocking `poll`.
    #[cold]
    fn idle_check(&mut self) -> Result<(), RecvError> {
        self.shm.liveness_checks += 1;
        self.poll_sockets(Duration::ZERO).map(|_| ())
    }

    /// Receives every record of connection `index` (up to `max`).
    #[inline]
    fn drain_conn(&mut self, index: usize, out: &mut Vec<Received>, max: usize) -> usize {
        let slot = &mut self.slots[index];
        let id = conn_id(index, slot.generation);
        let Some(c) = slot.conn.as_mut() else { return 0 };
        let mut got = 0;
        while got < max && !c.corrupt {
            let rec = match c.rx.peek() {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                Err(RingCorrupt) => {
                    c.corrupt = true;
                    c.dead = true;
                    self.shm.corrupt_rings += 1;
                    break;
                }
            };
            let result = receive_record(c, rec, &self.pool, self.config.max_message, &self.config, &mut self.shm);
            if rec.info & INFO_NEEDS_ACK != 0 {
                c.zc_received += 1;
            }
            c.rx.consume(rec);
            match result {
                Ok((msg_id, payload)) => {
                    out.push(Received { conn: id, msg_id, payload });
                    got += 1;
                }
                Err(Discard::Malformed) => self.stats.dropped_malformed += 1,
                Err(Discard::NoBuffer) => self.stats.dropped_no_buffer += 1,
            }
        }
        if c.zc_received != c.zc_reported {
            c.rx.set_acked(c.zc_received);
            c.zc_reported = c.zc_received;
        }
        if c.dead && (c.corrupt || !c.rx.has_data()) {
            self.reclaim(index, true);
        }
        self.stats.received += got as u64;
        got
    }

    /// After a publish: wakes the peer if it said it sleeps.
    #[inline(always)]
    fn after_publish(c: &mut Conn, shm: &mut ShmStats) {
        if c.tx.take_peer_sleeping() {
            Self::wake(c, shm);
        }
    }

    #[cold]
    fn wake(c: &mut Conn, shm: &mut ShmStats) {
        match rustix::net::send(&c.sock, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
            Ok(_) => shm.wakeups_sent += 1,
            // The socket is full of unread wake-up bytes: the peer will wake.
            Err(rustix::io::Errno::AGAIN) => {}
            Err(_) => c.dead = true,
        }
    }

    /// Reserves `len` body bytes in `c`'s outbound ring.
    #[inline(always)]
    fn reserve(c: &mut Conn, id: ConnId, len: usize, shm: &mut ShmStats) -> Result<NonNull<u8>, SendError> {
        match c.tx.reserve(len) {
            Ok(p) => {
                c.full_streak = 0;
                Ok(p)
            }
            Err(e) => Self::reserve_failed(c, id, e, shm),
        }
    }

    #[cold]
    fn reserve_failed(c: &mut Conn, id: ConnId, e: PushError, shm: &mut ShmStats) -> Result<NonNull<u8>, SendError> {
        match e {
            PushError::Full => {
                // A full ring may mean a dead peer: look at the socket on the
                // first failure and every 64th after.
                if c.full_streak % 64 == 0 {
                    shm.liveness_checks += 1;
                    if !socket_alive(&c.sock) {
                        c.dead = true;
                    }
                }
                c.full_streak = c.full_streak.wrapping_add(1);
                if c.dead {
                    Err(SendError::Closed(id))
                } else {
                    Err(SendError::Full)
                }
            }
            PushError::TooLarge { len, max } => Err(SendError::TooLarge { len, max }),
            PushError::Corrupt => {
                c.dead = true;
                Err(SendError::Closed(id))
            }
        }
    }

    /// The live connection `id`, for sending.
    #[inline(always)]
    fn send_conn(slots: &mut [Slot], id: ConnId) -> Result<&mut Conn, SendError> {
        let slot = slots.get_mut((id.0 & 0xFFFF) as usize).ok_or(SendError::Closed(id))?;
        if slot.generation != (id.0 >> 16) as u16 {
            return Err(SendError::Closed(id));
        }
        match slot.conn.as_mut() {
            Some(c) if !c.dead => Ok(c),
            _ => Err(SendError::Closed(id)),
        }
    }
}

impl Drop for ShmDatapath {
    fn drop(&mut self) {
        if let Some((_, path)) = self.listener.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Reads and discards pending bytes (wake-ups); false at end of stream or
/// on an error other than "nothing more".
fn drain_socket(sock: &UnixStream) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match rustix::net::recv(sock, &mut buf, RecvFlags::DONTWAIT) {
            Ok((0, _)) => return false,
            Ok(_) => continue,
            Err(rustix::io::Errno::AGAIN) => return true,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Non-blocking check that the peer has not closed its end.
fn socket_alive(sock: &UnixStream) -> bool {
    let mut fds = [PollFd::new(sock, PollFlags::IN)];
    match poll(&mut fds, Some(&timespec(Duration::ZERO))) {
        Ok(0) => true,
        Ok(_) => {
            let ev = fds[0].revents();
            drain_socket(sock) && !ev.intersects(PollFlags::ERR | PollFlags::NVAL)
        }
        Err(_) => true,
    }
}

fn timespec(d: Duration) -> rustix::time::Timespec {
    rustix::time::Timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: d.subsec_nanos() as _ }
}

/// Copies `len` bytes out of shared memory into our buffer.
///
/// # Safety
///
/// `src..src+len` must lie in a live mapping and `dst` must have room for
/// `len` bytes.
#[inline(always)]
unsafe fn copy_from_shared(src: *const u8, dst: &mut [u8], len: usize) {
    debug_assert!(dst.len() >= len);
    // SAFETY: the caller guarantees both ranges; they cannot overlap (our
    // pool buffer is private to this process's mapping of our pool memfd,
    // the source is a ring or a peer's pool).
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), len) };
}

/// Checks one record and copies the message it describes into a new pool
/// buffer. Everything is read from shared memory once, into locals, before
/// it is checked.
#[inline]
fn receive_record(
    c: &mut Conn,
    rec: ring::Record,
    pool: &Pool,
    max_message: usize,
    config: &ShmConfig,
    shm: &mut ShmStats,
) -> Result<(u32, RcBuf), Discard> {
    let body = rec.body.as_ptr();
    let body_len = rec.len;
    if rec.info & !proto::INFO_VALID_BITS != 0 {
        return Err(Discard::Malformed);
    }
    let n = (rec.info & INFO_DESC_MASK) as usize;
    if n == 0 {
        // The common case: one packet, copied.
        if body_len < PACKET_HEADER_LEN || body_len - PACKET_HEADER_LEN > max_message {
            return Err(Discard::Malformed);
        }
        let mut hdr = [0u8; PACKET_HEADER_LEN];
        // SAFETY: body..body+body_len is in the ring (checked by `peek`) and
        // body_len >= PACKET_HEADER_LEN.
        unsafe { copy_from_shared(body, &mut hdr, PACKET_HEADER_LEN) };
        let msg_id = read_packet_header(&hdr).ok_or(Discard::Malformed)?;
        let len = body_len - PACKET_HEADER_LEN;
        let mut buf = pool.alloc(len).map_err(|_| Discard::NoBuffer)?;
        // SAFETY: the range is the rest of the record body, in the ring.
        unsafe { copy_from_shared(body.add(PACKET_HEADER_LEN), buf.as_mut_slice(), len) };
        return Ok((msg_id, buf.freeze()));
    }
    if n > MAX_SEGMENTS {
        return Err(Discard::Malformed);
    }
    let desc_bytes = n * DESC_LEN;
    if body_len < desc_bytes + PACKET_HEADER_LEN {
        return Err(Discard::Malformed);
    }
    // Copied out one descriptor at a time into a reused vector: zeroing a
    // MAX_SEGMENTS-sized scratch array on every record cost more than the
    // descriptors themselves.
    let descs = &mut c.descs;
    descs.clear();
    let mut inline_total = 0usize;
    let mut segs_total = 0usize;
    for i in 0..n {
        let mut raw = [0u8; DESC_LEN];
        // SAFETY: (i + 1) * DESC_LEN <= desc_bytes <= body_len, in the ring.
        unsafe { copy_from_shared(body.add(i * DESC_LEN), &mut raw, DESC_LEN) };
        let d = Desc::decode(&raw);
        descs.push(d);
        let len = d.len as usize;
        match d.kind {
            DESC_POOL => {
                let end = d.offset.checked_add(len as u64).ok_or(Discard::Malformed)?;
                if end > c.peer.len as u64 && !c.peer.grow(end, config.max_peer_pool_bytes, shm) {
                    return Err(Discard::Malformed);
                }
            }
            DESC_INLINE if d.offset == 0 => inline_total += len,
            _ => return Err(Discard::Malformed),
        }
        segs_total = segs_total.checked_add(len).ok_or(Discard::Malformed)?;
    }
    let packet_len = (body_len - desc_bytes).checked_sub(inline_total).ok_or(Discard::Malformed)?;
    if packet_len < PACKET_HEADER_LEN {
        return Err(Discard::Malformed);
    }
    let first = packet_len - PACKET_HEADER_LEN;
    let total = first.checked_add(segs_total).ok_or(Discard::Malformed)?;
    if total > max_message {
        return Err(Discard::Malformed);
    }
    let mut hdr = [0u8; PACKET_HEADER_LEN];
    // SAFETY: desc_bytes + packet_len <= body_len, in the ring.
    unsafe { copy_from_shared(body.add(desc_bytes), &mut hdr, PACKET_HEADER_LEN) };
    let msg_id = read_packet_header(&hdr).ok_or(Discard::Malformed)?;
    let mut buf = pool.alloc(total).map_err(|_| Discard::NoBuffer)?;
    let dst = buf.as_mut_slice();
    // SAFETY: the first segment follows the packet header inside the body.
    unsafe { copy_from_shared(body.add(desc_bytes + PACKET_HEADER_LEN), dst, first) };
    let mut at = first;
    let mut inline_at = desc_bytes + packet_len;
    let peer_base = c.peer.map.as_ref().map_or(std::ptr::null(), |m| m.ptr().as_ptr().cast_const());
    for d in descs.iter() {
        let len = d.len as usize;
        let src = if d.kind == DESC_POOL {
            // SAFETY: offset + len <= c.peer.len, the mapped length (checked
            // above, after any re-map); len > 0 implies a mapping exists.
            unsafe { peer_base.add(d.offset as usize) }
        } else {
            let p = inline_at;
            inline_at += len;
            // SAFETY: the inline area ends exactly at body_len (packet_len
            // was computed so), so p + len <= body_len.
            unsafe { body.add(p) }
        };
        if len > 0 {
            // SAFETY: see the two cases above; dst has room since
            // at + len <= total.
            unsafe { copy_from_shared(src, &mut dst[at..], len) };
        }
        at += len;
    }
    debug_assert_eq!(at, total);
    Ok((msg_id, buf.freeze()))
}

impl Datapath for ShmDatapath {
    fn pool(&self) -> &Pool {
        &self.pool
    }

    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
        let n = self.slots.len();
        let mut got = 0;
        if n == 1 {
            got = self.drain_conn(0, out, max);
        } else if n > 1 {
            let start = self.rr % n;
            self.rr = self.rr.wrapping_add(1);
            for k in 0..n {
                if got >= max {
                    break;
                }
                let i = if start + k < n { start + k } else { start + k - n };
                got += self.drain_conn(i, out, max - got);
            }
        }
        if got > 0 {
            self.idle_polls = 0;
            return Ok(got);
        }
        if let Some(id) = self.closed.pop_front() {
            return Err(RecvError::Closed(id));
        }
        self.idle_polls += 1;
        if self.idle_polls >= self.config.idle_polls_per_check {
            self.idle_polls = 0;
            self.idle_check()?;
        }
        Ok(0)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        if self.ready() {
            return Ok(true);
        }
        let start = Instant::now();
        let spin = self.config.spin.min(timeout);
        let mut i = 0u32;
        loop {
            if self.ready() {
                return Ok(true);
            }
            i = i.wrapping_add(1);
            if i % 64 == 0 && start.elapsed() >= spin {
                break;
            }
            std::hint::spin_loop();
        }
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            // Announce sleep, then look once more (SeqCst on both sides).
            self.set_sleeping(true);
            let ready = !self.closed.is_empty()
                || self.slots.iter().flat_map(|s| &s.conn).any(|c| c.dead || c.rx.has_data_seqcst());
            if ready {
                self.set_sleeping(false);
                return Ok(true);
            }
            if left.is_zero() {
                self.set_sleeping(false);
                // Callers that only ever wait with a short timeout still get
                // the periodic socket check (peer death, new connections).
                self.idle_polls += 1;
                if self.idle_polls >= self.config.idle_polls_per_check / 64 {
                    self.idle_polls = 0;
                    self.idle_check()?;
                }
                return Ok(self.ready());
            }
            self.shm.sleeps += 1;
            let happened = self.poll_sockets(left);
            self.set_sleeping(false);
            if happened? || self.ready() {
                return Ok(true);
            }
        }
    }

    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError> {
        let layout = msg.layout();
        let first = layout.first_segment_len();
        let n = layout.zero_copy_entries;
        let pool = &self.pool;
        let c = Self::send_conn(&mut self.slots, conn)?;
        let total = layout.total_len();
        if total > c.peer_max_message {
            return Err(SendError::TooLarge { len: total, max: c.peer_max_message });
        }
        if n == 0 {
            let len = PACKET_HEADER_LEN + first;
            let body = Self::reserve(c, conn, len, &mut self.shm)?;
            // SAFETY: `reserve` returned `len` writable ring bytes that the
            // peer reads only after `commit` publishes them.
            let slot = unsafe { std::slice::from_raw_parts_mut(body.as_ptr(), len) };
            write_packet_header(slot, msg_id);
            msg.write_header_and_copies(&layout, &mut slot[PACKET_HEADER_LEN..])?;
            c.tx.commit(len, 0, Ordering::SeqCst);
        } else {
            if n > MAX_SEGMENTS {
                return Err(SendError::TooManySegments { count: n + 1, max: MAX_SEGMENTS + 1 });
            }
            let mut inline = 0usize;
            let mut pooled = false;
            msg.for_each_zero_copy(|b| {
                if !b.is_empty() && pool.contains(b) {
                    pooled = true;
                } else {
                    inline += b.len();
                }
            });
            let desc_bytes = n * DESC_LEN;
            let len = desc_bytes + PACKET_HEADER_LEN + first + inline;
            let body = Self::reserve(c, conn, len, &mut self.shm)?;
            // SAFETY: as above.
            let slot = unsafe { std::slice::from_raw_parts_mut(body.as_ptr(), len) };
            let (descs, rest) = slot.split_at_mut(desc_bytes);
            let (packet, inline_area) = rest.split_at_mut(PACKET_HEADER_LEN + first);
            write_packet_header(packet, msg_id);
            msg.write_header_and_copies(&layout, &mut packet[PACKET_HEADER_LEN..])?;
            let seq = c.zc_sent + 1;
            let base = pool.base() as usize;
            let (mut i, mut at, mut zc, mut copied) = (0usize, 0usize, 0u64, 0u64);
            let inflight = &mut c.inflight;
            msg.for_each_zero_copy(|b| {
                if i == n {
                    return;
                }
                let d = if !b.is_empty() && pool.contains(b) {
                    inflight.push_back((seq, b.clone()));
                    zc += 1;
                    Desc { offset: (b.as_ptr() as usize - base) as u64, len: b.len() as u32, kind: DESC_POOL }
                } else {
                    inline_area[at..at + b.len()].copy_from_slice(b);
                    at += b.len();
                    copied += 1;
                    Desc { offset: 0, len: b.len() as u32, kind: DESC_INLINE }
                };
                d.encode(&mut descs[i * DESC_LEN..]);
                i += 1;
            });
            debug_assert_eq!(i, n, "layout and zero-copy visit disagree");
            let mut info = n as u32;
            if pooled {
                info |= INFO_NEEDS_ACK;
                c.zc_sent = seq;
                self.inflight_sends += zc as usize;
            }
            self.stats.zero_copy_segments += zc;
            self.stats.zero_copy_copied += copied;
            c.tx.commit(len, info, Ordering::SeqCst);
        }
        Self::after_publish(c, &mut self.shm);
        self.stats.sent += 1;
        Ok(())
    }

    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        let pool = &self.pool;
        let c = Self::send_conn(&mut self.slots, conn)?;
        // The leading run of Copy segments is the first segment; every later
        // segment gets a descriptor.
        let lead = segments.iter().position(|s| matches!(s, Segment::ZeroCopy(_))).unwrap_or(segments.len());
        let n = segments.len() - lead;
        if n > MAX_SEGMENTS {
            return Err(SendError::TooManySegments { count: segments.len(), max: MAX_SEGMENTS + 1 });
        }
        let mut first = 0usize;
        let mut inline = 0usize;
        let mut total = 0usize;
        let mut pooled = false;
        for (k, s) in segments.iter().enumerate() {
            let (len, is_pool) = match s {
                Segment::Copy(b) => (b.len(), false),
                Segment::ZeroCopy(b) => (b.len(), !b.is_empty() && pool.contains(b)),
            };
            total += len;
            if k < lead {
                first += len;
            } else if is_pool {
                pooled = true;
            } else {
                inline += len;
            }
        }
        if total > c.peer_max_message {
            return Err(SendError::TooLarge { len: total, max: c.peer_max_message });
        }
        let desc_bytes = n * DESC_LEN;
        let len = desc_bytes + PACKET_HEADER_LEN + first + inline;
        let body = Self::reserve(c, conn, len, &mut self.shm)?;
        // SAFETY: `reserve` returned `len` writable ring bytes that the peer
        // reads only after `commit` publishes them.
        let slot = unsafe { std::slice::from_raw_parts_mut(body.as_ptr(), len) };
        let (descs, rest) = slot.split_at_mut(desc_bytes);
        let (packet, inline_area) = rest.split_at_mut(PACKET_HEADER_LEN + first);
        write_packet_header(packet, msg_id);
        let mut at = PACKET_HEADER_LEN;
        for s in &segments[..lead] {
            if let Segment::Copy(b) = s {
                packet[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
        }
        let seq = c.zc_sent + 1;
        let base = pool.base() as usize;
        let mut inline_at = 0;
        for (i, s) in segments[lead..].iter().enumerate() {
            let d = match s {
                Segment::ZeroCopy(b) if !b.is_empty() && pool.contains(b) => {
                    c.inflight.push_back((seq, b.clone()));
                    self.stats.zero_copy_segments += 1;
                    self.inflight_sends += 1;
                    Desc { offset: (b.as_ptr() as usize - base) as u64, len: b.len() as u32, kind: DESC_POOL }
                }
                Segment::ZeroCopy(b) => {
                    self.stats.zero_copy_copied += 1;
                    inline_area[inline_at..inline_at + b.len()].copy_from_slice(b);
                    inline_at += b.len();
                    Desc { offset: 0, len: b.len() as u32, kind: DESC_INLINE }
                }
                Segment::Copy(b) => {
                    inline_area[inline_at..inline_at + b.len()].copy_from_slice(b);
                    inline_at += b.len();
                    Desc { offset: 0, len: b.len() as u32, kind: DESC_INLINE }
                }
            };
            d.encode(&mut descs[i * DESC_LEN..]);
        }
        let mut info = n as u32;
        if pooled {
            info |= INFO_NEEDS_ACK;
            c.zc_sent = seq;
        }
        c.tx.commit(len, info, Ordering::SeqCst);
        Self::after_publish(c, &mut self.shm);
        self.stats.sent += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SendError> {
        // Pushes publish immediately (and wake a sleeping peer themselves).
        Ok(())
    }

    fn poll_completions(&mut self) -> Result<usize, SendError> {
        if self.inflight_sends == 0 {
            return Ok(0);
        }
        let mut done = 0usize;
        for c in self.slots.iter_mut().flat_map(|s| &mut s.conn) {
            if c.inflight.is_empty() {
                continue;
            }
            let acked = c.tx.acked();
            // A peer can only acknowledge what was sent, never go back.
            if acked <= c.zc_acked || acked > c.zc_sent {
                continue;
            }
            done += (acked - c.zc_acked) as usize;
            c.zc_acked = acked;
            while c.inflight.front().is_some_and(|(seq, _)| *seq <= acked) {
                c.inflight.pop_front();
                self.inflight_sends -= 1;
            }
        }
        self.stats.completions += done as u64;
        Ok(done)
    }

    fn stats(&self) -> DatapathStats {
        self.stats
    }
}

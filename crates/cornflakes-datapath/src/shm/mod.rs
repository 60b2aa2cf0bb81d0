//! Shared-memory datapath: processes on one host, talking through
//! SocksDirect-style rings (SocksDirect §4.2, §4.4) in memfds.
//!
//! # Trust model: what a peer can read
//!
//! A peer is another process we do not trust (a client of a server may be
//! anyone who can open its socket). Each [`ShmDatapath`] has **two pools**:
//!
//! ```text
//!            this process                               each peer
//!  ┌──────────────────────────────┐
//!  │ shared pool   Datapath::pool │──memfd sent at set-up──► mapped read-only
//!  │  values the application      │                         (every byte of it,
//!  │  sends zero-copy on purpose  │                          by every peer)
//!  ├──────────────────────────────┤
//!  │ private pool                 │   never sent, never mapped by a peer
//!  │  Datapath::scratch_pool /    │
//!  │  alloc: receive buffers,     │
//!  │  first segments, responses   │
//!  │  built per request, scratch  │
//!  └──────────────────────────────┘
//!  rings: one memfd per direction per connection, mapped by that peer only
//! ```
//!
//! - **What a peer can read of us**: the whole shared pool (including
//!   stale bytes of buffers freed there), the ring we produce into for it
//!   (only records addressed to it) and the ring it produces into. Nothing
//!   else: receive buffers, anything [`Datapath::alloc`] returns and
//!   anything the datapath allocates for itself live in the private pool.
//!   So a request one client sends is gathered into our private pool and
//!   cannot be read by another client (`tests/shm_trust.rs`), unless
//!   [`ShmConfig::receive_into_shared_pool`] says the peers trust each
//!   other.
//! - **What the application must do**: allocate from [`Datapath::pool`]
//!   only what *every* peer may read (the key-value store's values, which
//!   any client can `get` anyway); build per-request data (responses,
//!   first segments, copies of request bytes) with [`Datapath::alloc`] or
//!   [`Datapath::scratch_pool`].
//! - **What sending enforces**: a segment travels by descriptor only when
//!   it is a non-empty buffer of the shared pool; any other zero-copy
//!   segment (a received payload, a private buffer, the heap) is copied
//!   into the record. A descriptor to memory the peer does not already map
//!   cannot be sent. (Echoing a request's bytes back zero-copy therefore
//!   costs one copy: putting them in the shared pool would expose them;
//!   [`ShmConfig::receive_into_shared_pool`] does that for trusted peers.
//!   Between trusted peers an echo costs no copy at all: a receiver in
//!   place sends the values back with [`Datapath::push_spans`] as
//!   descriptors into the sender's *own* pool, to a sender that set
//!   [`ShmConfig::accept_returns`]; see [`proto`].)
//! - **What we never do with peer-writable memory** (rings, the peer's
//!   pool mapping): form a Rust reference to it. It is read and written only
//!   by raw copies and atomics, see the promise in `shm/sys.rs`; the public
//!   ring API copies in and out.
//! - **What we trust of a peer**: nothing it writes. Records, descriptors
//!   and control words are copied out once and checked (*Hostile peers*
//!   below; fuzzed in `fuzz/`). A peer can waste our time and memory within
//!   its limits (its ring, [`ShmConfig::max_message`]), and read what we
//!   send it and our shared pool; no more.
//!
//! # Layers and files
//!
//! - [`ring`]: one single-producer, single-consumer ring of variable-length
//!   records, with credits, usable on its own (the bare-ring benchmark).
//! - [`proto`]: the hello exchanged at set-up and the layout of a message
//!   record (descriptors, packet, inline segments).
//! - [`ShmDatapath`] (this file): the two pools, configuration, the
//!   [`Datapath`] implementation; it delegates to
//!   - `setup.rs`: listen, connect, accept, the hello exchange, mapping the
//!     peer's shared pool;
//!   - `send.rs`: the one record builder, serialize-and-send and segment
//!     lists on top of it, completions;
//!   - `receive.rs`: hostile-record parsing and the gather into the private
//!     pool (`receive_record`), receiving in place, acknowledgements;
//!   - `lease.rs`: receiving in place: [`PeerSlice`], leases, the ledger of
//!     what may be acknowledged;
//!   - `liveness.rs`: sleeping and waking, socket checks, peer death and
//!     reclaiming a connection;
//!   - `conn.rs`: the connection table;
//!   - `sys.rs`: system calls, mappings and the raw-copy primitives.
//!
//! # Contract
//!
//! - **Set-up** goes through a Unix-domain stream socket:
//!   [`ShmDatapath::listen`] binds one (connections are accepted by
//!   [`ShmDatapath::accept`], and automatically while waiting or idle),
//!   [`ShmDatapath::connect`] / [`ShmDatapath::connect_to`] dial one, and
//!   [`ShmDatapath::pair`] links two datapaths in one process. Each side
//!   creates, seals and sends the memfd of the ring it *consumes*, plus its
//!   **shared** pool's memfd (`SCM_RIGHTS`); see [`proto`]. The socket
//!   stays open for the life of the connection: it carries wake-up bytes
//!   and tells of the peer's death.
//! - **Sending** ([`Datapath::push_message`], [`Datapath::push_segments`])
//!   copies straight into the peer's ring (the first segment through a
//!   private staging buffer) and **publishes immediately**;
//!   [`Datapath::flush`] publishes what was parked. A full ring **parks**
//!   the record (built in private memory, its zero-copy buffers held as if
//!   sent) behind which later sends to that connection queue in order,
//!   published by the next send, flush or completion poll as the peer makes
//!   room; past [`ShmConfig::max_parked_messages`] or
//!   [`ShmConfig::max_parked_bytes`] a send fails at once with
//!   [`SendError::Backlogged`], so one peer that stops reading never makes
//!   the application wait, and other connections are not affected (with
//!   parking off, `max_parked_messages: 0`, a full ring is
//!   [`SendError::Full`]). A body that can never fit (half the ring) or a
//!   message over the peer's limit is [`SendError::TooLarge`].
//! - **Accepting** never blocks on a peer: our hello is sent at once and the
//!   peer's is read when it arrives (up to
//!   [`ShmConfig::handshake_timeout`]); a busy datapath looks at the
//!   listener every 1024 receive batches.
//! - **Closing** ([`ShmDatapath::close`], or dropping the datapath) tells the
//!   peer (our socket's write side is shut down) but never releases a
//!   zero-copy buffer the peer may still read: the connection is kept on a
//!   closing list until the peer acknowledges every such record or goes
//!   away. On drop, the datapath waits up to [`ShmConfig::close_linger`]
//!   for that and then **leaks** what is left ([`ShmStats::leaked_on_drop`])
//!   rather than free memory a peer may read.
//! - **Receiving** ([`Datapath::recv_batch`]) never blocks and never trusts
//!   the peer: see *Hostile peers* below.
//! - **Threads**: a datapath, like its [`Pool`], stays on one thread.
//!
//! # Zero-copy: gather on receive
//!
//! ```text
//!  sender process                                   receiver process
//!  ┌──────────────┐  ring record (in receiver's    ┌──────────────────────┐
//!  │ shared pool  │  inbox memfd, mapped by both)  │ private pool (RcBuf) │
//!  │  ┌────────┐  │  ┌─────┬─────┬─────┬────────┐ │ ┌──────┬────────────┐ │
//!  │  │ value  │◄─┼──┤desc │desc │pkt  │ first  │ │ │first │ value …    │ │
//!  │  └────────┘  │  │     │     │hdr  │segment │─┼►│seg.  │ (gathered) │ │
//!  └──────┬───────┘  └─────┴─────┴─────┴────────┘ │ └──────┴────────────┘ │
//!         │ mapped read-only in the receiver ──────┼──────────▲            │
//! ```
//!
//! A zero-copy segment in the sender's *shared* pool is not copied by the
//! sender: the record carries a descriptor (offset in the sender's shared
//! pool memfd, length), the sender keeps a clone of the [`RcBuf`] in an
//! in-flight table, and the receiver, which has the sender's shared pool
//! memfd mapped read-only (re-mapped after an `fstat` when a descriptor
//! points past the mapping because the sender's pool grew), copies the
//! segment into one of its own *private* pool buffers right after the first
//! segment, as a NIC's DMA engine would. A zero-copy segment anywhere else
//! (the sender's private pool, a received payload, the heap) is copied into
//! the record. [`Received::payload`] is thus one contiguous buffer of the
//! whole message.
//!
//! We gather by default rather than hand out views of the peer's memory in
//! place because a view in place would (1) keep the sender's buffer busy
//! for as long as the application holds the message, (2) be memory the
//! peer can still write, so values could change while they are read, and
//! (3) not be an [`RcBuf`] of our pool, so it could not be sent on
//! zero-copy or recovered. The copy on receive is the one a NIC would do;
//! the sender's copy is what zero-copy saves.
//!
//! Between peers that trust each other, [`ShmConfig::receive_in_place`]
//! saves that copy too ([`Datapath::recv_batch_in_place`]): zero-copy
//! segments are handed out as leased [`PeerSlice`]s, read by copying out,
//! bounded in bytes, count and age (see [`lease`]: (1) is
//! bounded by [`LeaseLimits`], (2) changes values but never memory safety,
//! (3) remains).
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
//! A receiver in place acknowledges up to the oldest record it still
//! leases (see [`lease`]), so the sender's buffers stay put while leased.
//!
//! # Credits, sleeping and waking (SocksDirect §4.2, §4.4)
//!
//! Credits are the ring's own (see [`ring`]): returned once per half ring.
//! [`Datapath::wait`] busy-polls every inbound ring for an adaptive spin
//! (at least [`ShmConfig::spin`], 50 µs by default; longer under load and
//! after the peer's short stalls, see its docs), then sets the *sleeping* flag in
//! each inbound ring, checks the rings again (a `SeqCst` store then load:
//! with the sender's publish, `SeqCst` fence, then flag load, at least one
//! side sees the other, so no wake-up is lost), and sleeps in `poll` on the
//! connections' sockets. A sender looks at the flags of the peers it
//! published to once per batch, behind one fence: in
//! [`Datapath::flush`], [`Datapath::poll_completions`], and before it
//! receives, waits or is dropped (a fence per record would stall each send
//! until its bytes reach the peer). One that finds a flag set clears it and
//! writes one byte to the socket: one system call per sleep, none while
//! the receiver is awake ([`ShmStats::wakeups_sent`],
//! [`ShmStats::sleeps`]).
//!
//! We wake through the socket rather than a futex or eventfd because the
//! sleeper must watch the sockets anyway (peer death, new connections): one
//! `poll` covers all, and no descriptor from the peer is ever written to (a
//! hostile peer could pass a blocking pipe for an eventfd).
//!
//! Another thread of the same process (a control thread with a request for
//! the serving loop) ends a sleep through [`ShmDatapath::waker`]: an eventfd
//! of our own, polled with the sockets once asked for.
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
//! Everything read from shared memory is copied out once (raw copies and
//! atomics only: no reference to peer-writable memory is ever formed, see
//! `sys.rs`), then checked:
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
pub mod words;

mod conn;
pub mod lease;
mod liveness;
mod receive;
mod send;
mod setup;
mod sys;

use std::collections::VecDeque;
use std::io;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::Duration;

use cornflakes::mem::MAX_ALLOC;
use cornflakes::{Message, Pool, PoolConfig, RcBuf};

use crate::{ConnId, Datapath, DatapathStats, InPlace, Received, RecvError, Segment, SendError};
use conn::{conn_id, generation_of, slot_of, Conn, Slot};
pub use lease::{LeaseExpired, LeaseLimits, PeerSlice, PEER_CHUNK};
pub use ring::{Ring, RingConsumer, RingCorrupt, RingProducer};
use ring::{RingError, DEFAULT_RING_SIZE};
pub use sys::{copy_for_peer, is_amd, recv_fds, send_fds, streams_for_peer, try_recv_fds, STREAMING};

/// How a [`ShmDatapath`] behaves.
#[derive(Clone, Debug)]
pub struct ShmConfig {
    /// Data bytes of each inbound ring (a power of two, 4 KiB to 1 GiB).
    /// Default 1 MiB. A message body in the ring is at most half of it.
    pub ring_size: usize,
    /// How long [`Datapath::wait`] busy-polls before sleeping, at least.
    /// Default 50 µs. The spin adapts to the traffic: it lasts 10x the
    /// recent average idle gap (the time from a `wait` to the record that
    /// ended it) or twice the longest idle gap of the last 250-500 ms that
    /// was no longer than `max_spin`, between `spin` and
    /// [`max_spin`](Self::max_spin), so a server under load pays no
    /// wake-up per request nor when its peer loses its core for a moment
    /// (a scheduler tick), while an idle one still sleeps.
    pub spin: Duration,
    /// The longest adaptive spin. Default 1 ms.
    pub max_spin: Duration,
    /// Largest message accepted (payload after the packet header); at most
    /// the pool's largest buffer (2 MiB), the default.
    pub max_message: usize,
    /// Limit on connection set-up (reading the peer's hello). Default 5 s.
    pub handshake_timeout: Duration,
    /// Consecutive empty `recv_batch` calls between two checks of the
    /// sockets (peer death, new connections). Default 16384 (a few hundred
    /// microseconds of idle polling); a busy datapath never reaches it.
    pub idle_polls_per_check: u32,
    /// Largest peer pool mapped. Default 1 TiB. Address space, and memory
    /// only as far as the peer's descriptors make us read it: a peer's file
    /// is mapped with its pages faulted in up front only when the peer has
    /// allocated them all itself (a sparse file is mapped lazily, so that a
    /// peer cannot make us allocate its holes).
    pub max_peer_pool_bytes: usize,
    /// Refuse peers whose pool memfd is not sealed against shrinking.
    /// Default true (`cornflakes::Pool` seals its memfd).
    pub require_sealed_peer_pool: bool,
    /// Messages parked per connection while its outbound ring is full
    /// (a peer that reads slowly or not at all); beyond this or
    /// [`max_parked_bytes`](Self::max_parked_bytes), sends to it fail at
    /// once with [`SendError::Backlogged`]. Default 1024.
    pub max_parked_messages: usize,
    /// Body bytes parked per connection at most. Default 4 MiB.
    pub max_parked_bytes: usize,
    /// How long dropping the datapath waits for peers to acknowledge the
    /// zero-copy buffers they may still read; what is left unacknowledged
    /// then is leaked (never freed, so never reused under a reader), not
    /// released. Default 100 ms.
    pub close_linger: Duration,
    /// Connections closed by us that are kept while their peer may still
    /// read zero-copy buffers of ours ([`ShmDatapath::close`]). Past this,
    /// the oldest is let go and its unacknowledged buffers are released
    /// ([`ShmStats::closes_forced`]): a peer that neither acknowledges nor
    /// goes away cannot hold our sockets, mappings and pool without bound.
    /// A released buffer may be reused while that peer reads it; it then
    /// reads other bytes of our shared pool, which it has mapped anyway
    /// (values change under a misbehaving peer, memory safety holds on
    /// both sides). Default 256.
    pub max_closing: usize,
    /// Receive in place from peers we trust
    /// ([`Datapath::recv_batch_in_place`]): a message's zero-copy segments
    /// stay in the sender's pool as leased [`PeerSlice`]s, within these
    /// limits, instead of being gathered into our private pool. Read the
    /// trust model in the [`lease`] module docs first.
    /// Default `None`: every message is gathered, whichever receive is
    /// called.
    pub receive_in_place: Option<LeaseLimits>,
    /// Gather received messages into the **shared** pool instead of the
    /// private one, for peers that may read each other's messages (one
    /// application, as for [`receive_in_place`](Self::receive_in_place)):
    /// received bytes can then be sent on or back by descriptor (an echo
    /// of a request's values costs the gather only, not a second copy into
    /// the reply). Every peer can read them, as it reads the whole shared
    /// pool. Default `false`.
    pub receive_into_shared_pool: bool,
    /// Accept replies that return our own values by reference
    /// ([`DESC_RETURN`](proto::DESC_RETURN)): a peer receiving in place may
    /// then answer with descriptors into *our* shared pool instead of
    /// copying the values back (an echo costs neither side a copy of its
    /// values). Announced in the hello. The price: an acknowledged send is
    /// released only after every record the peer published before the
    /// acknowledgement has been received, so a receiver that stops reading
    /// also stops completing its sends to that peer. Default `false`.
    pub accept_returns: bool,
    /// The pools to create: the shared pool (except with
    /// [`ShmDatapath::with_pool`]) and the private pool each get this
    /// configuration.
    pub pool: PoolConfig,
}

impl Default for ShmConfig {
    fn default() -> Self {
        Self {
            ring_size: DEFAULT_RING_SIZE,
            spin: Duration::from_micros(50),
            max_spin: Duration::from_millis(1),
            max_message: MAX_ALLOC,
            handshake_timeout: Duration::from_secs(5),
            idle_polls_per_check: 16384,
            max_peer_pool_bytes: 1 << 40,
            require_sealed_peer_pool: true,
            max_parked_messages: 1024,
            max_parked_bytes: 4 << 20,
            close_linger: Duration::from_millis(100),
            max_closing: 256,
            receive_in_place: None,
            receive_into_shared_pool: false,
            accept_returns: false,
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
    /// The peer speaks another version of the protocol (another build).
    #[error(
        "connection set-up failed: the peer speaks shared-memory protocol version {peer}, this build \
         version {ours}; run the same Cornflakes build on both sides"
    )]
    Version {
        /// The peer's version.
        peer: u32,
        /// Ours ([`proto::VERSION`]).
        ours: u32,
    },
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
    /// Messages parked because the peer's ring was full (published later).
    pub parked: u64,
    /// Sends refused with [`SendError::Backlogged`].
    pub backlogged: u64,
    /// Parked messages lost because their connection closed first.
    pub parked_lost: u64,
    /// Closed connections whose zero-copy buffers were released once the
    /// peer acknowledged them or went away.
    pub closes_drained: u64,
    /// Closed connections let go before their peer acknowledged every
    /// zero-copy buffer, because more than [`ShmConfig::max_closing`] were
    /// waiting; their buffers were released.
    pub closes_forced: u64,
    /// Zero-copy buffers leaked (never freed) because a peer neither
    /// acknowledged them nor went away within [`ShmConfig::close_linger`]
    /// of the datapath being dropped.
    pub leaked_on_drop: u64,
    /// Records received in place: their pool segments leased, not copied.
    pub leased: u64,
    /// Records with pool segments gathered instead of leased because the
    /// connection held [`LeaseLimits::max_bytes`] or
    /// [`LeaseLimits::max_leases`] already.
    pub lease_refused: u64,
    /// Leases that expired ([`LeaseLimits::max_age`]) while still held.
    pub leases_expired: u64,
    /// Values sent back to their owner by reference
    /// ([`DESC_RETURN`](proto::DESC_RETURN) descriptors written).
    pub returns_sent: u64,
    /// Values of ours a peer returned by reference and we delivered in
    /// place (a returned value gathered by `recv_batch` is copied).
    pub returns_received: u64,
    /// Parked records returning a peer's bytes by reference dropped before
    /// publication because the lease on those bytes expired meanwhile
    /// (possible only when the connection the bytes came on closed).
    pub parked_returns_lost: u64,
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
    /// Peers map it: what the application sends zero-copy on purpose.
    shared: Pool,
    /// The shared pool's memfd opened again read-only: what peers get, so
    /// that none can map our pool writable (a `&[u8]` of a shared-pool
    /// buffer must not change under us).
    shared_ro: std::os::fd::OwnedFd,
    /// Never mapped by a peer: receive buffers, scratch, first segments.
    private: Pool,
    /// Where `push_message` serializes a first segment before copying it
    /// into the ring (ring memory is never a `&mut [u8]`).
    staging: Vec<u8>,
    /// The zero-copy buffers of the message `push_message` is sending
    /// (empty between calls).
    zero_copy_bufs: Vec<RcBuf>,
    stats: DatapathStats,
    shm: ShmStats,
    closed: VecDeque<ConnId>,
    idle_polls: u32,
    rr: usize,
    inflight_sends: usize,
    /// Connections with parked records.
    parked_conns: usize,
    /// Slots published to since the last wake-up check
    /// ([`ShmDatapath::wake_sleeping_peers`]).
    to_wake: Vec<usize>,
    /// Connections closed by us whose zero-copy buffers the peer may still
    /// read: kept (rings, socket, in-flight clones) until it acknowledges
    /// them or goes away.
    closing: VecDeque<Conn>,
    /// Completion polls since the closing connections' sockets were last
    /// looked at.
    closing_polls: u32,
    /// Non-empty receive batches since the sockets were last looked at.
    busy_batches: u32,
    /// The idle gaps that ended with a record: what the adaptive spin
    /// follows.
    idle_gaps: liveness::IdleGaps,
    /// Accepted connections waiting for the peer's hello.
    accepting: Vec<setup::Accepting>,
    listener: Option<(UnixListener, PathBuf)>,
    /// The eventfd of [`ShmDatapath::waker`], made on first use; `wait`
    /// sleeps on it too.
    waker: crate::waker::WakerFd,
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

impl ShmDatapath {
    /// A datapath with no connections and two new pools (shared and
    /// private, see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// [`ShmError::BadConfig`] when `config.ring_size` is not a power of two
    /// between 4 KiB and 1 GiB, [`ShmError::Pool`] when a pool cannot be
    /// created.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    ///
    /// let dp = ShmDatapath::new(ShmConfig::default()).unwrap();
    /// assert_eq!(dp.connections().count(), 0);
    /// assert!(ShmDatapath::new(ShmConfig { ring_size: 5000, ..ShmConfig::default() }).is_err());
    /// ```
    pub fn new(config: ShmConfig) -> Result<Self, ShmError> {
        let pool = Pool::with_config(config.pool.clone())?;
        Self::with_pool(pool, config)
    }

    /// A datapath whose **shared** pool is `pool` (every peer maps its
    /// memfd and can read all of it: put there only what any peer may
    /// read); its private pool is created from `config.pool`.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::Pool;
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let values = Pool::new().unwrap();
    /// let dp = ShmDatapath::with_pool(values.clone(), ShmConfig::default()).unwrap();
    /// let v = values.alloc_copy(&[1; 1024]).unwrap();
    /// assert!(dp.pool().contains(&v));
    /// assert!(!dp.scratch_pool().contains(&v));
    /// ```
    pub fn with_pool(pool: Pool, mut config: ShmConfig) -> Result<Self, ShmError> {
        if !config.ring_size.is_power_of_two()
            || !(ring::MIN_RING_SIZE..=ring::MAX_RING_SIZE).contains(&config.ring_size)
        {
            return Err(ShmError::BadConfig("ring_size must be a power of two between 4 KiB and 1 GiB"));
        }
        config.max_message = config.max_message.min(MAX_ALLOC);
        let private = Pool::with_config(config.pool.clone())?;
        let shared_ro = sys::reopen_read_only(pool.backing_fd())?;
        Ok(Self {
            slots: Vec::new(),
            free_slots: Vec::new(),
            shared: pool,
            shared_ro,
            private,
            staging: Vec::new(),
            zero_copy_bufs: Vec::new(),
            stats: DatapathStats::default(),
            shm: ShmStats::default(),
            closed: VecDeque::new(),
            idle_polls: 0,
            rr: 0,
            inflight_sends: 0,
            parked_conns: 0,
            to_wake: Vec::new(),
            closing: VecDeque::new(),
            closing_polls: 0,
            busy_batches: 0,
            idle_gaps: Default::default(),
            accepting: Vec::new(),
            listener: None,
            waker: Default::default(),
            config,
        })
    }

    /// Open connections, in slot order.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    ///
    /// let (a, _b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    /// assert_eq!(a.connections().count(), 1);
    /// ```
    pub fn connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.slots.iter().enumerate().filter(|(_, s)| s.conn.is_some()).map(|(i, s)| conn_id(i, s.generation))
    }

    /// Closes a connection: sends to it fail with [`SendError::Closed`] at
    /// once, nothing more is received from it, and the peer sees it closed
    /// (after draining what was already published to it). Zero-copy
    /// buffers the peer may still read are **not** released now: they are
    /// held until it acknowledges them or goes away
    /// ([`ShmStats::closes_drained`]), or until more than
    /// [`ShmConfig::max_closing`] closed connections wait
    /// ([`ShmStats::closes_forced`]); records still parked for it are lost
    /// ([`ShmStats::parked_lost`]). No `Closed` event is reported for it
    /// here. Unknown or already closed ids are ignored.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    /// use cornflakes_datapath::{Datapath, SendError};
    ///
    /// let (mut a, _b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    /// let conn = a.connections().next().unwrap();
    /// a.close(conn);
    /// assert!(matches!(a.push_buf(conn, 1, b"x"), Err(SendError::Closed(_))));
    /// ```
    pub fn close(&mut self, conn: ConnId) {
        if let Some(i) = self.slot_index(conn) {
            self.reclaim(i, false);
        }
    }

    /// Closed connections whose zero-copy buffers are still held for a
    /// peer that may read them (see [`close`](Self::close)).
    pub fn closing(&self) -> usize {
        self.closing.len()
    }

    /// Counters specific to shared memory.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    ///
    /// let dp = ShmDatapath::new(ShmConfig::default()).unwrap();
    /// assert_eq!(dp.shm_stats().accepted, 0);
    /// ```
    pub fn shm_stats(&self) -> ShmStats {
        self.shm
    }

    /// Zero-copy buffers held for sends on `conn` not yet completed.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    /// use cornflakes_datapath::{Datapath, Segment};
    ///
    /// let (mut a, _b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    /// let conn = a.connections().next().unwrap();
    /// let value = a.pool().alloc_copy(&[7; 4096]).unwrap(); // shared: by descriptor
    /// a.push_segments(conn, 1, &[Segment::Copy(b"hdr"), Segment::ZeroCopy(value)]).unwrap();
    /// assert_eq!(a.inflight(conn), 1); // held until the peer has copied it
    /// ```
    pub fn inflight(&self, conn: ConnId) -> usize {
        self.slot_index(conn).and_then(|i| self.slots[i].conn.as_ref()).map_or(0, |c| c.inflight.len())
    }

    /// Records of `conn` received in place whose leases are not yet
    /// acknowledged, and the bytes of the peer's pool they name (a record
    /// released behind one still held counts until that one goes).
    pub fn leases_held(&self, conn: ConnId) -> (usize, usize) {
        self.slot_index(conn).and_then(|i| self.slots[i].conn.as_ref()).map_or((0, 0), |c| c.ledger.held())
    }

    #[inline(always)]
    fn slot_index(&self, id: ConnId) -> Option<usize> {
        let i = slot_of(id);
        let slot = self.slots.get(i)?;
        (slot.generation == generation_of(id) && slot.conn.is_some()).then_some(i)
    }
}

impl Drop for ShmDatapath {
    fn drop(&mut self) {
        if let Some((_, path)) = self.listener.take() {
            let _ = std::fs::remove_file(path);
        }
        self.linger();
    }
}

/// The trait, delegating to the files that own each concern.
impl Datapath for ShmDatapath {
    /// The **shared** pool: every peer maps all of it (see the trust model
    /// in the [module docs](self)).
    fn pool(&self) -> &Pool {
        &self.shared
    }

    /// The **private** pool: never mapped by a peer. Receive buffers and
    /// [`Datapath::alloc`] come from here.
    fn scratch_pool(&self) -> &Pool {
        &self.private
    }

    fn recover(&self, data: &[u8]) -> Option<RcBuf> {
        self.shared.recover(data).or_else(|| self.private.recover(data))
    }

    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
        self.receive_batch(out, max)
    }

    fn recv_batch_in_place(&mut self, out: &mut Vec<InPlace>, max: usize) -> Result<usize, RecvError> {
        self.receive_batch(out, max)
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        self.wait_for_records(timeout)
    }

    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError> {
        self.send_message(conn, msg_id, msg)
    }

    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError> {
        self.send_segments(conn, msg_id, segments)
    }

    fn receives_in_place(&self) -> bool {
        self.config.receive_in_place.is_some()
    }

    fn push_spans(&mut self, conn: ConnId, msg_id: u32, spans: &[crate::Span<'_>]) -> Result<(), SendError> {
        self.send_spans(conn, msg_id, spans)
    }

    fn flush(&mut self) -> Result<(), SendError> {
        // Pushes publish immediately; what was parked behind a full ring
        // goes out as room appears; then sleeping peers are woken.
        self.publish_all_parked();
        self.wake_sleeping_peers();
        Ok(())
    }

    fn poll_completions(&mut self) -> Result<usize, SendError> {
        let done = self.complete_sends();
        self.publish_all_parked();
        self.wake_sleeping_peers();
        if !self.closing.is_empty() {
            // The sockets every 64th poll: a system call each.
            self.closing_polls = self.closing_polls.wrapping_add(1);
            self.reap_closing(self.closing_polls.is_multiple_of(64));
        }
        Ok(done)
    }

    fn stats(&self) -> DatapathStats {
        self.stats
    }
}

/// What the fuzz crate (`fuzz/`) drives; not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    use cornflakes::mem::{HugePages, PoolConfig};
    use cornflakes::{Pool, RcBuf, RcBufMut};

    use super::lease::Ledger;
    use super::proto::{Desc, HELLO_LEN};
    use super::receive::{
        fuzzing, receive_record, receive_record_in_place, Delivered, Discard, PeerPool, RawRecord, RecordLimits,
    };
    use super::{LeaseLimits, ShmStats};
    use crate::{ConnId, InPlace};

    /// `receive_record` over records held in ordinary memory, with a fake
    /// peer pool memfd of [`PEER_POOL_FILE`] bytes of which
    /// [`PEER_POOL_MAPPED`] are mapped at first.
    pub struct RecordParser {
        peer: PeerPool,
        peer_fd: std::os::fd::OwnedFd,
        pool: Pool,
        /// "Our" shared pool, for returned values ([`DESC_RETURN`](super::proto::DESC_RETURN)):
        /// [`OWN_BUFFERS`] slots of [`OWN_BUFFER_LEN`] bytes, of which the
        /// [`RecordParser::own_live`] ones are frozen and live, one was
        /// freed and one is still being written.
        own: Pool,
        _own_live: Vec<RcBuf>,
        _own_writing: RcBufMut,
        own_live: Vec<usize>,
        descs: Vec<Desc>,
        stats: ShmStats,
        limits: RecordLimits,
        /// Leases of [`RecordParser::parse_in_place`], released at once.
        ledger: Ledger,
        leased: u64,
    }

    /// Bytes of the fake peer pool file.
    pub const PEER_POOL_FILE: usize = 256 << 10;
    /// Bytes of it mapped before any re-map.
    pub const PEER_POOL_MAPPED: usize = 64 << 10;

    /// Slots of our own shared pool the parser sets up.
    pub const OWN_BUFFERS: usize = 6;
    /// Bytes of each (a whole slot of its size class, so that a range a
    /// return may name is exactly a buffer's).
    pub const OWN_BUFFER_LEN: usize = 4096;

    /// Why a record was dropped.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Dropped {
        /// Malformed.
        Malformed,
        /// No buffer.
        NoBuffer,
    }

    impl RecordParser {
        /// A parser accepting messages up to `max_message` bytes.
        ///
        /// # Panics
        ///
        /// When the memfd or the pool cannot be created.
        pub fn new(max_message: usize) -> Self {
            let config = PoolConfig { max_bytes: 64 << 20, hugepages: HugePages::Never, lock: false };
            let peer = fuzzing::fake_peer_pool(PEER_POOL_FILE, PEER_POOL_MAPPED).expect("fake peer pool");
            let own = Pool::with_config(config.clone()).expect("pool");
            let mut slots: Vec<RcBufMut> =
                (0..OWN_BUFFERS).map(|_| own.alloc(OWN_BUFFER_LEN).expect("own buffer")).collect();
            let offset_of = |b: &[u8]| b.as_ptr() as usize - own.base() as usize;
            for b in &mut slots {
                let at = offset_of(b);
                b.iter_mut().enumerate().for_each(|(i, x)| *x = own_byte(at + i));
            }
            // Slot 2 freed, slot 4 kept writable: returns naming them are refused.
            let writing = slots.remove(4);
            drop(slots.remove(2));
            let live: Vec<RcBuf> = slots.into_iter().map(RcBufMut::freeze).collect();
            let own_live = live.iter().map(|b| offset_of(b)).collect();
            Self {
                peer_fd: peer.dup_fd().expect("dup"),
                peer,
                pool: Pool::with_config(config).expect("pool"),
                own,
                _own_live: live,
                _own_writing: writing,
                own_live,
                descs: Vec::new(),
                stats: ShmStats::default(),
                limits: RecordLimits { max_message, max_peer_pool_bytes: 1 << 30 },
                ledger: Ledger::default(),
                leased: 0,
            }
        }

        /// [`parse`](Self::parse) through the receiver in place
        /// (`receive_record_in_place`, default lease limits); returns the
        /// message id, a copy of the whole message and how many of its runs
        /// were left in the peer pool. Both must agree on every record.
        pub fn parse_in_place(&mut self, body: &[u8], info: u32) -> Result<(u32, Vec<u8>, usize), Dropped> {
            self.leased += 1;
            let limits = LeaseLimits::default();
            // SAFETY: `body` is readable for the call.
            let r = unsafe {
                receive_record_in_place(
                    RawRecord { body: body.as_ptr(), len: body.len(), info },
                    &mut self.descs,
                    &mut self.peer,
                    &self.pool,
                    // Returned values resolve against our pool's live
                    // buffers (`own_live`), on both paths alike.
                    Some(&self.own),
                    &self.limits,
                    &mut self.stats,
                    Some((&mut self.ledger, &limits, self.leased)),
                )
            };
            let out = match r {
                Ok(Delivered::Whole(id, buf)) => Ok((id, buf.to_vec(), 0)),
                Ok(Delivered::InPlace(id, local, parts)) => {
                    let m = InPlace::with_parts(ConnId(0), id, local, parts);
                    Ok((id, m.to_vec().expect("a lease just taken"), m.peer_segments()))
                }
                Err(Discard::Malformed) => Err(Dropped::Malformed),
                Err(Discard::NoBuffer) => Err(Dropped::NoBuffer),
            };
            // The message is gone: its lease is released.
            let mut expired = 0;
            self.ledger.ack(self.leased, limits.max_age, &mut expired);
            out
        }

        /// Parses `body` as the body of a ring record with `info`; returns
        /// the message id and a copy of the payload.
        pub fn parse(&mut self, body: &[u8], info: u32) -> Result<(u32, Vec<u8>), Dropped> {
            // SAFETY: `body` is readable for the call.
            let r = unsafe {
                receive_record(
                    RawRecord { body: body.as_ptr(), len: body.len(), info },
                    &mut self.descs,
                    &mut self.peer,
                    &self.pool,
                    // Returned values resolve against our pool's live
                    // buffers (`own_live`), on both paths alike.
                    Some(&self.own),
                    &self.limits,
                    &mut self.stats,
                )
            };
            match r {
                Ok((id, buf)) => Ok((id, buf.to_vec())),
                Err(Discard::Malformed) => Err(Dropped::Malformed),
                Err(Discard::NoBuffer) => Err(Dropped::NoBuffer),
            }
        }

        /// Offsets (in our shared pool) of the live, frozen buffers of
        /// [`OWN_BUFFER_LEN`] bytes a return may name, whole or in part;
        /// byte `i` of the pool holds [`own_byte`]`(i)`.
        pub fn own_live(&self) -> &[usize] {
            &self.own_live
        }

        /// Re-maps of the peer pool so far.
        pub fn remaps(&self) -> u64 {
            self.stats.peer_pool_remaps
        }

        /// Maps only the first [`PEER_POOL_MAPPED`] bytes of the peer pool
        /// again, so that the re-map path is reachable once more.
        ///
        /// # Panics
        ///
        /// When the mapping fails.
        pub fn unmap_peer_tail(&mut self) {
            let fd = self.peer_fd.try_clone().expect("dup");
            self.peer = PeerPool::map(fd, PEER_POOL_MAPPED).expect("map");
            self.stats.peer_pool_remaps = 0;
        }
    }

    /// The byte at `offset` of our own shared pool's live buffers.
    pub fn own_byte(offset: usize) -> u8 {
        (offset % 253) as u8 ^ 0x5A
    }

    /// The byte at `offset` of the fake peer pool.
    pub fn peer_pool_byte(offset: usize) -> u8 {
        fuzzing::pattern(offset)
    }

    /// The checks set-up applies to a peer's hello bytes: `Some((ring
    /// size, largest message we will send it))` when accepted.
    pub fn check_hello(bytes: &[u8; HELLO_LEN]) -> Option<(u64, usize)> {
        super::setup::check_hello(bytes).ok().map(|h| (h.ring_size, h.max_message))
    }
}

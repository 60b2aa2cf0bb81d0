//! [`TcpConfig`] and [`TcpError`], why set-up failed.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use cornflakes::mem::{PoolError, MAX_ALLOC};
use cornflakes::{Pool, PoolConfig};

use crate::PACKET_HEADER_LEN;

/// The default limit on a message, [`TcpConfig::max_message`]: 64 MiB.
/// A received message is delivered as one contiguous pool buffer (above
/// 2 MiB, a run of pool regions), so the limit bounds what one peer can
/// make us allocate.
pub const MAX_TCP_MESSAGE: usize = 64 << 20;

/// The highest [`TcpConfig::max_message`] can be set: what the frame
/// header's 32-bit length can announce, less the header itself.
pub const FRAME_MAX_MESSAGE: usize = u32::MAX as usize - PACKET_HEADER_LEN;

/// How a [`TcpDatapath`](super::TcpDatapath) finds messages in the byte
/// stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Framing {
    /// Each message is preceded by the 8-byte frame header (id, length);
    /// see [`write_frame_header`](super::write_frame_header).
    #[default]
    Length,
    /// No framing: a send writes the message's bytes as they are, and
    /// every receive completion is delivered as one message (id 0) holding
    /// what arrived. For protocols that delimit themselves, such as RESP;
    /// the application joins and splits the pieces.
    Raw,
}

/// How a [`TcpDatapath`](super::TcpDatapath) receives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecvMode {
    /// One `RECV` per connection at a time, into that connection's own pool
    /// buffer; a frame larger than the buffer is received in place into a
    /// buffer of its size (one copy of at most one buffer).
    #[default]
    Single,
    /// One multishot `RECV` per connection, receiving into buffers the
    /// kernel picks from a provided-buffer ring of pool buffers
    /// ([`TcpConfig::recv_ring_buffers`] of [`TcpConfig::recv_buffer`]
    /// bytes, shared by all connections). Frames within one buffer are
    /// delivered in place; a frame spanning buffers is copied into one of
    /// its size. Needs Linux 6.0.
    Multishot,
}

/// Settings of a [`TcpDatapath`](super::TcpDatapath).
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Use this pool (share it with the application); when `None`, a pool
    /// is created from `pool_config`.
    pub pool: Option<Pool>,
    /// Configuration of the pool created when `pool` is `None`.
    pub pool_config: PoolConfig,
    /// Largest message accepted from a peer (and sent); a peer that
    /// announces more is disconnected and counted. Default
    /// [`MAX_TCP_MESSAGE`] (64 MiB), at most [`FRAME_MAX_MESSAGE`]; the
    /// pool's `max_bytes` must hold it (a peer announcing more than the
    /// pool can ever hold is disconnected too).
    pub max_message: usize,
    /// How messages are delimited on the byte stream. Default
    /// [`Framing::Length`].
    pub framing: Framing,
    /// How receives are posted. Default [`RecvMode::Single`] (see the
    /// module docs for the measurements behind the default).
    pub recv_mode: RecvMode,
    /// [`RecvMode::Multishot`]: buffers in the provided-buffer ring (a
    /// power of two, at most 32768). Default 256.
    pub recv_ring_buffers: u16,
    /// Bytes of each connection's receive buffer (a pool buffer); messages
    /// that fit arrive in place, larger ones are reassembled into a buffer
    /// of their size. Default 64 KiB.
    pub recv_buffer: usize,
    /// Most received messages waiting for [`recv_batch`](crate::Datapath::recv_batch);
    /// at the bound receives are not reposted (peers then see TCP's flow
    /// control). Default 4096.
    pub max_ready: usize,
    /// Most connections at once (accepted and dialled); beyond, accepted
    /// connections are sent [`refusal`](Self::refusal), closed at once and
    /// counted ([`TcpStats::rejected`](super::TcpStats::rejected)). Default 4096.
    pub max_connections: usize,
    /// What a connection accepted while the table is full is told before
    /// it is closed (written once, without blocking; the socket is new, so
    /// a short message fits its send buffer): for example RESP's
    /// `-ERR max number of clients reached\r\n`, as Redis answers.
    /// Default empty: closed without a word.
    pub refusal: Vec<u8>,
    /// A send goes out with `SENDMSG_ZC` when one of its zero-copy segments
    /// has at least this many bytes (and the kernel has `SENDMSG_ZC`);
    /// otherwise with plain `SENDMSG`. `usize::MAX` never uses zero-copy;
    /// 0 always does when there is a zero-copy segment. Default 16 KiB (see
    /// the module docs, *Zero-copy break-even*).
    pub zero_copy_min: usize,
    /// Run the zero-copy break-even probe at start-up against this peer
    /// (one that reads and discards, such as a
    /// [`DiscardSink`](super::DiscardSink) or `cf zc-sink` on the far
    /// host): 1 KiB to 1 MiB, 10 ms per size and mode (about 0.3 s), then
    /// `zero_copy_min` is what it chose
    /// ([`TcpDatapath::zero_copy_probe`](super::TcpDatapath::zero_copy_probe)
    /// says what and why). Default `None`: `zero_copy_min` as set.
    pub zero_copy_probe: Option<SocketAddr>,
    /// Most messages queued on one connection behind the socket (sent in
    /// order as it drains); beyond, sends fail with
    /// [`SendError::Backlogged`](crate::SendError::Backlogged). Default 1024.
    pub max_queued_messages: usize,
    /// Most bytes queued on one connection (a message is always accepted by
    /// an empty queue). Default 16 MiB.
    pub max_queued_bytes: usize,
    /// Submission queue entries (the completion queue has four times as
    /// many). Default 4096.
    pub ring_entries: u32,
    /// Sends in flight at once over all connections (each holds an iovec
    /// array). Default 8192.
    pub max_send_ops: usize,
    /// `listen` backlog. Default 4096.
    pub backlog: i32,
    /// How long [`wait`](crate::Datapath::wait) spins before sleeping.
    /// Default zero.
    pub busy_poll: Duration,
    /// How long dropping the datapath waits for the kernel to finish with
    /// its buffers before leaking them. Default 1 s.
    pub close_linger: Duration,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            pool: None,
            pool_config: PoolConfig::default(),
            max_message: MAX_TCP_MESSAGE,
            framing: Framing::Length,
            recv_mode: RecvMode::Single,
            recv_ring_buffers: 256,
            recv_buffer: 64 << 10,
            max_ready: 4096,
            max_connections: 4096,
            refusal: Vec::new(),
            zero_copy_min: 16 << 10,
            zero_copy_probe: None,
            max_queued_messages: 1024,
            max_queued_bytes: 16 << 20,
            ring_entries: 4096,
            max_send_ops: 8192,
            backlog: 4096,
            busy_poll: Duration::ZERO,
            close_linger: Duration::from_secs(1),
        }
    }
}

impl TcpConfig {
    /// The default for loopback and veth, where the kernel copies
    /// zero-copy sends anyway: plain `SENDMSG` only.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::tcp::TcpConfig;
    ///
    /// assert_eq!(TcpConfig::loopback().zero_copy_min, usize::MAX);
    /// ```
    pub fn loopback() -> Self {
        Self { zero_copy_min: usize::MAX, ..Self::default() }
    }

    pub(super) fn check(&self) -> Result<(), TcpError> {
        if self.max_message > FRAME_MAX_MESSAGE {
            return Err(TcpError::Config("max_message exceeds FRAME_MAX_MESSAGE (a frame's 32-bit length)"));
        }
        if self.recv_buffer < 2 * PACKET_HEADER_LEN || self.recv_buffer > MAX_ALLOC {
            return Err(TcpError::Config("recv_buffer must be between 16 bytes and 2 MiB"));
        }
        if !self.recv_ring_buffers.is_power_of_two() || self.recv_ring_buffers > 32768 {
            return Err(TcpError::Config("recv_ring_buffers must be a power of two, at most 32768"));
        }
        if self.max_ready == 0 || self.max_connections == 0 || self.max_send_ops == 0 {
            return Err(TcpError::Config("max_ready, max_connections and max_send_ops must be positive"));
        }
        if self.max_connections >= 1 << super::conn::INDEX_BITS {
            return Err(TcpError::Config("max_connections must be below 2^20"));
        }
        if !(8..=32768).contains(&self.ring_entries) {
            return Err(TcpError::Config("ring_entries must be between 8 and 32768"));
        }
        Ok(())
    }
}

/// Why a [`TcpDatapath`](super::TcpDatapath) could not be created, or could
/// not listen or connect.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    /// A field of [`TcpConfig`] is out of range.
    #[error("invalid TcpConfig: {0}")]
    Config(&'static str),
    /// The pool could not be created.
    #[error("cannot create the datapath's pool: {0}")]
    Pool(PoolError),
    /// The io_uring instance could not be created.
    #[error("cannot create an io_uring: {0} (needs Linux 6.0 or later with io_uring enabled)")]
    Ring(io::Error),
    /// The provided-buffer ring of [`RecvMode::Multishot`] could not be
    /// registered.
    #[error("cannot register the receive buffer ring: {0} (multishot receive needs Linux 6.0; use RecvMode::Single)")]
    BufRing(io::Error),
    /// Listening failed.
    #[error("cannot listen on {addr}: {error} (is the address local and the port free?)")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        error: io::Error,
    },
    /// Connecting failed.
    #[error("cannot connect to {addr}: {error} (is a server listening there?)")]
    Connect {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        error: io::Error,
    },
    /// The connection table is full ([`TcpConfig::max_connections`]).
    #[error("too many connections (max_connections is {0})")]
    TooManyConnections(usize),
}

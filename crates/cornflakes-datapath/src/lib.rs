//! Datapaths: the networking half of Cornflakes, behind one small trait.
//!
//! A [`Datapath`] owns a [`Pool`] of pinned buffers (what it registers with
//! the kernel or shares with a peer), receives batches of messages as
//! reference-counted buffers, and sends either a Cornflakes object directly
//! ([`Datapath::push_message`], *serialize-and-send*: the header and copied
//! fields are written into the first segment, each zero-copy field is posted
//! as one more segment, with no intermediate segment array) or segments the
//! caller built ([`Datapath::push_segments`], for the baselines and the
//! "without serialize-and-send" ablation). Sends hold references to their
//! zero-copy buffers until [`Datapath::poll_completions`] sees them
//! finished, so a value the application drops stays intact until then.
//!
//! Backends, each in its own folder:
//! - [`shm`]: processes on one host, SocksDirect-style rings in shared memory.
//! - [`udp`]: any two hosts, Linux UDP through io_uring with zero-copy send.
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::time::Duration;

use cornflakes::{AllocError, Message, Pool, RcBuf, RcBufMut};

#[allow(unsafe_code)]
pub mod shm;
#[allow(unsafe_code)]
pub mod udp;

/// A peer of a datapath: a connection (shared memory) or a remote address
/// (UDP), numbered by the datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// One received message.
#[derive(Debug)]
pub struct Received {
    /// Who sent it (reply with the same id).
    pub conn: ConnId,
    /// The sender's message id, for matching requests and responses.
    pub msg_id: u32,
    /// The message bytes (packet header stripped), in this datapath's
    /// memory ([`Datapath::scratch_pool`] on `shm`).
    pub payload: RcBuf,
}

/// A piece of a message sent with [`Datapath::push_segments`].
#[derive(Debug)]
pub enum Segment<'s> {
    /// Bytes the datapath copies into the first segment.
    Copy(&'s [u8]),
    /// A pool buffer sent zero-copy, held until the send completes.
    ZeroCopy(RcBuf),
}

/// Why a send failed. `Full` is back-pressure: poll completions or receive,
/// then retry.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No room now (ring credits, submission queue, buffers in flight).
    #[error("send queue full; retry after processing completions")]
    Full,
    /// The message exceeds what one send can carry on this datapath.
    #[error("message of {len} bytes exceeds this datapath's limit of {max}")]
    TooLarge {
        /// Message length with all segments.
        len: usize,
        /// The limit (ring size, path MTU).
        max: usize,
    },
    /// Too many segments for one send.
    #[error("message has {count} segments; this datapath takes at most {max}")]
    TooManySegments {
        /// Segments in the message.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// No buffer for the first segment.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// The connection is unknown or its peer has gone.
    #[error("connection {0:?} is closed")]
    Closed(ConnId),
    /// The message could not be written.
    #[error(transparent)]
    Encode(#[from] cornflakes::EncodeError),
    /// The operating system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why receiving failed. Malformed packets are not errors: they are dropped
/// and counted in [`DatapathStats::dropped_malformed`].
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// The peer has gone (shared memory) or the socket is closed.
    #[error("connection {0:?} is closed")]
    Closed(ConnId),
    /// The operating system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Counters every datapath keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatapathStats {
    /// Messages sent.
    pub sent: u64,
    /// Messages received.
    pub received: u64,
    /// Segments sent zero-copy (beyond the first of each message).
    pub zero_copy_segments: u64,
    /// Completions processed (references released).
    pub completions: u64,
    /// Zero-copy sends the kernel reported as copied after all.
    pub zero_copy_copied: u64,
    /// Received packets dropped because they were malformed.
    pub dropped_malformed: u64,
    /// Received packets dropped for lack of buffers.
    pub dropped_no_buffer: u64,
}

/// The one trait every backend implements (compare smoltcp's `phy::Device`
/// and Demikernel's layer-1 trait).
pub trait Datapath {
    /// The pinned pool whose buffers the application sends zero-copy on
    /// purpose (values it keeps, such as a store's).
    ///
    /// On [`shm`] every peer maps this pool and can read **all** of it:
    /// allocate here only what any peer may read. Build per-message data
    /// with [`alloc`](Self::alloc) instead.
    fn pool(&self) -> &Pool;

    /// The pinned pool for buffers of one message: first segments,
    /// responses built per request, scratch, and (on [`shm`]) receive
    /// buffers. Never readable by a peer; on [`shm`] a zero-copy segment
    /// from here is copied into the message. Defaults to
    /// [`pool`](Self::pool) for backends without peer-readable memory.
    fn scratch_pool(&self) -> &Pool {
        self.pool()
    }

    /// Allocates a pinned, writable buffer from
    /// [`scratch_pool`](Self::scratch_pool); freeze it to send it.
    ///
    /// # Errors
    ///
    /// As [`Pool::alloc`]: back-pressure when the pool is exhausted.
    fn alloc(&self, len: usize) -> Result<RcBufMut, AllocError> {
        self.scratch_pool().alloc(len)
    }

    /// The reference-counted buffer containing `data`, if it is in this
    /// datapath's memory.
    fn recover(&self, data: &[u8]) -> Option<RcBuf> {
        self.pool().recover(data)
    }

    /// Appends up to `max` received messages to `out`; returns how many.
    /// Never blocks.
    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError>;

    /// Waits until a receive may succeed or `timeout` passes (busy-polling
    /// first where the backend does). Returns whether something is ready.
    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError>;

    /// Serialize-and-send: writes the packet header, the object header and
    /// copied fields into the first segment and posts each zero-copy field
    /// as a further segment, holding a reference until completion.
    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError>;

    /// Sends segments the caller built (baselines and the ablation without
    /// serialize-and-send): `Copy` segments are copied into the first
    /// segment, `ZeroCopy` ones posted as they are.
    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError>;

    /// Sends one contiguous buffer (copied).
    fn push_buf(&mut self, conn: ConnId, msg_id: u32, data: &[u8]) -> Result<(), SendError> {
        self.push_segments(conn, msg_id, &[Segment::Copy(data)])
    }

    /// Makes queued sends visible to the peer or kernel; sends may be
    /// batched until then.
    fn flush(&mut self) -> Result<(), SendError>;

    /// Processes send completions, releasing the references in-flight sends
    /// hold. Returns the number processed.
    fn poll_completions(&mut self) -> Result<usize, SendError>;

    /// Counters.
    fn stats(&self) -> DatapathStats;
}

/// Bytes every datapath puts before a message: the message id (u32 LE) and
/// a reserved word (u32, zero; for segmentation later).
pub const PACKET_HEADER_LEN: usize = 8;

/// Writes the packet header into the first `PACKET_HEADER_LEN` bytes of `buf`.
#[inline(always)]
pub fn write_packet_header(buf: &mut [u8], msg_id: u32) {
    buf[..4].copy_from_slice(&msg_id.to_le_bytes());
    buf[4..8].copy_from_slice(&0u32.to_le_bytes());
}

/// Reads the message id from a packet; `None` when the packet is shorter
/// than the header or the reserved word is not zero (malformed: drop it).
#[inline(always)]
pub fn read_packet_header(packet: &[u8]) -> Option<u32> {
    if packet.len() < PACKET_HEADER_LEN || packet[4..8] != [0, 0, 0, 0] {
        return None;
    }
    Some(u32::from_le_bytes([packet[0], packet[1], packet[2], packet[3]]))
}

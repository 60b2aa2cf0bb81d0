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
//! - [`tcp`]: any two hosts, Linux TCP through io_uring: messages up to the
//!   pool's largest buffer, many connections, zero-copy send.
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::time::Duration;

use cornflakes::{AllocError, Message, Pool, RcBuf, RcBufMut};

mod in_place;
mod prepared;
#[allow(unsafe_code)]
pub mod shm;
#[allow(unsafe_code)]
pub mod tcp;
pub mod timeline;
#[allow(unsafe_code)]
pub mod udp;
#[allow(unsafe_code)]
mod uring;
mod waker;

pub use in_place::{InPlace, Span};
pub use prepared::{Capture, Prepared};
pub use waker::Waker;

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
    /// A range of a message received in place could not be sent: its lease
    /// on the peer's buffer expired.
    #[error(transparent)]
    LeaseExpired(#[from] shm::LeaseExpired),
    /// The message exceeds what one send can carry on this datapath.
    #[error("message of {len} bytes exceeds this datapath's limit of {max} (a UDP datagram carries one message; the tcp datapath carries larger ones, up to 64 MiB by default)")]
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
    /// This connection's peer is not reading: its queue of messages waiting
    /// for room is at its bound. Retrying soon will not help; drop the
    /// message (and count it) or close the connection. Other connections
    /// are not affected.
    #[error("connection {0:?} is backlogged: its peer is not reading")]
    Backlogged(ConnId),
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
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let value = dp.pool().alloc_copy(&[7u8; 4096])?; // can now be sent zero-copy
    /// assert_eq!(value.len(), 4096);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut buf = dp.alloc(5)?;
    /// buf.copy_from_slice(b"hello");
    /// let shared = buf.freeze(); // now it can be cloned and sent
    /// assert_eq!(&shared[..], b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn alloc(&self, len: usize) -> Result<RcBufMut, AllocError> {
        self.scratch_pool().alloc(len)
    }

    /// The reference-counted buffer containing `data`, if it is in this
    /// datapath's memory (frozen buffers only: a writable [`RcBufMut`] cannot
    /// be found).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let value = dp.pool().alloc_copy(b"a value")?;
    /// let again = dp.recover(&value[2..]).expect("in the pool");
    /// assert_eq!(&again[..], b"value");
    /// assert!(dp.recover(b"on the heap").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn recover(&self, data: &[u8]) -> Option<RcBuf> {
        self.pool().recover(data)
    }

    /// Appends up to `max` received messages to `out`; returns how many.
    /// Never blocks.
    ///
    /// # Errors
    ///
    /// [`RecvError::Closed`] once per connection whose peer has gone
    /// (shared memory); [`RecvError::Io`] when the operating system refuses
    /// (UDP: resubmitting receives). Malformed input is dropped and
    /// counted, never an error.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// client.push_buf(conn, 1, b"ping")?;
    /// client.flush()?;
    /// let mut out = Vec::new();
    /// while server.recv_batch(&mut out, 32)? == 0 {
    ///     server.wait(std::time::Duration::from_millis(100))?;
    /// }
    /// assert_eq!((out[0].msg_id, &out[0].payload[..]), (1, &b"ping"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn recv_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError>;

    /// [`Datapath::recv_batch`] for receivers that can read a message in
    /// place: on [`shm`] with [`ShmConfig::receive_in_place`](shm::ShmConfig::receive_in_place)
    /// set, a trusted peer's zero-copy segments stay in its pool as leased
    /// [`shm::PeerSlice`]s instead of being copied (its buffers are released
    /// when the message is dropped). Elsewhere, and by default, every
    /// message is whole in our memory ([`InPlace::as_local`]).
    ///
    /// # Errors
    ///
    /// As [`Datapath::recv_batch`].
    fn recv_batch_in_place(&mut self, out: &mut Vec<InPlace>, max: usize) -> Result<usize, RecvError> {
        let mut whole = Vec::with_capacity(max.min(64));
        let n = self.recv_batch(&mut whole, max)?;
        out.extend(whole.into_iter().map(InPlace::from));
        Ok(n)
    }

    /// Whether [`recv_batch_in_place`](Self::recv_batch_in_place) may leave
    /// parts of a message in a peer's memory (on [`shm`] with
    /// [`ShmConfig::receive_in_place`](shm::ShmConfig::receive_in_place)):
    /// a server that can answer from such parts calls it instead of
    /// [`recv_batch`](Self::recv_batch). False by default.
    fn receives_in_place(&self) -> bool {
        false
    }

    /// Waits until a receive may succeed or `timeout` passes (busy-polling
    /// first where the backend does). Returns whether something is ready.
    ///
    /// # Errors
    ///
    /// As [`Datapath::recv_batch`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut dp = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// assert!(!dp.wait(Duration::from_millis(1))?, "nobody sent anything");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn wait(&mut self, timeout: Duration) -> Result<bool, RecvError>;

    /// Serialize-and-send: writes the packet header, the object header and
    /// copied fields into the first segment and posts each zero-copy field
    /// as a further segment, holding a reference until completion.
    ///
    /// # Errors
    ///
    /// [`SendError::Full`] is back-pressure (poll completions or receive,
    /// then retry); [`SendError::TooLarge`] and
    /// [`SendError::TooManySegments`] when the message exceeds the peer's
    /// limits; [`SendError::Closed`] for an unknown or departed peer;
    /// [`SendError::Alloc`] without a buffer for the first segment;
    /// [`SendError::Encode`] when the message cannot be written.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, Message};
    /// use cornflakes_tests::example::GetM;
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// let value = client.pool().alloc_copy(&[7u8; 4096])?;
    /// let arena = Arena::new(client.pool());
    /// let mut m = GetM::new_in(&arena);
    /// m.set_id(1);
    /// m.append_vals(&value); // large and pinned: a segment of its own
    /// client.push_message(conn, 42, &m)?;
    /// client.flush()?;
    /// # fn recv_one(dp: &mut impl Datapath) -> cornflakes_datapath::Received {
    /// #     let mut out = Vec::new();
    /// #     while dp.recv_batch(&mut out, 1).unwrap() == 0 {
    /// #         dp.wait(std::time::Duration::from_millis(100)).unwrap();
    /// #     }
    /// #     out.pop().unwrap()
    /// # }
    /// let got = recv_one(&mut server);
    /// let server_arena = Arena::new(server.pool());
    /// let back = GetM::deserialize(&got.payload, &server_arena)?;
    /// assert_eq!(back.get_vals()[0].len(), 4096);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn push_message<'a, M: Message<'a>>(&mut self, conn: ConnId, msg_id: u32, msg: &M) -> Result<(), SendError>;

    /// Sends segments the caller built (baselines and the ablation without
    /// serialize-and-send): `Copy` segments are copied into the first
    /// segment, `ZeroCopy` ones posted as they are.
    ///
    /// # Errors
    ///
    /// As [`Datapath::push_message`] (without `Encode`).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::Segment;
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// let value = client.pool().alloc_copy(&[1u8; 2048])?;
    /// client.push_segments(conn, 7, &[Segment::Copy(b"len=2048;"), Segment::ZeroCopy(value)])?;
    /// client.flush()?;
    /// # fn recv_one(dp: &mut impl Datapath) -> cornflakes_datapath::Received {
    /// #     let mut out = Vec::new();
    /// #     while dp.recv_batch(&mut out, 1).unwrap() == 0 {
    /// #         dp.wait(std::time::Duration::from_millis(100)).unwrap();
    /// #     }
    /// #     out.pop().unwrap()
    /// # }
    /// let got = recv_one(&mut server);
    /// assert_eq!(got.payload.len(), 9 + 2048);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn push_segments(&mut self, conn: ConnId, msg_id: u32, segments: &[Segment<'_>]) -> Result<(), SendError>;

    /// Sends one contiguous buffer (copied).
    ///
    /// # Errors
    ///
    /// As [`Datapath::push_segments`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// client.push_buf(conn, 1, b"ping")?;
    /// client.flush()?;
    /// # fn recv_one(dp: &mut impl Datapath) -> cornflakes_datapath::Received {
    /// #     let mut out = Vec::new();
    /// #     while dp.recv_batch(&mut out, 1).unwrap() == 0 {
    /// #         dp.wait(std::time::Duration::from_millis(100)).unwrap();
    /// #     }
    /// #     out.pop().unwrap()
    /// # }
    /// assert_eq!(&recv_one(&mut server).payload[..], b"ping");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn push_buf(&mut self, conn: ConnId, msg_id: u32, data: &[u8]) -> Result<(), SendError> {
        self.push_segments(conn, msg_id, &[Segment::Copy(data)])
    }

    /// Sends a message made of `spans` in order: bytes of ours and ranges
    /// of a message received in place ([`InPlace::span`]). On [`shm`], a
    /// [`Span::Peer`] sent back to the peer it came from, when that peer
    /// [accepts returns](shm::ShmConfig::accept_returns), goes by reference
    /// into its own pool: neither side copies it (an echo). Everything else,
    /// and everything on other datapaths, is copied into the message.
    ///
    /// # Errors
    ///
    /// As [`Datapath::push_segments`]; [`SendError::LeaseExpired`] when a
    /// [`Span::Peer`]'s lease has expired (nothing is sent).
    fn push_spans(&mut self, conn: ConnId, msg_id: u32, spans: &[Span<'_>]) -> Result<(), SendError> {
        let total = spans.iter().map(Span::len).sum();
        let mut buf = vec![0u8; total];
        let mut at = 0;
        for s in spans {
            let n = s.len();
            match s {
                Span::Local(b) => buf[at..at + n].copy_from_slice(b),
                Span::Peer(p) => p.copy_to_slice(&mut buf[at..at + n])?,
            }
            at += n;
        }
        self.push_segments(conn, msg_id, &[Segment::Copy(&buf)])
    }

    /// Makes queued sends visible to the peer or kernel; sends may be
    /// batched until then.
    ///
    /// # Errors
    ///
    /// [`SendError::Full`] when the kernel is busy (UDP: poll completions,
    /// then flush again); [`SendError::Io`] when it refuses.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// for id in 0..8 {
    ///     client.push_buf(conn, id, b"batched")?; // queued only
    /// }
    /// client.flush()?; // one system call for all eight (UDP)
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn flush(&mut self) -> Result<(), SendError>;

    /// Processes send completions, releasing the references in-flight sends
    /// hold. Returns the number processed.
    ///
    /// # Errors
    ///
    /// [`SendError::Io`] when the operating system refuses (UDP:
    /// resubmitting receives).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// let value = client.pool().alloc_copy(&[3u8; 2048])?;
    /// client.push_segments(conn, 1, &[cornflakes_datapath::Segment::ZeroCopy(value.clone())])?;
    /// client.flush()?;
    /// let mut released = 0;
    /// while released == 0 {
    ///     released += client.poll_completions()?;
    /// }
    /// assert_eq!(value.ref_count(), 1, "the send's reference is gone");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn poll_completions(&mut self) -> Result<usize, SendError>;

    /// Counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
    /// use cornflakes_datapath::Datapath;
    ///
    /// let mut server = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let mut client = UdpDatapath::bind("127.0.0.1:0".parse()?, UdpConfig::loopback())?;
    /// let conn = client.connect(server.local_addr());
    /// client.push_buf(conn, 1, b"ping")?;
    /// assert_eq!(client.stats().sent, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn stats(&self) -> DatapathStats;
}

/// Bytes every datapath puts before a message: the message id (u32 LE) and
/// a reserved word (u32, zero; for segmentation later).
pub const PACKET_HEADER_LEN: usize = 8;

/// Writes the packet header into the first `PACKET_HEADER_LEN` bytes of `buf`.
///
/// # Panics
///
/// When `buf` is shorter than [`PACKET_HEADER_LEN`].
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::{read_packet_header, write_packet_header, PACKET_HEADER_LEN};
///
/// let mut packet = [0xFFu8; PACKET_HEADER_LEN + 3];
/// write_packet_header(&mut packet, 9);
/// assert_eq!(read_packet_header(&packet), Some(9));
/// ```
#[inline(always)]
pub fn write_packet_header(buf: &mut [u8], msg_id: u32) {
    buf[..4].copy_from_slice(&msg_id.to_le_bytes());
    buf[4..8].copy_from_slice(&0u32.to_le_bytes());
}

/// Reads the message id from a packet; `None` when the packet is shorter
/// than the header or the reserved word is not zero (malformed: drop it).
/// Never panics.
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::read_packet_header;
///
/// assert_eq!(read_packet_header(&[5, 0, 0, 0, 0, 0, 0, 0, b'x']), Some(5));
/// assert_eq!(read_packet_header(&[5, 0, 0, 0, 0, 0, 0]), None, "short");
/// assert_eq!(read_packet_header(&[5, 0, 0, 0, 1, 0, 0, 0]), None, "reserved word set");
/// ```
#[inline(always)]
pub fn read_packet_header(packet: &[u8]) -> Option<u32> {
    if packet.len() < PACKET_HEADER_LEN || packet[4..8] != [0, 0, 0, 0] {
        return None;
    }
    Some(u32::from_le_bytes([packet[0], packet[1], packet[2], packet[3]]))
}

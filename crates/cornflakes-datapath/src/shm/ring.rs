//! A single-producer, single-consumer ring of variable-length records in a
//! sealed memfd, after SocksDirect §4.2 (per-socket ring buffer, credits,
//! payload before metadata). This is the bare transport under
//! [`ShmDatapath`](super::ShmDatapath), usable on its own (the ping-pong
//! benchmark compares the two).
//!
//! # Contract
//!
//! - The **consumer** creates the ring ([`RingConsumer::create`]) and hands
//!   its memfd ([`RingConsumer::memfd`]) to the producer's process, which
//!   attaches with [`RingProducer::attach`]. [`Ring::create`] does both in
//!   one process. The memfd is sealed against shrinking and growing, and
//!   `attach` refuses one that is not, so neither side can ever touch a page
//!   that disappears (`SIGBUS`).
//! - `attach` reads the ring header once and checks it against the file
//!   size; after that, nothing either side reads from shared memory is
//!   trusted: the consumer checks every record header
//!   ([`RingCorrupt`] when one is impossible), the producer checks the credit
//!   word ([`PushError::Corrupt`]). Neither panics or reads outside the
//!   mapping on bad input.
//! - **Neither side ever gets a Rust reference to ring memory**: the other
//!   process can write it at any time. [`RingProducer::try_push`] copies in
//!   and [`RingConsumer::try_pop`] copies out, with the raw-copy primitives
//!   of `shm::sys`; record headers and control words are atomics.
//! - [`RingProducer::try_push`] never blocks: [`PushError::Full`] is
//!   back-pressure. A record body is at most [`RingProducer::max_len`]
//!   bytes (half the ring, so that a drained ring always has room for it).
//!
//! # Memory layout
//!
//! ```text
//!  memfd offset
//!  0     ┌──────────────────────────────────────────────────────────────┐
//!        │ header line: magic, version, data_size, key   (set at create)│ 128 B
//!  128   ├──────────────────────────────────────────────────────────────┤
//!        │ consumer line: credits (u64 position), acked (u64)           │ 128 B  written by the consumer,
//!  256   ├──────────────────────────────────────────────────────────────┤        read by the producer only
//!        │ sleep line: consumer_sleeping (u32)                          │ 128 B  when it runs out of credits
//!  384   ├──────────────────────────────────────────────────────────────┤        / after each publish
//!        │ unused                                                       │
//!  4096  ├──────────────────────────────────────────────────────────────┤
//!        │ data[data_size]  (power of two, records back to back)        │
//!        │ ┌──────┬─────┬──────┬──────────────┐┌──────┬─────┬──────┬──── │
//!        │ │ tag  │ len │ info │ body[len] pad││ tag  │ len │ info │ ... │
//!        │ │ u64  │ u32 │ u32  │  → 16 B mult.││      │     │      │     │
//!        │ └──────┴─────┴──────┴──────────────┘└──────┴─────┴──────┴──── │
//!        │  ▲ head (consumer)                    ▲ tail (producer)        │
//!        └──────────────────────────────────────────────────────────────┘
//! ```
//!
//! Lines are 128 bytes apart (the adjacent-line prefetcher pairs 64-byte
//! lines), so the words each side writes never share a line with the words
//! the other side writes. Head and tail are private to their side: there is
//! no shared head or tail word on the fast path.
//!
//! # Protocol
//!
//! Positions are `u64` byte counts that never wrap; a record at position
//! `p` lives at `data[p mod data_size]`, is 16-byte aligned, and is
//! published by its **tag** word `p ^ key` (key: random per ring, top bit
//! set, so a tag is never 0 and stale bytes from an earlier lap cannot pass
//! for it). The producer writes the body, then `len` and `info`, then the
//! tag with a `Release` store (payload before metadata); the consumer polls
//! the tag at its head with an `Acquire` load, so it reads a record only once
//! the record is complete. Only one cache line moves per small message: the
//! one holding the tag, the header and the start of the body.
//!
//! A record that would run past the end of the data area is preceded by a
//! *wrap* record (`info` top bit) covering the rest of the area, and placed
//! at offset 0.
//!
//! Credits: the producer may write up to `credits + data_size`, where
//! `credits` is the consumer's head as last returned. The consumer writes
//! its head to the credit word only once it has consumed at least half the
//! ring since the last return (SocksDirect's credit-return flag), so the
//! producer reads that line once per half ring, not once per message.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::sys::{self, Mapping, Populate};

/// Bytes before the data area: the control lines, padded to a page.
pub const CONTROL_BYTES: usize = 4096;
/// Bytes of a record header: tag (u64), length (u32), info (u32).
pub const RECORD_HEADER_LEN: usize = 16;
/// Records start at multiples of this.
pub const RECORD_ALIGN: usize = 16;
/// Smallest data area.
pub const MIN_RING_SIZE: usize = 4096;
/// Largest data area.
pub const MAX_RING_SIZE: usize = 1 << 30;
/// Data area used when nothing else is configured: 1 MiB.
pub const DEFAULT_RING_SIZE: usize = 1 << 20;
/// Largest `info` word a record may carry (the top bit marks wrap records).
pub const MAX_INFO: u32 = INFO_WRAP - 1;

const MAGIC: u64 = u64::from_le_bytes(*b"CFKSRING");
const VERSION: u32 = 1;
const INFO_WRAP: u32 = 1 << 31;
const KEY_BIT: u64 = 1 << 63;

#[repr(C, align(128))]
struct HeaderLine {
    magic: AtomicU64,
    version: AtomicU32,
    _reserved: AtomicU32,
    data_size: AtomicU64,
    key: AtomicU64,
}

#[repr(C, align(128))]
struct ConsumerLine {
    /// Consumer head at the last credit return.
    credits: AtomicU64,
    /// Free for the layer above: the datapath counts completed sends here.
    acked: AtomicU64,
}

#[repr(C, align(128))]
struct SleepLine {
    /// Non-zero while the consumer is (about to be) asleep.
    sleeping: AtomicU32,
}

/// The control area at the start of the memfd. Only atomics: both
/// processes may access it at any time.
#[repr(C)]
struct Control {
    header: HeaderLine,
    consumer: ConsumerLine,
    sleep: SleepLine,
}

const _: () = assert!(std::mem::offset_of!(Control, consumer) == 128);
const _: () = assert!(std::mem::offset_of!(Control, sleep) == 256);
const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);
const _: () = assert!(RECORD_HEADER_LEN == 16 && RECORD_ALIGN == 16);

/// Bytes a record with a body of `len` bytes takes in the ring.
#[inline(always)]
pub const fn record_len(len: usize) -> usize {
    (RECORD_HEADER_LEN + len + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// Why a ring could not be created or attached.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// The operating system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The data size is not a power of two between the limits.
    #[error("ring size {0} must be a power of two between {MIN_RING_SIZE} and {MAX_RING_SIZE}")]
    BadSize(usize),
    /// The memfd does not hold a valid ring header.
    #[error("not a ring: {0}")]
    BadHeader(&'static str),
    /// The memfd can shrink, so a mapping of it could fault (`SIGBUS`).
    #[error("ring memfd is not sealed against shrinking")]
    NotSealed,
}

/// Why a push failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// Not enough credits now: let the consumer catch up and retry.
    #[error("ring full")]
    Full,
    /// The body can never fit (more than half the ring).
    #[error("record of {len} bytes exceeds the ring's limit of {max}")]
    TooLarge {
        /// Requested body length.
        len: usize,
        /// [`RingProducer::max_len`].
        max: usize,
    },
    /// The consumer wrote an impossible credit value.
    #[error("ring corrupt: impossible credit return")]
    Corrupt,
}

/// The producer found an impossible record header: the ring cannot be
/// trusted any more and should be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ring corrupt: impossible record header")]
pub struct RingCorrupt;

/// A producer's place in a ring ([`RingProducer::cursor`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerCursor {
    /// Next position to write.
    pub tail: u64,
    /// The consumer's credit word as last read.
    pub credits: u64,
}

/// A consumer's place in a ring ([`RingConsumer::cursor`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerCursor {
    /// Next position to read.
    pub head: u64,
    /// Head at the last credit return.
    pub returned: u64,
}

/// One mapped ring, as either endpoint sees it.
struct Mapped {
    map: Mapping,
    fd: OwnedFd,
    size: usize,
    key: u64,
}

impl Mapped {
    fn create(size: usize) -> Result<Self, RingError> {
        check_size(size)?;
        let fd = sys::create_sealed_memfd("cornflakes-ring", CONTROL_BYTES + size)?;
        let map = Mapping::map(fd.as_fd(), CONTROL_BYTES + size, true, Populate::Always)?;
        let key = sys::random_u64() | KEY_BIT;
        let m = Self { map, fd, size, key };
        let h = &m.control().header;
        h.magic.store(MAGIC, Ordering::Relaxed);
        h.version.store(VERSION, Ordering::Relaxed);
        h.data_size.store(size as u64, Ordering::Relaxed);
        h.key.store(key, Ordering::Relaxed);
        Ok(m)
    }

    fn attach(fd: OwnedFd) -> Result<Self, RingError> {
        if !sys::is_shrink_sealed(fd.as_fd()) {
            return Err(RingError::NotSealed);
        }
        let file_len = sys::file_size(fd.as_fd())?;
        if file_len < (CONTROL_BYTES + MIN_RING_SIZE) as u64 || file_len > (CONTROL_BYTES + MAX_RING_SIZE) as u64 {
            return Err(RingError::BadHeader("memfd size out of range"));
        }
        let map = Mapping::map(fd.as_fd(), file_len as usize, true, Populate::IfAllocated)?;
        let mut m = Self { map, fd, size: 0, key: 0 };
        // Each header word is read once; the creator may change them later,
        // but only these copies are used.
        let h = &m.control().header;
        let (magic, version) = (h.magic.load(Ordering::Relaxed), h.version.load(Ordering::Relaxed));
        let (size, key) = (h.data_size.load(Ordering::Relaxed), h.key.load(Ordering::Relaxed));
        if magic != MAGIC || version != VERSION {
            return Err(RingError::BadHeader("wrong magic or version"));
        }
        if size.checked_add(CONTROL_BYTES as u64) != Some(file_len) {
            return Err(RingError::BadHeader("data size disagrees with the memfd size"));
        }
        check_size(size as usize)?;
        if key & KEY_BIT == 0 {
            return Err(RingError::BadHeader("key without its top bit"));
        }
        m.size = size as usize;
        m.key = key;
        Ok(m)
    }

    /// Renumbers the memfd to the lowest free descriptor at or above
    /// `floor` (close-on-exec), closing the old number. The mapping is
    /// untouched.
    fn move_fd_above(&mut self, floor: i32) -> std::io::Result<()> {
        self.fd = rustix::io::fcntl_dupfd_cloexec(&self.fd, floor)?;
        Ok(())
    }

    #[inline(always)]
    fn control(&self) -> &Control {
        // SAFETY: the mapping is at least CONTROL_BYTES long (checked at
        // create/attach), page aligned (align 128 holds), lives as long as
        // `self`, and `Control` holds only atomics, which another process
        // may write concurrently without breaking a shared reference.
        unsafe { &*self.map.ptr().as_ptr().cast::<Control>() }
    }

    #[inline(always)]
    fn data(&self) -> NonNull<u8> {
        // SAFETY: CONTROL_BYTES < mapping length, so the result is in bounds.
        unsafe { self.map.ptr().add(CONTROL_BYTES) }
    }
}

fn check_size(size: usize) -> Result<(), RingError> {
    if !size.is_power_of_two() || !(MIN_RING_SIZE..=MAX_RING_SIZE).contains(&size) {
        return Err(RingError::BadSize(size));
    }
    Ok(())
}

/// Constructor of both endpoints in one process.
#[derive(Debug)]
pub struct Ring;

impl Ring {
    /// Creates a ring with a data area of `size` bytes (a power of two) and
    /// returns both endpoints; send [`RingProducer::memfd`] or
    /// [`RingConsumer::memfd`] to another process to use them apart.
    ///
    /// # Errors
    ///
    /// [`RingError::BadSize`] when `size` is not a power of two between
    /// [`MIN_RING_SIZE`] and [`MAX_RING_SIZE`]; [`RingError::Io`] when the
    /// memfd cannot be created or mapped.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, RingError, MIN_RING_SIZE};
    ///
    /// let (tx, rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// assert_eq!((tx.size(), rx.size()), (MIN_RING_SIZE, MIN_RING_SIZE));
    /// assert!(matches!(Ring::create(5000), Err(RingError::BadSize(5000))));
    /// ```
    pub fn create(size: usize) -> Result<(RingProducer, RingConsumer), RingError> {
        let consumer = RingConsumer::create(size)?;
        let producer = RingProducer::attach(consumer.memfd().try_clone_to_owned()?)?;
        Ok((producer, consumer))
    }
}

/// The writing end of a ring.
pub struct RingProducer {
    data: NonNull<u8>,
    mask: u64,
    key: u64,
    /// Next position to write.
    tail: u64,
    /// Positions below this may be written (credits + size).
    limit: u64,
    credits_seen: u64,
    max_len: usize,
    size: usize,
    /// Bodies of at least this many bytes are written with streaming stores.
    streaming_from: usize,
    ring: Mapped,
}

impl std::fmt::Debug for RingProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingProducer").field("size", &self.size).field("tail", &self.tail).finish()
    }
}

impl RingProducer {
    /// Maps a ring created by a consumer (possibly in another process),
    /// after checking its seals and header.
    ///
    /// # Errors
    ///
    /// [`RingError::NotSealed`] when the memfd can shrink,
    /// [`RingError::BadHeader`] when its size or header is not a ring's,
    /// [`RingError::Io`] when it cannot be mapped.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{RingConsumer, RingProducer, MIN_RING_SIZE};
    ///
    /// let rx = RingConsumer::create(MIN_RING_SIZE).unwrap();
    /// // In another process this descriptor arrives over a Unix socket.
    /// let tx = RingProducer::attach(rx.memfd().try_clone_to_owned().unwrap()).unwrap();
    /// assert_eq!(tx.max_len(), MIN_RING_SIZE / 2 - 16);
    /// ```
    pub fn attach(fd: OwnedFd) -> Result<Self, RingError> {
        let ring = Mapped::attach(fd)?;
        Ok(Self {
            data: ring.data(),
            mask: ring.size as u64 - 1,
            key: ring.key,
            tail: 0,
            limit: ring.size as u64,
            credits_seen: 0,
            max_len: ring.size / 2 - RECORD_HEADER_LEN,
            size: ring.size,
            streaming_from: usize::MAX,
            ring,
        })
    }

    /// Writes record bodies of at least `min_len` bytes with non-temporal
    /// stores (x86_64; a plain copy elsewhere): for a bulk stream whose
    /// reader runs on another core, which then reads them from the shared
    /// cache or memory instead of out of this core's cache. Off by default
    /// (`usize::MAX`); the bytes and their order are the same either way.
    pub fn stream_large_records(&mut self, min_len: usize) {
        self.streaming_from = min_len;
    }

    /// The ring's memfd.
    pub fn memfd(&self) -> BorrowedFd<'_> {
        self.ring.fd.as_fd()
    }

    /// Moves the memfd's descriptor to the lowest free number at or above
    /// `floor`. A library that holds rings inside another program (the
    /// drop-in socket layer) keeps its descriptors out of the low numbers
    /// the program expects to be dense.
    ///
    /// # Errors
    ///
    /// The `fcntl(F_DUPFD_CLOEXEC)` error (for example `EINVAL` when `floor`
    /// is at or above `RLIMIT_NOFILE`); the descriptor is then unchanged.
    pub fn move_memfd_above(&mut self, floor: i32) -> std::io::Result<()> {
        self.ring.move_fd_above(floor)
    }

    /// Bytes of the data area.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Largest body one record can carry: half the data area less a header.
    #[inline(always)]
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Copies `bytes` into the ring as one record and publishes it
    /// (`Release`).
    ///
    /// The ring's memory is shared with the consumer's process, so it is
    /// only ever written by a raw copy (see the promise in `shm::sys`); no
    /// `&mut [u8]` over it is handed out.
    ///
    /// # Errors
    ///
    /// [`PushError::Full`] when the consumer has not returned enough
    /// credits yet (retry later), [`PushError::TooLarge`] when `bytes` is
    /// longer than [`max_len`](Self::max_len), [`PushError::Corrupt`] when
    /// the consumer wrote an impossible credit value.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (mut tx, mut rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// tx.try_push(b"ping").unwrap();
    /// let mut got = Vec::new();
    /// assert_eq!(rx.try_pop(&mut got).unwrap(), Some(0));
    /// assert_eq!(got, b"ping");
    /// ```
    #[inline]
    pub fn try_push(&mut self, bytes: &[u8]) -> Result<(), PushError> {
        self.try_push_info(bytes, 0)
    }

    /// Like [`try_push`](Self::try_push), with an `info` word (at most
    /// [`MAX_INFO`]) in the record header for the consumer.
    ///
    /// # Errors
    ///
    /// As [`try_push`](Self::try_push).
    ///
    /// # Panics
    ///
    /// When `info > MAX_INFO`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (mut tx, mut rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// tx.try_push_info(b"x", 42).unwrap();
    /// let mut got = Vec::new();
    /// assert_eq!(rx.try_pop(&mut got).unwrap(), Some(42));
    /// ```
    #[inline]
    pub fn try_push_info(&mut self, bytes: &[u8], info: u32) -> Result<(), PushError> {
        assert!(info <= MAX_INFO, "record info {info:#x} uses the wrap bit");
        let body = self.reserve(bytes.len())?;
        // `reserve` returned `bytes.len()` writable bytes of the data area,
        // which cannot overlap `bytes` (our own memory).
        if bytes.len() >= self.streaming_from {
            // SAFETY: as said above: writable, in the mapping, disjoint.
            unsafe { sys::copy_to_shared_streaming(bytes, body.as_ptr()) };
        } else {
            // SAFETY: as said above: writable, in the mapping, disjoint.
            unsafe { sys::copy_to_shared(bytes, body.as_ptr()) };
        }
        self.commit(bytes.len(), info);
        Ok(())
    }

    /// Reserves room for a body of `len` bytes and returns where to write
    /// it; nothing is visible until [`commit`](Self::commit) with the same
    /// `len`. May publish a wrap record first.
    #[inline(always)]
    pub(crate) fn reserve(&mut self, len: usize) -> Result<NonNull<u8>, PushError> {
        if len > self.max_len {
            return Err(PushError::TooLarge { len, max: self.max_len });
        }
        let rec = record_len(len) as u64;
        let mut off = self.tail & self.mask;
        let to_end = self.size as u64 - off;
        if rec > to_end {
            // Pad to the end with a wrap record, on its own credits, so that
            // a body of up to half the ring always fits once drained.
            if self.tail + to_end > self.limit && !self.refresh(self.tail + to_end)? {
                return Err(PushError::Full);
            }
            let wrap_len = to_end as usize - RECORD_HEADER_LEN;
            self.commit(wrap_len, INFO_WRAP);
            off = 0;
        }
        if self.tail + rec > self.limit && !self.refresh(self.tail + rec)? {
            return Err(PushError::Full);
        }
        // SAFETY: off + rec <= size, so header and body lie in the data area.
        Ok(unsafe { self.data.add(off as usize + RECORD_HEADER_LEN) })
    }

    /// Publishes the record reserved last: writes its header, then its tag
    /// (`Release`: the body's bytes are visible before the tag). A sender
    /// that reads the peer's sleep flag next puts a `SeqCst` fence between
    /// (see [`take_peer_sleeping`](Self::take_peer_sleeping)).
    #[inline(always)]
    pub(crate) fn commit(&mut self, len: usize, info: u32) {
        let off = (self.tail & self.mask) as usize;
        // SAFETY: `off` is 16-aligned and at most size - 16, so the three
        // header words are in the data area and aligned for their atomics.
        unsafe {
            let hdr = self.data.as_ptr().add(off);
            (*hdr.add(8).cast::<AtomicU32>()).store(len as u32, Ordering::Relaxed);
            (*hdr.add(12).cast::<AtomicU32>()).store(info, Ordering::Relaxed);
            (*hdr.cast::<AtomicU64>()).store(self.tail ^ self.key, Ordering::Release);
        }
        self.tail += record_len(len) as u64;
    }

    /// Reads the credit word; returns whether `need` is now within limits.
    #[cold]
    fn refresh(&mut self, need: u64) -> Result<bool, PushError> {
        let credits = self.ring.control().consumer.credits.load(Ordering::Acquire);
        if credits < self.credits_seen || credits > self.tail {
            return Err(PushError::Corrupt);
        }
        self.credits_seen = credits;
        self.limit = credits + self.size as u64;
        Ok(need <= self.limit)
    }

    /// Where this producer stands: the next position it writes and the
    /// credits it last read. For processes that share one producing end
    /// (a forked parent and child, taking turns under a lock of their own):
    /// the one done writing saves its cursor, the next one
    /// [`resume`](Self::resume)s from it.
    pub fn cursor(&self) -> ProducerCursor {
        ProducerCursor { tail: self.tail, credits: self.credits_seen }
    }

    /// Continues from a cursor another holder of this producing end saved
    /// (see [`cursor`](Self::cursor)). A wrong cursor can corrupt the
    /// stream for the consumer (which checks every record) but never make
    /// this side write outside the data area: positions are masked.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, RingProducer, MIN_RING_SIZE};
    ///
    /// let (mut tx, mut rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// let mut twin = RingProducer::attach(rx.memfd().try_clone_to_owned().unwrap()).unwrap();
    /// tx.try_push(b"one").unwrap();
    /// twin.resume(tx.cursor()); // the twin writes next
    /// twin.try_push(b"two").unwrap();
    /// let mut got = Vec::new();
    /// rx.try_pop(&mut got).unwrap();
    /// rx.try_pop(&mut got).unwrap();
    /// assert_eq!(got, b"two");
    /// ```
    pub fn resume(&mut self, cursor: ProducerCursor) {
        self.tail = cursor.tail;
        self.credits_seen = cursor.credits;
        self.limit = cursor.credits.saturating_add(self.size as u64);
    }

    /// Bytes that can be pushed now (reads the credit word when the last
    /// one read leaves no room): for a writer deciding whether to wait.
    ///
    /// # Errors
    ///
    /// [`PushError::Corrupt`] when the consumer wrote an impossible credit.
    pub fn free_now(&mut self) -> Result<usize, PushError> {
        if self.known_free() < RECORD_HEADER_LEN + RECORD_ALIGN {
            self.refresh(self.tail)?;
        }
        Ok(self.known_free())
    }

    /// Bytes that can be pushed without reading the credit word again.
    pub fn known_free(&self) -> usize {
        self.limit.saturating_sub(self.tail) as usize
    }

    /// The consumer's acknowledgement word (see [`RingConsumer::set_acked`]).
    #[inline(always)]
    pub fn acked(&self) -> u64 {
        self.ring.control().consumer.acked.load(Ordering::Acquire)
    }

    /// After a publish and a `SeqCst` fence (one fence may cover many
    /// publishes): whether the consumer said it is going to sleep. Clears
    /// the flag when set, so only one wake-up is sent per sleep.
    #[inline(always)]
    pub fn take_peer_sleeping(&self) -> bool {
        let s = &self.ring.control().sleep.sleeping;
        s.load(Ordering::SeqCst) != 0 && s.swap(0, Ordering::SeqCst) != 0
    }
}

/// A record found by [`RingConsumer::peek`]; valid until `consume`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// First byte of the body, in shared memory.
    pub(crate) body: NonNull<u8>,
    /// Body length, checked against the data area.
    pub(crate) len: usize,
    /// The producer's info word (wrap bit clear).
    pub(crate) info: u32,
    /// Ring bytes to consume.
    rec: usize,
}

/// The reading end of a ring; creates the ring.
pub struct RingConsumer {
    data: NonNull<u8>,
    mask: u64,
    key: u64,
    /// Next position to read.
    head: u64,
    /// Head at the last credit return.
    returned: u64,
    half: u64,
    max_len: usize,
    size: usize,
    ring: Mapped,
}

impl std::fmt::Debug for RingConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingConsumer").field("size", &self.size).field("head", &self.head).finish()
    }
}

impl RingConsumer {
    /// Creates a ring with a data area of `size` bytes (a power of two
    /// between [`MIN_RING_SIZE`] and [`MAX_RING_SIZE`]) in a new sealed
    /// memfd.
    ///
    /// # Errors
    ///
    /// As [`Ring::create`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{RingConsumer, DEFAULT_RING_SIZE};
    ///
    /// let rx = RingConsumer::create(DEFAULT_RING_SIZE).unwrap();
    /// assert!(!rx.has_data());
    /// ```
    pub fn create(size: usize) -> Result<Self, RingError> {
        Ok(Self::from_mapped(Mapped::create(size)?))
    }

    /// Maps an existing ring to consume from it (the creator must not
    /// consume too: one consumer per ring).
    ///
    /// # Errors
    ///
    /// As [`RingProducer::attach`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, RingConsumer, MIN_RING_SIZE};
    ///
    /// let (mut tx, creator) = Ring::create(MIN_RING_SIZE).unwrap();
    /// let fd = creator.memfd().try_clone_to_owned().unwrap();
    /// drop(creator); // the creator hands consuming over
    /// let mut rx = RingConsumer::attach(fd).unwrap();
    /// tx.try_push(b"hi").unwrap();
    /// let mut got = Vec::new();
    /// assert!(rx.try_pop(&mut got).unwrap().is_some());
    /// ```
    pub fn attach(fd: OwnedFd) -> Result<Self, RingError> {
        Ok(Self::from_mapped(Mapped::attach(fd)?))
    }

    fn from_mapped(ring: Mapped) -> Self {
        Self {
            data: ring.data(),
            mask: ring.size as u64 - 1,
            key: ring.key,
            head: 0,
            returned: 0,
            half: ring.size as u64 / 2,
            max_len: ring.size / 2 - RECORD_HEADER_LEN,
            size: ring.size,
            ring,
        }
    }

    /// The longest record the producer can push (half the ring, less a
    /// header).
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The ring's memfd, to hand to the producer.
    pub fn memfd(&self) -> BorrowedFd<'_> {
        self.ring.fd.as_fd()
    }

    /// Moves the memfd's descriptor to the lowest free number at or above
    /// `floor`. A library that holds rings inside another program (the
    /// drop-in socket layer) keeps its descriptors out of the low numbers
    /// the program expects to be dense.
    ///
    /// # Errors
    ///
    /// The `fcntl(F_DUPFD_CLOEXEC)` error (for example `EINVAL` when `floor`
    /// is at or above `RLIMIT_NOFILE`); the descriptor is then unchanged.
    pub fn move_memfd_above(&mut self, floor: i32) -> std::io::Result<()> {
        self.ring.move_fd_above(floor)
    }

    /// Bytes of the data area.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Pops one record, copying its body into `out` (whose previous
    /// contents are replaced); returns the record's info word, or `None`
    /// when the ring is empty.
    ///
    /// The body is copied out of shared memory once, with a raw copy: the
    /// producer's process could write it at any time, so no `&[u8]` over it
    /// is ever handed out (see the promise in `shm::sys`). Validate the
    /// copy as untrusted input.
    ///
    /// # Errors
    ///
    /// [`RingCorrupt`] when the record header at the head is impossible
    /// (the ring cannot be trusted any more: drop it).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (mut tx, mut rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// let mut got = Vec::new();
    /// assert_eq!(rx.try_pop(&mut got).unwrap(), None);
    /// tx.try_push(b"abc").unwrap();
    /// assert!(rx.try_pop(&mut got).unwrap().is_some());
    /// assert_eq!(got, b"abc");
    /// ```
    #[inline]
    pub fn try_pop(&mut self, out: &mut Vec<u8>) -> Result<Option<u32>, RingCorrupt> {
        let Some(rec) = self.peek()? else { return Ok(None) };
        // Zeroes only when `out` grows: a reused vector costs one copy.
        if out.len() < rec.len {
            out.resize(rec.len, 0);
        } else {
            out.truncate(rec.len);
        }
        // SAFETY: `peek` checked that body..body+len lies in the data area
        // (peer-writable: copied raw, once); `out` is our own memory with
        // `len` bytes; the producer does not reuse the record before we
        // return credits.
        unsafe { sys::copy_from_shared(rec.body.as_ptr(), out, rec.len) };
        let info = rec.info;
        self.consume(rec);
        Ok(Some(info))
    }

    /// Reads the head record as part of a byte stream: copies its bytes
    /// from `*offset` on into `out` (as many as fit), and consumes the record
    /// once its last byte is read (`*offset` back to 0; until then it stays
    /// in the ring, and the producer cannot reuse its space). Returns the
    /// bytes copied and the record's info word, or `None` when the ring is
    /// empty. A record without bytes (an end-of-stream marker) is consumed
    /// at once with 0 bytes. One copy, straight into the caller's memory.
    ///
    /// # Errors
    ///
    /// [`RingCorrupt`] as [`try_pop`](Self::try_pop), or when `*offset` is
    /// beyond the record (its producer rewrote its header).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (mut tx, mut rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// let (mut out, mut offset) = ([0u8; 3], 0);
    /// assert_eq!(rx.read_partial(&mut out, &mut offset).unwrap(), None);
    /// tx.try_push(b"hello").unwrap();
    /// assert_eq!(rx.read_partial(&mut out, &mut offset).unwrap(), Some((3, 0)));
    /// assert_eq!((&out, offset), (b"hel", 3));
    /// assert_eq!(rx.read_partial(&mut out, &mut offset).unwrap(), Some((2, 0)));
    /// assert_eq!((&out[..2], offset), (&b"lo"[..], 0));
    /// assert_eq!(rx.read_partial(&mut out, &mut offset).unwrap(), None);
    /// ```
    #[inline]
    pub fn read_partial(&mut self, out: &mut [u8], offset: &mut usize) -> Result<Option<(usize, u32)>, RingCorrupt> {
        let Some(rec) = self.peek()? else { return Ok(None) };
        let Some(left) = rec.len.checked_sub(*offset) else { return Err(RingCorrupt) };
        let n = left.min(out.len());
        // `peek` checked that body..body+len lies in the data area, and
        // offset + n <= len; `out` is our memory with room for `n` bytes; the
        // record is not consumed (its space not returned) before this copy.
        // SAFETY: the range read is inside the mapping, as said above.
        unsafe { sys::copy_from_shared(rec.body.as_ptr().add(*offset), out, n) };
        let info = rec.info;
        if n == left {
            *offset = 0;
            self.consume(rec);
        } else {
            *offset += n;
        }
        Ok(Some((n, info)))
    }

    /// Copies bytes of the head record from `offset` on into `out`
    /// without consuming anything (`MSG_PEEK` on a byte stream); returns
    /// the bytes copied, the bytes of the record from `offset` on, and its
    /// info word, or `None` when the ring is empty. Wrap markers before the
    /// record are skipped.
    ///
    /// # Errors
    ///
    /// As [`read_partial`](Self::read_partial).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (mut tx, mut rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// tx.try_push(b"hello").unwrap();
    /// let mut out = [0u8; 3];
    /// assert_eq!(rx.peek_partial(&mut out, 1).unwrap(), Some((3, 4, 0)));
    /// assert_eq!(&out, b"ell");
    /// assert_eq!(rx.peek_partial(&mut [], 0).unwrap(), Some((0, 5, 0))); // still there
    /// ```
    pub fn peek_partial(&mut self, out: &mut [u8], offset: usize) -> Result<Option<(usize, usize, u32)>, RingCorrupt> {
        let Some(rec) = self.peek()? else { return Ok(None) };
        let Some(left) = rec.len.checked_sub(offset) else { return Err(RingCorrupt) };
        let n = left.min(out.len());
        // `peek` checked that body..body+len lies in the data area, and
        // offset + n <= len; `out` has room for `n` bytes.
        // SAFETY: the range read is inside the mapping, as said above.
        unsafe { sys::copy_from_shared(rec.body.as_ptr().add(offset), out, n) };
        Ok(Some((n, left, rec.info)))
    }

    /// Whether a record is published at position `pos` (at or after the
    /// head, less than a ring ahead): a reader that noted where the data it
    /// saw ended ([`published_end`](Self::published_end)) learns whether more
    /// arrived since, without a shared tail word (edge-triggered `epoll`).
    pub fn published_at(&self, pos: u64) -> bool {
        self.tag_at(pos, Ordering::Acquire) == pos ^ self.key
    }

    /// The position just past the last record published now (the head if
    /// none), and the info word of that last record: scans the records from
    /// the head, checking each header as [`try_pop`](Self::try_pop) does;
    /// stops at an impossible one. Wrap markers are skipped.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (mut tx, rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// assert_eq!(rx.published_end(), (0, None));
    /// tx.try_push_info(b"abc", 7).unwrap(); // a 16-byte header + 16 bytes
    /// let (end, last) = rx.published_end();
    /// assert_eq!((end, last), (32, Some(7)));
    /// assert!(!rx.published_at(end));
    /// tx.try_push(b"more").unwrap();
    /// assert!(rx.published_at(end));
    /// ```
    pub fn published_end(&self) -> (u64, Option<u32>) {
        let mut pos = self.head;
        let mut last = None;
        // At most a ring's worth of records.
        for _ in 0..self.size / RECORD_ALIGN {
            if self.tag_at(pos, Ordering::Acquire) != pos ^ self.key {
                break;
            }
            let off = (pos & self.mask) as usize;
            // off is 16-aligned and at most size - 16: the length and info
            // words are in the data area, aligned for their atomics.
            // SAFETY: in-bounds, aligned atomic loads, as said above.
            let (len, info) = unsafe {
                let hdr = self.data.as_ptr().add(off);
                (
                    (*hdr.add(8).cast::<AtomicU32>()).load(Ordering::Relaxed) as usize,
                    (*hdr.add(12).cast::<AtomicU32>()).load(Ordering::Relaxed),
                )
            };
            let rec = record_len(len);
            if len > self.max_len || rec > self.size - off {
                break;
            }
            if info & INFO_WRAP == 0 {
                last = Some(info);
            }
            pos += rec as u64;
        }
        (pos, last)
    }

    /// Where this consumer stands, for another holder of the consuming
    /// end to [`resume`](Self::resume) from (see
    /// [`RingProducer::cursor`]).
    pub fn cursor(&self) -> ConsumerCursor {
        ConsumerCursor { head: self.head, returned: self.returned }
    }

    /// Continues from a cursor another holder of this consuming end saved.
    /// A wrong cursor reads no record (tags carry their position) or
    /// records checked as always; it never reads outside the data area.
    pub fn resume(&mut self, cursor: ConsumerCursor) {
        self.head = cursor.head;
        self.returned = cursor.returned;
    }

    /// The position of the next record to consume (records are consumed
    /// in order: everything below it has been).
    #[inline(always)]
    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// Whether a record (or a wrap marker) is published at the head.
    #[inline(always)]
    pub fn has_data(&self) -> bool {
        self.head_tag(Ordering::Acquire) == self.head ^ self.key
    }

    /// `has_data` with a `SeqCst` load, after announcing sleep.
    #[inline(always)]
    pub fn has_data_seqcst(&self) -> bool {
        self.head_tag(Ordering::SeqCst) == self.head ^ self.key
    }

    #[inline(always)]
    fn head_tag(&self, order: Ordering) -> u64 {
        self.tag_at(self.head, order)
    }

    #[inline(always)]
    fn tag_at(&self, pos: u64, order: Ordering) -> u64 {
        let off = (pos & self.mask) as usize;
        // Positions of records are multiples of 16 (a wrong `pos` is
        // rounded down here), so off is 16-aligned and below size; the
        // producer writes the word, hence the atomic.
        // SAFETY: an aligned u64 inside the data area, as said above.
        unsafe { (*self.data.as_ptr().add(off & !(RECORD_ALIGN - 1)).cast::<AtomicU64>()).load(order) }
    }

    /// The next record, its header copied out of shared memory once and
    /// checked; skips wrap records. Does not consume it.
    #[inline(always)]
    pub(crate) fn peek(&mut self) -> Result<Option<Record>, RingCorrupt> {
        loop {
            let off = (self.head & self.mask) as usize;
            // SAFETY: off is 16-aligned and at most size - 16 (size is a
            // multiple of 16), so the header words are in the data area and
            // aligned for their atomics.
            let (hdr, tag, len, info) = unsafe {
                let hdr = self.data.as_ptr().add(off);
                let tag = (*hdr.cast::<AtomicU64>()).load(Ordering::Acquire);
                if tag != self.head ^ self.key {
                    return Ok(None);
                }
                let len = (*hdr.add(8).cast::<AtomicU32>()).load(Ordering::Relaxed) as usize;
                let info = (*hdr.add(12).cast::<AtomicU32>()).load(Ordering::Relaxed);
                (hdr, tag, len, info)
            };
            debug_assert_eq!(tag, self.head ^ self.key);
            let rec = record_len(len);
            if len > self.max_len || rec > self.size - off {
                return Err(RingCorrupt);
            }
            if info & INFO_WRAP != 0 {
                if rec != self.size - off {
                    return Err(RingCorrupt);
                }
                self.advance(rec);
                continue;
            }
            // SAFETY: off + 16 + len <= size (checked above).
            let body = unsafe { NonNull::new_unchecked(hdr.add(RECORD_HEADER_LEN)) };
            return Ok(Some(Record { body, len, info, rec }));
        }
    }

    /// Consumes the record `peek` returned (the caller is done reading it).
    #[inline(always)]
    pub(crate) fn consume(&mut self, rec: Record) {
        self.advance(rec.rec);
    }

    #[inline(always)]
    fn advance(&mut self, rec: usize) {
        self.head += rec as u64;
        // Wrapping: a resumed cursor may be wrong (see `resume`).
        if self.head.wrapping_sub(self.returned) >= self.half {
            self.return_credits();
        }
    }

    #[cold]
    fn return_credits(&mut self) {
        // Release: every read of the consumed records happens before the
        // producer may overwrite them.
        self.ring.control().consumer.credits.store(self.head, Ordering::Release);
        self.returned = self.head;
    }

    /// Publishes a value in the acknowledgement word the producer reads
    /// with [`RingProducer::acked`] (the datapath counts completed sends).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::ring::{Ring, MIN_RING_SIZE};
    ///
    /// let (tx, rx) = Ring::create(MIN_RING_SIZE).unwrap();
    /// rx.set_acked(3);
    /// assert_eq!(tx.acked(), 3);
    /// ```
    #[inline(always)]
    pub fn set_acked(&self, value: u64) {
        self.ring.control().consumer.acked.store(value, Ordering::Release);
    }

    /// Announces (or withdraws) that the consumer is going to sleep. After
    /// announcing, check [`has_data_seqcst`](Self::has_data_seqcst) once
    /// more before sleeping: with the producer's `SeqCst` publish and flag
    /// read, one of the two sides is sure to see the other.
    #[inline(always)]
    pub fn set_sleeping(&self, sleeping: bool) {
        self.ring.control().sleep.sleeping.store(sleeping as u32, Ordering::SeqCst);
    }

    /// Whether the sleep flag is set now: cleared by the producer when it
    /// sends a wake-up ([`RingProducer::take_peer_sleeping`]), so a set flag
    /// that reads clear means a wake-up was sent.
    #[inline(always)]
    pub fn sleeping_flag(&self) -> bool {
        self.ring.control().sleep.sleeping.load(Ordering::SeqCst) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memfd_moves_above_a_floor_and_the_ring_still_works() {
        use std::os::fd::AsRawFd;
        let (mut p, mut c) = Ring::create(MIN_RING_SIZE).unwrap();
        c.move_memfd_above(600).unwrap();
        p.move_memfd_above(600).unwrap();
        assert!(c.memfd().as_raw_fd() >= 600 && p.memfd().as_raw_fd() >= 600);
        p.try_push(b"still mapped").unwrap();
        let mut got = Vec::new();
        assert!(c.try_pop(&mut got).unwrap().is_some());
        assert_eq!(got, b"still mapped");
    }

    #[test]
    fn streamed_records_arrive_intact_at_any_alignment() {
        let (mut p, mut c) = Ring::create(1 << 16).unwrap();
        p.stream_large_records(0);
        let mut got = Vec::new();
        for len in [0usize, 1, 15, 16, 17, 63, 64, 65, 200, 1000, 4097, 30_000] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 13 + len) as u8).collect();
            p.try_push(&msg).unwrap();
            assert!(c.try_pop(&mut got).unwrap().is_some());
            assert_eq!(got, msg, "{len}");
        }
    }

    /// Two holders of each end (forked processes taking turns) that hand
    /// over cursors see one stream: every byte once, in order, across wraps
    /// and credit returns; peeks change nothing.
    #[test]
    fn ends_taken_in_turns_through_cursors_keep_one_stream() {
        let (mut tx_a, mut rx_a) = Ring::create(MIN_RING_SIZE).unwrap();
        let mut tx_b = RingProducer::attach(rx_a.memfd().try_clone_to_owned().unwrap()).unwrap();
        let mut rx_b = RingConsumer::attach(rx_a.memfd().try_clone_to_owned().unwrap()).unwrap();
        let (mut sent, mut got) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 300];
        for round in 0..2000usize {
            let (tx, other_tx) = if round % 3 == 0 { (&mut tx_a, &mut tx_b) } else { (&mut tx_b, &mut tx_a) };
            let msg: Vec<u8> = (0..(round * 37) % 700).map(|i| (i + round) as u8).collect();
            if tx.try_push(&msg).is_ok() {
                sent.extend_from_slice(&msg);
            }
            other_tx.resume(tx.cursor());
            let (rx, other_rx) = if round % 2 == 0 { (&mut rx_a, &mut rx_b) } else { (&mut rx_b, &mut rx_a) };
            let mut offset = 0;
            if let Some((_, left, _)) = rx.peek_partial(&mut [], 0).unwrap() {
                let mut peeked = vec![0u8; left];
                rx.peek_partial(&mut peeked, 0).unwrap();
                let before = got.len();
                while let Some((n, _)) = rx.read_partial(&mut buf, &mut offset).unwrap() {
                    got.extend_from_slice(&buf[..n]);
                    if offset == 0 {
                        break;
                    }
                }
                assert_eq!(&got[before..], &peeked[..]);
            }
            other_rx.resume(rx.cursor());
        }
        while let Some((n, _)) = rx_a.read_partial(&mut buf, &mut 0).unwrap() {
            got.extend_from_slice(&buf[..n]);
        }
        assert!(sent.len() > 100_000);
        assert_eq!(got.len(), sent.len());
        assert!(got == sent);
    }

    #[test]
    fn partial_reads_return_every_byte_in_order_across_wraps() {
        let (mut p, mut c) = Ring::create(MIN_RING_SIZE).unwrap();
        let (mut sent, mut got) = (Vec::new(), Vec::new());
        let mut offset = 0;
        let mut chunk = [0u8; 97];
        for round in 0..3000usize {
            let len = (round * 53) % 900;
            let msg: Vec<u8> = (0..len).map(|i| (i + round) as u8).collect();
            if p.try_push(&msg).is_ok() {
                sent.extend_from_slice(&msg);
            }
            let want = 1 + round % chunk.len();
            while let Some((n, info)) = c.read_partial(&mut chunk[..want], &mut offset).unwrap() {
                assert_eq!(info, 0);
                got.extend_from_slice(&chunk[..n]);
            }
        }
        assert_eq!(got, sent);
        assert!(sent.len() > 100_000);
        // An offset past the record is refused, not read out of bounds.
        p.try_push(b"abc").unwrap();
        let mut beyond = 10;
        assert_eq!(c.read_partial(&mut chunk, &mut beyond), Err(RingCorrupt));
    }

    #[test]
    fn push_pop_wrap_and_credits() {
        let (mut p, mut c) = Ring::create(MIN_RING_SIZE).unwrap();
        assert_eq!(p.max_len(), 2048 - 16);
        let mut expect = std::collections::VecDeque::new();
        let mut n = 0u32;
        for round in 0..2000 {
            let len = (round * 37) % 700;
            let msg: Vec<u8> = (0..len).map(|i| (i as u32 ^ n) as u8).collect();
            match p.try_push(&msg) {
                Ok(()) => {
                    expect.push_back(msg);
                    n += 1;
                }
                Err(PushError::Full) => {
                    let mut got = Vec::new();
                    while c.try_pop(&mut got).unwrap().is_some() {
                        assert_eq!(got, expect.pop_front().unwrap());
                    }
                }
                Err(e) => panic!("{e}"),
            }
        }
        let mut got = Vec::new();
        while c.try_pop(&mut got).unwrap().is_some() {
            assert_eq!(got, expect.pop_front().unwrap());
        }
        assert!(expect.is_empty());
        assert!(n > 1000);
    }

    #[test]
    fn too_large_and_full() {
        let (mut p, mut c) = Ring::create(MIN_RING_SIZE).unwrap();
        assert_eq!(p.try_push(&[0; 2033]), Err(PushError::TooLarge { len: 2033, max: 2032 }));
        p.try_push(&[1; 2032]).unwrap();
        p.try_push(&[2; 2032]).unwrap();
        assert_eq!(p.try_push(&[3; 1]), Err(PushError::Full));
        let mut got = Vec::new();
        assert_eq!(c.try_pop(&mut got).unwrap(), Some(0));
        assert_eq!(got[0], 1);
        // Half the ring consumed: credits returned.
        p.try_push(&[4; 1000]).unwrap();
        assert_eq!(c.try_pop(&mut got).unwrap(), Some(0));
        assert_eq!(got[0], 2);
        assert_eq!(c.try_pop(&mut got).unwrap(), Some(0));
        assert_eq!(got.len(), 1000);
        assert_eq!(c.try_pop(&mut got).unwrap(), None);
    }

    #[test]
    fn attach_checks_seals_and_header() {
        let plain = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&plain, (CONTROL_BYTES + MIN_RING_SIZE) as u64).unwrap();
        assert!(matches!(RingProducer::attach(plain), Err(RingError::NotSealed)));
        let sealed = sys::create_sealed_memfd("x", CONTROL_BYTES + MIN_RING_SIZE).unwrap();
        assert!(matches!(RingProducer::attach(sealed), Err(RingError::BadHeader(_))));
        assert!(matches!(RingConsumer::create(5000), Err(RingError::BadSize(5000))));
    }
}

//! Receiving in place from trusted peers: a message's zero-copy segments
//! stay in the sender's shared pool and reach the application as
//! [`PeerSlice`]s, each holding a *lease* on its record. The sender's
//! buffers are acknowledged (and so released by the sender) only when every
//! lease of a record is dropped, or when it expires.
//!
//! # Trust model
//!
//! Receiving in place saves the receiver's copy of every zero-copy segment
//! (the gather). What it gives up is *stability*, never memory safety:
//!
//! - The bytes are the sender's. An honest sender does not touch a buffer
//!   it has sent until it is acknowledged, so an honest sender's values are
//!   stable while leased. A buggy or hostile one can change them at any
//!   time, and a read then sees some mix of old and new bytes. Use it with
//!   peers whose values you would accept anyway: the same user, the same
//!   application (a cache and its own clients), not a public service.
//! - Memory safety does not depend on the peer. A [`PeerSlice`] is checked
//!   against the mapping of the peer's pool when it is made, keeps that
//!   mapping alive (a re-map after the pool grows, or the peer's death,
//!   never unmaps it under a lease), and is read only by copying out
//!   (`sys::copy_from_shared`): no Rust reference to peer-writable memory is
//!   formed. The pool's memfd is sealed against shrinking
//!   ([`ShmConfig::require_sealed_peer_pool`](super::ShmConfig)), so a read
//!   in bounds cannot fault.
//! - The sender's memory is bounded. A connection holds at most
//!   [`LeaseLimits::max_bytes`] and [`LeaseLimits::max_leases`]; a record
//!   that would go over is gathered into our memory as without leases. A
//!   lease older than [`LeaseLimits::max_age`] is *expired*: its record is
//!   acknowledged, so the sender may reuse the buffers, and every later read
//!   of it returns [`LeaseExpired`] instead of bytes the sender may have
//!   overwritten.
//!
//! # Acknowledgements
//!
//! The ring's acknowledgement word is a cumulative count of records (see
//! *Completions* in the [module docs](super)). Leases may be dropped in any
//! order, so the [`Ledger`] keeps the leased records not yet acknowledged,
//! oldest first, and acknowledges up to the first one still held: a lease
//! held long delays the acknowledgement of later records too (bounded by
//! `max_age`).

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::sys::{self, Mapping};

/// How much of a sender's pool a receiver in place may hold, per
/// connection, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseLimits {
    /// Bytes of the sender's pool held at most; a record that would go over
    /// is gathered instead. Default 4 MiB.
    pub max_bytes: usize,
    /// Records held at most; more are gathered. Default 1024.
    pub max_leases: usize,
    /// Age after which a lease expires: its record is acknowledged and
    /// reads of it fail with [`LeaseExpired`]. Default 100 ms. Checked
    /// every 16 receive batches, so it may take that many more.
    pub max_age: Duration,
}

impl Default for LeaseLimits {
    fn default() -> Self {
        Self { max_bytes: 4 << 20, max_leases: 1024, max_age: Duration::from_millis(100) }
    }
}

/// A read of a [`PeerSlice`] whose lease expired (the sender may have
/// reused its buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the lease on the peer's buffer expired (held longer than LeaseLimits::max_age); read it sooner or copy it")]
pub struct LeaseExpired;

/// What a lease's holders and its [`Ledger`] entry share. The record is
/// held while any [`PeerSlice`] of it lives: the ledger sees that as a
/// strong count above one.
#[derive(Debug, Default)]
pub(super) struct LeaseState {
    expired: Cell<bool>,
    /// Records parked behind a full ring that name these bytes by
    /// reference ([`ParkedReturn`]): while any waits, the lease does not
    /// expire.
    parked_returns: Cell<u32>,
}

/// A lease kept by a record parked behind a full ring that sends leased
/// bytes back to their owner by reference
/// ([`DESC_RETURN`](super::proto::DESC_RETURN)). The owner may reuse its
/// buffer once the lease ends (the record is acknowledged), so the lease
/// must outlive the record's publication; and it does not expire while
/// the record waits, since expiring it would acknowledge the bytes before
/// the reply naming them is published. The wait is bounded by the
/// parking's bounds and by the owner reading its ring: an owner that stops
/// reading holds only its own buffers.
pub(super) struct ParkedReturn(Rc<LeaseState>);

impl ParkedReturn {
    /// Keeps `p`'s lease until dropped.
    pub(super) fn new(p: &PeerSlice) -> Self {
        let state = Rc::clone(&p.lease);
        state.parked_returns.set(state.parked_returns.get() + 1);
        ParkedReturn(state)
    }

    /// Whether the lease expired anyway (only when its connection closed,
    /// [`Ledger::expire_all`]): the bytes may have been reused.
    pub(super) fn is_expired(&self) -> bool {
        self.0.expired.get()
    }
}

impl Drop for ParkedReturn {
    fn drop(&mut self) {
        self.0.parked_returns.set(self.0.parked_returns.get() - 1);
    }
}

/// A record received in place and not yet acknowledged.
#[derive(Debug)]
struct HeldRecord {
    /// Its number among the records needing acknowledgement (from 1).
    seq: u64,
    /// Bytes of the sender's pool it names.
    bytes: usize,
    /// When [`Ledger::ack`] first read the clock after it was leased
    /// (reading it per record would cost more than the lease).
    since: Option<Instant>,
    state: Rc<LeaseState>,
}

/// The leased records of one connection, oldest first, and what may be
/// acknowledged.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    held: VecDeque<HeldRecord>,
    held_bytes: usize,
    /// Acknowledgements computed since the clock was last read.
    since_clock: u32,
}

/// How often [`Ledger::ack`] reads the clock to expire old leases while
/// the oldest is held: every this many calls (one per receive batch), so
/// a lease expires at most that many batches after `max_age`.
const CLOCK_EVERY: u32 = 16;

impl Ledger {
    /// Whether a record of `bytes` may be leased within `limits`.
    #[inline]
    pub(super) fn admits(&self, bytes: usize, limits: &LeaseLimits) -> bool {
        self.held.len() < limits.max_leases && self.held_bytes.saturating_add(bytes) <= limits.max_bytes
    }

    /// Leases record `seq` of `bytes`; returns the state its slices share.
    pub(super) fn lease(&mut self, seq: u64, bytes: usize) -> Rc<LeaseState> {
        let state = Rc::new(LeaseState::default());
        self.held.push_back(HeldRecord { seq, bytes, since: None, state: Rc::clone(&state) });
        self.held_bytes += bytes;
        state
    }

    /// Records held (released ones behind a held one count until it goes).
    pub(super) fn held(&self) -> (usize, usize) {
        (self.held.len(), self.held_bytes)
    }

    /// The acknowledgement to publish when `received` records needing one
    /// have been consumed: all of them, except from the oldest record still
    /// leased on. Forgets released records; every [`CLOCK_EVERY`] calls
    /// while the oldest is held, reads the clock, stamps the records not
    /// yet stamped and expires those older than `max_age` (a record's age
    /// counts from its stamp, so it never expires early).
    #[inline]
    pub(super) fn ack(&mut self, received: u64, max_age: Duration, expired: &mut u64) -> u64 {
        while let Some(front) = self.held.front() {
            if Rc::strong_count(&front.state) > 1 {
                break;
            }
            self.held_bytes -= front.bytes;
            self.held.pop_front();
        }
        if self.held.is_empty() {
            return received;
        }
        self.since_clock += 1;
        if self.since_clock >= CLOCK_EVERY {
            self.since_clock = 0;
            let now = Instant::now();
            // Unstamped records are the newest: a suffix.
            for h in self.held.iter_mut().rev() {
                if h.since.is_some() {
                    break;
                }
                h.since = Some(now);
            }
            while let Some(front) = self.held.front() {
                let held = Rc::strong_count(&front.state) > 1;
                let young = front.since.is_some_and(|t| now.duration_since(t) < max_age);
                if held && (young || front.state.parked_returns.get() > 0) {
                    break;
                }
                if held {
                    front.state.expired.set(true);
                    *expired += 1;
                }
                self.held_bytes -= front.bytes;
                self.held.pop_front();
            }
        }
        self.held.front().map_or(received, |f| f.seq - 1)
    }

    /// Expires every lease still held: the connection is going away, and
    /// the peer will reuse its buffers once it sees that.
    pub(super) fn expire_all(&mut self) {
        for h in self.held.drain(..) {
            h.state.expired.set(true);
        }
        self.held_bytes = 0;
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.expire_all();
    }
}

/// Bytes of a trusted peer's shared pool, received in place and leased
/// (see the [module docs](self)).
///
/// It can only be read by copying out: the peer may write the memory, so
/// no `&[u8]` of it exists. Reads are bounds-checked when the slice is made
/// and fail once the lease has expired. Cloning or slicing shares the
/// lease; the sender's buffer is released when the last one is dropped.
///
/// A `PeerSlice` belongs to the thread of its datapath:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// fn f(s: cornflakes_datapath::shm::PeerSlice) { send(s) }
/// ```
#[derive(Clone)]
pub struct PeerSlice {
    map: Rc<Mapping>,
    /// The [`PeerPool`](super::receive::PeerPool) it is of.
    origin: u64,
    /// Offset in the peer's pool memfd (its mappings start at 0).
    offset: usize,
    len: usize,
    lease: Rc<LeaseState>,
}

impl std::fmt::Debug for PeerSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSlice")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("expired", &self.is_expired())
            .finish()
    }
}

/// Bytes copied out per step by [`PeerSlice::for_each_chunk`]: the copy
/// stays in L1 while the caller reads it. Measured with
/// `cornflakes-eval/examples/in_place_cost.rs` (8000 B values, 2-core AMD
/// EPYC VM): 1 KiB pieces read 25 % slower than a gather, 2 KiB 16 %,
/// 4 KiB and 8 KiB as fast, 16 KiB 1 % slower.
pub const PEER_CHUNK: usize = 4096;

impl PeerSlice {
    /// `len` bytes at `offset` of `map`, or `None` when they are not all
    /// inside it.
    pub(super) fn new(
        map: &Rc<Mapping>,
        origin: u64,
        offset: usize,
        len: usize,
        lease: &Rc<LeaseState>,
    ) -> Option<Self> {
        let end = offset.checked_add(len)?;
        (end <= map.len()).then(|| Self { map: Rc::clone(map), origin, offset, len, lease: Rc::clone(lease) })
    }

    /// Where it lies, for a [`DESC_RETURN`](super::proto::DESC_RETURN)
    /// descriptor back to its peer: the peer pool it is of and the offset
    /// in that peer's pool memfd.
    #[inline]
    pub(super) fn origin_and_offset(&self) -> (u64, usize) {
        (self.origin, self.offset)
    }

    /// Its length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether its lease expired: reads fail from then on.
    #[inline]
    pub fn is_expired(&self) -> bool {
        self.lease.expired.get()
    }

    /// The part `start..start + len`, sharing the lease; `None` when it is
    /// not inside this slice.
    pub fn slice(&self, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        (end <= self.len).then(|| Self {
            map: Rc::clone(&self.map),
            origin: self.origin,
            offset: self.offset + start,
            len,
            lease: Rc::clone(&self.lease),
        })
    }

    /// Copies every byte into `dst`, which must be exactly as long.
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] once the lease has expired (nothing is copied).
    ///
    /// # Panics
    ///
    /// When `dst.len() != self.len()`, as `<[u8]>::copy_from_slice` does.
    pub fn copy_to_slice(&self, dst: &mut [u8]) -> Result<(), LeaseExpired> {
        assert_eq!(dst.len(), self.len, "PeerSlice::copy_to_slice: destination length differs");
        self.copy_out(0, dst)
    }

    /// A copy of the bytes in a new vector.
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] once the lease has expired.
    pub fn to_vec(&self) -> Result<Vec<u8>, LeaseExpired> {
        let mut v = vec![0; self.len];
        self.copy_out(0, &mut v)?;
        Ok(v)
    }

    /// Hands the bytes to `f` in order, [`PEER_CHUNK`] at a time (the last
    /// chunk may be shorter), each copied out into a buffer on the stack:
    /// reading a value without a copy of its whole length. Stops early
    /// when `f` returns false; returns whether every call returned true.
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] once the lease has expired (`f` is not called).
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[u8]) -> bool) -> Result<bool, LeaseExpired> {
        if self.is_expired() {
            return Err(LeaseExpired);
        }
        let mut chunk = [0u8; PEER_CHUNK];
        let mut at = 0;
        while at < self.len {
            let n = (self.len - at).min(PEER_CHUNK);
            self.copy_out(at, &mut chunk[..n])?;
            if !f(&chunk[..n]) {
                return Ok(false);
            }
            at += n;
        }
        Ok(true)
    }

    /// Block `i` of the bytes (bytes `64 i .. 64 i + 64`, zero past the
    /// end: the last block may be short), read by value straight out of
    /// the sender's memory. A caller that compares every byte, in a loop
    /// over the blocks that this is inlined into, reads the value once:
    /// [`for_each_chunk`](Self::for_each_chunk) copies each chunk out and
    /// reads it again (the load generator's closed-loop CDN rate in place
    /// went from 265 k to 356-371 k objects/s on the Intel test guest
    /// when it changed to blocks).
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] once the lease has expired.
    ///
    /// # Panics
    ///
    /// When `i` is not below `len().div_ceil(64)`.
    #[inline(always)]
    pub fn block(&self, i: usize) -> Result<[u8; 64], LeaseExpired> {
        if self.is_expired() {
            return Err(LeaseExpired);
        }
        let start = i * 64;
        assert!(start < self.len, "PeerSlice::block {i} of a slice of {} bytes", self.len);
        if self.len - start < 64 {
            let mut block = [0u8; 64];
            self.copy_out(start, &mut block[..self.len - start])?;
            return Ok(block);
        }
        let src = self.map.ptr().as_ptr().cast_const().wrapping_add(self.offset + start);
        // `start + 64 <= len` (checked above) and `offset + len <= map.len()`
        // (checked in `new` and `slice`).
        // SAFETY: the 64 bytes lie inside the mapping, which `self.map` keeps alive.
        Ok(unsafe { sys::read_block_from_shared(src) })
    }

    /// Whether the bytes equal `other`, compared where they lie in the
    /// sender's memory (one `memcmp`; a 4 KiB bounce buffer cost a 1 MiB
    /// in-place ping-pong ~10 %).
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] once the lease has expired.
    pub fn eq_bytes(&self, other: &[u8]) -> Result<bool, LeaseExpired> {
        if self.is_expired() {
            return Err(LeaseExpired);
        }
        if other.len() != self.len {
            return Ok(false);
        }
        let src = self.map.ptr().as_ptr().cast_const().wrapping_add(self.offset);
        // SAFETY: offset + len <= map.len() (checked in `new` and `slice`), `self.map` keeps it mapped.
        Ok(unsafe { sys::eq_shared(src, other) })
    }

    /// [`copy_to_slice`](Self::copy_to_slice) as
    /// [`copy_for_peer`](super::copy_for_peer) makes it (streaming stores
    /// where [`streams_for_peer`](super::streams_for_peer)): for a copy that
    /// another process reads next.
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] once the lease has expired (nothing is copied).
    ///
    /// # Panics
    ///
    /// When `dst.len() != self.len()`.
    pub fn copy_for_peer(&self, dst: &mut [u8]) -> Result<(), LeaseExpired> {
        assert_eq!(dst.len(), self.len, "PeerSlice::copy_for_peer: destination length differs");
        if self.is_expired() {
            return Err(LeaseExpired);
        }
        if !sys::streams_for_peer(self.len) {
            return self.copy_out(0, dst);
        }
        let src = self.map.ptr().as_ptr().cast_const().wrapping_add(self.offset);
        // SAFETY: offset + len <= map.len() (checked in `new` and `slice`), `self.map` keeps it mapped, `dst` is ours.
        unsafe { sys::copy_streaming(src, dst.as_mut_ptr(), self.len) };
        Ok(())
    }

    /// Copies `dst.len()` bytes from `start` into `dst`.
    #[inline]
    fn copy_out(&self, start: usize, dst: &mut [u8]) -> Result<(), LeaseExpired> {
        if self.is_expired() {
            return Err(LeaseExpired);
        }
        let n = dst.len();
        assert!(start <= self.len && n <= self.len - start, "PeerSlice::copy_out out of its bounds");
        if n == 0 {
            return Ok(());
        }
        let src = self.map.ptr().as_ptr().cast_const().wrapping_add(self.offset + start);
        // The range lies inside the mapping: offset + len <= map.len()
        // (checked in `new` and `slice`) and start + n <= len (asserted).
        // SAFETY: in the mapping, which `self.map` keeps alive; `dst` is ours.
        unsafe { sys::copy_from_shared(src, dst, n) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(ledger: &mut Ledger, seq: u64, bytes: usize) -> Rc<LeaseState> {
        ledger.lease(seq, bytes)
    }

    #[test]
    fn ack_stops_at_the_oldest_record_still_held() {
        let mut l = Ledger::default();
        let a = held(&mut l, 1, 10);
        let b = held(&mut l, 3, 20);
        let age = Duration::from_secs(60);
        // Record 2 was gathered (not leased); 1 and 3 are held.
        let mut expired = 0;
        assert_eq!(l.ack(3, age, &mut expired), 0);
        drop(b);
        assert_eq!(l.ack(3, age, &mut expired), 0, "3 released but 1 still held");
        assert_eq!(l.held(), (2, 30));
        drop(a);
        assert_eq!(l.ack(4, age, &mut expired), 4);
        assert_eq!(expired, 0);
        assert_eq!(l.held(), (0, 0));
    }

    #[test]
    fn old_leases_expire_and_are_acknowledged() {
        let mut l = Ledger::default();
        let a = held(&mut l, 1, 10);
        let mut expired = 0;
        for _ in 0..CLOCK_EVERY {
            assert_eq!(l.ack(1, Duration::from_secs(60), &mut expired), 0);
        }
        assert!(!a.expired.get());
        for _ in 1..CLOCK_EVERY {
            assert_eq!(l.ack(1, Duration::ZERO, &mut expired), 0, "the clock is read every {CLOCK_EVERY} calls");
        }
        assert_eq!(l.ack(1, Duration::ZERO, &mut expired), 1);
        assert!(a.expired.get());
        assert_eq!(expired, 1);
    }

    #[test]
    fn a_dropped_ledger_expires_what_is_held() {
        let mut l = Ledger::default();
        let a = held(&mut l, 1, 10);
        drop(l);
        assert!(a.expired.get());
    }

    #[test]
    fn limits_bound_bytes_and_records() {
        let limits = LeaseLimits { max_bytes: 100, max_leases: 2, max_age: Duration::from_secs(1) };
        let mut l = Ledger::default();
        assert!(l.admits(100, &limits));
        assert!(!l.admits(101, &limits));
        let _a = held(&mut l, 1, 60);
        assert!(!l.admits(41, &limits));
        assert!(l.admits(40, &limits));
        let _b = held(&mut l, 2, 1);
        assert!(!l.admits(1, &limits), "two records held");
    }
}

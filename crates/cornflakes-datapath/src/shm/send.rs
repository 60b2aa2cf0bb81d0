//! Sending: the one record builder and the two send paths on top of it,
//! plus completions. Owns the rule that decides how a segment travels:
//!
//! - a non-empty buffer of our **shared** pool becomes a [`DESC_POOL`]
//!   descriptor (the peer gathers it from its read-only mapping; we hold a
//!   clone until the peer acknowledges the record);
//! - anything else (our private pool, the heap, a received payload) is
//!   copied into the record's inline area ([`DESC_INLINE`]).
//!
//! So a descriptor can only ever name memory the peer already maps: memory
//! outside the shared pool is never exposed by a send, it is copied.
//!
//! Ring memory is peer-writable: the builder writes it only with
//! [`sys::copy_to_shared`]. A message's first segment is serialized into a
//! private staging buffer first (the serializer writes through a slice),
//! then copied into the ring: one copy of the first segment per
//! `push_message`, which is what keeping `&mut [u8]` off shared memory
//! costs.

use std::ptr::NonNull;

use cornflakes::{Message, Pool, RcBuf};

use super::conn::{generation_of, slot_of, Conn, ParkedRecord, Slot};
use super::lease::{ParkedReturn, PeerSlice};
use super::liveness::{after_publish, socket_alive};
use super::proto::{Desc, DESC_INLINE, DESC_LEN, DESC_POOL, DESC_RETURN, INFO_NEEDS_ACK, MAX_SEGMENTS};
use super::ring::PushError;
use super::{sys, ShmConfig, ShmDatapath, ShmStats};
use crate::{write_packet_header, ConnId, Segment, SendError, Span, PACKET_HEADER_LEN};

/// Whether `b` travels as a pool descriptor: only non-empty buffers of the
/// shared pool (the one peers map) do. The single place this is decided.
#[inline(always)]
fn travels_by_descriptor(shared: &Pool, b: &[u8]) -> bool {
    !b.is_empty() && shared.contains(b)
}

/// The sizes of a record, computed before reserving it.
#[derive(Clone, Copy, Debug, Default)]
struct RecordPlan {
    /// Descriptors (segments after the first).
    descs: usize,
    /// Bytes of the first segment (after the packet header).
    first: usize,
    /// Bytes copied into the inline area.
    inline: usize,
}

impl RecordPlan {
    /// Accounts for one segment after the first: a descriptor if it
    /// travels by one; otherwise its bytes join the first segment while no
    /// descriptor precedes it (so a message without shared-pool segments is
    /// one contiguous packet, the receiver's fast path), or are copied
    /// inline behind a descriptor of their own.
    #[inline(always)]
    fn segment(&mut self, by_descriptor: bool, len: usize) {
        if by_descriptor {
            self.descs += 1;
        } else if self.descs == 0 {
            self.first += len;
        } else {
            self.descs += 1;
            self.inline += len;
        }
    }

    fn body_len(&self) -> usize {
        self.descs * DESC_LEN + PACKET_HEADER_LEN + self.first + self.inline
    }
}

/// Where a record's body is written: reserved in the ring (published by
/// `finish`), or, while the ring is full or earlier records wait, in a
/// private buffer parked on the connection (published in order later).
enum Body {
    Ring(NonNull<u8>),
    Parked(Vec<u8>),
}

/// One record being written into a connection's outbound ring, in the
/// layout of [`proto`](super::proto): descriptors, packet header, first
/// segment, inline segments. Created by [`RecordBuilder::start`] (the last
/// step that can fail), filled in order, published (or parked) by
/// [`finish`](RecordBuilder::finish). Every write is bounds-checked against
/// the plan (a mismatch is a bug and panics rather than write past the
/// reservation).
struct RecordBuilder<'a> {
    c: &'a mut Conn,
    /// Slot of `c` (for the wake-up check after publishing).
    slot: usize,
    shared: &'a Pool,
    plan: RecordPlan,
    body: Body,
    /// Descriptors written.
    next_desc: usize,
    /// Where the next first-segment bytes go (offset in the body).
    first_at: usize,
    /// Where the next inline bytes go (offset in the body).
    inline_at: usize,
    /// Send number of this record if it holds pool descriptors.
    seq: u64,
    /// Pool descriptors written.
    zero_copy: u64,
    /// Zero-copy buffers that had to be copied inline.
    copied: u64,
    /// Return descriptors written.
    returned: u64,
    /// Leases the record must keep while it is parked (its returns).
    parked_returns: Vec<ParkedReturn>,
}

impl<'a> RecordBuilder<'a> {
    /// Reserves the record (in the ring, or parked) and writes its packet
    /// header.
    #[inline(always)]
    fn start(
        c: &'a mut Conn,
        id: ConnId,
        shared: &'a Pool,
        plan: RecordPlan,
        msg_id: u32,
        parking: Option<&ShmConfig>,
        shm: &mut ShmStats,
    ) -> Result<Self, SendError> {
        let body = reserve(c, id, plan.body_len(), parking, shm)?;
        let seq = c.zc_sent + 1;
        let header_at = plan.descs * DESC_LEN;
        let mut b = Self {
            c,
            slot: slot_of(id),
            shared,
            plan,
            body,
            next_desc: 0,
            first_at: header_at,
            inline_at: 0,
            seq,
            zero_copy: 0,
            copied: 0,
            returned: 0,
            parked_returns: Vec::new(),
        };
        let mut hdr = [0u8; PACKET_HEADER_LEN];
        write_packet_header(&mut hdr, msg_id);
        b.write(header_at, &hdr);
        b.first_at = header_at + PACKET_HEADER_LEN;
        b.inline_at = b.first_at + plan.first;
        Ok(b)
    }

    /// Copies `bytes` to body offset `at`.
    #[inline(always)]
    fn write(&mut self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.plan.body_len(), "record write past its reservation");
        match &mut self.body {
            // SAFETY: `reserve` returned body_len writable ring bytes (checked
            // just above), which the peer reads only after `commit`; `bytes`
            // is our own memory, so the ranges are disjoint.
            Body::Ring(p) => unsafe { sys::copy_to_shared(bytes, p.as_ptr().add(at)) },
            Body::Parked(v) => v[at..at + bytes.len()].copy_from_slice(bytes),
        }
    }

    /// Appends bytes to the first segment.
    #[inline(always)]
    fn first_segment(&mut self, bytes: &[u8]) {
        debug_assert_eq!(self.next_desc, 0, "first-segment bytes after a descriptor");
        let end = self.plan.descs * DESC_LEN + PACKET_HEADER_LEN + self.plan.first;
        assert!(self.first_at + bytes.len() <= end, "first segment longer than planned");
        self.write(self.first_at, bytes);
        self.first_at += bytes.len();
    }

    #[inline(always)]
    fn descriptor(&mut self, d: Desc) {
        assert!(self.next_desc < self.plan.descs, "more segments than planned");
        let mut raw = [0u8; DESC_LEN];
        d.encode(&mut raw);
        self.write(self.next_desc * DESC_LEN, &raw);
        self.next_desc += 1;
    }

    /// Appends a copied segment: to the first segment while no descriptor
    /// precedes it, else inline behind a descriptor (as
    /// [`RecordPlan::segment`] planned).
    #[inline(always)]
    fn copied_segment(&mut self, bytes: &[u8]) {
        if self.next_desc == 0 {
            self.first_segment(bytes);
        } else {
            self.descriptor(Desc { offset: 0, len: bytes.len() as u32, kind: DESC_INLINE });
            self.write(self.inline_at, bytes);
            self.inline_at += bytes.len();
        }
    }

    /// Appends a buffer meant to go zero-copy: a pool descriptor when it is
    /// in the shared pool (held until acknowledged), copied otherwise.
    #[inline(always)]
    fn zero_copy(&mut self, b: &RcBuf) {
        if travels_by_descriptor(self.shared, b) {
            self.pool_descriptor(b.clone());
        } else {
            self.copied_segment(b);
            self.copied += 1;
        }
    }

    /// [`zero_copy`](Self::zero_copy) of a reference the caller took.
    #[inline(always)]
    fn zero_copy_owned(&mut self, b: RcBuf) {
        if travels_by_descriptor(self.shared, &b) {
            self.pool_descriptor(b);
        } else {
            self.copied_segment(&b);
            self.copied += 1;
        }
    }

    /// A [`DESC_POOL`] descriptor for `b`, a buffer of the shared pool,
    /// held until the peer acknowledges the record.
    #[inline(always)]
    fn pool_descriptor(&mut self, b: RcBuf) {
        let offset = (b.as_ptr() as usize - self.shared.base() as usize) as u64;
        self.descriptor(Desc { offset, len: b.len() as u32, kind: DESC_POOL });
        self.c.inflight.push_back((self.seq, b));
        self.zero_copy += 1;
    }

    /// A [`DESC_RETURN`] descriptor for `p`, a value of the peer's that it
    /// accepts back by reference. Published now, nothing is held: the lease
    /// on `p` is the caller's and outlives the publication. Parked, the
    /// record keeps the lease until it is published.
    #[inline(always)]
    fn return_descriptor(&mut self, p: &PeerSlice) {
        let (_, offset) = p.origin_and_offset();
        self.descriptor(Desc { offset: offset as u64, len: p.len() as u32, kind: DESC_RETURN });
        self.returned += 1;
        if matches!(self.body, Body::Parked(_)) {
            self.parked_returns.push(ParkedReturn::new(p));
        }
    }

    /// Publishes the record (the peer is woken, if it sleeps, by the next
    /// [`ShmDatapath::wake_sleeping_peers`]), or parks it behind the
    /// records already waiting.
    /// Returns (pool descriptors, zero-copy buffers copied, parked).
    #[inline(always)]
    fn finish(self, shm: &mut ShmStats, to_wake: &mut Vec<usize>) -> (u64, u64, bool) {
        shm.returns_sent += self.returned;
        assert_eq!(self.next_desc, self.plan.descs, "fewer segments than planned");
        assert_eq!(self.inline_at, self.plan.body_len(), "inline bytes differ from the plan");
        debug_assert_eq!(self.first_at, self.plan.descs * DESC_LEN + PACKET_HEADER_LEN + self.plan.first);
        let mut info = self.plan.descs as u32;
        if self.zero_copy > 0 {
            info |= INFO_NEEDS_ACK;
            // Parked records keep their number: they are published in order
            // before any later record, so the peer counts them the same way.
            self.c.zc_sent = self.seq;
        }
        let parked = match self.body {
            Body::Ring(_) => {
                self.c.tx.commit(self.plan.body_len(), info);
                after_publish(self.c, self.slot, to_wake);
                false
            }
            Body::Parked(body) => {
                self.c.parked_bytes += body.len();
                self.c.parked.push_back(ParkedRecord { body, info, returns: self.parked_returns });
                shm.parked += 1;
                true
            }
        };
        (self.zero_copy, self.copied, parked)
    }
}

/// Reserves `len` body bytes in `c`'s outbound ring, or a parked buffer
/// when the ring is full (or earlier records are parked: order is kept)
/// and the connection's parking bounds (`parking`'s) allow; with `parking`
/// `None` a full ring is [`SendError::Full`].
#[inline(always)]
fn reserve(
    c: &mut Conn,
    id: ConnId,
    len: usize,
    parking: Option<&ShmConfig>,
    shm: &mut ShmStats,
) -> Result<Body, SendError> {
    if c.parked.is_empty() {
        match c.tx.reserve(len) {
            Ok(p) => {
                c.full_streak = 0;
                return Ok(Body::Ring(p));
            }
            Err(e) => reserve_failed(c, id, e, shm)?,
        }
    } else if len > c.tx.max_len() {
        return Err(SendError::TooLarge { len, max: c.tx.max_len() });
    }
    match parking {
        Some(config) => park(c, id, len, config, shm),
        None => Err(SendError::Full),
    }
}

/// A parked body for a record of `len` bytes, within the connection's
/// bounds; [`SendError::Backlogged`] beyond them (or [`SendError::Full`]
/// when parking is off).
#[cold]
fn park(c: &mut Conn, id: ConnId, len: usize, config: &ShmConfig, shm: &mut ShmStats) -> Result<Body, SendError> {
    if config.max_parked_messages == 0 {
        return Err(SendError::Full);
    }
    if c.parked.len() >= config.max_parked_messages || c.parked_bytes + len > config.max_parked_bytes {
        shm.backlogged += 1;
        return Err(SendError::Backlogged(id));
    }
    Ok(Body::Parked(vec![0; len]))
}

/// Handles a failed reservation: `Ok` when the record may be parked,
/// otherwise the error to return.
#[cold]
fn reserve_failed(c: &mut Conn, id: ConnId, e: PushError, shm: &mut ShmStats) -> Result<(), SendError> {
    match e {
        PushError::Full => {
            // A full ring may mean a dead peer: look at the socket on the
            // first failure and every 64th after.
            if c.full_streak.is_multiple_of(64) {
                shm.liveness_checks += 1;
                if !socket_alive(&c.sock) {
                    c.dead = true;
                }
            }
            c.full_streak = c.full_streak.wrapping_add(1);
            if c.dead {
                Err(SendError::Closed(id))
            } else {
                Ok(())
            }
        }
        PushError::TooLarge { len, max } => Err(SendError::TooLarge { len, max }),
        PushError::Corrupt => {
            c.dead = true;
            Err(SendError::Closed(id))
        }
    }
}

/// Publishes `c`'s parked records, oldest first, while the ring has room
/// (a record returning bytes whose lease expired meanwhile is dropped and
/// counted instead: the peer may have reused them). Returns whether none is
/// left. The expiry check is a guard: today a parked return's lease cannot
/// expire, since returns go only to the connection their bytes came from
/// and closing it drops its parked records with its leases.
pub(super) fn publish_parked(c: &mut Conn, slot: usize, to_wake: &mut Vec<usize>, shm: &mut ShmStats) -> bool {
    let mut published = false;
    while let Some(rec) = c.parked.front() {
        if rec.returns.iter().any(ParkedReturn::is_expired) {
            c.parked_bytes -= rec.body.len();
            c.parked.pop_front();
            shm.parked_returns_lost += 1;
            continue;
        }
        match c.tx.reserve(rec.body.len()) {
            Ok(p) => {
                // SAFETY: `reserve` returned `body.len()` writable ring
                // bytes, read by the peer only after `commit`; the body is
                // our own memory.
                unsafe { sys::copy_to_shared(&rec.body, p.as_ptr()) };
                c.tx.commit(rec.body.len(), rec.info);
                c.parked_bytes -= rec.body.len();
                c.parked.pop_front();
                published = true;
            }
            Err(PushError::Full) => break,
            // Parked bodies were checked against `max_len`; a corrupt ring
            // ends the connection (its parked records are lost with it).
            Err(_) => {
                c.dead = true;
                break;
            }
        }
    }
    if published {
        c.full_streak = 0;
        after_publish(c, slot, to_wake);
    }
    c.parked.is_empty()
}

/// Before a send to a connection with parked records: publishes what fits,
/// and refuses at once ([`SendError::Backlogged`]) when the parking is
/// still at its message bound, before any work is spent on the message.
#[cold]
fn unpark(
    c: &mut Conn,
    id: ConnId,
    config: &ShmConfig,
    shm: &mut ShmStats,
    parked_conns: &mut usize,
    to_wake: &mut Vec<usize>,
) -> Result<(), SendError> {
    if publish_parked(c, slot_of(id), to_wake, shm) {
        *parked_conns -= 1;
    } else if c.dead {
        return Err(SendError::Closed(id));
    } else if c.parked.len() >= config.max_parked_messages {
        // Still the liveness check of a full ring (a dead peer is Closed).
        reserve_failed(c, id, PushError::Full, shm)?;
        shm.backlogged += 1;
        return Err(SendError::Backlogged(id));
    }
    Ok(())
}

/// Most records one connection may have sent by descriptor and not had
/// acknowledged: what fills the ring (records are at least 32 bytes) and
/// its parking, plus 4096 for what an honest peer holds in place (its lease
/// bound, 1024 by default). Only a peer that consumes records and never
/// acknowledges them gets past that, whose table of held buffers (up to 64
/// per record) would otherwise grow, and pin pool buffers, without bound.
fn max_unacked_records(config: &ShmConfig) -> u64 {
    (config.ring_size / 32 + config.max_parked_messages + 4096) as u64
}

/// Back-pressure ([`SendError::Backlogged`]) while `c` has
/// [`max_unacked_records`] records its peer has not acknowledged, after
/// taking the acknowledgements there are. `inflight_sends` is the
/// datapath's count of held buffers.
#[inline(always)]
fn check_unacked(
    c: &mut Conn,
    id: ConnId,
    config: &ShmConfig,
    inflight_sends: &mut usize,
    shm: &mut ShmStats,
) -> Result<(), SendError> {
    let max = max_unacked_records(config);
    if c.zc_sent - c.zc_acked < max {
        return Ok(());
    }
    let before = c.inflight.len();
    c.release_acked();
    *inflight_sends -= before - c.inflight.len();
    if c.zc_sent - c.zc_acked < max {
        return Ok(());
    }
    shm.backlogged += 1;
    Err(SendError::Backlogged(id))
}

/// The live connection `id`, for sending.
#[inline(always)]
fn send_conn(slots: &mut [Slot], id: ConnId) -> Result<&mut Conn, SendError> {
    let slot = slots.get_mut(slot_of(id)).ok_or(SendError::Closed(id))?;
    if slot.generation != generation_of(id) {
        return Err(SendError::Closed(id));
    }
    match slot.conn.as_mut() {
        Some(c) if !c.dead => Ok(c),
        _ => Err(SendError::Closed(id)),
    }
}

/// The steps every send takes first: the live connection `id`, within its
/// bound of unacknowledged records, with what it parked published as far
/// as its ring allows; and whether records are still parked.
fn open_for_send<'s>(
    slots: &'s mut [Slot],
    id: ConnId,
    config: &ShmConfig,
    inflight_sends: &mut usize,
    shm: &mut ShmStats,
    parked_conns: &mut usize,
    to_wake: &mut Vec<usize>,
) -> Result<(&'s mut Conn, bool), SendError> {
    let c = send_conn(slots, id)?;
    check_unacked(c, id, config, inflight_sends, shm)?;
    if !c.parked.is_empty() {
        unpark(c, id, config, shm, parked_conns, to_wake)?;
    }
    let was_parked = !c.parked.is_empty();
    Ok((c, was_parked))
}

impl ShmDatapath {
    /// [`Datapath::push_message`](crate::Datapath::push_message).
    pub(super) fn send_message<'a, M: Message<'a>>(
        &mut self,
        conn: ConnId,
        msg_id: u32,
        msg: &M,
    ) -> Result<(), SendError> {
        let layout = msg.layout();
        let n = layout.zero_copy_entries;
        let shared = &self.shared;
        let (c, was_parked) = open_for_send(
            &mut self.slots,
            conn,
            &self.config,
            &mut self.inflight_sends,
            &mut self.shm,
            &mut self.parked_conns,
            &mut self.to_wake,
        )?;
        let total = layout.total_len();
        if total > c.peer_max_message {
            return Err(SendError::TooLarge { len: total, max: c.peer_max_message });
        }
        if n > MAX_SEGMENTS {
            return Err(SendError::TooManySegments { count: n + 1, max: MAX_SEGMENTS + 1 });
        }
        let layout_first = layout.first_segment_len();
        // Serialize into private memory (grown, never shrunk or re-zeroed:
        // the serializer writes every byte of the first segment).
        if self.staging.len() < layout_first {
            self.staging.resize(layout_first, 0);
        }
        let staged = &mut self.staging[..layout_first];
        msg.write_header_and_copies(&layout, staged)?;
        // The zero-copy buffers, visited once: the visit branches on each
        // field's kind, which mispredicts in lists that mix the two.
        let bufs = &mut self.zero_copy_bufs;
        // Empty unless a send panicked between the collection and the drain.
        bufs.clear();
        let mut plan = RecordPlan { first: layout_first, ..RecordPlan::default() };
        if n > 0 {
            msg.for_each_zero_copy(|b| {
                if bufs.len() < n {
                    bufs.push(b.clone());
                }
            });
            for b in bufs.iter() {
                plan.segment(travels_by_descriptor(shared, b), b.len());
            }
        }
        let mut record = match RecordBuilder::start(c, conn, shared, plan, msg_id, Some(&self.config), &mut self.shm) {
            Ok(record) => record,
            Err(e) => {
                bufs.clear();
                return Err(e);
            }
        };
        record.first_segment(staged);
        for b in bufs.drain(..) {
            record.zero_copy_owned(b);
        }
        let (zc, copied, parked) = record.finish(&mut self.shm, &mut self.to_wake);
        self.sent(parked && !was_parked, zc, copied);
        Ok(())
    }

    /// Counts a send (and a connection that now has parked records).
    #[inline(always)]
    fn sent(&mut self, newly_parked: bool, zc: u64, copied: u64) {
        self.parked_conns += usize::from(newly_parked);
        self.inflight_sends += zc as usize;
        self.stats.zero_copy_segments += zc;
        self.stats.zero_copy_copied += copied;
        self.stats.sent += 1;
    }

    /// [`Datapath::push_segments`](crate::Datapath::push_segments): the
    /// leading run of `Copy` segments is the first segment; every later
    /// segment gets a descriptor.
    pub(super) fn send_segments(
        &mut self,
        conn: ConnId,
        msg_id: u32,
        segments: &[Segment<'_>],
    ) -> Result<(), SendError> {
        let shared = &self.shared;
        let (c, was_parked) = open_for_send(
            &mut self.slots,
            conn,
            &self.config,
            &mut self.inflight_sends,
            &mut self.shm,
            &mut self.parked_conns,
            &mut self.to_wake,
        )?;
        let lead = segments.iter().position(|s| matches!(s, Segment::ZeroCopy(_))).unwrap_or(segments.len());
        if segments.len() - lead > MAX_SEGMENTS {
            return Err(SendError::TooManySegments { count: segments.len(), max: MAX_SEGMENTS + 1 });
        }
        let mut plan = RecordPlan::default();
        let mut total = 0usize;
        for s in segments {
            match s {
                Segment::Copy(b) => plan.segment(false, b.len()),
                Segment::ZeroCopy(b) => plan.segment(travels_by_descriptor(shared, b), b.len()),
            }
            total += match s {
                Segment::Copy(b) => b.len(),
                Segment::ZeroCopy(b) => b.len(),
            };
        }
        if total > c.peer_max_message {
            return Err(SendError::TooLarge { len: total, max: c.peer_max_message });
        }
        let mut record = RecordBuilder::start(c, conn, shared, plan, msg_id, Some(&self.config), &mut self.shm)?;
        for s in segments {
            match s {
                Segment::Copy(b) => record.copied_segment(b),
                Segment::ZeroCopy(b) => record.zero_copy(b),
            }
        }
        let (zc, copied, parked) = record.finish(&mut self.shm, &mut self.to_wake);
        self.sent(parked && !was_parked, zc, copied);
        Ok(())
    }

    /// [`Datapath::push_spans`](crate::Datapath::push_spans): a span of the
    /// destination's own pool goes back as a [`DESC_RETURN`] descriptor
    /// when the peer accepts returns (a record that has to wait in the
    /// parking keeps the leases behind its returns until it is published);
    /// every other span is copied.
    pub(super) fn send_spans(&mut self, conn: ConnId, msg_id: u32, spans: &[Span<'_>]) -> Result<(), SendError> {
        let shared = &self.shared;
        let (c, was_parked) = open_for_send(
            &mut self.slots,
            conn,
            &self.config,
            &mut self.inflight_sends,
            &mut self.shm,
            &mut self.parked_conns,
            &mut self.to_wake,
        )?;
        let mut total = 0usize;
        for s in spans {
            if let Span::Peer(p) = s {
                if p.is_expired() {
                    return Err(SendError::LeaseExpired(super::LeaseExpired));
                }
            }
            total += s.len();
        }
        if total > c.peer_max_message {
            return Err(SendError::TooLarge { len: total, max: c.peer_max_message });
        }
        let (accepts, origin) = (c.peer_accepts_returns, c.peer.origin);
        let returnable = |s: &Span<'_>| match s {
            Span::Peer(p) => accepts && !p.is_empty() && p.origin_and_offset().0 == origin,
            Span::Local(_) => false,
        };
        let plan_for = |returns: bool| {
            let mut plan = RecordPlan::default();
            for s in spans {
                plan.segment(returns && returnable(s), s.len());
            }
            plan
        };
        let mut try_returns = spans.iter().any(returnable);
        let mut plan = plan_for(try_returns);
        if try_returns && (plan.descs > MAX_SEGMENTS || plan.body_len() > c.tx.max_len()) {
            // Too many pieces (or too long a record) by reference: copied,
            // the message is one segment.
            try_returns = false;
            plan = plan_for(false);
        }
        if plan.descs > MAX_SEGMENTS {
            return Err(SendError::TooManySegments { count: plan.descs + 1, max: MAX_SEGMENTS + 1 });
        }
        let mut record = RecordBuilder::start(c, conn, shared, plan, msg_id, Some(&self.config), &mut self.shm)?;
        let returns = try_returns;
        // Spans copied: out of the peer's memory first, in private copies
        // (a lease cannot expire within this call: leases expire only while
        // receiving).
        let copied_peer = |s: &Span<'_>| matches!(s, Span::Peer(_)) && !(returns && returnable(s));
        let mut copies = Vec::new();
        if spans.iter().any(copied_peer) {
            for s in spans.iter().filter(|s| copied_peer(s)) {
                if let Span::Peer(p) = s {
                    copies.push(p.to_vec()?);
                }
            }
        }
        let mut copied = copies.iter();
        for s in spans {
            match s {
                Span::Local(b) => record.copied_segment(b),
                Span::Peer(p) if returns && returnable(s) => record.return_descriptor(p),
                Span::Peer(_) => record.copied_segment(copied.next().expect("one copy per copied span")),
            }
        }
        let (zc, copied, parked) = record.finish(&mut self.shm, &mut self.to_wake);
        self.sent(parked && !was_parked, zc, copied);
        Ok(())
    }

    /// [`Datapath::flush`](crate::Datapath::flush): publishes what the
    /// connections have parked, as far as their rings allow.
    pub(super) fn publish_all_parked(&mut self) {
        if self.parked_conns == 0 {
            return;
        }
        for (slot, s) in self.slots.iter_mut().enumerate() {
            let Some(c) = &mut s.conn else { continue };
            if !c.parked.is_empty() && publish_parked(c, slot, &mut self.to_wake, &mut self.shm) {
                self.parked_conns -= 1;
            }
        }
    }

    /// [`Datapath::poll_completions`](crate::Datapath::poll_completions):
    /// reads each connection's acknowledgement word and releases the
    /// buffers of every send up to it.
    pub(super) fn complete_sends(&mut self) -> usize {
        if self.inflight_sends == 0 {
            return 0;
        }
        let mut done = 0usize;
        for c in self.slots.iter_mut().flat_map(|s| &mut s.conn) {
            let before = c.inflight.len();
            done += c.release_acked();
            self.inflight_sends -= before - c.inflight.len();
        }
        self.stats.completions += done as u64;
        done
    }
}

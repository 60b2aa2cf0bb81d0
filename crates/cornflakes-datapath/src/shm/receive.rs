//! Receiving: hostile-record parsing and the gather. Owns
//! [`receive_record`], the one function that turns a ring record (written
//! by a peer we do not trust) into a message in our **private** pool, the
//! mapping of the peer's shared pool it gathers from ([`PeerPool`]), and
//! the per-connection drain loop with its acknowledgements.
//!
//! Everything is read from shared memory once, with
//! [`sys::copy_from_shared`], into locals or our own buffer, and checked
//! there: see *Hostile peers* in the [module docs](super).

use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

use cornflakes::{Pool, RcBuf};

use super::conn::{conn_id, Conn};
use super::lease::{Ledger, PeerSlice};
use super::proto::{
    Desc, DESC_INLINE, DESC_LEN, DESC_POOL, DESC_RETURN, INFO_DESC_MASK, INFO_NEEDS_ACK, INFO_VALID_BITS, MAX_SEGMENTS,
};
use super::ring::RingCorrupt;
use super::{sys, LeaseLimits, ShmDatapath, ShmStats};
use crate::in_place::{InPlace, Part, Parts};
use crate::{read_packet_header, ConnId, Received, RecvError, PACKET_HEADER_LEN};

/// The peer's shared pool memfd, mapped read-only. The mapping is shared
/// with the [`PeerSlice`]s made from it, so a re-map never unmaps it under
/// one.
pub(super) struct PeerPool {
    /// Which peer pool this is, for [`PeerSlice`]s to name (unique in the
    /// process): a slice goes back by reference only to the peer it is of.
    pub(super) origin: u64,
    fd: OwnedFd,
    map: Option<Rc<sys::Mapping>>,
    len: usize,
}

impl PeerPool {
    /// Maps the first `len` bytes of `fd` (the caller checked its seal and
    /// that it is at least that long); nothing for an empty file.
    pub(super) fn map(fd: OwnedFd, len: usize) -> std::io::Result<Self> {
        let map = if len == 0 {
            None
        } else {
            Some(Rc::new(sys::Mapping::map(fd.as_fd(), len, false, sys::Populate::IfAllocated)?))
        };
        // Relaxed: only uniqueness matters.
        let origin = NEXT_ORIGIN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Self { origin, fd, map, len })
    }

    /// A second descriptor of the peer's memfd (for the fuzz harness).
    pub(super) fn dup_fd(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Makes sure `end` bytes are mapped, re-mapping after `fstat` if the
    /// peer's pool grew. False when the file is not that long (or too long).
    #[cold]
    fn grow(&mut self, end: u64, max: usize, stats: &mut ShmStats) -> bool {
        let Ok(size) = sys::file_size(self.fd.as_fd()) else { return false };
        if end > size || size > max as u64 || size <= self.len as u64 {
            return false;
        }
        match sys::Mapping::map(self.fd.as_fd(), size as usize, false, sys::Populate::IfAllocated) {
            Ok(m) => {
                self.map = Some(Rc::new(m));
                self.len = size as usize;
                stats.peer_pool_remaps += 1;
                true
            }
            Err(_) => false,
        }
    }
}

/// The next [`PeerPool::origin`].
static NEXT_ORIGIN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Why a record was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Discard {
    /// The record breaks the protocol (counted, dropped).
    Malformed,
    /// Our private pool had no buffer for it (counted, dropped).
    NoBuffer,
}

/// What [`receive_record`] needs besides the record.
pub(super) struct RecordLimits {
    /// Largest message we accept (payload after the packet header).
    pub(super) max_message: usize,
    /// Largest peer pool we map.
    pub(super) max_peer_pool_bytes: usize,
}

/// A ring record as [`receive_record`] reads it: where its body is, how
/// long, and the producer's info word.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawRecord {
    /// First byte of the body (peer-writable memory).
    pub(super) body: *const u8,
    /// Body length.
    pub(super) len: usize,
    /// Info word (descriptor count, flags).
    pub(super) info: u32,
}

/// Where the parts of a checked record with descriptors lie.
struct Layout {
    msg_id: u32,
    /// Bytes of descriptors at the start of the body.
    desc_bytes: usize,
    /// The first segment's length (after the packet header).
    first: usize,
    /// The whole message's length.
    total: usize,
    /// Bytes named by pool descriptors.
    pool_bytes: usize,
    /// Bytes named by return descriptors (in our own pool).
    return_bytes: usize,
    /// Return descriptors.
    returns: usize,
}

/// How a record was received.
pub(super) enum Delivered {
    /// Copied whole into our private pool.
    Whole(u32, RcBuf),
    /// Received in place: the first segment and the inline segments in
    /// our private pool, the pool segments leased, the returned ones as
    /// our own buffers.
    InPlace(u32, RcBuf, Parts),
}

/// Checks one record and copies the message it describes into a new buffer
/// of `pool` (our private pool). Everything is read from shared memory
/// once, into locals, before it is checked; `descs` is reused scratch.
/// `own` is our shared pool when we accept returned values
/// ([`DESC_RETURN`]; refused as malformed otherwise).
///
/// # Safety
///
/// `rec.body..rec.body + rec.len` must be readable for the duration of
/// the call (a record of a live ring, as checked by `RingConsumer::peek`).
#[inline]
pub(super) unsafe fn receive_record(
    rec: RawRecord,
    descs: &mut Vec<Desc>,
    peer: &mut PeerPool,
    pool: &Pool,
    own: Option<&Pool>,
    limits: &RecordLimits,
    shm: &mut ShmStats,
) -> Result<(u32, RcBuf), Discard> {
    let RawRecord { body, len: body_len, info } = rec;
    if info & !INFO_VALID_BITS != 0 {
        return Err(Discard::Malformed);
    }
    if info & INFO_DESC_MASK == 0 {
        // SAFETY: as this function's.
        return unsafe { receive_plain(body, body_len, pool, limits.max_message) };
    }
    // SAFETY: as this function's.
    let layout = unsafe { check_record(rec, descs, peer, own.is_some(), limits, shm) }?;
    // SAFETY: `check_record` just checked this record's descriptors.
    let buf = unsafe { gather(body, &layout, descs, peer, pool, own, true) }?;
    Ok((layout.msg_id, buf))
}

/// [`receive_record`] for a receiver in place: when `lease` is given (the
/// record needs an acknowledgement, it names pool bytes and the ledger
/// admits them), its pool segments are left in the peer's pool as leased
/// [`PeerSlice`]s, returned values are delivered as our own buffers (also
/// without a lease), and only the rest is copied.
///
/// # Safety
///
/// As [`receive_record`].
#[inline]
// `receive_record`'s arguments and the lease: a struct for them would be
// built per record on the receive path for nothing.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn receive_record_in_place(
    rec: RawRecord,
    descs: &mut Vec<Desc>,
    peer: &mut PeerPool,
    pool: &Pool,
    own: Option<&Pool>,
    limits: &RecordLimits,
    shm: &mut ShmStats,
    lease: Option<(&mut Ledger, &LeaseLimits, u64)>,
) -> Result<Delivered, Discard> {
    let RawRecord { body, info, .. } = rec;
    let valid = info & !INFO_VALID_BITS == 0 && info & INFO_DESC_MASK != 0;
    let needs_ack = info & INFO_NEEDS_ACK != 0;
    // A record may be received in place when it holds pool descriptors we
    // can lease or values of ours returned (which need no lease).
    let lease = lease.filter(|_| needs_ack);
    if !valid || (lease.is_none() && own.is_none()) {
        // SAFETY: as this function's.
        let got = unsafe { receive_record(rec, descs, peer, pool, own, limits, shm) };
        return got.map(|(id, b)| Delivered::Whole(id, b));
    }
    // SAFETY: as this function's.
    let layout = unsafe { check_record(rec, descs, peer, own.is_some(), limits, shm) }?;
    let leased = match lease {
        Some((ledger, lease_limits, seq)) if layout.pool_bytes > 0 => {
            if ledger.admits(layout.pool_bytes, lease_limits) {
                Some(ledger.lease(seq, layout.pool_bytes))
            } else {
                shm.lease_refused += 1;
                None
            }
        }
        _ => None,
    };
    // Gathered whole unless something stays out of our copy: pool bytes
    // under a lease, or values of ours returned (with pool bytes that could
    // not be leased, the returned values are copied too).
    if leased.is_none() && (layout.pool_bytes > 0 || layout.return_bytes == 0) {
        // SAFETY: `check_record` just checked this record's descriptors.
        let buf = unsafe { gather(body, &layout, descs, peer, pool, own, true) }?;
        return Ok(Delivered::Whole(layout.msg_id, buf));
    }
    // SAFETY: as above; only the first and inline segments are copied.
    let buf = unsafe { gather(body, &layout, descs, peer, pool, own, false) }?;
    let mut parts = Parts::new();
    parts.push(Part::Local { at: 0, len: layout.first });
    let mut at = layout.first;
    for d in descs.iter() {
        let len = d.len as usize;
        parts.push(match d.kind {
            // An empty pool segment is nothing, leased or not (as gathered).
            DESC_POOL if len == 0 => continue,
            DESC_POOL => {
                // In the mapping: checked by `check_record`; a lease exists
                // whenever the record names pool bytes (the branch above).
                let (Some(map), Some(state)) = (peer.map.as_ref(), leased.as_ref()) else {
                    return Err(Discard::Malformed);
                };
                Part::Peer(PeerSlice::new(map, peer.origin, d.offset as usize, len, state).ok_or(Discard::Malformed)?)
            }
            DESC_RETURN => Part::Own(returned(own, d)?),
            _ => {
                at += len;
                Part::Local { at: at - len, len }
            }
        });
    }
    if leased.is_some() {
        shm.leased += 1;
    }
    shm.returns_received += layout.returns as u64;
    Ok(Delivered::InPlace(layout.msg_id, buf, parts))
}

/// The buffer of ours a [`DESC_RETURN`] descriptor names, with a reference
/// taken: only a live, frozen buffer of `own` (our shared pool) holding
/// the whole range (O(1), [`Pool::recover_at`]; no slice of the range is
/// formed first, so naming a buffer still being written is refused, not
/// undefined). Anything else is malformed.
#[inline]
fn returned(own: Option<&Pool>, d: &Desc) -> Result<RcBuf, Discard> {
    let own = own.ok_or(Discard::Malformed)?;
    let offset = usize::try_from(d.offset).map_err(|_| Discard::Malformed)?;
    own.recover_at(offset, d.len as usize).ok_or(Discard::Malformed)
}

/// A record without descriptors: one packet, copied.
///
/// # Safety
///
/// `body..body + body_len` readable for the call.
#[inline]
unsafe fn receive_plain(
    body: *const u8,
    body_len: usize,
    pool: &Pool,
    max_message: usize,
) -> Result<(u32, RcBuf), Discard> {
    if body_len < PACKET_HEADER_LEN || body_len - PACKET_HEADER_LEN > max_message {
        return Err(Discard::Malformed);
    }
    let mut hdr = [0u8; PACKET_HEADER_LEN];
    // SAFETY: body..body+body_len is readable (caller), body_len >= PACKET_HEADER_LEN.
    unsafe { sys::copy_from_shared(body, &mut hdr, PACKET_HEADER_LEN) };
    let msg_id = read_packet_header(&hdr).ok_or(Discard::Malformed)?;
    let len = body_len - PACKET_HEADER_LEN;
    let mut buf = pool.alloc(len).map_err(|_| Discard::NoBuffer)?;
    // SAFETY: the range is the rest of the record body.
    unsafe { sys::copy_from_shared(body.add(PACKET_HEADER_LEN), buf.as_mut_slice(), len) };
    Ok((msg_id, buf.freeze()))
}

/// Copies a record's descriptors out into `descs` and checks them: pool
/// ranges against the peer's mapping (re-mapping once if the pool grew),
/// inline lengths against the body, the total against the limit, and the
/// packet header.
///
/// # Safety
///
/// As [`receive_record`]; `rec.info` has valid bits and descriptors.
#[inline]
unsafe fn check_record(
    rec: RawRecord,
    descs: &mut Vec<Desc>,
    peer: &mut PeerPool,
    returns_ok: bool,
    limits: &RecordLimits,
    shm: &mut ShmStats,
) -> Result<Layout, Discard> {
    let RawRecord { body, len: body_len, info } = rec;
    let n = (info & INFO_DESC_MASK) as usize;
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
    descs.clear();
    let mut inline_total = 0usize;
    let mut segs_total = 0usize;
    let mut pool_bytes = 0usize;
    let mut return_bytes = 0usize;
    let mut returns = 0usize;
    for i in 0..n {
        let mut raw = [0u8; DESC_LEN];
        // SAFETY: (i + 1) * DESC_LEN <= desc_bytes <= body_len.
        unsafe { sys::copy_from_shared(body.add(i * DESC_LEN), &mut raw, DESC_LEN) };
        let d = Desc::decode(&raw);
        descs.push(d);
        let len = d.len as usize;
        match d.kind {
            DESC_POOL => {
                let end = d.offset.checked_add(len as u64).ok_or(Discard::Malformed)?;
                if end > peer.len as u64 && !peer.grow(end, limits.max_peer_pool_bytes, shm) {
                    return Err(Discard::Malformed);
                }
                pool_bytes += len;
            }
            DESC_INLINE if d.offset == 0 => inline_total += len,
            // Resolved (and checked) against our pool when gathered.
            DESC_RETURN if returns_ok && len > 0 => {
                return_bytes += len;
                returns += 1;
            }
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
    if total > limits.max_message {
        return Err(Discard::Malformed);
    }
    let mut hdr = [0u8; PACKET_HEADER_LEN];
    // SAFETY: desc_bytes + packet_len <= body_len.
    unsafe { sys::copy_from_shared(body.add(desc_bytes), &mut hdr, PACKET_HEADER_LEN) };
    let msg_id = read_packet_header(&hdr).ok_or(Discard::Malformed)?;
    Ok(Layout { msg_id, desc_bytes, first, total, pool_bytes, return_bytes, returns })
}

/// Copies a checked record's first segment and its segments, in order,
/// into a new buffer of `pool`: every segment when `with_pool` (a returned
/// one out of our own buffer, `own`), else only the inline ones.
///
/// # Safety
///
/// `body` is the record [`check_record`] returned `layout` for, still
/// readable, with `descs` and `peer` as it left them.
#[inline]
unsafe fn gather(
    body: *const u8,
    layout: &Layout,
    descs: &[Desc],
    peer: &PeerPool,
    pool: &Pool,
    own: Option<&Pool>,
    with_pool: bool,
) -> Result<RcBuf, Discard> {
    let Layout { desc_bytes, first, total, pool_bytes, return_bytes, .. } = *layout;
    let len = if with_pool { total } else { total - pool_bytes - return_bytes };
    let mut buf = pool.alloc(len).map_err(|_| Discard::NoBuffer)?;
    let dst = buf.as_mut_slice();
    // SAFETY: the first segment follows the packet header inside the body.
    unsafe { sys::copy_from_shared(body.add(desc_bytes + PACKET_HEADER_LEN), dst, first) };
    let mut at = first;
    let mut inline_at = desc_bytes + PACKET_HEADER_LEN + first;
    let peer_base = peer.map.as_ref().map_or(std::ptr::null(), |m| m.ptr().as_ptr().cast_const());
    for d in descs {
        let len = d.len as usize;
        if d.kind == DESC_RETURN {
            if with_pool {
                // Our own memory: an ordinary copy.
                dst[at..at + len].copy_from_slice(&returned(own, d)?);
                at += len;
            }
            continue;
        }
        let src = if d.kind == DESC_POOL {
            if !with_pool {
                continue;
            }
            // offset + len <= peer.len, the mapped length (checked by
            // `check_record`, after any re-map); len > 0 implies a mapping
            // exists. For len == 0 the pointer is not used.
            peer_base.wrapping_add(d.offset as usize)
        } else {
            let p = inline_at;
            inline_at += len;
            // `check_record` computed the packet length so that the inline
            // area ends exactly at the body's end.
            // SAFETY: p + len <= body_len, inside the record body.
            unsafe { body.add(p) }
        };
        if len > 0 {
            // dst has room: the bytes copied add up to its length.
            // SAFETY: the source is readable (the two cases above); dst has room.
            unsafe { sys::copy_from_shared(src, &mut dst[at..], len) };
        }
        at += len;
    }
    debug_assert_eq!(at, dst.len());
    Ok(buf.freeze())
}

/// What a drain needs besides the connection.
pub(super) struct RecvCx<'a> {
    /// Where messages are gathered: the private pool, or the shared one
    /// (`ShmConfig::receive_into_shared_pool`).
    into: &'a Pool,
    /// Our shared pool, when we accept values returned by reference.
    own: Option<&'a Pool>,
    limits: RecordLimits,
    shm: &'a mut ShmStats,
    lease: Option<LeaseLimits>,
}

/// Where a drain puts the messages it receives: whole ([`Received`]) or in
/// place ([`InPlace`]).
pub(super) trait Inbox {
    /// Receives record `rec` of connection `c` (whose id is `id`) and
    /// appends its message.
    ///
    /// # Safety
    ///
    /// As [`receive_record`].
    unsafe fn receive(&mut self, rec: RawRecord, c: &mut Conn, id: ConnId, cx: &mut RecvCx<'_>) -> Result<(), Discard>;
}

impl Inbox for Vec<Received> {
    #[inline]
    unsafe fn receive(&mut self, rec: RawRecord, c: &mut Conn, id: ConnId, cx: &mut RecvCx<'_>) -> Result<(), Discard> {
        let (descs, peer) = (&mut c.descs, &mut c.peer);
        // SAFETY: as this function's.
        let (msg_id, payload) = unsafe { receive_record(rec, descs, peer, cx.into, cx.own, &cx.limits, cx.shm) }?;
        self.push(Received { conn: id, msg_id, payload });
        Ok(())
    }
}

impl Inbox for Vec<InPlace> {
    #[inline]
    unsafe fn receive(&mut self, rec: RawRecord, c: &mut Conn, id: ConnId, cx: &mut RecvCx<'_>) -> Result<(), Discard> {
        // The record's number among those needing an acknowledgement, if
        // it needs one (counted by the drain after this call).
        let seq = c.zc_received + 1;
        let lease = cx.lease.as_ref().map(|l| (&mut c.ledger, l, seq));
        let (descs, peer) = (&mut c.descs, &mut c.peer);
        // SAFETY: as this function's.
        let got = unsafe { receive_record_in_place(rec, descs, peer, cx.into, cx.own, &cx.limits, cx.shm, lease) }?;
        self.push(match got {
            Delivered::Whole(msg_id, payload) => Received { conn: id, msg_id, payload }.into(),
            Delivered::InPlace(msg_id, local, parts) => InPlace::with_parts(id, msg_id, local, parts),
        });
        Ok(())
    }
}

/// Receives one record into `out`: checks it, copies what the receiver
/// gets in its own memory (the gather of every pool segment, unless left in
/// place) and appends the message. Never inlined, and called only for a
/// record that is there, so that a profiler can count what receiving costs
/// per message apart from the polls of an empty ring (`cf phases --side
/// client` toggles collection on this function); a call per record.
///
/// # Safety
///
/// As [`receive_record`].
#[inline(never)]
unsafe fn take_record<I: Inbox>(
    out: &mut I,
    rec: RawRecord,
    c: &mut Conn,
    id: ConnId,
    cx: &mut RecvCx<'_>,
) -> Result<(), Discard> {
    // SAFETY: as this function's.
    unsafe { out.receive(rec, c, id, cx) }
}

impl ShmDatapath {
    /// [`Datapath::recv_batch`](crate::Datapath::recv_batch) and
    /// [`Datapath::recv_batch_in_place`](crate::Datapath::recv_batch_in_place):
    /// drains the connections round-robin; reports one dead connection when
    /// idle.
    pub(super) fn receive_batch<I: Inbox>(&mut self, out: &mut I, max: usize) -> Result<usize, RecvError> {
        self.wake_sleeping_peers();
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
            // A datapath that never idles still accepts connections and
            // notices dead peers: one `poll` every 1024 busy batches.
            self.busy_batches += 1;
            if self.busy_batches >= 1024 {
                self.busy_batches = 0;
                self.idle_check()?;
            }
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

    /// Receives every record of connection `index` (up to `max`) into
    /// `out`, then publishes the acknowledgement count: every record
    /// needing one that was consumed, up to the oldest still leased.
    #[inline]
    fn drain_conn<I: Inbox>(&mut self, index: usize, out: &mut I, max: usize) -> usize {
        let slot = &mut self.slots[index];
        let id = conn_id(index, slot.generation);
        let Some(c) = slot.conn.as_mut() else { return 0 };
        let mut cx = RecvCx {
            into: if self.config.receive_into_shared_pool { &self.shared } else { &self.private },
            own: self.config.accept_returns.then_some(&self.shared),
            limits: RecordLimits {
                max_message: self.config.max_message,
                max_peer_pool_bytes: self.config.max_peer_pool_bytes,
            },
            shm: &mut self.shm,
            lease: self.config.receive_in_place,
        };
        let mut got = 0;
        // Dropped records count against `max` too: a peer that keeps the
        // ring full of malformed records must not keep this call from
        // returning (and the other connections from being served).
        let mut taken = 0;
        while taken < max && !c.corrupt {
            taken += 1;
            let rec = match c.rx.peek() {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                Err(RingCorrupt) => {
                    c.corrupt = true;
                    c.dead = true;
                    cx.shm.corrupt_rings += 1;
                    break;
                }
            };
            // The record is consumed only after this call.
            // SAFETY: `peek` checked the body lies in the ring's mapped data area.
            let result = unsafe {
                take_record(out, RawRecord { body: rec.body.as_ptr(), len: rec.len, info: rec.info }, c, id, &mut cx)
            };
            if rec.info & INFO_NEEDS_ACK != 0 {
                c.zc_received += 1;
            }
            c.rx.consume(rec);
            match result {
                Ok(()) => got += 1,
                Err(Discard::Malformed) => self.stats.dropped_malformed += 1,
                Err(Discard::NoBuffer) => self.stats.dropped_no_buffer += 1,
            }
        }
        let max_age = cx.lease.map_or(Duration::ZERO, |l| l.max_age);
        let ack = c.ledger.ack(c.zc_received, max_age, &mut cx.shm.leases_expired);
        if ack != c.zc_reported {
            c.rx.set_acked(ack);
            c.zc_reported = ack;
        }
        if c.dead && (c.corrupt || !c.rx.has_data()) {
            self.reclaim(index, true);
        }
        self.stats.received += got as u64;
        got
    }
}

/// What the fuzz targets drive: [`receive_record`] on a record held in
/// ordinary memory, against a fake peer pool memfd.
pub(super) mod fuzzing {
    use super::*;

    /// A peer pool memfd of `file_len` bytes holding `pattern(i)` at each
    /// offset `i`, sealed against shrinking, of which the first
    /// `mapped_len` bytes are mapped (so descriptors past them take the
    /// re-map path).
    pub(in crate::shm) fn fake_peer_pool(file_len: usize, mapped_len: usize) -> std::io::Result<PeerPool> {
        use rustix::fs::{fcntl_add_seals, ftruncate, memfd_create, MemfdFlags, SealFlags};
        let fd = memfd_create("cornflakes-fuzz-peer-pool", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        ftruncate(&fd, file_len as u64)?;
        let bytes: Vec<u8> = (0..file_len).map(pattern).collect();
        rustix::io::pwrite(&fd, &bytes, 0)?;
        fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW)?;
        PeerPool::map(fd, mapped_len.min(file_len))
    }

    /// The byte at offset `i` of a fake peer pool.
    pub(in crate::shm) fn pattern(i: usize) -> u8 {
        (i % 251) as u8 ^ (i >> 16) as u8
    }
}

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

use cornflakes::{Pool, RcBuf};

use super::conn::conn_id;
use super::proto::{
    Desc, DESC_INLINE, DESC_LEN, DESC_POOL, INFO_DESC_MASK, INFO_NEEDS_ACK, INFO_VALID_BITS, MAX_SEGMENTS,
};
use super::ring::RingCorrupt;
use super::{sys, ShmDatapath, ShmStats};
use crate::{read_packet_header, Received, RecvError, PACKET_HEADER_LEN};

/// The peer's shared pool memfd, mapped read-only.
pub(super) struct PeerPool {
    fd: OwnedFd,
    map: Option<sys::Mapping>,
    len: usize,
}

impl PeerPool {
    /// Maps the first `len` bytes of `fd` (the caller checked its seal and
    /// that it is at least that long); nothing for an empty file.
    pub(super) fn map(fd: OwnedFd, len: usize) -> std::io::Result<Self> {
        let map = if len == 0 { None } else { Some(sys::Mapping::map(fd.as_fd(), len, false)?) };
        Ok(Self { fd, map, len })
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

/// Checks one record and copies the message it describes into a new buffer
/// of `pool` (our private pool). Everything is read from shared memory
/// once, into locals, before it is checked; `descs` is reused scratch.
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
    limits: &RecordLimits,
    shm: &mut ShmStats,
) -> Result<(u32, RcBuf), Discard> {
    let RawRecord { body, len: body_len, info } = rec;
    let max_message = limits.max_message;
    if info & !INFO_VALID_BITS != 0 {
        return Err(Discard::Malformed);
    }
    let n = (info & INFO_DESC_MASK) as usize;
    if n == 0 {
        // The common case: one packet, copied.
        if body_len < PACKET_HEADER_LEN || body_len - PACKET_HEADER_LEN > max_message {
            return Err(Discard::Malformed);
        }
        let mut hdr = [0u8; PACKET_HEADER_LEN];
        // SAFETY: body..body+body_len is readable (caller) and
        // body_len >= PACKET_HEADER_LEN.
        unsafe { sys::copy_from_shared(body, &mut hdr, PACKET_HEADER_LEN) };
        let msg_id = read_packet_header(&hdr).ok_or(Discard::Malformed)?;
        let len = body_len - PACKET_HEADER_LEN;
        let mut buf = pool.alloc(len).map_err(|_| Discard::NoBuffer)?;
        // SAFETY: the range is the rest of the record body.
        unsafe { sys::copy_from_shared(body.add(PACKET_HEADER_LEN), buf.as_mut_slice(), len) };
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
    descs.clear();
    let mut inline_total = 0usize;
    let mut segs_total = 0usize;
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
    // SAFETY: desc_bytes + packet_len <= body_len.
    unsafe { sys::copy_from_shared(body.add(desc_bytes), &mut hdr, PACKET_HEADER_LEN) };
    let msg_id = read_packet_header(&hdr).ok_or(Discard::Malformed)?;
    let mut buf = pool.alloc(total).map_err(|_| Discard::NoBuffer)?;
    let dst = buf.as_mut_slice();
    // SAFETY: the first segment follows the packet header inside the body.
    unsafe { sys::copy_from_shared(body.add(desc_bytes + PACKET_HEADER_LEN), dst, first) };
    let mut at = first;
    let mut inline_at = desc_bytes + packet_len;
    let peer_base = peer.map.as_ref().map_or(std::ptr::null(), |m| m.ptr().as_ptr().cast_const());
    for d in descs.iter() {
        let len = d.len as usize;
        let src = if d.kind == DESC_POOL {
            // offset + len <= peer.len, the mapped length (checked above,
            // after any re-map); len > 0 implies a mapping exists. For
            // len == 0 the pointer is not used.
            peer_base.wrapping_add(d.offset as usize)
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
            unsafe { sys::copy_from_shared(src, &mut dst[at..], len) };
        }
        at += len;
    }
    debug_assert_eq!(at, total);
    Ok((msg_id, buf.freeze()))
}

impl ShmDatapath {
    /// [`Datapath::recv_batch`](crate::Datapath::recv_batch): drains the
    /// connections round-robin; reports one dead connection when idle.
    pub(super) fn receive_batch(&mut self, out: &mut Vec<Received>, max: usize) -> Result<usize, RecvError> {
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

    /// Receives every record of connection `index` (up to `max`) into the
    /// private pool, then publishes the acknowledgement count.
    #[inline]
    fn drain_conn(&mut self, index: usize, out: &mut Vec<Received>, max: usize) -> usize {
        let slot = &mut self.slots[index];
        let id = conn_id(index, slot.generation);
        let Some(c) = slot.conn.as_mut() else { return 0 };
        let limits =
            RecordLimits { max_message: self.config.max_message, max_peer_pool_bytes: self.config.max_peer_pool_bytes };
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
            // SAFETY: `peek` checked that the body lies in the ring's data
            // area, mapped as long as `c.rx` lives; it is consumed after.
            let result = unsafe {
                receive_record(
                    RawRecord { body: rec.body.as_ptr(), len: rec.len, info: rec.info },
                    &mut c.descs,
                    &mut c.peer,
                    &self.private,
                    &limits,
                    &mut self.shm,
                )
            };
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

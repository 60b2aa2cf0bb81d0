//! The system calls behind the shared-memory datapath: sealed memfds,
//! mappings, passing descriptors over a Unix socket (`SCM_RIGHTS`).
//!
//! Each function wraps one or two rustix calls; the unsafe ones say what the
//! caller must uphold. Nothing here runs on the fast path except through
//! [`Mapping::ptr`] and the two copy primitives.
//!
//! # The promise about peer-writable memory
//!
//! A [`Mapping`] of a memfd another process also maps (a ring, a peer's
//! pool) may change under us at any instant. **No Rust reference (`&[u8]`,
//! `&mut [u8]`, `&T` of a non-atomic type) to such memory is ever formed by
//! this crate**, neither handed out nor used internally. The shared-memory
//! datapath and its rings touch it only through:
//!
//! - [`copy_from_shared`]: a raw copy out into our own memory, which is then
//!   checked (every read of a record, descriptor, packet or peer-pool
//!   segment);
//! - [`copy_to_shared`]: a raw copy in from our own memory (every write of a
//!   record body; a message's first segment is serialized into a private
//!   staging buffer first, because the serializer writes through a slice);
//! - atomics (`AtomicU32`/`AtomicU64` through a pointer, or `&Control`,
//!   a struct of atomics only), for record headers and control words.
//!
//! The public ring API keeps the same promise: it copies in
//! ([`RingProducer::try_push`](super::ring::RingProducer::try_push)) and out
//! ([`RingConsumer::try_pop`](super::ring::RingConsumer::try_pop)).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{fcntl_add_seals, fcntl_get_seals, fstat, ftruncate, memfd_create, MemfdFlags, SealFlags};
use rustix::io::IoSliceMut;
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags,
};

/// Most descriptors one [`recv_fds`] call accepts; more are closed.
pub const MAX_PASSED_FDS: usize = 8;

/// A shared mapping of a whole file (a memfd), unmapped on drop.
///
/// The memory may be written by another process at any time, so no Rust
/// reference to its bytes is ever handed out by this type: users go through
/// [`Mapping::ptr`] and atomics or raw copies.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

/// Whether [`Mapping::map`] faults the pages in up front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Populate {
    /// Always (`MAP_POPULATE`): a file of ours, whose pages we want now
    /// rather than at first touch on the fast path.
    Always,
    /// Only when the file's pages are all allocated already: a peer's file.
    /// Populating a sparse file allocates its holes, charged to us, so a
    /// peer could make us allocate up to its size limit (1 TiB by default)
    /// without writing a byte, and again at every re-map. An honest peer's
    /// pool and ring are allocated (it populates its own), so it gets the
    /// up-front faults as before.
    IfAllocated,
}

impl Mapping {
    /// Maps the first `len` bytes of `fd`, shared, read-write or read-only,
    /// with the pages faulted in up front as `populate` says.
    ///
    /// The caller must have checked that the file is at least `len` bytes
    /// long and cannot shrink (sealed), or accept a `SIGBUS` on access past
    /// its end.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize, writable: bool, populate: Populate) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map an empty file"));
        }
        let prot = if writable { ProtFlags::READ | ProtFlags::WRITE } else { ProtFlags::READ };
        let populate = match populate {
            Populate::Always => true,
            Populate::IfAllocated => fstat(fd).is_ok_and(|st| (st.st_blocks as u64).saturating_mul(512) >= len as u64),
        };
        let flags = if populate { MapFlags::SHARED | MapFlags::POPULATE } else { MapFlags::SHARED };
        // A new mapping at an address of the kernel's choosing (no MAP_FIXED).
        // SAFETY: such a mapping cannot alias any existing Rust object.
        let raw = unsafe { mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) }?;
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Self { ptr, len })
    }

    /// First byte of the mapping.
    #[inline(always)]
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Bytes mapped.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `Mapping::map` with this length
        // and its owner (a ring endpoint or peer pool) is going away: every
        // pointer derived from it lives no longer than the owner.
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

/// Copies `len` bytes out of peer-writable memory into `dst`.
///
/// The bytes may be changing while they are copied (a hostile peer): the
/// copy is then some mix of old and new values, which the caller checks as
/// untrusted input. No reference to the source is formed.
///
/// # Safety
///
/// `src..src + len` must lie inside a live [`Mapping`] (or other memory
/// valid for reads for the duration of the call) that does not overlap
/// `dst`, and `dst.len() >= len`.
#[inline(always)]
pub(crate) unsafe fn copy_from_shared(src: *const u8, dst: &mut [u8], len: usize) {
    debug_assert!(dst.len() >= len);
    if len >= VECTOR_COPY_MIN && copies_without_rep_movsb() {
        // SAFETY: as below; `dst` is our own memory with room for `len`.
        unsafe { copy_vectors(src, dst.as_mut_ptr(), len) };
        return;
    }
    // SAFETY: the caller guarantees that the source range is readable and
    // that it does not overlap `dst` (ours: a pool buffer or a local), which
    // has room for `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), len) };
}

/// Copies of at least this many bytes out of peer memory take
/// [`copy_vectors`] where [`copies_without_rep_movsb`] says so (glibc's
/// `memcpy` switches to `rep movsb` from 2-4 KiB up, by CPU).
pub(crate) const VECTOR_COPY_MIN: usize = 2048;

/// Whether [`copy_from_shared`] copies long runs with a loop of 16-byte
/// loads and stores rather than `memcpy`: on AMD CPUs only. On the AMD
/// EPYC test guest, the load generator's gather of CDN responses (8000 B
/// segments out of the server's pool, 21.75 KB per object) spent 69 % of
/// its time in glibc's `rep movsb` at 60 k objects/s, 4.2 µs per 8000 B;
/// with `rep movsb` switched off (`GLIBC_TUNABLES=
/// glibc.cpu.x86_rep_movsb_threshold=2000000`) 18 %, and the load
/// generator's busy share fell from 92 % to 45 %. The likely cause (found
/// later, `docs/results/2026-11-29-rep-movsb/`): glibc 2.36's `rep movsb`
/// is ~3x slower on these CPUs when the destination is 1-31 bytes past
/// the source modulo a page (glibc bug 30994); where a gathered segment
/// lands follows the lengths of the segments before it. `cf` now
/// runs with that tunable on AMD (`cornflakes_eval::glibc`); this copy
/// keeps other programs that use the datapath out of it. Intel keeps
/// `memcpy` (its `rep movsb` read as fast as a vector loop there).
pub(crate) fn copies_without_rep_movsb() -> bool {
    is_amd()
}

/// Whether this CPU is AMD's (`/proc/cpuinfo`, read once per process).
pub fn is_amd() -> bool {
    static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AMD.get_or_init(|| std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| names_amd(&info)))
}

/// Whether a `/proc/cpuinfo` text's first `vendor_id` is AMD's.
fn names_amd(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("vendor_id"))
        .is_some_and(|rest| rest.trim_start_matches([' ', '\t', ':']).trim() == "AuthenticAMD")
}

/// Copies the whole 64-byte blocks of `len` bytes from `src` to `dst`,
/// each with four 16-byte loads and four stores (streaming ones when
/// `STREAM`); returns how many bytes it copied (`len` rounded down to 64).
/// The loop of [`copy_vectors`] and [`copy_streaming`].
///
/// # Safety
///
/// As [`copy_vectors`]; with `STREAM`, `dst` must also be 16-aligned.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
unsafe fn copy_blocks<const STREAM: bool>(src: *const u8, dst: *mut u8, len: usize) -> usize {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_stream_si128};
    let mut i = 0;
    while i + 64 <= len {
        // Every access is within 0..len of both ranges (the caller's
        // guarantees); SSE2 is part of the x86_64 baseline; loads are
        // unaligned, streaming stores go to 16-aligned `dst + i`.
        // SAFETY: in bounds, disjoint, aligned where it must be, as said above.
        unsafe {
            let s = src.add(i).cast::<__m128i>();
            let d = dst.add(i).cast::<__m128i>();
            let (a, b, c, e) =
                (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)), _mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            if STREAM {
                _mm_stream_si128(d, a);
                _mm_stream_si128(d.add(1), b);
                _mm_stream_si128(d.add(2), c);
                _mm_stream_si128(d.add(3), e);
            } else {
                _mm_storeu_si128(d, a);
                _mm_storeu_si128(d.add(1), b);
                _mm_storeu_si128(d.add(2), c);
                _mm_storeu_si128(d.add(3), e);
            }
        }
        i += 64;
    }
    i
}

/// Copies `len` bytes from `src` to `dst` with 16-byte loads and stores,
/// 64 bytes a turn (never `rep movsb`); `src` may be peer-writable memory
/// (no reference to either side is formed).
///
/// # Safety
///
/// `src..src + len` must be valid for reads and `dst..dst + len` for writes
/// for the duration of the call, and the two must not overlap.
#[inline]
unsafe fn copy_vectors(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: the caller's guarantees; the blocks and the tail lie
        // within 0..len of both ranges.
        unsafe {
            let i = copy_blocks::<false>(src, dst, len);
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    // SAFETY: the caller's guarantees, passed on.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    }
}

/// Whether `len = other.len()` bytes of peer-writable memory at `src`
/// equal `other`: one `memcmp` reading the peer's bytes where they lie,
/// as [`copy_from_shared`] copies them (no bounce through a buffer, no
/// reference to the source). Bytes a peer changes during the call give
/// either answer; `memcmp` only reads them, and nothing else is derived
/// from them.
///
/// # Safety
///
/// `src..src + other.len()` must lie inside a live [`Mapping`] (or other
/// memory valid for reads for the duration of the call).
#[inline]
pub(crate) unsafe fn eq_shared(src: *const u8, other: &[u8]) -> bool {
    if other.is_empty() {
        return true;
    }
    // SAFETY: the caller vouches that `src..src + other.len()` is readable; `other` is a live slice of that length.
    unsafe { libc::memcmp(src.cast(), other.as_ptr().cast(), other.len()) == 0 }
}

/// One 64-byte block read out of peer-writable memory, by value: what
/// [`copy_from_shared`] does for 64 bytes, without a destination in
/// memory, so that a caller that only compares the bytes keeps them in a
/// register. The bytes may be changing while they are read (then the
/// block is some mix of old and new values, any of which is a valid
/// `[u8; 64]`). No reference to the source is formed.
///
/// # Safety
///
/// `src..src + 64` must lie inside a live [`Mapping`] (or other memory
/// valid for reads for the duration of the call).
#[inline(always)]
pub(crate) unsafe fn read_block_from_shared(src: *const u8) -> [u8; 64] {
    // No alignment is required, and every bit pattern is a `[u8; 64]`.
    // SAFETY: the caller guarantees that the 64 bytes are readable.
    unsafe { std::ptr::read_unaligned(src.cast::<[u8; 64]>()) }
}

/// [`copy_to_shared`] with non-temporal (streaming) stores where the
/// target has them: the bytes go to memory and the shared cache rather than
/// staying modified in this core's cache, so a reader on another core
/// fetches them from there instead of snooping them out of ours (bulk
/// streams: 2-5x faster reads on the 2-core test machine). Ends with a store
/// fence, so a later `Release` publish orders after every byte.
///
/// # Safety
///
/// As [`copy_to_shared`].
#[inline]
pub(crate) unsafe fn copy_to_shared_streaming(src: &[u8], dst: *mut u8) {
    // SAFETY: the caller's guarantees; `src` is a live slice of its length.
    unsafe { copy_streaming(src.as_ptr(), dst, src.len()) }
}

/// Copies `len` bytes from `src` to `dst` with streaming stores (see
/// [`copy_to_shared_streaming`]); `src` may be peer-writable memory (no
/// reference to either side is formed).
///
/// # Safety
///
/// `src..src + len` must be valid for reads and `dst..dst + len` for writes
/// for the duration of the call, and the two must not overlap.
#[inline]
pub(crate) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // Up to 15 bytes first, so that the streaming stores are aligned.
        let head = ((16 - (dst as usize & 15)) & 15).min(len);
        // The caller guarantees both ranges are valid and disjoint; every
        // access below is within 0..len of both; `dst + head` is 16-aligned.
        // SAFETY: in bounds, disjoint, aligned streaming stores, as said above.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let i = head + copy_blocks::<true>(src.add(head), dst.add(head), len - head);
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
            std::arch::x86_64::_mm_sfence();
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    // SAFETY: the caller's guarantees, passed on.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    }
}

/// Copies `src` into `dst` (of the same length) for bytes that another
/// core reads next, such as a buffer of the shared pool about to be sent by
/// descriptor: with streaming stores where [`streams_for_peer`] says so,
/// so the reader fetches them from the shared cache or memory instead of
/// snooping each line out of the writer's cache; with plain stores
/// otherwise. On the AMD EPYC test guest (1 MiB L2 per core), `cf pingpong --in-place` round
/// trips took, plain / streaming: 2 KiB 1.1 / 1.9 us, 64 KiB 17.6 / 13.4 us,
/// 256 KiB 63 / 50 us, 512 KiB 91 / 92 us, 1 MiB 125-134 / 144 us (a copy
/// that large leaves the L2 anyway, and plain stores leave it in the
/// shared L3).
///
/// # Panics
///
/// When the lengths differ, as `<[u8]>::copy_from_slice` does.
pub fn copy_for_peer(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_for_peer: destination length differs");
    if !streams_for_peer(src.len()) {
        dst.copy_from_slice(src);
        return;
    }
    // SAFETY: a shared and a mutable slice of the same length never overlap.
    unsafe { copy_streaming(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// The lengths that [`copy_for_peer`] copies with streaming stores, on a
/// CPU where it does ([`streams_for_peer`]).
pub const STREAMING: std::ops::RangeInclusive<usize> = (16 << 10)..=(512 << 10);

/// Whether [`copy_for_peer`] copies `len` bytes with streaming stores:
/// [`STREAMING`] lengths, on AMD CPUs only. Measured with `cf
/// ipc-compare` (in-place round trips, 64 KiB, plain / streaming): the
/// AMD EPYC guest 17.6 / 13.4 us; an Intel Xeon (Sapphire Rapids class,
/// 2 MiB L2) guest 15.8 / 26.7 us (not profiled there; presumably the
/// reader then fetches the lines from memory instead of the writer's L2).
pub fn streams_for_peer(len: usize) -> bool {
    STREAMING.contains(&len) && is_amd()
}

/// Copies `src` into peer-writable memory at `dst`. No reference to the
/// destination is formed.
///
/// # Safety
///
/// `dst..dst + src.len()` must lie inside a live writable [`Mapping`] (a
/// ring slot reserved by this process) that does not overlap `src`.
#[inline(always)]
pub(crate) unsafe fn copy_to_shared(src: &[u8], dst: *mut u8) {
    // SAFETY: the caller guarantees the destination range is writable and
    // disjoint from `src` (our own memory).
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
}

/// Creates a memfd of `len` bytes and seals it against shrinking and
/// growing, so that a peer that maps it can trust its size forever.
pub(crate) fn create_sealed_memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let fd = memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    ftruncate(&fd, len as u64)?;
    fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok(fd)
}

/// Current size of the file behind `fd`.
pub(crate) fn file_size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let st = fstat(fd)?;
    u64::try_from(st.st_size).map_err(|_| io::Error::other("negative file size"))
}

/// Whether `fd` is sealed against shrinking (so mapped pages can never
/// disappear under a reader and raise `SIGBUS`).
pub(crate) fn is_shrink_sealed(fd: BorrowedFd<'_>) -> bool {
    fcntl_get_seals(fd).is_ok_and(|s| s.contains(SealFlags::SHRINK))
}

/// Sends `bytes` with the descriptors `fds` attached (`SCM_RIGHTS`), in one
/// `sendmsg`. Used at connection set-up; public so that tools (the bare-ring
/// benchmark, hostile-peer tests) can hand memfds to another process.
///
/// # Errors
///
/// `InvalidInput` for more than `MAX_PASSED_FDS` (8) descriptors, `WriteZero`
/// for a short send, and whatever `sendmsg` reports.
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::shm::{recv_fds, send_fds};
/// use std::os::fd::AsFd;
/// use std::os::unix::net::UnixStream;
///
/// let (a, b) = UnixStream::pair().unwrap();
/// send_fds(&a, b"fd", &[a.as_fd()]).unwrap();
/// let mut buf = [0u8; 2];
/// let (n, fds) = recv_fds(&b, &mut buf).unwrap();
/// assert_eq!((n, &buf, fds.len()), (2, b"fd", 1));
/// ```
pub fn send_fds(sock: impl AsFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_PASSED_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if fds.len() > MAX_PASSED_FDS || !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors to pass"));
    }
    let sent = sendmsg(&sock, &[io::IoSlice::new(bytes)], &mut control, SendFlags::NOSIGNAL)?;
    if sent != bytes.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short sendmsg"));
    }
    Ok(())
}

/// Receives up to `buf.len()` bytes and any descriptors sent with them
/// (at most `MAX_PASSED_FDS` (8); the kernel closes the rest). Returns the
/// byte count (0 at end of stream) and the descriptors, owned.
///
/// # Errors
///
/// Whatever `recvmsg` reports (`WouldBlock` on a non-blocking socket or
/// after a read timeout).
///
/// # Examples
///
/// See [`send_fds`].
pub fn recv_fds(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    recv_fds_with(sock, buf, RecvFlags::empty())
}

/// [`recv_fds`] that never blocks (`MSG_DONTWAIT`), whatever the socket's
/// own mode: `WouldBlock` when nothing is queued.
///
/// # Errors
///
/// As [`recv_fds`].
pub fn try_recv_fds(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    recv_fds_with(sock, buf, RecvFlags::DONTWAIT)
}

fn recv_fds_with(sock: impl AsFd, buf: &mut [u8], flags: RecvFlags) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_PASSED_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg(&sock, &mut iov, &mut control, flags | RecvFlags::CMSG_CLOEXEC)?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    Ok((msg.bytes, fds))
}

/// A random 64-bit value (not cryptographic: it only has to differ between
/// rings so that stale bytes cannot pass for a record header).
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// `fd` (a memfd) opened again, read-only: a new open file description
/// through `/proc/self/fd`, which a peer can map only without `PROT_WRITE`
/// (`mmap` of a read-only descriptor with `MAP_SHARED | PROT_WRITE` fails
/// with `EACCES`). Seals are the file's, so the copy carries them.
pub(super) fn reopen_read_only(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::open(
        path.as_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_amd_vendor_id_is_amd() {
        let amd = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n";
        let intel = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: AMD-like name\n";
        assert!(names_amd(amd));
        assert!(!names_amd(intel));
        assert!(!names_amd("model name\t: AMD EPYC\n"), "no vendor_id line");
        assert!(!names_amd(""));
    }

    /// The streaming copy (which `copy_for_peer` takes only on some CPUs)
    /// copies every byte, whatever the destination's alignment and the
    /// length's tail.
    #[test]
    fn a_streaming_copy_copies_every_byte_at_any_alignment() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 13 + 5) as u8).collect();
        for (skew, len) in [(0, 20_000), (1, 16_385), (15, 4097), (7, 63), (3, 0), (9, 200)] {
            let mut dst = vec![0u8; len + 16];
            // `src` has at least `len` bytes, `dst` has `skew + len` (skew <= 15).
            // SAFETY: both ranges are in bounds and the two vectors are distinct.
            unsafe { copy_streaming(src.as_ptr(), dst.as_mut_ptr().add(skew), len) };
            assert_eq!(&dst[skew..skew + len], &src[..len], "skew {skew}, len {len}");
            assert!(dst[..skew].iter().chain(&dst[skew + len..]).all(|&b| b == 0), "outside touched");
        }
    }

    /// The vector-loop copy (which `copy_from_shared` takes for long runs
    /// on some CPUs) copies every byte, whatever the alignment of either
    /// side and the length's tail, and writes nothing past the end.
    #[test]
    fn a_vector_copy_copies_every_byte_at_any_alignment() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 29 + 3) as u8).collect();
        for (from, skew, len) in
            [(0, 0, 20_000 - 64), (1, 0, 8000), (5, 13, 4097), (63, 1, 2048), (2, 7, 63), (0, 3, 0)]
        {
            let mut dst = vec![0u8; len + 64];
            // `src` has `from + len` bytes (from <= 63), `dst` has `skew + len` (skew <= 15).
            // SAFETY: both ranges are in bounds and the two vectors are distinct.
            unsafe { copy_vectors(src.as_ptr().add(from), dst.as_mut_ptr().add(skew), len) };
            assert_eq!(&dst[skew..skew + len], &src[from..from + len], "from {from}, skew {skew}, len {len}");
            assert!(dst[..skew].iter().chain(&dst[skew + len..]).all(|&b| b == 0), "outside touched");
        }
        // And through `copy_from_shared`, whichever copy this CPU takes.
        let mut dst = vec![0u8; VECTOR_COPY_MIN + 5];
        // SAFETY: `src` is readable for that long and distinct from `dst`, which has room.
        unsafe { copy_from_shared(src.as_ptr().add(1), &mut dst, VECTOR_COPY_MIN + 5) };
        assert_eq!(dst[..], src[1..VECTOR_COPY_MIN + 6]);
    }

    /// The in-place compare sees every byte: a difference at either end or
    /// in the middle, at any alignment, and an empty range is equal.
    #[test]
    fn a_shared_compare_sees_a_difference_anywhere() {
        let a: Vec<u8> = (0..9000u32).map(|i| (i * 7 + 1) as u8).collect();
        for (skew, len) in [(0, 9000), (3, 4097), (1, 64), (5, 1)] {
            let b = a[skew..skew + len].to_vec();
            // SAFETY: `a[skew..skew + len]` is in bounds of a live vector.
            assert!(unsafe { eq_shared(a.as_ptr().add(skew), &b) }, "skew {skew}, len {len}");
            for at in [0, len / 2, len - 1] {
                let mut wrong = b.clone();
                wrong[at] ^= 0x80;
                // SAFETY: the same in-bounds range of the live vector `a`.
                assert!(!unsafe { eq_shared(a.as_ptr().add(skew), &wrong) }, "skew {skew}, len {len}, byte {at}");
            }
        }
        // SAFETY: a zero-length compare reads nothing.
        assert!(unsafe { eq_shared(a.as_ptr(), &[]) });
    }
}

//! The system calls behind the pools: reserve address space, create the
//! backing memfd, map regions into the reservation, lock them.
//!
//! Every function here is a thin wrapper over one rustix call; the unsafe
//! ones state what the caller must uphold.
//!
//! Under Miri, which cannot run `mmap` of a memfd, the reservation is one
//! zeroed heap allocation aligned to `REGION_SIZE` and capped at
//! [`MIRI_MAX_BYTES`], there is no backing file, and mapping or locking a
//! region does nothing: the pool's own logic (slots, counts, `recover`,
//! `RcBuf`) is what Miri checks.

use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::ftruncate;
#[cfg(not(miri))]
use rustix::fs::{fcntl_add_seals, memfd_create, MemfdFlags, SealFlags};
#[cfg(not(miri))]
use rustix::mm::mmap_anonymous;
use rustix::mm::{mlock, mmap, mremap_fixed, munmap, MapFlags, MremapFlags, ProtFlags};

use super::REGION_SIZE;

/// Which pages back a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// 2 MiB hugetlbfs pages (one TLB entry per region).
    Huge2M,
    /// Ordinary 4 KiB pages.
    Small4K,
}

/// Largest reservation under Miri, whose heap holds it byte for byte.
#[cfg(miri)]
pub(crate) const MIRI_MAX_BYTES: usize = 16 * REGION_SIZE;

/// A reservation of `len` bytes of address space, aligned to `REGION_SIZE`,
/// mapped `PROT_NONE` so that nothing can touch it until a region is mapped.
pub(crate) struct Reservation {
    raw: NonNull<u8>,
    raw_len: usize,
    base: NonNull<u8>,
}

#[cfg(miri)]
impl Reservation {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len, REGION_SIZE).expect("a reservation's layout")
    }

    pub(crate) fn new(len: usize) -> std::io::Result<Self> {
        // SAFETY: the layout has a non-zero size (a pool has at least one region).
        let raw = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        let raw = NonNull::new(raw).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        Ok(Self { raw, raw_len: len, base: raw })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }
}

#[cfg(miri)]
impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the pool is destroyed
        // only once no buffer references its memory.
        unsafe { std::alloc::dealloc(self.raw.as_ptr(), Self::layout(self.raw_len)) };
    }
}

#[cfg(not(miri))]
impl Reservation {
    pub(crate) fn new(len: usize) -> std::io::Result<Self> {
        let raw_len = len + REGION_SIZE;
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choosing cannot alias any existing Rust object.
        let raw = unsafe {
            mmap_anonymous(std::ptr::null_mut(), raw_len, ProtFlags::empty(), MapFlags::PRIVATE | MapFlags::NORESERVE)
        }?;
        let raw = NonNull::new(raw.cast::<u8>()).expect("mmap returned null");
        let misalign = raw.as_ptr() as usize % REGION_SIZE;
        let skip = if misalign == 0 { 0 } else { REGION_SIZE - misalign };
        // SAFETY: `skip < REGION_SIZE`, so the result stays inside the mapping.
        let base = unsafe { NonNull::new_unchecked(raw.as_ptr().add(skip)) };
        Ok(Self { raw, raw_len, base })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }
}

#[cfg(not(miri))]
impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: the pool owning this reservation is being destroyed, and it
        // is destroyed only once no buffer references its memory.
        let _ = unsafe { munmap(self.raw.as_ptr().cast(), self.raw_len) };
    }
}

/// The file that backs a pool's regions; datapaths share it with peers.
///
/// It is sealed against shrinking: a peer that maps it can rely on every
/// byte it has seen staying mapped (a shrunk file would turn its reads into
/// SIGBUS). Growing stays allowed.
#[cfg(not(miri))]
pub(crate) fn create_backing(kind: PageKind) -> std::io::Result<Option<OwnedFd>> {
    let mut flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    if kind == PageKind::Huge2M {
        flags |= MemfdFlags::HUGETLB | MemfdFlags::HUGE_2MB;
    }
    let fd = memfd_create("cornflakes-pool", flags)?;
    fcntl_add_seals(&fd, SealFlags::SHRINK)?;
    Ok(Some(fd))
}

/// Under Miri: no file; hugepages are refused so that `Auto` falls back.
#[cfg(miri)]
pub(crate) fn create_backing(kind: PageKind) -> std::io::Result<Option<OwnedFd>> {
    match kind {
        PageKind::Huge2M => Err(std::io::ErrorKind::Unsupported.into()),
        PageKind::Small4K => Ok(None),
    }
}

/// Grows the backing file to `len` bytes.
pub(crate) fn grow_backing(fd: Option<&OwnedFd>, len: usize) -> std::io::Result<()> {
    match fd {
        Some(fd) => Ok(ftruncate(fd.as_fd(), len as u64)?),
        None => Ok(()),
    }
}

/// Maps `REGION_SIZE` bytes of `fd` at `file_offset` onto `at`, read-write and
/// shared, replacing the `PROT_NONE` reservation there.
///
/// # Safety
///
/// `at` must be a `REGION_SIZE`-aligned address inside a live [`Reservation`]
/// that no other region occupies, so that no Rust reference can point there.
/// Without a file (under Miri) the reservation's memory is used as it is.
pub(crate) unsafe fn map_region(at: NonNull<u8>, fd: Option<&OwnedFd>, file_offset: usize) -> std::io::Result<()> {
    let Some(fd) = fd else {
        return Ok(());
    };
    // Not `mmap(MAP_FIXED)` onto the reservation: when that fails (a
    // hugetlb memfd with no free hugepages: ENOMEM), Linux has already
    // unmapped the reserved pages, and the hole can be handed to another
    // thread's `mmap` before `Reservation::drop` unmaps the whole range,
    // taking that mapping with it (a SIGSEGV seen in `shm_overload`, whose
    // tests create `HugePages::Auto` pools in parallel). So the region is
    // mapped where the kernel likes, where a failure changes nothing, and
    // then moved over the reservation, which `mremap` does in one step.
    // A new mapping at an address of the kernel's choosing cannot alias
    // any existing Rust object.
    // SAFETY: no MAP_FIXED, so nothing existing is replaced or aliased.
    let tmp = unsafe {
        mmap(
            std::ptr::null_mut(),
            REGION_SIZE,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED | MapFlags::POPULATE,
            fd.as_fd(),
            file_offset as u64,
        )
    }?;
    // `tmp` is the fresh mapping above (nothing references it); the
    // caller guarantees `at` is unused reserved space of ours.
    // SAFETY: the move replaces only our own PROT_NONE pages at `at`.
    let moved = unsafe { mremap_fixed(tmp, REGION_SIZE, REGION_SIZE, MremapFlags::MAYMOVE, at.as_ptr().cast()) };
    if let Err(e) = moved {
        // SAFETY: `tmp` was not moved; it is ours alone.
        let _ = unsafe { munmap(tmp, REGION_SIZE) };
        return Err(e.into());
    }
    Ok(())
}

/// Locks one region in memory; fails without `CAP_IPC_LOCK` or enough
/// `RLIMIT_MEMLOCK`, which callers treat as "not locked", not as an error.
pub(crate) fn lock_region(at: NonNull<u8>) -> bool {
    if cfg!(miri) {
        return false;
    }
    // SAFETY: mlock only changes paging policy of our own mapped region.
    unsafe { mlock(at.as_ptr().cast(), REGION_SIZE) }.is_ok()
}

//! The system calls behind the pools: reserve address space, create the
//! backing memfd, map regions into the reservation, lock them.
//!
//! Every function here is a thin wrapper over rustix calls; the unsafe
//! ones state what the caller must uphold. Mapping a region never leaves a
//! hole in a reservation that `Drop` could later unmap from under another
//! mapping: see [`map_region`] and [`MapFailure`].
//!
//! Under Miri, which cannot run `mmap` of a memfd, the reservation is one
//! zeroed heap allocation aligned to `REGION_SIZE` and capped at
//! [`MIRI_MAX_BYTES`], there is no backing file, and mapping or locking a
//! region does nothing: the pool's own logic (slots, counts, `recover`,
//! `RcBuf`) is what Miri checks.

use std::cell::Cell;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::ftruncate;
#[cfg(not(miri))]
use rustix::fs::{fcntl_add_seals, memfd_create, MemfdFlags, SealFlags};
use rustix::mm::{mlock, mmap, mmap_anonymous, mremap_fixed, munmap, MapFlags, MremapFlags, ProtFlags};

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
    /// A region whose mapping failed in a way that may have left a hole
    /// another thread's `mmap` can fill: `drop` leaves its range alone,
    /// and the pool maps nothing more (see [`MapFailure`]).
    abandoned: Cell<Option<NonNull<u8>>>,
}

impl Reservation {
    /// Gives up the region at `at` for good: nothing is mapped there again
    /// and `drop` does not unmap it (its 2 MiB of address space leak).
    pub(crate) fn abandon(&self, at: NonNull<u8>) {
        self.abandoned.set(Some(at));
    }

    /// Whether a region was abandoned; a pool then grows no more.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.get().is_some()
    }
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
        Ok(Self { raw, raw_len: len, base: raw, abandoned: Cell::new(None) })
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
        Ok(Self { raw, raw_len, base, abandoned: Cell::new(None) })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }
}

#[cfg(not(miri))]
impl Drop for Reservation {
    fn drop(&mut self) {
        let start = self.raw.as_ptr() as usize;
        let end = start + self.raw_len;
        // An abandoned region's range may hold another thread's mapping now.
        let (hole_start, hole_end) = match self.abandoned.get() {
            Some(at) => (at.as_ptr() as usize, at.as_ptr() as usize + REGION_SIZE),
            None => (end, end),
        };
        for (from, to) in [(start, hole_start), (hole_end, end)] {
            if from < to {
                // The pool owning this reservation is being destroyed, only once
                // no buffer references its memory.
                // SAFETY: [from, to) is ours (the reservation minus any abandoned region), unreferenced.
                let _ = unsafe { munmap(from as *mut std::ffi::c_void, to - from) };
            }
        }
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

/// Why a region could not be mapped, and whether the reservation is still
/// whole where it was to go.
#[derive(Debug)]
pub(crate) struct MapFailure {
    pub(crate) error: std::io::Error,
    /// `false` when the region's range may no longer be ours: the caller
    /// must [`Reservation::abandon`] it, never map there again and never
    /// unmap it.
    pub(crate) reservation_intact: bool,
}

/// Maps `REGION_SIZE` bytes of `fd` at `file_offset` onto `at`, read-write and
/// shared, replacing the `PROT_NONE` reservation there.
///
/// # Safety
///
/// `at` must be a `REGION_SIZE`-aligned address inside a live [`Reservation`]
/// that no other region occupies, so that no Rust reference can point there.
/// Without a file (under Miri) the reservation's memory is used as it is.
pub(crate) unsafe fn map_region(at: NonNull<u8>, fd: Option<&OwnedFd>, file_offset: usize) -> Result<(), MapFailure> {
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
    }
    .map_err(|e| MapFailure { error: e.into(), reservation_intact: true })?;
    // `tmp` is the fresh mapping above (nothing references it); the
    // caller guarantees `at` is unused reserved space of ours.
    // SAFETY: the move replaces only our own PROT_NONE pages at `at`.
    let moved = unsafe { move_onto(tmp, at) };
    let Err(error) = moved else {
        return Ok(());
    };
    // SAFETY: `tmp` was not moved; it is ours alone.
    let _ = unsafe { munmap(tmp, REGION_SIZE) };
    // `mremap(MREMAP_FIXED)` unmaps the target before it moves, so a move
    // that fails late (ENOMEM) leaves the same hole as above. Fill it again
    // if it is a hole; when anything is there, it may be ours or another
    // thread's, and the caller must give the range up.
    Err(MapFailure { error, reservation_intact: refill(at) })
}

/// `mremap(MREMAP_FIXED)` of the fresh mapping `tmp` onto `at`.
///
/// # Safety
///
/// As `mremap`: `at` must hold nothing but our own reservation.
unsafe fn move_onto(tmp: *mut std::ffi::c_void, at: NonNull<u8>) -> std::io::Result<()> {
    #[cfg(test)]
    if let Some(fault) = fault::take() {
        // SAFETY: as this function's contract.
        return unsafe { fault::inject(fault, at) };
    }
    // SAFETY: as this function's contract.
    unsafe { mremap_fixed(tmp, REGION_SIZE, REGION_SIZE, MremapFlags::MAYMOVE, at.as_ptr().cast()) }?;
    Ok(())
}

/// Maps `PROT_NONE` reserved space at `at` again if nothing is mapped
/// anywhere in its region; true when it did.
fn refill(at: NonNull<u8>) -> bool {
    // MAP_FIXED_NOREPLACE fails rather than replace any mapping.
    // SAFETY: so it can only fill a hole, and nothing references a hole.
    let filled = unsafe {
        mmap_anonymous(
            at.as_ptr().cast(),
            REGION_SIZE,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED_NOREPLACE,
        )
    };
    match filled {
        Ok(p) if p == at.as_ptr().cast() => true,
        Ok(p) => {
            // A kernel before 4.17 takes the flag as a hint and maps elsewhere.
            // SAFETY: `p` is the fresh mapping just made; nothing references it.
            let _ = unsafe { munmap(p, REGION_SIZE) };
            false
        }
        Err(_) => false,
    }
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

/// Failures of `mremap` injected by tests: the kernel's own need memory
/// pressure or a full map count to happen.
#[cfg(test)]
pub(crate) mod fault {
    use std::cell::Cell;
    use std::ptr::NonNull;

    use rustix::mm::{mmap_anonymous, munmap, MapFlags, ProtFlags};

    use crate::mem::REGION_SIZE;

    /// How the next move onto a reservation fails, on this thread.
    #[derive(Clone, Copy, Debug)]
    pub(crate) enum MremapFault {
        /// Before touching the target (bad arguments, say).
        BeforeUnmap,
        /// After unmapping the target, leaving a hole.
        AfterUnmap,
        /// After unmapping the target, and another thread's `mmap` gets a
        /// page in the hole at once: the page's address is returned by
        /// [`taken_page`].
        AfterUnmapHoleTaken,
    }

    thread_local! {
        static NEXT: Cell<Option<MremapFault>> = const { Cell::new(None) };
        static TAKEN: Cell<Option<NonNull<u8>>> = const { Cell::new(None) };
    }

    /// Makes the next move onto a reservation on this thread fail.
    pub(crate) fn fail_next_mremap(fault: MremapFault) {
        NEXT.with(|n| n.set(Some(fault)));
    }

    /// The page that [`MremapFault::AfterUnmapHoleTaken`] mapped, if any.
    pub(crate) fn taken_page() -> Option<NonNull<u8>> {
        TAKEN.with(|t| t.take())
    }

    pub(super) fn take() -> Option<MremapFault> {
        NEXT.with(|n| n.take())
    }

    /// Fails as `fault` says, doing to `at` what the kernel would.
    ///
    /// # Safety
    ///
    /// As [`super::move_onto`]: `at` holds nothing but our own reservation.
    pub(super) unsafe fn inject(fault: MremapFault, at: NonNull<u8>) -> std::io::Result<()> {
        if let MremapFault::AfterUnmap | MremapFault::AfterUnmapHoleTaken = fault {
            // As the kernel would.
            // SAFETY: the target is our own PROT_NONE reservation, which nothing references.
            unsafe { munmap(at.as_ptr().cast(), REGION_SIZE) }?;
        }
        if let MremapFault::AfterUnmapHoleTaken = fault {
            // SAFETY: NOREPLACE fills only the hole just made.
            let page = unsafe {
                mmap_anonymous(
                    at.as_ptr().cast(),
                    4096,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::PRIVATE | MapFlags::FIXED_NOREPLACE,
                )
            }?;
            TAKEN.with(|t| t.set(NonNull::new(page.cast())));
        }
        Err(std::io::ErrorKind::OutOfMemory.into())
    }
}

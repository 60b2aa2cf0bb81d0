//! The pool: a reservation of address space filled region by region, each
//! region cut into slots of one power-of-two size class.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::rc::Rc;

use super::rcbuf::{self, RcBuf, RcBufMut, FREE, MAX_SHARED, UNIQUE};
use super::sys::{self, PageKind, Reservation};
use super::{class_of, AllocError, PoolError, MIN_CLASS_SHIFT, NUM_CLASSES, REGION_SHIFT, REGION_SIZE, RUN_SHIFT};

/// How a pool obtains its memory.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Address space reserved up front; the pool never grows beyond it.
    /// Only mapped regions consume memory. Default: 16 GiB.
    pub max_bytes: usize,
    /// Whether to back regions with 2 MiB hugepages.
    pub hugepages: HugePages,
    /// Try to `mlock` each region (needs `CAP_IPC_LOCK` or a memlock limit).
    pub lock: bool,
}

/// Hugepage policy for [`PoolConfig::hugepages`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePages {
    /// Use hugepages if the machine has some reserved, else 4 KiB pages.
    Auto,
    /// Always 4 KiB pages.
    Never,
    /// Fail pool creation unless hugepages can be mapped.
    Require,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self { max_bytes: 16 << 30, hugepages: HugePages::Auto, lock: true }
    }
}

/// A mapped region as a datapath sees it: what to register with the kernel
/// or NIC, or to map in a peer process (`Pool::backing_fd` at `file_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// Position of the region in the pool (region `i` starts at
    /// `base + i * REGION_SIZE`).
    pub index: usize,
    /// First byte of the region.
    pub addr: *const u8,
    /// Always [`REGION_SIZE`].
    pub len: usize,
    /// Offset of the region in the backing memfd.
    pub file_offset: usize,
    /// Slot size of the region's class; [`REGION_SIZE`] for a region that
    /// is part of a buffer spanning several regions (a *run*).
    pub slot_size: usize,
}

/// Counters a pool keeps about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Regions mapped so far.
    pub regions: usize,
    /// Bytes mapped (regions times `REGION_SIZE`).
    pub mapped_bytes: usize,
    /// Slots currently allocated (reference count above zero).
    pub live_slots: usize,
    /// Regions that `mlock` succeeded on.
    pub locked_regions: usize,
}

/// Metadata of one region, hot fields in its first cache line, kept in a table indexed
/// by region number so that `recover` finds it by arithmetic alone.
#[repr(C, align(64))]
pub(crate) struct RegionMeta {
    /// First byte of the region's memory.
    pub(crate) base: NonNull<u8>,
    /// Reference counts, one per slot (0 = free).
    pub(crate) counts: Cell<NonNull<Cell<u32>>>,
    /// log2 of the slot size; 0 while the region is unmapped; [`RUN_SHIFT`]
    /// when the region belongs to a run (one slot spanning whole regions),
    /// so that any offset from the run's head maps to slot 0.
    pub(crate) class_shift: Cell<u32>,
    /// Number of slots: `REGION_SIZE >> class_shift`.
    slots: Cell<u32>,
    /// Whether the region is on its class's list of regions with free slots.
    in_partial: Cell<bool>,
    /// The pool, for returning a slot when its count reaches zero.
    pool: Cell<*const PoolInner>,
    /// Free slot indices, used as a stack (LIFO reuse keeps slots warm).
    free: RefCell<Vec<u32>>,
    /// Owner of the `counts` array (`counts` points into its buffer, which
    /// is allocated once, when the region is mapped, and never moves).
    counts_storage: RefCell<Vec<Cell<u32>>>,
    /// For a region of a run: its distance from the run's first region (0
    /// on the head). May be stale once the run is freed and split again;
    /// `recover` checks the head it leads to before trusting it.
    run_head: Cell<u32>,
    /// On the head of a run: how many regions the run has.
    run_regions: Cell<u32>,
}

// `recover`, clone and drop read only `base`, `counts` and `class_shift`:
// they must share the entry's first cache line.
const _: () = assert!(std::mem::offset_of!(RegionMeta, class_shift) + 4 <= 64);
const _: () = assert!(std::mem::offset_of!(RegionMeta, counts) + 8 <= 64);
const _: () = assert!(std::mem::align_of::<RegionMeta>() == 64);

impl RegionMeta {
    /// Slot index of an address inside the region.
    #[inline(always)]
    pub(crate) fn slot_of(&self, addr: *const u8) -> usize {
        (addr as usize - self.base.as_ptr() as usize) >> self.class_shift.get()
    }

    /// The reference count of slot `slot`.
    #[inline(always)]
    pub(crate) fn count(&self, slot: usize) -> &Cell<u32> {
        debug_assert!(slot < self.slots.get() as usize);
        // SAFETY: `slot < slots`, the length of the counts array, which lives
        // as long as the pool (and so as long as any RcBuf pointing here).
        unsafe { &*self.counts.get().as_ptr().add(slot) }
    }

    /// Puts slot `slot` back on the free stack and drops the pool reference
    /// the slot held, which may free the pool and with it this entry.
    ///
    /// A function of a raw pointer, not of `&self`: no reference into the
    /// region table may be live when the pool (which owns the table) goes.
    ///
    /// # Safety
    ///
    /// `this` is a live entry of a live pool and slot `slot` of it was
    /// allocated and has just had its count set to zero.
    #[cold]
    pub(crate) unsafe fn release(this: NonNull<RegionMeta>, slot: usize) {
        let pool_ptr = {
            // SAFETY: the caller guarantees the entry is live; the slot's pool
            // reference (taken in `alloc`) keeps the pool and table alive
            // until the decrement below, after this borrow has ended.
            let region = unsafe { this.as_ref() };
            let pool_ptr = region.pool.get();
            // SAFETY: as above, the pool is alive.
            let pool = unsafe { &*pool_ptr };
            if region.class_shift.get() == RUN_SHIFT {
                // A run goes back whole, as one free range of regions.
                pool.free_run(region.index_in(pool) as u32, region.run_regions.get());
            } else {
                region.free.borrow_mut().push(slot as u32);
                if !region.in_partial.get() {
                    region.in_partial.set(true);
                    let class = (region.class_shift.get() - MIN_CLASS_SHIFT) as usize;
                    pool.classes[class].borrow_mut().push(region.index_in(pool) as u32);
                }
            }
            pool.live_slots.set(pool.live_slots.get() - 1);
            pool_ptr
        };
        // SAFETY: releases the strong count this slot held (see above); the
        // pool may be freed here, and no reference into it is live.
        unsafe { Rc::decrement_strong_count(pool_ptr) };
    }

    /// Bytes of the run this region heads.
    pub(crate) fn run_bytes(&self) -> usize {
        (self.run_regions.get() as usize) << REGION_SHIFT
    }

    fn index_in(&self, pool: &PoolInner) -> usize {
        (self.base.as_ptr() as usize - pool.base.as_ptr() as usize) >> REGION_SHIFT
    }
}

impl PoolInner {
    /// Returns regions `start..start + len` to the free ranges, merged with
    /// the ranges either side.
    fn free_run(&self, start: u32, len: u32) {
        let mut runs = self.free_runs.borrow_mut();
        let (mut start, mut len) = (start, len);
        if let Some((&before, &before_len)) = runs.range(..start).next_back() {
            if before + before_len == start {
                runs.remove(&before);
                start = before;
                len += before_len;
            }
        }
        if let Some(after_len) = runs.remove(&(start + len)) {
            len += after_len;
        }
        runs.insert(start, len);
    }

    /// Takes `want` free mapped regions in a row (first fit), if any.
    fn take_free_run(&self, want: u32) -> Option<u32> {
        let mut runs = self.free_runs.borrow_mut();
        let (&start, &len) = runs.iter().find(|(_, &len)| len >= want)?;
        runs.remove(&start);
        if len > want {
            runs.insert(start + want, len - want);
        }
        Some(start)
    }
}

pub(crate) struct PoolInner {
    base: NonNull<u8>,
    reserved: usize,
    /// One entry per region of the reservation, allocated once and never
    /// moved: buffers point into it.
    regions: Box<[RegionMeta]>,
    mapped_regions: Cell<usize>,
    /// Per size class, the regions that still have free slots.
    classes: [RefCell<Vec<u32>>; NUM_CLASSES],
    /// Mapped regions not in use, left by freed runs: first region ->
    /// number of regions. Adjacent ranges are merged.
    free_runs: RefCell<BTreeMap<u32, u32>>,
    /// The memfd behind the regions (none under Miri).
    backing: Option<OwnedFd>,
    page_kind: PageKind,
    lock: bool,
    locked_regions: Cell<usize>,
    live_slots: Cell<usize>,
    // Dropped last: unmaps the memory.
    reservation: Reservation,
}

/// A pool of pinned, reference-counted buffers.
///
/// Cloning a `Pool` clones a handle; the memory is unmapped when the last
/// handle and the last buffer are gone. A pool and its buffers belong to one
/// thread (one core), as queues and buffers do in kernel-bypass stacks.
#[derive(Clone)]
pub struct Pool {
    inner: Rc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("base", &self.inner.base)
            .field("page_kind", &self.inner.page_kind)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Pool {
    /// A pool with the default configuration: 16 GiB of address space,
    /// hugepages when available, locked when permitted.
    ///
    /// # Errors
    ///
    /// As [`Pool::with_config`].
    pub fn new() -> Result<Self, PoolError> {
        Self::with_config(PoolConfig::default())
    }

    /// A pool with an explicit configuration.
    ///
    /// # Errors
    ///
    /// [`PoolError::BadConfig`] for a `max_bytes` below 2 MiB; the other
    /// variants when the kernel refuses the reservation, the memfd or the
    /// first region (with [`HugePages::Require`]: no free hugepages).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{mem::HugePages, Pool, PoolConfig};
    /// // 64 MiB of address space, 4 KiB pages, not locked: a small test pool.
    /// let pool = Pool::with_config(PoolConfig { max_bytes: 64 << 20, hugepages: HugePages::Never, lock: false })?;
    /// assert_eq!(pool.stats().regions, 1);
    /// # Ok::<(), cornflakes::mem::PoolError>(())
    /// ```
    pub fn with_config(config: PoolConfig) -> Result<Self, PoolError> {
        #[cfg(miri)]
        let config = PoolConfig { max_bytes: config.max_bytes.min(sys::MIRI_MAX_BYTES), ..config };
        let regions = config.max_bytes / REGION_SIZE;
        if regions == 0 || regions > u32::MAX as usize {
            return Err(PoolError::BadConfig("max_bytes must be between 2 MiB and 8 PiB"));
        }
        let try_kinds: &[PageKind] = match config.hugepages {
            HugePages::Auto => &[PageKind::Huge2M, PageKind::Small4K],
            HugePages::Never => &[PageKind::Small4K],
            HugePages::Require => &[PageKind::Huge2M],
        };
        let mut last_err = None;
        for &kind in try_kinds {
            match Self::create(&config, regions, kind) {
                Ok(pool) => return Ok(pool),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.expect("at least one page kind is tried"))
    }

    fn create(config: &PoolConfig, regions: usize, kind: PageKind) -> Result<Self, PoolError> {
        let reserved = regions * REGION_SIZE;
        let reservation = Reservation::new(reserved).map_err(PoolError::Reserve)?;
        let backing = sys::create_backing(kind).map_err(PoolError::Backing)?;
        let base = reservation.base();
        let table = (0..regions)
            .map(|i| RegionMeta {
                // SAFETY: i * REGION_SIZE < reserved, inside the reservation.
                base: unsafe { NonNull::new_unchecked(base.as_ptr().add(i * REGION_SIZE)) },
                counts: Cell::new(NonNull::dangling()),
                class_shift: Cell::new(0),
                slots: Cell::new(0),
                in_partial: Cell::new(false),
                pool: Cell::new(std::ptr::null()),
                free: RefCell::new(Vec::new()),
                counts_storage: RefCell::new(Vec::new()),
                run_head: Cell::new(0),
                run_regions: Cell::new(0),
            })
            .collect();
        let pool = Pool {
            inner: Rc::new(PoolInner {
                base,
                reserved,
                regions: table,
                mapped_regions: Cell::new(0),
                classes: std::array::from_fn(|_| RefCell::new(Vec::new())),
                free_runs: RefCell::new(BTreeMap::new()),
                backing,
                page_kind: kind,
                lock: config.lock,
                locked_regions: Cell::new(0),
                live_slots: Cell::new(0),
                reservation,
            }),
        };
        let inner_ptr = Rc::as_ptr(&pool.inner);
        for r in pool.inner.regions.iter() {
            r.pool.set(inner_ptr);
        }
        // Map one region now, so that a machine without hugepages falls back
        // at creation rather than at the first allocation.
        pool.add_class_region(MIN_CLASS_SHIFT).map_err(|e| match e {
            AllocError::Map(io) => PoolError::Map(io),
            _ => PoolError::BadConfig("cannot map the first region"),
        })?;
        Ok(pool)
    }

    /// Allocates a writable buffer of `len` bytes: up to
    /// [`MAX_ALLOC`](super::MAX_ALLOC) in a slot of the next power of two
    /// (at least 64 bytes), O(1), mapping a new region when the size class
    /// has no free slot; above, in a *run* of whole regions in a row (see
    /// the module docs), first fit over the free ranges runs left (a
    /// `BTreeMap` walk) or newly mapped. The buffer is unique until [`RcBufMut::freeze`]:
    /// [`Pool::recover`] does not find it.
    ///
    /// # Errors
    ///
    /// [`AllocError::TooLarge`] when `len` exceeds the whole reservation;
    /// [`AllocError::Exhausted`] when the reservation has no room;
    /// [`AllocError::Map`] when the kernel refuses memory for a new region.
    /// All of them are back-pressure: free buffers, or fail the request.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{mem::HugePages, Pool, PoolConfig};
    /// let pool = Pool::with_config(PoolConfig { max_bytes: 16 << 20, hugepages: HugePages::Never, lock: false })?;
    /// let mut buf = pool.alloc(100)?;
    /// assert_eq!(buf.len(), 100);
    /// assert_eq!(buf.capacity(), 128);
    /// buf[..5].copy_from_slice(b"hello");
    /// let frozen = buf.freeze();
    /// assert!(pool.recover(&frozen[..5]).is_some());
    /// // Larger than a region: one contiguous buffer over three regions.
    /// let big = pool.alloc(5 << 20)?.freeze();
    /// assert_eq!(big.capacity(), 6 << 20);
    /// assert!(pool.recover(&big[(3 << 20)..(5 << 20)]).is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc(&self, len: usize) -> Result<RcBufMut, AllocError> {
        let Some(shift) = class_of(len) else {
            return self.alloc_run(len);
        };
        let inner = &*self.inner;
        let class = (shift - MIN_CLASS_SHIFT) as usize;
        let region_idx = {
            let partial = inner.classes[class].borrow();
            partial.last().copied()
        };
        let region_idx = match region_idx {
            Some(i) => i as usize,
            None => self.add_class_region(shift)?,
        };
        let region = &inner.regions[region_idx];
        let slot = {
            let mut free = region.free.borrow_mut();
            let slot = free.pop().expect("a region on the partial list has a free slot");
            if free.is_empty() {
                region.in_partial.set(false);
                inner.classes[class].borrow_mut().pop();
            }
            slot as usize
        };
        region.count(slot).set(UNIQUE);
        // SAFETY: slot < slots, so the slot lies inside the mapped region.
        let ptr = unsafe { NonNull::new_unchecked(region.base.as_ptr().add(slot << shift)) };
        self.hand_out(ptr, len, region)
    }

    /// Counts a slot whose count was just set to [`UNIQUE`] as live and
    /// wraps it in its writable handle.
    #[inline(always)]
    fn hand_out(&self, ptr: NonNull<u8>, len: usize, region: &RegionMeta) -> Result<RcBufMut, AllocError> {
        let inner = &*self.inner;
        inner.live_slots.set(inner.live_slots.get() + 1);
        // The slot holds the pool alive until it is released.
        // SAFETY: `self.inner` is a live Rc, so incrementing is sound.
        unsafe { Rc::increment_strong_count(Rc::as_ptr(&self.inner)) };
        // SAFETY: `ptr` starts a slot of `region` (for a run, its head) that
        // is mapped, whose count marks it as owned by the new buffer, and
        // `len` does not exceed the slot.
        Ok(unsafe { RcBufMut::from_raw_parts(ptr, len, NonNull::from(region)) })
    }

    /// A buffer above [`MAX_ALLOC`](super::MAX_ALLOC): a run of whole
    /// regions in a row, from freed runs (first fit) or newly mapped.
    #[cold]
    #[inline(never)]
    fn alloc_run(&self, len: usize) -> Result<RcBufMut, AllocError> {
        let inner = &*self.inner;
        let want = len.div_ceil(REGION_SIZE);
        if want > inner.regions.len() {
            return Err(AllocError::TooLarge { len, max: inner.reserved });
        }
        let want = want as u32;
        let start = match inner.take_free_run(want) {
            Some(start) => start,
            None => self.map_run(want)?,
        } as usize;
        for (k, region) in inner.regions[start..start + want as usize].iter().enumerate() {
            region.class_shift.set(RUN_SHIFT);
            region.run_head.set(k as u32);
            region.run_regions.set(0);
        }
        let head = &inner.regions[start];
        head.run_regions.set(want);
        head.slots.set(1);
        {
            let mut storage = head.counts_storage.borrow_mut();
            *storage = vec![Cell::new(UNIQUE)];
            head.counts.set(NonNull::new(storage.as_ptr().cast_mut()).expect("a vector's buffer is not null"));
        }
        self.hand_out(head.base, len, head)
    }

    /// Maps `want` regions in a row at the end of what is mapped, joined
    /// with a free range that ends there. Regions mapped before a failure
    /// are kept as a free range.
    fn map_run(&self, want: u32) -> Result<u32, AllocError> {
        let inner = &*self.inner;
        let end = inner.mapped_regions.get() as u32;
        let tail = {
            let runs = inner.free_runs.borrow();
            runs.range(..end).next_back().filter(|(&s, &l)| s + l == end).map(|(&s, _)| s)
        };
        let start = match tail {
            Some(s) => {
                inner.free_runs.borrow_mut().remove(&s);
                s
            }
            None => end,
        };
        if (start + want) as usize > inner.regions.len() {
            if start < end {
                inner.free_run(start, end - start);
            }
            return Err(AllocError::Exhausted { reserved: inner.reserved });
        }
        for _ in end..start + want {
            if let Err(e) = self.map_next() {
                let mapped = inner.mapped_regions.get() as u32;
                if mapped > start {
                    inner.free_run(start, mapped - start);
                }
                return Err(e);
            }
        }
        Ok(start)
    }

    /// A region for size class `shift`: the next one of the reservation,
    /// or, once it is all mapped, one left free by a run.
    fn add_class_region(&self, shift: u32) -> Result<usize, AllocError> {
        let inner = &*self.inner;
        let idx = match self.map_next() {
            Ok(idx) => idx,
            Err(AllocError::Exhausted { reserved }) => {
                inner.take_free_run(1).ok_or(AllocError::Exhausted { reserved })? as usize
            }
            Err(e) => return Err(e),
        };
        let region = &inner.regions[idx];
        let slots = REGION_SIZE >> shift;
        {
            let mut storage = region.counts_storage.borrow_mut();
            *storage = (0..slots).map(|_| Cell::new(FREE)).collect();
            // The pointer comes from the vector itself, so that it covers every
            // count, and is taken after the vector is in place.
            region.counts.set(NonNull::new(storage.as_ptr().cast_mut()).expect("a vector's buffer is not null"));
        }
        region.slots.set(slots as u32);
        region.run_regions.set(0);
        // Free stack in reverse so that slot 0 is handed out first.
        *region.free.borrow_mut() = (0..slots as u32).rev().collect();
        region.in_partial.set(true);
        inner.classes[(shift - MIN_CLASS_SHIFT) as usize].borrow_mut().push(idx as u32);
        region.class_shift.set(shift);
        Ok(idx)
    }

    /// Allocates a buffer, copies `data` into it and freezes it.
    ///
    /// # Errors
    ///
    /// As [`Pool::alloc`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use cornflakes::{mem::HugePages, Pool, PoolConfig};
    /// # let pool = Pool::with_config(PoolConfig { max_bytes: 4 << 20, hugepages: HugePages::Never, lock: false })?;
    /// let value = pool.alloc_copy(&[7u8; 4096])?;
    /// assert_eq!(value.ref_count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_copy(&self, data: &[u8]) -> Result<RcBuf, AllocError> {
        let mut buf = self.alloc(data.len())?;
        buf.copy_from_slice(data);
        Ok(buf.freeze())
    }

    /// Maps the first unmapped region of the reservation and returns its
    /// index. It starts as a free region of a run (class [`RUN_SHIFT`], not
    /// the head of anything), which `recover` never finds.
    fn map_next(&self) -> Result<usize, AllocError> {
        let inner = &*self.inner;
        let idx = inner.mapped_regions.get();
        if idx >= inner.regions.len() {
            return Err(AllocError::Exhausted { reserved: inner.reserved });
        }
        if inner.reservation.is_abandoned() {
            return Err(AllocError::Map(std::io::Error::other(
                "an earlier region failed to map and its address space may be another mapping's now; \
                 this pool grows no more (create a new pool)",
            )));
        }
        let region = &inner.regions[idx];
        let file_offset = idx * REGION_SIZE;
        sys::grow_backing(inner.backing.as_ref(), file_offset + REGION_SIZE).map_err(AllocError::Map)?;
        // Region `idx` is the first unmapped region of our own reservation,
        // and no region was abandoned (checked above).
        // SAFETY: so nothing references its addresses and the reservation is whole there.
        unsafe { sys::map_region(region.base, inner.backing.as_ref(), file_offset) }.map_err(|failure| {
            if !failure.reservation_intact {
                inner.reservation.abandon(region.base);
            }
            AllocError::Map(failure.error)
        })?;
        if inner.lock && sys::lock_region(region.base) {
            inner.locked_regions.set(inner.locked_regions.get() + 1);
        }
        region.class_shift.set(RUN_SHIFT);
        region.run_head.set(0);
        region.run_regions.set(0);
        inner.mapped_regions.set(idx + 1);
        Ok(idx)
    }

    /// Returns the buffer that contains `data`, with its reference count
    /// incremented, or `None` when `data` is empty, lies outside this pool,
    /// crosses a slot boundary, or points into a free slot or one still
    /// held by a writable [`RcBufMut`].
    ///
    /// O(1): a range check against the pool, one region-table entry (one
    /// cache line) and the slot's count.
    ///
    /// # Panics
    ///
    /// When the slot already has `u32::MAX - 1` references.
    ///
    /// # Examples
    ///
    /// ```
    /// # use cornflakes::{mem::HugePages, Pool, PoolConfig};
    /// # let pool = Pool::with_config(PoolConfig { max_bytes: 4 << 20, hugepages: HugePages::Never, lock: false })?;
    /// let value = pool.alloc_copy(b"in the pool")?;
    /// let view: &[u8] = &value[3..7]; // say, a field of a decoded message
    /// let owned = pool.recover(view).expect("pool memory");
    /// assert_eq!(&owned[..], b"the ");
    /// assert!(pool.recover(b"on the heap").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn recover(&self, data: &[u8]) -> Option<RcBuf> {
        let offset = (data.as_ptr() as usize).wrapping_sub(self.inner.base.as_ptr() as usize);
        self.recover_at(offset, data.len())
    }

    /// [`Pool::recover`] of the `len` bytes at `offset` from the pool's
    /// [`base`](Self::base) (an offset in its [`backing_fd`](Self::backing_fd)),
    /// without a slice of them: for an offset a peer named, which may point
    /// at a free slot or at one a [`RcBufMut`] is writing, where even
    /// forming a `&[u8]` would alias a unique borrow. `None` in the same
    /// cases as `recover`, and when the range leaves the mapped pool.
    ///
    /// # Panics
    ///
    /// As [`recover`](Self::recover).
    ///
    /// # Examples
    ///
    /// ```
    /// # use cornflakes::{mem::HugePages, Pool, PoolConfig};
    /// # let pool = Pool::with_config(PoolConfig { max_bytes: 4 << 20, hugepages: HugePages::Never, lock: false })?;
    /// let value = pool.alloc_copy(b"sent by reference")?;
    /// let offset = value.as_ptr() as usize - pool.base() as usize;
    /// assert_eq!(&pool.recover_at(offset + 8, 9).expect("live")[..], b"reference");
    /// let writable = pool.alloc(64)?;
    /// let at = writable.as_ptr() as usize - pool.base() as usize;
    /// assert!(pool.recover_at(at, 8).is_none()); // still being written
    /// assert!(pool.recover_at(usize::MAX - 4, 8).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn recover_at(&self, offset: usize, len: usize) -> Option<RcBuf> {
        let inner = &*self.inner;
        let mapped = inner.mapped_regions.get() << REGION_SHIFT;
        if len == 0 || offset >= mapped || len > mapped - offset {
            return None;
        }
        debug_assert!(offset >> REGION_SHIFT < inner.regions.len());
        // SAFETY: offset < mapped_regions * REGION_SIZE, and mapped_regions
        // never exceeds the table's length (checked when mapping), so the
        // index is in bounds. (The bounds check cost ~10% of a zero-copy set.)
        let region = unsafe { inner.regions.get_unchecked(offset >> REGION_SHIFT) };
        let shift = region.class_shift.get();
        if shift == RUN_SHIFT {
            return self.recover_in_run(offset, len);
        }
        let in_region = offset & (REGION_SIZE - 1);
        let slot = in_region >> shift;
        // The last byte must lie in the same slot as the first.
        if (in_region + len - 1) >> shift != slot {
            return None;
        }
        let count = region.count(slot);
        let n = count.get();
        // Free slots and writable (unique) ones are not found.
        if n == FREE || n == UNIQUE {
            return None;
        }
        if n >= MAX_SHARED {
            rcbuf::count_overflow();
        }
        count.set(n + 1);
        // SAFETY: offset + len is inside the mapped pool (checked above): in bounds, non-null.
        let ptr = unsafe { NonNull::new_unchecked(inner.base.as_ptr().add(offset)) };
        // SAFETY: the range is in slot `slot`, a frozen buffer whose count we just took for it.
        Some(unsafe { RcBuf::from_raw_parts(ptr, len, NonNull::from(region)) })
    }

    /// [`Pool::recover_at`] of the `len` bytes at `offset` from the base, in a region
    /// that belongs to a run (or is free): found through the run's head,
    /// checked against the head's extent and count.
    #[cold]
    #[inline(never)]
    fn recover_in_run(&self, offset: usize, len: usize) -> Option<RcBuf> {
        let inner = &*self.inner;
        // The caller checked the range against the mapped pool; the pointer
        // below relies on it.
        let mapped = inner.mapped_regions.get() << REGION_SHIFT;
        if offset >= mapped || len > mapped - offset {
            return None;
        }
        let idx = offset >> REGION_SHIFT;
        let head_idx = idx.checked_sub(inner.regions[idx].run_head.get() as usize)?;
        let head = &inner.regions[head_idx];
        // A stale `run_head` (a freed, split run) may lead anywhere: only a
        // head whose run covers all of the range answers.
        let regions = head.run_regions.get() as usize;
        if head.class_shift.get() != RUN_SHIFT || regions == 0 {
            return None;
        }
        let in_run = offset - (head_idx << REGION_SHIFT);
        if in_run + len > regions << REGION_SHIFT {
            return None;
        }
        let count = head.count(0);
        let n = count.get();
        if n == FREE || n == UNIQUE {
            return None;
        }
        if n >= MAX_SHARED {
            rcbuf::count_overflow();
        }
        count.set(n + 1);
        // SAFETY: offset + len is inside the mapped pool (checked at the top): in bounds, non-null.
        let ptr = unsafe { NonNull::new_unchecked(inner.base.as_ptr().add(offset)) };
        // SAFETY: the range is inside the live run headed by `head`, whose count we just took.
        Some(unsafe { RcBuf::from_raw_parts(ptr, len, NonNull::from(head)) })
    }

    /// Whether `data` starts inside this pool's mapped memory (no count is
    /// touched).
    pub fn contains(&self, data: &[u8]) -> bool {
        let offset = (data.as_ptr() as usize).wrapping_sub(self.inner.base.as_ptr() as usize);
        offset < self.inner.mapped_regions.get() << REGION_SHIFT
    }

    /// The mapped regions, in address order, for registration with a
    /// datapath. A datapath that registers memory should compare
    /// [`Pool::region_count`] before each use to catch growth.
    pub fn regions(&self) -> impl Iterator<Item = RegionInfo> + '_ {
        let n = self.inner.mapped_regions.get();
        self.inner.regions[..n].iter().enumerate().map(|(index, r)| RegionInfo {
            index,
            addr: r.base.as_ptr(),
            len: REGION_SIZE,
            file_offset: index * REGION_SIZE,
            slot_size: if r.class_shift.get() == RUN_SHIFT { REGION_SIZE } else { 1 << r.class_shift.get() },
        })
    }

    /// Number of mapped regions; grows, never shrinks.
    pub fn region_count(&self) -> usize {
        self.inner.mapped_regions.get()
    }

    /// The memfd holding every region, at offset `index * REGION_SIZE`,
    /// to share the pool with another process.
    ///
    /// # Panics
    ///
    /// Only under Miri, where pools live on the heap and have no file.
    pub fn backing_fd(&self) -> BorrowedFd<'_> {
        self.inner.backing.as_ref().expect("pools have a memfd except under Miri").as_fd()
    }

    /// First byte of the reservation.
    pub fn base(&self) -> *const u8 {
        self.inner.base.as_ptr()
    }

    /// Page kind backing the regions.
    pub fn page_kind(&self) -> PageKind {
        self.inner.page_kind
    }

    /// Current counters.
    pub fn stats(&self) -> PoolStats {
        let regions = self.inner.mapped_regions.get();
        PoolStats {
            regions,
            mapped_bytes: regions * REGION_SIZE,
            live_slots: self.inner.live_slots.get(),
            locked_regions: self.inner.locked_regions.get(),
        }
    }
}

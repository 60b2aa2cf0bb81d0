//! The two handles on a pool slot: [`RcBufMut`], the unique writable one an
//! allocation returns, and [`RcBuf`], the shared read-only one that
//! [`RcBufMut::freeze`] turns it into.
//!
//! Uniqueness is a type, as in `bytes` (`BytesMut` -> `freeze()` -> `Bytes`),
//! not a count checked when a borrow starts: while an `RcBufMut` exists its
//! slot's count holds the [`UNIQUE`] marker, so [`Pool::recover`] cannot find
//! it and no second handle can be made. Only frozen buffers are shared,
//! recovered and sent.
//!
//! ```text
//!   Pool::alloc ──► RcBufMut ──freeze()──► RcBuf ──clone / slice / recover──► RcBuf …
//!                   count = UNIQUE          count = 1                         count = n
//!                   &mut [u8]               &[u8] only
//!                      ▲                       │
//!                      └──── try_into_mut() ◄──┘  (only while count == 1)
//! ```
//!
//! [`Pool::recover`]: super::Pool::recover

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Bound, Deref, DerefMut, RangeBounds};
use std::ptr::NonNull;

use super::pool::RegionMeta;
use super::RUN_SHIFT;

/// Slot count of a free slot.
pub(crate) const FREE: u32 = 0;
/// Slot count while one [`RcBufMut`] owns the slot: never recoverable.
pub(crate) const UNIQUE: u32 = u32::MAX;
/// Largest count of a frozen slot; one more reference panics.
pub(crate) const MAX_SHARED: u32 = u32::MAX - 1;

/// A reference-counted, read-only view of bytes inside one slot of a
/// [`Pool`].
///
/// Cloning increments the slot's count, dropping decrements it, and the slot
/// returns to its pool when the last view goes. Views of different parts of
/// one slot share a count.
///
/// ```text
///   RcBuf { ptr, len, region } ──────────────┐
///      │                                       ▼
///      │               region table: [ base | counts* | class_shift | ... ]  (one cache line)
///      ▼                                            │
///   region memory: [ slot 0 | slot 1 | ▓▓▓slot 2▓▓▓ | slot 3 | ... ]
///                                       ▲           ▼
///                          counts:  [ 0 | 1 |  3  | 0 | ... ]   (u32, 0 = free)
/// ```
///
/// An `RcBuf` never gives mutable access: other views, recovered from any
/// pointer into the slot, may be reading it. To write, allocate an
/// [`RcBufMut`], or take back sole ownership with [`RcBuf::try_into_mut`].
/// A count that would reach `u32::MAX` panics rather than wrap.
///
/// # Examples
///
/// ```
/// # let pool = cornflakes::Pool::with_config(cornflakes::PoolConfig {
/// #     max_bytes: 4 << 20, hugepages: cornflakes::mem::HugePages::Never, lock: false }).unwrap();
/// let buf = pool.alloc_copy(b"hello, world")?;
/// let hello = buf.slice(..5);
/// assert_eq!(&hello[..], b"hello");
/// assert_eq!(buf.ref_count(), 2); // views of one slot share its count
/// # Ok::<(), cornflakes::AllocError>(())
/// ```
///
/// # Uniqueness, proved by the compiler
///
/// There is no way to write through an `RcBuf` (it has no `DerefMut`):
///
/// ```compile_fail,E0596
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc_copy(b"shared").unwrap();
/// let m: &mut [u8] = &mut buf[..];
/// ```
///
/// The program of issue 9, which held a live `&mut [u8]` and `&[u8]` to the
/// same bytes through `recover`, no longer compiles: a writable buffer must
/// be frozen (moved) before `recover` can find it, which ends the mutable
/// borrow.
///
/// ```compile_fail,E0599
/// use cornflakes::{mem::HugePages, Pool, PoolConfig};
/// let pool = Pool::with_config(PoolConfig { max_bytes: 4 << 20, hugepages: HugePages::Never, lock: false }).unwrap();
/// let mut buf = pool.alloc(64).unwrap();
/// let m: &mut [u8] = buf.as_mut_slice().unwrap();
/// let other = pool.recover(&*m).unwrap();
/// let shared: &[u8] = other.as_slice();
/// m[0] = shared[0].wrapping_add(1); // write through &mut while `shared` is live
/// ```
///
/// ```compile_fail,E0505
/// # let pool = cornflakes::Pool::new().unwrap();
/// let mut buf = pool.alloc(64).unwrap();
/// let m: &mut [u8] = buf.as_mut_slice();
/// let frozen = buf.freeze(); // error: `buf` is borrowed mutably
/// let other = pool.recover(&frozen).unwrap();
/// m[0] = other[0].wrapping_add(1);
/// ```
///
/// (At run time, `recover` of a pointer into a writable buffer answers
/// `None`: see `Pool::recover`.) Taking back a writable handle while a view
/// of the bytes is borrowed is refused too:
///
/// ```compile_fail,E0505
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc_copy(b"abc").unwrap();
/// let view: &[u8] = &buf;
/// let mut m = buf.try_into_mut().unwrap(); // error: `buf` is borrowed
/// m[0] = view[0];
/// ```
///
/// and neither handle leaves its thread (counts are not atomic):
///
/// ```compile_fail,E0277
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc_copy(b"abc").unwrap();
/// std::thread::spawn(move || drop(buf));
/// ```
///
/// ```compile_fail,E0277
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc(8).unwrap();
/// std::thread::spawn(move || drop(buf));
/// ```
///
/// [`Pool`]: super::Pool
pub struct RcBuf {
    ptr: NonNull<u8>,
    len: usize,
    pub(super) region: NonNull<RegionMeta>,
    // Counts are plain cells: a buffer stays on the thread of its pool.
    _not_send: PhantomData<*mut ()>,
}

/// The unique, writable handle on a freshly allocated pool slot.
///
/// [`Pool::alloc`] returns one. While it exists, nothing else can reach its
/// bytes: it cannot be cloned, and [`Pool::recover`] answers `None` for
/// pointers into its slot. [`RcBufMut::freeze`] turns it into a shareable
/// [`RcBuf`]; dropping it returns the slot to the pool.
///
/// # Examples
///
/// ```
/// # let pool = cornflakes::Pool::with_config(cornflakes::PoolConfig {
/// #     max_bytes: 4 << 20, hugepages: cornflakes::mem::HugePages::Never, lock: false }).unwrap();
/// let mut buf = pool.alloc(5)?;
/// buf.copy_from_slice(b"hello");
/// assert!(pool.recover(&buf[..]).is_none(), "a writable buffer cannot be found");
/// let frozen = buf.freeze();
/// assert_eq!(pool.recover(&frozen[1..3]).unwrap().as_slice(), b"el");
/// # Ok::<(), cornflakes::AllocError>(())
/// ```
///
/// A writable buffer cannot be cloned or sliced into a second handle, so
/// nothing can observe a write (see [`RcBuf`] for the other cases):
///
/// ```compile_fail,E0599
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc(64).unwrap();
/// let other = buf.clone();
/// ```
///
/// ```compile_fail,E0599
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc(64).unwrap();
/// let part = buf.slice(0..8);
/// ```
///
/// ```compile_fail,E0599
/// # let pool = cornflakes::Pool::new().unwrap();
/// let buf = pool.alloc(64).unwrap();
/// let part = buf.slice_ref(&buf[..8]);
/// ```
///
/// [`Pool::alloc`]: super::Pool::alloc
/// [`Pool::recover`]: super::Pool::recover
pub struct RcBufMut {
    ptr: NonNull<u8>,
    len: usize,
    region: NonNull<RegionMeta>,
    _not_send: PhantomData<*mut ()>,
}

#[cold]
#[inline(never)]
pub(crate) fn count_overflow() -> ! {
    panic!("RcBuf reference count overflow: more than u32::MAX - 1 references to one slot")
}

/// Adds one reference to a frozen slot's count.
#[inline(always)]
pub(crate) fn increment(count: &Cell<u32>) {
    let n = count.get();
    debug_assert!(n != FREE && n != UNIQUE, "only frozen slots are shared");
    if n >= MAX_SHARED {
        count_overflow();
    }
    count.set(n + 1);
}

/// Bytes from `ptr` to the end of its slot (for a run, of its last region).
#[inline(always)]
fn capacity_of(ptr: NonNull<u8>, region: &RegionMeta) -> usize {
    let shift = region.class_shift.get();
    let from_base = ptr.as_ptr() as usize - region.base.as_ptr() as usize;
    if shift == RUN_SHIFT {
        // `region` is the run's head: the slot is the whole run.
        return region.run_bytes() - from_base;
    }
    (1usize << shift) - (from_base & ((1usize << shift) - 1))
}

impl RcBuf {
    /// # Safety
    ///
    /// 1. `region` points to a live region-table entry of a live pool.
    /// 2. `ptr..ptr+len` lies inside one frozen slot of that region (for a
    ///    run, `region` is its head and the slot is the whole run).
    /// 3. The slot's count already includes the reference this buffer owns.
    #[inline(always)]
    pub(crate) unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize, region: NonNull<RegionMeta>) -> Self {
        Self { ptr, len, region, _not_send: PhantomData }
    }

    #[inline(always)]
    fn region(&self) -> &RegionMeta {
        // SAFETY: invariant 1 of `from_raw_parts`; this buffer's count keeps
        // the pool (and so its region table) alive.
        unsafe { self.region.as_ref() }
    }

    #[inline(always)]
    fn count(&self) -> &Cell<u32> {
        let region = self.region();
        region.count(region.slot_of(self.ptr.as_ptr()))
    }

    /// Number of bytes in this view.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of this view.
    #[inline(always)]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: invariant 2: the bytes are mapped, our count keeps the slot
        // from being reused, and a frozen slot is never written.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Bytes available from the start of this view to the end of its slot.
    pub fn capacity(&self) -> usize {
        capacity_of(self.ptr, self.region())
    }

    /// Current reference count of the slot (all views of it).
    pub fn ref_count(&self) -> u32 {
        self.count().get()
    }

    /// Takes back sole, writable ownership of the slot when this is its only
    /// reference; otherwise returns the buffer unchanged.
    ///
    /// # Errors
    ///
    /// Returns `self` when other views of the slot exist (clones, slices,
    /// recovered buffers, or a transmission still holding it).
    ///
    /// # Examples
    ///
    /// ```
    /// # let pool = cornflakes::Pool::with_config(cornflakes::PoolConfig {
    /// #     max_bytes: 4 << 20, hugepages: cornflakes::mem::HugePages::Never, lock: false }).unwrap();
    /// let buf = pool.alloc_copy(b"abc")?;
    /// let in_flight = buf.clone();
    /// let buf = buf.try_into_mut().unwrap_err(); // still shared
    /// drop(in_flight);
    /// let mut buf = buf.try_into_mut().unwrap();
    /// buf[0] = b'x';
    /// assert_eq!(&buf.freeze()[..], b"xbc");
    /// # Ok::<(), cornflakes::AllocError>(())
    /// ```
    pub fn try_into_mut(self) -> Result<RcBufMut, RcBuf> {
        let count = self.count();
        if count.get() != 1 {
            return Err(self);
        }
        count.set(UNIQUE);
        let (ptr, len, region) = (self.ptr, self.len, self.region);
        std::mem::forget(self);
        // SAFETY: we held the only reference and the count now marks the
        // slot as uniquely owned by the new handle.
        Ok(unsafe { RcBufMut::from_raw_parts(ptr, len, region) })
    }

    /// A new view of `range` (relative to this view), sharing the count.
    ///
    /// # Panics
    ///
    /// When the range is out of bounds; see [`RcBuf::try_slice`].
    ///
    /// # Examples
    ///
    /// ```
    /// # let pool = cornflakes::Pool::with_config(cornflakes::PoolConfig {
    /// #     max_bytes: 4 << 20, hugepages: cornflakes::mem::HugePages::Never, lock: false }).unwrap();
    /// let packet = pool.alloc_copy(b"HDRpayload")?;
    /// let payload = packet.slice(3..);
    /// drop(packet); // the payload keeps the slot alive
    /// assert_eq!(&payload[..], b"payload");
    /// assert!(payload.try_slice(..8).is_none());
    /// # Ok::<(), cornflakes::AllocError>(())
    /// ```
    pub fn slice(&self, range: impl RangeBounds<usize>) -> RcBuf {
        let len = self.len;
        self.try_slice(range).unwrap_or_else(|| panic!("RcBuf::slice out of bounds (len {len})"))
    }

    /// Like [`RcBuf::slice`], returning `None` when out of bounds.
    pub fn try_slice(&self, range: impl RangeBounds<usize>) -> Option<RcBuf> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.checked_add(1)?,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1)?,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        if start > end || end > self.len {
            return None;
        }
        // An empty view keeps the original start: one past the end of the
        // slot would name the next slot's count.
        let ptr = if start == end {
            self.ptr
        } else {
            // SAFETY: start < end <= len keeps the view inside the same slot.
            unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(start)) }
        };
        increment(self.count());
        // SAFETY: same slot and region as `self`; the count now includes the
        // new view's reference.
        Some(unsafe { RcBuf::from_raw_parts(ptr, end - start, self.region) })
    }

    /// The view of `sub`, which must lie within this view, as a new buffer
    /// (no pool lookup); `None` when `sub` is elsewhere.
    ///
    /// # Examples
    ///
    /// ```
    /// # let pool = cornflakes::Pool::with_config(cornflakes::PoolConfig {
    /// #     max_bytes: 4 << 20, hugepages: cornflakes::mem::HugePages::Never, lock: false }).unwrap();
    /// let packet = pool.alloc_copy(b"key=value")?;
    /// let value: &[u8] = &packet[4..]; // e.g. a decoded field
    /// assert_eq!(packet.slice_ref(value).unwrap().len(), 5);
    /// assert!(packet.slice_ref(b"value").is_none(), "not inside the packet");
    /// # Ok::<(), cornflakes::AllocError>(())
    /// ```
    #[inline(always)]
    pub fn slice_ref(&self, sub: &[u8]) -> Option<RcBuf> {
        let start = (sub.as_ptr() as usize).wrapping_sub(self.ptr.as_ptr() as usize);
        if start > self.len || sub.len() > self.len - start {
            return None;
        }
        increment(self.count());
        // An empty view keeps this view's start (see `try_slice`); otherwise
        // the pointer is derived from our own, which covers the whole view.
        let ptr = if sub.is_empty() {
            self.ptr
        } else {
            // SAFETY: start + sub.len() <= len, so the result stays in this view.
            unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(start)) }
        };
        // SAFETY: `sub` lies within this view, so within the same slot; the
        // count now includes the new view's reference.
        Some(unsafe { RcBuf::from_raw_parts(ptr, sub.len(), self.region) })
    }
}

impl Clone for RcBuf {
    #[inline(always)]
    fn clone(&self) -> Self {
        increment(self.count());
        // SAFETY: same view; the count now includes the clone's reference.
        unsafe { RcBuf::from_raw_parts(self.ptr, self.len, self.region) }
    }
}

impl Drop for RcBuf {
    #[inline(always)]
    fn drop(&mut self) {
        let slot = {
            let region = self.region();
            let slot = region.slot_of(self.ptr.as_ptr());
            let count = region.count(slot);
            let n = count.get() - 1;
            count.set(n);
            if n != FREE {
                return;
            }
            slot
        };
        // SAFETY: the region entry is live (our reference kept it so) and
        // the slot's count just reached zero; no reference into the entry
        // is held across the call, which may free the pool.
        unsafe { RegionMeta::release(self.region, slot) };
    }
}

impl RcBufMut {
    /// # Safety
    ///
    /// 1. `region` points to a live region-table entry of a live pool.
    /// 2. `ptr..ptr+len` lies inside one slot of that region (for a run,
    ///    `region` is its head and the slot is the whole run), and `len`
    ///    does not exceed the bytes from `ptr` to the end of the slot.
    /// 3. The slot's count is [`UNIQUE`], owned by this handle.
    #[inline(always)]
    pub(crate) unsafe fn from_raw_parts(ptr: NonNull<u8>, len: usize, region: NonNull<RegionMeta>) -> Self {
        Self { ptr, len, region, _not_send: PhantomData }
    }

    #[inline(always)]
    fn region(&self) -> &RegionMeta {
        // SAFETY: invariant 1 of `from_raw_parts`; our slot keeps the pool alive.
        unsafe { self.region.as_ref() }
    }

    /// Number of bytes in the buffer.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of the buffer.
    #[inline(always)]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: invariant 2: mapped bytes of a slot only we can reach.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes of the buffer, writable.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: invariant 3: the slot is ours alone (not recoverable, not
        // cloneable), and `&mut self` excludes every other borrow of it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// A raw pointer to the first byte, for handing the buffer to the kernel
    /// or a device that writes into it (for example a posted receive).
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes available from the start of the buffer to the end of its slot.
    pub fn capacity(&self) -> usize {
        capacity_of(self.ptr, self.region())
    }

    /// Changes the length, up to [`capacity`]; the bytes gained keep
    /// whatever the slot held (they are initialized: pool memory starts
    /// zeroed and only ever holds bytes). Returns false, changing nothing,
    /// when `len` exceeds the capacity.
    ///
    /// [`capacity`]: RcBufMut::capacity
    #[must_use = "the length is unchanged when this returns false"]
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > self.capacity() {
            return false;
        }
        self.len = len;
        true
    }

    /// Shortens the buffer to `len` bytes; no effect when it is not longer.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Turns the buffer into a shared, read-only [`RcBuf`] with a count of
    /// one, which can then be cloned, sliced, recovered and sent.
    #[inline(always)]
    pub fn freeze(self) -> RcBuf {
        let region = self.region();
        region.count(region.slot_of(self.ptr.as_ptr())).set(1);
        let (ptr, len, region) = (self.ptr, self.len, self.region);
        std::mem::forget(self);
        // SAFETY: the slot is now frozen with count 1, owned by the new view.
        unsafe { RcBuf::from_raw_parts(ptr, len, region) }
    }
}

impl Drop for RcBufMut {
    fn drop(&mut self) {
        let slot = {
            let region = self.region();
            let slot = region.slot_of(self.ptr.as_ptr());
            region.count(slot).set(FREE);
            slot
        };
        // SAFETY: the entry is live and we owned the slot; its count is now
        // zero. No reference into the entry is held across the call.
        unsafe { RegionMeta::release(self.region, slot) };
    }
}

impl Deref for RcBuf {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for RcBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for RcBuf {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for RcBuf {}

impl std::fmt::Debug for RcBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RcBuf").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

impl Deref for RcBufMut {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for RcBufMut {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsRef<[u8]> for RcBufMut {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsMut<[u8]> for RcBufMut {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl std::fmt::Debug for RcBufMut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RcBufMut").field("ptr", &self.ptr).field("len", &self.len).finish()
    }
}

//! `RcBuf`: a reference-counted view of part of one pool slot.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Bound, Deref, RangeBounds};
use std::ptr::NonNull;

use super::pool::RegionMeta;

/// A reference-counted view of bytes inside one slot of a [`Pool`].
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
/// A count that would pass `u32::MAX` panics rather than wrap.
///
/// [`Pool`]: super::Pool
pub struct RcBuf {
    ptr: NonNull<u8>,
    len: usize,
    pub(super) region: NonNull<RegionMeta>,
    // Counts are plain cells: a buffer stays on the thread of its pool.
    _not_send: PhantomData<*mut ()>,
}

#[cold]
#[inline(never)]
pub(crate) fn count_overflow() -> ! {
    panic!("RcBuf reference count overflow: more than u32::MAX references to one slot")
}

impl RcBuf {
    /// # Safety
    ///
    /// 1. `region` points to a live region-table entry of a live pool.
    /// 2. `ptr..ptr+len` lies inside one allocated slot of that region.
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
        // SAFETY: invariant 2: the bytes are mapped and our count keeps the
        // slot from being reused.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Mutable access to the bytes, only while this is the slot's sole
    /// reference (no other view can observe the write).
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        if self.count().get() != 1 {
            return None;
        }
        // SAFETY: count 1 means no other RcBuf views the slot, and `&mut self`
        // excludes borrows through this one.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }

    /// Bytes available from the start of this view to the end of its slot.
    pub fn capacity(&self) -> usize {
        let region = self.region();
        let shift = region.class_shift.get();
        let in_slot = (self.ptr.as_ptr() as usize - region.base.as_ptr() as usize) & ((1usize << shift) - 1);
        (1usize << shift) - in_slot
    }

    /// Changes the length of a uniquely held view, up to [`capacity`]; the
    /// bytes gained keep whatever the slot held. Returns false (and changes
    /// nothing) when the view is shared or `len` is too large.
    ///
    /// [`capacity`]: RcBuf::capacity
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > self.capacity() || self.count().get() != 1 {
            return false;
        }
        self.len = len;
        true
    }

    /// Current reference count of the slot (all views of it).
    pub fn ref_count(&self) -> u32 {
        self.count().get()
    }

    /// A new view of `range` (relative to this view), sharing the count.
    ///
    /// # Panics
    ///
    /// When the range is out of bounds; see [`RcBuf::try_slice`].
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
        let out = self.clone();
        // An empty view keeps the original start: one past the end of the
        // slot would name the next slot's count.
        let ptr = if start == end {
            out.ptr
        } else {
            // SAFETY: start < end <= len keeps the view inside the same slot.
            unsafe { NonNull::new_unchecked(out.ptr.as_ptr().add(start)) }
        };
        let region = out.region;
        std::mem::forget(out);
        // SAFETY: same slot and region as `self`; the count was taken by clone.
        Some(unsafe { RcBuf::from_raw_parts(ptr, end - start, region) })
    }

    /// The view of `sub`, which must lie within this view, as a new buffer
    /// (no pool lookup); `None` when `sub` is elsewhere.
    #[inline(always)]
    pub fn slice_ref(&self, sub: &[u8]) -> Option<RcBuf> {
        let start = (sub.as_ptr() as usize).wrapping_sub(self.ptr.as_ptr() as usize);
        if start > self.len || sub.len() > self.len - start {
            return None;
        }
        let count = self.count();
        count.set(count.get().checked_add(1).unwrap_or_else(|| count_overflow()));
        // An empty view keeps this view's start (see `try_slice`).
        let ptr = if sub.is_empty() { self.ptr } else { NonNull::from(sub).cast() };
        // SAFETY: `sub` lies within this view, so within the same slot; the
        // count now includes the new view's reference.
        Some(unsafe { RcBuf::from_raw_parts(ptr, sub.len(), self.region) })
    }
}

impl Clone for RcBuf {
    #[inline(always)]
    fn clone(&self) -> Self {
        let count = self.count();
        count.set(count.get().checked_add(1).unwrap_or_else(|| count_overflow()));
        // SAFETY: same view; the count now includes the clone's reference.
        unsafe { RcBuf::from_raw_parts(self.ptr, self.len, self.region) }
    }
}

impl Drop for RcBuf {
    #[inline(always)]
    fn drop(&mut self) {
        let region = self.region();
        let slot = region.slot_of(self.ptr.as_ptr());
        let count = region.count(slot);
        let n = count.get() - 1;
        count.set(n);
        if n == 0 {
            region.release(slot);
        }
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

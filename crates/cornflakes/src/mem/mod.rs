//! Pinned memory: pools of reference-counted buffers that a datapath can
//! hand to the kernel or a NIC, and `recover`, which turns any pointer into
//! pool memory back into its buffer.
//!
//! # Layout
//!
//! A [`Pool`] reserves a large range of address space (`PROT_NONE`, no memory
//! behind it) and maps it in 2 MiB *regions* as it grows, all backed by one
//! memfd (hugetlbfs pages when the machine has them). Each region serves one
//! power-of-two size class, from 64 B to 2 MiB, and is cut into equal slots.
//! A slot is the unit of allocation and of reference counting.
//!
//! ```text
//!  reservation (max_bytes, 2 MiB aligned)
//!  base                                                               base + max_bytes
//!  │ region 0 (64 B)  │ region 1 (4 KiB)  │ region 2 (64 B)  │ unmapped ... PROT_NONE │
//!  ├──┬──┬──┬──┬─ … ──┼─────┬─────┬─ … ───┼──┬──┬─ … ─────────┤                        │
//!  │s0│s1│s2│s3│      │ s0  │ s1  │       │s0│s1│             │                        │
//!  └──┴──┴──┴──┴──────┴─────┴─────┴───────┴──┴──┴─────────────┴────────────────────────┘
//!     ▲ addr
//!     │ region = (addr - base) >> 21          slot = (addr & (2 MiB - 1)) >> class_shift
//!     ▼
//!  region table (heap, one 64-byte-aligned entry per region, never moves)
//!  ┌─────────────────────────────────────────┬──────────────────────────┐
//!  │ base │ counts* │ class_shift │ slots … │  free-slot stack, pool*  │
//!  └─────────────────────────────────────────┴──────────────────────────┘
//!          │   first cache line: all that recover/clone/drop read
//!          ▼
//!  counts: [u32; slots]   0 = free, n = n live RcBufs view the slot
//! ```
//!
//! `recover(&[u8])` is a subtraction and compare against the pool's base,
//! a shift to find the region entry, a shift to find the slot, and the
//! slot's count: one metadata cache line beyond the count itself. It answers
//! `None` for slices outside the pool, crossing a slot boundary, or in a free
//! slot. Allocation and free are O(1): each size class keeps a stack of
//! regions with free slots, each region a stack of free slots.
//!
//! # Buffers larger than a region
//!
//! A buffer above [`MAX_ALLOC`] (a whole message received over TCP, say)
//! is a *run*: `k` regions in a row, one slot spanning all of them, so it
//! is one contiguous `RcBuf` in pool memory like any other.
//!
//! ```text
//!  │ region 3 (64 B) │ region 4: run head │ region 5 │ region 6 │ region 7 (4 KiB) │
//!                    ├──────────── one slot, one count ─────────┤
//!  table: class_shift   RUN_SHIFT            RUN_SHIFT  RUN_SHIFT
//!         run_head      0                    1          2          (distance to the head)
//!         run_regions   3
//! ```
//!
//! Every region of a run has class `RUN_SHIFT` (63), so an offset
//! from the head shifts down to slot 0: an `RcBuf` of a run names its head
//! entry, and clone and drop are the same code as for any slot.
//! `recover` of a pointer in a run region takes a cold branch: one more
//! table entry (the head, `run_head` entries back), a bounds check against
//! the head's `run_regions`, then the count; still O(1). A freed run goes
//! back as a range of mapped regions, merged with free neighbours, and is
//! reused first fit by later runs; once the reservation is all mapped,
//! size classes take single regions from these ranges too. Everything stays
//! within [`PoolConfig::max_bytes`]; a run longer than the reservation is
//! [`AllocError::TooLarge`], one that does not fit now is
//! [`AllocError::Exhausted`].
//!
//! A slot's count is 0 while it is free, [`u32::MAX`] while a writable
//! [`RcBufMut`] owns it (so `recover` cannot find it), and the number of
//! [`RcBuf`] views once it is frozen.
//!
//! Counts are `u32` cells, not atomics: a pool and its buffers stay on one
//! thread, the way a core owns its queues in a kernel-bypass stack. A count
//! that would overflow panics. The pool's memory is unmapped only when the
//! last [`Pool`] handle and the last [`RcBuf`] are gone, so a buffer can
//! never dangle.

mod pool;
mod rcbuf;
mod sys;

pub use pool::{HugePages, Pool, PoolConfig, PoolStats, RegionInfo};
pub use rcbuf::{RcBuf, RcBufMut};
pub use sys::PageKind;

/// log2 of the region size.
pub const REGION_SHIFT: u32 = 21;
/// Size of one region: 2 MiB, one hugepage.
pub const REGION_SIZE: usize = 1 << REGION_SHIFT;
/// log2 of the smallest size class (64 B, one cache line).
pub const MIN_CLASS_SHIFT: u32 = 6;
/// log2 of the largest size class (one slot per region).
pub const MAX_CLASS_SHIFT: u32 = REGION_SHIFT;
/// Largest buffer of a size class (one slot per region). Larger buffers
/// are runs of whole regions; see [`Pool::alloc`].
pub const MAX_ALLOC: usize = 1 << MAX_CLASS_SHIFT;
/// `class_shift` of a region that belongs to a run: every offset from the
/// run's head (below 2^63) shifts down to slot 0, the run's one count.
pub(crate) const RUN_SHIFT: u32 = usize::BITS - 1;
const NUM_CLASSES: usize = (MAX_CLASS_SHIFT - MIN_CLASS_SHIFT + 1) as usize;

/// Asks the cache for `data`'s first and last lines, without waiting.
///
/// A copied field is borrowed when it is set and copied when the message
/// is written; a value far out of cache would stall that copy. Asking for
/// each copied value as it is set lets the misses of a list's values
/// overlap instead of following one another.
#[inline(always)]
pub(crate) fn prefetch(data: &[u8]) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if let Some(last) = data.last() {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that never faults or writes; both addresses lie in `data`.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().cast());
            _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(last).cast());
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = data;
}

/// Copies `src` into `dst`, which must be as long.
///
/// Copied fields are short and of every length, so a copy that branches on
/// the length (as `memcpy` does: 0-15, 16-31, 32-63, ...) mispredicts
/// about once per field, which costs more than the copy. Up to 64 bytes,
/// where the CPU has AVX-512BW, this is one masked load and one masked
/// store, whatever the length; longer copies are `copy_from_slice`.
///
/// # Panics
///
/// When the lengths differ.
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_short between slices of different lengths");
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if src.len() <= 64
        && within_page(src.as_ptr())
        && within_page(dst.as_ptr())
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("bmi2")
    {
        // The mask lets the load read and the store write only the first `src.len()` bytes, which both slices hold.
        // SAFETY: AVX-512BW and BMI2 just checked; `dst` and `src` are distinct slices of `src.len()` <= 64 bytes.
        unsafe { copy_masked(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
        return;
    }
    dst.copy_from_slice(src);
}

/// Whether the 64 bytes from `p` lie in one 4 KiB page: a masked access
/// whose masked-off bytes reach into another page can take a slow assist
/// (the page may be unmapped; the CPU must check that it need not fault).
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn within_page(p: *const u8) -> bool {
    (p as usize & 4095) <= 4096 - 64
}

/// One masked 64-byte load and store of the first `len` (<= 64) bytes.
///
/// # Safety
///
/// The CPU has AVX-512BW and BMI2; `src..src + len` is readable and
/// `dst..dst + len` writable, and they do not overlap.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx512f,avx512bw,bmi2")]
unsafe fn copy_masked(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{_bzhi_u64, _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8};
    // The low `len` bits (all 64 for len = 64).
    let mask = _bzhi_u64(u64::MAX, len as u32);
    // SAFETY: masked-off bytes are neither read nor written, nor can they fault; the caller vouches for the rest.
    unsafe {
        let v = _mm512_maskz_loadu_epi8(mask, src.cast());
        _mm512_mask_storeu_epi8(dst.cast(), mask, v);
    }
}

/// The size class (log2 of the slot size) that holds `len` bytes.
#[inline]
fn class_of(len: usize) -> Option<u32> {
    if len > MAX_ALLOC {
        return None;
    }
    let rounded = len.max(1 << MIN_CLASS_SHIFT).next_power_of_two();
    Some(rounded.trailing_zeros())
}

/// Why a pool could not be created.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The configuration is unusable.
    #[error("bad pool configuration: {0}")]
    BadConfig(&'static str),
    /// Reserving address space failed.
    #[error("cannot reserve address space for the pool: {0}")]
    Reserve(std::io::Error),
    /// Creating the backing memfd failed.
    #[error("cannot create the pool's memfd: {0}")]
    Backing(std::io::Error),
    /// Mapping the first region failed (with `HugePages::Require`: no free
    /// hugepages; reserve some via /proc/sys/vm/nr_hugepages).
    #[error("cannot map pool memory: {0} (with hugepages required, reserve some via /proc/sys/vm/nr_hugepages)")]
    Map(std::io::Error),
}

/// Why an allocation failed. Callers treat it as back-pressure.
#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    /// The request exceeds the pool's whole reservation.
    #[error("buffer of {len} bytes exceeds the pool's reservation ({max} bytes; raise PoolConfig::max_bytes)")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest length this pool could ever serve.
        max: usize,
    },
    /// Every region of the reservation is mapped and full.
    #[error("pool exhausted: all {reserved} reserved bytes are in use (raise PoolConfig::max_bytes)")]
    Exhausted {
        /// Bytes of address space reserved.
        reserved: usize,
    },
    /// The kernel refused memory for a new region.
    #[error("cannot map a new pool region: {0}")]
    Map(std::io::Error),
}

#[cfg(test)]
mod tests;

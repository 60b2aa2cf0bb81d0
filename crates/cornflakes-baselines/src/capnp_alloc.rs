//! A Cap'n Proto segment allocator over pinned memory, so that a large
//! message's segment is already where the datapath can send it without a
//! copy (as one entry of the segment list Cap'n Proto sends).
//!
//! The `unsafe` here is the `capnp::message::Allocator` impls; each states
//! how it meets the trait's contract.

use std::cell::RefCell;
use std::ptr::NonNull;

use cornflakes::{Pool, RcBuf, RcBufMut};
use smallvec::SmallVec;

/// A pool segment: writable while the builder fills it, frozen once
/// the message is handed to the datapath.
enum PoolSeg {
    Writing(RcBufMut),
    Frozen(RcBuf),
}

/// A Cap'n Proto segment allocator: the first segment of each message in a
/// fresh pinned pool buffer (large messages) or in a reused heap scratch
/// buffer (short ones); more segments, or segments the pool cannot give,
/// on the heap.
///
/// A pool segment is a writable [`RcBufMut`] while the builder writes it,
/// so nothing else can reach its bytes; once the message is built,
/// [`SegmentAlloc::freeze_segment`] turns it into an [`RcBuf`] to send.
///
/// Every segment handed out is zeroed, 8-byte
/// aligned, and owned here (pool buffer with count 1, or heap vector)
/// until `deallocate_segment` gives it back; nothing here reads or
/// writes a segment in between. Segment memory is only ever reached
/// through the pointers recorded at allocation (the vectors and buffers
/// that own it are not touched until dropped), so those pointers stay
/// valid while the owners move.
pub struct SegmentAlloc {
    pool: Pool,
    /// The scratch segment: its memory, its start, its words.
    _scratch: Vec<u64>,
    scratch_ptr: NonNull<u8>,
    scratch_words: usize,
    scratch_taken: bool,
    /// Words of the next first segment.
    first_words: u32,
    /// Whether the next first segment comes from the pool.
    pinned: bool,
    /// Pool segments handed out: start and buffer.
    pool_segs: SmallVec<[(NonNull<u8>, PoolSeg); 2]>,
    /// Heap segments handed out (the scratch's overflow): start and
    /// memory.
    heap_segs: SmallVec<[(NonNull<u8>, Vec<u64>); 1]>,
}

impl SegmentAlloc {
    /// An allocator whose pinned segments come from `pool` and whose
    /// scratch segment (for short messages) is `scratch_words` words.
    pub fn new(pool: &Pool, scratch_words: usize) -> Self {
        let mut scratch = vec![0u64; scratch_words.max(1)];
        let scratch_ptr = NonNull::new(scratch.as_mut_ptr()).expect("a vector's pointer is not null").cast();
        SegmentAlloc {
            pool: pool.clone(),
            scratch_words: scratch.len(),
            _scratch: scratch,
            scratch_ptr,
            scratch_taken: false,
            first_words: 0,
            pinned: false,
            pool_segs: SmallVec::new(),
            heap_segs: SmallVec::new(),
        }
    }

    /// Before building a message of `words` words: its first segment
    /// has that size, and comes from the pool when `pinned`.
    #[inline]
    pub fn prepare(&mut self, words: usize, pinned: bool) {
        self.first_words = u32::try_from(words).unwrap_or(u32::MAX);
        self.pinned = pinned;
    }

    /// The pool segment `seg` (as the builder output it), frozen and
    /// sliced to `seg`; `None` for a heap or scratch segment. The
    /// builder must not write the segment afterwards: call this only
    /// once the message is complete.
    #[inline]
    pub fn freeze_segment(&mut self, seg: &[u8]) -> Option<RcBuf> {
        let ptr = NonNull::from(seg).cast::<u8>();
        let i = self.pool_segs.iter().position(|(p, _)| *p == ptr)?;
        let (p, state) = self.pool_segs.swap_remove(i);
        let frozen = match state {
            PoolSeg::Writing(buf) => buf.freeze(),
            PoolSeg::Frozen(buf) => buf,
        };
        let out = frozen.slice_ref(seg);
        self.pool_segs.push((p, PoolSeg::Frozen(frozen)));
        out
    }

    fn heap(&mut self, words: u32) -> (NonNull<u8>, u32) {
        let mut seg = vec![0u64; words as usize];
        let ptr = NonNull::new(seg.as_mut_ptr()).expect("a vector's pointer is not null").cast();
        self.heap_segs.push((ptr, seg));
        (ptr, words)
    }
}

/// The allocator as the builder holds it: a shared handle, so that the
/// sender can freeze the finished pool segments while the builder (and
/// its output) is still alive.
pub struct SharedAlloc<'a>(pub &'a RefCell<SegmentAlloc>);

// SAFETY: every call is forwarded to `SegmentAlloc`, whose impl below
// upholds the contract; the borrow lasts only for the call.
unsafe impl capnp::message::Allocator for SharedAlloc<'_> {
    #[inline]
    fn allocate_segment(&mut self, minimum_size: u32) -> (NonNull<u8>, u32) {
        self.0.borrow_mut().allocate_segment(minimum_size)
    }

    #[inline]
    unsafe fn deallocate_segment(&mut self, ptr: NonNull<u8>, word_size: u32, words_used: u32) {
        // SAFETY: the builder's contract, passed on unchanged.
        unsafe { self.0.borrow_mut().deallocate_segment(ptr, word_size, words_used) }
    }
}

// SAFETY: `allocate_segment` returns zeroed, 8-byte-aligned memory of
// at least `minimum_size` words (pool buffers are 64-byte aligned and
// zeroed here; vectors of u64 are zero-initialised), owned by `self`
// and referenced by nothing else until `deallocate_segment` is called
// for it, which releases it (the datapath may still hold its own count
// on a pool buffer: the bytes stay valid and are never written again)
// or, for the scratch, re-zeroes what was used and keeps it.
unsafe impl capnp::message::Allocator for SegmentAlloc {
    #[inline]
    fn allocate_segment(&mut self, minimum_size: u32) -> (NonNull<u8>, u32) {
        let words = minimum_size.max(std::mem::take(&mut self.first_words)).max(1);
        if std::mem::take(&mut self.pinned) {
            if let Ok(mut buf) = self.pool.alloc(words as usize * 8) {
                buf.fill(0);
                let ptr = NonNull::new(buf.as_mut_ptr()).expect("a pool buffer is not null");
                self.pool_segs.push((ptr, PoolSeg::Writing(buf)));
                return (ptr, words);
            }
        } else if !self.scratch_taken && words as usize <= self.scratch_words {
            self.scratch_taken = true;
            return (self.scratch_ptr, self.scratch_words as u32);
        }
        self.heap(words)
    }

    #[inline]
    unsafe fn deallocate_segment(&mut self, ptr: NonNull<u8>, _word_size: u32, words_used: u32) {
        if ptr == self.scratch_ptr {
            let used = (words_used as usize).min(self.scratch_words);
            // SAFETY: the scratch is `scratch_words` words at
            // `scratch_ptr`, given back by the builder (the trait's
            // contract), so nothing else references it.
            unsafe { std::ptr::write_bytes(self.scratch_ptr.as_ptr(), 0, used * 8) };
            self.scratch_taken = false;
        } else if let Some(i) = self.pool_segs.iter().position(|(p, _)| *p == ptr) {
            self.pool_segs.swap_remove(i);
        } else if let Some(i) = self.heap_segs.iter().position(|(p, _)| *p == ptr) {
            self.heap_segs.swap_remove(i);
        }
    }
}

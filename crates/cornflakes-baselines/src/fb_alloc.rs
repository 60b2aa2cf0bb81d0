//! FlatBuffers allocators over pinned memory, so that a builder writes the
//! finished message where the datapath can send it without a copy.
//!
//! - [`PinnedAlloc`]: a fresh pool buffer per message, growable (the
//!   key-value codecs: the buffer is frozen and sent zero-copy while the
//!   next message is built in another one).
//! - [`SliceAlloc`]: a fixed buffer the caller owns, reused after `reset`
//!   (the micro-benchmark's transmit buffer; never grows).
//!
//! The `unsafe` here is the two `flatbuffers::Allocator` impls; each states
//! how it meets the trait's contract.

use std::ops::{Deref, DerefMut};

use cornflakes::{AllocError, Pool, RcBuf, RcBufMut};

/// Where the finished bytes are.
pub enum Backing {
    /// A frozen pool buffer (send it zero-copy).
    Pool(RcBuf),
    /// Heap memory (the pool could not grow the buffer).
    Heap(Vec<u8>),
}

/// Where the bytes are while the builder writes them.
enum Writing {
    Pool(RcBufMut),
    Heap(Vec<u8>),
}

/// A growable FlatBuffers allocator over a pinned pool buffer: the builder
/// writes straight into pool memory. Growing (only when the caller's size
/// bound was wrong) takes a pool buffer twice as large, or heap memory when
/// the pool has none, so a builder never fails.
///
/// The buffer is a writable [`RcBufMut`] while the builder owns it, so no
/// other handle can see the bytes change; [`PinnedAlloc::into_backing`]
/// freezes it for sending. One allocator per message: take it back with
/// `FlatBufferBuilder::collapse_in` once the message is finished.
pub struct PinnedAlloc {
    writing: Writing,
    pool: Pool,
}

impl PinnedAlloc {
    /// `len` zeroed bytes of `pool`.
    #[inline]
    pub fn new(pool: &Pool, len: usize) -> Result<Self, AllocError> {
        let mut buf = pool.alloc(len)?;
        buf.fill(0);
        Ok(PinnedAlloc { writing: Writing::Pool(buf), pool: pool.clone() })
    }

    /// Gives the buffer up (the builder is done with it), frozen.
    #[inline]
    pub fn into_backing(self) -> Backing {
        match self.writing {
            Writing::Pool(buf) => Backing::Pool(buf.freeze()),
            Writing::Heap(v) => Backing::Heap(v),
        }
    }
}

impl Deref for PinnedAlloc {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        match &self.writing {
            Writing::Pool(buf) => buf,
            Writing::Heap(v) => v,
        }
    }
}

impl DerefMut for PinnedAlloc {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.writing {
            Writing::Pool(buf) => buf,
            Writing::Heap(v) => v,
        }
    }
}

// SAFETY: the trait asks that `len` be the length of the slice `deref`
// returns (both read the backing's length) and that `grow_downwards`
// grow the buffer with the old contents moved to its end: the new
// buffer is twice as long, gets the old bytes at its end and zeroes in
// front (the builder relies on unwritten bytes being zero).
unsafe impl flatbuffers::Allocator for PinnedAlloc {
    type Error = std::convert::Infallible;

    #[inline]
    fn grow_downwards(&mut self) -> Result<(), Self::Error> {
        let old = self.len();
        let new = (old * 2).max(64);
        let mut writing = match self.pool.alloc(new) {
            Ok(mut buf) => {
                buf[..new - old].fill(0);
                Writing::Pool(buf)
            }
            Err(_) => Writing::Heap(vec![0; new]),
        };
        let bytes: &mut [u8] = match &mut writing {
            Writing::Pool(buf) => buf,
            Writing::Heap(v) => v,
        };
        bytes[new - old..].copy_from_slice(self);
        self.writing = writing;
        Ok(())
    }

    #[inline]
    fn len(&self) -> usize {
        self.deref().len()
    }
}

/// A FlatBuffers allocator over a fixed, borrowed buffer (a pinned transmit
/// buffer): the builder writes into it and never reallocates (a message
/// that does not fit panics in the builder with "Flatbuffer allocation
/// failure").
pub struct SliceAlloc<'f>(pub &'f mut [u8]);

/// The transmit buffer is full.
#[derive(Debug)]
pub struct TxFull;

impl std::fmt::Display for TxFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the pinned transmit buffer is full")
    }
}

impl Deref for SliceAlloc<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.0
    }
}

impl DerefMut for SliceAlloc<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.0
    }
}

// SAFETY: the trait's obligations are that `len` is the length of the
// buffer `deref` returns, and that `grow_downwards`, when it succeeds, has
// grown the buffer with the old contents moved to its end. `len` returns
// exactly `self.0.len()`, and `grow_downwards` never succeeds (the buffer
// never changes), so neither can be violated.
unsafe impl flatbuffers::Allocator for SliceAlloc<'_> {
    type Error = TxFull;

    #[inline]
    fn grow_downwards(&mut self) -> Result<(), TxFull> {
        Err(TxFull)
    }

    #[inline]
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use flatbuffers::Allocator as _;

    use super::*;

    /// Growing keeps the written bytes at the end and zeroes the front, as
    /// the builder requires, and stays in the pool while it has room.
    #[test]
    fn pinned_alloc_grows_downwards() {
        let pool = Pool::new().unwrap();
        let mut alloc = PinnedAlloc::new(&pool, 64).unwrap();
        assert!(alloc.iter().all(|&b| b == 0), "a fresh buffer is zeroed");
        alloc[60..].copy_from_slice(&[1, 2, 3, 4]);
        alloc.grow_downwards().unwrap();
        assert_eq!(alloc.len(), 128);
        assert!(alloc[..124].iter().all(|&b| b == 0));
        assert_eq!(&alloc[124..], &[1, 2, 3, 4]);
        let Backing::Pool(buf) = alloc.into_backing() else { panic!("the pool had room") };
        assert_eq!(&buf[124..], &[1, 2, 3, 4]);
        assert!(pool.recover(&buf[..]).is_some(), "frozen: shared, so recoverable");
    }

    /// A fixed buffer never grows.
    #[test]
    fn slice_alloc_never_grows() {
        let mut mem = [0u8; 32];
        let mut alloc = SliceAlloc(&mut mem);
        assert_eq!(alloc.len(), 32);
        assert!(alloc.grow_downwards().is_err());
        assert_eq!(alloc.len(), 32);
    }
}

//! The pool's regions as io_uring fixed buffers.
//!
//! A pool maps its 2 MiB regions one after another from its base, so the
//! mapped part is one contiguous range that only grows. It is registered in
//! *chunks* of [`CHUNK_REGIONS`] regions, chunk `c` as fixed buffer `c` of a
//! sparse table:
//!
//! ```text
//!  pool base
//!  │ region 0 │ region 1 │ … │ region 63 │ region 64 │ region 65 │ unmapped …
//!  ├──────────── fixed buffer 0 ─────────┼─ fixed buffer 1 (grows) ─┤
//! ```
//!
//! A send may name one fixed buffer, so all of its segments must lie in one
//! chunk; large chunks make that likely. When the pool grows, the last
//! chunk is registered again with its new length (in-flight sends keep the
//! old registration alive in the kernel), costing one page pin per page of
//! the chunk, so chunks are capped to keep that bounded.

use std::io;

use cornflakes::mem::REGION_SIZE;
use cornflakes::Pool;
use io_uring::IoUring;

use super::sys;

/// Regions per fixed buffer (128 MiB; the kernel's limit is 1 GiB).
pub(super) const CHUNK_REGIONS: usize = 64;
const CHUNK_BYTES: usize = CHUNK_REGIONS * REGION_SIZE;
/// Entries of the sparse fixed-buffer table: 1024 chunks cover 128 GiB of
/// pool; memory beyond is sent without a fixed buffer.
const TABLE_SLOTS: u32 = 1024;

/// Which part of the pool is registered.
pub(super) struct FixedBuffers {
    enabled: bool,
    base: usize,
    /// `pool.region_count()` at the last sync.
    seen_regions: usize,
    /// Bytes from `base` covered by registered chunks.
    registered_bytes: usize,
    /// Registrations (initial and after growth).
    pub(super) updates: u64,
}

impl FixedBuffers {
    /// Registers the pool's current regions; `enabled: false` (or a kernel
    /// that refuses) yields a table that names no buffer.
    pub(super) fn new(ring: &IoUring, pool: &Pool, enabled: bool) -> Self {
        let mut this = Self { enabled, base: pool.base() as usize, seen_regions: 0, registered_bytes: 0, updates: 0 };
        if enabled && (ring.submitter().register_buffers_sparse(TABLE_SLOTS).is_err() || this.sync(ring, pool).is_err())
        {
            this.enabled = false;
        }
        this
    }

    pub(super) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Registers regions mapped since the last call. Cheap when the pool
    /// has not grown (one compare).
    #[inline]
    pub(super) fn sync_if_grown(&mut self, ring: &IoUring, pool: &Pool) {
        if self.enabled && pool.region_count() != self.seen_regions && self.sync(ring, pool).is_err() {
            // Registration is an optimization: without it sends pin pages
            // per send.
            self.enabled = false;
            self.registered_bytes = 0;
        }
    }

    fn sync(&mut self, ring: &IoUring, pool: &Pool) -> io::Result<()> {
        let n = pool.region_count();
        debug_assert!(pool.regions().enumerate().all(|(i, r)| r.addr as usize == self.base + i * REGION_SIZE));
        let first_chunk = self.seen_regions / CHUNK_REGIONS;
        let last_chunk = (n.max(1) - 1) / CHUNK_REGIONS;
        let submitter = ring.submitter();
        for chunk in first_chunk..=last_chunk {
            if chunk >= TABLE_SLOTS as usize {
                break;
            }
            let start = chunk * CHUNK_REGIONS;
            let end = n.min(start + CHUNK_REGIONS);
            if end <= start {
                continue;
            }
            let addr = (self.base + start * REGION_SIZE) as *const u8;
            // SAFETY: regions start..end are mapped pool memory; the datapath
            // holds a pool handle and drops it after the ring.
            unsafe { sys::register_buffer(&submitter, chunk as u32, addr, (end - start) * REGION_SIZE) }?;
            self.updates += 1;
            self.registered_bytes = end * REGION_SIZE;
        }
        self.seen_regions = n;
        Ok(())
    }

    /// The fixed buffer holding every non-empty iovec, if there is one.
    #[inline]
    pub(super) fn index_of(&self, iovs: &[libc::iovec]) -> Option<u16> {
        if !self.enabled {
            return None;
        }
        let mut chunk = None;
        for iov in iovs.iter().filter(|iov| iov.iov_len > 0) {
            let off = (iov.iov_base as usize).wrapping_sub(self.base);
            let end = off.checked_add(iov.iov_len)?;
            if end > self.registered_bytes {
                return None;
            }
            let c = off / CHUNK_BYTES;
            if (end - 1) / CHUNK_BYTES != c || chunk.is_some_and(|prev| prev != c) {
                return None;
            }
            chunk = Some(c);
        }
        chunk.map(|c| c as u16)
    }
}

//! The provided-buffer ring of multishot receive ([`RecvMode::Multishot`](super::RecvMode)):
//! a ring of `entries` descriptors shared with the kernel, each naming one
//! pool buffer the kernel may receive into, and the buffers themselves.
//!
//! ```text
//!  ring memory (page aligned, registered as buffer group BGID)
//!  ┌ entry 0 ┬ entry 1 ┬ … ┬ entry n-1 ┐   entry = { addr, len, bid }; entry 0's
//!  └─────────┴─────────┴───┴───────────┘   last 2 bytes are the tail we publish
//!  slots[bid]: the RcBufMut the kernel may write while it is provided;
//!              taken back when a completion names bid (the kernel is done)
//! ```
//!
//! The kernel only reads the ring; we write an entry only at a position it
//! has consumed (at most `entries` buffers are provided at once, one per
//! buffer id) and publish it with a release store of the tail. Rust forms
//! no reference to a provided buffer's bytes: it holds the `RcBufMut` only
//! as an owner until a completion hands the buffer back.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use cornflakes::RcBufMut;
use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffer group id of the datapath's one ring.
pub(super) const BGID: u16 = 0;

/// The kernel's `struct io_uring_buf`, whose fields the `io-uring` crate
/// keeps private; written field by field through raw pointers, because the
/// kernel reads entry 0's `tail` at any time (no `&mut` to an entry).
#[repr(C)]
struct RawEntry {
    addr: u64,
    len: u32,
    bid: u16,
    /// In entry 0: the ring's tail.
    tail: u16,
}

const _: () = assert!(std::mem::size_of::<RawEntry>() == std::mem::size_of::<BufRingEntry>());
const _: () = assert!(std::mem::size_of::<RawEntry>() == 16);

/// The ring and the buffers it provides.
pub(super) struct BufRing {
    ring: NonNull<RawEntry>,
    entries: u16,
    /// Tail we have published (wrapping).
    tail: u16,
    /// Buffers by id; `Some` while provided to the kernel.
    slots: Vec<Option<RcBufMut>>,
    /// Buffer ids with no buffer (consumed, not yet refilled).
    pub(super) empty: Vec<u16>,
}

impl BufRing {
    fn layout(entries: u16) -> Layout {
        Layout::from_size_align(entries as usize * std::mem::size_of::<BufRingEntry>(), 4096)
            .expect("a small page-aligned layout")
    }

    /// A ring of `entries` (a power of two up to 32768) registered with
    /// `uring` as buffer group [`BGID`]; no buffer is provided yet (all ids
    /// are in `empty`).
    pub(super) fn register(uring: &IoUring, entries: u16) -> std::io::Result<Self> {
        debug_assert!(entries.is_power_of_two());
        // SAFETY: the layout has a non-zero size (entries >= 1).
        let mem = unsafe { std::alloc::alloc_zeroed(Self::layout(entries)) };
        let ring = NonNull::new(mem.cast::<RawEntry>())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        // SAFETY: the memory is ours, page aligned, `entries` entries long,
        // and is freed only in `Drop`, after the io_uring is closed (the
        // datapath drops the ring first, or leaks both).
        let registered = unsafe { uring.submitter().register_buf_ring_with_flags(mem as u64, entries, BGID, 0) };
        if let Err(e) = registered {
            // SAFETY: allocated above with this layout, never registered.
            unsafe { std::alloc::dealloc(mem, Self::layout(entries)) };
            return Err(e);
        }
        Ok(Self {
            ring,
            entries,
            tail: 0,
            slots: (0..entries).map(|_| None).collect(),
            empty: (0..entries).rev().collect(),
        })
    }

    /// Hands `buf` to the kernel as buffer `bid` (not yet published: see
    /// [`BufRing::publish`]).
    pub(super) fn provide(&mut self, bid: u16, mut buf: RcBufMut) {
        debug_assert!(self.slots[bid as usize].is_none());
        let at = (self.tail & (self.entries - 1)) as usize;
        let len = buf.len().min(u32::MAX as usize) as u32;
        // SAFETY: `at < entries`, inside the ring; the kernel has consumed
        // this position (no more than `entries` buffers are provided at
        // once), so it does not read these fields now. Raw writes: the
        // kernel may read entry 0's tail meanwhile.
        unsafe {
            let entry = self.ring.as_ptr().add(at);
            std::ptr::addr_of_mut!((*entry).addr).write(buf.as_mut_ptr() as u64);
            std::ptr::addr_of_mut!((*entry).len).write(len);
            std::ptr::addr_of_mut!((*entry).bid).write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        self.slots[bid as usize] = Some(buf);
    }

    /// Makes the entries provided so far visible to the kernel.
    pub(super) fn publish(&mut self) {
        // SAFETY: the tail field lies in entry 0 of our ring, a u16 the
        // kernel reads and we alone write, aligned for an atomic u16, and
        // only ever accessed atomically or by the kernel.
        let tail = unsafe { AtomicU16::from_ptr(std::ptr::addr_of_mut!((*self.ring.as_ptr()).tail)) };
        tail.store(self.tail, Ordering::Release);
    }

    /// Takes back buffer `bid`, which a completion says the kernel has
    /// filled and let go of; `None` for an id that was not provided.
    pub(super) fn take(&mut self, bid: u16) -> Option<RcBufMut> {
        let buf = self.slots.get_mut(bid as usize)?.take()?;
        self.empty.push(bid);
        Some(buf)
    }

    /// Buffers the kernel has to receive into.
    pub(super) fn provided(&self) -> usize {
        self.entries as usize - self.empty.len()
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `register` with this layout; the datapath
        // drops this only after closing its io_uring (which unregisters
        // the group), or leaks it.
        unsafe { std::alloc::dealloc(self.ring.as_ptr().cast(), Self::layout(self.entries)) };
    }
}

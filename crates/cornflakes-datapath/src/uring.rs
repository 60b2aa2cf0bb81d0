//! What the io_uring datapaths (`udp`, `tcp`) share: the flag constants the
//! `io-uring` crate keeps private, pushing an entry whose pointers the
//! kernel keeps, the `user_data` encoding of a request's kind and slot,
//! and the waker's poll request.

use std::mem::zeroed;
use std::os::fd::AsRawFd;

use io_uring::{squeue, IoUring};

/// `IORING_SEND_ZC_REPORT_USAGE` (Linux 6.2): the notification's `res`
/// says whether the kernel copied after all. Private in the `io-uring`
/// crate.
pub(crate) const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED`: bit of a notification's `res` set when
/// the data was copied (loopback, veth, devices without scatter-gather).
pub(crate) const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

/// Pushes `entry` on the submission queue; false when it is full.
///
/// # Safety
///
/// Every pointer in `entry` (message header, iovecs, addresses, buffers)
/// must stay valid, and the memory it receives into unused by Rust, until
/// the entry's last completion (including a zero-copy notification) has
/// been reaped.
pub(crate) unsafe fn push(ring: &mut IoUring, entry: &squeue::Entry) -> bool {
    // SAFETY: forwarded to our caller.
    unsafe { ring.submission().push(entry) }.is_ok()
}

/// An all-zero `msghdr`.
pub(crate) fn empty_msghdr() -> libc::msghdr {
    // SAFETY: `msghdr` is pointers and integers; all-zero (null, 0) is a
    // valid value.
    unsafe { zeroed() }
}

const KIND_SHIFT: u32 = 56;

/// The `user_data` of a request of `kind` for slot `index`.
#[inline(always)]
pub(crate) fn user_data(kind: u64, index: usize) -> u64 {
    (kind << KIND_SHIFT) | index as u64
}

/// The kind and slot a `user_data` names.
#[inline(always)]
pub(crate) fn kind_and_index(user_data: u64) -> (u64, usize) {
    (user_data >> KIND_SHIFT, (user_data & ((1 << KIND_SHIFT) - 1)) as usize)
}

/// The [`Waker`](crate::Waker) of an io_uring datapath: its eventfd, watched
/// by a multishot poll request in the ring so that a wake-up ends the
/// kernel wait like any completion.
#[derive(Debug, Default)]
pub(crate) struct RingWaker {
    fd: crate::waker::WakerFd,
    /// A poll request on the eventfd is in the ring.
    armed: bool,
    /// A wake-up was reaped and not yet taken by the wait.
    woken: bool,
}

impl RingWaker {
    /// A waker; the next [`RingWaker::arm`] starts watching it.
    pub(crate) fn waker(&mut self) -> std::io::Result<crate::Waker> {
        self.fd.waker()
    }

    /// Puts the poll request (`user_data`) in the ring when there is a
    /// waker and no request; a full queue leaves it for the next call. A
    /// wake-up given before is seen at once: the poll finds the count set.
    pub(crate) fn arm(&mut self, ring: &mut IoUring, user_data: u64) {
        if self.armed {
            return;
        }
        let Some(fd) = self.fd.fd() else { return };
        let entry = io_uring::opcode::PollAdd::new(io_uring::types::Fd(fd.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(user_data);
        // The kernel holds its own reference to the file: closing the eventfd is fine too.
        // SAFETY: a poll request holds no pointer, so nothing it names can be freed under it.
        self.armed = unsafe { push(ring, &entry) };
    }

    /// A completion of the poll request: a wake-up, or its end (no
    /// `F_MORE`: armed again by the next [`RingWaker::arm`]).
    pub(crate) fn on_completion(&mut self, res: i32, flags: u32) {
        if res >= 0 {
            self.fd.reset();
            self.woken = true;
        }
        if !io_uring::cqueue::more(flags) {
            self.armed = false;
        }
    }

    /// Whether a wake-up was reaped since the last call.
    pub(crate) fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woken)
    }
}

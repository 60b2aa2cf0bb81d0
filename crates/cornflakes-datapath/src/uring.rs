//! What the io_uring datapaths (`udp`, `tcp`) share: the flag constants the
//! `io-uring` crate keeps private, pushing an entry whose pointers the
//! kernel keeps, and the `user_data` encoding of a request's kind and slot.

use std::mem::zeroed;

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

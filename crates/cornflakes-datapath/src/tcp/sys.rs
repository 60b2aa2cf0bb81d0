//! The unsafe edge of the TCP datapath: pushing submission entries whose
//! pointers the kernel keeps, adopting accepted descriptors, socket calls
//! the standard library lacks.

use std::io;
use std::mem::zeroed;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use io_uring::{squeue, IoUring};

/// `IORING_SEND_ZC_REPORT_USAGE` (Linux 6.2): the notification's `res`
/// says whether the kernel copied after all. Private in the `io-uring`
/// crate.
pub(super) const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED`: set in a notification's `res` when the
/// data was copied (loopback, veth).
pub(super) const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

/// Pushes `entry` on the submission queue; false when it is full.
///
/// # Safety
///
/// Every pointer in `entry` (message header, iovecs, buffers) must stay
/// valid, and memory the kernel writes must not be accessed by Rust, until
/// the entry's last completion (including a zero-copy notification) has
/// been reaped.
pub(super) unsafe fn push(ring: &mut IoUring, entry: &squeue::Entry) -> bool {
    // SAFETY: forwarded to our caller.
    unsafe { ring.submission().push(entry) }.is_ok()
}

/// An all-zero `msghdr`.
pub(super) fn empty_msghdr() -> libc::msghdr {
    // SAFETY: `msghdr` is pointers and integers; all-zero (null, 0) is a
    // valid value.
    unsafe { zeroed() }
}

/// Adopts a descriptor an `ACCEPT` completion returned.
///
/// # Safety
///
/// `fd` must be an open socket descriptor owned by no one else (a fresh
/// accept result, used once).
pub(super) unsafe fn stream_from_fd(fd: RawFd) -> TcpStream {
    // SAFETY: forwarded to our caller.
    unsafe { TcpStream::from_raw_fd(fd) }
}

/// Sets a listening socket's backlog (the standard library uses 128,
/// which drops connections when a thousand clients dial at once).
pub(super) fn set_backlog(socket: &impl AsRawFd, backlog: i32) -> io::Result<()> {
    // SAFETY: plain system call on a descriptor we own; calling listen()
    // again on a listening socket only updates its backlog.
    let rc = unsafe { libc::listen(socket.as_raw_fd(), backlog) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Shuts a socket down in both directions; pending receives then complete
/// with end-of-file and pending sends with an error. Errors (a socket that
/// is already down) are ignored.
pub(super) fn shutdown(socket: &impl AsRawFd) {
    // SAFETY: plain system call on a descriptor we own.
    let _ = unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_RDWR) };
}

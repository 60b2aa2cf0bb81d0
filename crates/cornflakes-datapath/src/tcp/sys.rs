//! The unsafe edge of the TCP datapath: pushing submission entries whose
//! pointers the kernel keeps, adopting accepted descriptors, socket calls
//! the standard library lacks.

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

pub(super) use crate::uring::{empty_msghdr, push, NOTIF_USAGE_ZC_COPIED, SEND_ZC_REPORT_USAGE};

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

//! The unsafe edge of the UDP datapath: socket addresses in kernel layout,
//! the submission entries the `io-uring` crate cannot build, fixed-buffer
//! registration, socket options and control messages.
//!
//! Everything else in `udp/` calls these wrappers; each states what its
//! caller must uphold.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use io_uring::{squeue, Submitter};

/// `IORING_RECVSEND_FIXED_BUF` (uapi `io_uring.h`): the send's buffers lie in
/// the registered buffer `buf_index`. Private in the `io-uring` crate.
pub(super) const RECVSEND_FIXED_BUF: u16 = 1 << 2;
pub(super) use crate::uring::{empty_msghdr, push, NOTIF_USAGE_ZC_COPIED, SEND_ZC_REPORT_USAGE};

/// `SO_RXQ_OVFL` (not in the `libc` crate for Linux): ask for a control
/// message carrying the socket's cumulative count of datagrams dropped for
/// lack of receive-queue space. 40 on every architecture but sparc and
/// parisc.
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_RXQ_OVFL: libc::c_int = 40;

/// Byte offset of `buf_index` in a 64-byte `io_uring_sqe` (uapi layout:
/// opcode, flags, ioprio, fd, off, addr, len, op flags, user_data, then
/// the `buf_index`/`buf_group` union).
const SQE_BUF_INDEX_OFFSET: usize = 40;
const _: () = assert!(size_of::<squeue::Entry>() == 64, "io_uring_sqe is 64 bytes");
const _: () = assert!(std::mem::align_of::<squeue::Entry>() >= 2);

/// Sets `buf_index` of an entry built by the crate (its `SendMsgZc` builder
/// has no such field, though Linux 6.15 accepts fixed buffers there).
pub(super) fn set_buf_index(entry: &mut squeue::Entry, index: u16) {
    let p = (entry as *mut squeue::Entry).cast::<u8>();
    // SAFETY: `Entry` is `#[repr(C)]` around the 64-byte `io_uring_sqe`
    // (asserted above); bytes 40..42 are the `u16` `buf_index` union, inside
    // the entry and 2-aligned since the entry is 8-aligned.
    unsafe { p.add(SQE_BUF_INDEX_OFFSET).cast::<u16>().write(index) }
}

/// Reads `buf_index` back (tests).
#[cfg(test)]
pub(super) fn buf_index(entry: &squeue::Entry) -> u16 {
    let p = (entry as *const squeue::Entry).cast::<u8>();
    // SAFETY: as in `set_buf_index`: an in-bounds, aligned u16 of the entry.
    unsafe { p.add(SQE_BUF_INDEX_OFFSET).cast::<u16>().read() }
}

/// A socket address in kernel layout, as `msg_name` or `dest_addr` points
/// at it.
#[derive(Clone, Copy)]
pub(super) struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    /// An empty address (length 0), to be filled by `recvmsg`.
    pub(super) fn empty() -> Self {
        // SAFETY: `sockaddr_storage` is plain integers; all-zero is valid.
        Self { storage: unsafe { zeroed() }, len: 0 }
    }

    pub(super) fn new(addr: &SocketAddr) -> Self {
        let mut raw = Self::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_storage` is larger and at least as aligned
                // as any `sockaddr_*`; this is how the kernel reads it.
                unsafe { std::ptr::write((&mut raw.storage as *mut libc::sockaddr_storage).cast(), sin) };
                raw.len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above, for `sockaddr_in6`.
                unsafe { std::ptr::write((&mut raw.storage as *mut libc::sockaddr_storage).cast(), sin6) };
                raw.len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        raw
    }

    /// The address the kernel wrote (`len` bytes), if it is IPv4 or IPv6.
    pub(super) fn socket_addr(&self, len: libc::socklen_t) -> Option<SocketAddr> {
        let len = len as usize;
        match self.storage.ss_family as libc::c_int {
            libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a `sockaddr_in`,
                // and it is large and aligned enough for one.
                let sin: libc::sockaddr_in =
                    unsafe { std::ptr::read((&self.storage as *const libc::sockaddr_storage).cast()) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
            }
            libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for `sockaddr_in6`.
                let sin6: libc::sockaddr_in6 =
                    unsafe { std::ptr::read((&self.storage as *const libc::sockaddr_storage).cast()) };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    pub(super) fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_storage).cast()
    }

    pub(super) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.storage as *mut libc::sockaddr_storage).cast()
    }

    pub(super) fn len(&self) -> libc::socklen_t {
        self.len
    }

    /// Room for any address, as `msg_namelen` before a receive.
    pub(super) const CAPACITY: libc::socklen_t = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
}

/// An all-zero `iovec`.
pub(super) fn empty_iovec() -> libc::iovec {
    libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }
}

/// Registers `len` bytes at `addr` as fixed buffer `index` of a sparse
/// table.
///
/// # Safety
///
/// `addr..addr+len` must be mapped memory that stays mapped while the ring
/// exists: the datapath registers only pool regions, and holds a pool
/// handle that it drops after the ring.
pub(super) unsafe fn register_buffer(
    submitter: &Submitter<'_>,
    index: u32,
    addr: *const u8,
    len: usize,
) -> io::Result<()> {
    let iov = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: forwarded to our caller; the kernel pins the pages.
    unsafe { submitter.register_buffers_update(index, &[iov], None) }
}

/// Asks the kernel for `SO_RXQ_OVFL` control messages; false when refused.
pub(super) fn enable_rxq_ovfl(socket: &impl AsRawFd) -> bool {
    #[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
    {
        let one: libc::c_int = 1;
        // SAFETY: `one` is a live c_int and its size is passed; the fd is a
        // socket we own.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_RXQ_OVFL,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        rc == 0
    }
    #[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
    {
        let _ = socket;
        false
    }
}

/// Control-message space for one `SO_RXQ_OVFL` message (u32 payload), in
/// `u64` words so that it is aligned for `cmsghdr`.
pub(super) const CONTROL_WORDS: usize = 4;
const _: () = assert!(size_of::<libc::cmsghdr>() + 8 <= CONTROL_WORDS * 8);

/// The `SO_RXQ_OVFL` counter from the control data of a received message,
/// if present. `msg` is the header as the kernel left it (with
/// `msg_controllen` set to the bytes written).
///
/// # Safety
///
/// `msg.msg_control` must point to `msg.msg_controllen` readable bytes,
/// aligned for `cmsghdr`, that no one writes concurrently.
pub(super) unsafe fn rxq_ovfl_of(msg: &libc::msghdr) -> Option<u32> {
    #[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
    {
        // `msg_controllen` is `size_t` on glibc but `socklen_t` on musl.
        #[allow(clippy::unnecessary_cast)]
        let controllen = msg.msg_controllen as usize;
        if msg.msg_control.is_null() || controllen < size_of::<libc::cmsghdr>() {
            return None;
        }
        // SAFETY: the caller guarantees the control buffer is readable for
        // `msg_controllen` bytes, which holds at least one header.
        let cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
        if cmsg.is_null() {
            return None;
        }
        // SAFETY: non-null first header inside the control buffer.
        let hdr = unsafe { &*cmsg };
        // SAFETY: CMSG_LEN is arithmetic only.
        let want_len = unsafe { libc::CMSG_LEN(4) } as usize;
        if hdr.cmsg_level != libc::SOL_SOCKET || hdr.cmsg_type != SO_RXQ_OVFL || (hdr.cmsg_len as usize) < want_len {
            return None;
        }
        // SAFETY: the header's length covers 4 data bytes inside the buffer.
        let data = unsafe { libc::CMSG_DATA(cmsg) };
        // SAFETY: 4 readable bytes (checked above); read unaligned.
        Some(unsafe { data.cast::<u32>().read_unaligned() })
    }
    #[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
    {
        let _ = msg;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::opcode;

    #[test]
    fn buf_index_is_at_byte_40() {
        let e = opcode::SendZc::new(io_uring::types::Fd(3), std::ptr::null(), 0).buf_index(Some(0xBEEF)).build();
        assert_eq!(buf_index(&e), 0xBEEF);
        let mut m = opcode::SendMsgZc::new(io_uring::types::Fd(3), std::ptr::null()).build();
        assert_eq!(buf_index(&m), 0);
        set_buf_index(&mut m, 7);
        assert_eq!(buf_index(&m), 7);
        assert_eq!(m.get_opcode(), u32::from(opcode::SendMsgZc::CODE));
    }

    #[test]
    fn flags_match_the_crates_builders() {
        // SendZc sets IORING_RECVSEND_FIXED_BUF itself when given a buffer
        // index: ours must be the same bit.
        let plain = opcode::SendZc::new(io_uring::types::Fd(3), std::ptr::null(), 0).build();
        let fixed = opcode::SendZc::new(io_uring::types::Fd(3), std::ptr::null(), 0).buf_index(Some(0)).build();
        assert_eq!(ioprio(&fixed) & !ioprio(&plain), RECVSEND_FIXED_BUF);
    }

    fn ioprio(entry: &squeue::Entry) -> u16 {
        let p = (entry as *const squeue::Entry).cast::<u8>();
        // SAFETY: bytes 2..4 of the 64-byte entry are the u16 ioprio.
        unsafe { p.add(2).cast::<u16>().read() }
    }

    #[test]
    fn addresses_round_trip() {
        for a in ["127.0.0.1:4242", "[::1]:9", "[fe80::1%3]:80", "192.0.2.2:65535"] {
            let addr: SocketAddr = a.parse().unwrap();
            let raw = RawAddr::new(&addr);
            assert_eq!(raw.socket_addr(raw.len()), Some(addr));
        }
        let raw = RawAddr::empty();
        assert_eq!(raw.socket_addr(RawAddr::CAPACITY), None);
    }
}

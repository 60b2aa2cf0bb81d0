//! `libcfsocket.so`: drop-in user-space sockets in the manner of
//! SocksDirect. `LD_PRELOAD=libcfsocket.so program` turns the program's TCP
//! connections to listeners of this host that also run under the library
//! into pairs of shared-memory rings; everything else goes to the kernel
//! unchanged.
//!
//! - [`real`]: the C library's definitions (`dlsym(RTLD_NEXT, ...)`).
//! - [`engine`]: the descriptor table, ring sockets, listening sockets,
//!   connection set-up through the monitor.
//! - this file: the interposed C functions. Each one checks one atomic bit
//!   for its descriptor and, for a descriptor that is not ours, calls the C
//!   library's function with the same arguments.
//!
//! Re-entrancy: the library makes its own system calls with `rustix` (raw
//! system calls, never these symbols) or through [`real`]; the table lock
//! is taken only for our own descriptors. No panic crosses the C ABI: every
//! entry point runs in [`guard`], which turns a panic into `EIO`.
//!
//! The design, the call table (accelerated / passed through / not yet) and
//! the known gaps are in `docs/sockets.md`.
// The C ABI's contract is POSIX's: the program passes valid pointers for
// the lengths it gives, as it must to the C library.
#![allow(clippy::missing_safety_doc)]

mod engine;
mod exec;
mod real;

use std::net::SocketAddrV4;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::{
    c_char, c_int, c_ulong, c_void, epoll_event, iovec, msghdr, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t,
};

use engine::{
    is_managed, lookup, ConnSock, Errno, Interest, Res, Sock, EPOLL_INTERESTS, EPOLL_SETS, EPOLL_TAG, EPOLL_TAG_MASK,
};
use real::real;

fn set_errno(e: Errno) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f`, turning `Err(errno)` into `-1` with `errno` set, and a panic
/// into `EIO` (a panic must not unwind into C).
fn guard<T: From<i8>>(f: impl FnOnce() -> Res<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            T::from(-1)
        }
        Err(_) => {
            set_errno(libc::EIO);
            T::from(-1)
        }
    }
}

fn conn(fd: c_int) -> Option<Arc<Sock>> {
    lookup(fd).filter(|s| matches!(**s, Sock::Conn(_)))
}

fn as_conn(s: &Sock) -> &ConnSock {
    match s {
        Sock::Conn(c) => c,
        Sock::Listen(_) => unreachable!("filtered by conn()"),
    }
}

/// # Safety
///
/// `ptr` is valid for `len` bytes (or `len` is 0).
unsafe fn slice<'a>(ptr: *const c_void, len: size_t) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(ptr.cast(), len) }
}

/// # Safety
///
/// `ptr` is valid for writes of `len` bytes (or `len` is 0).
unsafe fn slice_mut<'a>(ptr: *mut c_void, len: size_t) -> &'a mut [u8] {
    if len == 0 || ptr.is_null() {
        return &mut [];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(ptr.cast(), len) }
}

/// # Safety
///
/// `iov` points to `n` valid `iovec`s.
unsafe fn iovecs<'a>(iov: *const iovec, n: c_int) -> Res<Vec<&'a [u8]>> {
    if !(0..=libc::UIO_MAXIOV).contains(&n) {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the caller's contract.
    let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    // SAFETY: each iovec describes memory the program lends us.
    Ok(v.iter().map(|e| unsafe { slice(e.iov_base, e.iov_len) }).collect())
}

/// # Safety
///
/// `iov` points to `n` valid `iovec`s of writable memory.
unsafe fn iovecs_mut<'a>(iov: *const iovec, n: c_int) -> Res<Vec<&'a mut [u8]>> {
    if !(0..=libc::UIO_MAXIOV).contains(&n) {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the caller's contract.
    let v = unsafe { std::slice::from_raw_parts(iov, n as usize) };
    // SAFETY: each iovec describes writable memory the program lends us.
    Ok(v.iter().map(|e| unsafe { slice_mut(e.iov_base, e.iov_len) }).collect())
}

fn count(r: Res<usize>) -> Res<ssize_t> {
    r.map(|n| n as ssize_t)
}

// ---------------------------------------------------------------- set-up

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    guard(|| {
        // SAFETY: listen(2) with the program's arguments.
        let r = unsafe { (real().listen)(fd, backlog) };
        if r == 0 && !is_managed(fd) {
            engine::register_listener(fd);
        }
        if r < 0 {
            return Err(last_errno());
        }
        Ok(r)
    })
}

fn last_errno() -> Errno {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    match lookup(fd) {
        Some(s) if matches!(*s, Sock::Listen(_)) => guard(|| match &*s {
            Sock::Listen(l) => engine::accept(fd, l, addr, len, flags),
            Sock::Conn(_) => Err(libc::EINVAL),
        }),
        Some(_) => {
            set_errno(libc::EINVAL);
            -1
        }
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().accept4)(fd, addr, len, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if is_managed(fd) {
        // SAFETY: same contract as accept.
        return unsafe { accept4(fd, addr, len, 0) };
    }
    // SAFETY: the program's arguments, unchanged.
    unsafe { (real().accept)(fd, addr, len) }
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if is_managed(fd) {
        // Already a ring connection (or a listener).
        set_errno(if conn(fd).is_some() { libc::EISCONN } else { libc::EINVAL });
        return -1;
    }
    if !addr.is_null() && len as usize >= std::mem::size_of::<libc::sockaddr_in>() {
        // SAFETY: the program says `addr` holds `len` bytes; we checked the
        // family before reading it as a sockaddr_in (read unaligned).
        let sin = unsafe {
            if (*addr).sa_family as c_int == libc::AF_INET {
                Some(std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()))
            } else {
                None
            }
        };
        if let Some(sin) = sin {
            let dst = SocketAddrV4::new(u32::from_be(sin.sin_addr.s_addr).into(), u16::from_be(sin.sin_port));
            let r = catch_unwind(|| engine::try_connect(fd, dst)).unwrap_or(None);
            match r {
                Some(Ok(())) => return 0,
                Some(Err(e)) => {
                    set_errno(e);
                    return -1;
                }
                None => {}
            }
        }
    }
    // SAFETY: the program's arguments, unchanged.
    unsafe { (real().connect)(fd, addr, len) }
}

// ---------------------------------------------------------------- data

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match conn(fd) {
        // SAFETY: the program lends `n` writable bytes at `buf`.
        Some(s) => guard(|| count(as_conn(&s).recv(&mut [unsafe { slice_mut(buf, n) }], 0))),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().read)(fd, buf, n) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t {
    match conn(fd) {
        Some(_) if n > buflen => {
            // What the fortified C library does on overflow.
            // SAFETY: no arguments.
            unsafe { libc::abort() }
        }
        // SAFETY: same contract as read.
        Some(_) => unsafe { read(fd, buf, n) },
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().__read_chk)(fd, buf, n, buflen) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match conn(fd) {
        // SAFETY: the program lends `n` bytes at `buf`.
        Some(s) => guard(|| count(as_conn(&s).send(&[unsafe { slice(buf, n) }], 0))),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().write)(fd, buf, n) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match conn(fd) {
        Some(s) => guard(|| {
            // SAFETY: the program lends `n` iovecs.
            let mut bufs = unsafe { iovecs_mut(iov, n) }?;
            count(as_conn(&s).recv(&mut bufs, 0))
        }),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().readv)(fd, iov, n) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    match conn(fd) {
        Some(s) => guard(|| {
            // SAFETY: the program lends `n` iovecs.
            let bufs = unsafe { iovecs(iov, n) }?;
            count(as_conn(&s).send(&bufs, 0))
        }),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().writev)(fd, iov, n) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    match conn(fd) {
        // SAFETY: the program lends `n` writable bytes at `buf`.
        Some(s) => guard(|| count(as_conn(&s).recv(&mut [unsafe { slice_mut(buf, n) }], flags))),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().recv)(fd, buf, n, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t {
    match conn(fd) {
        // SAFETY: no arguments.
        Some(_) if n > buflen => unsafe { libc::abort() },
        // SAFETY: same contract as recv.
        Some(_) => unsafe { recv(fd, buf, n, flags) },
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().__recv_chk)(fd, buf, n, buflen, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    match conn(fd) {
        // SAFETY: the program lends `n` bytes at `buf`.
        Some(s) => guard(|| count(as_conn(&s).send(&[unsafe { slice(buf, n) }], flags))),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().send)(fd, buf, n, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    match conn(fd) {
        Some(s) => guard(|| {
            // SAFETY: the program lends `n` writable bytes at `buf`.
            let r = count(as_conn(&s).recv(&mut [unsafe { slice_mut(buf, n) }], flags))?;
            // A connected TCP socket reports no source address.
            if !addr.is_null() && !len.is_null() {
                // SAFETY: `len` is the program's valid length pointer.
                unsafe { *len = 0 };
            }
            Ok(r)
        }),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().recvfrom)(fd, buf, n, flags, addr, len) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    match conn(fd) {
        // SAFETY: no arguments.
        Some(_) if n > buflen => unsafe { libc::abort() },
        // SAFETY: same contract as recvfrom.
        Some(_) => unsafe { recvfrom(fd, buf, n, flags, addr, len) },
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().__recvfrom_chk)(fd, buf, n, buflen, flags, addr, len) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    match conn(fd) {
        // A connected TCP socket ignores the address, as Linux does.
        // SAFETY: the program lends `n` bytes at `buf`.
        Some(s) => guard(|| count(as_conn(&s).send(&[unsafe { slice(buf, n) }], flags))),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().sendto)(fd, buf, n, flags, addr, len) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    match conn(fd) {
        Some(s) => guard(|| {
            if msg.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the program passes a valid msghdr whose iovecs it lends.
            let m = unsafe { &mut *msg };
            // SAFETY: as above.
            let mut bufs = unsafe { iovecs_mut(m.msg_iov, m.msg_iovlen as c_int) }?;
            let r = count(as_conn(&s).recv(&mut bufs, flags))?;
            m.msg_namelen = 0;
            m.msg_controllen = 0;
            m.msg_flags = 0;
            Ok(r)
        }),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().recvmsg)(fd, msg, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    match conn(fd) {
        Some(s) => guard(|| {
            if msg.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: the program passes a valid msghdr whose iovecs it lends.
            let m = unsafe { &*msg };
            // SAFETY: as above.
            let bufs = unsafe { iovecs(m.msg_iov, m.msg_iovlen as c_int) }?;
            count(as_conn(&s).send(&bufs, flags))
        }),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().sendmsg)(fd, msg, flags) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, msgs: *mut libc::mmsghdr, n: libc::c_uint, flags: c_int) -> c_int {
    if conn(fd).is_none() {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().sendmmsg)(fd, msgs, n, flags) };
    }
    let mut done = 0;
    while done < n.min(1024) {
        // SAFETY: the program lends `n` mmsghdrs.
        let m = unsafe { &mut *msgs.add(done as usize) };
        // SAFETY: same contract as sendmsg; after the first, do not block.
        let r = unsafe { sendmsg(fd, &m.msg_hdr, if done == 0 { flags } else { flags | libc::MSG_DONTWAIT }) };
        if r < 0 {
            if done == 0 {
                return -1;
            }
            break;
        }
        m.msg_len = r as libc::c_uint;
        done += 1;
    }
    done as c_int
}

#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    n: libc::c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    if conn(fd).is_none() {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().recvmmsg)(fd, msgs, n, flags, timeout) };
    }
    let mut done = 0;
    while done < n.min(1024) {
        // SAFETY: the program lends `n` mmsghdrs.
        let m = unsafe { &mut *msgs.add(done as usize) };
        // SAFETY: same contract as recvmsg; after the first, do not block.
        let r = unsafe { recvmsg(fd, &mut m.msg_hdr, if done == 0 { flags } else { flags | libc::MSG_DONTWAIT }) };
        if r < 0 {
            if done == 0 {
                return -1;
            }
            break;
        }
        m.msg_len = r as libc::c_uint;
        done += 1;
        if r == 0 || flags & libc::MSG_WAITFORONE != 0 {
            break;
        }
    }
    done as c_int
}

#[no_mangle]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut libc::loff_t,
    fd_out: c_int,
    off_out: *mut libc::loff_t,
    len: size_t,
    flags: libc::c_uint,
) -> ssize_t {
    if conn(fd_in).is_some() || conn(fd_out).is_some() {
        engine::unsupported("splice on a ring socket");
        set_errno(libc::EOPNOTSUPP);
        return -1;
    }
    // SAFETY: the program's arguments, unchanged.
    unsafe { (real().splice)(fd_in, off_in, fd_out, off_out, len, flags) }
}

// ---------------------------------------------------------------- teardown

/// Forgets `fd` in every epoll set (and removes the kernel registration of
/// its pair end, which our private duplicate would otherwise keep alive).
fn forget_in_epoll(fd: c_int, sock: &Sock) {
    if EPOLL_INTERESTS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut sets = engine::lock(&EPOLL_SETS);
    sets.remove(&fd);
    for (epfd, set) in sets.iter_mut() {
        if set.remove(&fd).is_some() {
            EPOLL_INTERESTS.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: epoll_ctl(2) DEL with our own arguments.
            unsafe { (real().epoll_ctl)(*epfd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
            if let Sock::Listen(l) = sock {
                with_channel(l, |ch| {
                    // SAFETY: as above, for the accept channel (still open:
                    // we hold its lock).
                    unsafe { (real().epoll_ctl)(*epfd, libc::EPOLL_CTL_DEL, ch, std::ptr::null_mut()) }
                });
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some(s) = engine::remove(fd) {
        forget_in_epoll(fd, &s);
        // The last reference (no dup left) sends FIN and hangs up the pair.
        drop(s);
    } else if EPOLL_INTERESTS.load(Ordering::Relaxed) > 0 {
        // An epoll set of ours going away.
        let mut sets = engine::lock(&EPOLL_SETS);
        if let Some(set) = sets.remove(&fd) {
            EPOLL_INTERESTS.fetch_sub(set.len(), Ordering::Relaxed);
        }
    }
    // SAFETY: the program's argument, unchanged.
    unsafe { (real().close)(fd) }
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    match conn(fd) {
        Some(s) => guard(|| as_conn(&s).shutdown(how).map(|()| 0)),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().shutdown)(fd, how) },
    }
}

// ---------------------------------------------------------------- names, options

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    match conn(fd) {
        Some(s) => {
            // SAFETY: the program's buffer and length, as getsockname(2).
            unsafe { engine::write_sockaddr(as_conn(&s).local, addr, len) };
            0
        }
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().getsockname)(fd, addr, len) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    match conn(fd) {
        Some(s) => {
            // SAFETY: the program's buffer and length, as getpeername(2).
            unsafe { engine::write_sockaddr(as_conn(&s).peer, addr, len) };
            0
        }
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().getpeername)(fd, addr, len) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int {
    let target = conn(fd).map(|s| std::os::fd::AsRawFd::as_raw_fd(&as_conn(&s).shadow)).unwrap_or(fd);
    // SAFETY: the program's arguments; for a ring socket the kernel socket
    // that stands in for it answers (see docs/sockets.md).
    unsafe { (real().setsockopt)(target, level, name, val, len) }
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    match conn(fd) {
        Some(s) if level == libc::SOL_SOCKET && name == libc::SO_ERROR && !val.is_null() && !len.is_null() => {
            // A ring connection never has a pending error (a non-blocking
            // connect completed before EINPROGRESS was returned).
            // SAFETY: the program's buffer of `*len` bytes.
            unsafe {
                if (*len as usize) < std::mem::size_of::<c_int>() {
                    set_errno(libc::EINVAL);
                    return -1;
                }
                std::ptr::write_unaligned(val.cast::<c_int>(), 0);
                *len = std::mem::size_of::<c_int>() as socklen_t;
            }
            drop(s);
            0
        }
        Some(s) => {
            let shadow = std::os::fd::AsRawFd::as_raw_fd(&as_conn(&s).shadow);
            // SAFETY: the program's arguments on the stand-in kernel socket.
            unsafe { (real().getsockopt)(shadow, level, name, val, len) }
        }
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().getsockopt)(fd, level, name, val, len) },
    }
}

// ---------------------------------------------------------------- fcntl, ioctl, dup

fn nonblock_flag(s: &Sock) -> &std::sync::atomic::AtomicBool {
    match s {
        Sock::Conn(c) => &c.nonblock,
        Sock::Listen(l) => &l.nonblock,
    }
}

fn adopt_dup(old: &Arc<Sock>, new: c_int) -> c_int {
    if new >= 0 {
        if let Some(prev) = engine::remove(new) {
            forget_in_epoll(new, &prev);
        }
        engine::insert(new, old.clone());
    }
    new
}

unsafe fn fcntl_impl(
    fd: c_int,
    cmd: c_int,
    arg: c_ulong,
    f: unsafe extern "C" fn(c_int, c_int, ...) -> c_int,
) -> c_int {
    let Some(s) = lookup(fd) else {
        // SAFETY: the program's arguments, unchanged (the third read as the
        // register it was passed in; see docs/sockets.md).
        return unsafe { f(fd, cmd, arg) };
    };
    match cmd {
        libc::F_GETFL => {
            // SAFETY: F_GETFL takes no argument.
            let r = unsafe { f(fd, cmd) };
            if r < 0 {
                return r;
            }
            let nb = nonblock_flag(&s).load(Ordering::Relaxed);
            if nb {
                r | libc::O_NONBLOCK
            } else {
                r & !libc::O_NONBLOCK
            }
        }
        libc::F_SETFL => {
            nonblock_flag(&s).store(arg as c_int & libc::O_NONBLOCK != 0, Ordering::Relaxed);
            if let Sock::Conn(c) = &*s {
                c.set_async(arg as c_int & libc::O_ASYNC != 0);
            }
            // The descriptor itself stays non-blocking (we block in poll).
            // SAFETY: F_SETFL with an int argument.
            unsafe { f(fd, cmd, (arg as c_int | libc::O_NONBLOCK) as c_ulong) }
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            // SAFETY: the program's arguments.
            let r = unsafe { f(fd, cmd, arg) };
            adopt_dup(&s, r)
        }
        // SAFETY: the program's arguments (FD_CLOEXEC and the rest work on
        // the descriptor itself).
        _ => unsafe { f(fd, cmd, arg) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fcntl_impl(fd, cmd, arg, real().fcntl) }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { fcntl_impl(fd, cmd, arg, real().fcntl64) }
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
    if let Some(s) = lookup(fd) {
        if req == libc::FIONBIO as c_ulong && arg != 0 {
            // SAFETY: FIONBIO's argument points to an int.
            let on = unsafe { std::ptr::read_unaligned(arg as *const c_int) } != 0;
            nonblock_flag(&s).store(on, Ordering::Relaxed);
            return 0;
        }
        if let (Sock::Conn(c), true) = (&*s, req == libc::FIOASYNC as c_ulong && arg != 0) {
            // SAFETY: the program's arguments: the pair end takes O_ASYNC.
            let r = unsafe { (real().ioctl)(fd, req, arg) };
            if r == 0 {
                // SAFETY: FIOASYNC's argument points to an int.
                c.set_async(unsafe { std::ptr::read_unaligned(arg as *const c_int) } != 0);
            }
            return r;
        }
        if let (Sock::Conn(c), true) = (&*s, req == libc::FIONREAD as c_ulong && arg != 0) {
            let n = c.readable_bytes().min(c_int::MAX as usize) as c_int;
            // SAFETY: FIONREAD's argument points to an int.
            unsafe { std::ptr::write_unaligned(arg as *mut c_int, n) };
            return 0;
        }
    }
    // SAFETY: the program's arguments, unchanged.
    unsafe { (real().ioctl)(fd, req, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: the program's argument.
    let r = unsafe { (real().dup)(fd) };
    match lookup(fd) {
        Some(s) => adopt_dup(&s, r),
        None => r,
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let s = lookup(old);
    if old != new {
        if let Some(prev) = engine::remove(new) {
            forget_in_epoll(new, &prev);
        }
    }
    // SAFETY: the program's arguments.
    let r = unsafe { (real().dup2)(old, new) };
    match s {
        Some(s) if old != new => adopt_dup(&s, r),
        _ => r,
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let s = lookup(old);
    if old != new {
        if let Some(prev) = engine::remove(new) {
            forget_in_epoll(new, &prev);
        }
    }
    // SAFETY: the program's arguments.
    let r = unsafe { (real().dup3)(old, new, flags) };
    match s {
        Some(s) => adopt_dup(&s, r),
        None => r,
    }
}

// ---------------------------------------------------------------- poll

fn poll_bits(r: engine::Ready, events: i16) -> i16 {
    let mut out = 0i16;
    if r.readable {
        out |= events & (libc::POLLIN | libc::POLLRDNORM);
    }
    if r.writable {
        out |= events & (libc::POLLOUT | libc::POLLWRNORM);
    }
    if r.rdhup {
        out |= events & libc::POLLRDHUP;
    }
    if r.hup {
        out |= libc::POLLHUP;
    }
    out
}

fn remaining(deadline: Option<Instant>) -> c_int {
    match deadline {
        None => -1,
        Some(d) => d.saturating_duration_since(Instant::now()).as_millis().min(c_int::MAX as u128) as c_int,
    }
}

fn deadline_of(timeout_ms: c_int) -> Option<Instant> {
    (timeout_ms >= 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64))
}

unsafe fn poll_impl(fds: *mut pollfd, n: nfds_t) -> Option<&'static mut [pollfd]> {
    if fds.is_null() || n == 0 || n > 1 << 20 {
        return None;
    }
    // SAFETY: the program passes `n` pollfds.
    let v = unsafe { std::slice::from_raw_parts_mut(fds, n as usize) };
    v.iter().any(|p| is_managed(p.fd)).then_some(v)
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the program's array.
    let Some(set) = (unsafe { poll_impl(fds, n) }) else {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().poll)(fds, n, timeout) };
    };
    guard(|| poll_mixed(set, timeout, std::ptr::null()))
}

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int {
    if (fdslen / std::mem::size_of::<pollfd>()) < n as usize {
        // SAFETY: no arguments; what the fortified C library does.
        unsafe { libc::abort() };
    }
    // SAFETY: same contract as poll.
    unsafe { poll(fds, n, timeout) }
}

/// `poll` over a set with ring sockets: their readiness comes from the
/// rings; the kernel waits on everything (ring sockets through their pair
/// end, listeners also through their accept channel).
fn poll_mixed(set: &mut [pollfd], timeout: c_int, sigmask: *const libc::sigset_t) -> Res<c_int> {
    let socks: Vec<Option<Arc<Sock>>> = set.iter().map(|p| lookup(p.fd)).collect();
    let deadline = deadline_of(timeout);
    let mut spun = false;
    loop {
        // Ring readiness first (without arming: a flag armed while we do
        // not sleep costs the writer a wake-up per message).
        let mut ring_ready = 0;
        for (p, s) in set.iter_mut().zip(&socks) {
            if let Some(Sock::Conn(c)) = s.as_deref() {
                let ready = c.ready();
                p.revents = poll_bits(ready, p.events);
                if p.revents != 0 {
                    ring_ready += 1;
                }
            }
        }
        let mut k: Vec<pollfd> = Vec::with_capacity(set.len() + 4);
        let mut channel_of: Vec<(usize, usize)> = Vec::new();
        for (i, (p, s)) in set.iter().zip(&socks).enumerate() {
            match s.as_deref() {
                Some(Sock::Conn(_)) => k.push(pollfd { fd: p.fd, events: libc::POLLIN, revents: 0 }),
                Some(Sock::Listen(l)) => {
                    k.push(*p);
                    // (Closed under us by another thread's accept: at worst
                    // one spurious wake-up.)
                    if let Some(ch) = with_channel(l, |ch| ch) {
                        channel_of.push((i, k.len()));
                        k.push(pollfd { fd: ch, events: libc::POLLIN, revents: 0 });
                    }
                }
                None => k.push(*p),
            }
        }
        let mut t = if ring_ready > 0 { 0 } else { remaining(deadline) };
        if t != 0 {
            let conns = socks.iter().filter_map(|s| match s.as_deref() {
                Some(Sock::Conn(c)) => Some((c, None)),
                _ => None,
            });
            // Spin once, then every ring armed before the kernel sleeps.
            let arrived = if spun { engine::arm_rings(conns) } else { engine::spin_for_rings(conns) };
            spun = true;
            if arrived {
                t = 0;
            }
        }
        let ts = (t >= 0).then(|| libc::timespec { tv_sec: (t / 1000) as _, tv_nsec: ((t % 1000) * 1_000_000) as _ });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: our own array of `k.len()` pollfds, our timespec, the
        // program's signal mask (or null).
        let r = unsafe { (real().ppoll)(k.as_mut_ptr(), k.len() as nfds_t, ts_ptr, sigmask) };
        if r < 0 {
            if ring_ready > 0 {
                return Ok(ring_ready);
            }
            return Err(last_errno());
        }
        let mut total = 0;
        let mut ki = 0;
        for (i, (p, s)) in set.iter_mut().zip(&socks).enumerate() {
            let kp = k[ki];
            ki += 1;
            match s.as_deref() {
                Some(Sock::Conn(c)) => {
                    if kp.revents != 0 {
                        let hup = kp.revents & (libc::POLLHUP | libc::POLLERR) != 0;
                        p.revents = poll_bits(c.after_kernel_wake(hup), p.events);
                    }
                }
                Some(Sock::Listen(_)) => {
                    p.revents = kp.revents;
                    if let Some(&(_, ci)) = channel_of.iter().find(|(j, _)| *j == i) {
                        if k[ci].revents != 0 {
                            p.revents |= p.events & libc::POLLIN;
                        }
                        ki += 1;
                    }
                }
                None => p.revents = kp.revents,
            }
            if p.revents != 0 {
                total += 1;
            }
        }
        if total > 0
            || r == 0 && t >= 0 && remaining(deadline) == 0
            || t == 0 && deadline.is_some_and(|d| Instant::now() >= d)
        {
            return Ok(total);
        }
        if timeout == 0 {
            return Ok(0);
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    tmo: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the program's array.
    let Some(set) = (unsafe { poll_impl(fds, n) }) else {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().ppoll)(fds, n, tmo, sigmask) };
    };
    // SAFETY: the program's timespec, or null.
    let timeout = unsafe { timespec_ms(tmo) };
    guard(|| poll_mixed(set, timeout, sigmask))
}

/// Milliseconds of a timeout, rounded up; -1 for none.
///
/// # Safety
///
/// `t` is null or points to a timespec.
unsafe fn timespec_ms(t: *const libc::timespec) -> c_int {
    if t.is_null() {
        return -1;
    }
    // SAFETY: the caller's contract.
    let t = unsafe { std::ptr::read_unaligned(t) };
    let ms =
        (t.tv_sec.max(0) as u64).saturating_mul(1000).saturating_add((t.tv_nsec.max(0) as u64).div_ceil(1_000_000));
    ms.min(c_int::MAX as u64) as c_int
}

/// `select`/`pselect` on a set with ring sockets: rewritten as `poll`.
///
/// # Safety
///
/// The sets are null or valid `fd_set`s covering `nfds` descriptors.
unsafe fn select_mixed(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> Res<c_int> {
    if !(0..=libc::FD_SETSIZE as c_int).contains(&nfds) {
        return Err(libc::EINVAL);
    }
    // SAFETY: FD_ISSET on the program's sets, for descriptors below nfds.
    let isset = |set: *mut libc::fd_set, fd: c_int| !set.is_null() && unsafe { libc::FD_ISSET(fd, set) };
    let mut polls: Vec<pollfd> = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        if isset(r, fd) {
            events |= libc::POLLIN;
        }
        if isset(w, fd) {
            events |= libc::POLLOUT;
        }
        if isset(e, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            polls.push(pollfd { fd, events, revents: 0 });
        }
    }
    poll_mixed(&mut polls, timeout, sigmask)?;
    for set in [r, w, e] {
        if !set.is_null() {
            // SAFETY: the program's set.
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mut count = 0;
    for p in &polls {
        if p.revents & libc::POLLNVAL != 0 {
            return Err(libc::EBADF);
        }
        let mark = |set: *mut libc::fd_set, hit: bool| {
            if hit && !set.is_null() {
                // SAFETY: the program's set; `p.fd` < nfds <= FD_SETSIZE.
                unsafe { libc::FD_SET(p.fd, set) };
                1
            } else {
                0
            }
        };
        count +=
            mark(r, p.events & libc::POLLIN != 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0);
        count += mark(w, p.events & libc::POLLOUT != 0 && p.revents & (libc::POLLOUT | libc::POLLERR) != 0);
        count += mark(e, p.events & libc::POLLPRI != 0 && p.revents & libc::POLLPRI != 0);
    }
    Ok(count)
}

/// Whether any descriptor below `nfds` in the sets is ours.
///
/// # Safety
///
/// As [`select_mixed`].
unsafe fn select_has_ours(nfds: c_int, sets: [*mut libc::fd_set; 3]) -> bool {
    (0..nfds.clamp(0, libc::FD_SETSIZE as c_int)).any(|fd| {
        // SAFETY: FD_ISSET on the program's sets, for descriptors below nfds.
        is_managed(fd) && sets.iter().any(|s| !s.is_null() && unsafe { libc::FD_ISSET(fd, *s) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    // SAFETY: the program's sets.
    if !unsafe { select_has_ours(nfds, [r, w, e]) } {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().select)(nfds, r, w, e, tv) };
    }
    let timeout = if tv.is_null() {
        -1
    } else {
        // SAFETY: the program's timeval.
        let t = unsafe { std::ptr::read_unaligned(tv) };
        let ms = (t.tv_sec.max(0) as u64).saturating_mul(1000).saturating_add((t.tv_usec.max(0) as u64).div_ceil(1000));
        ms.min(c_int::MAX as u64) as c_int
    };
    // SAFETY: the program's sets.
    guard(|| unsafe { select_mixed(nfds, r, w, e, timeout, std::ptr::null()) })
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    ts: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the program's sets.
    if !unsafe { select_has_ours(nfds, [r, w, e]) } {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().pselect)(nfds, r, w, e, ts, sigmask) };
    }
    // SAFETY: the program's timespec, or null.
    let timeout = unsafe { timespec_ms(ts) };
    // SAFETY: the program's sets.
    guard(|| unsafe { select_mixed(nfds, r, w, e, timeout, sigmask) })
}

// ---------------------------------------------------------------- sendfile

/// `sendfile` to a ring socket: read the file (at `*offset`, or at its
/// position), write the ring.
///
/// # Safety
///
/// `offset` is null or valid.
unsafe fn sendfile_ring(c: &ConnSock, in_fd: c_int, offset: *mut i64, count: size_t) -> Res<usize> {
    let mut buf = vec![0u8; count.min(1 << 16)];
    let mut sent = 0usize;
    while sent < count {
        let want = (count - sent).min(buf.len());
        let r = if offset.is_null() {
            // SAFETY: read(2) into our buffer (the C library's, not ours:
            // `in_fd` is a file).
            unsafe { (real().read)(in_fd, buf.as_mut_ptr().cast(), want) }
        } else {
            // SAFETY: pread(2) into our buffer at the program's offset.
            unsafe { libc::pread64(in_fd, buf.as_mut_ptr().cast(), want, *offset) }
        };
        if r < 0 {
            return if sent > 0 { Ok(sent) } else { Err(last_errno()) };
        }
        if r == 0 {
            break;
        }
        let n = match c.send(&[&buf[..r as usize]], libc::MSG_NOSIGNAL) {
            Ok(n) => n,
            Err(e) => return if sent > 0 { Ok(sent) } else { Err(e) },
        };
        if !offset.is_null() {
            // SAFETY: the program's offset.
            unsafe { *offset += n as i64 };
        } else if n < r as usize {
            // Put back what the ring did not take.
            // SAFETY: lseek(2) on the program's file.
            unsafe { libc::lseek64(in_fd, n as i64 - r as i64, libc::SEEK_CUR) };
        }
        sent += n;
        if n < r as usize {
            break;
        }
    }
    Ok(sent)
}

#[no_mangle]
pub unsafe extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut libc::off_t, count: size_t) -> ssize_t {
    match conn(out_fd) {
        // SAFETY: off_t is i64 on the 64-bit targets we build for.
        Some(s) => guard(|| count_of(unsafe { sendfile_ring(as_conn(&s), in_fd, offset.cast(), count) })),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().sendfile)(out_fd, in_fd, offset, count) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut libc::off64_t, count: size_t) -> ssize_t {
    match conn(out_fd) {
        // SAFETY: the program's offset, or null.
        Some(s) => guard(|| count_of(unsafe { sendfile_ring(as_conn(&s), in_fd, offset, count) })),
        // SAFETY: the program's arguments, unchanged.
        None => unsafe { (real().sendfile64)(out_fd, in_fd, offset, count) },
    }
}

fn count_of(r: Res<usize>) -> Res<ssize_t> {
    count(r)
}

/// Runs `f` on the accept channel's number while holding its lock (so it
/// cannot be closed and reused meanwhile); `None` once the monitor is gone.
fn with_channel<R>(l: &engine::ListenSock, f: impl FnOnce(c_int) -> R) -> Option<R> {
    engine::lock(&l.channel).as_ref().map(|ch| f(std::os::fd::AsRawFd::as_raw_fd(ch)))
}

// ---------------------------------------------------------------- epoll

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut epoll_event) -> c_int {
    let Some(s) = lookup(fd) else {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().epoll_ctl)(epfd, op, fd, ev) };
    };
    guard(|| {
        let user = if ev.is_null() {
            None
        } else {
            // SAFETY: the program's epoll_event (packed on x86_64: read unaligned).
            Some(unsafe { std::ptr::read_unaligned(ev) })
        };
        let tag = EPOLL_TAG | fd as u32 as u64;
        let mut sets = engine::lock(&EPOLL_SETS);
        // The kernel's registration of a ring socket never changes (the
        // program's events are ours), and it is kept after the program's
        // DEL (until close): event loops that add and remove a socket per
        // request (redis-benchmark: two per request) make no system call.
        let entry = sets.get(&epfd).and_then(|set| set.get(&fd)).map(|i| i.present);
        let r = match (&*s, op) {
            (Sock::Conn(_), libc::EPOLL_CTL_ADD) if entry == Some(true) => return Err(libc::EEXIST),
            (Sock::Conn(_), libc::EPOLL_CTL_MOD | libc::EPOLL_CTL_DEL) if entry != Some(true) => {
                return Err(libc::ENOENT)
            }
            (Sock::Conn(_), libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD) if user.is_none() => return Err(libc::EFAULT),
            (Sock::Conn(_), libc::EPOLL_CTL_ADD) if entry == Some(false) => 0,
            (Sock::Conn(_), libc::EPOLL_CTL_MOD | libc::EPOLL_CTL_DEL) => 0,
            (Sock::Conn(_), libc::EPOLL_CTL_ADD) => {
                // The kernel watches the pair end, level-triggered, for
                // wake-ups and hang-ups; the program's events are ours.
                let mut k = epoll_event { events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, u64: tag };
                // SAFETY: our own epoll_event.
                unsafe { (real().epoll_ctl)(epfd, op, fd, &mut k) }
            }
            (Sock::Listen(l), libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD) => {
                // SAFETY: the program's registration of the kernel twin.
                let r = unsafe { (real().epoll_ctl)(epfd, op, fd, ev) };
                if r == 0 {
                    with_channel(l, |ch| {
                        let mut k = epoll_event { events: libc::EPOLLIN as u32, u64: tag };
                        // SAFETY: our own epoll_event, for the accept channel.
                        unsafe { (real().epoll_ctl)(epfd, op, ch, &mut k) }
                    });
                }
                r
            }
            (Sock::Listen(l), _) => {
                with_channel(l, |ch| {
                    // SAFETY: removing our own registration.
                    unsafe { (real().epoll_ctl)(epfd, op, ch, std::ptr::null_mut()) }
                });
                // SAFETY: the program's arguments.
                unsafe { (real().epoll_ctl)(epfd, op, fd, ev) }
            }
            // SAFETY: the program's arguments (an invalid op).
            (Sock::Conn(_), _) => unsafe { (real().epoll_ctl)(epfd, op, fd, ev) },
        };
        if r < 0 {
            return Err(last_errno());
        }
        let set = sets.entry(epfd).or_default();
        match (op, user) {
            (libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD, Some(u)) => {
                let interest =
                    Interest { events: u.events, data: u.u64, armed: true, present: true, edge: Default::default() };
                if set.insert(fd, interest).is_none() {
                    EPOLL_INTERESTS.fetch_add(1, Ordering::Relaxed);
                }
            }
            (libc::EPOLL_CTL_DEL, _) if matches!(*s, Sock::Conn(_)) => {
                if let Some(i) = set.get_mut(&fd) {
                    i.present = false;
                    i.armed = false;
                }
            }
            (libc::EPOLL_CTL_DEL, _) if set.remove(&fd).is_some() => {
                EPOLL_INTERESTS.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        Ok(0)
    })
}

fn epoll_bits(r: engine::Ready, events: u32) -> u32 {
    let mut out = 0u32;
    if r.readable {
        out |= events & libc::EPOLLIN as u32;
    }
    if r.writable {
        out |= events & libc::EPOLLOUT as u32;
    }
    if r.rdhup {
        out |= events & libc::EPOLLRDHUP as u32;
    }
    if r.hup {
        out |= libc::EPOLLHUP as u32;
    }
    out
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, evs: *mut epoll_event, max: c_int, timeout: c_int) -> c_int {
    // SAFETY: same contract, no signal mask.
    unsafe { epoll_pwait(epfd, evs, max, timeout, std::ptr::null()) }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    evs: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> c_int {
    let interests = epoll_interests(epfd);
    if interests.is_empty() || max <= 0 || evs.is_null() {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().epoll_pwait)(epfd, evs, max, timeout, sigmask) };
    }
    // SAFETY: the program lends `max` epoll_events.
    let out = unsafe { std::slice::from_raw_parts_mut(evs, max as usize) };
    guard(|| epoll_mixed(epfd, out, timeout, sigmask, &interests))
}

/// Our sockets in epoll set `epfd` with the program's interest in each
/// (empty, without taking the lock, when no set has any).
fn epoll_interests(epfd: c_int) -> Vec<(c_int, Interest)> {
    if EPOLL_INTERESTS.load(Ordering::Relaxed) == 0 {
        return Vec::new();
    }
    engine::lock(&EPOLL_SETS).get(&epfd).map(|s| s.iter().map(|(k, v)| (*k, *v)).collect()).unwrap_or_default()
}

/// `epoll_pwait` with a `timespec` timeout (glibc 2.35). With ring
/// sockets in the set the wait is `epoll_mixed`'s, in milliseconds (rounded
/// up, so it never returns early).
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    evs: *mut epoll_event,
    max: c_int,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    let interests = epoll_interests(epfd);
    if interests.is_empty() || max <= 0 || evs.is_null() {
        // SAFETY: the program's arguments, unchanged.
        return unsafe { (real().epoll_pwait2)(epfd, evs, max, timeout, sigmask) };
    }
    let ms = if timeout.is_null() {
        -1
    } else {
        // SAFETY: the program's timespec.
        let t = unsafe { std::ptr::read(timeout) };
        if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
            set_errno(libc::EINVAL);
            return -1;
        }
        let ms = i128::from(t.tv_sec) * 1000 + (i128::from(t.tv_nsec) + 999_999) / 1_000_000;
        ms.min(i128::from(c_int::MAX)) as c_int
    };
    // SAFETY: the program lends `max` epoll_events.
    let out = unsafe { std::slice::from_raw_parts_mut(evs, max as usize) };
    guard(|| epoll_mixed(epfd, out, ms, sigmask, &interests))
}

thread_local! {
    static KERNEL_EVENTS: std::cell::RefCell<Vec<epoll_event>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The thread's buffer for the kernel's epoll events, returned on drop.
struct KernelEvents(Vec<epoll_event>);

impl KernelEvents {
    fn take(len: usize) -> Self {
        let mut v = KERNEL_EVENTS.try_with(|k| std::mem::take(&mut *k.borrow_mut())).unwrap_or_default();
        if v.len() < len {
            v.resize(len, epoll_event { events: 0, u64: 0 });
        }
        KernelEvents(v)
    }
}

impl Drop for KernelEvents {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        let _ = KERNEL_EVENTS.try_with(|k| *k.borrow_mut() = v);
    }
}

/// Keeps what an edge-triggered interest reported (see [`engine::Edge`]).
fn set_edge(epfd: c_int, fd: c_int, edge: engine::Edge) {
    if let Some(i) = engine::lock(&EPOLL_SETS).get_mut(&epfd).and_then(|s| s.get_mut(&fd)) {
        i.edge = edge;
    }
}

/// The events to report for ring socket `c` of interest `i`, with readiness
/// `r`: level-triggered, all of them; edge-triggered, what is new (and the
/// interest remembers it).
fn report_bits(epfd: c_int, fd: c_int, c: &ConnSock, i: &Interest, r: engine::Ready) -> u32 {
    match i.edge() {
        None if i.events & libc::EPOLLRDHUP as u32 != 0 => epoll_bits(c.with_pending_fin(r), i.events),
        None => epoll_bits(r, i.events),
        Some(e) => {
            let (news, next) = c.edge_ready(r, &e, i.events);
            let bits = epoll_bits(news, i.events);
            if bits != 0 {
                set_edge(epfd, fd, next);
            }
            bits
        }
    }
}

fn disarm_oneshot(epfd: c_int, fd: c_int) {
    if let Some(i) = engine::lock(&EPOLL_SETS).get_mut(&epfd).and_then(|s| s.get_mut(&fd)) {
        i.armed = false;
    }
}

fn epoll_mixed(
    epfd: c_int,
    out: &mut [epoll_event],
    timeout: c_int,
    sigmask: *const libc::sigset_t,
    interests: &[(c_int, Interest)],
) -> Res<c_int> {
    let deadline = deadline_of(timeout);
    let max = out.len();
    // The kernel's events land in a per-thread buffer: programs pass their
    // whole table size as `max` (redis: 10 128), and zeroing a fresh buffer
    // of that size on every call was 9 % of redis-server's time.
    let mut kbuf = KernelEvents::take(max);
    let kbuf = &mut kbuf.0;
    let mut spun = false;
    // Our sockets in the set, looked up once for every pass below.
    let socks = engine::lookup_many(interests);
    let mut reported: Vec<c_int> = Vec::new();
    loop {
        let mut n = 0usize;
        reported.clear();
        for (fd, i, s) in &socks {
            if n == max || !i.armed {
                continue;
            }
            if let Sock::Conn(c) = &**s {
                let bits = report_bits(epfd, *fd, c, i, c.ready());
                if bits != 0 {
                    out[n] = epoll_event { events: bits, u64: i.data };
                    n += 1;
                    reported.push(*fd);
                    if i.events & libc::EPOLLONESHOT as u32 != 0 {
                        disarm_oneshot(epfd, *fd);
                    }
                }
            }
        }
        let t = if n > 0 { 0 } else { remaining(deadline) };
        if t != 0 {
            let conns = socks.iter().filter(|(_, i, _)| i.armed).filter_map(|(_, i, s)| match &**s {
                Sock::Conn(c) => Some((c, i.edge())),
                Sock::Listen(_) => None,
            });
            // Spin once, then every ring armed before the kernel sleeps.
            let arrived = if spun { engine::arm_rings(conns) } else { engine::spin_for_rings(conns) };
            spun = true;
            if arrived {
                // Report it through the checks at the top of the loop.
                continue;
            }
        }
        // SAFETY: our own buffer of `max` events.
        let r = unsafe { (real().epoll_pwait)(epfd, kbuf.as_mut_ptr(), max as c_int, t, sigmask) };
        if r < 0 {
            if n > 0 {
                return Ok(n as c_int);
            }
            return Err(last_errno());
        }
        for kev in &kbuf[..r as usize] {
            if n == max {
                break;
            }
            let data = kev.u64;
            let kevents = kev.events;
            if data & EPOLL_TAG_MASK != EPOLL_TAG {
                out[n] = *kev;
                n += 1;
                continue;
            }
            let fd = (data & 0xFFFF_FFFF) as u32 as c_int;
            if reported.contains(&fd) {
                continue;
            }
            let Some((_, i, s)) = socks.iter().find(|(f, _, _)| *f == fd) else { continue };
            if !i.armed {
                // Deleted by the program (our registration stays) or a
                // reported one-shot: take its wake-up, so the kernel does
                // not report it again at once.
                if let Sock::Conn(c) = &**s {
                    c.quiesce();
                }
                continue;
            }
            let bits = match &**s {
                Sock::Conn(c) => {
                    let hup = kevents & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
                    report_bits(epfd, fd, c, i, c.after_kernel_wake(hup))
                }
                Sock::Listen(_) => i.events & libc::EPOLLIN as u32,
            };
            if bits != 0 {
                out[n] = epoll_event { events: bits, u64: i.data };
                n += 1;
                reported.push(fd);
                if i.events & libc::EPOLLONESHOT as u32 != 0 {
                    disarm_oneshot(epfd, fd);
                }
            }
        }
        if n > 0 || t == 0 {
            return Ok(n as c_int);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
    }
}

// ---- exec (see `exec.rs`) ----

/// Runs when the library is loaded, before the program's `main`: takes
/// over the ring sockets an `exec` handed to this image.
extern "C" fn on_load() {
    let _ = catch_unwind(exec::adopt_inherited);
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

extern "C" {
    static environ: *const *const c_char;
}

#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    // SAFETY: the program's arguments, as execve(2) takes them.
    unsafe { exec::with_handoff(envp, |env| (real().execve)(path, argv, env)) }
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: as execve, with the current environment.
    unsafe { exec::with_handoff(environ, |env| (real().execve)(path, argv, env)) }
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    // SAFETY: the program's arguments, as execvpe(3) takes them.
    unsafe { exec::with_handoff(envp, |env| (real().execvpe)(file, argv, env)) }
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: as execvpe, with the current environment.
    unsafe { exec::with_handoff(environ, |env| (real().execvpe)(file, argv, env)) }
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    // SAFETY: the program's arguments, as fexecve(3) takes them.
    unsafe { exec::with_handoff(envp, |env| (real().fexecve)(fd, argv, env)) }
}

#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: the program's arguments, as execveat(2) takes them.
    unsafe { exec::with_handoff(envp, |env| (real().execveat)(dirfd, path, argv, env, flags)) }
}

//! The C library's own socket calls, found with `dlsym(RTLD_NEXT, ...)`:
//! every call on a descriptor that is not a ring socket goes here
//! unchanged, so a program behaves exactly as without the library.

use std::sync::OnceLock;

use libc::{
    c_char, c_int, c_ulong, c_void, epoll_event, iovec, msghdr, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t,
};

macro_rules! real_table {
    ($($name:ident : $ty:ty;)*) => {
        /// Pointers to the next definitions of the calls we interpose.
        pub(crate) struct Real { $(pub(crate) $name: $ty,)* }

        fn resolve() -> Real {
            Real { $($name: {
                let sym = concat!(stringify!($name), "\0");
                // SAFETY: `sym` is NUL-terminated; RTLD_NEXT asks the
                // dynamic linker for the definition after ours.
                let p = unsafe { libc::dlsym(libc::RTLD_NEXT, sym.as_ptr().cast()) };
                if p.is_null() {
                    missing(sym);
                }
                // SAFETY: the C library defines `$name` with this exact
                // signature (glibc's headers); fn pointers and data pointers
                // have the same size on the platforms we build for.
                unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
            },)* }
        }
    };
}

real_table! {
    listen: unsafe extern "C" fn(c_int, c_int) -> c_int;
    accept: unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    accept4: unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
    connect: unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
    read: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
    write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
    readv: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    writev: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    recv: unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
    send: unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
    recvfrom: unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
    sendto: unsafe extern "C" fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
    recvmsg: unsafe extern "C" fn(c_int, *mut msghdr, c_int) -> ssize_t;
    sendmsg: unsafe extern "C" fn(c_int, *const msghdr, c_int) -> ssize_t;
    close: unsafe extern "C" fn(c_int) -> c_int;
    shutdown: unsafe extern "C" fn(c_int, c_int) -> c_int;
    getsockname: unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    getpeername: unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    setsockopt: unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
    getsockopt: unsafe extern "C" fn(c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int;
    fcntl: unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
    fcntl64: unsafe extern "C" fn(c_int, c_int, ...) -> c_int;
    ioctl: unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int;
    poll: unsafe extern "C" fn(*mut pollfd, nfds_t, c_int) -> c_int;
    epoll_ctl: unsafe extern "C" fn(c_int, c_int, c_int, *mut epoll_event) -> c_int;
    epoll_pwait: unsafe extern "C" fn(c_int, *mut epoll_event, c_int, c_int, *const libc::sigset_t) -> c_int;
    epoll_pwait2: unsafe extern "C" fn(c_int, *mut epoll_event, c_int, *const libc::timespec, *const libc::sigset_t) -> c_int;
    dup: unsafe extern "C" fn(c_int) -> c_int;
    dup2: unsafe extern "C" fn(c_int, c_int) -> c_int;
    dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    __read_chk: unsafe extern "C" fn(c_int, *mut c_void, size_t, size_t) -> ssize_t;
    __recv_chk: unsafe extern "C" fn(c_int, *mut c_void, size_t, size_t, c_int) -> ssize_t;
    __recvfrom_chk: unsafe extern "C" fn(c_int, *mut c_void, size_t, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
    __poll_chk: unsafe extern "C" fn(*mut pollfd, nfds_t, c_int, size_t) -> c_int;
    ppoll: unsafe extern "C" fn(*mut pollfd, nfds_t, *const libc::timespec, *const libc::sigset_t) -> c_int;
    select: unsafe extern "C" fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> c_int;
    pselect: unsafe extern "C" fn(
        c_int,
        *mut libc::fd_set,
        *mut libc::fd_set,
        *mut libc::fd_set,
        *const libc::timespec,
        *const libc::sigset_t,
    ) -> c_int;
    splice: unsafe extern "C" fn(c_int, *mut libc::loff_t, c_int, *mut libc::loff_t, size_t, libc::c_uint) -> ssize_t;
    recvmmsg: unsafe extern "C" fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int, *mut libc::timespec) -> c_int;
    sendmmsg: unsafe extern "C" fn(c_int, *mut libc::mmsghdr, libc::c_uint, c_int) -> c_int;
    sendfile: unsafe extern "C" fn(c_int, c_int, *mut libc::off_t, size_t) -> ssize_t;
    sendfile64: unsafe extern "C" fn(c_int, c_int, *mut libc::off64_t, size_t) -> ssize_t;
    execve: unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    execvpe: unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
    fexecve: unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
    execveat: unsafe extern "C" fn(c_int, *const c_char, *const *const c_char, *const *const c_char, c_int) -> c_int;
}

/// The C library's definitions, resolved on first use.
#[inline]
pub(crate) fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    REAL.get_or_init(resolve)
}

#[cold]
fn missing(sym: &str) -> ! {
    let msg = format!("libcfsocket: the C library does not define {}; cannot run\n", sym.trim_end_matches('\0'));
    // SAFETY: a raw write(2) of our own buffer to stderr (our `write`
    // would need this very table).
    unsafe { libc::syscall(libc::SYS_write, 2, msg.as_ptr(), msg.len()) };
    std::process::abort();
}

//! `exec` of a program that holds ring sockets.
//!
//! A ring socket's state lives in this process's memory, which `exec`
//! replaces, and its descriptor number names one end of a Unix socket pair
//! that carries only wake-up bytes. So before the real `exec`, each ring
//! socket the new image inherits (no close-on-exec) is handed off:
//!
//! - when the new environment loads this library again (`LD_PRELOAD`
//!   names `cfsocket`), the connection's positions go to its share (as for
//!   `fork`), and the share's and the rings' memfds to descriptors the new
//!   image inherits, named in `CFSOCKET_INHERIT`; the new image's library
//!   takes them over when it loads ([`adopt_inherited`]), so the socket
//!   keeps working, and the old and new image are one holder;
//! - otherwise the program's number is pointed at a new, unconnected TCP
//!   socket (reads and writes fail with `ENOTCONN`, as on a socket whose
//!   connection is gone), with a line on stderr; the peer sees the end of
//!   the stream when the old image's copy closes.
//!
//! If the real `exec` fails, everything is put back.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use libc::{c_char, c_int};

use crate::engine::{self, Sock};
use crate::real::real;

/// The environment variable that names handed-off ring sockets.
const INHERIT: &str = "CFSOCKET_INHERIT";

/// What was changed for one `exec`, undone if it fails.
pub(crate) struct ExecPrep {
    /// The new environment: pointers into the caller's strings and ours.
    env: Vec<*const c_char>,
    _inherit: Option<CString>,
    /// Descriptors made inheritable for the new image.
    _handed: Vec<OwnedFd>,
    /// Program numbers pointed at an unconnected socket: (number, its
    /// descriptor flags, the connection whose pair end it named).
    replaced: Vec<(RawFd, c_int, Arc<Sock>)>,
}

impl ExecPrep {
    /// The environment to pass to the real `exec`.
    pub(crate) fn envp(&self) -> *const *const c_char {
        self.env.as_ptr()
    }

    /// The `exec` failed: the program's numbers name their ring sockets
    /// again; the inheritable copies close when `self` drops.
    pub(crate) fn undo(self) {
        for (fd, flags, sock) in &self.replaced {
            if let Sock::Conn(c) = &**sock {
                let cloexec = if flags & libc::FD_CLOEXEC != 0 { libc::O_CLOEXEC } else { 0 };
                // The program's number named this pair end before `prepare`.
                // SAFETY: dup3(2) of our private pair end back onto it.
                unsafe { (real().dup3)(c.wake_end().as_raw_fd(), *fd, cloexec) };
            }
        }
    }
}

/// The entries of a null-terminated `envp` array.
///
/// # Safety
///
/// `envp` is null or a null-terminated array of C strings (as `exec`
/// takes it), alive while the result is used.
unsafe fn entries<'a>(envp: *const *const c_char) -> Vec<&'a CStr> {
    let mut out = Vec::new();
    if envp.is_null() {
        return out;
    }
    let mut i = 0;
    loop {
        // SAFETY: the caller guarantees a null-terminated array.
        let p = unsafe { *envp.add(i) };
        if p.is_null() {
            return out;
        }
        // SAFETY: each entry is a NUL-terminated string.
        out.push(unsafe { CStr::from_ptr(p) });
        i += 1;
    }
}

/// Hands off the ring sockets the new image inherits (see the module
/// comment) and builds its environment from `envp`.
///
/// # Safety
///
/// As [`entries`].
pub(crate) unsafe fn prepare(envp: *const *const c_char) -> ExecPrep {
    // SAFETY: as the caller guarantees.
    let old = unsafe { entries(envp) };
    let follows = old.iter().any(|e| {
        let b = e.to_bytes();
        b.starts_with(b"LD_PRELOAD=") && b.windows(8).any(|w| w == b"cfsocket")
    });
    let mut env: Vec<*const c_char> =
        old.iter().filter(|e| !e.to_bytes().starts_with(INHERIT.as_bytes())).map(|e| e.as_ptr()).collect();
    let mut handed = Vec::new();
    let mut replaced = Vec::new();
    let mut items: Vec<String> = Vec::new();
    // One entry per connection; its other numbers (dup) name the first.
    let mut firsts: Vec<(Arc<Sock>, RawFd)> = Vec::new();
    for (fd, sock) in engine::snapshot() {
        let Sock::Conn(c) = &*sock else { continue };
        // SAFETY: a number in our table is open (closing it goes through us).
        let program = unsafe { BorrowedFd::borrow_raw(fd) };
        let Ok(flags) = rustix::io::fcntl_getfd(program) else { continue };
        if flags.contains(rustix::io::FdFlags::CLOEXEC) {
            continue;
        }
        if follows {
            if let Some((_, first)) = firsts.iter().find(|(s, _)| Arc::ptr_eq(s, &sock)) {
                items.push(format!("dup,{fd},{first}"));
                continue;
            }
            if let Some((fds, entry)) = c.handoff_for_exec(fd) {
                handed.extend(fds);
                items.push(entry);
                firsts.push((sock.clone(), fd));
                continue;
            }
        }
        // Cannot follow: an unconnected socket in its place.
        let Ok(stand_in) = rustix::net::socket(rustix::net::AddressFamily::INET, rustix::net::SocketType::STREAM, None)
        else {
            continue;
        };
        // Without close-on-exec, as the number was.
        // SAFETY: dup3(2) of a socket we own onto the program's number.
        if unsafe { (real().dup3)(stand_in.as_fd().as_raw_fd(), fd, 0) } >= 0 {
            let why = if follows {
                "its state could not be handed off"
            } else {
                "the new environment does not load libcfsocket (LD_PRELOAD)"
            };
            let line = format!(
                "libcfsocket[{}]: exec: descriptor {fd}, a ring socket, reaches the new program as an unconnected socket: {why}\n",
                std::process::id()
            );
            let _ = rustix::io::write(engine::stderr(), line.as_bytes());
            replaced.push((fd, flags.bits() as c_int, sock.clone()));
        }
    }
    let inherit = (!items.is_empty()).then(|| CString::new(format!("{INHERIT}={}", items.join(";"))).ok()).flatten();
    if let Some(i) = &inherit {
        env.push(i.as_ptr());
    }
    env.push(std::ptr::null());
    ExecPrep { env, _inherit: inherit, _handed: handed, replaced }
}

/// When the library loads: takes over the ring sockets the old image
/// handed off (`CFSOCKET_INHERIT`), then removes the variable so that
/// later children do not see it. A bad entry is said on stderr and
/// skipped; its descriptors are left alone.
pub(crate) fn adopt_inherited() {
    let Some(list) = std::env::var_os(INHERIT) else { return };
    std::env::remove_var(INHERIT);
    let list = list.to_string_lossy().into_owned();
    for entry in list.split(';').filter(|e| !e.is_empty()) {
        let result = match entry.strip_prefix("dup,") {
            Some(dup) => adopt_dup(dup),
            None => engine::adopt_after_exec(entry).map(drop),
        };
        if let Err(why) = result {
            let line = format!("libcfsocket[{}]: {INHERIT}: {why}; left to the kernel\n", std::process::id());
            let _ = rustix::io::write(engine::stderr(), line.as_bytes());
        }
    }
}

/// `fd,first`: `fd` is another number of the ring socket taken over at `first`.
fn adopt_dup(entry: &str) -> Result<(), String> {
    let (fd, first) = entry.split_once(',').ok_or_else(|| format!("malformed entry {entry:?}"))?;
    let fd: RawFd = fd.parse().map_err(|_| format!("not a descriptor: {fd:?}"))?;
    let first: RawFd = first.parse().map_err(|_| format!("not a descriptor: {first:?}"))?;
    let sock = engine::lookup(first).ok_or_else(|| format!("descriptor {first} was not taken over"))?;
    if fd < 0 || engine::is_managed(fd) || !engine::insert(fd, sock) {
        return Err(format!("descriptor {fd} out of range or taken"));
    }
    Ok(())
}

/// Runs `f` (the real `exec`) with the prepared environment; undoes the
/// preparation if it returns (it failed), keeping its `errno`.
///
/// # Safety
///
/// As [`entries`] for `envp`.
pub(crate) unsafe fn with_handoff(envp: *const *const c_char, f: impl FnOnce(*const *const c_char) -> c_int) -> c_int {
    // SAFETY: as the caller guarantees.
    let prep = unsafe { prepare(envp) };
    let r = f(prep.envp());
    // SAFETY: this thread's errno slot.
    let errno = unsafe { *libc::__errno_location() };
    prep.undo();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    r
}

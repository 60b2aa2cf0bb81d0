//! What the running kernel supports, found once at bind time.
//!
//! Opcode support comes from io_uring's `Probe`. Flags cannot be probed
//! that way, so each flag is tried on a scratch ring against an eventfd (a
//! file that is not a socket): a kernel that does not know the flag fails
//! the request while preparing it, with `EINVAL`; one that does gets as far
//! as issuing it and fails with `ENOTSOCK` (or, for fixed buffers on older
//! kernels, `EFAULT`). Nothing is sent anywhere.

use std::os::fd::AsRawFd;
use std::time::Duration;

use io_uring::{cqueue, opcode, types, IoUring, Probe};

use super::sys::{self, RECVSEND_FIXED_BUF, SEND_ZC_REPORT_USAGE};

/// The zero-copy send features of the running kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelSupport {
    /// `IORING_OP_SEND_ZC` (Linux 6.0), with fixed buffers.
    pub send_zc: bool,
    /// `IORING_OP_SENDMSG_ZC` (Linux 6.1): zero-copy scatter-gather.
    pub sendmsg_zc: bool,
    /// `IORING_SEND_ZC_REPORT_USAGE` (Linux 6.2): notifications say whether
    /// the kernel copied after all.
    pub report_usage: bool,
    /// Fixed buffers with `SENDMSG_ZC` (Linux 6.15).
    pub sendmsg_zc_fixed: bool,
}

impl KernelSupport {
    /// Probes the running kernel (a scratch ring and an eventfd; nothing is
    /// sent). All false when io_uring itself is unavailable.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::udp::KernelSupport;
    ///
    /// let support = KernelSupport::probe();
    /// if support.sendmsg_zc_fixed {
    ///     assert!(support.sendmsg_zc, "fixed buffers with SENDMSG_ZC imply SENDMSG_ZC");
    /// }
    /// ```
    pub fn probe() -> Self {
        let Ok(mut ring) = IoUring::new(8) else {
            return Self::default();
        };
        let mut probe = Probe::new();
        if ring.submitter().register_probe(&mut probe).is_err() {
            return Self::default();
        }
        let mut s = Self {
            send_zc: probe.is_supported(opcode::SendZc::CODE),
            sendmsg_zc: probe.is_supported(opcode::SendMsgZc::CODE),
            ..Self::default()
        };
        let Ok(efd) = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC) else {
            return s;
        };
        let fd = types::Fd(efd.as_raw_fd());
        if s.send_zc {
            let e = opcode::SendZc::new(fd, std::ptr::null(), 0).zc_flags(SEND_ZC_REPORT_USAGE).build();
            match accepted(&mut ring, e) {
                Some(ok) => s.report_usage = ok,
                None => {
                    std::mem::forget(ring);
                    return s;
                }
            }
        }
        if s.sendmsg_zc {
            // On the heap, so that it can be leaked if the kernel keeps it.
            let mut msg = Box::new((sys::empty_msghdr(), [sys::empty_iovec()]));
            msg.0.msg_iov = msg.1.as_mut_ptr();
            msg.0.msg_iovlen = 0;
            let mut e = opcode::SendMsgZc::new(fd, &msg.0).ioprio(RECVSEND_FIXED_BUF).build();
            sys::set_buf_index(&mut e, 0);
            match accepted(&mut ring, e) {
                Some(ok) => s.sendmsg_zc_fixed = ok,
                None => {
                    std::mem::forget(ring);
                    std::mem::forget(msg);
                    return s;
                }
            }
        }
        s
    }
}

/// Runs `entry` alone on `ring`: whether the kernel got past preparing it
/// (any result but `EINVAL`); `None` when it did not finish in time.
fn accepted(ring: &mut IoUring, entry: io_uring::squeue::Entry) -> Option<bool> {
    const PROBE: u64 = 0x5052_4f42;
    // SAFETY: the entry points at nothing (null buffer) or at a message
    // header our caller keeps until we return, and leaks if we return
    // `None` (the kernel still owns the entry).
    if !unsafe { sys::push(ring, &entry.user_data(PROBE)) } {
        return Some(false);
    }
    let mut result = None;
    let mut more = false;
    let mut notified = false;
    let ts = types::Timespec::from(Duration::from_secs(1));
    for _ in 0..4 {
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = ring.submitter().submit_with_args(1, &args);
        for cqe in ring.completion() {
            if cqe.user_data() != PROBE {
                continue;
            }
            if cqueue::notif(cqe.flags()) {
                notified = true;
            } else {
                result = Some(cqe.result());
                more = cqueue::more(cqe.flags());
            }
        }
        if result.is_some() && (!more || notified) {
            break;
        }
    }
    if result.is_none() || (more && !notified) {
        // The kernel still owns the entry: the caller leaks the ring and
        // what the entry points at.
        return None;
    }
    result.map(|r| r != -libc::EINVAL)
}

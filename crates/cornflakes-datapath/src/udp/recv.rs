//! The receive path: posting `RECVMSG` requests into pool buffers, checking
//! each completed datagram, and handing it to the application.
//!
//! A receive slot owns a kernel-visible message header and one writable
//! pool buffer of `max_payload + 1` bytes (one more than any accepted
//! datagram, so that an oversized one shows up as too long even where
//! `MSG_TRUNC` is not reported). The kernel writes into both while the slot
//! is posted; nothing else can reach them then, since the buffer is a
//! unique [`RcBufMut`] until a good datagram freezes it into the
//! [`Received`] payload.
//!
//! Hostile input ends here: [`check_datagram`] decides, without
//! panicking, whether a datagram is delivered; everything else is dropped
//! and counted. How many receives are posted adapts to the traffic, and
//! stops while `recv_buffers` messages await the application (see the
//! module docs of [`udp`](super)).

use std::cell::UnsafeCell;
use std::os::fd::AsRawFd;

use cornflakes::RcBufMut;
use io_uring::{opcode, types};

use super::completion::{user_data, KIND_RECV};
use super::sys::{self, RawAddr};
use super::UdpDatapath;
use crate::{read_packet_header, Received, PACKET_HEADER_LEN};

/// Kernel-visible part of a receive slot; written by the kernel while the
/// request is posted.
struct RecvRaw {
    msg: libc::msghdr,
    iov: libc::iovec,
    addr: RawAddr,
    control: [u64; sys::CONTROL_WORDS],
}

/// One receive request and its buffer.
pub(super) struct RecvSlot {
    raw: Box<UnsafeCell<RecvRaw>>,
    /// The receive buffer; writable, and so unreachable from the
    /// application, while the kernel may write into it.
    buf: Option<RcBufMut>,
    pub(super) posted: bool,
}

impl RecvSlot {
    pub(super) fn new() -> Self {
        Self {
            raw: Box::new(UnsafeCell::new(RecvRaw {
                msg: sys::empty_msghdr(),
                iov: sys::empty_iovec(),
                addr: RawAddr::empty(),
                control: [0; sys::CONTROL_WORDS],
            })),
            buf: None,
            posted: false,
        }
    }
}

/// The receive-side check of one completed datagram: its message id when
/// it is delivered, `None` when it is dropped as malformed.
///
/// `buf` is the receive buffer, `len` the byte count the kernel returned,
/// `msg_flags` the flags it left in the message header. A datagram is
/// dropped when the kernel truncated it (`MSG_TRUNC`), when it is longer
/// than `max_payload`, when `len` exceeds the buffer, or when its packet
/// header is malformed ([`read_packet_header`]). A delivered message is
/// `buf[PACKET_HEADER_LEN..len]`. Never panics.
#[inline]
pub(super) fn check_datagram(buf: &[u8], len: usize, msg_flags: libc::c_int, max_payload: usize) -> Option<u32> {
    if msg_flags & libc::MSG_TRUNC != 0 || len > max_payload {
        return None;
    }
    read_packet_header(buf.get(..len)?)
}

impl UdpDatapath {
    /// Moves up to `max` delivered messages to `out`.
    pub(super) fn take_ready(&mut self, out: &mut Vec<Received>, max: usize) -> usize {
        let n = max.min(self.ready.len());
        out.extend(self.ready.drain(..n));
        n
    }

    /// After a pass over the completion queue: adapts how many receives to
    /// keep posted and reposts up to that many.
    ///
    /// Every posted receive waits on the socket and is woken by every
    /// datagram (all but one then find nothing and re-arm), so keep few
    /// posted while traffic is light and more while it comes in bursts:
    /// double when all posted receives completed in one pass, halve when
    /// only one did.
    pub(super) fn adapt_and_repost(&mut self) {
        if self.recv_done > 0 {
            if self.recv_done >= self.recv_target {
                self.recv_target = (self.recv_target * 2).min(self.config.recv_buffers);
            } else if self.recv_done == 1 {
                self.recv_target = (self.recv_target / 2).max(1);
            }
        }
        if self.recv_posted < self.recv_target {
            self.post_idle_recvs();
        }
    }

    /// Posts receives on idle slots up to the current target (while they
    /// get a buffer and room in the submission queue), and only while the
    /// buffers held for receiving (posted, plus delivered but not yet
    /// taken) stay within `recv_buffers`: an application that falls behind
    /// leaves datagrams in the socket buffer, where the kernel drops and
    /// counts what does not fit, instead of pinning pool memory without
    /// bound (issue 10).
    pub(super) fn post_idle_recvs(&mut self) {
        while self.recv_posted < self.recv_target {
            if self.recv_posted + self.ready.len() >= self.config.recv_buffers {
                self.udp_stats.recv_held_back += 1;
                break;
            }
            let Some(&i) = self.idle_recvs.last() else { break };
            if !self.post_recv(i as usize) {
                break;
            }
            self.idle_recvs.pop();
        }
    }

    /// Posts slot `i`'s receive; false (slot stays idle) without a buffer
    /// or submission queue room.
    fn post_recv(&mut self, i: usize) -> bool {
        let slot = &mut self.recv_slots[i];
        debug_assert!(!slot.posted);
        if slot.buf.is_none() {
            match self.pool.alloc(self.recv_len) {
                Ok(b) => slot.buf = Some(b),
                Err(_) => return false,
            }
        }
        let buf = slot.buf.as_mut().expect("allocated above");
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let raw = slot.raw.get();
        // SAFETY: the slot is not posted, so the kernel does not touch
        // `raw`; the Box gives it a stable address until the slot is
        // dropped, which happens only once no request is posted.
        let entry = unsafe {
            let r = &mut *raw;
            r.iov = libc::iovec { iov_base: ptr.cast(), iov_len: len };
            r.msg = sys::empty_msghdr();
            r.msg.msg_name = r.addr.as_mut_ptr().cast();
            r.msg.msg_namelen = RawAddr::CAPACITY;
            r.msg.msg_iov = &mut r.iov;
            r.msg.msg_iovlen = 1;
            if self.rxq_ovfl {
                r.msg.msg_control = r.control.as_mut_ptr().cast();
                r.msg.msg_controllen = std::mem::size_of_val(&r.control) as _;
            }
            opcode::RecvMsg::new(types::Fd(self.socket.as_raw_fd()), &mut r.msg).build()
        };
        let entry = entry.user_data(user_data(KIND_RECV, i));
        // SAFETY: the header, iovec, address and control buffer live in the
        // slot's Box and the data in the slot's RcBuf (count 1, not read
        // until the completion); both stay until the completion is reaped,
        // and `Drop` waits for it or leaks them.
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            return false;
        }
        slot.posted = true;
        self.recv_posted += 1;
        self.recv_unsubmitted += 1;
        true
    }

    /// A receive completed with `res` (bytes or `-errno`): deliver, drop
    /// or count it, and mark the slot idle.
    pub(super) fn on_recv(&mut self, i: usize, res: i32) {
        let slot = &mut self.recv_slots[i];
        debug_assert!(slot.posted);
        slot.posted = false;
        self.recv_posted -= 1;
        if self.closing {
            slot.buf = None;
            return;
        }
        if res < 0 {
            if res != -libc::ECANCELED {
                self.udp_stats.recv_errors += 1;
            }
        } else {
            // SAFETY: the completion was reaped, so the kernel is done with
            // the slot's header, address and control data.
            let raw = unsafe { &*slot.raw.get() };
            if self.rxq_ovfl {
                // SAFETY: msg_control points at the slot's control words,
                // msg_controllen bytes of which the kernel wrote.
                if let Some(dropped) = unsafe { sys::rxq_ovfl_of(&raw.msg) } {
                    self.stats.dropped_no_buffer = u64::from(dropped);
                }
            }
            let len = res as usize;
            let buf = slot.buf.as_ref().expect("a posted slot has a buffer");
            let header = check_datagram(buf, len, raw.msg.msg_flags, self.config.max_payload);
            let from = raw.addr.socket_addr(raw.msg.msg_namelen);
            match (header, from) {
                (Some(msg_id), Some(from)) => match self.peers.sender(from) {
                    Some(conn) => {
                        let buf = slot.buf.take().expect("checked above");
                        let payload = buf.freeze().slice(PACKET_HEADER_LEN..len);
                        self.ready.push_back(Received { conn, msg_id, payload });
                        self.stats.received += 1;
                    }
                    None => self.udp_stats.dropped_unknown_peer += 1,
                },
                _ => self.stats.dropped_malformed += 1,
            }
        }
        self.recv_done += 1;
        self.idle_recvs.push(i as u32);
    }

    /// Submits reposted receives once fewer than half the receives are in
    /// the kernel, so that a receive-only loop keeps the socket fed without
    /// a system call per datagram.
    pub(super) fn submit_reposts_if_low(&mut self) -> std::io::Result<()> {
        let in_kernel = self.recv_posted - self.recv_unsubmitted;
        if self.recv_unsubmitted > 0 && in_kernel * 2 < self.recv_target.max(2) {
            self.submit()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagram_checks() {
        let mut buf = [0u8; 17];
        buf[..4].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(check_datagram(&buf, 8, 0, 16), Some(7), "header only: an empty message");
        assert_eq!(check_datagram(&buf, 16, 0, 16), Some(7));
        assert_eq!(check_datagram(&buf, 17, 0, 16), None, "longer than max_payload");
        assert_eq!(check_datagram(&buf, 16, libc::MSG_TRUNC, 16), None, "truncated");
        assert_eq!(check_datagram(&buf, 7, 0, 16), None, "shorter than the header");
        assert_eq!(check_datagram(&buf, 18, 0, 100), None, "beyond the buffer");
        buf[6] = 1;
        assert_eq!(check_datagram(&buf, 16, 0, 16), None, "reserved word not zero");
    }
}

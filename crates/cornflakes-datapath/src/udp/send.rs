//! The send path: checking a message against the peer's limits, building
//! its first segment, filling a send slot and queueing one submission
//! entry with the operation chosen for it.
//!
//! A send slot owns the kernel-visible message header, iovecs and
//! destination address of one send, and the references ([`RcBuf`]s) that
//! keep its segments alive. Slots live in a boxed slice that never moves;
//! a slot is reused only after [`completion`](super::completion) has seen
//! its last completion (and zero-copy notification). Nothing here enters
//! the kernel: [`Datapath::flush`](crate::Datapath::flush) does.

use std::os::fd::AsRawFd;

use cornflakes::{Message, RcBuf};
use io_uring::{opcode, types};

use super::completion::{user_data, KIND_SEND};
use super::peers::Peer;
use super::sys::{self, RawAddr};
use super::{KernelSupport, SendMode, UdpDatapath};
use crate::{write_packet_header, ConnId, Segment, SendError, PACKET_HEADER_LEN};

/// One send in flight: what the kernel reads, and what keeps it alive.
pub(super) struct SendSlot {
    msg: libc::msghdr,
    iovs: Box<[libc::iovec]>,
    addr: RawAddr,
    /// References held until the last completion: first segment, then
    /// zero-copy segments.
    pub(super) bufs: Vec<RcBuf>,
    pub(super) busy: bool,
    /// The send's result arrived (its CQE without `F_NOTIF`).
    pub(super) got_result: bool,
    /// That result announced a notification to come (`F_MORE`).
    pub(super) more: bool,
    /// The zero-copy notification arrived.
    pub(super) notified: bool,
}

impl SendSlot {
    pub(super) fn new(max_segments: usize) -> Self {
        Self {
            msg: sys::empty_msghdr(),
            iovs: vec![sys::empty_iovec(); max_segments].into_boxed_slice(),
            addr: RawAddr::empty(),
            bufs: Vec::with_capacity(max_segments),
            busy: false,
            got_result: false,
            more: false,
            notified: false,
        }
    }
}

/// The io_uring operation one message goes out with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `IORING_OP_SENDMSG`.
    Msg,
    /// `IORING_OP_SENDMSG_ZC`.
    MsgZc,
    /// `IORING_OP_SEND_ZC`.
    Zc,
}

/// The operation for a message of `segments` segments, `zero_copy` of them
/// zero-copy (see "Send modes" in the module docs).
#[inline]
fn choose_op(mode: SendMode, support: &KernelSupport, segments: usize, zero_copy: usize) -> Op {
    match mode {
        SendMode::Auto if zero_copy > 0 && support.sendmsg_zc => Op::MsgZc,
        SendMode::Auto if zero_copy > 0 && support.send_zc && segments == 1 => Op::Zc,
        SendMode::Auto | SendMode::SendMsg => Op::Msg,
        SendMode::SendMsgZc => Op::MsgZc,
        SendMode::SendZc if segments == 1 => Op::Zc,
        SendMode::SendZc => Op::Msg,
    }
}

impl UdpDatapath {
    /// Serialize-and-send (see [`Datapath::push_message`](crate::Datapath::push_message)).
    pub(super) fn send_message<'a, M: Message<'a>>(
        &mut self,
        conn: ConnId,
        msg_id: u32,
        msg: &M,
    ) -> Result<(), SendError> {
        let peer = self.check_send(conn)?;
        let layout = msg.layout();
        let len = layout.total_len();
        if PACKET_HEADER_LEN + len > peer.max_payload {
            return Err(SendError::TooLarge { len, max: peer.max_payload - PACKET_HEADER_LEN });
        }
        let count = 1 + layout.zero_copy_entries;
        if count > self.config.max_segments {
            return Err(SendError::TooManySegments { count, max: self.config.max_segments });
        }
        let i = self.reserve_slot()?;
        let mut first = self.pool.alloc(PACKET_HEADER_LEN + layout.first_segment_len())?;
        write_packet_header(&mut first, msg_id);
        msg.write_header_and_copies(&layout, &mut first[PACKET_HEADER_LEN..])?;
        let bufs = &mut self.send_slots[i].bufs;
        debug_assert!(bufs.is_empty());
        bufs.push(first.freeze());
        msg.for_each_zero_copy(|b| {
            if !b.is_empty() {
                bufs.push(b.clone());
            }
        });
        let zero_copy = bufs.len() - 1;
        self.queue_send(i, &peer, zero_copy)
    }

    /// Caller-built segments (see [`Datapath::push_segments`](crate::Datapath::push_segments)).
    pub(super) fn send_segments(
        &mut self,
        conn: ConnId,
        msg_id: u32,
        segments: &[Segment<'_>],
    ) -> Result<(), SendError> {
        let peer = self.check_send(conn)?;
        let (mut len, mut copied, mut count, mut after_zero_copy) = (0, 0, 1, false);
        for s in segments {
            match s {
                Segment::Copy(b) => {
                    len += b.len();
                    copied += b.len();
                    if after_zero_copy && !b.is_empty() {
                        count += 1;
                        after_zero_copy = false;
                    }
                }
                Segment::ZeroCopy(b) if !b.is_empty() => {
                    len += b.len();
                    count += 1;
                    after_zero_copy = true;
                }
                Segment::ZeroCopy(_) => {}
            }
        }
        if PACKET_HEADER_LEN + len > peer.max_payload {
            return Err(SendError::TooLarge { len, max: peer.max_payload - PACKET_HEADER_LEN });
        }
        if count > self.config.max_segments {
            return Err(SendError::TooManySegments { count, max: self.config.max_segments });
        }
        let i = self.reserve_slot()?;
        // All copied bytes go into one buffer; each run of copies between
        // zero-copy segments becomes a view of it, so wire order is kept.
        let mut first = self.pool.alloc(PACKET_HEADER_LEN + copied)?;
        let bytes = first.as_mut_slice();
        write_packet_header(bytes, msg_id);
        let mut at = PACKET_HEADER_LEN;
        for s in segments {
            if let Segment::Copy(b) = s {
                bytes[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
        }
        let first = first.freeze();
        let bufs = &mut self.send_slots[i].bufs;
        debug_assert!(bufs.is_empty());
        let (mut run_start, mut at, mut zero_copy) = (0, PACKET_HEADER_LEN, 0);
        for s in segments {
            match s {
                Segment::Copy(b) => at += b.len(),
                Segment::ZeroCopy(b) if !b.is_empty() => {
                    if at > run_start {
                        bufs.push(first.slice(run_start..at));
                    }
                    run_start = at;
                    bufs.push(b.clone());
                    zero_copy += 1;
                }
                Segment::ZeroCopy(_) => {}
            }
        }
        if at > run_start {
            bufs.push(first.slice(run_start..at));
        }
        drop(first);
        self.queue_send(i, &peer, zero_copy)
    }

    /// The peer behind `conn`.
    #[inline]
    fn check_send(&self, conn: ConnId) -> Result<Peer, SendError> {
        let peer = *self.peers.get(conn).ok_or(SendError::Closed(conn))?;
        Ok(peer)
    }

    /// A free send slot, when the submission queue has room too.
    #[inline]
    fn reserve_slot(&mut self) -> Result<usize, SendError> {
        let Some(&i) = self.free_sends.last() else {
            return Err(SendError::Full);
        };
        if self.ring.submission().is_full() {
            return Err(SendError::Full);
        }
        Ok(i as usize)
    }

    /// Queues the send prepared in slot `i` (its `bufs` filled).
    fn queue_send(&mut self, i: usize, peer: &Peer, zero_copy: usize) -> Result<(), SendError> {
        self.fixed.sync_if_grown(&self.ring, &self.pool);
        self.udp_stats.fixed_buffer_updates = self.fixed.updates;
        let op = choose_op(self.config.send_mode, &self.support, self.send_slots[i].bufs.len(), zero_copy);
        let zc_flags = if self.support.report_usage { sys::SEND_ZC_REPORT_USAGE } else { 0 };
        let fd = types::Fd(self.socket.as_raw_fd());
        let slot = &mut self.send_slots[i];
        let n = slot.bufs.len();
        for (iov, b) in slot.iovs.iter_mut().zip(&slot.bufs) {
            *iov = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: b.len() };
        }
        slot.addr = peer.raw;
        slot.msg = sys::empty_msghdr();
        slot.msg.msg_name = slot.addr.as_ptr() as *mut libc::c_void;
        slot.msg.msg_namelen = slot.addr.len();
        slot.msg.msg_iov = slot.iovs.as_mut_ptr();
        slot.msg.msg_iovlen = n as _;
        let entry = match op {
            Op::Msg => {
                self.udp_stats.sendmsg += 1;
                opcode::SendMsg::new(fd, &slot.msg).build()
            }
            Op::MsgZc => {
                let index = if self.support.sendmsg_zc_fixed { self.fixed.index_of(&slot.iovs[..n]) } else { None };
                let flags = zc_flags | if index.is_some() { sys::RECVSEND_FIXED_BUF } else { 0 };
                let mut e = opcode::SendMsgZc::new(fd, &slot.msg).ioprio(flags).build();
                match index {
                    Some(index) => {
                        sys::set_buf_index(&mut e, index);
                        self.udp_stats.sendmsg_zc_fixed += 1;
                    }
                    None => self.udp_stats.sendmsg_zc += 1,
                }
                e
            }
            Op::Zc => {
                let iov = slot.iovs[0];
                let index = self.fixed.index_of(&slot.iovs[..1]);
                if index.is_some() {
                    self.udp_stats.send_zc_fixed += 1;
                } else {
                    self.udp_stats.send_zc += 1;
                }
                opcode::SendZc::new(fd, iov.iov_base as *const u8, iov.iov_len as u32)
                    .buf_index(index)
                    .dest_addr(slot.addr.as_ptr())
                    .dest_addr_len(slot.addr.len())
                    .zc_flags(zc_flags)
                    .build()
            }
        };
        let entry = entry.user_data(user_data(KIND_SEND, i));
        // SAFETY: the header, iovecs and address live in slot `i` of a boxed
        // slice that never moves, the data in the RcBufs of `slot.bufs`; the
        // slot is reused only after its last completion (and notification)
        // is reaped, and `Drop` waits for that or leaks the slots.
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            slot.bufs.clear();
            return Err(SendError::Full);
        }
        slot.busy = true;
        slot.got_result = false;
        slot.more = false;
        slot.notified = false;
        self.free_sends.pop();
        self.in_flight += 1;
        self.stats.sent += 1;
        self.stats.zero_copy_segments += zero_copy as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_mode_picks_from_the_kernel() {
        let all = KernelSupport { send_zc: true, sendmsg_zc: true, report_usage: true, sendmsg_zc_fixed: true };
        let only_send_zc = KernelSupport { send_zc: true, ..KernelSupport::default() };
        let none = KernelSupport::default();
        assert_eq!(choose_op(SendMode::Auto, &all, 3, 2), Op::MsgZc);
        assert_eq!(choose_op(SendMode::Auto, &all, 1, 0), Op::Msg, "copied only: plain sendmsg");
        assert_eq!(choose_op(SendMode::Auto, &only_send_zc, 1, 1), Op::Zc);
        assert_eq!(choose_op(SendMode::Auto, &only_send_zc, 2, 1), Op::Msg);
        assert_eq!(choose_op(SendMode::Auto, &none, 2, 1), Op::Msg);
        assert_eq!(choose_op(SendMode::SendZc, &all, 2, 1), Op::Msg, "SEND_ZC carries one segment");
        assert_eq!(choose_op(SendMode::SendMsgZc, &all, 1, 0), Op::MsgZc);
    }
}

//! The send path: checking and queueing a message on its connection, and
//! posting one `SENDMSG`/`SENDMSG_ZC` for the head of a connection's queue.
//!
//! A send op owns the kernel-visible message header and iovec array of one
//! request, and, for `SENDMSG_ZC`, clones of the buffers it covers, held
//! until the notification. Ops are boxed and never move; an op is reused
//! only after its last completion. One send is in flight per connection,
//! so the stream carries the queue in order; a partial send leaves the
//! rest queued (`head_sent`) and it is posted again on completion.

use std::os::fd::AsRawFd;

use cornflakes::{Message, RcBuf};
use io_uring::{opcode, types};
use smallvec::SmallVec;

use super::completion::{user_data, KIND_SEND};
use super::conn::{OutMsg, State};
use super::{sys, write_frame_header, Framing, TcpDatapath};
use crate::{ConnId, Segment, SendError, PACKET_HEADER_LEN};

/// Iovecs in one send (Linux takes up to 1024).
pub(super) const MAX_OP_IOVS: usize = 64;

/// One send request in flight.
pub(super) struct SendOp {
    msg: libc::msghdr,
    iovs: [libc::iovec; MAX_OP_IOVS],
    /// For `SENDMSG_ZC`: the buffers it covers, until the notification.
    hold: Vec<RcBuf>,
    /// The connection's slot index.
    pub(super) conn: u32,
    pub(super) busy: bool,
    pub(super) got_result: bool,
    /// The result announced a notification (`F_MORE`).
    pub(super) more: bool,
    pub(super) notified: bool,
}

impl SendOp {
    fn new() -> Self {
        Self {
            msg: sys::empty_msghdr(),
            iovs: [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_OP_IOVS],
            hold: Vec::new(),
            conn: 0,
            busy: false,
            got_result: false,
            more: false,
            notified: false,
        }
    }

    /// Drops the references held for the kernel.
    pub(super) fn release(&mut self) {
        self.hold.clear();
        self.busy = false;
    }
}

impl TcpDatapath {
    /// The slot of an open connection, or [`SendError::Closed`].
    #[inline]
    fn open_index(&self, conn: ConnId) -> Result<usize, SendError> {
        let i = self.conns.index(conn).ok_or(SendError::Closed(conn))?;
        match self.conns.slots[i].conn.as_ref() {
            Some(c) if c.state == State::Open => Ok(i),
            _ => Err(SendError::Closed(conn)),
        }
    }

    /// Checks the message limit and the connection's queue bounds.
    #[inline]
    fn check_room(&mut self, conn: ConnId, len: usize) -> Result<usize, SendError> {
        if len > self.config.max_message {
            return Err(SendError::TooLarge { len, max: self.config.max_message });
        }
        let i = self.open_index(conn)?;
        let c = self.conns.slots[i].conn.as_ref().expect("open");
        if !c.queue.is_empty()
            && (c.queue.len() >= self.config.max_queued_messages
                || c.queued_bytes + self.frame_header_len() + len > self.config.max_queued_bytes)
        {
            self.tcp.backlogged += 1;
            return Err(SendError::Backlogged(conn));
        }
        Ok(i)
    }

    /// Serialize-and-send (see [`Datapath::push_message`](crate::Datapath::push_message)).
    pub(super) fn queue_message<'a, M: Message<'a>>(
        &mut self,
        conn: ConnId,
        msg_id: u32,
        msg: &M,
    ) -> Result<(), SendError> {
        let layout = msg.layout();
        let len = layout.total_len();
        let i = self.check_room(conn, len)?;
        let hdr = self.frame_header_len();
        let mut first = self.pool.alloc(hdr + layout.first_segment_len())?;
        if hdr > 0 {
            write_frame_header(&mut first, msg_id, len);
        }
        msg.write_header_and_copies(&layout, &mut first[hdr..])?;
        let mut bufs = SmallVec::with_capacity(1 + layout.zero_copy_entries);
        bufs.push((first.freeze(), false));
        msg.for_each_zero_copy(|b| {
            if !b.is_empty() {
                bufs.push((b.clone(), true));
            }
        });
        self.enqueue(i, OutMsg { bufs, len: hdr + len });
        Ok(())
    }

    /// Caller-built segments (see [`Datapath::push_segments`](crate::Datapath::push_segments)).
    pub(super) fn queue_segments(
        &mut self,
        conn: ConnId,
        msg_id: u32,
        segments: &[Segment<'_>],
    ) -> Result<(), SendError> {
        let (mut len, mut copied) = (0, 0);
        for s in segments {
            match s {
                Segment::Copy(b) => {
                    len += b.len();
                    copied += b.len();
                }
                Segment::ZeroCopy(b) => len += b.len(),
            }
        }
        let i = self.check_room(conn, len)?;
        // All copied bytes go into one buffer; each run of copies between
        // zero-copy segments becomes a view of it, so wire order is kept.
        let hdr = self.frame_header_len();
        let mut first = self.pool.alloc(hdr + copied)?;
        let bytes = first.as_mut_slice();
        if hdr > 0 {
            write_frame_header(bytes, msg_id, len);
        }
        let mut at = hdr;
        for s in segments {
            if let Segment::Copy(b) = s {
                bytes[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
        }
        let first = first.freeze();
        let mut bufs = SmallVec::with_capacity(2 * segments.len() + 1);
        let (mut run_start, mut at) = (0, hdr);
        for s in segments {
            match s {
                Segment::Copy(b) => at += b.len(),
                Segment::ZeroCopy(b) if !b.is_empty() => {
                    if at > run_start {
                        bufs.push((first.slice(run_start..at), false));
                    }
                    run_start = at;
                    bufs.push((b.clone(), true));
                }
                Segment::ZeroCopy(_) => {}
            }
        }
        if at > run_start {
            bufs.push((first.slice(run_start..at), false));
        }
        self.enqueue(i, OutMsg { bufs, len: hdr + len });
        Ok(())
    }

    /// Bytes of framing before each message: the packet header, or none on
    /// a raw byte stream ([`Framing::Raw`]).
    #[inline]
    fn frame_header_len(&self) -> usize {
        match self.config.framing {
            Framing::Length => PACKET_HEADER_LEN,
            Framing::Raw => 0,
        }
    }

    /// Appends a checked message to connection `i`'s queue.
    fn enqueue(&mut self, i: usize, m: OutMsg) {
        let c = self.conns.get_mut(i).expect("checked open");
        c.queued_bytes += m.len;
        self.stats.zero_copy_segments += m.bufs.iter().filter(|(_, z)| *z).count() as u64;
        c.queue.push_back(m);
        self.stats.sent += 1;
        self.mark_send(i);
    }

    /// Posts one send for the head of connection `i`'s queue. False when
    /// it must wait (no send op free, or the submission queue is full).
    pub(super) fn post_send(&mut self, i: usize) -> bool {
        if self.ring.submission().is_full() {
            let _ = self.submit();
        }
        let op_i = match self.free_ops.pop() {
            Some(o) => o as usize,
            None if self.send_ops.len() < self.config.max_send_ops => {
                self.send_ops.push(Box::new(SendOp::new()));
                self.send_ops.len() - 1
            }
            None => return false,
        };
        let zc_min = if self.zc_supported { self.config.zero_copy_min } else { usize::MAX };
        let Some(c) = self.conns.slots[i].conn.as_mut() else {
            self.free_ops.push(op_i as u32);
            return true;
        };
        let op = &mut *self.send_ops[op_i];
        debug_assert!(!op.busy && op.hold.is_empty());
        // Gather iovecs from the queue, skipping what was sent.
        let (mut n, mut skip, mut zc) = (0, c.head_sent, false);
        'msgs: for m in &c.queue {
            for (b, is_zc) in &m.bufs {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                if n == MAX_OP_IOVS {
                    break 'msgs;
                }
                let part = &b[skip..];
                op.iovs[n] = libc::iovec { iov_base: part.as_ptr() as *mut libc::c_void, iov_len: part.len() };
                zc |= *is_zc && part.len() >= zc_min;
                skip = 0;
                n += 1;
            }
        }
        debug_assert!(n > 0, "post_send with an empty queue");
        if zc {
            // Hold what the kernel may read until the notification.
            let (mut left, mut skip) = (n, c.head_sent);
            'hold: for m in &c.queue {
                for (b, _) in &m.bufs {
                    if skip >= b.len() {
                        skip -= b.len();
                        continue;
                    }
                    if left == 0 {
                        break 'hold;
                    }
                    op.hold.push(b.clone());
                    skip = 0;
                    left -= 1;
                }
            }
        }
        op.msg = sys::empty_msghdr();
        op.msg.msg_iov = op.iovs.as_mut_ptr();
        op.msg.msg_iovlen = n as _;
        let fd = types::Fd(c.stream.as_raw_fd());
        let flags = libc::MSG_NOSIGNAL as u32;
        let entry = if zc {
            opcode::SendMsgZc::new(fd, &op.msg).ioprio(sys::SEND_ZC_REPORT_USAGE).flags(flags).build()
        } else {
            opcode::SendMsg::new(fd, &op.msg).flags(flags).build()
        };
        let entry = entry.user_data(user_data(KIND_SEND, op_i));
        // SAFETY: the header and iovecs live in a boxed op that never moves
        // and is reused only after its last completion (and notification);
        // the bytes they point to are held by the connection's queue (popped
        // only when this send's result says they were taken) and, for
        // SENDMSG_ZC, by `op.hold` until the notification. A connection's
        // slot is freed only when no request names it; `Drop` waits for or
        // leaks outstanding requests.
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            op.hold.clear();
            self.free_ops.push(op_i as u32);
            return false;
        }
        op.busy = true;
        op.got_result = false;
        op.more = false;
        op.notified = false;
        op.conn = i as u32;
        c.send_posted = true;
        c.ops += 1;
        self.kernel_ops += 1;
        if zc {
            self.tcp.sendmsg_zc += 1;
        } else {
            self.tcp.sendmsg += 1;
        }
        true
    }

    /// The result of a send on connection `i`: `res` bytes taken, or an
    /// error.
    pub(super) fn on_send_result(&mut self, i: usize, res: i32) {
        let Some(c) = self.conns.get_mut(i) else { return };
        c.ops -= 1;
        c.send_posted = false;
        if c.state != State::Open {
            self.maybe_free(i);
            return;
        }
        // A send of at least one byte that took none would be posted
        // again forever: treat it as the error it is.
        if res <= 0 {
            if res < 0 && matches!(-res, libc::EAGAIN | libc::EINTR | libc::ENOBUFS) {
                self.mark_send(i);
            } else {
                self.tcp.errors += 1;
                self.begin_close(i, true);
            }
            return;
        }
        let mut n = res as usize;
        let mut partial = false;
        while n > 0 {
            let Some(front) = c.queue.front() else { break };
            let left = front.len - c.head_sent;
            if n >= left {
                n -= left;
                c.queued_bytes -= front.len;
                c.queue.pop_front();
                c.head_sent = 0;
            } else {
                c.head_sent += n;
                n = 0;
                partial = true;
            }
        }
        let more = !c.queue.is_empty();
        if partial {
            self.tcp.partial_sends += 1;
        }
        if more {
            self.mark_send(i);
        }
    }
}

//! The ring: accepting, dispatching completions, posting what connections
//! want (`pump`), waiting, closing connections and dropping the datapath.
//!
//! Each request's `user_data` names its kind in the top byte and its slot
//! (connection, send op or listener) below. A send completes in one or two
//! completions: its result, and, when the result carries `F_MORE`, a
//! zero-copy notification (`F_NOTIF`) once the kernel no longer reads the
//! buffers; the op (with its references) is released after the last.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types};

use super::conn::State;
use super::{sys, TcpDatapath};
use crate::RecvError;

pub(super) const KIND_RECV: u64 = 1;
pub(super) const KIND_SEND: u64 = 2;
pub(super) const KIND_ACCEPT: u64 = 3;
pub(super) const KIND_CANCEL: u64 = 4;
pub(super) const KIND_RECV_MULTI: u64 = 5;
/// The poll request on the waker's eventfd.
const KIND_WAKE: u64 = 6;

use crate::uring::kind_and_index;
pub(super) use crate::uring::user_data;

impl TcpDatapath {
    /// Processes every completion in the queue.
    pub(super) fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        loop {
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
            if cqes.is_empty() {
                break;
            }
            for &(ud, res, flags) in &cqes {
                match kind_and_index(ud) {
                    (KIND_RECV, i) => {
                        self.kernel_ops -= 1;
                        self.on_recv(i, res);
                    }
                    (KIND_RECV_MULTI, i) => self.on_recv_multi(i, res, flags),
                    (KIND_SEND, i) => self.on_send(i, res, flags),
                    (KIND_WAKE, _) => self.waker.on_completion(res, flags),
                    (KIND_ACCEPT, i) => {
                        self.kernel_ops -= 1;
                        self.on_accept(i, res);
                    }
                    _ => {}
                }
            }
        }
        self.cqes = cqes;
    }

    /// One completion of send op `o`: its result or its notification.
    fn on_send(&mut self, o: usize, res: i32, flags: u32) {
        let op = &mut *self.send_ops[o];
        if !op.busy {
            return;
        }
        if cqueue::notif(flags) {
            self.tcp.notifications += 1;
            if res as u32 & sys::NOTIF_USAGE_ZC_COPIED != 0 {
                self.stats.zero_copy_copied += 1;
            }
            op.notified = true;
            if !op.got_result {
                return;
            }
        } else {
            op.got_result = true;
            op.more = cqueue::more(flags);
            let conn = op.conn as usize;
            let done = !op.more || op.notified;
            if done {
                op.release();
            }
            self.on_send_result(conn, res);
            if !done {
                return;
            }
            self.finish_op(o);
            return;
        }
        self.send_ops[o].release();
        self.finish_op(o);
    }

    fn finish_op(&mut self, o: usize) {
        self.free_ops.push(o as u32);
        self.kernel_ops -= 1;
        self.stats.completions += 1;
        self.released += 1;
    }

    /// Posts an accept on listener `l`; when the submission queue stays
    /// full, the listener is remembered and `pump` posts it later (an
    /// accept is never lost).
    pub(super) fn post_accept(&mut self, l: usize) {
        if self.ring.submission().is_full() {
            let _ = self.submit();
        }
        let fd = types::Fd(self.listeners[l].as_raw_fd());
        let entry = opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(user_data(KIND_ACCEPT, l));
        // SAFETY: no address is asked for; the entry holds no pointer.
        if unsafe { sys::push(&mut self.ring, &entry) } {
            self.kernel_ops += 1;
        } else {
            self.tcp.accepts_deferred += 1;
            if !self.accept_later.contains(&l) {
                self.accept_later.push(l);
            }
        }
    }

    /// Posts the accepts that found the submission queue full.
    fn retry_accepts(&mut self) {
        if self.accept_later.is_empty() || self.closing {
            return;
        }
        for l in std::mem::take(&mut self.accept_later) {
            self.post_accept(l);
        }
    }

    fn on_accept(&mut self, l: usize, res: i32) {
        if res >= 0 {
            // SAFETY: a successful accept returns a new descriptor that no
            // one else owns.
            let stream = unsafe { sys::stream_from_fd(res) };
            if self.closing {
                return;
            }
            let _ = stream.set_nodelay(true);
            if self.conns.live >= self.config.max_connections {
                refuse(stream, &self.config.refusal);
                self.tcp.rejected += 1;
            } else if self.adopt(stream).is_some() {
                self.tcp.accepted += 1;
            }
        } else if self.closing || res == -libc::ECANCELED || res == -libc::EINVAL || res == -libc::EBADF {
            return;
        }
        // Transient failures (EMFILE, ECONNABORTED, ...) retry.
        self.post_accept(l);
    }

    /// Queues connection `i` for a receive (see `pump`).
    pub(super) fn mark_recv(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i) {
            let listed = c.want_recv || c.want_send;
            c.want_recv = true;
            if !listed {
                self.want.push(i as u32);
            }
        }
    }

    /// Queues connection `i` for a send.
    pub(super) fn mark_send(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i) {
            let listed = c.want_recv || c.want_send;
            c.want_send = true;
            if !listed {
                self.want.push(i as u32);
            }
        }
    }

    /// Posts the receives and sends connections want, then submits.
    /// Connections that must wait stay listed.
    pub(super) fn pump(&mut self) -> io::Result<()> {
        self.retry_accepts();
        self.refill_ring();
        let mut want = std::mem::take(&mut self.want);
        let mut keep = std::mem::take(&mut self.want_spare);
        for &i in &want {
            let i = i as usize;
            let Some(c) = self.conns.get_mut(i) else { continue };
            if c.state != State::Open || self.closing {
                c.want_recv = false;
                c.want_send = false;
                continue;
            }
            if c.want_send {
                if c.send_posted || c.queue.is_empty() {
                    c.want_send = false;
                } else if self.post_send(i) {
                    self.conns.get_mut(i).expect("live").want_send = false;
                }
            }
            if self.conns.get_mut(i).is_some_and(|c| c.want_recv) && self.service_recv(i) {
                if let Some(c) = self.conns.get_mut(i) {
                    c.want_recv = false;
                }
            }
            if let Some(c) = self.conns.get_mut(i) {
                if c.want_recv || c.want_send {
                    keep.push(i as u32);
                }
            }
        }
        want.clear();
        // Marks made while pumping (a bad frame closing, ...) were pushed
        // on `self.want`; keep them.
        keep.append(&mut self.want);
        self.want = keep;
        self.want_spare = want;
        self.submit()
    }

    /// Submits queued entries (one `io_uring_enter`).
    pub(super) fn submit(&mut self) -> io::Result<()> {
        if self.ring.submission().is_empty() {
            return Ok(());
        }
        // Fault injection: a kernel that takes nothing (EBUSY, EAGAIN).
        #[cfg(test)]
        if self.hold_submits {
            return Ok(());
        }
        loop {
            match self.ring.submit() {
                Ok(_) => {
                    self.tcp.submits += 1;
                    return Ok(());
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)) => {
                    // Completions must be reaped first; they stay queued.
                    if e.raw_os_error() != Some(libc::EINTR) {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Shuts connection `i` down; `report`: tell the application once
    /// with [`RecvError::Closed`].
    pub(super) fn begin_close(&mut self, i: usize, report: bool) {
        let id = self.conns.id(i);
        let Some(c) = self.conns.get_mut(i) else { return };
        if c.state != State::Open {
            return;
        }
        c.state = State::Closing;
        sys::shutdown(&c.stream);
        if report {
            self.closed.push_back(id);
        }
        self.maybe_free(i);
    }

    /// Frees connection `i`'s slot when it is closing and no request names
    /// it (dropping its socket, buffers and queue).
    pub(super) fn maybe_free(&mut self, i: usize) {
        if self.conns.get_mut(i).is_some_and(|c| c.state == State::Closing && c.ops == 0) {
            self.conns.remove(i);
        }
    }

    /// [`Datapath::wait`](crate::Datapath::wait): spins for `busy_poll`,
    /// then sleeps in the kernel until a message (or a closed connection)
    /// is ready, the [waker](TcpDatapath::waker) is woken or `timeout`
    /// passes.
    pub(super) fn wait_for_ready(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        let start = Instant::now();
        let spin = self.config.busy_poll.min(timeout);
        self.waker.arm(&mut self.ring, user_data(KIND_WAKE, 0));
        loop {
            self.reap();
            self.pump()?;
            if !self.ready.is_empty() || !self.closed.is_empty() || self.waker.take_woken() {
                return Ok(true);
            }
            if start.elapsed() < spin {
                std::hint::spin_loop();
                continue;
            }
            let Some(left) = timeout.checked_sub(start.elapsed()).filter(|d| !d.is_zero()) else {
                return Ok(false);
            };
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Tells a connection accepted while the table is full why, and closes it.
/// Best effort, never blocking: the message goes into the new socket's
/// empty send buffer, then a FIN; bytes the peer sent already are read and
/// dropped first (a few reads at most), because a close with unread input
/// sends a reset instead of the FIN, which the peer may see before our
/// message.
fn refuse(stream: std::net::TcpStream, why: &[u8]) {
    use std::io::{Read, Write};
    if why.is_empty() || stream.set_nonblocking(true).is_err() {
        return;
    }
    let _ = (&stream).write(why);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    for _ in 0..4 {
        match (&stream).read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

impl Drop for TcpDatapath {
    fn drop(&mut self) {
        self.closing = true;
        for i in 0..self.conns.slots.len() {
            if let Some(c) = self.conns.get_mut(i) {
                c.state = State::Closing;
                sys::shutdown(&c.stream);
            }
        }
        for l in 0..self.listeners.len() {
            let entry =
                opcode::AsyncCancel::new(user_data(KIND_ACCEPT, l)).build().user_data(user_data(KIND_CANCEL, l));
            // SAFETY: a cancel entry holds no pointer.
            let _ = unsafe { sys::push(&mut self.ring, &entry) };
            sys::shutdown(&self.listeners[l]);
        }
        let deadline = Instant::now() + self.config.close_linger;
        loop {
            let _ = self.submit();
            self.reap();
            if self.kernel_ops == 0 || Instant::now() >= deadline {
                break;
            }
            let ts = types::Timespec::from(Duration::from_millis(10));
            let _ = self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
        }
        if self.kernel_ops > 0 {
            // The kernel may still write receive buffers or read send
            // buffers: keep the ring open and the memory allocated.
            self.tcp.leaked_on_drop = self.kernel_ops as u64;
            // The ring (a ManuallyDrop) is not dropped: its descriptor stays
            // open and its requests pending.
            std::mem::forget(std::mem::take(&mut self.send_ops));
            std::mem::forget(std::mem::take(&mut self.conns));
            std::mem::forget(self.bufring.take());
            std::mem::forget(self.pool.clone());
        } else {
            // SAFETY: the ring is dropped once, here, and not used after;
            // no request is left in it, so nothing it references is freed
            // under the kernel when the fields drop next.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.ring) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An accept to repost while the submission queue is full (and
    /// submitting takes nothing) is posted later, and the next connection is
    /// accepted.
    #[test]
    fn an_accept_that_finds_the_queue_full_is_posted_later() {
        let config = super::super::TcpConfig { ring_entries: 8, ..super::super::TcpConfig::loopback() };
        let mut dp = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
        let addr = dp.local_addrs()[0];
        dp.hold_submits = true;
        let nop = opcode::Nop::new().build().user_data(user_data(KIND_CANCEL, 0));
        // SAFETY: a no-op holds no pointer.
        while unsafe { sys::push(&mut dp.ring, &nop) } {}
        let _first = std::net::TcpStream::connect(addr).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while dp.tcp.accepted == 0 {
            assert!(Instant::now() < deadline, "first connection not accepted");
            std::thread::sleep(Duration::from_millis(1));
            dp.reap();
        }
        assert_eq!(dp.accept_later, vec![0], "the repost waits");
        assert_eq!(dp.tcp.accepts_deferred, 1);
        dp.hold_submits = false;
        let _second = std::net::TcpStream::connect(addr).unwrap();
        while dp.tcp.accepted < 2 {
            assert!(Instant::now() < deadline, "the accept was lost: {dp:?}");
            let mut out = Vec::new();
            let _ = crate::Datapath::recv_batch(&mut dp, &mut out, 8);
            let _ = crate::Datapath::wait(&mut dp, Duration::from_millis(5));
        }
        assert!(dp.accept_later.is_empty());
    }

    #[test]
    fn user_data_round_trips() {
        assert_eq!(kind_and_index(user_data(KIND_SEND, 12345)), (KIND_SEND, 12345));
        assert_eq!(kind_and_index(user_data(KIND_RECV, (1 << 24) - 1)), (KIND_RECV, (1 << 24) - 1));
    }
}

//! The ring: submitting queued entries, entering the kernel, and
//! dispatching completions to the receive and send paths.
//!
//! Each submission entry's `user_data` names its kind (receive, send,
//! cancel) in the top byte and its slot below. A send completes in one or
//! two completions: its result, and, when the result carries `F_MORE`, a
//! zero-copy notification (`F_NOTIF`) once the kernel no longer reads the
//! buffers; they may arrive in either order, and the slot (with its
//! references) is released after the last one. Receive completions go to
//! [`recv`](super::recv), which then reposts.
//!
//! With [`TaskRun::Cooperative`] or [`TaskRun::Deferred`] the kernel does
//! not interrupt us; when it raises the task-run flag, [`UdpDatapath::reap`]
//! enters the kernel first so that pending completions are posted.

use std::io;
use std::time::{Duration, Instant};

use io_uring::{cqueue, types};

use super::{sys, TaskRun, UdpDatapath};
use crate::{RecvError, SendError};

pub(super) const KIND_RECV: u64 = 1;
pub(super) const KIND_SEND: u64 = 2;
pub(super) const KIND_CANCEL: u64 = 3;
/// The poll request on the waker's eventfd.
const KIND_WAKE: u64 = 4;

use crate::uring::kind_and_index;
pub(super) use crate::uring::user_data;

impl UdpDatapath {
    /// Processes every completion in the queue; reposts receives.
    pub(super) fn reap(&mut self) {
        if self.config.task_run != TaskRun::Signal && self.ring.submission().taskrun() {
            // Completions are waiting for us to enter the kernel.
            self.enter();
        }
        let mut cqes = std::mem::take(&mut self.cqes);
        self.recv_done = 0;
        loop {
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
            if cqes.is_empty() {
                break;
            }
            for &(ud, res, flags) in &cqes {
                match kind_and_index(ud) {
                    (KIND_RECV, i) => self.on_recv(i, res),
                    (KIND_SEND, i) => self.on_send(i, res, flags),
                    (KIND_WAKE, _) => self.waker.on_completion(res, flags),
                    _ => {}
                }
            }
        }
        self.cqes = cqes;
        if self.closing {
            return;
        }
        self.adapt_and_repost();
    }

    /// One completion of send slot `i`: its result or its zero-copy
    /// notification. Releases the slot after the last one.
    fn on_send(&mut self, i: usize, res: i32, flags: u32) {
        let slot = &mut self.send_slots[i];
        if !slot.busy {
            return;
        }
        if cqueue::notif(flags) {
            self.udp_stats.notifications += 1;
            if res as u32 & sys::NOTIF_USAGE_ZC_COPIED != 0 {
                self.stats.zero_copy_copied += 1;
            }
            slot.notified = true;
            if !(slot.got_result && slot.more) {
                return;
            }
        } else {
            slot.got_result = true;
            slot.more = cqueue::more(flags);
            if res < 0 {
                self.udp_stats.send_errors += 1;
                self.last_send_error = Some(-res);
            }
            if slot.more && !slot.notified {
                return;
            }
        }
        slot.bufs.clear();
        slot.busy = false;
        self.free_sends.push(i as u32);
        self.in_flight -= 1;
        self.stats.completions += 1;
        self.released += 1;
    }

    /// Submits queued entries (one `io_uring_enter`).
    pub(super) fn submit(&mut self) -> io::Result<()> {
        if self.ring.submission().is_empty() {
            return Ok(());
        }
        loop {
            match self.ring.submit() {
                Ok(_) => {
                    self.udp_stats.submits += 1;
                    self.recv_unsubmitted = 0;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Enters the kernel to submit and to run pending completion work.
    fn enter(&mut self) {
        if self.ring.submit().is_ok() {
            self.udp_stats.submits += 1;
            self.recv_unsubmitted = 0;
        }
    }

    /// Enters the kernel and waits up to `timeout` for one completion
    /// (errors other than a timeout or an interruption are ignored: this
    /// is for shutting down).
    pub(super) fn wait_briefly(&mut self, timeout: Duration) {
        let ts = types::Timespec::from(timeout);
        let _ = self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
    }

    /// [`Datapath::wait`](crate::Datapath::wait): spins for
    /// `busy_poll`, then sleeps in the kernel until a message is ready, the
    /// [waker](UdpDatapath::waker) is woken or `timeout` passes.
    pub(super) fn wait_for_ready(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        self.reap();
        if !self.ready.is_empty() || self.waker.take_woken() {
            return Ok(true);
        }
        self.waker.arm(&mut self.ring, user_data(KIND_WAKE, 0));
        self.submit()?;
        let start = Instant::now();
        let spin = self.config.busy_poll.min(timeout);
        while start.elapsed() < spin {
            self.reap();
            if !self.ready.is_empty() || self.waker.take_woken() {
                return Ok(true);
            }
            if self.recv_unsubmitted > 0 {
                self.submit()?;
            }
            std::hint::spin_loop();
        }
        loop {
            let Some(left) = timeout.checked_sub(start.elapsed()).filter(|d| !d.is_zero()) else {
                self.reap();
                return Ok(!self.ready.is_empty());
            };
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => self.recv_unsubmitted = 0,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
                Err(e) => return Err(e.into()),
            }
            self.reap();
            if !self.ready.is_empty() || self.waker.take_woken() {
                return Ok(true);
            }
        }
    }

    /// [`Datapath::flush`](crate::Datapath::flush): submits; a busy
    /// kernel is back-pressure.
    pub(super) fn flush_queued(&mut self) -> Result<(), SendError> {
        match self.submit() {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {
                self.reap();
                Err(SendError::Full)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// [`Datapath::poll_completions`](crate::Datapath::poll_completions):
    /// reaps and returns how many sends were released.
    pub(super) fn release_completed(&mut self) -> Result<usize, SendError> {
        self.released = 0;
        self.reap();
        self.submit_reposts_if_low()?;
        Ok(self.released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        let ud = user_data(KIND_SEND, 12345);
        assert_eq!(kind_and_index(ud), (KIND_SEND, 12345));
        assert_eq!(kind_and_index(user_data(KIND_RECV, (1 << 24) - 1)), (KIND_RECV, (1 << 24) - 1));
    }
}

//! Sleeping, waking and peer death: everything the Unix socket of a
//! connection is used for after set-up. Owns the sleep/wake handshake with
//! the rings' sleep flags, the periodic and on-demand socket checks, and
//! reclaiming a connection whose peer died (rings and peer pool unmapped,
//! in-flight buffers released, reported once as [`RecvError::Closed`]).
//! See *Credits, sleeping and waking* and *Peer death* in the
//! [module docs](super).

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::net::{RecvFlags, SendFlags};

use super::conn::{conn_id, Conn};
use super::{ShmDatapath, ShmStats};
use crate::timeline::{self, Kind};
use crate::waker::Waker;
use crate::RecvError;

/// The adaptive spin lasts this many average idle gaps. With Poisson
/// arrivals a gap exceeds k times the mean with probability e^-k: at 4 (the
/// first choice) 1.8 % of requests paid a wake-up (YCSB at 50 k/s: 3289
/// sleeps in 174 k requests), at 10 0.005 % (64 sleeps).
const SPIN_GAPS: u64 = 10;

/// The adaptive spin also lasts twice the longest idle gap of the last
/// [`GAP_WINDOW`] to two (among those short enough to spin through, at most
/// `max_spin`). Arrivals are not Poisson when the peer's core is taken
/// away: on the 2-core guests every scheduler tick takes the load
/// generator's core for 25-110 µs, 250 times a second, and a server that
/// slept through each one (the 50 µs floor) woke 45-80 µs after the peer
/// was back (`docs/results/2026-12-02-tick/`).
const SPIN_LONGEST_GAPS: u64 = 2;

/// How long an idle gap counts towards [`SPIN_LONGEST_GAPS`]: one to two
/// windows of this length.
const GAP_WINDOW: Duration = Duration::from_millis(250);

/// The idle gaps (from a `wait` to the record that ended it) the adaptive
/// spin follows.
#[derive(Debug, Default)]
pub(super) struct IdleGaps {
    /// Moving average, ns.
    mean_ns: u64,
    /// The longest of the current [`GAP_WINDOW`] and of the one before, ns,
    /// of those no longer than `max_spin`.
    longest_ns: u64,
    longest_before_ns: u64,
    /// When the current window began (the first gap noted).
    window_start: Option<Instant>,
}

impl IdleGaps {
    /// How long to spin: [`SPIN_GAPS`] times the average idle gap or
    /// [`SPIN_LONGEST_GAPS`] times the longest recent one, within `floor`
    /// and `ceiling` ([`ShmConfig::spin`](super::ShmConfig::spin) and
    /// [`ShmConfig::max_spin`](super::ShmConfig::max_spin)).
    #[inline]
    fn spin(&self, floor: Duration, ceiling: Duration) -> Duration {
        let longest = self.longest_ns.max(self.longest_before_ns);
        let ns = self.mean_ns.saturating_mul(SPIN_GAPS).max(longest.saturating_mul(SPIN_LONGEST_GAPS));
        Duration::from_nanos(ns).clamp(floor, ceiling.max(floor))
    }

    /// Notes a gap from `start` to `now`: folded into the average (1/8
    /// weight; capped at 10 ms so one long idle period does not dominate),
    /// and into the window's longest when it was no longer than
    /// `max_spin` (a longer one is idleness, which sleeping is for).
    #[inline]
    fn note(&mut self, start: Instant, now: Instant, max_spin: Duration) {
        let gap = now.saturating_duration_since(start);
        let capped = (gap.as_nanos() as u64).min(10_000_000);
        self.mean_ns = self.mean_ns - self.mean_ns / 8 + capped / 8;
        let window_start = *self.window_start.get_or_insert(now);
        if now.saturating_duration_since(window_start) >= GAP_WINDOW {
            self.longest_before_ns = self.longest_ns;
            self.longest_ns = 0;
            self.window_start = Some(now);
        }
        if gap <= max_spin {
            self.longest_ns = self.longest_ns.max(capped);
        }
    }
}

/// Longest sleep of [`Datapath::wait`](crate::Datapath::wait) while records
/// are parked: how late a parked record may go out after its peer made room.
const PARKED_NAP: Duration = Duration::from_micros(50);

impl ShmDatapath {
    /// A handle that wakes this datapath's [`Datapath::wait`](crate::Datapath::wait)
    /// from any thread. The first call makes an eventfd, which every later
    /// sleep polls too; datapaths that never call it poll no more than
    /// before.
    ///
    /// # Errors
    ///
    /// The eventfd could not be made (out of file descriptors).
    pub fn waker(&mut self) -> std::io::Result<Waker> {
        self.waker.waker()
    }

    /// [`Datapath::wait`](crate::Datapath::wait): spin, then announce
    /// sleep, look once more, and sleep in `poll` on the sockets.
    pub(super) fn wait_for_records(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        self.publish_parked_while_waiting();
        self.wake_sleeping_peers();
        if self.ready() {
            return Ok(true);
        }
        let start = Instant::now();
        let spin = self.adaptive_spin().min(timeout);
        let mut i = 0u32;
        // The timeline's last clock read (0: none yet, or not enabled).
        let mut last_ns = 0;
        loop {
            if self.ready() {
                self.note_idle_gap(start, Instant::now());
                return Ok(true);
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) {
                self.publish_parked_while_waiting();
                if timeline::is_enabled() {
                    timeline::note_clock_read(Kind::ServerGap, &mut last_ns, timeline::now_ns());
                }
                if start.elapsed() >= spin {
                    break;
                }
            }
            std::hint::spin_loop();
        }
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            // Announce sleep, then look once more (SeqCst on both sides).
            self.set_sleeping(true);
            let ready = !self.closed.is_empty()
                || self.slots.iter().flat_map(|s| &s.conn).any(|c| c.dead || c.rx.has_data_seqcst());
            if ready {
                self.set_sleeping(false);
                return Ok(true);
            }
            if left.is_zero() {
                self.set_sleeping(false);
                // Callers that only ever wait with a short timeout still get
                // the periodic socket check (peer death, new connections).
                self.idle_polls += 1;
                if self.idle_polls >= self.config.idle_polls_per_check / 64 {
                    self.idle_polls = 0;
                    self.idle_check()?;
                }
                return Ok(self.ready());
            }
            self.shm.sleeps += 1;
            let slept_at = if timeline::is_enabled() { timeline::now_ns() } else { 0 };
            // Records parked behind a full ring go out only when someone
            // publishes them, and a peer that makes room does not wake us:
            // with records parked, sleep in short naps and publish between.
            let nap = if self.parked_conns > 0 { left.min(PARKED_NAP) } else { left };
            let happened = self.poll_sockets(nap);
            self.publish_parked_while_waiting();
            self.set_sleeping(false);
            if slept_at != 0 {
                timeline::record(Kind::ServerSleep, slept_at, timeline::now_ns());
            }
            if happened? || self.ready() {
                self.note_idle_gap(start, Instant::now());
                return Ok(true);
            }
        }
    }

    /// Publishes what the connections have parked, as far as their rings
    /// now allow, and wakes the peers that sleep: a datapath that waits for
    /// input must still deliver its output. Before this, a server that had
    /// parked replies and got no new request left them parked until the
    /// next one came, and the client timed them out.
    #[inline]
    fn publish_parked_while_waiting(&mut self) {
        if self.parked_conns > 0 {
            self.publish_all_parked();
            self.wake_sleeping_peers();
        }
    }

    /// How long to spin now ([`IdleGaps::spin`]).
    #[inline]
    fn adaptive_spin(&self) -> Duration {
        self.idle_gaps.spin(self.config.spin, self.config.max_spin)
    }

    /// Notes an idle gap from `start` to `now` that ended with a record.
    #[inline]
    fn note_idle_gap(&mut self, start: Instant, now: Instant) {
        self.idle_gaps.note(start, now, self.config.max_spin);
    }

    /// Takes a connection out of the table. With `report` (the peer went
    /// away), it is dropped (rings and the peer's pool unmapped, in-flight
    /// buffers released: nobody reads them any more, socket closed), counted,
    /// and returned once by `recv_batch` as [`RecvError::Closed`]. Without
    /// (we close it), the peer is told (our socket's write side is shut
    /// down: it drains what was published, then closes its end), and if it
    /// may still read zero-copy buffers of ours the connection moves to the
    /// closing list until it acknowledges them or goes away (the oldest
    /// is let go when the list is full).
    pub(super) fn reclaim(&mut self, index: usize, report: bool) {
        let slot = &mut self.slots[index];
        let Some(mut conn) = slot.conn.take() else { return };
        // Our leases on the peer's buffers end with the connection.
        conn.ledger.expire_all();
        let id = conn_id(index, slot.generation);
        slot.generation = slot.generation.wrapping_add(1);
        self.free_slots.push(index as u16);
        self.inflight_sends -= conn.inflight.len();
        if !conn.parked.is_empty() {
            self.parked_conns -= 1;
            self.shm.parked_lost += conn.parked.len() as u64;
            conn.parked.clear();
        }
        if report {
            drop(conn);
            self.shm.peers_closed += 1;
            self.closed.push_back(id);
        } else {
            let _ = conn.sock.shutdown(std::net::Shutdown::Write);
            // Nothing more is received from it: no value can come back.
            conn.stop_deferring_acks();
            conn.release_acked();
            if !conn.inflight.is_empty() && !conn.dead {
                self.closing.push_back(conn);
                if self.closing.len() > self.config.max_closing {
                    // Dropping the oldest releases its buffers and closes
                    // its socket.
                    self.closing.pop_front();
                    self.shm.closes_forced += 1;
                }
            }
        }
    }

    /// Releases what closing connections' peers acknowledged; forgets the
    /// connections that are done or, with `look_at_sockets` (one system
    /// call each), whose peer went away.
    pub(super) fn reap_closing(&mut self, look_at_sockets: bool) {
        let before = self.closing.len();
        self.closing.retain_mut(|c| {
            c.release_acked();
            !(c.inflight.is_empty() || (look_at_sockets && !socket_alive(&c.sock)))
        });
        self.shm.closes_drained += (before - self.closing.len()) as u64;
    }

    /// On drop: closes every connection, waits up to
    /// [`ShmConfig::close_linger`](super::ShmConfig::close_linger) for peers
    /// to acknowledge or go away, and leaks (never frees) the buffers still
    /// held after that, so that no peer ever reads a reused buffer.
    pub(super) fn linger(&mut self) {
        self.wake_sleeping_peers();
        self.accepting.clear();
        // Every connection lingers here, however many: the bound on the
        // closing list is for a datapath that goes on serving.
        self.config.max_closing = usize::MAX;
        for i in 0..self.slots.len() {
            self.reclaim(i, false);
        }
        let deadline = Instant::now() + self.config.close_linger;
        while !self.closing.is_empty() {
            self.reap_closing(true);
            if self.closing.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        for c in self.closing.drain(..) {
            let Conn { inflight, .. } = c;
            for (_, buf) in inflight {
                self.shm.leaked_on_drop += 1;
                std::mem::forget(buf);
            }
        }
    }

    /// Whether a receive may succeed now: a record at some ring head, a
    /// dead connection to report.
    #[inline]
    pub(super) fn ready(&self) -> bool {
        !self.closed.is_empty() || self.slots.iter().flat_map(|s| &s.conn).any(|c| c.dead || c.rx.has_data())
    }

    fn set_sleeping(&self, sleeping: bool) {
        for c in self.slots.iter().flat_map(|s| &s.conn) {
            c.rx.set_sleeping(sleeping);
        }
    }

    /// Polls the listener and every live socket for up to `timeout`:
    /// drains wake-up bytes, marks dead peers, accepts connections.
    /// Returns whether a connection died or was accepted (a wake-up byte
    /// alone is not news: the caller looks at the rings).
    fn poll_sockets(&mut self, timeout: Duration) -> Result<bool, RecvError> {
        let mut fds = Vec::with_capacity(self.slots.len() + self.accepting.len() + 1);
        let mut owners = Vec::with_capacity(self.slots.len());
        let listening = self.listener.is_some();
        if let Some((l, _)) = &self.listener {
            fds.push(PollFd::new(l, PollFlags::IN));
        }
        let accepting = self.accepting.len();
        for a in &self.accepting {
            fds.push(PollFd::new(a.sock(), PollFlags::IN));
        }
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(c) = s.conn.as_ref().filter(|c| !c.dead) {
                fds.push(PollFd::new(&c.sock, PollFlags::IN));
                owners.push(i);
            }
        }
        let waker = self.waker.fd().cloned();
        if let Some(w) = &waker {
            fds.push(PollFd::new(&**w, PollFlags::IN));
        }
        let ts = timespec(timeout);
        match poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(RecvError::Io(e.into())),
        }
        let revents: Vec<PollFlags> = fds.iter().map(|f| f.revents()).collect();
        drop(fds);
        let mut happened = false;
        let first = usize::from(listening);
        let hellos_arrived = revents[first..first + accepting].iter().any(|e| !e.is_empty());
        let conn_events = &revents[first + accepting..first + accepting + owners.len()];
        if waker.is_some() && !revents[first + accepting + owners.len()].is_empty() {
            self.waker.reset();
            happened = true;
        }
        for (&i, &ev) in owners.iter().zip(conn_events) {
            if ev.is_empty() {
                continue;
            }
            let c = self.slots[i].conn.as_mut().expect("polled connection exists");
            if !drain_socket(&c.sock) || ev.intersects(PollFlags::ERR | PollFlags::NVAL) {
                c.dead = true;
                happened = true;
            }
        }
        if listening && !revents[0].is_empty() {
            happened |= self.accept_pending();
        } else if hellos_arrived || !self.accepting.is_empty() {
            // Hellos that arrived, and deadlines of those that did not.
            happened |= self.progress_accepts();
        }
        Ok(happened)
    }

    /// Cheap periodic check when idle: one non-blocking `poll`.
    #[cold]
    pub(super) fn idle_check(&mut self) -> Result<(), RecvError> {
        self.shm.liveness_checks += 1;
        self.poll_sockets(Duration::ZERO).map(|_| ())
    }
}

/// After a publish: notes that the peer of `c` (in `slot`) may need a
/// wake-up, which [`ShmDatapath::wake_sleeping_peers`] checks once for a
/// whole batch of sends.
#[inline(always)]
pub(super) fn after_publish(c: &mut Conn, slot: usize, to_wake: &mut Vec<usize>) {
    if !c.wake_pending {
        c.wake_pending = true;
        to_wake.push(slot);
    }
}

impl ShmDatapath {
    /// Wakes every peer published to since the last call that said it is
    /// going to sleep: one `SeqCst` fence for the whole batch, then one
    /// load of each peer's sleep flag.
    ///
    /// The fence pairs with the sleeper's `SeqCst` flag store and ring
    /// load ([`wait_for_records`](Self::wait_for_records)): either the
    /// sleeper sees our records, or we see its flag, so no wake-up is
    /// lost. A fence per record would stall every send until its bytes
    /// reach the peer's cache (echo: ~15 % of a busy server, in `xchg`);
    /// per batch, the stores of many records drain together. Called where
    /// the [`Datapath`](crate::Datapath) contract lets sends become
    /// visible: `flush`, `poll_completions`, and before we receive, wait or
    /// drop, so a caller that sends and then waits for the answer never
    /// waits on a peer asleep.
    #[inline]
    pub(super) fn wake_sleeping_peers(&mut self) {
        if self.to_wake.is_empty() {
            return;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        for slot in self.to_wake.drain(..) {
            // A slot reclaimed since (its peer gone) has no connection, or a
            // new one whose flag is clear.
            let Some(c) = self.slots.get_mut(slot).and_then(|s| s.conn.as_mut()) else { continue };
            if std::mem::take(&mut c.wake_pending) && c.tx.take_peer_sleeping() {
                wake(c, &mut self.shm);
            }
        }
    }
}

#[cold]
fn wake(c: &mut Conn, shm: &mut ShmStats) {
    match rustix::net::send(&c.sock, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
        Ok(_) => shm.wakeups_sent += 1,
        // The socket is full of unread wake-up bytes: the peer will wake.
        Err(rustix::io::Errno::AGAIN) => {}
        Err(_) => c.dead = true,
    }
}

/// Reads and discards pending bytes (wake-ups), at most
/// `DRAIN_READS` reads of 4 KiB, so that a peer flooding its socket cannot
/// keep the caller here (what is left is read next time); false at end of
/// stream or on an error other than "nothing more".
fn drain_socket(sock: &UnixStream) -> bool {
    const DRAIN_READS: usize = 16;
    let mut buf = [0u8; 4096];
    for _ in 0..DRAIN_READS {
        match rustix::net::recv(sock, &mut buf, RecvFlags::DONTWAIT) {
            Ok((0, _)) => return false,
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => return true,
            Err(_) => return false,
        }
    }
    true
}

/// Non-blocking check that the peer has not closed its end.
pub(super) fn socket_alive(sock: &UnixStream) -> bool {
    let mut fds = [PollFd::new(sock, PollFlags::IN)];
    match poll(&mut fds, Some(&timespec(Duration::ZERO))) {
        Ok(0) => true,
        Ok(_) => {
            let ev = fds[0].revents();
            drain_socket(sock) && !ev.intersects(PollFlags::ERR | PollFlags::NVAL)
        }
        Err(_) => true,
    }
}

pub(super) fn timespec(d: Duration) -> rustix::time::Timespec {
    rustix::time::Timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: d.subsec_nanos() as _ }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: Duration = Duration::from_micros(50);
    const CEILING: Duration = Duration::from_millis(1);

    /// Notes `n` gaps of `gap`, back to back from `*t`.
    fn gaps(g: &mut IdleGaps, t: &mut Instant, n: usize, gap: Duration) {
        for _ in 0..n {
            let start = *t;
            *t += gap;
            g.note(start, *t, CEILING);
        }
    }

    #[test]
    fn the_spin_covers_twice_the_longest_recent_gap_and_forgets_it_after_two_windows() {
        let mut g = IdleGaps::default();
        let mut t = Instant::now();
        assert_eq!(g.spin(FLOOR, CEILING), FLOOR, "nothing seen: the floor");
        // Steady load: 1 µs gaps spin for the floor (10 x 1 µs is less).
        gaps(&mut g, &mut t, 10_000, Duration::from_micros(1));
        assert_eq!(g.spin(FLOOR, CEILING), FLOOR);
        // The peer's core is taken for 110 µs once (a tick on the guests).
        gaps(&mut g, &mut t, 1, Duration::from_micros(110));
        gaps(&mut g, &mut t, 10_000, Duration::from_micros(1));
        assert_eq!(g.spin(FLOOR, CEILING), Duration::from_micros(220));
        // A gap longer than the ceiling is idleness: it counts only towards
        // the average, which forgets it within a few hundred gaps.
        gaps(&mut g, &mut t, 1, Duration::from_millis(3));
        gaps(&mut g, &mut t, 200, Duration::from_micros(1));
        assert_eq!(g.spin(FLOOR, CEILING), Duration::from_micros(220));
        // Two windows later, with short gaps only, the spin is back down.
        for _ in 0..3 {
            gaps(&mut g, &mut t, 1, GAP_WINDOW);
            gaps(&mut g, &mut t, 50, Duration::from_micros(1));
        }
        assert_eq!(g.spin(FLOOR, CEILING), FLOOR, "{g:?}");
        // Within the ceiling always.
        gaps(&mut g, &mut t, 1, Duration::from_micros(900));
        assert_eq!(g.spin(FLOOR, CEILING), CEILING);
    }
}

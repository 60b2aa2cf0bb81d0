//! Ring sockets: the descriptor table and what each ring socket holds.
//!
//! A ring socket's descriptor number is a real kernel descriptor: one end
//! of a Unix socket pair whose other end the peer process holds. The pair
//! carries no data, only one-byte wake-ups (when the reader said it sleeps)
//! and, through the kernel, the peer's death or last close (`POLLHUP`). So
//! the number space, `close`, `dup`, `poll`/`epoll` of mixed sets and
//! process death behave as the kernel's. Data goes through two rings
//! (`cornflakes_datapath::shm::ring`), never through the kernel.
//!
//! Locks: [`TABLE`] is taken only for a descriptor whose [`MANAGED`] bit is
//! set, so calls on every other descriptor (including the ones this library
//! makes itself, with `rustix`'s raw system calls) never touch it.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use cornflakes_datapath::shm::ring::{ConsumerCursor, ProducerCursor, PushError, Ring};
use cornflakes_datapath::shm::words::SharedWords;
use cornflakes_datapath::shm::{recv_fds, send_fds, try_recv_fds, RingConsumer, RingProducer};
use cornflakes_socket::proto::{Frame, Op, CONNECT_FDS, FRAME_LEN, STATUS_OK};
use cornflakes_socket::MonitorAddr;
use libc::c_int;
use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType};

use crate::real::real;

/// An `errno` value.
pub(crate) type Errno = c_int;
/// A call's result: a value or the `errno` to report.
pub(crate) type Res<T> = Result<T, Errno>;

/// Descriptors at or above this are never ring sockets (the kernel path
/// serves them).
pub(crate) const MAX_FD: usize = 1 << 16;
/// Record `info` word of the end-of-stream record (`close`/`shutdown`).
const INFO_FIN: u32 = 1;
/// Record `info` word that moves the stream to a larger ring: its memfd was
/// sent just before over the socket pair (`SCM_RIGHTS`), and every later
/// byte is in the new ring.
const INFO_SWITCH: u32 = 2;
/// Full-ring waits of large writes after which a writer moves its stream to
/// a ring of `CFSOCKET_BULK_RING_SIZE` (bulk transfer wants a large ring,
/// request-response traffic a small one that stays in cache).
const UPGRADE_AFTER: u32 = 8;
/// Writes of at least this many bytes go to the ring with streaming
/// stores ([`RingProducer::stream_large_records`]): bulk data, read on the
/// other core after the writer has moved on.
const STREAMING_FROM: usize = 64 << 10;
/// Ring memfds the peer may have sent ahead of their switch records; more
/// are closed at once.
const MAX_INCOMING_RINGS: usize = 2;
/// Written by a reader into its ring's acknowledgement word when it will
/// never read again: the writer's next `send` fails with `EPIPE`.
const READER_GONE: u64 = u64::MAX;
/// Written by a writer into the acknowledgement word of the ring it
/// *reads* (the peer writes that ring, so the peer sees the word) while it
/// sleeps for credits: the peer's next read sends it a wake-up byte.
const WRITER_WAITING: u64 = 1;
/// Bit of the same word: our reading end is shared by forked processes,
/// which cannot all follow the stream to a new ring, so the peer's writer
/// must not move it to a bulk ring.
const NO_SWITCH: u64 = 2;
/// Full-ring waits spent spinning before sleeping for credits.
const SPIN_WAITS: u32 = 64;

static MANAGED: [AtomicBool; MAX_FD] = [const { AtomicBool::new(false) }; MAX_FD];
static TABLE: Mutex<BTreeMap<RawFd, Arc<Sock>>> = Mutex::new(BTreeMap::new());

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `fd` is a ring socket or a listening socket of ours (one atomic
/// load: the fast path of every interposed call).
#[inline]
pub(crate) fn is_managed(fd: RawFd) -> bool {
    usize::try_from(fd).ok().and_then(|i| MANAGED.get(i)).is_some_and(|m| m.load(Ordering::Acquire))
}

pub(crate) fn lookup(fd: RawFd) -> Option<Arc<Sock>> {
    if !is_managed(fd) {
        return None;
    }
    lock(&TABLE).get(&fd).cloned()
}

/// The sockets of `fds` that are ours, under one lock of the table.
pub(crate) fn lookup_many<T: Copy>(fds: &[(RawFd, T)]) -> Vec<(RawFd, T, Arc<Sock>)> {
    let table = lock(&TABLE);
    fds.iter().filter_map(|&(fd, t)| table.get(&fd).map(|s| (fd, t, s.clone()))).collect()
}

/// Every managed descriptor and its socket (for `exec`).
pub(crate) fn snapshot() -> Vec<(RawFd, Arc<Sock>)> {
    lock(&TABLE).iter().map(|(fd, s)| (*fd, s.clone())).collect()
}

pub(crate) fn insert(fd: RawFd, sock: Arc<Sock>) -> bool {
    let Some(flag) = usize::try_from(fd).ok().and_then(|i| MANAGED.get(i)) else { return false };
    lock(&TABLE).insert(fd, sock);
    flag.store(true, Ordering::Release);
    true
}

pub(crate) fn remove(fd: RawFd) -> Option<Arc<Sock>> {
    if !is_managed(fd) {
        return None;
    }
    let mut t = lock(&TABLE);
    let s = t.remove(&fd);
    if let Some(flag) = usize::try_from(fd).ok().and_then(|i| MANAGED.get(i)) {
        flag.store(false, Ordering::Release);
    }
    s
}

/// Before a `poll`/`epoll` call sleeps in the kernel: spins up to the spin
/// time for one of `socks` to become ready through its ring (a writer then
/// finds the data read at once, with no scheduler wake-up on our side).
/// Kernel descriptors in the same set wait at most this long extra.
///
/// Each socket comes with its edge-triggered state, if it is watched so: it
/// then counts as ready only with news since its last report.
pub(crate) fn spin_for_rings<'a>(socks: impl Iterator<Item = (&'a ConnSock, Option<Edge>)> + Clone) -> bool {
    // While we spin, writers need send no wake-up bytes (a system call on
    // each side per message otherwise).
    socks.clone().for_each(|(c, _)| c.disarm_for_spin());
    let until = Instant::now() + config().spin;
    // The rings are checked between single pauses (a pause is ~65 cycles on
    // Zen: 64 of them between checks added ~1 us to every round trip); the
    // clock every 64 checks of one ring, or after each pass over a large
    // set (1000 sockets: a pass is about the whole spin time).
    let passes = (64 / socks.clone().count().max(1)).max(1);
    'spin: loop {
        for _ in 0..passes {
            if socks.clone().any(|(c, edge)| c.has_news(c.ready(), edge.as_ref())) {
                break 'spin;
            }
            std::hint::spin_loop();
        }
        if Instant::now() >= until {
            break;
        }
    }
    arm_rings(socks)
}

/// Arms every ring's sleep flag before the caller sleeps in the kernel;
/// true if one has data after all (then do not sleep).
pub(crate) fn arm_rings<'a>(socks: impl Iterator<Item = (&'a ConnSock, Option<Edge>)>) -> bool {
    // Every one armed: no short circuit.
    let mut any = false;
    for (c, edge) in socks {
        any |= c.has_news(c.ready_armed(), edge.as_ref());
    }
    any
}

/// What an edge-triggered (`EPOLLET`) interest last reported, so that it
/// reports again only what is new: data that arrived since, the end of the
/// stream once, room to write once per time a write found the ring full.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Edge {
    /// Where the data it reported readable ended (`None`: not reported
    /// since `EPOLL_CTL_ADD`/`MOD`).
    in_mark: Option<u64>,
    eof_seen: bool,
    hup_seen: bool,
    /// [`ConnSock::full_events`] when it last reported `EPOLLOUT`.
    out_seen: Option<u64>,
}

/// Bumped in every child of `fork`: one atomic load tells a child's call
/// on an inherited ring socket from the parent's.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
/// Bumped by every `fork` prepare handler; a socket made ready for that
/// fork remembers the number ([`ConnSock::prepared_for`]).
static FORK_PREPARED: AtomicU64 = AtomicU64::new(0);
/// The pid of the process the table belongs to (set with the first
/// connection and in each forked child): a `vfork` child, which runs in
/// its parent's memory and runs no fork handler, has another.
static TABLE_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

thread_local! {
    /// The epoll sets and the table, locked from the prepare handler until
    /// the fork is done, so that the child's copies are not locked by a
    /// thread it does not have.
    static FORK_HELD: RefCell<Option<ForkHeld>> = const { RefCell::new(None) };
}

type ForkHeld = (MutexGuard<'static, EpollSets>, MutexGuard<'static, BTreeMap<RawFd, Arc<Sock>>>);

fn fork_generation() -> u64 {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        // The handlers take only our own locks, in the order every other
        // path takes them (sets, table).
        // SAFETY: registers three `extern "C"` handlers of ours.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(after_fork_child)) };
    });
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// `fork` is about to copy the process: every ring socket that can be
/// gets a page shared with the child, where both keep their positions and
/// take turns (see [`ForkShare`]).
extern "C" fn before_fork() {
    let sets = lock(&EPOLL_SETS);
    let table = lock(&TABLE);
    let seq = FORK_PREPARED.fetch_add(1, Ordering::Relaxed) + 1;
    for sock in table.values() {
        if let Sock::Conn(c) = &**sock {
            c.share_for_fork(seq);
        }
    }
    FORK_HELD.with(|h| *h.borrow_mut() = Some((sets, table)));
}

extern "C" fn after_fork_parent() {
    FORK_HELD.with(|h| drop(h.borrow_mut().take()));
}

extern "C" fn after_fork_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
    TABLE_PID.store(std::process::id(), Ordering::Relaxed);
    let held = FORK_HELD.with(|h| h.borrow_mut().take());
    if let Some((_, table)) = &held {
        let seq = FORK_PREPARED.load(Ordering::Relaxed);
        for sock in table.values() {
            if let Sock::Conn(c) = &**sock {
                c.check_inherited(seq);
            }
        }
    }
    drop(held);
}

/// Says once per process, on stderr, that the program used something the
/// library does not support yet (the call then fails with EOPNOTSUPP).
pub(crate) fn unsupported(what: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        let line = format!(
            "libcfsocket[{}]: not supported yet: {what} (EOPNOTSUPP); see docs/sockets.md\n",
            std::process::id()
        );
        let _ = rustix::io::write(stderr(), line.as_bytes());
    }
}

/// Knobs read once from the environment.
pub(crate) struct Config {
    /// Data bytes of each direction's ring (`CFSOCKET_RING_SIZE`, a power of two).
    ring_size: usize,
    /// Data bytes of a ring that a bulk writer moves to
    /// (`CFSOCKET_BULK_RING_SIZE`, a power of two; 0: never).
    bulk_ring_size: usize,
    /// How long a blocking call polls its ring before sleeping (`CFSOCKET_SPIN_US`).
    spin: Duration,
    /// Print why a connection went to the kernel (`CFSOCKET_DEBUG=1`).
    pub(crate) debug: bool,
}

pub(crate) fn config() -> &'static Config {
    static C: OnceLock<Config> = OnceLock::new();
    C.get_or_init(|| {
        let num = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
        Config {
            ring_size: num("CFSOCKET_RING_SIZE", 256 * 1024),
            bulk_ring_size: num("CFSOCKET_BULK_RING_SIZE", 4 << 20),
            spin: Duration::from_micros(num("CFSOCKET_SPIN_US", 50) as u64),
            debug: std::env::var("CFSOCKET_DEBUG").is_ok_and(|v| v == "1"),
        }
    })
}

/// The lowest number for the descriptors the library holds for itself
/// (ring memfds, the private wake-up end, stand-in sockets): half the
/// current soft `RLIMIT_NOFILE`. Below it the program's own descriptors stay
/// as dense as without the library; programs size tables by them (wrk's
/// event loop takes 10 + 3 per connection and refuses any number above).
fn private_floor() -> RawFd {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    // Small limits leave no room to spare: use them as the kernel would.
    if soft < 256 {
        0
    } else {
        (soft / 2).min(1 << 20) as RawFd
    }
}

/// `fd` renumbered at or above [`private_floor`] (close-on-exec), or `fd`
/// itself when no such number is free.
fn park(fd: OwnedFd) -> OwnedFd {
    match rustix::io::fcntl_dupfd_cloexec(&fd, private_floor()) {
        Ok(high) => high,
        Err(_) => fd,
    }
}

/// Moves both rings' memfds above [`private_floor`] (kept where they are if
/// no such number is free).
fn park_rings(tx: &mut RingProducer, rx: &mut RingConsumer) {
    let floor = private_floor();
    let _ = tx.move_memfd_above(floor);
    let _ = rx.move_memfd_above(floor);
}

pub(crate) fn debug(msg: std::fmt::Arguments<'_>) {
    if config().debug {
        let line = format!("libcfsocket[{}]: {msg}\n", std::process::id());
        let _ = rustix::io::write(stderr(), line.as_bytes());
    }
}

pub(crate) fn stderr() -> BorrowedFd<'static> {
    // SAFETY: descriptor 2 is only written to; if the program closed it the
    // write fails with EBADF, which we ignore.
    unsafe { BorrowedFd::borrow_raw(2) }
}

fn errno_of(e: rustix::io::Errno) -> Errno {
    e.raw_os_error()
}

fn io_errno(e: &std::io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// What a managed descriptor is.
// Always behind an `Arc`, one allocation per socket: the size difference
// costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Sock {
    /// A listening socket: the descriptor is the kernel's (the twin that
    /// takes remote clients); local clients arrive on `channel`.
    Listen(ListenSock),
    /// A connection over rings.
    Conn(ConnSock),
}

pub(crate) struct ListenSock {
    /// Accept channel from the monitor (`None` once the monitor is gone).
    pub(crate) channel: Mutex<Option<OwnedFd>>,
    /// The program's `O_NONBLOCK`; the kernel twin is always non-blocking.
    pub(crate) nonblock: AtomicBool,
    /// The address registered with the monitor.
    local: SocketAddrV4,
    /// Without a channel: when `accept` may next try to register again (a
    /// monitor started or restarted after `listen`).
    next_retry: Mutex<Option<Instant>>,
}

/// Least time between two attempts of a listener to reach a monitor.
const REGISTER_RETRY: Duration = Duration::from_millis(200);

/// A ring endpoint that may move between threads.
struct Movable<T>(T);

// SAFETY: a ring endpoint owns its mapping and memfd outright and keeps no
// thread-bound state; here each one lives behind a `Mutex`, so only one
// thread at a time uses it (the peer process is the only other party, and
// it is handled through atomics and raw copies, never references).
unsafe impl Send for Movable<RingProducer> {}
// SAFETY: as for the producer.
unsafe impl Send for Movable<RingConsumer> {}

impl<T> std::ops::Deref for Movable<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Movable<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// What forked processes that share one connection keep in common: a
/// page made by the `fork` prepare handler, the same memory in the parent
/// and the child (and their later children). Each end of the connection
/// has a lock word (the holder's pid) and its ring position; whoever holds
/// the lock continues from the saved position and saves its own when done.
/// So parent and child may both read and write, as with a kernel socket,
/// each call whole. The stream ends for the peer at the last close.
struct ForkShare {
    words: SharedWords,
}

/// Page words (the writing end's on one cache line, the reading end's on
/// the next).
const W_TX_LOCK: usize = 0;
const W_TX_TAIL: usize = 1;
const W_TX_CREDITS: usize = 2;
const W_TX_SHUT: usize = 3;
const W_RX_LOCK: usize = 8;
const W_RX_HEAD: usize = 9;
const W_RX_RETURNED: usize = 10;
const W_RX_OFFSET: usize = 11;
/// Bits: [`RX_EOF`], [`RX_SHUT`].
const W_RX_FLAGS: usize = 12;
/// Bulk-ring switches of the reading end so far (a process that did not
/// take one cannot follow: it has no descriptor of the new ring).
const W_RX_SWITCHES: usize = 13;
/// Processes that hold the connection.
const W_REFS: usize = 16;
const SHARE_WORDS: usize = 17;
const RX_EOF: u64 = 1;
const RX_SHUT: u64 = 2;

impl ForkShare {
    fn word(&self, i: usize) -> &AtomicU64 {
        self.words.word(i)
    }

    /// Takes the lock word `at` for this process: spins, then sleeps 20 µs
    /// at a time; a holder that died is replaced. `EAGAIN` at once when
    /// `nonblock` and another process holds it.
    fn lock(&self, at: usize, nonblock: bool) -> Res<()> {
        let me = u64::from(std::process::id());
        let w = self.word(at);
        let mut tries = 0u32;
        loop {
            match w.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(holder) if holder == me || (tries % 1024 == 1023 && !process_alive(holder)) => {
                    // A holder with our pid is a dead process's (ours
                    // release before they return); a dead one's, likewise.
                    if w.compare_exchange(holder, me, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                        return Ok(());
                    }
                }
                Err(_) if nonblock => return Err(libc::EAGAIN),
                Err(_) => backoff(tries),
            }
            tries = tries.wrapping_add(1);
        }
    }

    fn unlock(&self, at: usize) {
        self.word(at).store(0, Ordering::Release);
    }
}

fn process_alive(pid: u64) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return false };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

struct Tx {
    ring: Movable<RingProducer>,
    shut: bool,
    /// Full-ring waits of large writes so far (see [`UPGRADE_AFTER`]).
    full_hits: u32,
    /// The stream moved (or tried to move) to a bulk ring.
    upgraded: bool,
    /// Shared with forked processes since a `fork`.
    share: Option<Arc<ForkShare>>,
}

struct Rx {
    ring: Movable<RingConsumer>,
    /// Bytes popped but not yet read: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    scratch: Vec<u8>,
    /// Bytes of the head record already read ([`RingConsumer::read_partial`]).
    offset: usize,
    /// A switch record was popped: the next bytes are in the ring whose
    /// memfd came over the pair ([`ConnSock::switch_rx`]).
    switch_pending: bool,
    eof: bool,
    shut: bool,
    /// The sleep flag is clear because we cleared it (spinning), so no
    /// wake-up byte is owed to the socket pair.
    self_disarmed: bool,
    /// Shared with forked processes since a `fork`.
    share: Option<Arc<ForkShare>>,
    /// Bulk-ring switches this process followed (see [`W_RX_SWITCHES`]).
    switches: u64,
}

impl Rx {
    fn avail(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// With nothing buffered, reads the ring straight into the program's
    /// buffers from byte `at` on (one copy, as the kernel's read; a record
    /// longer than the buffers is read in parts); the bytes copied.
    fn read_direct(&mut self, bufs: &mut [&mut [u8]], mut at: usize) -> Res<usize> {
        let start = at;
        while self.avail() == 0 && !self.eof && !self.switch_pending {
            let Some(dst) = slice_at(bufs, at) else { break };
            match self.ring.read_partial(dst, &mut self.offset) {
                Ok(Some((_, INFO_FIN))) => self.eof = true,
                Ok(Some((_, INFO_SWITCH))) => self.switch_pending = true,
                Ok(Some((n, _))) => at += n,
                Ok(None) => break,
                Err(_) => return Err(libc::ECONNRESET),
            }
        }
        Ok(at - start)
    }

    /// Appends the rest of the head record to `buf` (for `MSG_PEEK` and
    /// `FIONREAD`, which look without consuming); false when none is there.
    fn pull(&mut self) -> Res<bool> {
        if self.eof || self.switch_pending {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let room = self.ring.max_len();
        if self.scratch.len() < room {
            self.scratch.resize(room, 0);
        }
        match self.ring.read_partial(&mut self.scratch[..room], &mut self.offset) {
            Ok(Some((_, INFO_FIN))) => {
                self.eof = true;
                Ok(false)
            }
            Ok(Some((_, INFO_SWITCH))) => {
                self.switch_pending = true;
                Ok(false)
            }
            Ok(Some((n, _))) => {
                self.buf.extend_from_slice(&self.scratch[..n]);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(_) => Err(libc::ECONNRESET),
        }
    }
}

/// Room the switch record needs (a record header).
const SWITCH_RECORD_ROOM: usize = 16;

/// The rest of the buffer that byte `at` of `bufs` (taken as one run)
/// falls in; `None` at the end.
fn slice_at<'a>(bufs: &'a mut [&mut [u8]], mut at: usize) -> Option<&'a mut [u8]> {
    for b in bufs.iter_mut() {
        if at < b.len() {
            return Some(&mut b[at..]);
        }
        at -= b.len();
    }
    None
}

pub(crate) struct ConnSock {
    tx: Mutex<Tx>,
    rx: Mutex<Rx>,
    /// Ring memfds the peer sent over the pair, waiting for their switch
    /// records.
    incoming: Mutex<Vec<OwnedFd>>,
    /// `Tx::shut`, readable without the lock (readiness scans read it for
    /// every socket of a set on every call).
    wr_shut: AtomicBool,
    pub(crate) local: SocketAddrV4,
    pub(crate) peer: SocketAddrV4,
    /// The program's `O_NONBLOCK` (the pair end itself is always non-blocking).
    pub(crate) nonblock: AtomicBool,
    /// Our end of the socket pair (a private duplicate of the program's
    /// descriptor, so that `dup`/`close` by the program cannot pull it away).
    wake: OwnedFd,
    /// A kernel TCP socket that answers `setsockopt`/`getsockopt` as the
    /// kernel would (for a connector: the very socket the program created).
    pub(crate) shadow: OwnedFd,
    /// The pair hung up with no FIN record: the peer process died (or
    /// closed without us), so writes fail with EPIPE.
    peer_gone: AtomicBool,
    /// The fork generation that set the connection up. A forked child
    /// inherits the table; without a [`ForkShare`] it must neither end the
    /// stream when it closes its copy nor use the rings (their positions
    /// live in each process).
    generation: u64,
    /// Has a [`ForkShare`] (set before the `fork` that shares it).
    shared: AtomicBool,
    /// The prepare handler that last counted this process's child in the
    /// share's holders ([`FORK_PREPARED`]).
    prepared_for: AtomicU64,
    /// In a forked child: the connection was busy in another thread of the
    /// parent at the instant of the fork, so this copy's state is not
    /// whole; every call fails with EOPNOTSUPP.
    lost: AtomicBool,
    /// Writes that found the ring full and returned `EAGAIN` (an
    /// edge-triggered `EPOLLOUT` is due once after each).
    full_events: AtomicU64,
    /// [`has_room`](Self::has_room) announced a waiting writer (withdrawn
    /// when room is reported).
    out_waiting: AtomicBool,
    /// `O_ASYNC` (`FIOASYNC`): the sleep flag stays armed, so that every
    /// arrival sends a wake-up byte and the kernel signals the pair end's
    /// owner (`SIGIO`).
    async_io: AtomicBool,
}

/// One half of a connection (its writing or reading end) as forked
/// processes share it: where it stands is saved to the share, and which
/// lock word of the share guards it.
trait Half {
    /// The share's lock word of this half.
    const LOCK: usize;
    fn share(&self) -> Option<&ForkShare>;
    /// Writes this process's position to the share.
    fn save(&self, sh: &ForkShare);
}

/// A connection's half, locked: by this process's threads and, once
/// shared by `fork`, by the other processes too. Saves the position for
/// them and releases the share's lock when dropped.
struct Held<'a, T: Half>(MutexGuard<'a, T>);

impl<T: Half> std::ops::Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Half> std::ops::DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Half> Drop for Held<'_, T> {
    fn drop(&mut self) {
        if let Some(sh) = self.0.share() {
            self.0.save(sh);
            sh.unlock(T::LOCK);
        }
    }
}

impl Half for Tx {
    const LOCK: usize = W_TX_LOCK;
    fn share(&self) -> Option<&ForkShare> {
        self.share.as_deref()
    }
    fn save(&self, sh: &ForkShare) {
        let c = self.ring.cursor();
        sh.word(W_TX_TAIL).store(c.tail, Ordering::Relaxed);
        sh.word(W_TX_CREDITS).store(c.credits, Ordering::Relaxed);
        sh.word(W_TX_SHUT).store(self.shut as u64, Ordering::Relaxed);
    }
}

impl Tx {
    /// Continues from the position the share holds (under its lock).
    fn load(&mut self, sh: &ForkShare) {
        self.ring.resume(ProducerCursor {
            tail: sh.word(W_TX_TAIL).load(Ordering::Acquire),
            credits: sh.word(W_TX_CREDITS).load(Ordering::Relaxed),
        });
        self.shut = sh.word(W_TX_SHUT).load(Ordering::Relaxed) != 0;
    }
}

impl Half for Rx {
    const LOCK: usize = W_RX_LOCK;
    fn share(&self) -> Option<&ForkShare> {
        self.share.as_deref()
    }
    fn save(&self, sh: &ForkShare) {
        let c = self.ring.cursor();
        sh.word(W_RX_HEAD).store(c.head, Ordering::Relaxed);
        sh.word(W_RX_RETURNED).store(c.returned, Ordering::Relaxed);
        sh.word(W_RX_OFFSET).store(self.offset as u64, Ordering::Relaxed);
        let flags = if self.eof { RX_EOF } else { 0 } | if self.shut { RX_SHUT } else { 0 };
        sh.word(W_RX_FLAGS).store(flags, Ordering::Relaxed);
        sh.word(W_RX_SWITCHES).store(self.switches, Ordering::Relaxed);
    }
}

impl Rx {
    /// Continues from the position the share holds (under its lock, or
    /// without it for a readiness check, which may then be stale); fails
    /// when another process followed a ring switch we cannot follow.
    fn load(&mut self) -> Res<()> {
        let Some(sh) = self.share.clone() else { return Ok(()) };
        if sh.word(W_RX_SWITCHES).load(Ordering::Acquire) != self.switches {
            unsupported("a ring socket shared through fork whose peer moved it to a bulk ring");
            return Err(libc::ECONNRESET);
        }
        self.ring.resume(ConsumerCursor {
            head: sh.word(W_RX_HEAD).load(Ordering::Acquire),
            returned: sh.word(W_RX_RETURNED).load(Ordering::Relaxed),
        });
        self.offset = sh.word(W_RX_OFFSET).load(Ordering::Relaxed) as usize;
        let flags = sh.word(W_RX_FLAGS).load(Ordering::Relaxed);
        self.eof = flags & RX_EOF != 0;
        self.shut = flags & RX_SHUT != 0;
        Ok(())
    }

    /// `MSG_PEEK` of a shared reading end: the rest of the head record
    /// only (the kernel too may return fewer bytes than asked), nothing
    /// consumed but an end-of-stream or switch record.
    fn peek_shared(&mut self, bufs: &mut [&mut [u8]]) -> Res<usize> {
        let Some(dst) = slice_at(bufs, 0) else { return Ok(0) };
        match self.ring.peek_partial(dst, self.offset) {
            Ok(Some((_, _, info @ (INFO_FIN | INFO_SWITCH)))) => {
                let _ = self.ring.read_partial(&mut [], &mut self.offset);
                if info == INFO_FIN {
                    self.eof = true;
                } else {
                    self.switch_pending = true;
                }
                Ok(0)
            }
            Ok(Some((n, _, _))) => Ok(n),
            Ok(None) => Ok(0),
            Err(_) => Err(libc::ECONNRESET),
        }
    }
}

impl Drop for ConnSock {
    fn drop(&mut self) {
        if self.lost.load(Ordering::Relaxed) {
            return;
        }
        if self.shared.load(Ordering::Relaxed) {
            let Ok(tx) = self.tx.get_mut() else { return };
            // Other processes still hold the connection: it goes on.
            if tx.share.as_ref().is_some_and(|sh| sh.word(W_REFS).fetch_sub(1, Ordering::AcqRel) > 1) {
                return;
            }
        } else if !self.same_process() {
            return;
        }
        // Last descriptor closed: end of stream for the peer, and its next
        // write fails with EPIPE. Dropping `wake` then hangs up the pair.
        let Ok(mut tx) = self.lock_tx(false) else { return };
        if !tx.shut {
            tx.shut = true;
            let _ = tx.ring.try_push_info(&[], INFO_FIN);
        }
        if let Ok(rx) = self.lock_rx(false) {
            rx.ring.set_acked(READER_GONE);
        }
        self.wake_peer(&tx);
    }
}

fn would_block(flags: c_int, nonblock: &AtomicBool) -> bool {
    flags & libc::MSG_DONTWAIT != 0 || nonblock.load(Ordering::Relaxed)
}

fn epipe(flags: c_int) -> Errno {
    if flags & libc::MSG_NOSIGNAL == 0 {
        // SAFETY: raise(3) is async-signal-safe and takes no pointer.
        unsafe { libc::raise(libc::SIGPIPE) };
    }
    libc::EPIPE
}

/// Readiness of a ring socket, as `poll` bits.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ready {
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) rdhup: bool,
    pub(crate) hup: bool,
}

impl ConnSock {
    fn new(
        mut tx: RingProducer,
        rx: RingConsumer,
        wake: OwnedFd,
        shadow: OwnedFd,
        local: SocketAddrV4,
        peer: SocketAddrV4,
        nonblock: bool,
    ) -> Self {
        // Armed from the start: a program that waits in the kernel without
        // calling us first (a plain read of the wake end is impossible, but
        // an epoll set built before) is still woken.
        rx.set_sleeping(true);
        tx.stream_large_records(STREAMING_FROM);
        Self {
            tx: Mutex::new(Tx { ring: Movable(tx), shut: false, full_hits: 0, upgraded: false, share: None }),
            incoming: Mutex::new(Vec::new()),
            wr_shut: AtomicBool::new(false),
            rx: Mutex::new(Rx {
                ring: Movable(rx),
                buf: Vec::new(),
                pos: 0,
                scratch: Vec::new(),
                offset: 0,
                switch_pending: false,
                eof: false,
                shut: false,
                self_disarmed: false,
                share: None,
                switches: 0,
            }),
            local,
            peer,
            nonblock: AtomicBool::new(nonblock),
            wake,
            shadow,
            peer_gone: AtomicBool::new(false),
            generation: {
                let _ = TABLE_PID.compare_exchange(0, std::process::id(), Ordering::Relaxed, Ordering::Relaxed);
                fork_generation()
            },
            shared: AtomicBool::new(false),
            prepared_for: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            full_events: AtomicU64::new(0),
            out_waiting: AtomicBool::new(false),
            async_io: AtomicBool::new(false),
        }
    }

    /// After a publish: wake the reader if it said it sleeps.
    fn wake_peer(&self, tx: &Tx) {
        // Pairs with the reader's SeqCst flag store then ring check: one of
        // the two sides sees the other.
        fence(Ordering::SeqCst);
        if tx.ring.take_peer_sleeping() {
            // A full pair buffer means wake-ups are already pending.
            let _ = rustix::net::send(&self.wake, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
        }
    }

    fn peer_hung_up(&self) -> bool {
        let mut p = [PollFd::new(&self.wake, PollFlags::empty())];
        matches!(rustix::event::poll(&mut p, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(n) if n > 0)
            && p[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
    }

    fn drain_wakeups(&self) {
        let mut b = [0u8; 64];
        loop {
            // Wake-up bytes, and any ring memfd the peer sent with one.
            match try_recv_fds(&self.wake, &mut b) {
                Ok((0, _)) | Err(_) => break,
                Ok((_, fds)) if fds.is_empty() => {}
                Ok((_, fds)) => {
                    let mut incoming = lock(&self.incoming);
                    for fd in fds {
                        if incoming.len() < MAX_INCOMING_RINGS {
                            incoming.push(park(fd));
                        }
                    }
                }
            }
        }
    }

    /// Moves our stream to a bulk ring: its memfd goes over the pair, then
    /// a switch record into the current ring, after which we write the new
    /// one. Once per connection; nothing changes if a step fails before the
    /// switch record.
    fn upgrade_tx(&self, tx: &mut Tx) {
        let size = config().bulk_ring_size;
        if size <= tx.ring.size() || tx.ring.known_free() < SWITCH_RECORD_ROOM {
            return;
        }
        tx.upgraded = true;
        let Ok((mut producer, mut consumer)) = Ring::create(size) else { return };
        park_rings(&mut producer, &mut consumer);
        producer.stream_large_records(STREAMING_FROM);
        if send_fds(&self.wake, &[0], &[consumer.memfd()]).is_err() {
            return;
        }
        drop(consumer);
        if tx.ring.try_push_info(&[], INFO_SWITCH).is_err() {
            // The peer holds an unused memfd until it closes; we stay.
            return;
        }
        // A reader asleep on the old ring wakes, pops the switch and
        // attaches the new one before it reads again.
        self.wake_peer(tx);
        tx.ring = Movable(producer);
        debug(format_args!("{} -> {}: moved to a {size}-byte ring", self.local, self.peer));
    }

    /// After a switch record: attach the ring whose memfd the peer sent.
    fn switch_rx(&self, rx: &mut Rx) -> Res<()> {
        rx.switch_pending = false;
        if lock(&self.incoming).is_empty() {
            self.drain_wakeups();
        }
        let fd = {
            let mut incoming = lock(&self.incoming);
            if incoming.is_empty() {
                return Err(libc::ECONNRESET);
            }
            incoming.remove(0)
        };
        let ring = RingConsumer::attach(fd).map_err(|_| libc::ECONNRESET)?;
        // The reader's intent carries over: armed, the writer's next
        // publish on the new ring sends a wake-up.
        ring.set_sleeping(rx.ring.sleeping_flag());
        rx.ring = Movable(ring);
        rx.switches += 1;
        Ok(())
    }

    fn same_process(&self) -> bool {
        self.generation == fork_generation()
    }

    /// A forked child using an inherited ring socket that could not be
    /// shared: refused, loudly.
    fn check_process(&self) -> Res<()> {
        if !self.lost.load(Ordering::Relaxed) && (self.shared.load(Ordering::Relaxed) || self.same_process()) {
            return Ok(());
        }
        unsupported("reading or writing a ring socket inherited through fork while another thread used it");
        Err(libc::EOPNOTSUPP)
    }

    /// The writing half, locked (see [`Held`]); `EAGAIN` when `nonblock`
    /// and another process is writing.
    fn lock_tx(&self, nonblock: bool) -> Res<Held<'_, Tx>> {
        let mut tx = lock(&self.tx);
        if let Some(sh) = tx.share.clone() {
            sh.lock(W_TX_LOCK, nonblock)?;
            tx.load(&sh);
        }
        Ok(Held(tx))
    }

    /// The reading half, locked (see [`Held`]).
    fn lock_rx(&self, nonblock: bool) -> Res<Held<'_, Rx>> {
        let mut rx = lock(&self.rx);
        if let Some(sh) = rx.share.clone() {
            sh.lock(W_RX_LOCK, nonblock)?;
            if let Err(e) = rx.load() {
                // Nothing of ours is saved over the share.
                sh.unlock(W_RX_LOCK);
                return Err(e);
            }
        }
        Ok(Held(rx))
    }

    /// The reading half for a readiness check, without waiting: `None`
    /// when another thread holds it. A shared one is brought to the
    /// position another process saved last (not locked: the answer may be
    /// stale, as any readiness answer may be by the time it is used).
    fn try_rx(&self) -> Option<MutexGuard<'_, Rx>> {
        let mut rx = self.rx.try_lock().ok()?;
        if rx.share.is_some() && rx.load().is_err() {
            rx.eof = true;
        }
        Some(rx)
    }

    /// From the `fork` prepare handler (the table locked): gives the
    /// connection a [`ForkShare`] if it has none, and counts the child
    /// among its holders. A connection busy in another thread, or with
    /// bytes a `MSG_PEEK` pulled into this process's buffer, is not
    /// shared: the child's calls on it fail with EOPNOTSUPP.
    fn share_for_fork(&self, seq: u64) {
        if self.lost.load(Ordering::Relaxed) || !(self.same_process() || self.shared.load(Ordering::Relaxed)) {
            return;
        }
        let (Ok(mut tx), Ok(mut rx)) = (self.tx.try_lock(), self.rx.try_lock()) else { return };
        if let Some(sh) = &tx.share {
            sh.word(W_REFS).fetch_add(1, Ordering::AcqRel);
            self.prepared_for.store(seq, Ordering::Relaxed);
            return;
        }
        if self.install_share(&mut tx, &mut rx, 2).is_some() {
            self.prepared_for.store(seq, Ordering::Relaxed);
        }
    }

    /// Gives the connection its [`ForkShare`], holding `holders` processes,
    /// with this process's positions; `None` when it cannot be shared
    /// (bytes a peek pulled into this process, a switch under way, no
    /// memory).
    fn install_share(&self, tx: &mut Tx, rx: &mut Rx, holders: u64) -> Option<Arc<ForkShare>> {
        if rx.avail() > 0 || rx.switch_pending {
            return None;
        }
        let mut words = SharedWords::create(SHARE_WORDS).ok()?;
        let _ = words.move_memfd_above(private_floor());
        let sh = Arc::new(ForkShare { words });
        tx.save(&sh);
        rx.save(&sh);
        sh.word(W_REFS).store(holders, Ordering::Release);
        // Neither our writer nor the peer's may move to a bulk ring now.
        tx.upgraded = true;
        rx.ring.set_acked(NO_SWITCH);
        tx.share = Some(sh.clone());
        rx.share = Some(sh.clone());
        self.shared.store(true, Ordering::Relaxed);
        Some(sh)
    }

    /// Before `exec`: the connection's state goes to its share (made now
    /// if it has none; this process stays its holder through the new
    /// image), and its ring and share memfds to descriptors the new image
    /// inherits. Returns them and the `CFSOCKET_INHERIT` entry that names
    /// them, or `None` when the connection cannot follow (not usable here,
    /// busy in another thread, peeked bytes).
    pub(crate) fn handoff_for_exec(&self, fd: RawFd) -> Option<(Vec<OwnedFd>, String)> {
        if self.lost.load(Ordering::Relaxed) || !(self.shared.load(Ordering::Relaxed) || self.same_process()) {
            return None;
        }
        let (Ok(mut tx), Ok(mut rx)) = (self.tx.try_lock(), self.rx.try_lock()) else { return None };
        // A `vfork` child's new image is one more holder (its parent goes
        // on); a forked child's was counted at the fork.
        let vforked = TABLE_PID.load(Ordering::Relaxed) != std::process::id();
        let sh = match tx.share.clone() {
            Some(sh) => {
                if vforked {
                    sh.word(W_REFS).fetch_add(1, Ordering::AcqRel);
                }
                sh
            }
            None => self.install_share(&mut tx, &mut rx, 1 + u64::from(vforked))?,
        };
        let inheritable = |b: BorrowedFd<'_>| -> Option<OwnedFd> {
            // The new number, without close-on-exec, is wrapped at once.
            // SAFETY: F_DUPFD of a descriptor we hold.
            let r = unsafe { (real().fcntl)(b.as_raw_fd(), libc::F_DUPFD, private_floor()) };
            // SAFETY: `r` is a fresh descriptor nobody else owns.
            (r >= 0).then(|| unsafe { OwnedFd::from_raw_fd(r) })
        };
        let fds = vec![inheritable(tx.ring.memfd())?, inheritable(rx.ring.memfd())?, inheritable(sh.words.memfd())?];
        let entry = format!(
            "{fd},{},{},{},{},{},{},{}",
            fds[0].as_raw_fd(),
            fds[1].as_raw_fd(),
            fds[2].as_raw_fd(),
            self.local,
            self.peer,
            u8::from(self.nonblock.load(Ordering::Relaxed)),
            rx.switches
        );
        Some((fds, entry))
    }

    /// Our private end of the socket pair (the program's number names
    /// another copy of it).
    pub(crate) fn wake_end(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// From the `fork` child handler: a shared connection that was busy in
    /// another thread of the parent at the instant of the fork (its locks
    /// are held in this copy by a thread that does not exist here), or that
    /// the prepare handler could not count, is lost to the child.
    fn check_inherited(&self, seq: u64) {
        if !self.shared.load(Ordering::Relaxed) {
            return;
        }
        let whole = self.prepared_for.load(Ordering::Relaxed) == seq
            && self.tx.try_lock().is_ok()
            && self.rx.try_lock().is_ok()
            && self.incoming.try_lock().is_ok();
        if !whole {
            self.lost.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn send(&self, bufs: &[&[u8]], flags: c_int) -> Res<usize> {
        self.check_process()?;
        let nonblock = would_block(flags, &self.nonblock);
        let mut tx = self.lock_tx(nonblock)?;
        if tx.shut || tx.ring.acked() == READER_GONE || self.peer_gone.load(Ordering::Relaxed) {
            return Err(epipe(flags));
        }
        let mut sent = 0usize;
        for buf in bufs {
            let mut rest: &[u8] = buf;
            let mut waits = 0u32;
            let mut announced = false;
            while !rest.is_empty() {
                if tx.full_hits >= UPGRADE_AFTER && !tx.upgraded && tx.ring.acked() & NO_SWITCH == 0 {
                    self.upgrade_tx(&mut tx);
                }
                let max = tx.ring.max_len();
                let n = rest.len().min(max);
                match tx.ring.try_push(&rest[..n]) {
                    Ok(()) => {
                        sent += n;
                        rest = &rest[n..];
                        waits = 0;
                        if announced {
                            announced = !self.announce_waiting(false);
                        }
                    }
                    Err(PushError::Full) => {
                        self.wake_peer(&tx);
                        if rest.len() >= max / 2 && waits == 0 {
                            tx.full_hits = tx.full_hits.saturating_add(1);
                        }
                        if nonblock {
                            if sent == 0 && self.peer_hung_up() {
                                self.peer_gone.store(true, Ordering::Relaxed);
                                return Err(epipe(flags));
                            }
                            self.full_events.fetch_add(1, Ordering::Relaxed);
                            return if sent > 0 { Ok(sent) } else { Err(libc::EAGAIN) };
                        }
                        if tx.ring.acked() == READER_GONE
                            || (waits > 256 && waits.is_multiple_of(64) && self.peer_hung_up())
                        {
                            return if sent > 0 { Ok(sent) } else { Err(epipe(flags)) };
                        }
                        if waits >= SPIN_WAITS && !announced {
                            // Announce, then try once more before sleeping.
                            announced = self.announce_waiting(true);
                            if announced {
                                continue;
                            }
                        }
                        if announced {
                            self.sleep_for_credits();
                        } else {
                            // Spinning, or the announcement is impossible
                            // now (another thread holds our reading half).
                            backoff(waits);
                        }
                        waits += 1;
                    }
                    Err(PushError::TooLarge { .. }) => return Err(libc::EMSGSIZE),
                    Err(PushError::Corrupt) => return Err(libc::ECONNRESET),
                }
            }
        }
        self.wake_peer(&tx);
        Ok(sent)
    }

    /// `recv`/`read`/`readv`/`recvmsg` into `bufs` (written in order).
    pub(crate) fn recv(&self, bufs: &mut [&mut [u8]], flags: c_int) -> Res<usize> {
        self.check_process()?;
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let peek = flags & libc::MSG_PEEK != 0;
        let waitall = flags & libc::MSG_WAITALL != 0 && !peek;
        let nonblock = would_block(flags, &self.nonblock);
        let mut rx = self.lock_rx(nonblock)?;
        if rx.shut || want == 0 {
            return Ok(0);
        }
        let mut copied = 0usize;
        loop {
            if !peek {
                copied += rx.read_direct(bufs, copied)?;
            } else if rx.share.is_some() {
                copied += rx.peek_shared(bufs)?;
            }
            let need = want - copied;
            // A shared reading end buffers nothing in one process.
            while rx.share.is_none() && rx.avail() < need && rx.pull()? {}
            if rx.switch_pending {
                self.switch_rx(&mut rx)?;
                continue;
            }
            let n = rx.avail().min(need);
            if n > 0 {
                scatter(bufs, copied, &rx.buf[rx.pos..rx.pos + n]);
                if !peek {
                    rx.pos += n;
                }
                copied += n;
            }
            if copied == want || peek && copied > 0 || copied > 0 && !waitall || rx.eof {
                break;
            }
            if nonblock {
                if self.peer_hung_up() && !rx.ring.has_data_seqcst() {
                    self.hung_up(&mut rx);
                    break;
                }
                if copied > 0 {
                    break;
                }
                return Err(libc::EAGAIN);
            }
            if let Err(e) = self.wait_readable(&mut rx) {
                if copied > 0 {
                    break;
                }
                return Err(e);
            }
        }
        if self.async_io.load(Ordering::Relaxed) {
            // The next arrival signals again.
            self.arm(&mut rx);
        }
        drop(rx);
        if copied > 0 && !peek {
            self.wake_waiting_writer();
        }
        Ok(copied)
    }

    /// Announces (or withdraws) that our writer sleeps for credits, in the
    /// acknowledgement word of the ring from the peer (the peer writes that
    /// ring, so it reads the word). False when our reading half is busy in
    /// another thread: then no announcement (the writer polls instead).
    fn announce_waiting(&self, waiting: bool) -> bool {
        let Ok(rx) = self.rx.try_lock() else { return false };
        let shared = if rx.share.is_some() { NO_SWITCH } else { 0 };
        rx.ring.set_acked(shared | if waiting { WRITER_WAITING } else { 0 });
        drop(rx);
        // Pairs with the reader's credit return then fence then flag load.
        fence(Ordering::SeqCst);
        true
    }

    /// Sleeps on the pair until the peer has read (it then sends a byte),
    /// at most 1 ms.
    fn sleep_for_credits(&self) {
        let mut p = [PollFd::new(&self.wake, PollFlags::IN)];
        let _ = rustix::event::poll(&mut p, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 1_000_000 }));
        if !p[0].revents().is_empty() {
            // Bytes meant for our reader go too: it re-checks its ring after
            // arming its flag, so it loses nothing.
            self.drain_wakeups();
        }
    }

    /// After a read: if the peer's writer sleeps for credits, wake it.
    fn wake_waiting_writer(&self) {
        let Ok(tx) = self.tx.try_lock() else { return };
        fence(Ordering::SeqCst);
        let acked = tx.ring.acked();
        if acked != READER_GONE && acked & WRITER_WAITING != 0 {
            let _ = rustix::net::send(&self.wake, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
        }
    }

    /// Spins on the ring, then sleeps on the socket pair until a wake-up,
    /// the peer's hang-up or a signal.
    fn wait_readable(&self, rx: &mut Rx) -> Res<()> {
        // Spinning: clear the flag so the writer sends no wake-up.
        let was_armed = rx.ring.sleeping_flag();
        rx.ring.set_sleeping(false);
        rx.self_disarmed = was_armed;
        let until = Instant::now() + config().spin;
        loop {
            // Checked between single pauses, the clock every 64 checks (see
            // `spin_for_rings`).
            for _ in 0..64 {
                if rx.ring.has_data() {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
            if Instant::now() >= until {
                break;
            }
        }
        self.arm(rx);
        if rx.ring.has_data_seqcst() {
            return Ok(());
        }
        let mut p = [PollFd::new(&self.wake, PollFlags::IN)];
        // Forked processes share the pair end: another one may take the
        // wake-up byte meant for us, so a shared reader looks again every
        // 10 ms.
        let shared_timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 10_000_000 };
        match rustix::event::poll(&mut p, rx.share.is_some().then_some(&shared_timeout)) {
            Ok(_) => {}
            Err(e) => return Err(errno_of(e)),
        }
        let rev = p[0].revents();
        if rev.intersects(PollFlags::HUP | PollFlags::ERR) && !rx.ring.has_data_seqcst() {
            self.hung_up(rx);
        }
        self.drain_wakeups();
        rx.self_disarmed = !rx.ring.sleeping_flag();
        Ok(())
    }

    /// The pair hung up and the ring is empty: end of stream. Without a FIN
    /// record the peer died (the kernel would have sent a FIN for it, then
    /// answered our writes with a reset): later writes fail with EPIPE.
    fn hung_up(&self, rx: &mut Rx) {
        if !rx.eof {
            self.peer_gone.store(true, Ordering::Relaxed);
        }
        rx.eof = true;
    }

    /// Sets the sleep flag, first draining a wake-up byte that was sent for
    /// the previous sleep.
    fn arm(&self, rx: &mut Rx) {
        if rx.ring.sleeping_flag() {
            return;
        }
        if !rx.self_disarmed {
            self.drain_wakeups();
        }
        rx.ring.set_sleeping(true);
        rx.self_disarmed = false;
    }

    /// `O_ASYNC` on or off (the pair end itself carries the flag and the
    /// owner, set by the program's own `ioctl`/`fcntl`).
    pub(crate) fn set_async(&self, on: bool) {
        self.async_io.store(on, Ordering::Relaxed);
        // A reader busy in another thread arms it when it returns.
        if let (true, Some(mut rx)) = (on, self.try_rx()) {
            self.arm(&mut rx);
        }
    }

    /// Once everything has been read, arm the flag, so that a waiter in the
    /// kernel (`poll`/`epoll` on the pair end) is woken by the next write.
    fn rearm_if_empty(&self, rx: &mut Rx) {
        if rx.avail() == 0 && !rx.eof && !rx.ring.has_data() {
            self.arm(rx);
        }
    }

    /// Current readiness (non-blocking: a socket locked by another thread's
    /// blocking read counts as not readable).
    pub(crate) fn ready(&self) -> Ready {
        let mut r = Ready::default();
        if let Some(rx) = self.try_rx() {
            r.readable = rx.avail() > 0 || rx.eof || rx.shut || rx.ring.has_data();
            r.rdhup = rx.eof;
        }
        // A full ring still reports writable: see docs/sockets.md.
        r.writable = true;
        r.hup = r.rdhup && self.wr_shut.load(Ordering::Relaxed);
        r
    }

    /// A wake-up reached a waiter that does not watch this socket now: take
    /// the byte and leave the flag clear (the next wait that watches it
    /// arms it again).
    pub(crate) fn quiesce(&self) {
        if let Some(mut rx) = self.try_rx() {
            rx.ring.set_sleeping(false);
            rx.self_disarmed = true;
            self.drain_wakeups();
        }
    }

    /// Clears our sleep flag while a poll spins on the ring (the writer then
    /// sends no wake-up); [`ready_armed`](Self::ready_armed) sets it again.
    pub(crate) fn disarm_for_spin(&self) {
        if self.async_io.load(Ordering::Relaxed) {
            return;
        }
        if let Some(mut rx) = self.try_rx() {
            if rx.ring.sleeping_flag() {
                rx.ring.set_sleeping(false);
                // No byte is owed for a flag we cleared ourselves; one the
                // writer cleared meanwhile is drained at the next arm or
                // wake (`after_kernel_wake`).
                rx.self_disarmed = true;
            }
        }
    }

    /// [`ready`](Self::ready), with the sleep flag armed if nothing is
    /// there (so a write that lands later wakes a waiter in the kernel).
    pub(crate) fn ready_armed(&self) -> Ready {
        let mut r = Ready { writable: true, ..Ready::default() };
        if let Some(mut rx) = self.try_rx() {
            self.rearm_if_empty(&mut rx);
            r.readable = rx.avail() > 0 || rx.eof || rx.shut || rx.ring.has_data_seqcst();
            r.rdhup = rx.eof;
        }
        r.hup = r.rdhup && self.wr_shut.load(Ordering::Relaxed);
        r
    }

    /// The kernel said the pair end is readable or hung up: fold that into
    /// the ring state; returns the readiness.
    pub(crate) fn after_kernel_wake(&self, hup: bool) -> Ready {
        if let Some(mut rx) = self.try_rx() {
            if hup && !rx.ring.has_data_seqcst() && rx.avail() == 0 {
                self.hung_up(&mut rx);
            }
            let r = self.ready_locked(&rx);
            if !r.readable {
                // A spurious wake-up byte: consume it and arm again, or the
                // next sleep returns at once for ever.
                self.drain_wakeups();
                rx.self_disarmed = false;
                rx.ring.set_sleeping(false);
                self.arm(&mut rx);
            }
            return r;
        }
        self.ready()
    }

    fn ready_locked(&self, rx: &Rx) -> Ready {
        let readable = rx.avail() > 0 || rx.eof || rx.shut || rx.ring.has_data();
        let hup = rx.eof && self.wr_shut.load(Ordering::Relaxed);
        Ready { readable, writable: true, rdhup: rx.eof, hup }
    }

    /// Whether `r` (this socket's readiness) holds news for a waiter:
    /// readability, or for an edge-triggered one, data or an end that came
    /// after its last report (see [`edge_ready`](Self::edge_ready)).
    pub(crate) fn has_news(&self, r: Ready, edge: Option<&Edge>) -> bool {
        match edge {
            None => r.readable,
            Some(e) => self.edge_ready(r, e, 0).0.readable,
        }
    }

    /// For an edge-triggered interest in `events` with state `e`: whether
    /// something happened since its last report (data arrived, the stream
    /// ended, room came back after a write found the ring full, or nothing
    /// was reported since `EPOLL_CTL_ADD`/`MOD`), and then, as the kernel
    /// does on such a wake-up, the whole readiness `r`; else nothing. With
    /// it, the state to keep if it is reported.
    pub(crate) fn edge_ready(&self, r: Ready, e: &Edge, events: u32) -> (Ready, Edge) {
        let mut next = *e;
        let mut news = false;
        // Room first: asking the peer for a wake-up needs our reading half.
        let full = self.full_events.load(Ordering::Relaxed);
        let out_due = events & libc::EPOLLOUT as u32 != 0 && e.out_seen != Some(full);
        if out_due && self.has_room() {
            news = true;
            if self.out_waiting.swap(false, Ordering::Relaxed) {
                self.announce_waiting(false);
            }
        }
        let rx = self.try_rx();
        if let Some(rx) = &rx {
            news |= match e.in_mark {
                None => r.readable,
                // All that was reported has been read: anything there is new.
                Some(mark) if rx.ring.cursor().head >= mark => rx.ring.has_data(),
                Some(mark) => rx.ring.published_at(mark),
            };
        }
        news |= r.rdhup && !e.eof_seen || r.hup && !e.hup_seen;
        if !news {
            return (Ready::default(), *e);
        }
        let mut r = r;
        if let Some(rx) = &rx {
            let (end, last) = rx.ring.published_end();
            next.in_mark = Some(end);
            // The kernel says RDHUP as soon as the FIN arrives, before the
            // bytes ahead of it are read.
            r.rdhup |= last == Some(INFO_FIN);
        }
        drop(rx);
        next.eof_seen = r.rdhup;
        next.hup_seen = r.hup;
        if events & libc::EPOLLOUT as u32 != 0 {
            next.out_seen = Some(full);
        }
        (r, next)
    }

    /// `r` with `rdhup` also when the stream's end has arrived but is not
    /// read yet (bytes ahead of it), as the kernel reports it.
    pub(crate) fn with_pending_fin(&self, mut r: Ready) -> Ready {
        if r.readable && !r.rdhup {
            if let Some(rx) = self.try_rx() {
                r.rdhup = rx.ring.published_end().1 == Some(INFO_FIN);
            }
        }
        r
    }

    /// Whether a write would find room in the ring now. When it would not,
    /// the peer is asked for a wake-up after its next read (an
    /// edge-triggered `EPOLLOUT` waiter sleeps on the pair).
    fn has_room(&self) -> bool {
        let Ok(mut tx) = self.tx.try_lock() else { return true };
        if tx.share.is_some() {
            // Another process may be writing: not ours to judge.
            return true;
        }
        match tx.ring.free_now() {
            Ok(n) if n > 64 => true,
            Ok(_) => {
                drop(tx);
                self.out_waiting.store(self.announce_waiting(true), Ordering::Relaxed);
                // The reader may have read just before the announcement.
                lock(&self.tx).ring.free_now().is_ok_and(|n| n > 64)
            }
            Err(_) => true,
        }
    }

    /// Bytes readable now without blocking (`FIONREAD`).
    pub(crate) fn readable_bytes(&self) -> usize {
        let Ok(mut rx) = self.lock_rx(false) else { return 0 };
        if rx.share.is_some() {
            // The rest of the head record (see `Rx::peek_shared`).
            let offset = rx.offset;
            return match rx.ring.peek_partial(&mut [], offset) {
                Ok(Some((_, left, 0))) => left,
                _ => 0,
            };
        }
        loop {
            while rx.pull().unwrap_or(false) {}
            if !rx.switch_pending || self.switch_rx(&mut rx).is_err() {
                break;
            }
        }
        rx.avail()
    }

    /// `shutdown(how)`.
    pub(crate) fn shutdown(&self, how: c_int) -> Res<()> {
        if how == libc::SHUT_WR || how == libc::SHUT_RDWR {
            let mut tx = self.lock_tx(false)?;
            if !tx.shut {
                tx.shut = true;
                self.wr_shut.store(true, Ordering::Relaxed);
                // One spin-wait for room: the FIN must not be lost.
                let mut waits = 0;
                while tx.ring.try_push_info(&[], INFO_FIN) == Err(PushError::Full) && waits < 10_000 {
                    self.wake_peer(&tx);
                    backoff(waits);
                    waits += 1;
                }
                self.wake_peer(&tx);
            }
        }
        if how == libc::SHUT_RD || how == libc::SHUT_RDWR {
            self.lock_rx(false)?.shut = true;
        }
        if !(libc::SHUT_RD..=libc::SHUT_RDWR).contains(&how) {
            return Err(libc::EINVAL);
        }
        Ok(())
    }
}

/// Waiting for ring credits (there is no credit wake-up yet): spin for
/// about the spin time, then sleep 20 µs at a time (below 1 ms, a growing
/// sleep cost iperf3 half its throughput on a busy host; a writer stuck on
/// a reader that stopped reading wakes 50 000 times a second, a few % of a
/// core).
fn backoff(waits: u32) {
    if waits < 256 {
        for _ in 0..256 {
            std::hint::spin_loop();
        }
        if waits % 32 == 31 {
            std::thread::yield_now();
        }
    } else {
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Copies `src` into the buffers, starting `offset` bytes into them.
fn scatter(bufs: &mut [&mut [u8]], mut offset: usize, mut src: &[u8]) {
    for b in bufs.iter_mut() {
        if src.is_empty() {
            return;
        }
        if offset >= b.len() {
            offset -= b.len();
            continue;
        }
        let n = (b.len() - offset).min(src.len());
        b[offset..offset + n].copy_from_slice(&src[..n]);
        src = &src[n..];
        offset = 0;
    }
}

fn monitor_stream() -> Res<OwnedFd> {
    match connect_monitor() {
        Err(e) if (e == libc::ECONNREFUSED || e == libc::ENOENT) && start_monitor() => {
            // Started now: wait (up to 2 s) for it to listen.
            let until = Instant::now() + Duration::from_secs(2);
            loop {
                match connect_monitor() {
                    Ok(s) => return Ok(s),
                    Err(e) if Instant::now() >= until => return Err(e),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        r => r,
    }
}

fn connect_monitor() -> Res<OwnedFd> {
    let addr = MonitorAddr::from_env().to_rustix().map_err(|e| io_errno(&e))?;
    let s = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, SocketFlags::CLOEXEC, None)
        .map_err(errno_of)?;
    rustix::net::connect(&s, &addr).map_err(errno_of)?;
    rustix::net::sockopt::set_socket_timeout(&s, rustix::net::sockopt::Timeout::Recv, Some(Duration::from_secs(2)))
        .map_err(errno_of)?;
    Ok(s)
}

/// Starts `$CFSOCKET_MONITOR_BIN socket-monitor` (the `cf` binary) when no
/// monitor answers: the first process that needs one starts it, in its own
/// process group, without the library. Once per process; returns whether
/// it was started. Two processes racing both start one; the second finds
/// the address taken and exits.
fn start_monitor() -> bool {
    static TRIED: AtomicBool = AtomicBool::new(false);
    let Some(bin) = std::env::var_os("CFSOCKET_MONITOR_BIN") else { return false };
    if TRIED.swap(true, Ordering::Relaxed) {
        return false;
    }
    use std::os::unix::process::CommandExt;
    let spawned = std::process::Command::new(&bin)
        .arg("socket-monitor")
        .env_remove("LD_PRELOAD")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match spawned {
        Ok(mut child) => {
            debug(format_args!("started {} socket-monitor (pid {})", bin.to_string_lossy(), child.id()));
            // Reap it if it exits (another one won the race).
            let _ = std::thread::Builder::new().name("cfsocket-monitor-reaper".into()).spawn(move || child.wait());
            true
        }
        Err(e) => {
            debug(format_args!("cannot start {} socket-monitor: {e}", bin.to_string_lossy()));
            false
        }
    }
}

/// Whether `fd` is an IPv4 stream (TCP) socket, and its local address.
fn inet_stream_local(fd: BorrowedFd<'_>) -> Option<SocketAddrV4> {
    if rustix::net::sockopt::socket_type(fd).ok()? != SocketType::STREAM {
        return None;
    }
    let addr = rustix::net::getsockname(fd).ok()?;
    SocketAddrV4::try_from(addr).ok()
}

/// `tcpi_state` of a closed (never connected) socket.
const TCP_CLOSE: u8 = 7;

/// The kernel's TCP state of `fd` (first byte of `struct tcp_info`).
fn tcp_state(fd: RawFd) -> Option<u8> {
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt(2) of TCP_INFO into our 8-byte buffer; the kernel
    // truncates to `len`.
    let r = unsafe { (real().getsockopt)(fd, libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len) };
    (r == 0 && len >= 1).then_some(info[0])
}

fn loopback(ip: Ipv4Addr) -> Ipv4Addr {
    if ip.is_unspecified() {
        Ipv4Addr::LOCALHOST
    } else {
        ip
    }
}

/// `listen` succeeded on `fd`: if it is an IPv4 TCP socket, register it
/// with the monitor and keep its accept channel. Nothing changes for the
/// program when the monitor cannot be reached.
pub(crate) fn register_listener(fd: RawFd) {
    // SAFETY: `fd` is the program's open descriptor for this call.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    let Some(local) = inet_stream_local(bfd) else { return };
    let channel = open_channel(bfd, local);
    let Ok(fl) = rustix::fs::fcntl_getfl(bfd) else { return };
    if rustix::fs::fcntl_setfl(bfd, fl | rustix::fs::OFlags::NONBLOCK).is_err() {
        return;
    }
    let next_retry = channel.is_none().then(|| Instant::now() + REGISTER_RETRY);
    let sock = ListenSock {
        channel: Mutex::new(channel),
        nonblock: AtomicBool::new(fl.contains(rustix::fs::OFlags::NONBLOCK)),
        local,
        next_retry: Mutex::new(next_retry),
    };
    insert(fd, Arc::new(Sock::Listen(sock)));
}

/// Registers `local` with the monitor; the connection is the accept channel.
/// The listening socket goes with the frame: the monitor checks that we
/// really listen there.
fn open_channel(listener: BorrowedFd<'_>, local: SocketAddrV4) -> Option<OwnedFd> {
    let channel = match monitor_stream() {
        Ok(s) => s,
        Err(e) => {
            debug(format_args!(
                "listen {local}: no monitor ({}); kernel only for now",
                std::io::Error::from_raw_os_error(e)
            ));
            return None;
        }
    };
    let frame = Frame::new(Op::Listen, local, local);
    if send_fds(&channel, &frame.encode(), &[listener]).is_err() || rustix::io::ioctl_fionbio(&channel, true).is_err() {
        return None;
    }
    debug(format_args!("listen {local}: registered"));
    Some(park(channel))
}

/// A listener without a channel (no monitor at `listen`, or it died): try
/// to register again, at most every [`REGISTER_RETRY`], and watch the new
/// channel in the epoll sets that watch the listener.
pub(crate) fn ensure_channel(fd: RawFd, ls: &ListenSock) {
    if lock(&ls.channel).is_some() {
        return;
    }
    {
        let mut next = lock(&ls.next_retry);
        let now = Instant::now();
        if next.is_some_and(|t| now < t) {
            return;
        }
        *next = Some(now + REGISTER_RETRY);
    }
    // SAFETY: `fd` is the listening descriptor the program passed to accept.
    let listener = unsafe { BorrowedFd::borrow_raw(fd) };
    let Some(ch) = open_channel(listener, ls.local) else { return };
    {
        let mut g = lock(&ls.channel);
        if g.is_some() {
            return;
        }
        *g = Some(ch);
    }
    // Lock order as in epoll_ctl: the sets, then the channel.
    let sets = lock(&EPOLL_SETS);
    for (epfd, set) in sets.iter() {
        if set.contains_key(&fd) {
            if let Some(ch) = lock(&ls.channel).as_ref() {
                let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: EPOLL_TAG | fd as u32 as u64 };
                // SAFETY: epoll_ctl(2) ADD of our own channel with our own event.
                unsafe { (real().epoll_ctl)(*epfd, libc::EPOLL_CTL_ADD, ch.as_raw_fd(), &mut ev) };
            }
        }
    }
}

/// One connection from the accept channel, if any is queued.
fn accept_ring(ls: &ListenSock, flags: c_int) -> Res<Option<(RawFd, SocketAddrV4)>> {
    let mut guard = lock(&ls.channel);
    let Some(ch) = guard.as_ref() else { return Ok(None) };
    loop {
        let mut buf = [0u8; FRAME_LEN + 1];
        let (n, fds) = match recv_fds(ch, &mut buf) {
            Ok((0, _)) => {
                // The monitor is gone: remote and already-queued clients
                // still come through the kernel twin; the next `accept`
                // looks for a new monitor.
                *guard = None;
                *lock(&ls.next_retry) = None;
                return Ok(None);
            }
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Ok(None),
        };
        let Some(frame) = Frame::decode(&buf[..n]).filter(|f| f.op == Op::Deliver) else { continue };
        let Ok::<[OwnedFd; CONNECT_FDS], _>([to_peer, from_peer, pair]) = fds.try_into() else { continue };
        let (Ok(mut tx), Ok(mut rx)) = (RingProducer::attach(to_peer), RingConsumer::attach(from_peer)) else {
            continue;
        };
        park_rings(&mut tx, &mut rx);
        // Ours moved out of the way first, so that the program's number is
        // the lowest free one, as the kernel's accept would give.
        let pair = park(pair);
        let shadow = rustix::net::socket_with(AddressFamily::INET, SocketType::STREAM, SocketFlags::CLOEXEC, None)
            .map_err(errno_of)?;
        let shadow = park(shadow);
        let cloexec = flags & libc::SOCK_CLOEXEC != 0;
        let user_fd = if cloexec {
            rustix::io::fcntl_dupfd_cloexec(&pair, 0).map_err(errno_of)?
        } else {
            // SAFETY: F_DUPFD on a descriptor we own; the result is a new
            // descriptor that we wrap at once.
            let r = unsafe { (real().fcntl)(pair.as_raw_fd(), libc::F_DUPFD, 0 as c_int) };
            if r < 0 {
                return Err(libc::EMFILE);
            }
            // SAFETY: `r` is a fresh descriptor owned by nobody else.
            unsafe { OwnedFd::from_raw_fd(r) }
        };
        let local = SocketAddrV4::new(loopback(*frame.dst.ip()), frame.dst.port());
        let conn = ConnSock::new(tx, rx, pair, shadow, local, frame.src, flags & libc::SOCK_NONBLOCK != 0);
        let raw = std::os::fd::IntoRawFd::into_raw_fd(user_fd);
        if !insert(raw, Arc::new(Sock::Conn(conn))) {
            // SAFETY: `raw` is ours (just created) and not in the table.
            unsafe { (real().close)(raw) };
            return Err(libc::EMFILE);
        }
        return Ok(Some((raw, frame.src)));
    }
}

/// `accept4` on a listening socket of ours: local clients from the
/// channel first, then remote ones from the kernel twin; blocks (in
/// `poll` on both) unless non-blocking.
pub(crate) fn accept(
    fd: RawFd,
    ls: &ListenSock,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: c_int,
) -> Res<RawFd> {
    ensure_channel(fd, ls);
    loop {
        if let Some((nfd, peer)) = accept_ring(ls, flags)? {
            // SAFETY: the program passed `addr`/`len` as accept(2) takes
            // them (null, or a buffer of `*len` bytes).
            unsafe { write_sockaddr(peer, addr, len) };
            return Ok(nfd);
        }
        // SAFETY: accept4(2) with the program's own arguments.
        let r = unsafe { (real().accept4)(fd, addr, len, flags) };
        if r >= 0 {
            return Ok(r);
        }
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        if e != libc::EAGAIN || ls.nonblock.load(Ordering::Relaxed) {
            return Err(e);
        }
        // SAFETY: the listening descriptor stays open during this call.
        let twin = unsafe { BorrowedFd::borrow_raw(fd) };
        let chan = lock(&ls.channel).as_ref().and_then(|c| c.try_clone().ok());
        let mut p = vec![PollFd::new(&twin, PollFlags::IN)];
        if let Some(c) = &chan {
            p.push(PollFd::new(c, PollFlags::IN));
        }
        match rustix::event::poll(&mut p, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(errno_of(e)),
        }
    }
}

/// Writes `a` as a `sockaddr_in`, truncated to `*len` as the kernel does.
///
/// # Safety
///
/// `addr` is null, or `len` points to the size of the buffer at `addr`.
pub(crate) unsafe fn write_sockaddr(a: SocketAddrV4, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    };
    let full = std::mem::size_of::<libc::sockaddr_in>();
    // SAFETY: the caller guarantees `len` is valid; we copy at most `*len`
    // bytes into `addr`, from a local of `full` bytes.
    unsafe {
        let room = (*len as usize).min(full);
        std::ptr::copy_nonoverlapping((&sin as *const libc::sockaddr_in).cast::<u8>(), addr.cast::<u8>(), room);
        *len = full as libc::socklen_t;
    }
}

/// `connect` of an IPv4 TCP socket to a loopback address: ask the monitor;
/// `None` means "do what the kernel does" (nobody listens through the
/// library, no monitor, not a TCP socket...).
pub(crate) fn try_connect(fd: RawFd, dst: SocketAddrV4) -> Option<Res<()>> {
    let host = !dst.ip().is_loopback() && is_host_address(*dst.ip());
    if !(dst.ip().is_loopback() || host) || dst.port() == 0 {
        return None;
    }
    // SAFETY: `fd` is the program's open descriptor for this call.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut local = inet_stream_local(bfd)?;
    // Only a socket that never connected: a second `connect` on a kernel
    // connection (hiredis checks a non-blocking connect that way) is the
    // kernel's to answer (EISCONN, EALREADY).
    if tcp_state(fd) != Some(TCP_CLOSE) {
        return None;
    }
    if local.port() == 0 {
        // The source address the kernel would choose: 127.0.0.1 for the
        // loopback net, the address itself for one of the host's own.
        let src = if host { *dst.ip() } else { Ipv4Addr::LOCALHOST };
        rustix::net::bind(bfd, &SocketAddrV4::new(src, 0)).ok()?;
        local = inet_stream_local(bfd)?;
    }
    local = SocketAddrV4::new(loopback(*local.ip()), local.port());
    match connect_rings(fd, bfd, local, dst) {
        Ok(r) => Some(r),
        Err(why) => {
            debug(format_args!("connect {dst}: {why}; kernel"));
            None
        }
    }
}

/// Whether `ip` is one of this host's own IPv4 addresses (in this network
/// namespace; `getifaddrs`, looked up again at most once a second).
fn is_host_address(ip: Ipv4Addr) -> bool {
    static CACHE: Mutex<Option<(Instant, Vec<Ipv4Addr>)>> = Mutex::new(None);
    let mut cache = lock(&CACHE);
    let fresh = cache.as_ref().is_some_and(|(at, _)| at.elapsed() < Duration::from_secs(1));
    if !fresh {
        *cache = Some((Instant::now(), host_addresses()));
    }
    cache.as_ref().is_some_and(|(_, list)| list.contains(&ip))
}

fn host_addresses() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs(3) fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut at = head;
    while !at.is_null() {
        // `ifa_addr` is null or a sockaddr of the family it names.
        // SAFETY: `at` is a node of getifaddrs' list, alive until freeifaddrs.
        unsafe {
            let a = (*at).ifa_addr;
            if !a.is_null() && i32::from((*a).sa_family) == libc::AF_INET {
                let sin = a.cast::<libc::sockaddr_in>();
                out.push(Ipv4Addr::from(u32::from_be((*sin).sin_addr.s_addr)));
            }
            at = (*at).ifa_next;
        }
    }
    // SAFETY: the list from the successful getifaddrs above, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

fn connect_rings(fd: RawFd, bfd: BorrowedFd<'_>, local: SocketAddrV4, dst: SocketAddrV4) -> Result<Res<()>, String> {
    let size = config().ring_size;
    let mut rx = RingConsumer::create(size).map_err(|e| e.to_string())?;
    let peer_rx = RingConsumer::create(size).map_err(|e| e.to_string())?;
    let mut tx = RingProducer::attach(peer_rx.memfd().try_clone_to_owned().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    park_rings(&mut tx, &mut rx);
    let (mine, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| e.to_string())?;
    let mon = monitor_stream().map_err(|e| format!("no monitor ({})", std::io::Error::from_raw_os_error(e)))?;
    let frame = Frame::new(Op::Connect, dst, local);
    send_fds(&mon, &frame.encode(), &[rx.memfd(), peer_rx.memfd(), theirs.as_fd()]).map_err(|e| e.to_string())?;
    let mut buf = [0u8; FRAME_LEN + 1];
    let (n, _) = recv_fds(&mon, &mut buf).map_err(|e| e.to_string())?;
    match Frame::decode(&buf[..n]) {
        Some(f) if f.op == Op::Reply && f.status == STATUS_OK => {}
        _ => return Err("no listener through the library".into()),
    }
    drop((theirs, peer_rx));
    // The program's socket becomes the shadow; its number now names our
    // end of the pair, with the same close-on-exec flag.
    let fdflags = rustix::io::fcntl_getfd(bfd).map_err(|e| e.to_string())?;
    let nonblock = rustix::fs::fcntl_getfl(bfd).map_err(|e| e.to_string())?.contains(rustix::fs::OFlags::NONBLOCK);
    let shadow = rustix::io::fcntl_dupfd_cloexec(bfd, private_floor())
        .or_else(|_| rustix::io::fcntl_dupfd_cloexec(bfd, 0))
        .map_err(|e| e.to_string())?;
    let cloexec = if fdflags.contains(rustix::io::FdFlags::CLOEXEC) { libc::O_CLOEXEC } else { 0 };
    // SAFETY: dup3(2) of our pair end onto the program's descriptor number,
    // which it asked us to connect: atomically replaces the kernel socket
    // (kept alive as `shadow`).
    if unsafe { (real().dup3)(mine.as_raw_fd(), fd, cloexec) } < 0 {
        return Err("dup3 failed".into());
    }
    let conn = ConnSock::new(tx, rx, park(mine), shadow, local, dst, nonblock);
    insert(fd, Arc::new(Sock::Conn(conn)));
    debug(format_args!("connect {local} -> {dst}: rings"));
    Ok(if nonblock { Err(libc::EINPROGRESS) } else { Ok(()) })
}

/// Interest of one epoll set in one of our descriptors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Interest {
    pub(crate) events: u32,
    pub(crate) data: u64,
    /// False after an `EPOLLONESHOT` report, until `EPOLL_CTL_MOD`, and
    /// after the program's `EPOLL_CTL_DEL`.
    pub(crate) armed: bool,
    /// Registered by the program. A ring socket it deleted stays in the
    /// kernel's set (our registration) until it is closed or added again.
    pub(crate) present: bool,
    /// What an `EPOLLET` interest last reported.
    pub(crate) edge: Edge,
}

impl Interest {
    /// The edge-triggered state, for an `EPOLLET` interest.
    pub(crate) fn edge(&self) -> Option<Edge> {
        (self.events & libc::EPOLLET as u32 != 0).then_some(self.edge)
    }
}

/// epoll set -> our descriptors in it.
pub(crate) type EpollSets = BTreeMap<RawFd, HashMap<RawFd, Interest>>;
pub(crate) static EPOLL_SETS: Mutex<EpollSets> = Mutex::new(BTreeMap::new());
/// Number of interests in [`EPOLL_SETS`] (closes skip the lock when 0).
pub(crate) static EPOLL_INTERESTS: AtomicUsize = AtomicUsize::new(0);
/// Tag in the kernel's `epoll_event.data` of our registrations: the low
/// 32 bits are the descriptor.
pub(crate) const EPOLL_TAG: u64 = 0xCF50_C4E7_0000_0000;
pub(crate) const EPOLL_TAG_MASK: u64 = 0xFFFF_FFFF_0000_0000;

/// In a new image after `exec`: takes over a ring socket the old image
/// handed off (`fd,tx,rx,share,local,peer,nonblock,switches`, see
/// [`ConnSock::handoff_for_exec`]). The inherited descriptors are checked
/// (a ring's seals and header, a sealed page, a Unix stream socket at
/// `fd`) before any is taken; on success they are moved out of the
/// program's range.
pub(crate) fn adopt_after_exec(entry: &str) -> Result<RawFd, String> {
    let f: Vec<&str> = entry.split(',').collect();
    let [fd, tx, rx, page, local, peer, nonblock, switches] = f[..] else {
        return Err(format!("malformed entry {entry:?}"));
    };
    let num = |s: &str| s.parse::<RawFd>().map_err(|_| format!("not a descriptor: {s:?}"));
    let (fd, tx, rx, page) = (num(fd)?, num(tx)?, num(rx)?, num(page)?);
    let addr = |s: &str| s.parse::<SocketAddrV4>().map_err(|_| format!("not an address: {s:?}"));
    let (local, peer) = (addr(local)?, addr(peer)?);
    let switches = switches.parse::<u64>().map_err(|_| format!("not a count: {switches:?}"))?;
    let numbers = [fd, tx, rx, page];
    if numbers.iter().any(|&n| n < 0 || is_managed(n)) || (1..4).any(|i| numbers[..i].contains(&numbers[i])) {
        return Err("descriptors out of range, taken or repeated".into());
    }
    // Copies (close-on-exec) of the inherited numbers: checked first, the
    // numbers themselves closed only once every check passed.
    let copy = |n: RawFd| {
        // Borrowed only for this duplication.
        // SAFETY: `n` is open, or the call fails with EBADF.
        rustix::io::fcntl_dupfd_cloexec(unsafe { BorrowedFd::borrow_raw(n) }, private_floor())
            .map_err(|e| format!("descriptor {n}: {e}"))
    };
    // SAFETY: as above, for a type check.
    let program = unsafe { BorrowedFd::borrow_raw(fd) };
    let unix = rustix::net::getsockname(program).is_ok_and(|a| a.address_family() == AddressFamily::UNIX);
    if !unix || rustix::net::sockopt::socket_type(program).ok() != Some(SocketType::STREAM) {
        return Err(format!("descriptor {fd} is not the socket pair end of a ring socket"));
    }
    let mut producer = RingProducer::attach(copy(tx)?).map_err(|e| format!("ring: {e}"))?;
    let mut consumer = RingConsumer::attach(copy(rx)?).map_err(|e| format!("ring: {e}"))?;
    let words = SharedWords::attach(copy(page)?, SHARE_WORDS).map_err(|e| format!("share: {e}"))?;
    park_rings(&mut producer, &mut consumer);
    let wake = copy(fd)?;
    let shadow = park(
        rustix::net::socket_with(AddressFamily::INET, SocketType::STREAM, SocketFlags::CLOEXEC, None)
            .map_err(|e| format!("shadow socket: {e}"))?,
    );
    for n in [tx, rx, page] {
        // They are copied above and named nowhere else.
        // SAFETY: the old image handed these numbers to us alone.
        drop(unsafe { OwnedFd::from_raw_fd(n) });
    }
    let conn = ConnSock::new(producer, consumer, wake, shadow, local, peer, nonblock == "1");
    let sh = Arc::new(ForkShare { words });
    {
        let mut tx = lock(&conn.tx);
        tx.upgraded = true;
        tx.share = Some(sh.clone());
        let mut rx = lock(&conn.rx);
        rx.share = Some(sh);
        rx.switches = switches;
    }
    conn.shared.store(true, Ordering::Relaxed);
    if !insert(fd, Arc::new(Sock::Conn(conn))) {
        return Err(format!("descriptor {fd} out of range"));
    }
    debug(format_args!("descriptor {fd}: ring socket {local} -> {peer} taken over after exec"));
    Ok(fd)
}

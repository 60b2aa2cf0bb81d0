//! Connection set-up: listening, dialing, accepting, and the hello
//! exchange over the Unix socket (see [`proto`](super::proto) for the
//! bytes). Owns everything that happens before a [`Conn`] is in the table:
//! checking the peer's hello, attaching its ring, checking the seals and
//! size of its *shared* pool memfd and mapping it read-only.
//!
//! What we send the peer: the memfd of the ring we consume and the memfd of
//! our **shared** pool, never the private one (see the trust model in the
//! [module docs](super)).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use cornflakes::mem::MAX_ALLOC;
use rustix::event::{poll, PollFd, PollFlags};

use super::conn::{conn_id, Conn, Slot};
use super::lease::Ledger;
use super::liveness::timespec;
use super::proto::{Hello, HELLO_ACCEPTS_RETURNS, HELLO_LEN, MAX_SEGMENTS, VERSION};
use super::receive::PeerPool;
use super::ring::{RingConsumer, RingProducer};
use super::{recv_fds, send_fds, sys, ShmConfig, ShmDatapath, ShmError};
use crate::ConnId;

/// A connection whose hello has been sent but not yet received.
pub(super) struct PendingConn {
    sock: UnixStream,
    rx: RingConsumer,
}

/// Accepted connections whose hello has not (all) arrived yet, at most.
const MAX_PENDING_ACCEPTS: usize = 64;

/// An accepted connection waiting for the peer's hello.
pub(super) struct Accepting {
    pending: PendingConn,
    hello: HelloRead,
    deadline: Instant,
}

impl Accepting {
    /// The socket, to poll.
    pub(super) fn sock(&self) -> &UnixStream {
        &self.pending.sock
    }
}

/// What has arrived of a peer's hello.
pub(super) struct HelloRead {
    buf: [u8; HELLO_LEN],
    got: usize,
    fds: Vec<OwnedFd>,
}

impl Default for HelloRead {
    fn default() -> Self {
        Self { buf: [0; HELLO_LEN], got: 0, fds: Vec::new() }
    }
}

/// Reads the rest of a hello from `sock`; `Ok(false)` when the socket has
/// nothing more now (non-blocking) or, on a blocking socket, `deadline`
/// passed: the whole hello must arrive by then, however the peer spaces
/// its bytes (a per-read timeout let one byte per timeout hold the caller
/// for 64 of them).
fn read_hello(sock: &UnixStream, r: &mut HelloRead, deadline: Option<Instant>) -> Result<bool, ShmError> {
    while r.got < HELLO_LEN {
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            sock.set_read_timeout(Some(left))?;
        }
        match recv_fds(sock, &mut r.buf[r.got..]) {
            Ok((0, _)) => return Err(ShmError::Handshake("peer closed the socket during set-up")),
            Ok((n, more)) => {
                r.got += n;
                r.fds.extend(more);
                if r.fds.len() > 2 {
                    return Err(ShmError::Handshake("expected two descriptors with the hello"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ShmError::Io(e)),
        }
    }
    Ok(true)
}

/// What we keep of a peer's hello once it passed the checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PeerHello {
    /// The peer takes values of its own returned by reference.
    pub(super) accepts_returns: bool,
    /// Data size of the ring we produce into (checked against its memfd).
    pub(super) ring_size: u64,
    /// Largest message the peer accepts, capped at what a pool buffer holds.
    pub(super) max_message: usize,
}

/// Parses and checks the peer's hello bytes (untrusted). The ring size is
/// checked again against the attached ring.
pub(super) fn check_hello(bytes: &[u8; HELLO_LEN]) -> Result<PeerHello, ShmError> {
    let hello = Hello::decode(bytes).ok_or(match Hello::version(bytes) {
        Some(peer) if peer != VERSION => ShmError::Version { peer, ours: VERSION },
        _ => ShmError::Handshake("bad hello"),
    })?;
    Ok(PeerHello {
        accepts_returns: hello.flags & HELLO_ACCEPTS_RETURNS != 0,
        ring_size: hello.ring_size,
        max_message: usize::try_from(hello.max_message).unwrap_or(usize::MAX).min(MAX_ALLOC),
    })
}

impl ShmDatapath {
    /// A datapath listening on the Unix socket `path` (a stale socket file
    /// left by a dead process is replaced; the file is removed on drop).
    ///
    /// # Errors
    ///
    /// [`ShmError::BadConfig`] for an unusable `config`, [`ShmError::Pool`]
    /// when a pool cannot be created, [`ShmError::Io`] when the socket
    /// cannot be bound (for example, another live process listens there).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    /// use std::time::Duration;
    ///
    /// let path = std::env::temp_dir().join(format!("cf-doc-listen-{}.sock", std::process::id()));
    /// let mut server = ShmDatapath::listen(&path, ShmConfig::default()).unwrap();
    /// // Set-up needs both sides: the client runs on its own thread.
    /// let client = std::thread::spawn(move || {
    ///     let client = ShmDatapath::connect(&path, ShmConfig::default()).unwrap();
    ///     client.connections().count()
    /// });
    /// let conn = server.accept(Duration::from_secs(5)).unwrap();
    /// assert_eq!(server.connections().collect::<Vec<_>>(), [conn]);
    /// assert_eq!(client.join().unwrap(), 1);
    /// ```
    pub fn listen(path: impl AsRef<Path>, config: ShmConfig) -> Result<Self, ShmError> {
        let mut dp = Self::new(config)?;
        dp.bind(path.as_ref())?;
        Ok(dp)
    }

    /// Starts listening on `path` (see [`listen`](Self::listen)).
    ///
    /// # Errors
    ///
    /// [`ShmError::Io`] when the socket cannot be bound.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    ///
    /// let path = std::env::temp_dir().join(format!("cf-doc-bind-{}.sock", std::process::id()));
    /// let mut dp = ShmDatapath::new(ShmConfig::default()).unwrap();
    /// dp.bind(&path).unwrap();
    /// ```
    pub fn bind(&mut self, path: &Path) -> Result<(), ShmError> {
        let listener = match UnixListener::bind(path) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && UnixStream::connect(path).is_err() => {
                std::fs::remove_file(path)?;
                UnixListener::bind(path)?
            }
            Err(e) => return Err(e.into()),
        };
        listener.set_nonblocking(true)?;
        self.listener = Some((listener, path.to_path_buf()));
        Ok(())
    }

    /// A datapath with one connection, to the datapath listening at `path`
    /// (its id is the first of [`connections`](Self::connections)).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new) and [`connect_to`](Self::connect_to).
    ///
    /// # Examples
    ///
    /// See [`listen`](Self::listen).
    pub fn connect(path: impl AsRef<Path>, config: ShmConfig) -> Result<Self, ShmError> {
        let mut dp = Self::new(config)?;
        dp.connect_to(path)?;
        Ok(dp)
    }

    /// Adds a connection to the datapath listening at `path`.
    ///
    /// # Errors
    ///
    /// [`ShmError::Io`] when nothing listens there, [`ShmError::Handshake`]
    /// when the peer's hello is missing, late or wrong, [`ShmError::Ring`]
    /// when its ring cannot be attached.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    /// use std::time::Duration;
    ///
    /// let path = std::env::temp_dir().join(format!("cf-doc-connect-to-{}.sock", std::process::id()));
    /// let mut server = ShmDatapath::listen(&path, ShmConfig::default()).unwrap();
    /// let client = std::thread::spawn(move || {
    ///     let mut client = ShmDatapath::new(ShmConfig::default()).unwrap();
    ///     let conn = client.connect_to(&path).unwrap();
    ///     assert_eq!(client.connections().next(), Some(conn));
    /// });
    /// server.accept(Duration::from_secs(5)).unwrap();
    /// client.join().unwrap();
    /// ```
    pub fn connect_to(&mut self, path: impl AsRef<Path>) -> Result<ConnId, ShmError> {
        let sock = UnixStream::connect(path)?;
        let pending = self.start_handshake(sock)?;
        self.finish_handshake(pending)
    }

    /// Two connected datapaths in this process (tests, benchmarks).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new) and [`link`](Self::link).
    ///
    /// # Examples
    ///
    /// See [`ShmDatapath`].
    pub fn pair(config: ShmConfig) -> Result<(Self, Self), ShmError> {
        let mut a = Self::new(config.clone())?;
        let mut b = Self::new(config)?;
        Self::link(&mut a, &mut b)?;
        Ok((a, b))
    }

    /// Adds a connection between two datapaths of this process; returns
    /// its id on each side.
    ///
    /// # Errors
    ///
    /// As [`connect_to`](Self::connect_to).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
    ///
    /// let (mut a, mut b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    /// let (second_a, _) = ShmDatapath::link(&mut a, &mut b).unwrap();
    /// assert_eq!(a.connections().count(), 2);
    /// assert!(a.connections().any(|c| c == second_a));
    /// ```
    pub fn link(a: &mut Self, b: &mut Self) -> Result<(ConnId, ConnId), ShmError> {
        let (sa, sb) = UnixStream::pair()?;
        let pa = a.start_handshake(sa)?;
        let pb = b.start_handshake(sb)?;
        Ok((a.finish_handshake(pa)?, b.finish_handshake(pb)?))
    }

    /// Accepts one connection, waiting up to `timeout` for it (the
    /// datapath also accepts by itself while waiting or idle).
    ///
    /// # Errors
    ///
    /// [`ShmError::BadConfig`] when the datapath is not listening,
    /// [`ShmError::Io`] (`TimedOut`) when no peer came in time, and the
    /// set-up errors of [`connect_to`](Self::connect_to).
    ///
    /// # Examples
    ///
    /// See [`listen`](Self::listen).
    pub fn accept(&mut self, timeout: Duration) -> Result<ConnId, ShmError> {
        let Some((listener, _)) = &self.listener else {
            return Err(ShmError::BadConfig("accept on a datapath that is not listening"));
        };
        let deadline = Instant::now() + timeout;
        loop {
            match listener.accept() {
                Ok((sock, _)) => {
                    sock.set_nonblocking(false)?;
                    let pending = self.start_handshake(sock)?;
                    let id = self.finish_handshake(pending)?;
                    self.shm.accepted += 1;
                    return Ok(id);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(ShmError::Io(io::ErrorKind::TimedOut.into()));
                    }
                    let mut fds = [PollFd::new(listener, PollFlags::IN)];
                    let ts = timespec(left);
                    match poll(&mut fds, Some(&ts)) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(ShmError::Io(e.into())),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Accepts every connection waiting on the listener without blocking:
    /// sends our hello, and completes the set-up now if the peer's hello is
    /// already there, otherwise later ([`progress_accepts`](Self::progress_accepts)),
    /// so a peer that connects and stays silent never stalls serving.
    /// Set-up failures are counted, not returned. Returns whether one was
    /// accepted.
    pub(super) fn accept_pending(&mut self) -> bool {
        let mut any = false;
        loop {
            let Some((l, _)) = &self.listener else { return any };
            let sock = match l.accept() {
                Ok((sock, _)) => sock,
                Err(_) => break,
            };
            if self.accepting.len() >= MAX_PENDING_ACCEPTS {
                // Too many silent peers: refuse this one (closing it).
                self.shm.handshake_failures += 1;
                continue;
            }
            let started = sock.set_nonblocking(true).map_err(ShmError::from).and_then(|()| self.start_handshake(sock));
            match started {
                Ok(pending) => {
                    let deadline = Instant::now() + self.config.handshake_timeout;
                    self.accepting.push(Accepting { pending, hello: HelloRead::default(), deadline });
                }
                Err(_) => self.shm.handshake_failures += 1,
            }
        }
        any |= self.progress_accepts();
        any
    }

    /// Reads what has arrived of each pending peer's hello; completes the
    /// set-ups whose hello is whole, drops those past their deadline.
    /// Returns whether one was accepted.
    pub(super) fn progress_accepts(&mut self) -> bool {
        let mut any = false;
        let mut k = 0;
        while k < self.accepting.len() {
            let a = &mut self.accepting[k];
            match read_hello(&a.pending.sock, &mut a.hello, None) {
                Ok(false) if Instant::now() < a.deadline => {
                    k += 1;
                    continue;
                }
                Ok(true) => {
                    let a = self.accepting.swap_remove(k);
                    match self.complete_handshake(a.pending, a.hello) {
                        Ok(_) => {
                            self.shm.accepted += 1;
                            any = true;
                        }
                        Err(_) => self.shm.handshake_failures += 1,
                    }
                }
                Ok(false) | Err(_) => {
                    self.accepting.swap_remove(k);
                    self.shm.handshake_failures += 1;
                }
            }
        }
        any
    }

    /// Sends our hello with our inbound ring's memfd and our **shared**
    /// pool's memfd (never the private pool's).
    fn start_handshake(&mut self, sock: UnixStream) -> Result<PendingConn, ShmError> {
        sock.set_read_timeout(Some(self.config.handshake_timeout.max(Duration::from_millis(1))))?;
        sock.set_write_timeout(Some(self.config.handshake_timeout.max(Duration::from_millis(1))))?;
        let rx = RingConsumer::create(self.config.ring_size)?;
        let hello = Hello {
            ring_size: self.config.ring_size as u64,
            max_message: self.config.max_message as u64,
            pid: std::process::id(),
            flags: if self.config.accept_returns { HELLO_ACCEPTS_RETURNS } else { 0 },
        };
        send_fds(&sock, &hello.encode(), &[rx.memfd(), self.shared_ro.as_fd()])?;
        Ok(PendingConn { sock, rx })
    }

    /// Reads the peer's hello (blocking, up to the handshake timeout), maps
    /// its ring and shared pool, adds the connection.
    fn finish_handshake(&mut self, pending: PendingConn) -> Result<ConnId, ShmError> {
        let mut hello = HelloRead::default();
        let deadline = Instant::now() + self.config.handshake_timeout.max(Duration::from_millis(1));
        if !read_hello(&pending.sock, &mut hello, Some(deadline))? {
            return Err(ShmError::Handshake("timed out waiting for the peer's hello"));
        }
        self.complete_handshake(pending, hello)
    }

    /// Checks a whole hello, maps the peer's ring and shared pool, adds the
    /// connection.
    fn complete_handshake(&mut self, pending: PendingConn, read: HelloRead) -> Result<ConnId, ShmError> {
        let PendingConn { sock, rx } = pending;
        let HelloRead { buf, mut fds, .. } = read;
        let hello = check_hello(&buf)?;
        if fds.len() != 2 {
            return Err(ShmError::Handshake("expected two descriptors with the hello"));
        }
        let pool_fd = fds.pop().expect("two descriptors");
        let ring_fd = fds.pop().expect("two descriptors");
        let tx = RingProducer::attach(ring_fd)?;
        if tx.size() as u64 != hello.ring_size {
            return Err(ShmError::Handshake("ring size disagrees with the hello"));
        }
        if self.config.require_sealed_peer_pool && !sys::is_shrink_sealed(pool_fd.as_fd()) {
            return Err(ShmError::Handshake("peer pool memfd is not sealed against shrinking"));
        }
        let pool_len = sys::file_size(pool_fd.as_fd())?;
        if pool_len > self.config.max_peer_pool_bytes as u64 {
            return Err(ShmError::Handshake("peer pool larger than max_peer_pool_bytes"));
        }
        let peer = PeerPool::map(pool_fd, pool_len as usize)?;
        sock.set_nonblocking(true)?;
        let conn = Conn {
            tx,
            rx,
            inflight: VecDeque::with_capacity(64),
            zc_sent: 0,
            zc_acked: 0,
            zc_received: 0,
            zc_reported: 0,
            ledger: Ledger::default(),
            descs: Vec::with_capacity(MAX_SEGMENTS),
            peer_max_message: hello.max_message,
            full_streak: 0,
            wake_pending: false,
            dead: false,
            corrupt: false,
            peer,
            sock,
            parked: VecDeque::new(),
            parked_bytes: 0,
            peer_accepts_returns: hello.accepts_returns,
            defer_acks: self.config.accept_returns,
            pending_ack: None,
        };
        self.insert(conn)
    }

    fn insert(&mut self, conn: Conn) -> Result<ConnId, ShmError> {
        if let Some(i) = self.free_slots.pop() {
            let slot = &mut self.slots[i as usize];
            slot.conn = Some(conn);
            Ok(conn_id(i as usize, slot.generation))
        } else if self.slots.len() < 1 << 16 {
            self.slots.push(Slot { generation: 0, conn: Some(conn) });
            Ok(conn_id(self.slots.len() - 1, 0))
        } else {
            Err(ShmError::Handshake("65536 connections are open; close some first"))
        }
    }
}

//! The per-host monitor: the table of listening addresses.
//!
//! One thread, one `poll` loop over its Unix listening socket and the
//! *accept channels* of the listeners (one Unix connection per listening
//! socket of a process under the library). A `Connect` is matched against
//! the table and its descriptors (two ring memfds, one socket-pair end) are
//! passed on to the listener's channel; the connector is told whether to
//! go on with the rings or fall back to the kernel. Data never passes here.
//!
//! Process death: a listener's channel closes with its process (or its
//! listening socket), and its addresses leave the table at once. The two
//! ends of a connection notice each other's death through their socket
//! pair (see `docs/sockets.md`), without the monitor.
//!
//! Everything read from a client is untrusted: a frame of the wrong size,
//! an unknown op or the wrong number of descriptors drops that client
//! (counted in [`MonitorStats::malformed`]); the monitor keeps serving.
//! A `Listen` must carry the listening socket itself, bound to the address
//! it claims, so no process can take another's port's local connections.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cornflakes_datapath::shm::{recv_fds, send_fds};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use crate::proto::{Frame, Op, CONNECT_FDS, FRAME_LEN, STATUS_NO_LISTENER, STATUS_OK};

/// Environment variable naming the monitor's Unix socket: `@name` for an
/// abstract name, anything else a file system path.
pub const MONITOR_ENV: &str = "CFSOCKET_MONITOR";
/// Abstract name used when [`MONITOR_ENV`] is not set.
pub const DEFAULT_MONITOR_NAME: &str = "cornflakes-socket-monitor";

/// Where the monitor listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MonitorAddr {
    /// A Linux abstract socket name (no file; gone with the monitor).
    Abstract(Vec<u8>),
    /// A socket file.
    Path(PathBuf),
}

impl MonitorAddr {
    /// Parses `@name` (abstract) or a path.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_socket::MonitorAddr;
    /// assert_eq!(MonitorAddr::parse("@x"), MonitorAddr::Abstract(b"x".to_vec()));
    /// assert_eq!(MonitorAddr::parse("/tmp/m"), MonitorAddr::Path("/tmp/m".into()));
    /// ```
    pub fn parse(s: &str) -> Self {
        match s.strip_prefix('@') {
            Some(name) => Self::Abstract(name.as_bytes().to_vec()),
            None => Self::Path(PathBuf::from(s)),
        }
    }

    /// [`MONITOR_ENV`] if set, else the default abstract name.
    pub fn from_env() -> Self {
        match std::env::var(MONITOR_ENV) {
            Ok(s) if !s.is_empty() => Self::parse(&s),
            _ => Self::Abstract(DEFAULT_MONITOR_NAME.as_bytes().to_vec()),
        }
    }

    /// The address for `rustix::net::connect`.
    ///
    /// # Errors
    ///
    /// When the name or path is too long for a Unix socket address.
    pub fn to_rustix(&self) -> io::Result<rustix::net::SocketAddrUnix> {
        Ok(match self {
            Self::Abstract(name) => rustix::net::SocketAddrUnix::new_abstract_name(name)?,
            Self::Path(p) => rustix::net::SocketAddrUnix::new(p.as_path())?,
        })
    }

    fn bind(&self) -> io::Result<UnixListener> {
        match self {
            Self::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                UnixListener::bind_addr(&addr)
            }
            Self::Path(p) => {
                // A stale file from a dead monitor; a live one would still
                // accept, and then we refuse to take its place.
                if p.exists() {
                    if UnixStream::connect(p).is_ok() {
                        return Err(io::Error::new(
                            io::ErrorKind::AddrInUse,
                            format!("a monitor already listens on {}", p.display()),
                        ));
                    }
                    std::fs::remove_file(p)?;
                }
                UnixListener::bind(p)
            }
        }
    }
}

impl std::fmt::Display for MonitorAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Abstract(n) => write!(f, "@{}", String::from_utf8_lossy(n)),
            Self::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// How the monitor runs.
#[derive(Clone)]
pub struct MonitorOptions {
    /// Where to listen.
    pub addr: MonitorAddr,
    /// Print one line per event on stderr.
    pub verbose: bool,
    /// Set to stop the loop (checked every 200 ms); `None` runs forever.
    pub stop: Option<Arc<AtomicBool>>,
    /// Called once the socket is bound (tests wait for it).
    pub on_ready: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for MonitorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonitorOptions").field("addr", &self.addr).field("verbose", &self.verbose).finish()
    }
}

/// What the monitor did, returned when it stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonitorStats {
    /// Listening addresses registered.
    pub listens: u64,
    /// Connections handed to a listener.
    pub delivered: u64,
    /// Connects answered "use the kernel" (no listener here, or its channel full).
    pub no_listener: u64,
    /// Clients dropped for a malformed frame or wrong descriptors (including
    /// a `Listen` without the listening socket bound to its address).
    pub malformed: u64,
    /// Accept channels closed (listening socket closed or process dead).
    pub channels_closed: u64,
}

struct Channel {
    stream: UnixStream,
    addr: SocketAddrV4,
}

/// Runs the monitor until `opts.stop` is set.
///
/// # Errors
///
/// When the socket cannot be bound (another monitor is running there) or
/// `poll` fails; a misbehaving client never stops the monitor.
pub fn run(opts: &MonitorOptions) -> io::Result<MonitorStats> {
    let listener = opts.addr.bind()?;
    listener.set_nonblocking(true)?;
    if let Some(cb) = &opts.on_ready {
        cb();
    }
    if opts.verbose {
        eprintln!("socket-monitor: listening on {}", opts.addr);
    }
    let mut stats = MonitorStats::default();
    let mut channels: HashMap<u64, Channel> = HashMap::new();
    let mut next_id = 0u64;
    let tick = Timespec { tv_sec: 0, tv_nsec: 200_000_000 };
    loop {
        if opts.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(stats);
        }
        let ids: Vec<u64> = channels.keys().copied().collect();
        let mut fds = Vec::with_capacity(ids.len() + 1);
        fds.push(PollFd::new(&listener, PollFlags::IN));
        for id in &ids {
            fds.push(PollFd::new(&channels[id].stream, PollFlags::IN));
        }
        match poll(&mut fds, Some(&tick)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let listener_ready = !fds[0].revents().is_empty();
        let dead: Vec<u64> =
            ids.iter().zip(&fds[1..]).filter(|(_, p)| !p.revents().is_empty()).map(|(id, _)| *id).collect();
        drop(fds);
        for id in dead {
            // A channel carries nothing towards the monitor: readable means
            // closed (or a misbehaving client, dropped alike).
            if let Some(ch) = channels.remove(&id) {
                stats.channels_closed += 1;
                if opts.verbose {
                    eprintln!("socket-monitor: listener {} gone", ch.addr);
                }
            }
        }
        if listener_ready {
            loop {
                match listener.accept() {
                    Ok((stream, _)) => handle_client(stream, &mut channels, &mut next_id, &mut stats, opts.verbose),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // Out of descriptors and the like: keep serving.
                        eprintln!("socket-monitor: accept failed: {e}");
                        break;
                    }
                }
            }
        }
    }
}

fn handle_client(
    stream: UnixStream,
    channels: &mut HashMap<u64, Channel>,
    next_id: &mut u64,
    stats: &mut MonitorStats,
    verbose: bool,
) {
    // A client sends its frame right after connecting; one that does not
    // within a second is dropped rather than stalling everyone.
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(Duration::from_secs(1))).is_err() {
        return;
    }
    let mut buf = [0u8; FRAME_LEN + 1];
    let Ok((n, fds)) = recv_fds(&stream, &mut buf) else {
        stats.malformed += 1;
        return;
    };
    let frame = match Frame::decode(&buf[..n]) {
        Some(f) => f,
        None => {
            stats.malformed += 1;
            return;
        }
    };
    match frame.op {
        Op::Listen if fds.len() == 1 && owns_listener(&fds[0], frame.dst) => {
            if stream.set_nonblocking(true).is_err() {
                return;
            }
            stats.listens += 1;
            if verbose {
                eprintln!("socket-monitor: listen {}", frame.dst);
            }
            channels.insert(*next_id, Channel { stream, addr: frame.dst });
            *next_id += 1;
        }
        Op::Connect if fds.len() == CONNECT_FDS => {
            let status = deliver(channels, &frame, &fds);
            if status == STATUS_OK {
                stats.delivered += 1;
            } else {
                stats.no_listener += 1;
            }
            if verbose {
                eprintln!(
                    "socket-monitor: connect {} -> {}: {}",
                    frame.src,
                    frame.dst,
                    if status == STATUS_OK { "delivered" } else { "kernel" }
                );
            }
            let reply = Frame { op: Op::Reply, status, dst: frame.dst, src: frame.src };
            // The connector may have given up (its timeout): nothing to do.
            let _ = send_fds(&stream, &reply.encode(), &[]);
        }
        _ => stats.malformed += 1,
    }
}

/// Whether `fd` (sent with a `Listen` frame) is a listening TCP socket bound
/// to `addr`: only the process that really listens there (the kernel gave
/// it the port) can take that address's local connections.
fn owns_listener(fd: &OwnedFd, addr: SocketAddrV4) -> bool {
    rustix::net::sockopt::socket_acceptconn(fd).unwrap_or(false)
        && rustix::net::getsockname(fd).ok().and_then(|a| SocketAddrV4::try_from(a).ok()) == Some(addr)
}

/// Finds the listener for `frame.dst` (exact address first, then the
/// wildcard on the same port) and passes it the connection's descriptors.
fn deliver(channels: &HashMap<u64, Channel>, frame: &Frame, fds: &[OwnedFd]) -> u8 {
    let wildcard = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, frame.dst.port());
    let mut candidates: Vec<(&u64, &Channel)> =
        channels.iter().filter(|(_, c)| c.addr == frame.dst || c.addr == wildcard).collect();
    // Exact matches first, then the oldest channel: deterministic.
    candidates.sort_by_key(|(id, c)| (c.addr != frame.dst, **id));
    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    let deliver = Frame::new(Op::Deliver, frame.dst, frame.src).encode();
    for (_, ch) in candidates {
        // Non-blocking: a listener that stopped accepting fills its channel;
        // then the kernel twin takes the connection instead.
        if send_fds(&ch.stream, &deliver, &borrowed).is_ok() {
            return STATUS_OK;
        }
    }
    STATUS_NO_LISTENER
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn start(name: &str) -> (MonitorAddr, Arc<AtomicBool>, std::thread::JoinHandle<io::Result<MonitorStats>>) {
        let addr = MonitorAddr::Abstract(format!("cf-test-{name}-{}", std::process::id()).into_bytes());
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let opts = MonitorOptions {
            addr: addr.clone(),
            verbose: false,
            stop: Some(stop.clone()),
            on_ready: Some(Arc::new(move || {
                let _ = tx.send(());
            })),
        };
        let h = std::thread::spawn(move || run(&opts));
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        (addr, stop, h)
    }

    fn connect(addr: &MonitorAddr) -> UnixStream {
        use std::os::linux::net::SocketAddrExt;
        let MonitorAddr::Abstract(n) = addr else { unreachable!() };
        UnixStream::connect_addr(&std::os::unix::net::SocketAddr::from_abstract_name(n).unwrap()).unwrap()
    }

    #[test]
    fn matches_connect_to_listen_and_forgets_closed_listeners() {
        let (addr, stop, h) = start("match");
        let src: SocketAddrV4 = "127.0.0.1:40000".parse().unwrap();
        let chan = connect(&addr);
        // A Listen must come with the listening socket itself.
        let tcp = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        let dst = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
        let wildcard = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        let thief = connect(&addr);
        send_fds(&thief, &Frame::new(Op::Listen, wildcard, src).encode(), &[]).unwrap();
        let other = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let liar = connect(&addr);
        send_fds(&liar, &Frame::new(Op::Listen, wildcard, src).encode(), &[other.as_fd()]).unwrap();
        send_fds(&chan, &Frame::new(Op::Listen, wildcard, src).encode(), &[tcp.as_fd()]).unwrap();
        std::thread::sleep(Duration::from_millis(300));

        let (a, b) = UnixStream::pair().unwrap();
        let client = connect(&addr);
        send_fds(&client, &Frame::new(Op::Connect, dst, src).encode(), &[a.as_fd(), b.as_fd(), a.as_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = recv_fds(&client, &mut buf).unwrap();
        let reply = Frame::decode(&buf[..n]).unwrap();
        assert_eq!((reply.op, reply.status), (Op::Reply, STATUS_OK));
        let (n, fds) = recv_fds(&chan, &mut buf).unwrap();
        assert_eq!(Frame::decode(&buf[..n]), Some(Frame::new(Op::Deliver, dst, src)));
        assert_eq!(fds.len(), 3);

        // Another port: nobody listens, use the kernel.
        let client = connect(&addr);
        let nobody = SocketAddrV4::new(Ipv4Addr::LOCALHOST, other.local_addr().unwrap().port());
        send_fds(&client, &Frame::new(Op::Connect, nobody, src).encode(), &[a.as_fd(), b.as_fd(), a.as_fd()]).unwrap();
        let (n, _) = recv_fds(&client, &mut buf).unwrap();
        assert_eq!(Frame::decode(&buf[..n]).unwrap().status, STATUS_NO_LISTENER);

        // Garbage and a connect without descriptors are dropped, counted.
        let mut junk = connect(&addr);
        junk.write_all(b"not a frame at all").unwrap();
        let mut end = Vec::new();
        let _ = junk.read_to_end(&mut end);
        let bare = connect(&addr);
        send_fds(&bare, &Frame::new(Op::Connect, dst, src).encode(), &[]).unwrap();
        let mut end = [0u8; 16];
        assert_eq!((&bare).read(&mut end).unwrap(), 0);

        // The listener goes away: its address is forgotten.
        drop(chan);
        std::thread::sleep(Duration::from_millis(300));
        let client = connect(&addr);
        send_fds(&client, &Frame::new(Op::Connect, dst, src).encode(), &[a.as_fd(), b.as_fd(), a.as_fd()]).unwrap();
        let (n, _) = recv_fds(&client, &mut buf).unwrap();
        assert_eq!(Frame::decode(&buf[..n]).unwrap().status, STATUS_NO_LISTENER);

        stop.store(true, Ordering::Relaxed);
        let stats = h.join().unwrap().unwrap();
        assert_eq!(stats, MonitorStats { listens: 1, delivered: 1, no_listener: 2, malformed: 4, channels_closed: 1 });
    }
}

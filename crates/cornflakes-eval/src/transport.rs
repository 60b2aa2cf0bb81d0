//! Opening the datapaths the benchmarks run over, by name.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cornflakes_datapath::shm::{LeaseLimits, ShmConfig, ShmDatapath};
use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
use cornflakes_datapath::ConnId;

use crate::Error;

/// A datapath between a client and a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Transport {
    /// The shared-memory datapath (processes on one host).
    Shm,
    /// The UDP datapath over io_uring, on 127.0.0.1.
    Udp,
    /// The TCP datapath over io_uring (127.0.0.1 unless `--addr` says).
    Tcp,
}

impl Transport {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// What `pingpong` can measure: a datapath, or the bare shared-memory ring
/// the `shm` datapath is built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Link {
    /// The shared-memory datapath (processes on one host).
    Shm,
    /// The UDP datapath over io_uring, on 127.0.0.1.
    Udp,
    /// The TCP datapath over io_uring, on 127.0.0.1.
    Tcp,
    /// Blocking `std::net` TCP sockets on 127.0.0.1, framed the same way
    /// (what a Rust program without a datapath gets; the bound for `tcp`).
    StdTcp,
    /// A bare shared-memory ring of the same design, without the datapath
    /// layers (the lower bound for `shm`).
    Bare,
}

impl Link {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Link::Shm => "shm",
            Link::Udp => "udp",
            Link::Tcp => "tcp",
            Link::StdTcp => "std-tcp",
            Link::Bare => "bare",
        }
    }
}

impl From<Transport> for Link {
    fn from(t: Transport) -> Link {
        match t {
            Transport::Shm => Link::Shm,
            Transport::Udp => Link::Udp,
            Transport::Tcp => Link::Tcp,
        }
    }
}

/// How a client reaches a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The shared-memory datapath, via its Unix socket.
    Shm(String),
    /// The UDP datapath, at this address.
    Udp(SocketAddr),
    /// The TCP datapath, at this address.
    Tcp(SocketAddr),
}

impl Target {
    /// The server at `addr` over `transport`: a Unix socket path for shm,
    /// IP:port for udp.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when `addr` is not IP:port for udp.
    pub fn new(transport: Transport, addr: &str) -> Result<Target, Error> {
        match transport {
            Transport::Shm => Ok(Target::Shm(addr.to_owned())),
            Transport::Udp => parse_udp_addr(addr).map(Target::Udp),
            Transport::Tcp => parse_tcp_addr(addr).map(Target::Tcp),
        }
    }
}

/// Parses an IP:port for the UDP datapath.
///
/// # Errors
///
/// [`Error::Invalid`], saying what is expected.
pub fn parse_udp_addr(addr: &str) -> Result<SocketAddr, Error> {
    addr.parse()
        .map_err(|e| Error::Invalid(format!("bad UDP address {addr:?}: {e}; give IP:port, e.g. 127.0.0.1:7000")))
}

/// Parses a host:port for the TCP datapath: an IP (IPv6 in brackets) or a
/// name, resolved now (the first address it resolves to).
///
/// # Errors
///
/// [`Error::Invalid`], saying what is expected.
pub fn parse_tcp_addr(addr: &str) -> Result<SocketAddr, Error> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = addr.parse() {
        return Ok(a);
    }
    let bad = |e: &dyn std::fmt::Display| {
        Error::Invalid(format!("bad TCP address {addr:?}: {e}; give host:port, e.g. 127.0.0.1:7000 or [::1]:7000"))
    };
    addr.to_socket_addrs().map_err(|e| bad(&e))?.next().ok_or_else(|| bad(&"resolves to no address"))
}

/// A Unix socket path no other call, in this process or another, returns:
/// process id, a per-process counter and the wall-clock time.
pub fn shm_socket_path() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("/tmp/cf-{}-{n}-{nanos}.sock", std::process::id())
}

/// Where a server of this host listens by default: a fresh Unix socket
/// path on shm ([`shm_socket_path`]), 127.0.0.1 on a port the kernel picks
/// on udp and tcp.
pub fn local_server_addr(transport: Transport) -> String {
    match transport {
        Transport::Shm => shm_socket_path(),
        Transport::Udp | Transport::Tcp => "127.0.0.1:0".to_owned(),
    }
}

/// Listens for shm clients at `path`.
///
/// # Errors
///
/// When the socket cannot be created.
pub fn shm_server(path: &str) -> Result<ShmDatapath, Error> {
    shm_server_with(path, false)
}

/// [`shm_server`], receiving in place (leased views of each client's pool,
/// [`lease_limits`]) when `in_place`.
///
/// # Errors
///
/// As [`shm_server`].
pub fn shm_server_with(path: &str, in_place: bool) -> Result<ShmDatapath, Error> {
    // A client that trusts its server also takes its own values back by
    // reference (an echo answered in place).
    let config = ShmConfig { receive_in_place: in_place.then(lease_limits), accept_returns: in_place, ..shm_config() };
    ShmDatapath::listen(path, config)
        .map_err(|e| Error::Failed(format!("cannot listen on {path}: {e} (is the directory writable?)")))
}

/// Connects to the shm server at `path`.
///
/// # Errors
///
/// When nothing listens there or the handshake fails.
pub fn shm_client(path: &str) -> Result<(ShmDatapath, ConnId), Error> {
    shm_client_with(path, false)
}

/// [`shm_client`], receiving in place (leased views of the server's pool,
/// [`lease_limits`]) when `in_place`.
///
/// # Errors
///
/// As [`shm_client`].
pub fn shm_client_with(path: &str, in_place: bool) -> Result<(ShmDatapath, ConnId), Error> {
    // A client that trusts its server also takes its own values back by
    // reference (an echo answered in place).
    let config = ShmConfig { receive_in_place: in_place.then(lease_limits), accept_returns: in_place, ..shm_config() };
    let dp = ShmDatapath::connect(path, config)
        .map_err(|e| format!("cannot connect to {path}: {e} (is the server running with --addr {path}?)"))?;
    let conn = dp.connections().next().ok_or("connected datapath has no connection")?;
    Ok((dp, conn))
}

/// The shm configuration of the evaluation's clients and servers: the
/// default, with 2 MiB inbound rings. A message body copied whole into a
/// ring (a request with its put values, a baseline's response, which is
/// built in private memory and so copied, not sent by descriptor) can then
/// carry the largest workload value (512 KiB) and its framing; the default
/// 1 MiB ring takes bodies up to 512 KiB only.
///
/// Parking holds up to 32 768 messages and 64 MiB per connection (the
/// default: 1024 and 4 MiB). This VM takes a core away for 1-4 ms about
/// once a second; a load generator gone that long left the server a full
/// ring and ~1500 parked echo responses after 2 ms at 700 k/s, and the
/// responses past those were dropped, so whether a point near the knee
/// kept up depended on whether such a stall fell in it. With these limits
/// a server rides out ~20 ms of an absent client at that rate (the late
/// responses count in the latencies) and still drops, and counts, past
/// them.
pub fn shm_config() -> ShmConfig {
    ShmConfig { ring_size: 2 << 20, max_parked_messages: 32 << 10, max_parked_bytes: 64 << 20, ..ShmConfig::default() }
}

/// What a receiver in place of the evaluation may hold of its peer's pool:
/// as many records as [`shm_config`] parks (32 768, 128 MiB named; the
/// default is 1024 and 4 MiB). A reply parked behind a full ring keeps the
/// lease on the request it returns values of, and leases are acknowledged
/// in order, so through a stall of the load generator every request behind
/// the first parked reply stays leased; with the default bound a server
/// received the next ones by copy (8 % of the requests in an overloaded
/// echo point), which is the slow path just when the load generator is
/// behind. Names the same few echo values many times, so the bytes bound
/// counts far more than the memory held.
pub fn lease_limits() -> LeaseLimits {
    LeaseLimits { max_leases: 32 << 10, max_bytes: 128 << 20, ..LeaseLimits::default() }
}

fn loopback_any() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A UDP server on 127.0.0.1, on a port the kernel picks.
///
/// # Errors
///
/// When the socket or the io_uring cannot be set up.
pub fn udp_server() -> Result<UdpDatapath, Error> {
    UdpDatapath::bind(loopback_any(), UdpConfig::loopback())
        .map_err(|e| Error::Failed(format!("cannot bind a UDP datapath on 127.0.0.1: {e}")))
}

/// Receive buffers of a UDP client (the datapath's default is 32). The
/// load generator takes up to 64 responses per pass and, when it falls
/// behind its schedule, sends many requests per pass; with 32 buffers it
/// could take only 32, and under overload its own socket dropped the
/// responses the server had sent: in 8 s at 2x load (`cf overload
/// --capacity 66000`, two pairs of runs on the shared 2-core VM), its
/// goodput was 26 % of what the server handled with 32 buffers and 56-67 %
/// with 256. The number posted still adapts to the traffic (see the udp
/// module docs), so light loads post few.
const CLIENT_RECV_BUFFERS: usize = 256;

/// A UDP client of `server`.
///
/// # Errors
///
/// When the socket or the io_uring cannot be set up.
pub fn udp_client(server: SocketAddr) -> Result<(UdpDatapath, ConnId), Error> {
    let config = UdpConfig { recv_buffers: CLIENT_RECV_BUFFERS, sq_entries: 512, ..UdpConfig::loopback() };
    let mut dp = UdpDatapath::bind(loopback_any(), config)
        .map_err(|e| format!("cannot bind a UDP datapath on 127.0.0.1: {e}"))?;
    let conn = dp.connect(server);
    Ok((dp, conn))
}

/// The TCP configuration of the evaluation's clients and servers: plain
/// `sendmsg` (the kernel copies zero-copy sends on loopback and veth
/// anyway; see the `tcp` module docs), with `pool_config` for the pool.
pub fn tcp_config(pool_config: cornflakes::PoolConfig) -> TcpConfig {
    TcpConfig { pool_config, ..TcpConfig::loopback() }
}

/// A TCP server listening on `addr` (port 0: the kernel picks).
///
/// # Errors
///
/// When the socket or the io_uring cannot be set up.
pub fn tcp_server(addr: SocketAddr, pool_config: cornflakes::PoolConfig) -> Result<TcpDatapath, Error> {
    TcpDatapath::bind(addr, tcp_config(pool_config))
        .map_err(|e| Error::Failed(format!("cannot start a TCP datapath on {addr}: {e}")))
}

/// A TCP client connected to `server`.
///
/// # Errors
///
/// When the io_uring cannot be set up or the connection fails.
pub fn tcp_client(server: SocketAddr) -> Result<(TcpDatapath, ConnId), Error> {
    let mut dp = TcpDatapath::new(tcp_config(cornflakes::PoolConfig::default()))
        .map_err(|e| format!("cannot create a TCP datapath: {e}"))?;
    let conn = dp.connect(server).map_err(|e| format!("{e} (is the server running with --addr {server}?)"))?;
    Ok((dp, conn))
}

/// How long a server waits in one `wait` call before checking again.
pub const SERVER_WAIT: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_are_unique_within_a_process() {
        let a = shm_socket_path();
        let b = shm_socket_path();
        assert_ne!(a, b);
        assert!(a.contains(&format!("cf-{}-", std::process::id())), "{a}");
    }

    #[test]
    fn udp_targets_need_an_ip_and_port() {
        assert!(Target::new(Transport::Udp, "/tmp/x.sock").unwrap_err().is_invalid());
        assert_eq!(Target::new(Transport::Udp, "127.0.0.1:9").unwrap(), Target::Udp(([127, 0, 0, 1], 9).into()));
        assert_eq!(Target::new(Transport::Shm, "/tmp/x.sock").unwrap(), Target::Shm("/tmp/x.sock".into()));
        assert!(Target::new(Transport::Tcp, "localhost").unwrap_err().is_invalid());
        assert_eq!(Target::new(Transport::Tcp, "[::1]:9").unwrap(), Target::Tcp("[::1]:9".parse().unwrap()));
        assert!(matches!(Target::new(Transport::Tcp, "localhost:9").unwrap(), Target::Tcp(a) if a.ip().is_loopback()));
    }
}

//! `cf pingpong`: round-trip latency of one message at a time between two
//! processes pinned to different cores, over the shared-memory datapath,
//! the UDP datapath, or a bare shared-memory ring (the same ring design
//! without the datapath layers, to show what the layers cost).

use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use cornflakes_datapath::shm::ShmDatapath;
use cornflakes_datapath::shm::{Ring, RingConsumer, RingProducer};
use cornflakes_datapath::{ConnId, Datapath, InPlace, Received, Segment, SendError};
use hdrhistogram::Histogram;

use serde::{Deserialize, Serialize};

use crate::child::{Role, ServerChild};
use crate::report::rounded;
use crate::transport::{self, Link, SERVER_WAIT};
use crate::Error;

/// What `cf pingpong` runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// What to measure.
    pub transport: Link,
    /// Message size in bytes (at least 1).
    pub size: usize,
    /// Measured round trips.
    pub iters: u64,
    /// Unrecorded round trips first.
    pub warmup: u64,
    /// Core of the client (this process).
    pub client_core: usize,
    /// Core of the server process.
    pub server_core: usize,
    /// For `tcp` and `std-tcp`: IP:port the server listens on (port 0: the
    /// kernel picks); `None`: 127.0.0.1. For `shm`: the socket path.
    pub addr: Option<String>,
    /// shm only: both sides receive in place, and messages of at least
    /// [`cornflakes::field::DEFAULT_THRESHOLD`] bytes go by descriptor (see
    /// [`serve_in_place`]).
    pub in_place: bool,
}

/// The `--addr` of a server child: `addr` for the links that take one,
/// else an error saying which do.
pub(crate) fn child_addr(link: Link, addr: Option<&str>) -> Result<Option<String>, Error> {
    match (link, addr) {
        (_, None) => Ok(None),
        (Link::Tcp | Link::StdTcp, Some(a)) => transport::parse_tcp_addr(a).map(|_| Some(a.to_owned())),
        (Link::Shm, Some(a)) => Ok(Some(a.to_owned())),
        (Link::Udp | Link::Bare, Some(_)) => Err(Error::Invalid(format!(
            "--addr is for --transport tcp (IP:port to listen on) or shm (socket path); {} picks its own",
            link.name()
        ))),
    }
}

/// The last line of `cf pingpong`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PingpongReport {
    /// `shm`, `shm-in-place`, `udp`, `tcp`, `std-tcp` or `bare`.
    pub transport: String,
    /// Message size, bytes.
    pub size: usize,
    /// Round-trip latency quantiles, ns.
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
    /// See `p50_ns`.
    pub p999_ns: u64,
    /// Mean round trip, ns (`null` when none was measured).
    pub mean_ns: Option<f64>,
    /// Slowest round trip, ns.
    pub max_ns: u64,
    /// Measured round trips.
    pub round_trips: u64,
    /// Wall-clock seconds of the whole run (warm-up and set-up included):
    /// the measured round trips fit in it.
    pub seconds: Option<f64>,
    /// For `tcp`: the p50 round trip of blocking `std::net` sockets
    /// measured in the same run (`std-tcp`), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std_tcp_p50_ns: Option<u64>,
}

/// The report's transport name of `--transport shm --in-place`.
pub const IN_PLACE: &str = "shm-in-place";

/// A round trip that takes longer than this is reported as lost.
const LOST_AFTER: Duration = Duration::from_secs(2);

/// A message whose bytes the client can check: distinct per position.
fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 + 7) as u8).collect()
}

/// Starts the server on `server_core`, measures here, prints a summary
/// and a [`PingpongReport`] as the last line of standard output.
///
/// # Errors
///
/// When the server does not start, or a response is wrong or missing.
pub fn run(args: &Config) -> Result<(), Error> {
    if args.size == 0 {
        return Err(Error::Invalid("--size must be at least 1".into()));
    }
    if args.in_place && args.transport != Link::Shm {
        return Err(Error::Invalid(format!(
            "--in-place is for --transport shm only (a {} message always arrives in our memory)",
            args.transport.name()
        )));
    }
    let role = if args.in_place { Role::PingpongInPlace } else { Role::Pingpong };
    let mut serve_args = vec![
        "--core".to_owned(),
        args.server_core.to_string(),
        "--role".to_owned(),
        role.name().to_owned(),
        "--transport".to_owned(),
        args.transport.name().to_owned(),
    ];
    let addr = child_addr(args.transport, args.addr.as_deref())?;
    if let (Some(a), true) = (&addr, matches!(args.transport, Link::Tcp | Link::StdTcp)) {
        serve_args.extend(["--addr".to_owned(), a.clone()]);
    }
    let payload = payload(args.size);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
    eprintln!(
        "pingpong over {}{} with {} B messages: {} round trips after {} warm-up (client core {}, server core {})",
        args.transport.name(),
        if args.in_place { ", received in place" } else { "" },
        args.size,
        args.iters,
        args.warmup,
        args.client_core,
        args.server_core
    );
    let started = Instant::now();
    let mut std_tcp_p50_ns = None;
    match args.transport {
        Link::Shm => {
            let path = addr.unwrap_or_else(transport::shm_socket_path);
            serve_args.extend(["--addr".to_owned(), path.clone()]);
            let _server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::shm_client_with(&path, args.in_place)?;
            if args.in_place {
                client_in_place(&mut dp, conn, &payload, args, &mut hist)?;
            } else {
                client(&mut dp, conn, &payload, args, &mut hist)?;
            }
        }
        Link::Udp => {
            let server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::udp_client(transport::parse_udp_addr(&server.addr)?)?;
            client(&mut dp, conn, &payload, args, &mut hist)?;
        }
        Link::Tcp => {
            let server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::tcp_client(transport::parse_tcp_addr(&server.addr)?)?;
            client(&mut dp, conn, &payload, args, &mut hist)?;
            drop((dp, server));
            // The baseline, in the same run: blocking std::net sockets.
            let mut base = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
            let mut base_args = serve_args.clone();
            let at = base_args.iter().position(|a| a == "tcp").expect("transport argument");
            base_args[at] = Link::StdTcp.name().to_owned();
            let server = ServerChild::spawn(&base_args)?;
            std_tcp_client(transport::parse_tcp_addr(&server.addr)?, &payload, args, &mut base)?;
            let p50 = base.value_at_quantile(0.5);
            println!(
                "std::net baseline round trip: p50 {p50} ns, p99 {} ns; tcp datapath p50 / baseline p50 = {:.2}",
                base.value_at_quantile(0.99),
                hist.value_at_quantile(0.5) as f64 / p50.max(1) as f64
            );
            std_tcp_p50_ns = Some(p50);
        }
        Link::StdTcp => {
            let server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            std_tcp_client(transport::parse_tcp_addr(&server.addr)?, &payload, args, &mut hist)?;
        }
        Link::Bare => {
            let (mut req_tx, req_rx) = Ring::create(1 << 20).map_err(|e| e.to_string())?;
            let (resp_tx, mut resp_rx) = Ring::create(1 << 20).map_err(|e| e.to_string())?;
            let fds = format!("{}:{}:{}", std::process::id(), req_rx.memfd().as_raw_fd(), resp_tx.memfd().as_raw_fd());
            serve_args.extend(["--addr".to_owned(), fds]);
            let _server = ServerChild::spawn(&serve_args)?;
            drop((req_rx, resp_tx));
            crate::pin::pin_to_core(args.client_core)?;
            bare_client(&mut req_tx, &mut resp_rx, &payload, args, &mut hist)?;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let q = |p: f64| hist.value_at_quantile(p);
    println!(
        "round trip: p50 {} ns, p99 {} ns, p99.9 {} ns, mean {:.0} ns, max {} ns ({} round trips in {secs:.1} s)",
        q(0.5),
        q(0.99),
        q(0.999),
        hist.mean(),
        hist.max(),
        hist.len()
    );
    let report = PingpongReport {
        transport: if args.in_place { IN_PLACE.to_owned() } else { args.transport.name().to_owned() },
        size: args.size,
        p50_ns: q(0.5),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        mean_ns: rounded(hist.mean(), 1),
        max_ns: hist.max(),
        round_trips: hist.len(),
        seconds: rounded(secs, 3),
        std_tcp_p50_ns,
    };
    println!("{}", serde_json::to_string(&report).expect("reports serialize"));
    Ok(())
}

/// Sends `data` as message `id`, copied, retrying while the datapath
/// applies back-pressure.
fn send<D: Datapath>(dp: &mut D, conn: ConnId, id: u32, data: &[u8]) -> Result<(), Error> {
    send_segments(dp, conn, id, &[Segment::Copy(data)])
}

/// Sends `segments` as message `id`, retrying while the datapath applies
/// back-pressure.
fn send_segments<D: Datapath>(dp: &mut D, conn: ConnId, id: u32, segments: &[Segment<'_>]) -> Result<(), Error> {
    loop {
        match dp.push_segments(conn, id, segments) {
            Ok(()) => return dp.flush().map_err(|e| Error::Failed(format!("flush failed: {e}"))),
            Err(SendError::Full | SendError::Backlogged(_)) => {
                dp.flush().map_err(|e| format!("flush failed: {e}"))?;
                dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
            }
            Err(e) => return Err(Error::Failed(format!("send failed: {e}"))),
        }
    }
}

fn client<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    payload: &[u8],
    args: &Config,
    hist: &mut Histogram<u64>,
) -> Result<(), Error> {
    let mut rx: Vec<Received> = Vec::with_capacity(8);
    for i in 0..args.warmup + args.iters {
        let id = i as u32;
        let start = Instant::now();
        send(dp, conn, id, payload)?;
        let mut polls = 0u32;
        let response = loop {
            if dp.recv_batch(&mut rx, 1).map_err(|e| format!("receive failed: {e}"))? > 0 {
                break rx.pop().expect("one received");
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(4096) && start.elapsed() > LOST_AFTER {
                return Err(Error::Failed(format!("no response to round trip {i} within {LOST_AFTER:?}")));
            }
        };
        let rtt = start.elapsed();
        if response.msg_id != id || response.payload[..] != *payload {
            return Err(Error::Failed(format!(
                "wrong response to round trip {i}: id {} ({} bytes), expected id {id} ({} bytes)",
                response.msg_id,
                response.payload.len(),
                payload.len()
            )));
        }
        drop(response);
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

/// The client of `--in-place`: each round trip writes the payload once
/// into a buffer of the shared pool (as an iceoryx2 client writes into a
/// loaned sample) and sends it by descriptor when it is at least
/// [`cornflakes::field::DEFAULT_THRESHOLD`] bytes, copied otherwise; the response
/// is checked byte by byte where it lies, in the server's pool.
fn client_in_place(
    dp: &mut ShmDatapath,
    conn: ConnId,
    payload: &[u8],
    args: &Config,
    hist: &mut Histogram<u64>,
) -> Result<(), Error> {
    let by_descriptor = payload.len() >= cornflakes::field::DEFAULT_THRESHOLD;
    let mut rx: Vec<InPlace> = Vec::with_capacity(8);
    for i in 0..args.warmup + args.iters {
        let id = i as u32;
        let start = Instant::now();
        if by_descriptor {
            let mut buf = alloc_shared(dp, payload.len())?;
            cornflakes_datapath::shm::copy_for_peer(&mut buf, payload);
            send_segments(dp, conn, id, &[Segment::ZeroCopy(buf.freeze())])?;
        } else {
            send(dp, conn, id, payload)?;
        }
        let mut polls = 0u32;
        let response = loop {
            if dp.recv_batch_in_place(&mut rx, 1).map_err(|e| format!("receive failed: {e}"))? > 0 {
                break rx.pop().expect("one received");
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(4096) && start.elapsed() > LOST_AFTER {
                return Err(Error::Failed(format!("no response to round trip {i} within {LOST_AFTER:?}")));
            }
        };
        let same = response.eq_bytes(payload).map_err(|e| format!("response to round trip {i}: {e}"))?;
        let rtt = start.elapsed();
        if response.msg_id != id || !same {
            return Err(Error::Failed(format!(
                "wrong response to round trip {i}: id {} ({} bytes, {} left in the server's pool), expected id {id} ({} bytes)",
                response.msg_id,
                response.len(),
                response.peer_segments(),
                payload.len()
            )));
        }
        drop(response);
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

/// A buffer of the shared pool (the one peers map), waiting for sends to
/// complete while the pool is exhausted.
fn alloc_shared(dp: &mut ShmDatapath, len: usize) -> Result<cornflakes::RcBufMut, Error> {
    loop {
        match dp.pool().alloc(len) {
            Ok(b) => return Ok(b),
            Err(cornflakes::mem::AllocError::Exhausted { .. }) => {
                dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
            }
            Err(e) => return Err(Error::Failed(format!("cannot allocate {len} B in the shared pool: {e}"))),
        }
    }
}

fn bare_client(
    tx: &mut RingProducer,
    rx: &mut RingConsumer,
    payload: &[u8],
    args: &Config,
    hist: &mut Histogram<u64>,
) -> Result<(), Error> {
    let mut reply = Vec::with_capacity(payload.len());
    for i in 0..args.warmup + args.iters {
        let start = Instant::now();
        while tx.try_push(payload).is_err() {
            std::hint::spin_loop();
        }
        let mut polls = 0u32;
        let ok = loop {
            if rx.try_pop(&mut reply).map_err(|_| "response ring corrupt".to_owned())?.is_some() {
                break reply == payload;
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(4096) && start.elapsed() > LOST_AFTER {
                return Err(Error::Failed(format!("no response to round trip {i} within {LOST_AFTER:?}")));
            }
        };
        let rtt = start.elapsed();
        if !ok {
            return Err(Error::Failed(format!("wrong response to round trip {i}")));
        }
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

/// Server: echoes every message back (copied), until the parent goes.
///
/// # Errors
///
/// When the datapath fails.
pub fn serve<D: Datapath>(dp: &mut D) -> Result<(), Error> {
    let mut rx: Vec<Received> = Vec::with_capacity(32);
    loop {
        // A client that goes away (tcp) is not the server's failure.
        let got = match dp.recv_batch(&mut rx, 32) {
            Err(cornflakes_datapath::RecvError::Closed(_)) => continue,
            r => r.map_err(|e| format!("receive failed: {e}"))?,
        };
        if got == 0 {
            dp.wait(SERVER_WAIT).map_err(|e| format!("wait failed: {e}"))?;
            continue;
        }
        for r in rx.drain(..) {
            send(dp, r.conn, r.msg_id, &r.payload)?;
        }
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
    }
}

/// Server of `--in-place` (shm, receiving in place): a message wholly in
/// our memory is sent back copied, as [`serve`] does; one left in the
/// client's pool is copied once, straight from there into a buffer of our
/// shared pool, and sent back by descriptor (an iceoryx2 server copies a
/// request into a loaned response the same way).
///
/// # Errors
///
/// When the datapath fails, or a lease expires before the copy.
pub fn serve_in_place(dp: &mut ShmDatapath) -> Result<(), Error> {
    let mut rx: Vec<InPlace> = Vec::with_capacity(32);
    loop {
        let got = match dp.recv_batch_in_place(&mut rx, 32) {
            Err(cornflakes_datapath::RecvError::Closed(_)) => continue,
            r => r.map_err(|e| format!("receive failed: {e}"))?,
        };
        if got == 0 {
            dp.wait(SERVER_WAIT).map_err(|e| format!("wait failed: {e}"))?;
            continue;
        }
        for m in rx.drain(..) {
            if let Some(local) = m.as_local() {
                send(dp, m.conn, m.msg_id, local)?;
                continue;
            }
            let (conn, id) = (m.conn, m.msg_id);
            let mut buf = alloc_shared(dp, m.len())?;
            m.copy_for_peer(&mut buf).map_err(|e| format!("message {id}: {e}"))?;
            // Released before the send: the client may reuse its buffer.
            drop(m);
            send_segments(dp, conn, id, &[Segment::ZeroCopy(buf.freeze())])?;
        }
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
    }
}

/// Server of `std-tcp`: blocking `std::net` sockets on `addr` (IP:port;
/// not one: 127.0.0.1 with a port the kernel picks), one
/// connection at a time, echoing each frame (the 8-byte header with the
/// length, then the message) with one `write`.
///
/// # Errors
///
/// When the socket cannot be bound.
pub fn serve_std_tcp(addr: &str) -> Result<(), Error> {
    use std::io::{Read, Write};
    let listen = transport::parse_tcp_addr(addr).unwrap_or_else(|_| ([127, 0, 0, 1], 0).into());
    let listener = std::net::TcpListener::bind(listen).map_err(|e| format!("cannot bind {listen}: {e}"))?;
    println!("READY {}", listener.local_addr().map_err(|e| e.to_string())?);
    for stream in listener.incoming() {
        let Ok(mut s) = stream else { continue };
        let _ = s.set_nodelay(true);
        let mut buf = Vec::new();
        loop {
            let mut header = [0u8; 8];
            if s.read_exact(&mut header).is_err() {
                break;
            }
            let Some((_, len)) = cornflakes_datapath::tcp::read_frame_header(&header) else { break };
            if len > cornflakes_datapath::tcp::MAX_TCP_MESSAGE {
                break;
            }
            buf.clear();
            buf.extend_from_slice(&header);
            buf.resize(8 + len, 0);
            if s.read_exact(&mut buf[8..]).is_err() || s.write_all(&buf).is_err() {
                break;
            }
        }
    }
    Ok(())
}

/// Client of `std-tcp`: one frame written, one read, per round trip.
fn std_tcp_client(
    server: std::net::SocketAddr,
    payload: &[u8],
    args: &Config,
    hist: &mut Histogram<u64>,
) -> Result<(), Error> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(server).map_err(|e| format!("cannot connect to {server}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(LOST_AFTER)).map_err(|e| e.to_string())?;
    let mut msg = vec![0u8; 8 + payload.len()];
    msg[8..].copy_from_slice(payload);
    let mut reply = vec![0u8; msg.len()];
    for i in 0..args.warmup + args.iters {
        cornflakes_datapath::tcp::write_frame_header(&mut msg, i as u32, payload.len());
        let start = Instant::now();
        s.write_all(&msg).map_err(|e| format!("send failed: {e}"))?;
        s.read_exact(&mut reply).map_err(|e| format!("no response to round trip {i}: {e}"))?;
        let rtt = start.elapsed();
        if reply != msg {
            return Err(Error::Failed(format!("wrong response to round trip {i}")));
        }
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

/// Server of the bare ring: `addr` is `pid:request_fd:response_fd` of the
/// parent's memfds.
///
/// # Errors
///
/// When the memfds cannot be opened or a ring is corrupt.
pub fn serve_bare(addr: &str) -> Result<(), Error> {
    let parts: Vec<&str> = addr.split(':').collect();
    let [pid, req, resp] = parts[..] else {
        return Err(Error::Invalid(format!("bad bare-ring address {addr:?}: expected pid:fd:fd")));
    };
    let open = |fd: &str| -> Result<OwnedFd, String> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the parent's ring memfd {fd}: {e}"))
    };
    let mut rx = RingConsumer::attach(open(req)?).map_err(|e| e.to_string())?;
    let mut tx = RingProducer::attach(open(resp)?).map_err(|e| e.to_string())?;
    println!("READY {addr}");
    // Rings copy out and in (ring memory is never a Rust reference).
    let mut request = Vec::new();
    loop {
        if rx.try_pop(&mut request).map_err(|_| "request ring corrupt".to_owned())?.is_some() {
            while tx.try_push(&request).is_err() {
                std::hint::spin_loop();
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

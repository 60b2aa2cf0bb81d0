//! `cf echo`: the paper's Figure 2 experiment. Clients send a message
//! holding a list of byte fields (two of 2048 B by default); the server
//! echoes it back in one of three ways:
//!
//! - `hybrid`: deserializes, builds the response with the generated setters
//!   (fields of at least 512 B become zero-copy references into the
//!   received buffer) and sends it with serialize-and-send;
//! - `no-sas`: the same, but without serialize-and-send: the header and
//!   copied data are first written into a separate buffer and the message
//!   is handed to the datapath as an explicit list of segments;
//! - `raw`: sends the received bytes back as they are, without
//!   deserializing (the "no serialization" limit).
//!
//! The client keeps `--window` requests outstanding, checks every response
//! byte for byte, and reports throughput and latency.

use std::time::{Duration, Instant};

use cornflakes::{Arena, Message, RcBuf};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};
use hdrhistogram::Histogram;

use cornflakes_kv::codec::cornflakes::send_segments;
use cornflakes_kv::codec::retry_full;
use serde::{Deserialize, Serialize};

use crate::child::{Role, ServerChild};
use crate::echo_proto::Echo;
use crate::report::{finite, rounded};
use crate::transport::{self, Transport, SERVER_WAIT};
use crate::Error;

/// A request without a response after this long is counted as lost.
const LOST_AFTER: Duration = Duration::from_millis(200);

/// How the server echoes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mode {
    /// Deserialize, rebuild, serialize-and-send.
    Hybrid,
    /// Deserialize, rebuild, write into a buffer, send a segment list.
    NoSas,
    /// Echo the received bytes without deserializing.
    Raw,
}

impl Mode {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Hybrid => "hybrid",
            Mode::NoSas => "no-sas",
            Mode::Raw => "raw",
        }
    }
}

/// What `cf echo` runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Transport to run over.
    pub transport: Transport,
    /// How the server echoes.
    pub mode: Mode,
    /// Fields in the message.
    pub fields: usize,
    /// Bytes per field.
    pub size: usize,
    /// Requests kept outstanding.
    pub window: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Unmeasured seconds first.
    pub warmup: f64,
    /// Core of the client (this process).
    pub client_core: usize,
    /// Core of the server process.
    pub server_core: usize,
    /// For `tcp`: IP:port the server listens on (port 0: the kernel
    /// picks); `None`: 127.0.0.1. For `shm`: the socket path.
    pub addr: Option<String>,
}

/// The last line of `cf echo`. Figures that could not be measured (no
/// response in the measured time) are `null`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EchoReport {
    /// `shm` or `udp`.
    pub transport: String,
    /// `hybrid`, `no-sas` or `raw`.
    pub mode: String,
    /// Fields per message.
    pub fields: usize,
    /// Bytes per field.
    pub size: usize,
    /// Requests kept outstanding.
    pub window: usize,
    /// Echoes per second over the measured time.
    pub echoes_per_s: Option<f64>,
    /// Field data echoed, Gbit/s.
    pub gbps: Option<f64>,
    /// Round-trip latency quantiles, ns.
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
    /// Responses in the measured time.
    pub responses: u64,
    /// Requests without a response after 200 ms (reissued).
    pub lost: u64,
    /// Wrong or unexpected responses.
    pub errors: u64,
}

/// Field `i` of every request: distinct bytes per field.
fn field(i: usize, size: usize) -> Vec<u8> {
    (0..size).map(|j| (i * 67 + j * 13 + 5) as u8).collect()
}

/// Starts the echo server on `server_core`, runs the client here, prints
/// progress on standard error and an [`EchoReport`] as the last line of
/// standard output.
///
/// # Errors
///
/// When the server does not start, a response is wrong, or more than 1 %
/// of the requests are lost.
pub fn run(args: &Config) -> Result<(), Error> {
    if args.fields == 0 || args.window == 0 {
        return Err(Error::Invalid("--fields and --window must be at least 1".into()));
    }
    let addr = crate::pingpong::child_addr(args.transport.into(), args.addr.as_deref())?;
    let mut serve_args = vec![
        "--core".to_owned(),
        args.server_core.to_string(),
        "--role".to_owned(),
        match args.mode {
            Mode::Hybrid => Role::EchoHybrid,
            Mode::NoSas => Role::EchoNoSas,
            Mode::Raw => Role::EchoRaw,
        }
        .name()
        .to_owned(),
        "--transport".to_owned(),
        args.transport.name().to_owned(),
    ];
    if let (Some(a), Transport::Tcp) = (&addr, args.transport) {
        serve_args.extend(["--addr".to_owned(), a.clone()]);
    }
    eprintln!(
        "echo over {} ({} server): {} x {} B fields, window {}, {:.1} s",
        args.transport.name(),
        args.mode.name(),
        args.fields,
        args.size,
        args.window,
        args.seconds
    );
    let report = match args.transport {
        Transport::Shm => {
            let path = addr.unwrap_or_else(transport::shm_socket_path);
            serve_args.extend(["--addr".to_owned(), path.clone()]);
            let _server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::shm_client(&path)?;
            client(&mut dp, conn, args)?
        }
        Transport::Udp => {
            let server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::udp_client(transport::parse_udp_addr(&server.addr)?)?;
            client(&mut dp, conn, args)?
        }
        Transport::Tcp => {
            let server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::tcp_client(transport::parse_tcp_addr(&server.addr)?)?;
            client(&mut dp, conn, args)?
        }
    };
    println!("{}", serde_json::to_string(&report).expect("reports serialize"));
    Ok(())
}

fn client<D: Datapath>(dp: &mut D, conn: ConnId, args: &Config) -> Result<EchoReport, Error> {
    let values: Vec<RcBuf> = (0..args.fields)
        .map(|i| dp.pool().alloc_copy(&field(i, args.size)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot allocate request values: {e}"))?;
    let arena_pool = dp.pool().clone();
    let mut arena = Arena::new(&arena_pool);
    let mut rx: Vec<Received> = Vec::with_capacity(64);
    let mut outstanding: Vec<Option<(u32, Instant)>> = vec![None; args.window];
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
    let (mut done, mut measured, mut errors, mut lost) = (0u64, 0u64, 0u64, 0u64);
    let warmup = Duration::from_secs_f64(args.warmup);
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + Duration::from_secs_f64(args.seconds);
    let mut measured_start = None;

    let send = |dp: &mut D, arena: &Arena, id: u32| -> Result<(), String> {
        let mut msg = Echo::new_in(arena);
        msg.init_vals(values.len());
        for v in &values {
            msg.append_vals(v);
        }
        // The client waits for room as long as it takes: the server
        // answering is what frees it.
        loop {
            match retry_full(dp, |dp| dp.push_message(conn, id, &msg)) {
                Err(SendError::Full | SendError::Backlogged(_)) => {
                    let _ = dp.flush();
                }
                other => return other.map_err(|e| format!("send failed: {e}")),
            }
        }
    };

    // Slot `s` carries ids s, s + window, s + 2 window, ...
    for (slot, entry) in outstanding.iter_mut().enumerate() {
        send(dp, &arena, slot as u32)?;
        *entry = Some((slot as u32, Instant::now()));
    }
    dp.flush().map_err(|e| format!("flush failed: {e}"))?;
    arena.reset();
    let mut last_progress = Instant::now();
    while Instant::now() < end {
        if dp.recv_batch(&mut rx, 32).map_err(|e| format!("receive failed: {e}"))? == 0 {
            // UDP may drop a datagram (socket buffers on loopback): count the
            // request as lost and reissue its slot with a new id.
            for entry in outstanding.iter_mut() {
                if let Some((id, t)) = *entry {
                    if t.elapsed() > LOST_AFTER {
                        lost += 1;
                        let id = id.wrapping_add(args.window as u32);
                        send(dp, &arena, id)?;
                        *entry = Some((id, Instant::now()));
                    }
                }
            }
            if lost > 0 {
                dp.flush().map_err(|e| format!("flush failed: {e}"))?;
                arena.reset();
            }
            continue;
        }
        let now = Instant::now();
        for r in rx.drain(..) {
            let slot = r.msg_id as usize % args.window;
            let Some((expected, sent)) = outstanding[slot] else {
                errors += 1;
                continue;
            };
            if r.msg_id != expected {
                errors += 1;
                continue;
            }
            outstanding[slot] = None;
            if !response_ok(&r, &values, &arena) {
                errors += 1;
            }
            done += 1;
            if now >= measure_from {
                measured_start.get_or_insert(now);
                measured += 1;
                hist.record((now - sent).as_nanos() as u64).expect("within bounds");
            }
            let id = r.msg_id.wrapping_add(args.window as u32);
            drop(r);
            send(dp, &arena, id)?;
            outstanding[slot] = Some((id, Instant::now()));
        }
        dp.flush().map_err(|e| format!("flush failed: {e}"))?;
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
        arena.reset();
        if last_progress.elapsed() > Duration::from_secs(1) {
            eprintln!("  {:>5.1} s: {done} responses", start.elapsed().as_secs_f64());
            last_progress = Instant::now();
        }
    }
    if errors > 0 {
        return Err(Error::Failed(format!("{errors} responses were wrong or unexpected")));
    }
    let secs = measured_start.map(|s| s.elapsed().as_secs_f64()).unwrap_or(f64::NAN);
    let rps = measured as f64 / secs;
    let gbps = rps * (args.fields * args.size) as f64 * 8.0 / 1e9;
    let q = |p: f64| hist.value_at_quantile(p);
    eprintln!(
        "{rps:.0} echoes/s ({gbps:.2} Gbit/s of field data), latency p50 {} ns, p99 {} ns ({measured} measured, {lost} lost)",
        q(0.5),
        q(0.99)
    );
    if lost * 100 > measured.max(1) {
        return Err(Error::Failed(format!(
            "{lost} of {} requests were lost (more than 1 %); try a smaller --window",
            measured + lost
        )));
    }
    Ok(EchoReport {
        transport: args.transport.name().to_owned(),
        mode: args.mode.name().to_owned(),
        fields: args.fields,
        size: args.size,
        window: args.window,
        echoes_per_s: rounded(rps, 0),
        gbps: finite(gbps).and_then(|g| rounded(g, 3)),
        p50_ns: q(0.5),
        p99_ns: q(0.99),
        responses: measured,
        lost,
        errors,
    })
}

/// Whether a response carries exactly the request's fields.
fn response_ok(r: &Received, values: &[RcBuf], arena: &Arena) -> bool {
    match Echo::deserialize(&r.payload, arena) {
        Ok(m) => {
            m.get_vals().len() == values.len()
                && m.get_vals().iter().zip(values).all(|(got, want)| got.as_bytes() == want.as_slice())
        }
        Err(_) => false,
    }
}

/// Server: echoes every message in `mode`, until the parent goes. Malformed
/// requests are counted and dropped, and so are responses to a client that
/// does not make room for them in time (it counts them as lost).
///
/// # Errors
///
/// When the datapath fails.
pub fn serve<D: Datapath>(dp: &mut D, mode: Mode) -> Result<(), Error> {
    let pool = dp.pool().clone();
    let mut arena = Arena::new(&pool);
    let mut rx: Vec<Received> = Vec::with_capacity(32);
    let (mut malformed, mut dropped) = (0u64, 0u64);
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
            let result = match mode {
                Mode::Raw => {
                    retry_full(dp, |dp| dp.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())]))
                }
                Mode::Hybrid | Mode::NoSas => {
                    let Ok(req) = Echo::deserialize(&r.payload, &arena) else {
                        malformed += 1;
                        continue;
                    };
                    let mut resp = Echo::new_in(&arena);
                    resp.init_vals(req.get_vals().len());
                    for v in req.get_vals().iter() {
                        resp.append_vals(v.as_bytes());
                    }
                    if mode == Mode::Hybrid {
                        retry_full(dp, |dp| dp.push_message(r.conn, r.msg_id, &resp))
                    } else {
                        send_segments(dp, r.conn, r.msg_id, &resp)
                    }
                }
            };
            match result {
                Ok(()) => {}
                Err(SendError::Full | SendError::Backlogged(_) | SendError::Closed(_)) => {
                    dropped += 1;
                    if dropped.is_power_of_two() {
                        eprintln!("echo server: {dropped} responses dropped (the client did not make room)");
                    }
                }
                Err(e) => return Err(Error::Failed(format!("send failed: {e}"))),
            }
        }
        dp.flush().map_err(|e| format!("flush failed: {e}"))?;
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
        arena.reset();
        if malformed > 0 && malformed.is_power_of_two() {
            eprintln!("echo server: {malformed} malformed requests dropped");
        }
    }
}

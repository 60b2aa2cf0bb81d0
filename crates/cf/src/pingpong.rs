//! `cf pingpong`: round-trip latency of one message at a time between two
//! processes pinned to different cores, over the shared-memory datapath,
//! the UDP datapath, or a bare shared-memory ring (the same ring design
//! without the datapath layers, to show what the layers cost).

use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use cornflakes_datapath::shm::{Ring, RingConsumer, RingProducer};
use cornflakes_datapath::{ConnId, Datapath, Received, SendError};
use hdrhistogram::Histogram;

use crate::child::ServerChild;
use crate::transport::{self, Transport, SERVER_WAIT};

/// Options of `cf pingpong`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Transport to measure.
    #[arg(long, value_enum)]
    transport: Transport,
    /// Message size in bytes.
    #[arg(long, default_value_t = 8)]
    size: usize,
    /// Measured round trips.
    #[arg(long, default_value_t = 100_000)]
    iters: u64,
    /// Unrecorded round trips first.
    #[arg(long, default_value_t = 10_000)]
    warmup: u64,
    /// Core of the client (this process).
    #[arg(long, default_value_t = 1)]
    client_core: usize,
    /// Core of the server process.
    #[arg(long, default_value_t = 0)]
    server_core: usize,
}

/// A round trip that takes longer than this is reported as lost.
const LOST_AFTER: Duration = Duration::from_secs(2);

/// A message whose bytes the client can check: distinct per position.
fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 31 + 7) as u8).collect()
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    if args.size == 0 {
        return Err("--size must be at least 1".into());
    }
    let mut serve_args = vec![
        "--core".to_owned(),
        args.server_core.to_string(),
        "--role".to_owned(),
        "pingpong".to_owned(),
        "--transport".to_owned(),
        args.transport.name().to_owned(),
    ];
    let payload = payload(args.size);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
    eprintln!(
        "pingpong over {} with {} B messages: {} round trips after {} warm-up (client core {}, server core {})",
        args.transport.name(),
        args.size,
        args.iters,
        args.warmup,
        args.client_core,
        args.server_core
    );
    let started = Instant::now();
    match args.transport {
        Transport::Shm => {
            let path = transport::shm_socket_path();
            serve_args.extend(["--addr".to_owned(), path.clone()]);
            let _server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::shm_client(&path)?;
            client(&mut dp, conn, &payload, args, &mut hist)?;
        }
        Transport::Udp => {
            let server = ServerChild::spawn(&serve_args)?;
            crate::pin::pin_to_core(args.client_core)?;
            let (mut dp, conn) = transport::udp_client(&server.addr)?;
            client(&mut dp, conn, &payload, args, &mut hist)?;
        }
        Transport::Bare => {
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
    println!(
        "{{\"transport\":\"{}\",\"size\":{},\"p50_ns\":{},\"p99_ns\":{},\"p999_ns\":{},\"mean_ns\":{:.1},\"max_ns\":{},\"round_trips\":{}}}",
        args.transport.name(),
        args.size,
        q(0.5),
        q(0.99),
        q(0.999),
        hist.mean(),
        hist.max(),
        hist.len()
    );
    Ok(())
}

/// Sends `data` as message `id`, retrying while the datapath applies
/// back-pressure.
fn send<D: Datapath>(dp: &mut D, conn: ConnId, id: u32, data: &[u8]) -> Result<(), String> {
    loop {
        match dp.push_buf(conn, id, data) {
            Ok(()) => return dp.flush().map_err(|e| format!("flush failed: {e}")),
            Err(SendError::Full) => {
                dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
            }
            Err(e) => return Err(format!("send failed: {e}")),
        }
    }
}

fn client<D: Datapath>(
    dp: &mut D,
    conn: ConnId,
    payload: &[u8],
    args: &Args,
    hist: &mut Histogram<u64>,
) -> Result<(), String> {
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
            if polls % 4096 == 0 && start.elapsed() > LOST_AFTER {
                return Err(format!("no response to round trip {i} within {LOST_AFTER:?}"));
            }
        };
        let rtt = start.elapsed();
        if response.msg_id != id || response.payload[..] != *payload {
            return Err(format!(
                "wrong response to round trip {i}: id {} ({} bytes), expected id {id} ({} bytes)",
                response.msg_id,
                response.payload.len(),
                payload.len()
            ));
        }
        drop(response);
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

fn bare_client(
    tx: &mut RingProducer,
    rx: &mut RingConsumer,
    payload: &[u8],
    args: &Args,
    hist: &mut Histogram<u64>,
) -> Result<(), String> {
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
            if polls % 4096 == 0 && start.elapsed() > LOST_AFTER {
                return Err(format!("no response to round trip {i} within {LOST_AFTER:?}"));
            }
        };
        let rtt = start.elapsed();
        if !ok {
            return Err(format!("wrong response to round trip {i}"));
        }
        if i >= args.warmup {
            hist.record(rtt.as_nanos() as u64).expect("within histogram bounds");
        }
    }
    Ok(())
}

/// Server: echoes every message back (copied), until the parent goes.
pub(crate) fn serve<D: Datapath>(dp: &mut D) -> Result<(), String> {
    let mut rx: Vec<Received> = Vec::with_capacity(32);
    loop {
        if dp.recv_batch(&mut rx, 32).map_err(|e| format!("receive failed: {e}"))? == 0 {
            dp.wait(SERVER_WAIT).map_err(|e| format!("wait failed: {e}"))?;
            continue;
        }
        for r in rx.drain(..) {
            send(dp, r.conn, r.msg_id, &r.payload)?;
        }
        dp.poll_completions().map_err(|e| format!("completions failed: {e}"))?;
    }
}

/// Server of the bare ring: `addr` is `pid:request_fd:response_fd` of the
/// parent's memfds.
pub(crate) fn serve_bare(addr: &str) -> Result<(), String> {
    let parts: Vec<&str> = addr.split(':').collect();
    let [pid, req, resp] = parts[..] else {
        return Err(format!("bad bare-ring address {addr:?}: expected pid:fd:fd"));
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

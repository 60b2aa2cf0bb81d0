//! `RecvMode::Single` against `RecvMode::Multishot` on loopback, side by
//! side in one run (the numbers behind the default in the `tcp` module
//! docs): an 8-byte ping-pong (p50 and p99 round trip, both sides spinning)
//! and the echo throughput of many connections with several requests each
//! in flight. Echo server thread pinned to core 0, client to core 1; every
//! response is checked (id, length, bytes).
//!
//! ```text
//! cargo run --release -p cornflakes-datapath --example tcp_recv_modes [repeats] [connections]
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use cornflakes::mem::HugePages;
use cornflakes::PoolConfig;
use cornflakes_datapath::tcp::{RecvMode, TcpConfig, TcpDatapath};
use cornflakes_datapath::{Datapath, Received, RecvError, Segment};

fn config(mode: RecvMode) -> TcpConfig {
    TcpConfig {
        recv_mode: mode,
        pool_config: PoolConfig { max_bytes: 2 << 30, hugepages: HugePages::Auto, lock: false },
        ..TcpConfig::loopback()
    }
}

fn pin(core: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("cannot pin to core {core}: {e}");
    }
}

/// An echo server on core 0 until `stop`; returns its address.
fn echo_server(mode: RecvMode, stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        pin(0);
        let mut dp = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), config(mode)).unwrap();
        tx.send(dp.local_addrs()[0]).unwrap();
        let mut reqs = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            reqs.clear();
            match dp.recv_batch(&mut reqs, 64) {
                Ok(_) | Err(RecvError::Closed(_)) => {}
                Err(e) => panic!("{e}"),
            }
            for r in &reqs {
                // Back-pressure is not expected here: one response per request.
                dp.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())]).unwrap();
            }
            dp.flush().unwrap();
            dp.poll_completions().unwrap();
        }
    });
    (rx.recv().unwrap(), handle)
}

fn check(r: &Received, id: u32, body: &[u8]) {
    assert_eq!(r.msg_id, id, "response id");
    assert!(r.payload[..] == *body, "response bytes differ");
}

/// p50 and p99 round trip of `iters` 8-byte messages, in µs.
fn pingpong(mode: RecvMode, iters: usize) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = echo_server(mode, stop.clone());
    pin(1);
    let mut dp = TcpDatapath::new(config(mode)).unwrap();
    let conn = dp.connect(addr).unwrap();
    let body = *b"8 bytes!";
    let mut rtts = Vec::with_capacity(iters);
    let mut out = Vec::new();
    for k in 0..iters + 1000 {
        let start = Instant::now();
        dp.push_buf(conn, k as u32, &body).unwrap();
        dp.flush().unwrap();
        out.clear();
        while dp.recv_batch(&mut out, 1).unwrap() == 0 {}
        if k >= 1000 {
            rtts.push(start.elapsed().as_nanos() as u64);
        }
        check(&out[0], k as u32, &body);
        dp.poll_completions().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    rtts.sort_unstable();
    let at = |q: f64| rtts[((rtts.len() as f64 * q) as usize).min(rtts.len() - 1)] as f64 / 1000.0;
    (at(0.50), at(0.99))
}

/// Responses per second with `conns` connections, `depth` 64-byte
/// requests in flight on each, for `seconds`.
fn many(mode: RecvMode, conns: usize, depth: usize, seconds: f64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = echo_server(mode, stop.clone());
    pin(1);
    let mut dp = TcpDatapath::new(TcpConfig { max_connections: conns + 1, ..config(mode) }).unwrap();
    let ids: Vec<_> = (0..conns).map(|_| dp.connect(addr).unwrap()).collect();
    let body = [0xA5u8; 64];
    for &c in &ids {
        for d in 0..depth {
            dp.push_buf(c, d as u32, &body).unwrap();
        }
    }
    dp.flush().unwrap();
    let (mut done, mut out) = (0u64, Vec::new());
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        out.clear();
        dp.recv_batch(&mut out, 256).unwrap();
        for r in &out {
            check(r, r.msg_id, &body);
            dp.push_buf(r.conn, r.msg_id, &body).unwrap();
        }
        done += out.len() as u64;
        dp.flush().unwrap();
        dp.poll_completions().unwrap();
    }
    let rate = done as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    drop(dp);
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let repeats: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let conns: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(256);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("tcp receive modes on 127.0.0.1, server core 0, client core 1, {repeats} repeats; load average {load}");
    let modes = [RecvMode::Single, RecvMode::Multishot];
    let mut p50 = [vec![], vec![]];
    let mut p99 = [vec![], vec![]];
    let mut rate = [vec![], vec![]];
    for r in 1..=repeats {
        for (m, &mode) in modes.iter().enumerate() {
            let (a, b) = pingpong(mode, 50_000);
            let t = many(mode, conns, 4, 3.0);
            println!(
                "run {r}: {mode:?}: 8 B ping-pong p50 {a:.1} µs p99 {b:.1} µs; {conns} connections x 4 in flight: {:.0} k responses/s",
                t / 1e3
            );
            p50[m].push(a);
            p99[m].push(b);
            rate[m].push(t);
        }
    }
    for (m, mode) in modes.iter().enumerate() {
        println!(
            "median {mode:?}: p50 {:.1} µs, p99 {:.1} µs, {:.0} k responses/s",
            median(p50[m].clone()),
            median(p99[m].clone()),
            median(rate[m].clone()) / 1e3
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average after: {load}");
}

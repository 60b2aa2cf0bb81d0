//! One-way throughput of the TCP datapath on loopback against a plain
//! blocking `write`/`read` loop of the same message size, and `SENDMSG`
//! against `SENDMSG_ZC` (the zero-copy break-even; see the `tcp` module
//! docs). Receiver on one thread, sender on another, one connection.
//!
//! ```text
//! cargo run --release -p cornflakes-datapath --example tcp_throughput [MiB per case]
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::PoolConfig;
use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
use cornflakes_datapath::{Datapath, Segment, SendError, PACKET_HEADER_LEN};

fn config(zero_copy_min: usize) -> TcpConfig {
    TcpConfig {
        pool_config: PoolConfig { max_bytes: 8 << 30, hugepages: HugePages::Auto, lock: false },
        zero_copy_min,
        max_queued_bytes: 64 << 20,
        ..TcpConfig::default()
    }
}

/// GB/s of `count` messages of `size` bytes through the datapath.
fn datapath(size: usize, count: u64, zero_copy_min: usize) -> (f64, u64) {
    let (tx, rx) = mpsc::channel();
    let receiver = std::thread::spawn(move || {
        let mut dp = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), config(usize::MAX)).unwrap();
        tx.send(dp.local_addrs()[0]).unwrap();
        let (mut got, mut bytes, mut out) = (0u64, 0u64, Vec::new());
        let mut start = None;
        while got < count {
            out.clear();
            if dp.recv_batch(&mut out, 64).unwrap() == 0 {
                dp.wait(Duration::from_millis(10)).unwrap();
                continue;
            }
            start.get_or_insert_with(Instant::now);
            got += out.len() as u64;
            bytes += out.iter().map(|r| r.payload.len() as u64).sum::<u64>();
        }
        (bytes, start.unwrap().elapsed())
    });
    let mut dp = TcpDatapath::new(config(zero_copy_min)).unwrap();
    let conn = dp.connect(rx.recv().unwrap()).unwrap();
    let value = dp.pool().alloc_copy(&vec![0x5Au8; size]).unwrap();
    let mut sent = 0;
    while sent < count {
        match dp.push_segments(conn, sent as u32, &[Segment::ZeroCopy(value.clone())]) {
            Ok(()) => sent += 1,
            Err(SendError::Backlogged(_)) => {
                dp.flush().unwrap();
                dp.wait(Duration::from_micros(50)).unwrap();
                dp.poll_completions().unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    while dp.in_flight() > 0 {
        dp.flush().unwrap();
        dp.wait(Duration::from_micros(50)).unwrap();
        dp.poll_completions().unwrap();
    }
    let (bytes, took) = receiver.join().unwrap();
    (bytes as f64 / took.as_secs_f64() / 1e9, dp.stats().zero_copy_copied)
}

/// GB/s of the same messages with blocking `write_all`/`read_exact` on a
/// heap buffer, framed the same way.
fn plain(size: usize, count: u64) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut buf = vec![0u8; PACKET_HEADER_LEN + size];
        s.read_exact(&mut buf).unwrap();
        let start = Instant::now();
        for _ in 1..count {
            s.read_exact(&mut buf).unwrap();
        }
        ((count - 1) * size as u64, start.elapsed())
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut msg = vec![0x5Au8; PACKET_HEADER_LEN + size];
    msg[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    for _ in 0..count {
        s.write_all(&msg).unwrap();
    }
    let (bytes, took) = receiver.join().unwrap();
    bytes as f64 / took.as_secs_f64() / 1e9
}

fn main() {
    let mib: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2048);
    println!(
        "{:>10} {:>12} {:>14} {:>16}   (GB/s, {mib} MiB per case)",
        "size", "plain", "dp sendmsg", "dp sendmsg_zc"
    );
    for size in [4 << 10, 16 << 10, 64 << 10, 256 << 10, 2 << 20, 16 << 20] {
        let count = ((mib << 20) / size as u64).max(16);
        let p = plain(size, count);
        let (d, _) = datapath(size, count, usize::MAX);
        let (z, copied) = datapath(size, count, 0);
        println!("{size:>10} {p:>12.2} {d:>14.2} {z:>16.2}   (zero-copy sends copied by the kernel: {copied})");
    }
}

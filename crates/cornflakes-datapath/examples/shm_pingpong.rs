//! Ping-pong round trips between two processes pinned to cores 0 and 1,
//! for 8 B and 2048 B messages; prints the median and p99 in ns:
//!
//! - `bare ring`: `shm::ring` alone; `try_pop` copies each message out of
//!   the ring into a reused buffer (ring memory is never a Rust reference)
//!   and the echo pushes it back from there.
//! - `bare ring + copy out`: the same, plus one more copy of each popped
//!   message into an application buffer.
//! - `datapath`: `ShmDatapath` with `push_buf` (copies) and `recv_batch`
//!   (packet header, pool buffer per message, wake-up flag checks).
//! - `datapath (zero-copy)`: both sides send a shared-pool buffer as a
//!   zero-copy segment (descriptor in the ring, gathered by the receiver);
//!   the echo answers with a value of the request's length kept in its
//!   shared pool (a received payload is private and would be copied).
//!
//! `ONLY=ring|ringcopy|dp|dpzc` runs one variant (for profiling).
//!
//! ```text
//! cargo run --release -p cornflakes-datapath --example shm_pingpong [-- ROUNDS]
//! ```
//!
//! The process re-runs itself as the echo peer (`--child ring|dp|dpzc PATH`).

use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cornflakes_datapath::shm::ring::{RingConsumer, RingProducer, DEFAULT_RING_SIZE};
use cornflakes_datapath::shm::{recv_fds, send_fds, ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Segment};

const SIZES: [usize; 2] = [8, 2048];
const QUIT: u32 = u32::MAX;

fn pin(core: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("warning: cannot pin to core {core}: {e}");
    }
}

fn spawn(kind: &str, path: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap()).arg("--child").arg(kind).arg(path).spawn().unwrap()
}

fn summary(name: &str, size: usize, mut ns: Vec<u64>) -> (u64, u64) {
    ns.sort_unstable();
    let (med, p99) = (ns[ns.len() / 2], ns[ns.len() * 99 / 100]);
    println!("{name:<24} {size:>5} B   median {med:>6} ns   p99 {p99:>6} ns   ({} round trips)", ns.len());
    (med, p99)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        pin(1);
        match args[2].as_str() {
            "ring" => child_ring(Path::new(&args[3]), false),
            "ringcopy" => child_ring(Path::new(&args[3]), true),
            kind => child_dp(Path::new(&args[3]), kind == "dpzc"),
        }
        return;
    }
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let warmup = rounds / 10;
    pin(0);
    let dir = std::env::temp_dir();
    let pid = std::process::id();

    // ONLY=ring|ringcopy|dp|dpzc runs one variant (for profiling).
    if let Ok(only) = std::env::var("ONLY") {
        let path = dir.join(format!("cf-pp-{only}-{pid}.sock"));
        match only.as_str() {
            "ring" | "ringcopy" => bench_ring(&path, rounds, warmup, only == "ringcopy"),
            _ => bench_dp(&path, rounds, warmup, only == "dpzc"),
        };
        return;
    }
    let ring = bench_ring(&dir.join(format!("cf-pp-ring-{pid}.sock")), rounds, warmup, false);
    let ring_copy = bench_ring(&dir.join(format!("cf-pp-ringcopy-{pid}.sock")), rounds, warmup, true);
    let dp = bench_dp(&dir.join(format!("cf-pp-dp-{pid}.sock")), rounds, warmup, false);
    let dpzc = bench_dp(&dir.join(format!("cf-pp-dpzc-{pid}.sock")), rounds, warmup, true);
    println!();
    for (k, size) in SIZES.iter().enumerate() {
        println!(
            "ratio datapath/bare  {size:>5} B   median {:.2}x   p99 {:.2}x",
            dp[k].0 as f64 / ring[k].0 as f64,
            dp[k].1 as f64 / ring[k].1 as f64
        );
    }
    for (k, size) in SIZES.iter().enumerate() {
        println!(
            "ratio datapath/bare+copy {size:>5} B   median {:.2}x   p99 {:.2}x",
            dp[k].0 as f64 / ring_copy[k].0 as f64,
            dp[k].1 as f64 / ring_copy[k].1 as f64
        );
    }
    println!(
        "ratio zero-copy/bare  {:>5} B   median {:.2}x   p99 {:.2}x",
        SIZES[1],
        dpzc[1].0 as f64 / ring[1].0 as f64,
        dpzc[1].1 as f64 / ring[1].1 as f64
    );
}

/// Parent side of the bare ring: creates the ring it consumes, receives the
/// child's, and times push + pop. With `copy_out`, both sides copy each
/// popped message into a private buffer (what any receiver that keeps the
/// bytes does, and what the datapath's receive does), and the echo pushes
/// from that buffer.
fn bench_ring(path: &PathBuf, rounds: usize, warmup: usize, copy_out: bool) -> Vec<(u64, u64)> {
    let listener = UnixListener::bind(path).unwrap();
    let mut child = spawn(if copy_out { "ringcopy" } else { "ring" }, path);
    let (sock, _) = listener.accept().unwrap();
    let _ = std::fs::remove_file(path);
    let mut rx = RingConsumer::create(DEFAULT_RING_SIZE).unwrap();
    send_fds(&sock, b"r", &[rx.memfd()]).unwrap();
    let (_, mut fds) = recv_fds(&sock, &mut [0u8; 1]).unwrap();
    let mut tx = RingProducer::attach(fds.pop().unwrap()).unwrap();
    let mut out = Vec::new();
    for size in SIZES {
        let msg = vec![0xABu8; size];
        let mut popped = Vec::with_capacity(4096);
        let mut buf = vec![0u8; 4096];
        let mut ns = Vec::with_capacity(rounds);
        for i in 0..warmup + rounds {
            let t0 = Instant::now();
            while tx.try_push(&msg).is_err() {}
            let n = loop {
                if rx.try_pop(&mut popped).unwrap().is_some() {
                    if copy_out {
                        buf[..popped.len()].copy_from_slice(&popped);
                        std::hint::black_box(&mut buf);
                    }
                    break popped.len();
                }
                std::hint::spin_loop();
            };
            let dt = t0.elapsed().as_nanos() as u64;
            assert_eq!(n, size);
            if i >= warmup {
                ns.push(dt);
            }
        }
        out.push(summary(if copy_out { "bare ring + copy out" } else { "bare ring" }, size, ns));
    }
    tx.try_push(&[0]).unwrap();
    child.wait().unwrap();
    out
}

fn child_ring(path: &Path, copy_out: bool) {
    let sock = UnixStream::connect(path).unwrap();
    let mut rx = RingConsumer::create(DEFAULT_RING_SIZE).unwrap();
    send_fds(&sock, b"r", &[rx.memfd().as_fd()]).unwrap();
    let (_, mut fds) = recv_fds(&sock, &mut [0u8; 1]).unwrap();
    let mut tx = RingProducer::attach(fds.pop().unwrap()).unwrap();
    let mut popped = Vec::with_capacity(4096);
    let mut buf = vec![0u8; 4096];
    loop {
        if rx.try_pop(&mut popped).unwrap().is_none() {
            std::hint::spin_loop();
            continue;
        }
        if popped.len() == 1 {
            return;
        }
        if copy_out {
            buf[..popped.len()].copy_from_slice(&popped);
            while tx.try_push(&buf[..popped.len()]).is_err() {}
        } else {
            while tx.try_push(&popped).is_err() {}
        }
    }
}

/// Parent side of the datapath: push, then poll `recv_batch` for the echo.
fn bench_dp(path: &Path, rounds: usize, warmup: usize, zero_copy: bool) -> Vec<(u64, u64)> {
    let mut dp = ShmDatapath::listen(path, ShmConfig::default()).unwrap();
    let mut child = spawn(if zero_copy { "dpzc" } else { "dp" }, path);
    let conn = dp.accept(Duration::from_secs(10)).unwrap();
    let mut out = Vec::new();
    let mut got = Vec::with_capacity(8);
    for size in SIZES {
        // A value in the shared pool: sent by descriptor.
        let mut msg = dp.pool().alloc(size).unwrap();
        msg.fill(0xAB);
        let msg = msg.freeze();
        let mut ns = Vec::with_capacity(rounds);
        for i in 0..warmup + rounds {
            let t0 = Instant::now();
            if zero_copy {
                dp.push_segments(conn, i as u32, &[Segment::ZeroCopy(msg.clone())]).unwrap();
            } else {
                dp.push_buf(conn, i as u32, &msg).unwrap();
            }
            while dp.recv_batch(&mut got, 8).unwrap() == 0 {
                std::hint::spin_loop();
            }
            let dt = t0.elapsed().as_nanos() as u64;
            assert_eq!(got[0].payload.len(), size);
            got.clear();
            if zero_copy {
                dp.poll_completions().unwrap();
            }
            if i >= warmup {
                ns.push(dt);
            }
        }
        let name = if zero_copy { "datapath (zero-copy)" } else { "datapath" };
        out.push(summary(name, size, ns));
    }
    let s = dp.shm_stats();
    if s.sleeps + s.wakeups_sent > 0 {
        println!("  (sleeps {}, wake-ups sent {})", s.sleeps, s.wakeups_sent);
    }
    quit(&mut dp, conn);
    child.wait().unwrap();
    out
}

fn quit(dp: &mut ShmDatapath, conn: ConnId) {
    dp.push_buf(conn, QUIT, b"").unwrap();
}

fn child_dp(path: &Path, zero_copy: bool) {
    let mut dp = ShmDatapath::connect(path, ShmConfig::default()).unwrap();
    let mut got = Vec::with_capacity(8);
    // Received payloads are in the private pool, which the peer does not
    // map: sent back zero-copy they would be copied. The zero-copy echo
    // answers with a value of the same length held in the shared pool.
    let mut values: std::collections::HashMap<usize, cornflakes::RcBuf> = Default::default();
    loop {
        if dp.recv_batch(&mut got, 8).unwrap() == 0 {
            std::hint::spin_loop();
            continue;
        }
        for r in got.drain(..) {
            if r.msg_id == QUIT {
                return;
            }
            if zero_copy && r.payload.len() >= 512 {
                let len = r.payload.len();
                let value = values.entry(len).or_insert_with(|| dp.pool().alloc_copy(&r.payload).unwrap()).clone();
                dp.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(value)]).unwrap();
            } else {
                dp.push_buf(r.conn, r.msg_id, &r.payload).unwrap();
            }
        }
        if zero_copy {
            dp.poll_completions().unwrap();
        }
    }
}

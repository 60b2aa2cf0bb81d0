//! Ping-pong over the UDP datapath on 127.0.0.1, between two processes
//! pinned to different cores: the client sends a `GetM` with one value of
//! 8 B (copied) or 2048 B (zero-copy from the pool), the server decodes it
//! and sends it back with `push_message` (its value zero-copy out of the
//! received packet), and the client records the round trip. Both sides
//! busy-poll. For reference, the same exchange with plain blocking-free
//! `std::net::UdpSocket` calls (one `sendto`/`recvfrom` system call each)
//! is measured too.
//!
//! ```text
//! cargo run --release -p cornflakes-datapath --example udp_pingpong -- [iterations] [client_core server_core]
//! ```

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::{Arena, Message, PoolConfig};
use cornflakes_datapath::udp::{UdpConfig, UdpDatapath};
use cornflakes_datapath::Datapath;
use cornflakes_tests::example::GetM;

const ROLE_ENV: &str = "CF_PINGPONG_ROLE";
const SIZES: [usize; 2] = [8, 2048];
const STOP: u32 = u32::MAX;

fn pin(core: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("warning: cannot pin to core {core}: {e}");
    }
}

fn config() -> UdpConfig {
    UdpConfig {
        pool_config: PoolConfig { max_bytes: 1 << 30, hugepages: HugePages::Auto, lock: true },
        busy_poll: Duration::from_secs(1),
        ..UdpConfig::loopback()
    }
}

fn server(core: usize) {
    pin(core);
    let mut dp = UdpDatapath::bind("127.0.0.1:0".parse().unwrap(), config()).expect("bind");
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    raw.set_nonblocking(true).unwrap();
    println!("READY {} {}", dp.local_addr(), raw.local_addr().unwrap());
    let mut out = Vec::with_capacity(16);
    let mut buf = [0u8; 4096];
    let mut arena = Arena::new(dp.pool());
    let mut raw_open = true;
    loop {
        out.clear();
        dp.recv_batch(&mut out, 16).unwrap();
        for req in out.drain(..) {
            if req.msg_id == STOP {
                return;
            }
            {
                let msg = GetM::deserialize(&req.payload, &arena).expect("decode");
                dp.push_message(req.conn, req.msg_id, &msg).unwrap();
            }
            arena.reset();
        }
        dp.flush().unwrap();
        dp.poll_completions().unwrap();
        if raw_open {
            if let Ok((n, from)) = raw.recv_from(&mut buf) {
                if n == 0 {
                    raw_open = false;
                } else {
                    raw.send_to(&buf[..n], from).unwrap();
                }
            }
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn report(what: &str, size: usize, mut rtts: Vec<u64>) {
    rtts.sort_unstable();
    println!(
        "{what:<28} {size:>5} B  median {:>7} ns  p99 {:>7} ns  min {:>7} ns  ({} round trips)",
        percentile(&rtts, 0.5),
        percentile(&rtts, 0.99),
        rtts[0],
        rtts.len()
    );
}

fn client(iters: usize, core: usize, server_core: usize) {
    pin(core);
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .env(ROLE_ENV, server_core.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the server process");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.next().expect("server output").unwrap();
    let mut words = ready.split_whitespace().skip(1);
    let dp_addr: SocketAddr = words.next().unwrap().parse().unwrap();
    let raw_addr: SocketAddr = words.next().unwrap().parse().unwrap();

    let mut dp = UdpDatapath::bind("127.0.0.1:0".parse().unwrap(), config()).expect("bind");
    let conn = dp.connect(dp_addr);
    let warmup = iters / 10 + 100;
    let mut out = Vec::with_capacity(4);
    for size in SIZES {
        let value = dp.pool().alloc_copy(&vec![0x5a; size]).unwrap();
        let mut rtts = Vec::with_capacity(iters);
        let mut reply_arena = Arena::new(dp.pool());
        for i in 0..warmup + iters {
            let start = Instant::now();
            {
                let arena = Arena::new(dp.pool());
                let mut req = GetM::new_in(&arena);
                req.set_id(i as u32);
                req.append_vals(&value);
                dp.push_message(conn, i as u32, &req).unwrap();
            }
            dp.flush().unwrap();
            let reply = loop {
                if dp.recv_batch(&mut out, 1).unwrap() == 1 {
                    break out.pop().unwrap();
                }
            };
            let rtt = start.elapsed().as_nanos() as u64;
            assert_eq!(reply.msg_id, i as u32);
            {
                let msg = GetM::deserialize(&reply.payload, &reply_arena).unwrap();
                assert_eq!(msg.get_vals()[0].len(), size);
            }
            reply_arena.reset();
            dp.poll_completions().unwrap();
            if i >= warmup {
                rtts.push(rtt);
            }
        }
        report("cornflakes udp (io_uring)", size, rtts);
    }
    let s = dp.stats();
    let u = dp.udp_stats();
    println!(
        "  client: sent {} zero-copy segments {} copied-by-kernel {} sendmsg_zc(fixed) {} sendmsg {} submits {}",
        s.sent, s.zero_copy_segments, s.zero_copy_copied, u.sendmsg_zc_fixed, u.sendmsg, u.submits
    );
    dp.push_buf(conn, STOP, b"").ok();

    // Baseline: one sendto and a spinning non-blocking recvfrom per message.
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    raw.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    for size in SIZES {
        let arena = Arena::copying();
        let payload = vec![0x5a; size];
        let mut req = GetM::new_in(&arena);
        req.append_vals(&payload);
        let bytes = req.serialize_to_vec().unwrap();
        let mut rtts = Vec::with_capacity(iters);
        for i in 0..warmup + iters {
            let start = Instant::now();
            raw.send_to(&bytes, raw_addr).unwrap();
            let n = loop {
                match raw.recv_from(&mut buf) {
                    Ok((n, _)) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                    Err(e) => panic!("{e}"),
                }
            };
            let rtt = start.elapsed().as_nanos() as u64;
            assert_eq!(n, bytes.len());
            if i >= warmup {
                rtts.push(rtt);
            }
        }
        report("std UdpSocket (syscalls)", size, rtts);
    }
    raw.send_to(b"", raw_addr).ok();
    dp.flush().ok();
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.wait();
}

fn main() {
    if let Ok(core) = std::env::var(ROLE_ENV) {
        server(core.parse().unwrap());
        return;
    }
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("numeric arguments")).collect();
    let iters = args.first().copied().unwrap_or(100_000);
    let (client_core, server_core) = (args.get(1).copied().unwrap_or(0), args.get(2).copied().unwrap_or(1));
    println!("ping-pong on 127.0.0.1, client on core {client_core}, server on core {server_core}, {iters} round trips per size");
    client(iters, client_core, server_core);
}

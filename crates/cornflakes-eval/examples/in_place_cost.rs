//! What a client pays per zero-copy response, gathering it into its own
//! pool or reading it in place (`ShmConfig::receive_in_place`), the rest
//! being equal: a server thread (core 0) answers each request with a
//! Cornflakes `KvResponse` holding one value of its shared pool (sent by
//! descriptor, as the key-value server sends CDN objects); a client thread
//! (core 1) keeps `--window` requests in flight, decodes every response
//! and checks every byte of its value (`check_value` / `ValueChecker`, as
//! the load generator does). Two client connections, one per mode, take
//! turns for `--rounds` rounds; the table gives each round's responses per
//! second and the medians. In place, a value is read 64 bytes at a time
//! straight into the comparison (`PeerSlice::for_each_block` and
//! `check_value_blocks`, `--read blocks`, the load generator's way), copied
//! out 4 KiB at a time into a stack buffer (`PeerSlice::for_each_chunk`,
//! `--read chunks`, its way until 2026-11-28) or copied out whole into a
//! reused buffer first (`--read copy`).
//!
//! ```sh
//! cargo run --release -p cornflakes-eval --example in_place_cost
//! ```
//!
//! (Both threads are in one process, so it cannot run under callgrind: the
//! client's polls would be serialized with the server's.)
//!
//! Values are `--values` keys of `--size` bytes (default 10 000 x 8000 B,
//! 80 MB of CDN-sized objects, beyond the 32 MiB last-level cache and
//! within the 64 hugepages this machine reserves), asked for in a random
//! order.

use std::time::{Duration, Instant};

use cornflakes::Arena;
use cornflakes_datapath::shm::{LeaseLimits, ShmConfig, ShmDatapath};
use cornflakes_datapath::{Datapath, Received};
use cornflakes_eval::loadgen::PeerBlocks;
use cornflakes_kv::codec::cornflakes::CornflakesClient;
use cornflakes_kv::kv_proto::KvResponse;
use cornflakes_kv::{ClientCodec, Status};
use cornflakes_workloads::{check_value, check_value_blocks, fill_value, ValueChecker};

const SERVER_CORE: usize = 0;
const CLIENT_CORE: usize = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Gather,
    InPlace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Gather => "gather",
            Mode::InPlace => "in-place",
        }
    }
}

/// How the client reads a value left in the server's pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    Blocks,
    Chunks,
    Copy,
}

struct Options {
    values: u32,
    size: usize,
    window: usize,
    seconds: f64,
    rounds: usize,
    only: Option<Mode>,
    count: Option<u64>,
    /// How a value left in place is read.
    read: Read,
}

fn options() -> Options {
    let mut o = Options {
        values: 10_000,
        size: 8000,
        window: 32,
        seconds: 1.0,
        rounds: 5,
        only: None,
        count: None,
        read: Read::Blocks,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--values" => o.values = value().parse().expect("--values N"),
            "--size" => o.size = value().parse().expect("--size BYTES"),
            "--window" => o.window = value().parse().expect("--window N"),
            "--seconds" => o.seconds = value().parse().expect("--seconds S"),
            "--rounds" => o.rounds = value().parse().expect("--rounds N"),
            "--read" => {
                o.read = match value().as_str() {
                    "blocks" => Read::Blocks,
                    "chunks" => Read::Chunks,
                    "copy" => Read::Copy,
                    other => panic!("--read blocks|chunks|copy, not {other}"),
                }
            }
            "--count" => o.count = Some(value().parse().expect("--count N")),
            "--only" => {
                o.only = Some(match value().as_str() {
                    "gather" => Mode::Gather,
                    "in-place" => Mode::InPlace,
                    other => panic!("--only gather|in-place, not {other}"),
                })
            }
            other => panic!("unknown flag {other}; see the file's doc comment"),
        }
    }
    o
}

fn main() {
    let o = options();
    let path = std::env::temp_dir().join(format!("cf-in-place-cost-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let (values, size) = (o.values, o.size);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server_stop = stop.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server_path = path.clone();
    let server = std::thread::spawn(move || {
        let dp = ShmDatapath::listen(&server_path, ShmConfig { ring_size: 2 << 20, ..ShmConfig::default() }).unwrap();
        serve(dp, values, size, &server_stop, ready_tx)
    });
    ready_rx.recv().expect("the server preloaded");
    cornflakes_eval::pin::pin_to_core(CLIENT_CORE).expect("pin the client");
    let config = |mode| ShmConfig {
        ring_size: 2 << 20,
        receive_in_place: (mode == Mode::InPlace).then(LeaseLimits::default),
        ..ShmConfig::default()
    };
    let modes: Vec<Mode> = o.only.map_or(vec![Mode::Gather, Mode::InPlace], |m| vec![m]);
    let mut clients: Vec<(Mode, ShmDatapath)> =
        modes.iter().map(|&m| (m, ShmDatapath::connect(&path, config(m)).unwrap())).collect();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    if let Some(count) = o.count {
        let (mode, dp) = &mut clients[0];
        let start = Instant::now();
        let done = drive(dp, *mode, &o, &mut rng, Some(count), Duration::MAX);
        println!("{}: {done} responses in {:.2} s", mode.name(), start.elapsed().as_secs_f64());
    } else {
        println!("{:>6} {:>10} {:>14}", "round", "mode", "responses/s");
        for round in 1..=o.rounds {
            for (k, (mode, dp)) in clients.iter_mut().enumerate() {
                let start = Instant::now();
                let done = drive(dp, *mode, &o, &mut rng, None, Duration::from_secs_f64(o.seconds));
                let rate = done as f64 / start.elapsed().as_secs_f64();
                println!("{round:>6} {:>10} {rate:>14.0}", mode.name());
                rates[k].push(rate);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let medians: Vec<f64> = rates.iter_mut().map(median).collect();
        for (m, r) in modes.iter().zip(&medians) {
            println!("median {:>10} {r:>14.0}", m.name());
        }
        if medians.len() == 2 {
            println!("in-place / gather: {:.2}x", medians[1] / medians[0]);
        }
    }
    for (_, dp) in &clients {
        println!("client shm stats: {:?}", dp.shm_stats());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(clients);
    server.join().unwrap();
    let _ = std::fs::remove_file(&path);
}

/// The server: preloads the values in its shared pool, then answers each
/// request (4 bytes: a key) with the key's value, zero-copy.
fn serve(
    mut dp: ShmDatapath,
    values: u32,
    size: usize,
    stop: &std::sync::atomic::AtomicBool,
    ready: std::sync::mpsc::Sender<()>,
) {
    cornflakes_eval::pin::pin_to_core(SERVER_CORE).expect("pin the server");
    let store: Vec<_> = (0..values)
        .map(|k| {
            let mut b = dp.pool().alloc(size).expect("pool room for the values");
            fill_value(k, 0, &mut b);
            b.freeze()
        })
        .collect();
    ready.send(()).unwrap();
    let mut arena = Arena::new(dp.pool());
    let mut rx: Vec<Received> = Vec::with_capacity(64);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = dp.recv_batch(&mut rx, 64);
        for r in rx.drain(..) {
            let Ok(key) = <[u8; 4]>::try_from(&r.payload[..]) else { continue };
            let Some(value) = store.get(u32::from_le_bytes(key) as usize) else { continue };
            let mut resp = KvResponse::new_in(&arena);
            resp.set_status(Status::Ok as u32);
            resp.init_vals(1);
            resp.append_vals(&value[..]);
            while let Err(cornflakes_datapath::SendError::Full) = dp.push_message(r.conn, r.msg_id, &resp) {
                let _ = dp.poll_completions();
            }
        }
        arena.reset();
        let _ = dp.flush();
        // Connections are accepted while the receive idles.
        let _ = dp.poll_completions();
    }
}

/// Keeps `window` requests in flight on `dp` until `count` responses or
/// `time` passed; checks each; returns how many were right (panics on a
/// wrong one: this is a cost measurement, not a fault test).
#[inline(never)]
fn drive(dp: &mut ShmDatapath, mode: Mode, o: &Options, rng: &mut u64, count: Option<u64>, time: Duration) -> u64 {
    let conn = dp.connections().next().expect("connected");
    let mut keys = vec![u32::MAX; o.window];
    let mut codec = CornflakesClient::new(dp.scratch_pool());
    let mut next_key = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        (*rng % u64::from(o.values)) as u32
    };
    for (slot, k) in keys.iter_mut().enumerate() {
        *k = next_key();
        dp.push_buf(conn, slot as u32, &k.to_le_bytes()).unwrap();
    }
    dp.flush().unwrap();
    let deadline = Instant::now() + time.min(Duration::from_secs(3600));
    let size = o.size as u32;
    let (mut whole, mut in_place) = (Vec::with_capacity(64), Vec::with_capacity(64));
    let mut done = 0u64;
    let mut scratch = Vec::new();
    let mut outstanding = o.window;
    let mut ending = false;
    while outstanding > 0 {
        if !ending && (count.is_some_and(|c| done >= c) || (count.is_none() && Instant::now() >= deadline)) {
            ending = true;
        }
        let got = match mode {
            Mode::Gather => dp.recv_batch(&mut whole, 64).unwrap(),
            Mode::InPlace => dp.recv_batch_in_place(&mut in_place, 64).unwrap(),
        };
        if got == 0 {
            continue;
        }
        let mut answered = Vec::with_capacity(got);
        for r in whole.drain(..) {
            let key = keys[r.msg_id as usize];
            let mut ok = false;
            codec
                .read_response(&r.payload, &mut |s, v| {
                    ok = s == Status::Ok && matches!(v, [v] if check_value(key, 0, size, v));
                })
                .unwrap();
            assert!(ok, "a wrong value for key {key}");
            answered.push(r.msg_id);
        }
        for r in in_place.drain(..) {
            let key = keys[r.msg_id as usize];
            let mut ok = false;
            codec
                .read_response_in_place(&r, &mut |s, v| {
                    ok = s == Status::Ok
                        && match v {
                            [cornflakes_datapath::Span::Peer(p)] if o.read == Read::Blocks => {
                                check_value_blocks(key, 0, size, &PeerBlocks(p))
                            }
                            [cornflakes_datapath::Span::Peer(p)] if o.read == Read::Copy => {
                                scratch.resize(p.len(), 0);
                                p.copy_to_slice(&mut scratch).is_ok() && check_value(key, 0, size, &scratch)
                            }
                            [cornflakes_datapath::Span::Peer(p)] => {
                                let mut c = ValueChecker::new(key, 0);
                                p.for_each_chunk(|piece| {
                                    c.feed(piece);
                                    true
                                })
                                .is_ok()
                                    && c.matches(size)
                            }
                            _ => false,
                        };
                })
                .unwrap();
            assert!(ok, "a wrong value for key {key}");
            answered.push(r.msg_id);
        }
        done += answered.len() as u64;
        outstanding -= answered.len();
        if !ending {
            for slot in answered {
                let k = next_key();
                keys[slot as usize] = k;
                dp.push_buf(conn, slot, &k.to_le_bytes()).unwrap();
                outstanding += 1;
            }
            dp.flush().unwrap();
        }
        codec.end_batch();
    }
    done
}

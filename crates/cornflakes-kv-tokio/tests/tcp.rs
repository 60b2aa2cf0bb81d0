//! The tokio-prost server on loopback, driven by what drives it in
//! `cf compare`: our tcp datapath with the prost client codec. Every
//! response is checked; hostile peers (a huge length, a truncated frame then
//! close, random bytes, a request that is not protobuf) are disconnected or
//! dropped and counted while a well-behaved client keeps being served.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::PoolConfig;
use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received};
use cornflakes_kv::codec::prost::ProstClient;
use cornflakes_kv::{ClientCodec, Limits, Op, Request, ServerStats, Status};
use cornflakes_kv_tokio::{serve, ValueStore};

/// A server on a thread; stopped (and its counters returned) by `stop`.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<ServerStats>>,
}

impl Server {
    fn start(store: ValueStore) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || serve(listener, store, |_| !flag.load(Ordering::Relaxed)).unwrap());
        Server { addr, stop, thread: Some(thread) }
    }

    fn stop(mut self) -> ServerStats {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn client(addr: SocketAddr) -> (TcpDatapath, ConnId) {
    let config = TcpConfig {
        pool_config: PoolConfig { max_bytes: 1 << 30, hugepages: HugePages::Never, lock: false },
        ..TcpConfig::loopback()
    };
    let mut dp = TcpDatapath::new(config).unwrap();
    let conn = dp.connect(addr).unwrap();
    (dp, conn)
}

fn recv_one(dp: &mut TcpDatapath) -> Received {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while Instant::now() < deadline {
        dp.poll_completions().unwrap();
        if dp.recv_batch(&mut out, 1).unwrap() == 1 {
            return out.pop().unwrap();
        }
        dp.wait(Duration::from_millis(10)).unwrap();
    }
    panic!("no response within 10 s");
}

/// Sends `req`, waits for its response and returns status and values.
fn call(
    dp: &mut TcpDatapath,
    conn: ConnId,
    codec: &mut ProstClient,
    id: u32,
    req: &Request<'_>,
) -> (Status, Vec<Vec<u8>>) {
    codec.send_request(dp, conn, id, req).unwrap();
    dp.flush().unwrap();
    let rx = recv_one(dp);
    assert_eq!(rx.msg_id, id, "the response carries the request's id");
    let mut got = None;
    codec
        .read_response(&rx.payload, &mut |status, vals| got = Some((status, vals.iter().map(|v| v.to_vec()).collect())))
        .expect("a prost response");
    got.unwrap()
}

/// Status and value lengths (a failed assertion does not print megabytes).
fn summary(got: &(Status, Vec<Vec<u8>>)) -> (Status, Vec<usize>) {
    (got.0, got.1.iter().map(Vec::len).collect())
}

fn req<'r>(op: Op, keys: &[&'r [u8]], vals: &[&'r [u8]]) -> Request<'r> {
    Request { op: op as u32, keys: keys.iter().copied().collect(), vals: vals.iter().copied().collect(), index: 0 }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn puts_gets_and_echoes_of_every_size_round_trip() {
    let mut store = ValueStore::new(Limits::default());
    store.insert_with(b"preloaded", &[3000], |_, b| b.copy_from_slice(&pattern(3000, 1)));
    let server = Server::start(store);
    let (mut dp, conn) = client(server.addr);
    let mut codec = ProstClient::new(dp.pool());
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    assert_eq!(
        call(&mut dp, conn, &mut codec, next(), &req(Op::Get, &[b"preloaded"], &[])),
        (Status::Ok, vec![pattern(3000, 1)])
    );
    assert_eq!(call(&mut dp, conn, &mut codec, next(), &req(Op::Get, &[b"absent"], &[])), (Status::NotFound, vec![]));
    for (i, len) in [0usize, 1, 511, 512, 513, 4096, 64 << 10, 1 << 20].into_iter().enumerate() {
        let value = pattern(len, i as u8);
        let key = format!("k{len}");
        let status = call(&mut dp, conn, &mut codec, next(), &req(Op::Put, &[key.as_bytes()], &[&value])).0;
        assert_eq!(status, Status::Ok, "put of {len} B");
        let got = call(&mut dp, conn, &mut codec, next(), &req(Op::Get, &[key.as_bytes()], &[]));
        assert!(got == (Status::Ok, vec![value.clone()]), "get of {len} B: {:?}", summary(&got));
        // Responses carry at most 1 MiB of values (Limits::max_response).
        let tail: &[u8] = if len < 1 << 20 { b"tail" } else { b"" };
        let got = call(&mut dp, conn, &mut codec, next(), &req(Op::Echo, &[], &[&value, tail]));
        assert!(got == (Status::Ok, vec![value, tail.to_vec()]), "echo of {len} B: {:?}", summary(&got));
    }
    let got = call(&mut dp, conn, &mut codec, next(), &req(Op::Echo, &[], &[&[1; 1 << 20], b"x"]));
    assert_eq!(got, (Status::TooLarge, vec![]), "a response over the limit");
    let too_large = vec![0u8; (1 << 20) + 1];
    let status = call(&mut dp, conn, &mut codec, next(), &req(Op::Put, &[b"big"], &[&too_large])).0;
    assert_eq!(status, Status::TooLarge, "a value over the limit");
    drop(dp);
    let stats = server.stop();
    assert_eq!(stats.handled, 2 + 8 * 3 + 2);
    assert_eq!(stats.malformed, 0);
    assert!(stats.busy_ns > 0);
}

#[test]
fn pipelined_requests_are_all_answered_in_order() {
    let mut store = ValueStore::new(Limits::default());
    for k in 0..100u32 {
        store.insert_with(format!("key{k}").as_bytes(), &[600], |_, b| b.fill(k as u8));
    }
    let server = Server::start(store);
    let (mut dp, conn) = client(server.addr);
    let mut codec = ProstClient::new(dp.pool());
    for round in 0..20u32 {
        for k in 0..100u32 {
            let key = format!("key{k}");
            codec.send_request(&mut dp, conn, round * 1000 + k, &req(Op::Get, &[key.as_bytes()], &[])).unwrap();
        }
        dp.flush().unwrap();
        for k in 0..100u32 {
            let rx = recv_one(&mut dp);
            assert_eq!(rx.msg_id, round * 1000 + k);
            codec
                .read_response(&rx.payload, &mut |status, vals| {
                    assert_eq!(status, Status::Ok);
                    assert_eq!(vals, [&[k as u8; 600][..]]);
                })
                .unwrap();
        }
    }
    drop(dp);
    assert_eq!(server.stop().handled, 2000);
}

#[test]
fn hostile_peers_are_cut_off_and_counted_while_others_are_served() {
    let mut store = ValueStore::new(Limits::default());
    store.insert_with(b"k", &[700], |_, b| b.fill(9));
    let server = Server::start(store);
    let (mut dp, conn) = client(server.addr);
    let mut codec = ProstClient::new(dp.pool());
    let get = req(Op::Get, &[b"k"], &[]);
    let (done_tx, done_rx) = mpsc::channel();
    let addr = server.addr;
    let hostile = std::thread::spawn(move || {
        let frame = |id: u32, len: u32, body: &[u8]| {
            let mut f = id.to_le_bytes().to_vec();
            f.extend_from_slice(&len.to_le_bytes());
            f.extend_from_slice(body);
            f
        };
        // A length over the limit (the tcp datapath's, 2 MiB - 8).
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&frame(1, u32::MAX, b"")).unwrap();
        // A frame that promises 100 bytes, carries 10, and closes.
        let mut s2 = TcpStream::connect(addr).unwrap();
        s2.write_all(&frame(2, 100, &[0; 10])).unwrap();
        drop(s2);
        // A whole frame whose message is not protobuf (an unterminated
        // varint), then a good request on the same connection.
        let mut s3 = TcpStream::connect(addr).unwrap();
        s3.write_all(&frame(3, 3, &[0xff, 0xff, 0xff])).unwrap();
        // Random bytes: either a length over the limit or a frame that
        // never completes; the connection is dropped either way.
        let mut s4 = TcpStream::connect(addr).unwrap();
        let noise: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let _ = s4.write_all(&noise);
        done_tx.send(()).unwrap();
        // Keep them open a while: the server must not wait for them.
        std::thread::sleep(Duration::from_millis(500));
        (s, s3, s4)
    });
    done_rx.recv().unwrap();
    for id in 0..200 {
        assert_eq!(call(&mut dp, conn, &mut codec, id, &get), (Status::Ok, vec![vec![9u8; 700]]));
    }
    drop(hostile.join().unwrap());
    drop(dp);
    let stats = server.stop();
    assert_eq!(stats.handled, 200);
    // The huge length (1), the unparsable message (1), and the noise if its
    // first length is over the limit; the truncated frame is a close.
    assert!((2..=3).contains(&stats.malformed), "{stats:?}");
}

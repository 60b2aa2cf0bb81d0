// The tests of `tcp_hostile.rs` and `tcp_hostile_multishot.rs`: each defines `RECV_MODE` and
// includes this file.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::PoolConfig;
use cornflakes_datapath::tcp::{read_frame_header, write_frame_header, TcpConfig, TcpDatapath, MAX_TCP_MESSAGE};
use cornflakes_datapath::{ConnId, Datapath, RecvError, Segment};

fn config() -> TcpConfig {
    TcpConfig {
        recv_mode: RECV_MODE,
        pool_config: PoolConfig { max_bytes: 2 << 30, hugepages: HugePages::Never, lock: false },
        ..TcpConfig::loopback()
    }
}

fn random_bytes(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// One round: every good connection sends a request, the server echoes
/// each, the client checks every answer. Returns connections the server
/// reported closed.
fn round(server: &mut TcpDatapath, client: &mut TcpDatapath, good: &[ConnId], round: u32) -> Vec<ConnId> {
    for (i, &c) in good.iter().enumerate() {
        let body = format!("round {round} conn {i}");
        client.push_buf(c, i as u32, body.as_bytes()).unwrap();
    }
    client.flush().unwrap();
    let mut closed = Vec::new();
    let mut answered = 0;
    let mut reqs = Vec::new();
    let mut resps = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while answered < good.len() {
        assert!(Instant::now() < deadline, "round {round}: {answered} answers after 10 s: {server:?}");
        reqs.clear();
        match server.recv_batch(&mut reqs, 256) {
            Ok(_) => {}
            Err(RecvError::Closed(c)) => closed.push(c),
            Err(e) => panic!("{e}"),
        }
        for r in &reqs {
            server.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())]).unwrap();
        }
        server.flush().unwrap();
        server.poll_completions().unwrap();
        resps.clear();
        client.recv_batch(&mut resps, 256).unwrap();
        for r in &resps {
            let i = r.msg_id as usize;
            assert_eq!(r.conn, good[i]);
            assert_eq!(&r.payload[..], format!("round {round} conn {i}").as_bytes());
            answered += 1;
        }
        client.poll_completions().unwrap();
        if reqs.is_empty() && resps.is_empty() {
            server.wait(Duration::from_millis(1)).unwrap();
        }
    }
    closed
}

#[test]
fn hostile_peers_are_cut_off_and_a_hundred_others_are_served() {
    let mut server = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap();
    let addr = server.local_addrs()[0];
    let mut client = TcpDatapath::new(config()).unwrap();
    let good: Vec<ConnId> = (0..100).map(|_| client.connect(addr).unwrap()).collect();
    let mut closed = round(&mut server, &mut client, &good, 0);

    // 1. A length of 4 GiB - 1.
    let mut huge = TcpStream::connect(addr).unwrap();
    huge.write_all(&[1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]).unwrap();
    // 2. A frame of 1000 bytes, 10 of them sent, then close.
    let mut truncated = TcpStream::connect(addr).unwrap();
    let mut h = [0u8; 8];
    write_frame_header(&mut h, 2, 1000);
    truncated.write_all(&h).unwrap();
    truncated.write_all(&[0; 10]).unwrap();
    // 3. Random bytes.
    let noise = random_bytes(64 << 10, 0x9E37_79B9_7F4A_7C15);
    assert!(read_frame_header(&noise).unwrap().1 > MAX_TCP_MESSAGE, "the seed gives a bad first length");
    let mut random = TcpStream::connect(addr).unwrap();
    random.write_all(&noise).unwrap();

    for r in 1..=3 {
        closed.extend(round(&mut server, &mut client, &good, r));
    }
    drop(truncated);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut r = 4;
    while closed.len() < 3 {
        assert!(Instant::now() < deadline, "closed so far {closed:?}: {server:?}");
        closed.extend(round(&mut server, &mut client, &good, r));
        r += 1;
    }
    for r in r..r + 3 {
        closed.extend(round(&mut server, &mut client, &good, r));
    }
    closed.sort();
    closed.dedup();
    assert_eq!(closed.len(), 3, "three hostile connections, each reported once: {closed:?}");
    let t = server.tcp_stats();
    assert_eq!(t.bad_frames, 2, "{t:?}");
    assert_eq!(t.truncated_frames, 1, "{t:?}");
    assert_eq!(server.stats().dropped_malformed, 3);
    assert_eq!(server.connections().count(), 100, "the good ones stay");
    // The hostile peers see the server close their connections.
    for mut s in [huge, random] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 16];
        assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)), "disconnected");
    }
}

#[test]
fn a_connection_past_the_table_is_told_why_and_closed_while_the_others_are_served() {
    let refusal = b"-ERR max number of clients reached\r\n".to_vec();
    let config = TcpConfig { max_connections: 2, refusal: refusal.clone(), ..config() };
    let mut server = TcpDatapath::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let addr = server.local_addrs()[0];
    let mut client = TcpDatapath::new(self::config()).unwrap();
    let good: Vec<ConnId> = (0..2).map(|_| client.connect(addr).unwrap()).collect();
    assert!(round(&mut server, &mut client, &good, 0).is_empty());
    // The third sends a request at once, as redis-cli does, then reads.
    let mut third = TcpStream::connect(addr).unwrap();
    third.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    third.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "got {got:?} after 10 s: {server:?}");
        server.poll_completions().unwrap();
        server.wait(Duration::from_millis(1)).unwrap();
        let mut buf = [0u8; 64];
        match third.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("after {got:?}: {e}"),
        }
    }
    assert_eq!(got, refusal, "the refusal, then end of stream");
    assert_eq!((server.tcp_stats().rejected, server.tcp_stats().accepted), (1, 2));
    assert!(round(&mut server, &mut client, &good, 1).is_empty(), "the two in the table are still served");
}

// The tests of `tcp_loopback.rs` and `tcp_loopback_multishot.rs`: each defines `RECV_MODE` and
// includes this file.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::{Arena, Message, PoolConfig};
use cornflakes_datapath::tcp::{TcpConfig, TcpDatapath, MAX_TCP_MESSAGE};
use cornflakes_datapath::{ConnId, Datapath, Received, RecvError, Segment, SendError};
use cornflakes_tests::example::GetM;

fn config() -> TcpConfig {
    TcpConfig {
        recv_mode: RECV_MODE,
        pool_config: PoolConfig { max_bytes: 4 << 30, hugepages: HugePages::Never, lock: false },
        ..TcpConfig::loopback()
    }
}

fn zc_config() -> TcpConfig {
    TcpConfig { zero_copy_min: 0, ..config() }
}

fn server(addr: &str, config: TcpConfig) -> (TcpDatapath, SocketAddr) {
    let dp = TcpDatapath::bind(addr.parse().unwrap(), config).expect("listen on loopback");
    let addr = dp.local_addrs()[0];
    (dp, addr)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8).collect()
}

/// Moves both datapaths until `want` messages reached `b`, echoing nothing.
fn recv_n(a: &mut TcpDatapath, b: &mut TcpDatapath, want: usize) -> Vec<Received> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < want {
        assert!(Instant::now() < deadline, "{} of {want} messages after 20 s: {a:?} {b:?}", out.len());
        a.flush().unwrap();
        a.poll_completions().unwrap();
        b.recv_batch(&mut out, usize::MAX).unwrap();
        if out.len() < want {
            b.wait(Duration::from_millis(1)).unwrap();
        }
    }
    out
}

/// Echoes one message from client to server and back, for each size, with
/// the value sent zero-copy out of the pool.
fn round_trips(addr: &str, client_config: TcpConfig) {
    let (mut server, addr) = server(addr, config());
    let mut client = TcpDatapath::new(client_config).unwrap();
    let conn = client.connect(addr).unwrap();
    let sizes = [0, 1, 511, 512, 513, 64 << 10, 1 << 20, (2 << 20) - 8, 16 << 20];
    for (k, &size) in sizes.iter().enumerate() {
        let body = pattern(size, k as u32);
        let value = client.pool().alloc_copy(&body).unwrap();
        client.push_segments(conn, k as u32, &[Segment::Copy(b"hdr:"), Segment::ZeroCopy(value)]).unwrap();
        let got = recv_n(&mut client, &mut server, 1).pop().unwrap();
        assert_eq!(got.msg_id, k as u32);
        assert_eq!(got.payload.len(), 4 + size, "size {size}");
        assert_eq!(&got.payload[..4], b"hdr:");
        assert!(got.payload[4..] == body[..], "size {size}: bytes differ");
        // Echo back: the payload is pool memory, sent zero-copy.
        server.push_segments(got.conn, got.msg_id, &[Segment::ZeroCopy(got.payload.clone())]).unwrap();
        let back = recv_n(&mut server, &mut client, 1).pop().unwrap();
        assert_eq!((back.conn, back.msg_id), (conn, k as u32));
        assert!(back.payload[..] == got.payload[..], "echo of size {size} differs");
    }
    let too_big = client.pool().alloc(MAX_TCP_MESSAGE).unwrap().freeze();
    match client.push_segments(conn, 99, &[Segment::Copy(b"x"), Segment::ZeroCopy(too_big)]) {
        Err(SendError::TooLarge { len, max }) => assert_eq!((len, max), (MAX_TCP_MESSAGE + 1, MAX_TCP_MESSAGE)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(server.stats().dropped_malformed, 0);
}

#[test]
fn every_size_round_trips_over_ipv4() {
    round_trips("127.0.0.1:0", config());
}

#[test]
fn every_size_round_trips_over_ipv6_with_zero_copy() {
    round_trips("[::1]:0", zc_config());
}

#[test]
fn over_the_limit_is_refused_and_closes_only_that_connection() {
    // Sending: over this datapath's limit fails at once, before any copy.
    let (mut server, addr) = server("127.0.0.1:0", config());
    let mut small = TcpDatapath::new(TcpConfig { max_message: 1 << 20, ..config() }).unwrap();
    let conn = small.connect(addr).unwrap();
    let big = vec![7u8; 16 << 20];
    match small.push_buf(conn, 1, &big) {
        Err(SendError::TooLarge { len, max }) => assert_eq!((len, max), (16 << 20, 1 << 20)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // Receiving: a peer announcing one byte over the default limit (64 MiB)
    // is cut off and counted; a 16 MiB message on another connection
    // arrives whole.
    let mut hostile = TcpStream::connect(addr).unwrap();
    let mut header = [0u8; 8];
    cornflakes_datapath::tcp::write_frame_header(&mut header, 5, MAX_TCP_MESSAGE + 1);
    hostile.write_all(&header).unwrap();
    let mut client = TcpDatapath::new(config()).unwrap();
    let good = client.connect(addr).unwrap();
    client.push_buf(good, 2, &big).unwrap();
    hostile.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = [0u8; 16];
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut got, mut closed) = (Vec::new(), Vec::new());
    while got.is_empty() || closed.is_empty() {
        assert!(Instant::now() < deadline, "after 20 s: {} messages, closed {closed:?}: {server:?}", got.len());
        client.flush().unwrap();
        client.poll_completions().unwrap();
        match server.recv_batch(&mut got, 16) {
            Ok(_) => {}
            Err(RecvError::Closed(c)) => closed.push(c),
            Err(e) => panic!("{e}"),
        }
        server.wait(Duration::from_millis(1)).unwrap();
    }
    let got = got.pop().unwrap();
    assert_eq!((got.msg_id, got.payload.len()), (2, 16 << 20));
    assert!(got.payload.iter().all(|&b| b == 7));
    assert_eq!(closed.len(), 1, "only the hostile connection closed");
    assert_ne!(closed[0], got.conn);
    assert_eq!(server.tcp_stats().bad_frames, 1);
    assert!(matches!(hostile.read(&mut sink), Ok(0) | Err(_)), "the hostile connection is closed");
    assert_eq!(server.stats().dropped_malformed, 1);
    // The good connection still works.
    server.push_segments(got.conn, 3, &[Segment::ZeroCopy(got.payload.clone())]).unwrap();
    let back = recv_n(&mut server, &mut client, 1).pop().unwrap();
    assert_eq!((back.msg_id, back.payload.len()), (3, 16 << 20));
    assert!(back.payload[..] == got.payload[..]);
}

#[test]
fn serialize_and_send_carries_values_and_copies() {
    let (mut server, addr) = server("127.0.0.1:0", config());
    let mut client = TcpDatapath::new(zc_config()).unwrap();
    let conn = client.connect(addr).unwrap();
    let big = client.pool().alloc_copy(&pattern(100_000, 5)).unwrap();
    let arena = Arena::new(client.pool());
    let mut m = GetM::new_in(&arena);
    m.set_id(77);
    m.append_vals(&big);
    m.append_vals(b"small, copied");
    client.push_message(conn, 3, &m).unwrap();
    let got = recv_n(&mut client, &mut server, 1).pop().unwrap();
    let server_arena = Arena::new(server.pool());
    let back = GetM::deserialize(&got.payload, &server_arena).unwrap();
    assert_eq!(back.get_id(), 77);
    assert!(back.get_vals()[0][..] == big[..]);
    assert_eq!(&back.get_vals()[1][..], b"small, copied");
    assert!(client.tcp_stats().sendmsg_zc >= 1, "{:?}", client.tcp_stats());
}

/// 10 000 messages whose zero-copy values the sender drops at once, then
/// allocates and scribbles over buffers of the same size class (which
/// would take the freed slots if the datapath did not hold them).
fn freed_values_arrive_intact(client_config: TcpConfig) -> TcpDatapath {
    let (mut server, addr) = server("127.0.0.1:0", config());
    let mut client = TcpDatapath::new(client_config).unwrap();
    let conn = client.connect(addr).unwrap();
    const N: u32 = 10_000;
    let (mut sent, mut got) = (0u32, 0u32);
    let mut out = Vec::new();
    let mut scribbled = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got < N {
        assert!(Instant::now() < deadline, "{got} of {N} after 60 s: {client:?}");
        while sent < N && sent - got < 256 {
            let len = 1000 + (sent as usize * 37) % 9000;
            let value = client.pool().alloc_copy(&pattern(len, sent)).unwrap();
            match client.push_segments(conn, sent, &[Segment::ZeroCopy(value)]) {
                Ok(()) => sent += 1,
                Err(SendError::Backlogged(_)) => break,
                Err(e) => panic!("send {sent}: {e}"),
            }
            // The value is dropped here; reuse its slot class at once.
            let mut junk = client.pool().alloc(len).unwrap();
            junk.as_mut_slice().fill(0xEE);
            scribbled.push(junk.freeze());
            if scribbled.len() > 64 {
                scribbled.clear();
            }
        }
        client.flush().unwrap();
        client.poll_completions().unwrap();
        out.clear();
        server.recv_batch(&mut out, usize::MAX).unwrap();
        for r in &out {
            assert_eq!(r.msg_id, got, "in order");
            let len = 1000 + (got as usize * 37) % 9000;
            assert!(r.payload[..] == pattern(len, got)[..], "message {got} corrupted");
            got += 1;
        }
        if out.is_empty() {
            server.wait(Duration::from_millis(1)).unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.in_flight() > 0 {
        assert!(Instant::now() < deadline, "sends in flight after 5 s: {client:?}");
        client.poll_completions().unwrap();
        client.wait(Duration::from_millis(1)).unwrap();
    }
    client
}

#[test]
fn ten_thousand_freed_zero_copy_values_arrive_intact() {
    let client = freed_values_arrive_intact(zc_config());
    let t = client.tcp_stats();
    assert!(client.zero_copy_supported(), "this kernel has SENDMSG_ZC");
    assert!(t.sendmsg_zc > 0 && t.sendmsg == 0, "{t:?}");
    assert_eq!(t.notifications, t.sendmsg_zc, "every zero-copy send was notified: {t:?}");
}

#[test]
fn ten_thousand_freed_values_arrive_intact_with_plain_sendmsg() {
    let client = freed_values_arrive_intact(config());
    let t = client.tcp_stats();
    assert!(t.sendmsg > 0 && t.sendmsg_zc == 0, "{t:?}");
}

#[test]
fn a_peer_that_does_not_read_is_backlogged_and_others_are_served() {
    let (mut server, addr) = server("127.0.0.1:0", TcpConfig { max_queued_messages: 64, ..config() });
    // A raw peer that sends one request and never reads.
    let mut lazy = TcpStream::connect(addr).unwrap();
    lazy.write_all(&[1, 0, 0, 0, 1, 0, 0, 0, b'?']).unwrap();
    let mut client = TcpDatapath::new(config()).unwrap();
    let good = client.connect(addr).unwrap();
    client.push_buf(good, 1, b"hello").unwrap();
    let reqs = recv_n(&mut client, &mut server, 2);
    let lazy_conn = reqs.iter().find(|r| &r.payload[..] == b"?").unwrap().conn;
    let good_conn = reqs.iter().find(|r| &r.payload[..] == b"hello").unwrap().conn;
    let value = server.pool().alloc_copy(&vec![3u8; 1 << 20]).unwrap();
    let mut backlogged = false;
    for i in 0..10_000 {
        match server.push_segments(lazy_conn, i, &[Segment::ZeroCopy(value.clone())]) {
            Ok(()) => {}
            Err(SendError::Backlogged(c)) => {
                assert_eq!(c, lazy_conn);
                backlogged = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
        server.flush().unwrap();
        server.poll_completions().unwrap();
    }
    assert!(backlogged, "the lazy peer's queue is bounded");
    // The good connection is still served, in both directions.
    for i in 0..100 {
        server.push_buf(good_conn, i, b"pong").unwrap();
        let got = recv_n(&mut server, &mut client, 1).pop().unwrap();
        assert_eq!((got.msg_id, &got.payload[..]), (i, &b"pong"[..]));
    }
    assert!(server.tcp_stats().backlogged >= 1);
    assert!(server.tcp_stats().partial_sends >= 1, "the full socket took part of a send: {:?}", server.tcp_stats());
    drop(lazy);
}

#[test]
fn a_closing_peer_is_reported_once_and_releases_references() {
    let (mut server, addr) = server("127.0.0.1:0", config());
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.write_all(&[9, 0, 0, 0, 2, 0, 0, 0, b'h', b'i']).unwrap();
    let mut client = TcpDatapath::new(config()).unwrap();
    let other = client.connect(addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.is_empty() {
        assert!(Instant::now() < deadline);
        server.wait(Duration::from_millis(10)).unwrap();
        server.recv_batch(&mut out, 8).unwrap();
    }
    let conn = out[0].conn;
    assert_eq!((out[0].msg_id, &out[0].payload[..]), (9, &b"hi"[..]));
    // Queue more than the socket takes, then the peer resets.
    let value = server.pool().alloc_copy(&vec![1u8; 1 << 20]).unwrap();
    for i in 0..8 {
        server.push_segments(conn, i, &[Segment::ZeroCopy(value.clone())]).unwrap();
    }
    server.flush().unwrap();
    let mut buf = [0u8; 100];
    raw.read_exact(&mut buf).unwrap();
    drop(raw);
    let mut closed = Vec::<ConnId>::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && (closed.is_empty() || value.ref_count() > 1) {
        match server.recv_batch(&mut out, 8) {
            Err(RecvError::Closed(c)) => closed.push(c),
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
        server.poll_completions().unwrap();
        server.wait(Duration::from_millis(10)).unwrap();
    }
    assert_eq!(closed, vec![conn], "reported once");
    assert_eq!(value.ref_count(), 1, "in-flight references released");
    assert!(matches!(server.push_buf(conn, 1, b"x"), Err(SendError::Closed(c)) if c == conn));
    // Nothing more is reported, and the other connection still works.
    for _ in 0..5 {
        assert!(server.recv_batch(&mut out, 8).is_ok());
    }
    client.push_buf(other, 5, b"still here").unwrap();
    let got = recv_n(&mut client, &mut server, 1).pop().unwrap();
    assert_eq!(&got.payload[..], b"still here");
}

#[test]
fn a_thousand_connections_are_served() {
    let (mut server, addr) = server("127.0.0.1:0", TcpConfig { recv_buffer: 4096, ..config() });
    let mut client = TcpDatapath::new(TcpConfig { recv_buffer: 4096, ..config() }).unwrap();
    let conns: Vec<ConnId> = (0..1000).map(|_| client.connect(addr).unwrap()).collect();
    for (i, &c) in conns.iter().enumerate() {
        client.push_buf(c, i as u32, &pattern(100 + i, i as u32)).unwrap();
    }
    let reqs = recv_n(&mut client, &mut server, 1000);
    assert_eq!(server.connections().count(), 1000);
    for r in &reqs {
        assert!(r.payload[..] == pattern(100 + r.msg_id as usize, r.msg_id)[..]);
        server.push_segments(r.conn, r.msg_id, &[Segment::ZeroCopy(r.payload.clone())]).unwrap();
    }
    let resps = recv_n(&mut server, &mut client, 1000);
    for r in &resps {
        assert_eq!(r.conn, conns[r.msg_id as usize], "answered on its own connection");
        assert!(r.payload[..] == pattern(100 + r.msg_id as usize, r.msg_id)[..]);
    }
    assert_eq!(server.tcp_stats().accepted, 1000);
}

#[test]
fn idle_wait_sleeps() {
    let (mut server, _) = server("127.0.0.1:0", config());
    let start = Instant::now();
    let cpu0 = cpu_time();
    assert!(!server.wait(Duration::from_millis(200)).unwrap());
    assert!(start.elapsed() >= Duration::from_millis(190));
    let used = cpu_time() - cpu0;
    assert!(used < Duration::from_millis(50), "waiting used {used:?} of CPU");
}

fn cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn frames_across_tiny_receive_buffers_are_reassembled_in_order() {
    // 64-byte receive buffers: nearly every frame spans buffers, many
    // buffers hold several frames and a partial one.
    let (mut server, addr) = server("127.0.0.1:0", TcpConfig { recv_buffer: 64, ..config() });
    let mut client = TcpDatapath::new(TcpConfig { max_queued_messages: 4000, ..config() }).unwrap();
    let conn = client.connect(addr).unwrap();
    let sizes: Vec<usize> = (0..3000u32).map(|i| ((i * 7919) % 301) as usize).collect();
    for (i, &n) in sizes.iter().enumerate() {
        client.push_buf(conn, i as u32, &pattern(n, i as u32)).unwrap();
        if i % 100 == 99 {
            client.flush().unwrap();
        }
    }
    let got = recv_n(&mut client, &mut server, sizes.len());
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.msg_id, i as u32, "in order");
        assert!(r.payload[..] == pattern(sizes[i], i as u32)[..], "message {i}");
    }
    assert!(server.tcp_stats().reassembled > 0, "{:?}", server.tcp_stats());
}

#[test]
fn closing_a_connection_ends_the_peers_stream_and_is_not_reported_here() {
    let (mut server, addr) = server("127.0.0.1:0", config());
    let mut raw = TcpStream::connect(addr).unwrap();
    // Two messages in one write; the second still waits when we close.
    raw.write_all(&[4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.is_empty() {
        assert!(Instant::now() < deadline);
        server.wait(Duration::from_millis(10)).unwrap();
        server.recv_batch(&mut out, 1).unwrap();
    }
    let conn = out[0].conn;
    assert_eq!((out[0].msg_id, out[0].payload.len()), (4, 0), "an empty message");
    server.close(conn);
    assert!(server.connections().next().is_none());
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(raw.read(&mut buf).unwrap(), 0, "the peer sees the end of the stream");
    out.clear();
    for _ in 0..10 {
        assert!(server.recv_batch(&mut out, 8).is_ok(), "a close we asked for is not reported");
        server.wait(Duration::from_millis(5)).unwrap();
    }
    assert!(out.is_empty(), "nothing more is received from a closed connection: {out:?}");
    assert!(matches!(server.push_buf(conn, 1, b"x"), Err(SendError::Closed(_))));
}

#[test]
fn raw_framing_passes_the_byte_stream_through_unchanged() {
    // A std::net peer on the other side: what it writes arrives in pieces
    // (ids 0) whose concatenation is the stream, and what we send (copies
    // and a zero-copy value, no header) is exactly what it reads.
    use cornflakes_datapath::tcp::Framing;
    let (mut server, addr) = server("127.0.0.1:0", TcpConfig { framing: Framing::Raw, recv_buffer: 100, ..config() });
    let mut peer = TcpStream::connect(addr).unwrap();
    let sent = pattern(10_000, 7);
    peer.write_all(&sent).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut stream, mut out) = (Vec::new(), Vec::new());
    while stream.len() < sent.len() {
        assert!(Instant::now() < deadline, "{} of {} bytes", stream.len(), sent.len());
        out.clear();
        server.recv_batch(&mut out, usize::MAX).unwrap();
        for r in &out {
            assert_eq!(r.msg_id, 0);
            assert!(r.payload.len() <= 100);
            stream.extend_from_slice(&r.payload);
        }
        server.wait(Duration::from_millis(1)).unwrap();
    }
    assert_eq!(stream, sent);
    let conn = server.connections().next().expect("the peer's connection");
    let value = server.pool().alloc_copy(&pattern(4096, 9)).unwrap();
    let segments = [Segment::Copy(b"$4096\r\n"), Segment::ZeroCopy(value), Segment::Copy(b"\r\n")];
    server.push_segments(conn, 0, &segments).unwrap();
    server.flush().unwrap();
    let mut want = b"$4096\r\n".to_vec();
    want.extend_from_slice(&pattern(4096, 9));
    want.extend_from_slice(b"\r\n");
    let mut got = vec![0u8; want.len()];
    peer.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut at = 0;
    while at < got.len() {
        server.poll_completions().unwrap();
        at += peer.read(&mut got[at..]).unwrap();
    }
    assert_eq!(got, want);
}

/// A control thread ends the kernel wait through the datapath's waker,
/// also when the wake-up comes first, and the datapath keeps watching.
#[test]
fn a_waker_ends_a_sleeping_wait_from_another_thread() {
    let (mut dp, _) = server("127.0.0.1:0", config());
    let waker = dp.waker().unwrap();
    waker_check::wakes_end_sleeping_waits(&mut dp, &waker);
}

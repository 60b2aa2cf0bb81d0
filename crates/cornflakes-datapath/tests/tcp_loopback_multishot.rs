//! The TCP datapath on loopback (IPv4 and IPv6): messages of every size
//! class round-trip, serialize-and-send, zero-copy values freed and their
//! pool slots reused while in flight, back-pressure on a peer that does not
//! read, a peer that closes, and a thousand connections.
//!
//! These run with [`RecvMode::Multishot`]; `tcp_loopback.rs` runs them with `RecvMode::Single`.

/// The receive mode these tests run with.
const RECV_MODE: cornflakes_datapath::tcp::RecvMode = cornflakes_datapath::tcp::RecvMode::Multishot;

#[path = "common/waker.rs"]
mod waker_check;

include!("tcp_common/tcp_loopback.rs");

/// A ring that runs dry (the application does not take its messages) is
/// back-pressure: the kernel answers `ENOBUFS`, the receive is posted again
/// once buffers are back, and every message arrives, in order.
#[test]
fn an_empty_buffer_ring_is_back_pressure_not_an_error() {
    let server_config = TcpConfig { recv_ring_buffers: 4, recv_buffer: 4096, max_ready: 4, ..config() };
    let (mut server, addr) = server("127.0.0.1:0", server_config);
    let mut client = TcpDatapath::new(TcpConfig { max_queued_messages: 4000, ..config() }).unwrap();
    let conn = client.connect(addr).unwrap();
    let bodies: Vec<Vec<u8>> = (0..2000).map(|k| pattern(1 + k % 3000, k as u32)).collect();
    for (k, b) in bodies.iter().enumerate() {
        client.push_buf(conn, k as u32, b).unwrap();
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < bodies.len() {
        assert!(Instant::now() < deadline, "{} of {} after 20 s: {server:?}", got.len(), bodies.len());
        client.flush().unwrap();
        client.poll_completions().unwrap();
        // One message at a time: the ring empties while they wait.
        server.recv_batch(&mut got, 1).unwrap();
        server.wait(Duration::from_micros(100)).unwrap();
    }
    for (k, r) in got.iter().enumerate() {
        assert_eq!(r.msg_id, k as u32);
        assert!(r.payload[..] == bodies[k][..], "message {k} differs");
    }
    let t = server.tcp_stats();
    assert!(t.recv_ring_empty > 0, "the ring never ran dry: {t:?}");
    assert_eq!((t.errors, t.bad_frames, server.stats().dropped_malformed), (0, 0, 0));
}

/// When the pool has no buffer to assemble a frame in, what arrived waits
/// on its connection (no receive is posted for it) until the application
/// frees memory; then every message arrives intact, in order.
#[test]
fn a_full_pool_holds_back_assembly_until_memory_is_freed() {
    // Four regions: 64-byte slots, the ring's 4 KiB buffers, and room for two
    // 1 MiB messages (each takes a 2 MiB slot).
    let pool_config = PoolConfig { max_bytes: 8 << 20, hugepages: HugePages::Never, lock: false };
    let server_config = TcpConfig { pool_config, recv_ring_buffers: 16, recv_buffer: 4096, ..config() };
    let (mut server, addr) = server("127.0.0.1:0", server_config);
    let mut client = TcpDatapath::new(TcpConfig { max_queued_bytes: 64 << 20, ..config() }).unwrap();
    let conn = client.connect(addr).unwrap();
    let bodies: Vec<Vec<u8>> = (0..6).map(|k| pattern(1 << 20, k)).collect();
    for (k, b) in bodies.iter().enumerate() {
        client.push_buf(conn, k as u32, b).unwrap();
    }
    let held = recv_n(&mut client, &mut server, 2);
    // Hold both: the third cannot be assembled.
    let until = Instant::now() + Duration::from_millis(300);
    let mut more = Vec::new();
    while Instant::now() < until {
        client.flush().unwrap();
        client.poll_completions().unwrap();
        server.recv_batch(&mut more, 16).unwrap();
        server.wait(Duration::from_millis(1)).unwrap();
    }
    assert!(more.is_empty(), "no memory for a third 1 MiB message");
    assert!(server.tcp_stats().recv_held_back > 0, "{server:?}");
    drop(held);
    // Each message checked and dropped before the next: the pool holds two.
    let mut next = 2;
    let deadline = Instant::now() + Duration::from_secs(20);
    while next < bodies.len() {
        assert!(Instant::now() < deadline, "message {next} not received after 20 s: {server:?}");
        client.flush().unwrap();
        client.poll_completions().unwrap();
        let mut one = Vec::new();
        server.recv_batch(&mut one, 1).unwrap();
        if let Some(r) = one.pop() {
            assert_eq!(r.msg_id, next as u32);
            assert!(r.payload[..] == bodies[next][..], "message {next} differs");
            next += 1;
        } else {
            server.wait(Duration::from_millis(1)).unwrap();
        }
    }
    assert_eq!(server.stats().dropped_malformed, 0);
}

//! The UDP datapath on 127.0.0.1: round trips with serialize-and-send and
//! caller-built segments, limits, hostile input, zero-copy notifications
//! and reference lifetimes, each send mode, fixed buffers after pool
//! growth, peer learning and back-pressure.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use cornflakes::mem::HugePages;
use cornflakes::{Arena, Message, PoolConfig};
use cornflakes_datapath::udp::{BindError, SendMode, TaskRun, UdpConfig, UdpDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};
use cornflakes_tests::example::GetM;

#[path = "common/waker.rs"]
mod waker_check;

const LOCAL: &str = "127.0.0.1:0";

fn config() -> UdpConfig {
    UdpConfig {
        pool_config: PoolConfig { max_bytes: 1 << 30, hugepages: HugePages::Auto, lock: false },
        ..UdpConfig::loopback()
    }
}

fn bind(config: UdpConfig) -> UdpDatapath {
    UdpDatapath::bind(LOCAL.parse().unwrap(), config).expect("bind on loopback")
}

/// A client connected to a server, both on loopback.
fn pair(client_config: UdpConfig, server_config: UdpConfig) -> (UdpDatapath, ConnId, UdpDatapath) {
    let server = bind(server_config);
    let mut client = bind(client_config);
    let conn = client.connect(server.local_addr());
    (client, conn, server)
}

/// Waits up to 5 s for one message.
fn recv_one(dp: &mut UdpDatapath) -> Received {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    loop {
        if dp.recv_batch(&mut out, 1).unwrap() == 1 {
            return out.pop().unwrap();
        }
        assert!(Instant::now() < deadline, "no message within 5 s: {dp:?}");
        dp.wait(Duration::from_millis(100)).unwrap();
    }
}

/// Processes completions until nothing is in flight (up to 5 s).
fn drain(dp: &mut UdpDatapath) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while dp.in_flight() > 0 {
        assert!(Instant::now() < deadline, "sends still in flight after 5 s: {dp:?}");
        dp.poll_completions().unwrap();
        dp.wait(Duration::from_millis(10)).unwrap();
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn push_message_round_trip_with_zero_copy_values() {
    let (mut client, conn, mut server) = pair(config(), config());
    let value = client.pool().alloc_copy(&pattern(2048, 1)).unwrap();
    let arena = Arena::new(client.pool());
    let mut req = GetM::new_in(&arena);
    req.set_id(77);
    req.append_keys("key-one");
    req.append_vals(b"small copied value");
    req.append_vals(&value);
    assert!(req.get_vals()[1].is_zero_copy(), "a 2048 B pool value goes zero-copy");
    client.push_message(conn, 5, &req).unwrap();
    client.flush().unwrap();
    assert_eq!(client.stats().zero_copy_segments, 1);

    let got = recv_one(&mut server);
    assert_eq!(got.msg_id, 5);
    let sarena = Arena::new(server.pool());
    let decoded = GetM::deserialize(&got.payload, &sarena).unwrap();
    assert_eq!(decoded.get_id(), 77);
    assert_eq!(decoded.get_keys()[0].as_bytes(), b"key-one");
    assert_eq!(decoded.get_vals()[0].as_bytes(), b"small copied value");
    assert_eq!(decoded.get_vals()[1].as_bytes(), &value[..]);
    assert!(decoded.get_vals()[1].is_zero_copy(), "received values reference the packet");

    // Echo the decoded request: its big value is sent zero-copy straight
    // out of the received packet.
    server.push_message(got.conn, got.msg_id + 1, &decoded).unwrap();
    server.flush().unwrap();
    assert_eq!(server.stats().zero_copy_segments, 1);
    let back = recv_one(&mut client);
    assert_eq!(back.msg_id, 6);
    assert_eq!(back.conn, conn);
    let carena = Arena::new(client.pool());
    let echoed = GetM::deserialize(&back.payload, &carena).unwrap();
    assert_eq!(echoed.get_vals()[1].as_bytes(), &value[..]);
    assert_eq!(back.payload.len(), req.layout().total_len());
    drop(decoded);
    drain(&mut client);
    drain(&mut server);
    assert_eq!(client.stats().sent, 1);
    assert_eq!(client.stats().received, 1);
    assert_eq!(server.stats().completions, 1);
}

#[test]
fn push_segments_keeps_wire_order() {
    let (mut client, conn, mut server) = pair(config(), config());
    let zc = client.pool().alloc_copy(&pattern(1500, 9)).unwrap();
    let zc2 = client.pool().alloc_copy(&pattern(600, 3)).unwrap();
    let empty = client.pool().alloc(0).unwrap().freeze();
    let segs = [
        Segment::Copy(b"head-"),
        Segment::ZeroCopy(zc.clone()),
        Segment::Copy(b"-middle-"),
        Segment::Copy(b"more-"),
        Segment::ZeroCopy(empty),
        Segment::ZeroCopy(zc2.clone()),
        Segment::Copy(b"-tail"),
    ];
    client.push_segments(conn, 9, &segs).unwrap();
    client.push_buf(conn, 10, b"plain buffer").unwrap();
    client.flush().unwrap();
    let mut want = b"head-".to_vec();
    want.extend_from_slice(&zc);
    want.extend_from_slice(b"-middle-more-");
    want.extend_from_slice(&zc2);
    want.extend_from_slice(b"-tail");
    let mut got = [recv_one(&mut server), recv_one(&mut server)];
    got.sort_by_key(|r| r.msg_id);
    assert_eq!((got[0].msg_id, &got[0].payload[..]), (9, &want[..]));
    assert_eq!((got[1].msg_id, &got[1].payload[..]), (10, &b"plain buffer"[..]));
    assert_eq!(client.stats().zero_copy_segments, 2);
    drain(&mut client);
}

#[test]
fn too_large_is_refused_not_truncated() {
    let small = UdpConfig { max_payload: 1000, ..config() };
    let (mut client, conn, mut server) = pair(small, config());
    assert_eq!(client.max_message_len(conn), Some(992));
    let big = vec![7u8; 993];
    match client.push_buf(conn, 1, &big) {
        Err(SendError::TooLarge { len: 993, max: 992 }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let value = client.pool().alloc_copy(&pattern(4000, 2)).unwrap();
    let arena = Arena::new(client.pool());
    let mut req = GetM::new_in(&arena);
    req.append_vals(&value);
    let len = req.layout().total_len();
    assert!(matches!(client.push_message(conn, 2, &req), Err(SendError::TooLarge { len: l, max: 992 }) if l == len));
    assert_eq!(client.stats().sent, 0);
    assert_eq!(client.in_flight(), 0);
    // Exactly at the limit goes through intact.
    client.push_buf(conn, 3, &big[..992]).unwrap();
    client.flush().unwrap();
    let got = recv_one(&mut server);
    assert_eq!((got.msg_id, got.payload.len()), (3, 992));
    assert!(matches!(client.push_buf(ConnId(99), 4, b"x"), Err(SendError::Closed(ConnId(99)))));
}

#[test]
fn route_mtu_limits_connected_peers() {
    // Loopback's MTU is 65536: the limit stays the configured one.
    let (client, conn, _server) = pair(config(), config());
    assert_eq!(client.max_message_len(conn), Some(65507 - 8));
    let (client, conn, _server) = pair(UdpConfig { max_payload: 1472, ..config() }, config());
    assert_eq!(client.max_message_len(conn), Some(1464));
}

#[test]
fn malformed_packets_are_dropped_and_counted_while_serving_continues() {
    let server_config = UdpConfig { max_payload: 1000, ..config() };
    let (mut client, conn, mut server) = pair(config(), server_config);
    let raw = UdpSocket::bind(LOCAL).unwrap();
    let to = server.local_addr();
    let mut bad_reserved = vec![1, 0, 0, 0, 0, 0, 0, 1];
    bad_reserved.extend_from_slice(b"payload");
    let mut oversized = vec![0u8; 1001];
    oversized[0] = 2;
    for garbage in [&b""[..], &b"short"[..], &[0u8; 7][..], &bad_reserved[..], &oversized[..]] {
        raw.send_to(garbage, to).unwrap();
    }
    // A well-formed packet from a raw socket is served, with an empty payload too.
    raw.send_to(&[3, 0, 0, 0, 0, 0, 0, 0], to).unwrap();
    client.push_buf(conn, 4, b"after the garbage").unwrap();
    client.flush().unwrap();
    let mut got = [recv_one(&mut server), recv_one(&mut server)];
    got.sort_by_key(|r| r.msg_id);
    assert_eq!((got[0].msg_id, got[0].payload.len()), (3, 0));
    assert_eq!((got[1].msg_id, &got[1].payload[..]), (4, &b"after the garbage"[..]));
    // The garbage arrived before the good packets on the same socket... but
    // receives may complete out of order: wait until all are counted.
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.stats().dropped_malformed < 5 {
        assert!(Instant::now() < deadline, "{:?}", server.stats());
        server.wait(Duration::from_millis(10)).unwrap();
    }
    assert_eq!(server.stats().dropped_malformed, 5);
    assert_eq!(server.stats().received, 2);
    // Replies reach the raw socket, which the server learned.
    server.push_buf(got[0].conn, 30, b"reply").unwrap();
    server.flush().unwrap();
    let mut buf = [0u8; 64];
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (n, from) = raw.recv_from(&mut buf).unwrap();
    assert_eq!(from, to);
    assert_eq!(&buf[..n], &[30, 0, 0, 0, 0, 0, 0, 0, b'r', b'e', b'p', b'l', b'y']);
}

#[test]
fn zero_copy_notifications_are_counted_as_copied_on_loopback() {
    let (mut client, conn, mut server) = pair(config(), config());
    let support = client.kernel_support();
    if !support.sendmsg_zc {
        eprintln!("skipped: this kernel has no IORING_OP_SENDMSG_ZC");
        return;
    }
    let value = client.pool().alloc_copy(&pattern(4096, 5)).unwrap();
    for id in 0..4 {
        let arena = Arena::new(client.pool());
        let mut req = GetM::new_in(&arena);
        req.append_vals(&value);
        client.push_message(conn, id, &req).unwrap();
    }
    client.flush().unwrap();
    for _ in 0..4 {
        recv_one(&mut server);
    }
    drain(&mut client);
    let (stats, udp) = (client.stats(), client.udp_stats());
    assert_eq!(udp.sendmsg_zc + udp.sendmsg_zc_fixed, 4, "{udp:?}");
    assert_eq!(udp.notifications, 4, "{udp:?}");
    assert_eq!(stats.completions, 4);
    if support.report_usage {
        assert_eq!(stats.zero_copy_copied, 4, "loopback copies zero-copy sends: {stats:?}");
    } else {
        eprintln!("note: no IORING_SEND_ZC_REPORT_USAGE; copies are not reported");
    }
    assert_eq!(value.ref_count(), 1, "every in-flight reference was released");
}

#[test]
fn references_are_held_until_the_notification() {
    let (mut client, conn, mut server) = pair(config(), config());
    if !client.kernel_support().sendmsg_zc {
        eprintln!("skipped: this kernel has no IORING_OP_SENDMSG_ZC");
        return;
    }
    let want = pattern(3000, 11);
    let value = client.pool().alloc_copy(&want).unwrap();
    let addr = value.as_ptr();
    let live_before = client.pool().stats().live_slots;
    {
        let arena = Arena::new(client.pool());
        let mut req = GetM::new_in(&arena);
        req.append_vals(&value);
        client.push_message(conn, 1, &req).unwrap();
        assert_eq!(value.ref_count(), 3, "application, message, in-flight table");
    }
    client.flush().unwrap();
    assert_eq!(value.ref_count(), 2, "the message is gone; the send holds its own reference");
    drop(value);
    // The slot stays allocated: a new buffer of that class lands elsewhere.
    let probe = client.pool().alloc(3000).unwrap();
    assert_ne!(probe.as_ptr(), addr);
    drop(probe);
    // The value's slot and the first segment are held by the send.
    assert_eq!(client.pool().stats().live_slots, live_before + 1, "value slot still live (held by the send)");

    let got = recv_one(&mut server);
    let arena = Arena::new(server.pool());
    assert_eq!(GetM::deserialize(&got.payload, &arena).unwrap().get_vals()[0].as_bytes(), &want[..]);
    // Completions are only processed on request: still held.
    assert_eq!(client.pool().stats().live_slots, live_before + 1);
    drain(&mut client);
    assert_eq!(client.pool().stats().live_slots, live_before - 1, "released at the notification");
    let reuse = client.pool().alloc(3000).unwrap();
    assert_eq!(reuse.as_ptr(), addr, "the freed slot is handed out again");
}

#[test]
fn each_send_mode_forced_in_turn() {
    for mode in [SendMode::SendMsgZc, SendMode::SendZc, SendMode::SendMsg, SendMode::Auto] {
        let server = bind(config());
        let mut client = match UdpDatapath::bind(LOCAL.parse().unwrap(), UdpConfig { send_mode: mode, ..config() }) {
            Ok(c) => c,
            Err(e @ BindError::Unsupported { .. }) => {
                eprintln!("skipped {mode:?}: {e}");
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        let mut server = server;
        let conn = client.connect(server.local_addr());
        let value = client.pool().alloc_copy(&pattern(2048, 7)).unwrap();
        let arena = Arena::new(client.pool());
        let mut req = GetM::new_in(&arena);
        req.set_id(1);
        req.append_vals(&value);
        client.push_message(conn, 1, &req).unwrap();
        client.push_buf(conn, 2, b"single segment").unwrap();
        client.flush().unwrap();
        let mut got = [recv_one(&mut server), recv_one(&mut server)];
        got.sort_by_key(|r| r.msg_id);
        let sarena = Arena::new(server.pool());
        assert_eq!(GetM::deserialize(&got[0].payload, &sarena).unwrap().get_vals()[0].as_bytes(), &value[..]);
        assert_eq!(&got[1].payload[..], b"single segment");
        drop(req);
        drain(&mut client);
        let u = client.udp_stats();
        let zc_msg = u.sendmsg_zc + u.sendmsg_zc_fixed;
        let zc_single = u.send_zc + u.send_zc_fixed;
        match mode {
            SendMode::SendMsgZc => assert_eq!((zc_msg, zc_single, u.sendmsg), (2, 0, 0), "{u:?}"),
            SendMode::SendZc => assert_eq!((zc_msg, zc_single, u.sendmsg), (0, 1, 1), "{u:?}"),
            SendMode::SendMsg => assert_eq!((zc_msg, zc_single, u.sendmsg), (0, 0, 2), "{u:?}"),
            SendMode::Auto if client.kernel_support().sendmsg_zc => {
                assert_eq!((zc_msg, zc_single, u.sendmsg), (1, 0, 1), "{u:?}")
            }
            SendMode::Auto => {}
        }
        if client.kernel_support().sendmsg_zc_fixed && client.fixed_buffers() && mode == SendMode::SendMsgZc {
            assert_eq!(u.sendmsg_zc_fixed, 2, "segments in one registered chunk use it: {u:?}");
        }
        if mode == SendMode::SendZc && client.fixed_buffers() {
            assert_eq!(u.send_zc_fixed, 1, "{u:?}");
        }
        assert_eq!(u.send_errors, 0, "{:?}", client.last_send_error());
        assert_eq!(value.ref_count(), 1);
        eprintln!("{mode:?}: {u:?}");
    }
}

#[test]
fn fixed_buffers_follow_pool_growth() {
    let (mut client, conn, mut server) = pair(config(), config());
    if !client.fixed_buffers() {
        eprintln!("skipped: fixed buffers could not be registered");
        return;
    }
    let before = client.udp_stats().fixed_buffer_updates;
    let regions = client.pool().region_count();
    // Grow the pool by a few regions (1 MiB class: two per region).
    let hold: Vec<_> = (0..6).map(|_| client.pool().alloc(1 << 20).unwrap()).collect();
    assert!(client.pool().region_count() >= regions + 3);
    let value = client.pool().alloc_copy(&pattern(2048, 4)).unwrap();
    let last = hold.last().unwrap();
    let arena = Arena::new(client.pool());
    let mut req = GetM::new_in(&arena);
    req.append_vals(&last[..1024]);
    req.append_vals(&value);
    client.push_message(conn, 1, &req).unwrap();
    client.flush().unwrap();
    let got = recv_one(&mut server);
    let sarena = Arena::new(server.pool());
    let decoded = GetM::deserialize(&got.payload, &sarena).unwrap();
    assert_eq!(decoded.get_vals()[0].as_bytes(), &last[..1024]);
    assert_eq!(decoded.get_vals()[1].as_bytes(), &value[..]);
    let u = client.udp_stats();
    assert!(u.fixed_buffer_updates > before, "growth re-registered the chunk: {u:?}");
    if client.kernel_support().sendmsg_zc_fixed {
        assert_eq!(u.sendmsg_zc_fixed, 1, "the new regions are usable as fixed buffers: {u:?}");
    }
    drop(req);
    drain(&mut client);
    assert_eq!(u.send_errors, 0);
}

#[test]
fn learns_peers_up_to_the_cap() {
    let mut server = bind(UdpConfig { max_peers: 2, ..config() });
    let to = server.local_addr();
    let socks: Vec<_> = (0..3).map(|_| UdpSocket::bind(LOCAL).unwrap()).collect();
    for (i, s) in socks.iter().enumerate() {
        s.send_to(&[i as u8, 0, 0, 0, 0, 0, 0, 0, b'h', b'i'], to).unwrap();
        // One at a time, so that the first two are the ones learned.
        if i < 2 {
            let got = recv_one(&mut server);
            assert_eq!(got.msg_id, i as u32);
            assert_eq!(server.peer_addr(got.conn), Some(s.local_addr().unwrap()));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.udp_stats().dropped_unknown_peer == 0 {
        assert!(Instant::now() < deadline);
        server.wait(Duration::from_millis(10)).unwrap();
    }
    assert_eq!(server.stats().received, 2);
    // An explicit connect is not capped.
    let c = server.connect(socks[2].local_addr().unwrap());
    assert_eq!(c, ConnId(2));
    assert_eq!(server.connect(socks[2].local_addr().unwrap()), c, "connect is idempotent");
}

#[test]
fn back_pressure_when_the_in_flight_table_is_full() {
    let (mut client, conn, mut server) = pair(UdpConfig { max_in_flight: 2, ..config() }, config());
    client.push_buf(conn, 1, b"a").unwrap();
    client.push_buf(conn, 2, b"b").unwrap();
    assert!(matches!(client.push_buf(conn, 3, b"c"), Err(SendError::Full)));
    client.flush().unwrap();
    drain(&mut client);
    client.push_buf(conn, 3, b"c").unwrap();
    client.flush().unwrap();
    let mut ids: Vec<_> = (0..3).map(|_| recv_one(&mut server).msg_id).collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3]);
}

#[test]
fn submission_queue_full_is_back_pressure() {
    let cfg = UdpConfig { sq_entries: 8, recv_buffers: 4, max_in_flight: 64, ..config() };
    let (mut client, conn, mut server) = pair(cfg, config());
    let mut queued = 0;
    let err = loop {
        match client.push_buf(conn, queued, b"x") {
            Ok(()) => queued += 1,
            Err(e) => break e,
        }
        assert!(queued < 64);
    };
    assert!(matches!(err, SendError::Full), "{err:?}");
    assert!(queued >= 4);
    client.flush().unwrap();
    for _ in 0..queued {
        recv_one(&mut server);
    }
    client.push_buf(conn, 100, b"y").unwrap();
}

#[test]
fn wait_times_out_and_wakes_on_receive() {
    let (mut client, conn, mut server) = pair(config(), config());
    let t = Instant::now();
    assert!(!server.wait(Duration::from_millis(50)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(45), "{:?}", t.elapsed());
    client.push_buf(conn, 1, b"wake").unwrap();
    client.flush().unwrap();
    let t = Instant::now();
    assert!(server.wait(Duration::from_secs(5)).unwrap());
    assert!(t.elapsed() < Duration::from_secs(1));
    let mut out = Vec::new();
    assert_eq!(server.recv_batch(&mut out, 8).unwrap(), 1);
}

#[test]
fn many_messages_keep_receives_posted() {
    // More messages than receive buffers, in several batches.
    let (mut client, conn, mut server) = pair(config(), UdpConfig { recv_buffers: 4, ..config() });
    let mut got = Vec::new();
    for batch in 0..50u32 {
        for i in 0..3 {
            client.push_buf(conn, batch * 3 + i, &(batch * 3 + i).to_le_bytes()).unwrap();
        }
        client.flush().unwrap();
        for _ in 0..3 {
            got.push(recv_one(&mut server));
        }
        client.poll_completions().unwrap();
    }
    for r in &got {
        assert_eq!(&r.payload[..], &r.msg_id.to_le_bytes());
    }
    let mut ids: Vec<_> = got.iter().map(|r| r.msg_id).collect();
    ids.sort();
    assert_eq!(ids, (0..150).collect::<Vec<_>>());
}

#[test]
fn ipv6_loopback_round_trip() {
    let local: SocketAddr = "[::1]:0".parse().unwrap();
    let Ok(mut server) = UdpDatapath::bind(local, config()) else {
        eprintln!("skipped: no IPv6 loopback");
        return;
    };
    let mut client = UdpDatapath::bind(local, config()).unwrap();
    let conn = client.connect(server.local_addr());
    client.push_buf(conn, 6, b"over v6").unwrap();
    client.flush().unwrap();
    let got = recv_one(&mut server);
    assert_eq!(&got.payload[..], b"over v6");
    assert_eq!(server.peer_addr(got.conn), Some(client.local_addr()));
}

#[test]
fn each_task_run_mode_round_trips() {
    for mode in [TaskRun::Signal, TaskRun::Cooperative, TaskRun::Deferred] {
        let cfg = || UdpConfig { task_run: mode, ..config() };
        let (mut client, conn, mut server) = pair(cfg(), cfg());
        let value = client.pool().alloc_copy(&pattern(1024, 8)).unwrap();
        for id in 0..20 {
            client.push_segments(conn, id, &[Segment::Copy(b"hdr"), Segment::ZeroCopy(value.clone())]).unwrap();
            client.flush().unwrap();
            let got = recv_one(&mut server);
            assert_eq!(got.msg_id, id);
            server.push_buf(got.conn, id, &got.payload[..3]).unwrap();
            server.flush().unwrap();
            assert_eq!(&recv_one(&mut client).payload[..], b"hdr");
        }
        drain(&mut client);
        eprintln!("{mode:?} -> {:?}: {:?}", client.task_run(), client.udp_stats());
        assert_eq!(value.ref_count(), 1);
    }
}

/// Issue 10, item 1: a server that reaps completions but does not take
/// messages (it is behind) must not post receives without bound, each
/// pinning a 64 KiB pool buffer: the buffers it holds (posted plus ready)
/// stay within `recv_buffers`, like a NIC ring, and the rest waits in (or
/// is dropped and counted by) the socket buffer.
#[test]
fn receive_buffers_are_bounded_while_the_application_falls_behind() {
    let recv_buffers = 8;
    let (mut client, conn, mut server) = pair(config(), UdpConfig { recv_buffers, ..config() });
    let mut max_live = 0;
    for round in 0..40u32 {
        for i in 0..50 {
            loop {
                match client.push_buf(conn, round * 50 + i, b"flood") {
                    Ok(()) => break,
                    Err(SendError::Full) => {
                        client.flush().unwrap();
                        client.poll_completions().unwrap();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        client.flush().unwrap();
        client.poll_completions().unwrap();
        // What a loop that is busy sending does: reap, but take nothing.
        server.poll_completions().unwrap();
        server.wait(Duration::from_millis(1)).unwrap();
        max_live = max_live.max(server.pool().stats().live_slots);
    }
    assert!(max_live <= recv_buffers, "{max_live} receive buffers held, at most {recv_buffers} allowed: {server:?}");
    // Taking messages lets receiving go on, never more than the bound at once.
    let (mut got, mut out) = (0, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        out.clear();
        let n = server.recv_batch(&mut out, usize::MAX).unwrap();
        assert!(n <= recv_buffers, "{n} ready at once");
        got += n;
        if n == 0 && !server.wait(Duration::from_millis(200)).unwrap() {
            break;
        }
    }
    assert!(got > recv_buffers, "receiving resumed once the application read: {got} messages");
    let s = server.stats();
    assert_eq!(s.received as usize, got);
    eprintln!("received {got} of 2000; the kernel dropped {} (SO_RXQ_OVFL)", s.dropped_no_buffer);
}

/// Issue 10, item 1: a flood of tiny datagrams (a 9-byte packet each, as
/// fast as a plain socket sends them) at a datapath whose application only
/// reaps completions for a while must not grow its pool: each datagram
/// held for the application pins a `max_payload + 1` buffer (64 KiB on
/// loopback), so before receives were bounded 20 000 queued datagrams
/// mapped over a gigabyte, and every growth re-registered the fixed
/// buffers. The pool's mapped bytes and the fixed-buffer registrations stay
/// where they were after bind, and afterwards the datapath serves normally.
#[test]
fn a_flood_while_the_application_does_not_read_maps_no_memory() {
    let mut server = bind(config());
    let to = server.local_addr();
    let mapped = server.pool().stats().mapped_bytes;
    let updates = server.udp_stats().fixed_buffer_updates;
    let flooder = UdpSocket::bind(LOCAL).unwrap();
    flooder.set_nonblocking(true).unwrap();
    let mut sent = 0u32;
    for burst in 0..200u32 {
        for i in 0..100u32 {
            let mut pkt = [0u8; 9];
            pkt[..4].copy_from_slice(&(burst * 100 + i).to_le_bytes());
            if flooder.send_to(&pkt, to).is_ok() {
                sent += 1;
            }
        }
        // A loop busy elsewhere: it reaps but takes no message.
        server.poll_completions().unwrap();
        if burst % 20 == 0 {
            server.wait(Duration::from_millis(1)).unwrap();
        }
    }
    let stats = server.pool().stats();
    let u = server.udp_stats();
    eprintln!("sent {sent}; pool {mapped} -> {} bytes, {} live slots; {u:?}", stats.mapped_bytes, stats.live_slots);
    assert!(sent > 10_000, "the flood reached the socket: {sent}");
    assert_eq!(stats.mapped_bytes, mapped, "receiving mapped no pool memory: {server:?}");
    assert!(stats.live_slots <= config().recv_buffers, "{} buffers held: {server:?}", stats.live_slots);
    assert_eq!(u.fixed_buffer_updates, updates, "no fixed-buffer registration while receiving");
    assert!(u.recv_held_back > 0, "receiving was held back: {u:?}");
    // Reading again drains what the socket kept; then a normal exchange.
    let mut out = Vec::new();
    while server.recv_batch(&mut out, usize::MAX).unwrap() > 0 || server.wait(Duration::from_millis(50)).unwrap() {
        out.clear();
    }
    let mut client = bind(config());
    let conn = client.connect(to);
    client.push_buf(conn, 77, b"after the flood").unwrap();
    client.flush().unwrap();
    let got = recv_one(&mut server);
    assert_eq!((got.msg_id, &got.payload[..]), (77, &b"after the flood"[..]));
    server.push_buf(got.conn, 78, b"served").unwrap();
    server.flush().unwrap();
    let back = recv_one(&mut client);
    assert_eq!((back.msg_id, &back.payload[..]), (78, &b"served"[..]));
    assert_eq!(server.pool().stats().mapped_bytes, mapped);
}

/// A control thread ends the kernel wait through the datapath's waker,
/// also when the wake-up comes first, and the datapath keeps watching.
#[test]
fn a_waker_ends_a_sleeping_wait_from_another_thread() {
    let mut dp = bind(config());
    let waker = dp.waker().unwrap();
    waker_check::wakes_end_sleeping_waits(&mut dp, &waker);
}

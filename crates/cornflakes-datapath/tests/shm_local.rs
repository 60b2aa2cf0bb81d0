//! Shared-memory datapath between two datapaths of one process (and two
//! threads for sleeping and waking): round trips, zero-copy completions,
//! back-pressure, several connections, sleep and wake-up counting.

use std::time::{Duration, Instant};

use cornflakes::{Arena, Message};
use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, RecvError, Segment, SendError};
use cornflakes_tests::example::GetM;

#[path = "common/waker.rs"]
mod waker_check;

fn small_config() -> ShmConfig {
    ShmConfig { ring_size: 64 << 10, ..ShmConfig::default() }
}

fn first_conn(dp: &ShmDatapath) -> ConnId {
    dp.connections().next().expect("one connection")
}

/// Receives exactly one message, waiting up to a second.
fn recv_one(dp: &mut ShmDatapath) -> Received {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.is_empty() {
        assert!(Instant::now() < deadline, "no message within 5 s");
        dp.wait(Duration::from_millis(100)).unwrap();
        dp.recv_batch(&mut out, 1).unwrap();
    }
    out.pop().unwrap()
}

#[test]
fn copied_round_trip_and_batch() {
    let (mut a, mut b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    let (ca, cb) = (first_conn(&a), first_conn(&b));
    for i in 0..100u32 {
        let data: Vec<u8> = (0..i * 13).map(|x| (x ^ i) as u8).collect();
        a.push_buf(ca, i, &data).unwrap();
    }
    a.flush().unwrap();
    let mut out = Vec::new();
    let mut n = 0;
    while n < 100 {
        n += b.recv_batch(&mut out, 32).unwrap();
    }
    for (i, r) in out.iter().enumerate() {
        let i = i as u32;
        assert_eq!((r.conn, r.msg_id), (cb, i));
        let data: Vec<u8> = (0..i * 13).map(|x| (x ^ i) as u8).collect();
        assert_eq!(&r.payload[..], &data[..]);
    }
    // The reply direction.
    b.push_buf(cb, 5, b"pong").unwrap();
    let r = recv_one(&mut a);
    assert_eq!((r.msg_id, &r.payload[..]), (5, &b"pong"[..]));
    assert_eq!(a.stats().sent, 100);
    assert_eq!(b.stats().received, 100);
}

#[test]
fn segments_mixed_copy_zero_copy_and_foreign() {
    let (mut a, mut b) = ShmDatapath::pair(small_config()).unwrap();
    let ca = first_conn(&a);
    let zc = a.pool().alloc_copy(&[7u8; 3000]).unwrap();
    // A buffer from another pool: cannot be mapped by the peer, sent inline.
    let other = cornflakes::Pool::new().unwrap();
    let foreign = other.alloc_copy(&[9u8; 100]).unwrap();
    let segs = [
        Segment::Copy(b"head"),
        Segment::Copy(b"er"),
        Segment::ZeroCopy(zc.clone()),
        Segment::Copy(b"tail"),
        Segment::ZeroCopy(foreign),
    ];
    a.push_segments(ca, 42, &segs).unwrap();
    let r = recv_one(&mut b);
    let mut expect = b"header".to_vec();
    expect.extend_from_slice(&[7u8; 3000]);
    expect.extend_from_slice(b"tail");
    expect.extend_from_slice(&[9u8; 100]);
    assert_eq!(r.msg_id, 42);
    assert_eq!(&r.payload[..], &expect[..]);
    assert_eq!(a.stats().zero_copy_segments, 1);
    assert_eq!(a.stats().zero_copy_copied, 1);
    // The received payload is a buffer of the receiver's pool.
    assert!(b.recover(&r.payload[..]).is_some());
    assert_eq!(zc.ref_count(), 3, "ours, the array's, the send's");
    drop(segs);
    assert_eq!(a.poll_completions().unwrap(), 1);
    assert_eq!(zc.ref_count(), 1);
}

#[test]
fn push_message_with_zero_copy_fields() {
    let (mut a, mut b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    let ca = first_conn(&a);
    let big: Vec<_> = (0..3u8).map(|k| a.pool().alloc_copy(&vec![k + 1; 1024 + k as usize]).unwrap()).collect();
    {
        let arena = Arena::new(a.pool());
        let mut m = GetM::new_in(&arena);
        m.set_id(77);
        m.append_keys("alpha");
        m.append_keys("beta");
        for v in &big {
            m.append_vals(v);
        }
        m.append_vals(b"short, copied");
        let layout = m.layout();
        assert_eq!(layout.zero_copy_entries, 3);
        a.push_message(ca, 9, &m).unwrap();
        assert_eq!(a.inflight(ca), 3);
    }
    // The message is gone; its zero-copy values are held by the send.
    assert!(big.iter().all(|v| v.ref_count() == 2));
    let r = recv_one(&mut b);
    assert_eq!(r.msg_id, 9);
    let arena = Arena::new(b.pool());
    let got = GetM::deserialize(&r.payload, &arena).unwrap();
    assert_eq!(got.get_id(), 77);
    let keys: Vec<_> = got.get_keys().iter().map(|k| k.as_str().unwrap().to_string()).collect();
    assert_eq!(keys, ["alpha", "beta"]);
    let vals: Vec<Vec<u8>> = got.get_vals().iter().map(|v| v.as_bytes().to_vec()).collect();
    assert_eq!(vals.len(), 4);
    for (k, v) in big.iter().enumerate() {
        assert_eq!(&vals[k][..], &v[..]);
    }
    assert_eq!(&vals[3][..], b"short, copied");
    assert_eq!(a.poll_completions().unwrap(), 1);
    assert!(big.iter().all(|v| v.ref_count() == 1));
    assert_eq!(a.inflight(ca), 0);
    assert_eq!(a.stats().completions, 1);
}

#[test]
fn dropped_value_stays_intact_until_completion() {
    let (mut a, mut b) = ShmDatapath::pair(small_config()).unwrap();
    let ca = first_conn(&a);
    let live_before = a.pool().stats().live_slots;
    // A value sent zero-copy on purpose lives in the shared pool.
    let mut value = a.pool().alloc(4096).unwrap();
    value.fill(0xAB);
    a.push_segments(ca, 1, &[Segment::Copy(b"k"), Segment::ZeroCopy(value.freeze())]).unwrap();
    // The application's handle is gone (moved into the segment and dropped
    // with the array); the send's clone keeps the slot.
    assert_eq!(a.pool().stats().live_slots, live_before + 1);
    // Allocations of the same class must not get that slot back, and
    // scribbling on them must not reach the in-flight value.
    let scribble: Vec<_> = (0..64)
        .map(|_| {
            let mut s = a.pool().alloc(4096).unwrap();
            s.fill(0x11);
            s
        })
        .collect();
    // Not yet received: no completion.
    assert_eq!(a.poll_completions().unwrap(), 0);
    let r = recv_one(&mut b);
    assert_eq!(r.payload.len(), 4097);
    assert!(r.payload[1..].iter().all(|&x| x == 0xAB));
    assert_eq!(a.poll_completions().unwrap(), 1);
    drop(scribble);
    assert_eq!(a.pool().stats().live_slots, live_before);
}

#[test]
fn back_pressure_full_then_drains() {
    // Parking off: a full ring is `Full` at once (parking: shm_overload.rs).
    let config = ShmConfig { ring_size: 4096, max_parked_messages: 0, ..ShmConfig::default() };
    let (mut a, mut b) = ShmDatapath::pair(config).unwrap();
    let ca = first_conn(&a);
    let msg = [5u8; 500];
    let mut sent = 0u32;
    loop {
        match a.push_buf(ca, sent, &msg) {
            Ok(()) => sent += 1,
            Err(SendError::Full) => break,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(sent >= 4, "a 4 KiB ring holds several 500-byte messages, sent {sent}");
    // Still full, never a panic.
    assert!(matches!(a.push_buf(ca, 999, &msg), Err(SendError::Full)));
    let mut out = Vec::new();
    let mut total = 0;
    for _ in 0..1000 {
        total += b.recv_batch(&mut out, 64).unwrap();
        if a.push_buf(ca, sent, &msg).is_ok() {
            sent += 1;
        }
    }
    total += b.recv_batch(&mut out, 64).unwrap();
    assert_eq!(total as u32, sent);
    for (i, r) in out.iter().enumerate() {
        assert_eq!(r.msg_id, i as u32);
    }
    // Larger than half the ring: never fits.
    assert!(matches!(a.push_buf(ca, 0, &[0u8; 3000]), Err(SendError::TooLarge { .. })));
    // Too many zero-copy segments.
    let zc = a.alloc(64).unwrap().freeze();
    let segs: Vec<_> = (0..100).map(|_| Segment::ZeroCopy(zc.clone())).collect();
    assert!(matches!(a.push_segments(ca, 0, &segs), Err(SendError::TooManySegments { .. })));
}

#[test]
fn message_over_the_peer_limit_is_too_large() {
    let mut a = ShmDatapath::new(ShmConfig::default()).unwrap();
    let mut b = ShmDatapath::new(ShmConfig { max_message: 1000, ..ShmConfig::default() }).unwrap();
    let (ca, _) = ShmDatapath::link(&mut a, &mut b).unwrap();
    assert!(matches!(a.push_buf(ca, 0, &[0u8; 1001]), Err(SendError::TooLarge { len: 1001, max: 1000 })));
    a.push_buf(ca, 0, &[0u8; 1000]).unwrap();
    assert_eq!(recv_one(&mut b).payload.len(), 1000);
}

#[test]
fn several_connections_polled_and_closed() {
    let mut server = ShmDatapath::new(small_config()).unwrap();
    let mut clients: Vec<_> = (0..3).map(|_| ShmDatapath::new(small_config()).unwrap()).collect();
    let mut ids = Vec::new();
    for c in clients.iter_mut() {
        let (s_id, c_id) = ShmDatapath::link(&mut server, c).unwrap();
        ids.push((s_id, c_id));
    }
    for (k, c) in clients.iter_mut().enumerate() {
        c.push_buf(ids[k].1, k as u32, format!("client {k}").as_bytes()).unwrap();
    }
    let mut out = Vec::new();
    while out.len() < 3 {
        server.recv_batch(&mut out, 8).unwrap();
    }
    out.sort_by_key(|r| r.msg_id);
    for (k, r) in out.iter().enumerate() {
        assert_eq!(r.conn, ids[k].0);
        assert_eq!(&r.payload[..], format!("client {k}").as_bytes());
        server.push_buf(r.conn, 100 + k as u32, &r.payload).unwrap();
    }
    for (k, c) in clients.iter_mut().enumerate() {
        let r = recv_one(c);
        assert_eq!(r.msg_id, 100 + k as u32);
    }
    // Client 1 goes away: the server reports it closed, once, and keeps
    // serving the others.
    let gone = clients.remove(1);
    drop(gone);
    let deadline = Instant::now() + Duration::from_secs(5);
    let closed = loop {
        assert!(Instant::now() < deadline, "close not detected");
        server.wait(Duration::from_millis(100)).unwrap();
        match server.recv_batch(&mut out, 8) {
            Err(RecvError::Closed(id)) => break id,
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(closed, ids[1].0);
    assert!(matches!(server.push_buf(ids[1].0, 0, b"x"), Err(SendError::Closed(_))));
    assert_eq!(server.connections().count(), 2);
    clients[1].push_buf(ids[2].1, 7, b"still here").unwrap();
    let r = recv_one(&mut server);
    assert_eq!((r.conn, &r.payload[..]), (ids[2].0, &b"still here"[..]));
    // A new connection reuses the slot with a new id.
    let mut late = ShmDatapath::new(small_config()).unwrap();
    let (s_new, _) = ShmDatapath::link(&mut server, &mut late).unwrap();
    assert_ne!(s_new, ids[1].0);
    assert_eq!(s_new.0 & 0xFFFF, ids[1].0 .0 & 0xFFFF);
}

#[test]
fn listen_connect_accept_by_path() {
    let path = std::env::temp_dir().join(format!("cf-shm-local-{}.sock", std::process::id()));
    let mut server = ShmDatapath::listen(&path, small_config()).unwrap();
    let client_path = path.clone();
    let t = std::thread::spawn(move || {
        let mut c = ShmDatapath::connect(&client_path, small_config()).unwrap();
        let conn = first_conn(&c);
        c.push_buf(conn, 1, b"over the socket").unwrap();
        let r = recv_one(&mut c);
        assert_eq!(&r.payload[..], b"echo");
    });
    // Accepted automatically while waiting.
    let r = recv_one(&mut server);
    assert_eq!(&r.payload[..], b"over the socket");
    server.push_buf(r.conn, 2, b"echo").unwrap();
    t.join().unwrap();
    assert_eq!(server.shm_stats().accepted, 1);
    drop(server);
    assert!(!path.exists(), "socket file removed on drop");
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[test]
fn idle_wait_sleeps_and_a_send_wakes_it() {
    let path = std::env::temp_dir().join(format!("cf-shm-wake-{}.sock", std::process::id()));
    let mut server = ShmDatapath::listen(&path, small_config()).unwrap();
    let client_path = path.clone();
    let t = std::thread::spawn(move || {
        let mut c = ShmDatapath::connect(&client_path, small_config()).unwrap();
        let conn = first_conn(&c);
        // Let the server fall asleep, then send.
        std::thread::sleep(Duration::from_millis(300));
        c.push_buf(conn, 1, b"wake up").unwrap();
        c.push_buf(conn, 2, b"no second wake-up needed").unwrap();
        let r = recv_one(&mut c);
        assert_eq!(r.msg_id, 3);
        c.shm_stats()
    });
    server.accept(Duration::from_secs(5)).unwrap();
    // A timed-out wait returns false.
    let t0 = Instant::now();
    assert!(!server.wait(Duration::from_millis(50)).unwrap());
    assert!(t0.elapsed() >= Duration::from_millis(50));
    // Idle: sleeps rather than spins.
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    assert!(server.wait(Duration::from_secs(10)).unwrap());
    let slept = t0.elapsed();
    let cpu = thread_cpu() - cpu0;
    assert!(slept >= Duration::from_millis(150), "woke after {slept:?}");
    assert!(cpu < slept / 4, "burned {cpu:?} of CPU in {slept:?} of waiting");
    let mut out = Vec::new();
    while out.len() < 2 {
        server.recv_batch(&mut out, 8).unwrap();
    }
    assert_eq!(&out[0].payload[..], b"wake up");
    assert!(server.shm_stats().sleeps >= 1);
    server.push_buf(out[0].conn, 3, b"ack").unwrap();
    let client_stats = t.join().unwrap();
    assert_eq!(client_stats.wakeups_sent, 1, "one wake-up per sleep");
}

/// Sends look at the peer's sleep flag once per batch (behind one fence),
/// not per record: `flush` is where a batch ends, so a sender that pushes,
/// flushes and then stays away from the datapath still wakes its peer.
#[test]
fn a_flush_wakes_a_sleeping_peer_without_another_call() {
    let path = std::env::temp_dir().join(format!("cf-shm-flush-wake-{}.sock", std::process::id()));
    let mut server = ShmDatapath::listen(&path, small_config()).unwrap();
    let client_path = path.clone();
    let (sent_tx, sent_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let mut c = ShmDatapath::connect(&client_path, small_config()).unwrap();
        let conn = first_conn(&c);
        // Let the server fall asleep, then send a batch and flush it.
        std::thread::sleep(Duration::from_millis(300));
        for id in 0..3 {
            c.push_buf(conn, id, b"batched").unwrap();
        }
        c.flush().unwrap();
        sent_tx.send(Instant::now()).unwrap();
        // No datapath call for a long while: only the flush can have woken it.
        std::thread::sleep(Duration::from_secs(3));
        c.shm_stats()
    });
    server.accept(Duration::from_secs(5)).unwrap();
    assert!(server.wait(Duration::from_secs(10)).unwrap());
    let woke = Instant::now();
    let sent = sent_rx.recv().unwrap();
    assert!(woke.duration_since(sent) < Duration::from_secs(2), "woke {:?} after the flush", woke - sent);
    assert!(server.shm_stats().sleeps >= 1, "the server never slept: the test shows nothing");
    let mut out = Vec::new();
    while out.len() < 3 {
        server.recv_batch(&mut out, 8).unwrap();
    }
    assert_eq!(t.join().unwrap().wakeups_sent, 1, "one wake-up for the batch");
}

#[test]
fn a_waker_ends_a_sleeping_wait_from_another_thread() {
    let path = std::env::temp_dir().join(format!("cf-shm-waker-{}.sock", std::process::id()));
    let mut server = ShmDatapath::listen(&path, small_config()).unwrap();
    let waker = server.waker().unwrap();
    waker_check::wakes_end_sleeping_waits(&mut server, &waker);
    assert!(server.shm_stats().sleeps >= 2, "the server never slept: the test shows nothing");
}

#[test]
fn busy_ping_pong_makes_no_wake_up_system_calls() {
    let path = std::env::temp_dir().join(format!("cf-shm-busy-{}.sock", std::process::id()));
    // A generous spin, so that a descheduled thread on a loaded test
    // machine does not fall asleep: the point is that while both sides are
    // busy, no side sleeps or sends a wake-up.
    let config = ShmConfig { spin: Duration::from_secs(2), ..small_config() };
    let mut server = ShmDatapath::listen(&path, config.clone()).unwrap();
    const ROUNDS: u32 = 20_000;
    let client_path = path.clone();
    let t = std::thread::spawn(move || {
        let mut c = ShmDatapath::connect(&client_path, config).unwrap();
        let conn = first_conn(&c);
        let mut out = Vec::with_capacity(4);
        for i in 0..ROUNDS {
            c.push_buf(conn, i, &i.to_le_bytes()).unwrap();
            out.clear();
            while out.is_empty() {
                c.wait(Duration::from_secs(10)).unwrap();
                c.recv_batch(&mut out, 4).unwrap();
            }
            assert_eq!(out[0].msg_id, i);
        }
        c.shm_stats()
    });
    server.accept(Duration::from_secs(5)).unwrap();
    let mut out = Vec::with_capacity(4);
    let mut served = 0;
    while served < ROUNDS {
        server.wait(Duration::from_secs(10)).unwrap();
        out.clear();
        server.recv_batch(&mut out, 4).unwrap();
        for r in out.drain(..) {
            server.push_buf(r.conn, r.msg_id, &r.payload).unwrap();
            served += 1;
        }
    }
    let client = t.join().unwrap();
    let s = server.shm_stats();
    assert_eq!((s.sleeps, s.wakeups_sent), (0, 0), "server {s:?}");
    assert_eq!((client.sleeps, client.wakeups_sent), (0, 0), "client {client:?}");
}

//! Overload and misbehaving peers on shared memory (issue 10): a peer that
//! stops reading gets its messages parked up to a bound, then refused at
//! once, while other connections are served; a peer that connects and stays
//! silent does not stall accepting; closing or dropping a datapath never
//! frees a zero-copy buffer the peer may still read.

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment, SendError};

fn first_conn(dp: &ShmDatapath) -> ConnId {
    dp.connections().next().expect("one connection")
}

/// Receives until `n` messages arrived (or panics after 5 s).
fn recv_n(dp: &mut ShmDatapath, n: usize) -> Vec<Received> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < n {
        assert!(Instant::now() < deadline, "{} of {n} messages within 5 s", out.len());
        dp.wait(Duration::from_millis(10)).unwrap();
        dp.recv_batch(&mut out, 64).unwrap();
    }
    out
}

#[test]
fn a_full_ring_parks_in_order_up_to_a_bound_then_refuses_at_once() {
    let config = ShmConfig { ring_size: 4096, max_parked_messages: 8, ..ShmConfig::default() };
    let (mut a, mut b) = ShmDatapath::pair(config).unwrap();
    let ca = first_conn(&a);
    let msg = |i: u32| vec![i as u8; 500];
    let mut sent = 0u32;
    let err = loop {
        match a.push_buf(ca, sent, &msg(sent)) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SendError::Backlogged(c) if c == ca), "{err:?}");
    assert_eq!(a.shm_stats().parked, 8, "eight parked behind the full ring");
    let in_ring = sent - 8;
    assert!(in_ring >= 4, "a 4 KiB ring holds several 500-byte messages, held {in_ring}");
    // Refused again, without waiting, and nothing was lost.
    assert!(matches!(a.push_buf(ca, 999, &msg(0)), Err(SendError::Backlogged(_))));
    // The reader catches up; flushes publish the parked records in order.
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < sent as usize {
        assert!(Instant::now() < deadline);
        b.recv_batch(&mut out, 64).unwrap();
        a.flush().unwrap();
    }
    for (i, r) in out.iter().enumerate() {
        assert_eq!(r.msg_id, i as u32);
        assert_eq!(&r.payload[..], &msg(i as u32)[..]);
    }
    // And sending works normally again.
    a.push_buf(ca, 1000, b"again").unwrap();
    assert_eq!(&recv_n(&mut b, 1)[0].payload[..], b"again");
}

#[test]
fn parked_zero_copy_segments_stay_held_until_acknowledged() {
    let config = ShmConfig { ring_size: 4096, ..ShmConfig::default() };
    let (mut a, mut b) = ShmDatapath::pair(config).unwrap();
    let ca = first_conn(&a);
    // Fill the ring with copies, then park a message with a shared-pool
    // segment (a descriptor) behind them.
    while a.push_buf(ca, 0, &[1u8; 500]).is_ok() && a.shm_stats().parked == 0 {}
    let value = {
        let mut v = a.pool().alloc(3000).unwrap();
        v.fill(0x5A);
        v.freeze()
    };
    a.push_segments(ca, 7, &[Segment::Copy(b"hdr"), Segment::ZeroCopy(value.clone())]).unwrap();
    assert!(a.shm_stats().parked >= 1);
    assert_eq!(a.inflight(ca), 1, "held from the moment it is parked");
    drop(value);
    // Reuse what the application freed: must not be the parked value's slot.
    let scribble: Vec<RcBuf> = (0..64)
        .map(|_| {
            let mut s = a.pool().alloc(3000).unwrap();
            s.fill(0xEE);
            s.freeze()
        })
        .collect();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !got.iter().any(|r: &Received| r.msg_id == 7) {
        assert!(Instant::now() < deadline);
        b.recv_batch(&mut got, 64).unwrap();
        a.flush().unwrap();
    }
    let r = got.iter().find(|r| r.msg_id == 7).unwrap();
    assert_eq!(&r.payload[..3], b"hdr");
    assert!(r.payload[3..].iter().all(|&x| x == 0x5A), "parked zero-copy value corrupted");
    a.poll_completions().unwrap();
    assert_eq!(a.inflight(ca), 0);
    drop(scribble);
}

#[test]
fn a_peer_that_stops_reading_does_not_stall_the_others() {
    let config = ShmConfig { ring_size: 16 << 10, max_parked_messages: 64, ..ShmConfig::default() };
    let mut server = ShmDatapath::new(config.clone()).unwrap();
    let mut idle = ShmDatapath::new(config.clone()).unwrap();
    let mut busy = ShmDatapath::new(config).unwrap();
    let (to_idle, _) = ShmDatapath::link(&mut server, &mut idle).unwrap();
    let (to_busy, _) = ShmDatapath::link(&mut server, &mut busy).unwrap();
    let mut backlogged = 0;
    let start = Instant::now();
    for i in 0..5000u32 {
        match server.push_buf(to_idle, i, &[3u8; 1000]) {
            Ok(()) => {}
            Err(SendError::Backlogged(_)) => backlogged += 1,
            Err(e) => panic!("{e}"),
        }
        server.push_buf(to_busy, i, &[4u8; 1000]).unwrap();
        server.flush().unwrap();
        let got = recv_n(&mut busy, 1);
        assert_eq!(got[0].msg_id, i);
    }
    // Refusals are immediate: 5000 round trips with the busy client take
    // nowhere near 5000 x 50 ms (what waiting for the idle one would cost).
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert!(backlogged > 4000, "the idle peer's messages were refused once its parking was full: {backlogged}");
    assert_eq!(server.shm_stats().backlogged, backlogged);
    // The idle peer never makes room, so exactly the parking bound's worth
    // was parked once its ring was full, and nothing more.
    assert_eq!(server.shm_stats().parked, 64);
}

#[test]
fn a_silent_connecting_peer_does_not_stall_accepting() {
    let path = std::env::temp_dir().join(format!("cf-silent-{}.sock", std::process::id()));
    let config = ShmConfig { handshake_timeout: Duration::from_secs(5), ..ShmConfig::default() };
    let mut server = ShmDatapath::listen(&path, config).unwrap();
    // Connects and never says hello.
    let _silent = UnixStream::connect(&path).unwrap();
    let p = path.clone();
    let client = std::thread::spawn(move || {
        let mut c = ShmDatapath::new(ShmConfig::default()).unwrap();
        let conn = c.connect_to(&p).unwrap();
        c.push_buf(conn, 1, b"hi").unwrap();
        // Stay connected until the server has read it.
        std::thread::sleep(Duration::from_millis(500));
    });
    let start = Instant::now();
    let mut out = Vec::new();
    while out.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(3), "the real client was not served within 3 s");
        server.wait(Duration::from_millis(10)).unwrap();
        server.recv_batch(&mut out, 8).unwrap();
    }
    assert_eq!(&out[0].payload[..], b"hi");
    client.join().unwrap();
    let _ = std::fs::remove_file(&path);
}

fn corrupted(out: &[Received]) -> usize {
    out.iter()
        .filter(|r| {
            let i = r.msg_id;
            r.payload.len() != 2052 || r.payload[..4] != i.to_le_bytes() || r.payload[4..].iter().any(|&x| x != i as u8)
        })
        .count()
}

/// Sends `n` messages of a 4-byte id and a 2048-byte shared-pool value
/// filled with the id (so each travels by descriptor).
fn send_values(a: &mut ShmDatapath, conn: ConnId, n: u32) {
    let pool = a.pool().clone();
    for i in 0..n {
        let value = {
            let mut v = pool.alloc(2048).unwrap();
            v.fill(i as u8);
            v.freeze()
        };
        a.push_segments(conn, i, &[Segment::Copy(&i.to_le_bytes()), Segment::ZeroCopy(value)]).unwrap();
    }
}

/// The application reuses every slot it freed.
fn scribble(pool: &cornflakes::Pool, n: u32) -> Vec<RcBuf> {
    (0..2 * n)
        .map(|_| {
            let mut s = pool.alloc(2048).unwrap();
            s.fill(0xFF);
            s.freeze()
        })
        .collect()
}

/// One close trial: `n` zero-copy messages published, the sender closes
/// the connection and reuses the freed slots, then the receiver drains.
/// Returns the number of corrupted messages.
fn close_trial(n: u32) -> usize {
    let (mut a, mut b) = ShmDatapath::pair(ShmConfig { ring_size: 64 << 10, ..ShmConfig::default() }).unwrap();
    let ca = first_conn(&a);
    send_values(&mut a, ca, n);
    a.close(ca);
    assert!(matches!(a.push_buf(ca, 0, b"x"), Err(SendError::Closed(_))));
    let reused = scribble(a.pool(), n);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < n as usize {
        assert!(Instant::now() < deadline, "{} of {n} delivered after close", out.len());
        let _ = b.recv_batch(&mut out, 64);
    }
    drop(reused);
    corrupted(&out)
}

/// One drop trial: the receiver, in another thread, reads while the
/// sender publishes `n` zero-copy messages, drops its datapath (keeping the
/// pool) and at once reuses the freed slots. Returns the number of
/// corrupted messages.
fn drop_trial(n: u32, k: usize) -> usize {
    let path = std::env::temp_dir().join(format!("cf-drop-{}-{k}.sock", std::process::id()));
    // A linger long enough that a reader slowed down by a busy machine
    // still acknowledges in time (past it, the buffers would be leaked, and
    // leaking pools over many trials ends in allocation failures).
    let config = ShmConfig { ring_size: 64 << 10, close_linger: Duration::from_secs(5), ..ShmConfig::default() };
    let mut a = ShmDatapath::listen(&path, config).unwrap();
    let p = path.clone();
    let reader = std::thread::spawn(move || {
        let mut b = ShmDatapath::connect(&p, ShmConfig::default()).unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while out.len() < n as usize {
            assert!(
                Instant::now() < deadline,
                "{} of {n} delivered after drop; {:?} {:?}",
                out.len(),
                b.stats(),
                b.shm_stats()
            );
            let _ = b.recv_batch(&mut out, 64);
        }
        corrupted(&out)
    });
    let ca = a.accept(Duration::from_secs(5)).unwrap();
    let pool = a.pool().clone();
    send_values(&mut a, ca, n);
    drop(a);
    let reused = scribble(&pool, n);
    let bad = reader.join().unwrap();
    drop(reused);
    let _ = std::fs::remove_file(&path);
    bad
}

#[test]
fn close_never_frees_what_the_peer_still_reads() {
    let trials: usize = std::env::var("CF_CLOSE_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut corrupt = 0;
    for _ in 0..trials {
        corrupt += close_trial(20);
    }
    assert_eq!(corrupt, 0, "{corrupt} corrupted messages in {trials} close trials");
}

#[test]
fn drop_never_frees_what_the_peer_still_reads() {
    let trials: usize = std::env::var("CF_CLOSE_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut corrupt = 0;
    for k in 0..trials {
        corrupt += drop_trial(20, k);
    }
    assert_eq!(corrupt, 0, "{corrupt} corrupted messages in {trials} drop trials");
}

#[test]
fn closed_connection_releases_buffers_once_the_peer_has_read_them() {
    let (mut a, mut b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    let ca = first_conn(&a);
    let live = a.pool().stats().live_slots;
    let value = a.pool().alloc_copy(&[9u8; 4096]).unwrap();
    a.push_segments(ca, 1, &[Segment::ZeroCopy(value)]).unwrap();
    a.close(ca);
    assert_eq!(a.closing(), 1, "held for the peer");
    assert_eq!(a.pool().stats().live_slots, live + 1);
    let r = recv_n(&mut b, 1);
    assert!(r[0].payload.iter().all(|&x| x == 9));
    // b acknowledged at the end of its batch; a releases on its next poll.
    a.poll_completions().unwrap();
    assert_eq!(a.closing(), 0);
    assert_eq!(a.pool().stats().live_slots, live);
    assert_eq!(a.shm_stats().closes_drained, 1);
}

#[test]
fn closed_connections_held_for_silent_peers_are_bounded() {
    // Ten peers that get a zero-copy value, are closed, and never read nor
    // go away: at most `max_closing` of them keep our buffers and sockets.
    let config = ShmConfig { max_closing: 4, ..ShmConfig::default() };
    let mut server = ShmDatapath::new(config.clone()).unwrap();
    let live = server.pool().stats().live_slots;
    let mut peers = Vec::new();
    for k in 0..10u8 {
        let mut peer = ShmDatapath::new(config.clone()).unwrap();
        let (conn, _) = ShmDatapath::link(&mut server, &mut peer).unwrap();
        let value = server.pool().alloc_copy(&[k; 4096]).unwrap();
        server.push_segments(conn, 1, &[Segment::ZeroCopy(value)]).unwrap();
        server.close(conn);
        peers.push(peer);
        assert_eq!(server.closing(), usize::from(k + 1).min(4));
    }
    assert_eq!(server.shm_stats().closes_forced, 6);
    assert_eq!(server.pool().stats().live_slots, live + 4, "the six let go released their buffers");
    // The four kept are still released as their peers read.
    for peer in &mut peers[6..] {
        let r = recv_n(peer, 1);
        assert_eq!(r[0].payload.len(), 4096);
    }
    server.poll_completions().unwrap();
    assert_eq!(server.closing(), 0);
    assert_eq!(server.pool().stats().live_slots, live);
    assert_eq!(server.shm_stats().closes_drained, 4);
}

#[test]
fn a_datapath_waiting_for_input_still_publishes_what_it_parked() {
    // An idle server: its replies parked behind the client's full ring, no
    // new request coming, only `wait` called. The client must still get
    // every reply (before, they stayed parked until the next request).
    let config = ShmConfig { ring_size: 4096, ..ShmConfig::default() };
    let (mut a, mut b) = ShmDatapath::pair(config).unwrap();
    let ca = first_conn(&a);
    let mut sent = 0u32;
    while a.shm_stats().parked < 4 {
        a.push_buf(ca, sent, &[sent as u8; 500]).unwrap();
        sent += 1;
    }
    let mut out = Vec::new();
    b.recv_batch(&mut out, 64).unwrap();
    assert!(out.len() < sent as usize, "the parked ones are not in the ring yet");
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < sent as usize {
        assert!(Instant::now() < deadline, "{} of {sent} within 5 s", out.len());
        assert!(!a.wait(Duration::from_millis(1)).unwrap(), "nothing to receive");
        b.recv_batch(&mut out, 64).unwrap();
    }
    for (i, r) in out.iter().enumerate() {
        assert_eq!((r.msg_id, r.payload[0]), (i as u32, i as u8));
    }
}

//! Receiving in place from a trusted peer (`ShmConfig::receive_in_place`):
//! zero-copy segments stay in the sender's pool as leased `PeerSlice`s, the
//! sender's buffers are released only when the leases are dropped (in any
//! order) or expire, the limits fall back to gathering, and a sender that
//! writes a leased buffer changes what is read but nothing else.

use std::time::{Duration, Instant};

use cornflakes::RcBuf;
use cornflakes_datapath::shm::{LeaseExpired, LeaseLimits, PeerSlice, ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, InPlace, RecvError, Segment, Span};

fn in_place(limits: LeaseLimits) -> ShmConfig {
    ShmConfig { ring_size: 64 << 10, receive_in_place: Some(limits), ..ShmConfig::default() }
}

fn first_conn(dp: &ShmDatapath) -> ConnId {
    dp.connections().next().expect("one connection")
}

/// Receives exactly `n` messages in place, waiting up to 5 s.
fn recv_in_place(dp: &mut ShmDatapath, n: usize) -> Vec<InPlace> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < n {
        assert!(Instant::now() < deadline, "{} of {n} messages within 5 s", out.len());
        dp.wait(Duration::from_millis(100)).unwrap();
        let want = n - out.len();
        dp.recv_batch_in_place(&mut out, want).unwrap();
    }
    out
}

/// Publishes the receiver's acknowledgements (an empty receive), then
/// returns how many sends completed at the sender.
fn completions(sender: &mut ShmDatapath, receiver: &mut ShmDatapath) -> usize {
    let mut none = Vec::new();
    receiver.recv_batch_in_place(&mut none, 1).unwrap();
    assert!(none.is_empty());
    sender.poll_completions().unwrap()
}

fn value(dp: &ShmDatapath, byte: u8, len: usize) -> RcBuf {
    dp.pool().alloc_copy(&vec![byte; len]).unwrap()
}

#[test]
fn pool_segments_stay_with_the_sender_until_the_message_is_dropped() {
    let (mut a, mut b) = ShmDatapath::pair(in_place(LeaseLimits::default())).unwrap();
    let ca = first_conn(&a);
    let zc = value(&a, 7, 3000);
    let other = cornflakes::Pool::new().unwrap();
    let foreign = other.alloc_copy(&[9u8; 100]).unwrap();
    let segs =
        [Segment::Copy(b"header"), Segment::ZeroCopy(zc.clone()), Segment::Copy(b"tail"), Segment::ZeroCopy(foreign)];
    a.push_segments(ca, 42, &segs).unwrap();
    drop(segs);
    let mut got = recv_in_place(&mut b, 1);
    let m = got.pop().unwrap();
    assert_eq!((m.msg_id, m.len(), m.peer_segments()), (42, 6 + 3000 + 4 + 100, 1));
    assert!(m.as_local().is_none());
    assert_eq!(m.local_prefix(), b"header");
    let mut expect = b"header".to_vec();
    expect.extend_from_slice(&[7u8; 3000]);
    expect.extend_from_slice(b"tail");
    expect.extend_from_slice(&[9u8; 100]);
    assert_eq!(m.to_vec().unwrap(), expect);
    // The zero-copy field is one run in the sender's pool; the inline
    // segment after it is ours.
    match m.span(6, 3000) {
        Some(Span::Peer(s)) => assert!(s.eq_bytes(&[7u8; 3000]).unwrap()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(m.span(3006, 4), Some(Span::Local(b"tail"))));
    assert!(matches!(m.span(3010, 100), Some(Span::Local(s)) if s == [9u8; 100]));
    assert!(m.span(5, 2).is_none(), "spans two runs");
    assert!(m.span(3100, 11).is_none(), "past the end");
    assert_eq!(b.shm_stats().leased, 1);
    assert_eq!(b.leases_held(first_conn(&b)), (1, 3000));
    // Held: the sender keeps its buffer.
    assert_eq!(completions(&mut a, &mut b), 0);
    assert_eq!(zc.ref_count(), 2, "ours and the send's");
    drop(m);
    assert_eq!(completions(&mut a, &mut b), 1);
    assert_eq!(zc.ref_count(), 1);
    assert_eq!(b.leases_held(first_conn(&b)), (0, 0));
}

#[test]
fn leases_dropped_out_of_order_acknowledge_in_order() {
    let (mut a, mut b) = ShmDatapath::pair(in_place(LeaseLimits::default())).unwrap();
    let ca = first_conn(&a);
    let values: Vec<RcBuf> = (0..3).map(|k| value(&a, k, 1000)).collect();
    for (k, v) in values.iter().enumerate() {
        a.push_segments(ca, k as u32, &[Segment::Copy(b"k"), Segment::ZeroCopy(v.clone())]).unwrap();
    }
    let mut got = recv_in_place(&mut b, 3);
    // A copied message in between needs no acknowledgement.
    a.push_buf(ca, 9, b"plain").unwrap();
    let plain = recv_in_place(&mut b, 1);
    assert_eq!(plain[0].as_local().map(|p| &p[..]), Some(&b"plain"[..]));
    let first = got.remove(0);
    // A slice outlives its message and keeps the lease.
    let Some(Span::Peer(last)) = got[1].span(1, 1000) else { panic!("not in place") };
    got.clear();
    assert_eq!(completions(&mut a, &mut b), 0, "the first is still held");
    drop(first);
    assert_eq!(completions(&mut a, &mut b), 2, "the first two complete, the third is held by its slice");
    assert_eq!(last.to_vec().unwrap(), vec![2u8; 1000]);
    drop(last);
    assert_eq!(completions(&mut a, &mut b), 1);
    assert!(values.iter().all(|v| v.ref_count() == 1));
}

#[test]
fn over_the_limits_records_are_gathered() {
    let limits = LeaseLimits { max_bytes: 5000, max_leases: 2, ..LeaseLimits::default() };
    let (mut a, mut b) = ShmDatapath::pair(in_place(limits)).unwrap();
    let ca = first_conn(&a);
    let sizes = [3000usize, 3000, 1000, 500];
    for (k, &n) in sizes.iter().enumerate() {
        let v = value(&a, k as u8, n);
        a.push_segments(ca, k as u32, &[Segment::ZeroCopy(v)]).unwrap();
    }
    let got = recv_in_place(&mut b, 4);
    // 3000 leased; 3000 more would exceed 5000 bytes; 1000 fits; then two
    // records are held.
    let leased: Vec<bool> = got.iter().map(|m| m.peer_segments() == 1).collect();
    assert_eq!(leased, [true, false, true, false]);
    for (k, m) in got.iter().enumerate() {
        assert_eq!(m.to_vec().unwrap(), vec![k as u8; sizes[k]]);
    }
    assert_eq!((b.shm_stats().leased, b.shm_stats().lease_refused), (2, 2));
    assert_eq!(b.leases_held(first_conn(&b)), (2, 4000));
    drop(got);
    assert_eq!(completions(&mut a, &mut b), 4);
}

#[test]
fn an_old_lease_expires_and_releases_the_sender() {
    let limits = LeaseLimits { max_age: Duration::from_millis(20), ..LeaseLimits::default() };
    let (mut a, mut b) = ShmDatapath::pair(in_place(limits)).unwrap();
    let ca = first_conn(&a);
    let v = value(&a, 5, 2000);
    a.push_segments(ca, 1, &[Segment::ZeroCopy(v.clone())]).unwrap();
    let m = recv_in_place(&mut b, 1).pop().unwrap();
    let Some(Span::Peer(s)) = m.span(0, 2000) else { panic!("not in place") };
    assert!(s.eq_bytes(&[5u8; 2000]).unwrap());
    // Expiry is checked every few receive batches: keep receiving.
    let start = Instant::now();
    let mut done = 0;
    while done == 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "the lease never expired");
        std::thread::sleep(Duration::from_millis(1));
        done = completions(&mut a, &mut b);
    }
    assert!(start.elapsed() >= Duration::from_millis(20), "expired early");
    assert_eq!(done, 1, "expired: acknowledged although held");
    assert_eq!(v.ref_count(), 1);
    assert!(s.is_expired());
    assert_eq!(s.to_vec(), Err(LeaseExpired));
    assert_eq!(m.to_vec(), Err(LeaseExpired));
    assert_eq!(s.for_each_chunk(|_| true), Err(LeaseExpired));
    assert_eq!(s.block(0), Err(LeaseExpired));
    assert_eq!(b.shm_stats().leases_expired, 1);
}

#[test]
fn a_sender_writing_a_leased_buffer_changes_values_not_safety() {
    let (mut a, mut b) = ShmDatapath::pair(in_place(LeaseLimits::default())).unwrap();
    let ca = first_conn(&a);
    let v = value(&a, 1, 4096);
    a.push_segments(ca, 1, &[Segment::ZeroCopy(v.clone())]).unwrap();
    let m = recv_in_place(&mut b, 1).pop().unwrap();
    let Some(Span::Peer(s)) = m.span(0, 4096) else { panic!("not in place") };
    // A misbehaving sender writes the buffer it sent, behind the pool's
    // back (through /proc/self/mem, as a debugger or another process with
    // the memfd could; the pool's hugepage memfd refuses `pwrite`).
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut mem = std::fs::OpenOptions::new().write(true).open("/proc/self/mem").unwrap();
        mem.seek(SeekFrom::Start(v.as_ptr() as u64 + 1000)).unwrap();
        mem.write_all(&[0xEE; 100]).unwrap();
    }
    let seen = s.to_vec().unwrap();
    assert_eq!(seen.len(), 4096);
    assert_eq!(&seen[..1000], &[1u8; 1000][..]);
    assert_eq!(&seen[1000..1100], &[0xEE; 100][..], "the new bytes are read");
    assert_eq!(&seen[1100..], &[1u8; 2996][..]);
    let mut chunks = 0;
    let mut seen_by_chunk = Vec::new();
    assert!(s
        .for_each_chunk(|c| {
            chunks += 1;
            seen_by_chunk.extend_from_slice(c);
            true
        })
        .unwrap());
    assert_eq!(blocks_of(&s), seen, "read block by block");
    assert_eq!((chunks, seen_by_chunk), (4096usize.div_ceil(cornflakes_datapath::shm::PEER_CHUNK), seen));
}

/// The bytes of `s` as `block` reads them, checking that the padding of
/// a short last block is zero.
fn blocks_of(s: &PeerSlice) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..s.len().div_ceil(64) {
        let block = s.block(i).unwrap();
        let n = (s.len() - i * 64).min(64);
        assert!(block[n..].iter().all(|&b| b == 0), "padding is zero");
        out.extend_from_slice(&block[..n]);
    }
    out
}

#[test]
fn blocks_cover_every_byte_at_any_offset_and_length() {
    let (mut a, mut b) = ShmDatapath::pair(in_place(LeaseLimits::default())).unwrap();
    let ca = first_conn(&a);
    let want: Vec<u8> = (0..3000).map(|i| (i * 7 + 3) as u8).collect();
    let v = a.pool().alloc_copy(&want).unwrap();
    a.push_segments(ca, 1, &[Segment::ZeroCopy(v)]).unwrap();
    let m = recv_in_place(&mut b, 1).pop().unwrap();
    let Some(Span::Peer(s)) = m.span(0, 3000) else { panic!("not in place") };
    for (start, len) in [(0, 3000), (0, 0), (0, 64), (1, 63), (3, 128), (5, 500), (2999, 1), (2936, 64), (17, 2983)] {
        let part = s.slice(start, len).unwrap();
        assert_eq!(blocks_of(&part), &want[start..start + len], "{start}+{len}");
    }
    let past = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.block(3000usize.div_ceil(64))));
    assert!(past.is_err(), "a block past the end panics");
}

#[test]
fn leases_end_with_the_connection() {
    let (mut a, mut b) = ShmDatapath::pair(in_place(LeaseLimits::default())).unwrap();
    let ca = first_conn(&a);
    let v = value(&a, 3, 1500);
    a.push_segments(ca, 1, &[Segment::ZeroCopy(v)]).unwrap();
    let m = recv_in_place(&mut b, 1).pop().unwrap();
    assert_eq!(m.to_vec().unwrap(), vec![3u8; 1500]);
    // Closing (not dropping) `a`: a dropped datapath whose peer still holds
    // a buffer leaks it by design, which the leak checker would report.
    a.close(ca);
    assert_eq!(a.closing(), 1, "the leased buffer is kept for the peer");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "the peer's death was not reported");
        match b.recv_batch_in_place(&mut out, 8) {
            Err(RecvError::Closed(_)) => break,
            Ok(_) => b.wait(Duration::from_millis(10)).map(|_| ()).unwrap_or(()),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(m.to_vec(), Err(LeaseExpired), "the peer may reuse or lose its buffers");
    drop((m, b));
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.closing() > 0 {
        assert!(Instant::now() < deadline, "the closed connection was never reaped");
        a.poll_completions().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.shm_stats().leaked_on_drop, 0);
}

#[test]
fn without_the_option_every_message_is_gathered() {
    let (mut a, mut b) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    let ca = first_conn(&a);
    let v = value(&a, 4, 3000);
    a.push_segments(ca, 1, &[Segment::Copy(b"h"), Segment::ZeroCopy(v.clone())]).unwrap();
    let m = recv_in_place(&mut b, 1).pop().unwrap();
    let whole = m.as_local().expect("gathered");
    assert_eq!(whole.len(), 3001);
    assert!(b.recover(&whole[..]).is_some(), "in the receiver's pool");
    assert_eq!(completions(&mut a, &mut b), 1, "released at once");
    assert_eq!(b.shm_stats().leased, 0);
}

#[test]
fn a_whole_message_is_copied_out_and_compared_across_its_runs() {
    let (mut a, mut b) = ShmDatapath::pair(in_place(LeaseLimits::default())).unwrap();
    let ca = first_conn(&a);
    // Runs: local (header), peer (a pool value over one chunk), local, peer.
    // 20 000 B: copied for a peer with streaming stores where the CPU gets
    // them (shm::streams_for_peer).
    let big: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 1) as u8).collect();
    assert!(cornflakes_datapath::shm::STREAMING.contains(&big.len()));
    let v1 = a.pool().alloc_copy(&big).unwrap();
    let v2 = value(&a, 5, 700);
    a.push_segments(
        ca,
        1,
        &[Segment::Copy(b"hdr"), Segment::ZeroCopy(v1), Segment::Copy(b"mid"), Segment::ZeroCopy(v2)],
    )
    .unwrap();
    let m = recv_in_place(&mut b, 1).pop().unwrap();
    assert_eq!(m.peer_segments(), 2);
    let mut expected = b"hdr".to_vec();
    expected.extend_from_slice(&big);
    expected.extend_from_slice(b"mid");
    expected.extend_from_slice(&[5u8; 700]);
    let mut copy = vec![0u8; m.len()];
    m.copy_to_slice(&mut copy).unwrap();
    assert_eq!(copy, expected);
    let mut for_peer = vec![0u8; m.len()];
    m.copy_for_peer(&mut for_peer).unwrap();
    assert_eq!(for_peer, expected);
    // Unaligned both ways, through the streaming copy's head and tail.
    let mut odd = vec![0u8; big.len() + 1];
    cornflakes_datapath::shm::copy_for_peer(&mut odd[1..], &big[..]);
    assert_eq!(&odd[1..], &big[..]);
    cornflakes_datapath::shm::copy_for_peer(&mut odd[..big.len() - 3], &big[3..]);
    assert_eq!(&odd[..big.len() - 3], &big[3..]);
    assert_eq!(m.eq_bytes(&expected), Ok(true));
    // A difference in any run, or in the length, is seen.
    for at in [1, 3 + 4096 + 17, 3 + 20_000 + 1, expected.len() - 1] {
        let mut wrong = expected.clone();
        wrong[at] ^= 0x80;
        assert_eq!(m.eq_bytes(&wrong), Ok(false), "byte {at}");
    }
    assert_eq!(m.eq_bytes(&expected[1..]), Ok(false));
    // A message wholly in our memory takes the same calls.
    a.push_buf(ca, 2, b"short").unwrap();
    let local = recv_in_place(&mut b, 1).pop().unwrap();
    assert!(local.as_local().is_some());
    let mut copy = [0u8; 5];
    local.copy_to_slice(&mut copy).unwrap();
    assert_eq!((&copy, local.eq_bytes(b"short")), (b"short", Ok(true)));
}

#[test]
fn received_into_the_shared_pool_bytes_go_back_by_descriptor() {
    for into_shared in [false, true] {
        let config = ShmConfig { receive_into_shared_pool: into_shared, ..in_place(LeaseLimits::default()) };
        let (mut a, mut b) = ShmDatapath::pair(config).unwrap();
        let (ca, cb) = (first_conn(&a), first_conn(&b));
        let request: Vec<u8> = (0..3000u32).map(|i| (i * 13 + 5) as u8).collect();
        a.push_buf(ca, 7, &request).unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.is_empty() {
            assert!(Instant::now() < deadline, "no message");
            b.wait(Duration::from_millis(100)).unwrap();
            b.recv_batch(&mut got, 1).unwrap();
        }
        let payload = got.pop().unwrap().payload;
        assert_eq!(&payload[..], &request[..]);
        assert_eq!(b.pool().recover(&payload[..]).is_some(), into_shared, "gathered into the shared pool");
        // Echo a part of it zero-copy: by descriptor only from the shared pool.
        b.push_segments(cb, 7, &[Segment::Copy(b"ok"), Segment::ZeroCopy(payload.slice(100..2100))]).unwrap();
        drop(payload);
        let echo = recv_in_place(&mut a, 1).pop().unwrap();
        assert_eq!(echo.peer_segments(), usize::from(into_shared));
        let mut expected = b"ok".to_vec();
        expected.extend_from_slice(&request[100..2100]);
        assert_eq!(echo.eq_bytes(&expected), Ok(true));
        // Let the sender's buffer go before both ends drop (a datapath
        // dropped with a buffer its peer still holds leaks it by design).
        drop(echo);
        completions(&mut b, &mut a);
    }
}

//! Values returned by reference (`ShmConfig::accept_returns`,
//! `Datapath::push_spans`): a peer receiving in place answers with
//! descriptors into the sender's own pool, which the sender gets back as its
//! own buffers; a send is completed only after the records published before
//! its acknowledgement were received; a peer that does not accept returns
//! gets copies, and so does a peer the value is not of. (A hostile peer's
//! returns: `shm_hostile.rs`.)

use std::time::{Duration, Instant};

use cornflakes_datapath::shm::{LeaseLimits, ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, InPlace, Segment, Span};

/// The client: accepts returns (and receives in place, as the load
/// generator does); the server receives in place.
fn configs(accept: bool) -> (ShmConfig, ShmConfig) {
    let base =
        ShmConfig { ring_size: 64 << 10, receive_in_place: Some(LeaseLimits::default()), ..ShmConfig::default() };
    (ShmConfig { accept_returns: accept, ..base.clone() }, base)
}

fn pair(accept: bool) -> (ShmDatapath, ShmDatapath) {
    let (client, server) = configs(accept);
    let (mut c, mut s) = (ShmDatapath::new(client).unwrap(), ShmDatapath::new(server).unwrap());
    ShmDatapath::link(&mut c, &mut s).unwrap();
    (c, s)
}

/// Lets the server acknowledge what it received and the client complete
/// its sends, so that dropping the client leaks nothing (a sender dropped
/// with buffers its peer may still read leaks them by design,
/// `ShmConfig::close_linger`).
fn settle(client: &mut ShmDatapath, server: &mut ShmDatapath) {
    let cc = first(client);
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.inflight(cc) > 0 {
        assert!(Instant::now() < deadline, "sends not completed within 5 s");
        server.recv_batch_in_place(&mut Vec::new(), 8).unwrap();
        client.recv_batch_in_place(&mut Vec::new(), 8).unwrap();
        client.poll_completions().unwrap();
    }
}

fn first(dp: &ShmDatapath) -> ConnId {
    dp.connections().next().expect("one connection")
}

fn recv_one(dp: &mut ShmDatapath) -> InPlace {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.is_empty() {
        assert!(Instant::now() < deadline, "no message within 5 s");
        dp.recv_batch_in_place(&mut out, 1).unwrap();
    }
    out.pop().unwrap()
}

/// Sends `header` and a 3000-byte value of the client's pool; the server
/// echoes it with `push_spans`; returns what the client received, the value
/// and the server's message (still holding its lease).
fn echo(client: &mut ShmDatapath, server: &mut ShmDatapath, byte: u8) -> (InPlace, cornflakes::RcBuf) {
    let value = client.pool().alloc_copy(&[byte; 3000]).unwrap();
    let cc = first(client);
    client.push_segments(cc, 7, &[Segment::Copy(b"hdr"), Segment::ZeroCopy(value.clone())]).unwrap();
    let req = recv_one(server);
    assert_eq!(req.peer_segments(), 1);
    let spans = [Span::Local(b"re:"), req.span(3, 3000).expect("the value")];
    server.push_spans(req.conn, req.msg_id, &spans).unwrap();
    drop(spans);
    drop(req);
    (recv_one(client), value)
}

#[test]
fn an_echo_comes_back_as_the_senders_own_buffer() {
    let (mut client, mut server) = pair(true);
    let (reply, value) = echo(&mut client, &mut server, 5);
    assert_eq!((reply.msg_id, reply.len(), reply.returned_segments()), (7, 3003, 1));
    match reply.span(3, 3000) {
        // The very bytes we sent: our buffer, not a copy.
        Some(Span::Local(b)) => assert_eq!(b.as_ptr(), value.as_ptr()),
        other => panic!("{other:?}"),
    }
    assert_eq!(reply.local_prefix(), b"re:");
    assert_eq!((server.shm_stats().returns_sent, client.shm_stats().returns_received), (1, 1));
    // The reply holds a reference, so the buffer lives after we drop ours.
    let count = value.ref_count();
    drop(reply);
    assert_eq!(value.ref_count(), count - 1);
    settle(&mut client, &mut server);
}

#[test]
fn a_send_completes_only_after_the_reply_before_its_acknowledgement_is_received() {
    let (mut client, mut server) = pair(true);
    let value = client.pool().alloc_copy(&[9; 3000]).unwrap();
    let cc = first(&client);
    client.push_segments(cc, 1, &[Segment::Copy(b"h"), Segment::ZeroCopy(value.clone())]).unwrap();
    let req = recv_one(&mut server);
    server.push_spans(req.conn, req.msg_id, &[req.span(1, 3000).unwrap()]).unwrap();
    drop(req);
    // The server acknowledges (its lease is gone) on its next receive.
    let _ = server.recv_batch_in_place(&mut Vec::new(), 1).unwrap();
    // Acknowledged, but the reply published before it is unread: held.
    assert_eq!(client.poll_completions().unwrap(), 0);
    assert_eq!(client.inflight(cc), 1);
    let reply = recv_one(&mut client);
    assert_eq!(reply.returned_segments(), 1);
    assert_eq!(client.poll_completions().unwrap(), 1);
    assert_eq!(client.inflight(cc), 0);
    // The reply's own reference keeps the value readable.
    assert!(reply.eq_bytes(&[9; 3000]).unwrap());
    settle(&mut client, &mut server);
}

#[test]
fn a_peer_that_does_not_accept_returns_gets_a_copy() {
    let (mut client, mut server) = pair(false);
    let (reply, value) = echo(&mut client, &mut server, 6);
    assert_eq!(reply.returned_segments(), 0);
    assert!(reply.eq_bytes(&[b"re:".as_slice(), &[6; 3000]].concat()).unwrap());
    if let Some(Span::Local(b)) = reply.span(3, 3000) {
        assert_ne!(b.as_ptr(), value.as_ptr());
    }
    assert_eq!(server.shm_stats().returns_sent, 0);
    settle(&mut client, &mut server);
}

#[test]
fn a_peer_value_goes_by_reference_only_to_that_peer() {
    // Two clients: a value of client 1 sent to client 2 is copied.
    let (ccfg, scfg) = configs(true);
    let mut server = ShmDatapath::new(scfg).unwrap();
    let (mut c1, mut c2) = (ShmDatapath::new(ccfg.clone()).unwrap(), ShmDatapath::new(ccfg).unwrap());
    ShmDatapath::link(&mut c1, &mut server).unwrap();
    ShmDatapath::link(&mut c2, &mut server).unwrap();
    let v = c1.pool().alloc_copy(&[3; 2000]).unwrap();
    let k1 = first(&c1);
    c1.push_segments(k1, 1, &[Segment::Copy(b"h"), Segment::ZeroCopy(v)]).unwrap();
    let req = recv_one(&mut server);
    c2.push_buf(first(&c2), 2, b"hello").unwrap();
    let hello = recv_one(&mut server);
    assert_ne!(hello.conn, req.conn);
    server.push_spans(hello.conn, 9, &[req.span(1, 2000).unwrap()]).unwrap();
    let got = recv_one(&mut c2);
    assert_eq!((got.returned_segments(), got.to_vec().unwrap()), (0, vec![3; 2000]));
    assert_eq!(server.shm_stats().returns_sent, 0);
    drop(req);
    settle(&mut c1, &mut server);
}

#[test]
fn a_reply_parked_behind_a_full_ring_still_returns_by_reference_and_keeps_its_lease() {
    // A small ring from the server to the client, which does not read at
    // first; leases that would expire after 1 ms.
    let limits = LeaseLimits { max_age: Duration::from_millis(1), ..LeaseLimits::default() };
    let server_cfg = ShmConfig { ring_size: 4096, receive_in_place: Some(limits), ..ShmConfig::default() };
    let client_cfg = ShmConfig { accept_returns: true, ..server_cfg.clone() };
    let (mut client, mut server) = (ShmDatapath::new(client_cfg).unwrap(), ShmDatapath::new(server_cfg).unwrap());
    ShmDatapath::link(&mut client, &mut server).unwrap();
    let cc = first(&client);
    let value = client.pool().alloc_copy(&[4; 3000]).unwrap();
    let mut sent = 0u32;
    while server.shm_stats().parked < 8 {
        assert!(sent < 10_000, "the server never parked a reply");
        client.push_segments(cc, sent, &[Segment::Copy(b"h"), Segment::ZeroCopy(value.clone())]).unwrap();
        client.flush().unwrap();
        let req = recv_one(&mut server);
        server.push_spans(req.conn, req.msg_id, &[Span::Local(b"re:"), req.span(1, 3000).unwrap()]).unwrap();
        sent += 1;
    }
    let parked = server.shm_stats().parked;
    // Past the leases' age, the server receives (and would expire them):
    // the parked replies keep theirs, so their requests stay unacknowledged.
    std::thread::sleep(Duration::from_millis(5));
    for _ in 0..40 {
        server.recv_batch_in_place(&mut Vec::new(), 8).unwrap();
    }
    assert_eq!(server.shm_stats().leases_expired, 0);
    client.poll_completions().unwrap();
    assert!(client.inflight(cc) as u64 >= parked, "{} in flight, {parked} replies parked", client.inflight(cc));
    // Now the client reads: every reply, parked or not, is its own buffer.
    let mut got = 0u32;
    let deadline = Instant::now() + Duration::from_secs(5);
    while got < sent {
        assert!(Instant::now() < deadline, "{got} of {sent} replies within 5 s");
        let mut out = Vec::new();
        client.recv_batch_in_place(&mut out, 16).unwrap();
        for reply in out {
            assert_eq!(reply.msg_id, got, "replies in order");
            assert_eq!(reply.returned_segments(), 1);
            match reply.span(3, 3000) {
                Some(Span::Local(b)) => assert_eq!(b.as_ptr(), value.as_ptr()),
                other => panic!("{other:?}"),
            }
            got += 1;
        }
        server.poll_completions().unwrap();
        server.recv_batch_in_place(&mut Vec::new(), 8).unwrap();
    }
    assert_eq!(server.shm_stats().returns_sent, u64::from(sent));
    assert_eq!((server.shm_stats().parked_returns_lost, server.shm_stats().leases_expired), (0, 0));
    settle(&mut client, &mut server);
}

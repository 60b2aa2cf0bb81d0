//! A hostile peer: this test speaks the set-up protocol by hand
//! (`shm::proto`), then writes malformed records, corrupts the shared ring
//! with `pwrite` on its memfd, lies about credits and acknowledgements. The
//! datapath must drop what is malformed (counting it), close a connection
//! whose ring is corrupt, never read outside the shared regions, and keep
//! serving everyone else.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use cornflakes_datapath::shm::proto::{
    Desc, Hello, DESC_INLINE, DESC_LEN, DESC_POOL, DESC_RETURN, HELLO_LEN, INFO_NEEDS_ACK, MAX_SEGMENTS,
};
use cornflakes_datapath::shm::ring::{RingConsumer, RingProducer, CONTROL_BYTES};
use cornflakes_datapath::shm::{recv_fds, send_fds, ShmConfig, ShmDatapath, ShmError};
use cornflakes_datapath::{write_packet_header, ConnId, Datapath, RecvError, Segment, SendError};
use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
use rustix::io::{pread, pwrite};

const MAX_MESSAGE: usize = 64 << 10;
const FAKE_POOL: usize = 1 << 20;

fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cf-shm-hostile-{name}-{}.sock", std::process::id()))
}

fn server(name: &str) -> ShmDatapath {
    server_with(name, ShmConfig::default())
}

fn server_with(name: &str, config: ShmConfig) -> ShmDatapath {
    let config = ShmConfig { max_message: MAX_MESSAGE, ring_size: 64 << 10, ..config };
    ShmDatapath::listen(socket_path(name), config).unwrap()
}

/// The hand-made peer.
struct Hostile {
    _sock: UnixStream,
    /// Ring the server writes to us (we created it: we can corrupt its
    /// consumer words).
    rx: RingConsumer,
    /// Ring we write to the server (it created it; we can still `pwrite`).
    tx: RingProducer,
    /// Our "pool" memfd, which the server maps read-only.
    pool: OwnedFd,
}

/// A "pool" memfd sealed against shrinking, as `cornflakes::Pool` makes them.
fn fake_pool() -> OwnedFd {
    let fd = unsealed_pool();
    rustix::fs::fcntl_add_seals(&fd, rustix::fs::SealFlags::SHRINK).unwrap();
    fd
}

fn unsealed_pool() -> OwnedFd {
    let fd = memfd_create("fake-pool", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    ftruncate(&fd, FAKE_POOL as u64).unwrap();
    let pattern: Vec<u8> = (0..FAKE_POOL).map(|i| (i % 251) as u8).collect();
    pwrite(&fd, &pattern, 0).unwrap();
    fd
}

fn hostile_connect(server: &mut ShmDatapath, name: &str) -> (Hostile, ConnId) {
    let sock = UnixStream::connect(socket_path(name)).unwrap();
    let rx = RingConsumer::create(4096).unwrap();
    let pool = fake_pool();
    let hello = Hello { ring_size: 4096, max_message: 1 << 20, pid: 0, flags: 0 };
    send_fds(&sock, &hello.encode(), &[rx.memfd(), pool.as_fd()]).unwrap();
    let id = server.accept(Duration::from_secs(5)).unwrap();
    let mut buf = [0u8; HELLO_LEN];
    let (n, mut fds) = recv_fds(&sock, &mut buf).unwrap();
    assert_eq!((n, fds.len()), (HELLO_LEN, 2));
    let server_hello = Hello::decode(&buf).unwrap();
    assert_eq!(server_hello.max_message, MAX_MESSAGE as u64);
    fds.pop();
    let tx = RingProducer::attach(fds.pop().unwrap()).unwrap();
    (Hostile { _sock: sock, rx, tx, pool }, id)
}

fn packet(id: u32) -> [u8; 8] {
    let mut p = [0u8; 8];
    write_packet_header(&mut p, id);
    p
}

fn descs(list: &[Desc]) -> Vec<u8> {
    let mut out = vec![0u8; list.len() * DESC_LEN];
    for (i, d) in list.iter().enumerate() {
        d.encode(&mut out[i * DESC_LEN..]);
    }
    out
}

impl Hostile {
    fn push(&mut self, info: u32, body: &[u8]) {
        self.tx.try_push_info(body, info).unwrap();
    }

    /// A record: descriptors, packet header, first segment, inline bytes.
    fn push_msg(&mut self, info: u32, d: &[Desc], id: u32, first: &[u8], inline: &[u8]) {
        let mut body = descs(d);
        body.extend_from_slice(&packet(id));
        body.extend_from_slice(first);
        body.extend_from_slice(inline);
        self.push(info, &body);
    }
}

fn pool_desc(offset: u64, len: u32) -> Desc {
    Desc { offset, len, kind: DESC_POOL }
}

fn fake_pool_bytes(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn malformed_records_are_dropped_and_serving_continues() {
    let mut server = server("malformed");
    let (mut h, id) = hostile_connect(&mut server, "malformed");
    let ack = INFO_NEEDS_ACK;
    let mut bad = 0;
    // Shorter than a packet header.
    h.push(0, &[1, 2, 3]);
    bad += 1;
    // Packet header with a non-zero reserved word.
    h.push(0, &[1, 0, 0, 0, 9, 0, 0, 0, b'x']);
    bad += 1;
    // Unknown info bits.
    h.push_msg(1 << 20, &[], 1, b"x", &[]);
    bad += 1;
    // More descriptors than allowed, and more than the body holds.
    h.push_msg(MAX_SEGMENTS as u32 + 1, &[], 1, b"x", &[]);
    bad += 1;
    h.push_msg(4, &[pool_desc(0, 8)], 1, b"", &[]);
    bad += 1;
    // Descriptors outside the peer pool: past its end, overflowing, and
    // ending one byte past it.
    h.push_msg(1 | ack, &[pool_desc(FAKE_POOL as u64 + 4096, 16)], 1, b"x", &[]);
    h.push_msg(1 | ack, &[pool_desc(u64::MAX - 4, 16)], 1, b"x", &[]);
    h.push_msg(1 | ack, &[pool_desc(FAKE_POOL as u64 - 15, 16)], 1, b"x", &[]);
    bad += 3;
    // Unknown descriptor kind; inline descriptor with an offset.
    h.push_msg(1, &[Desc { offset: 0, len: 4, kind: 7 }], 1, b"x", b"abcd");
    h.push_msg(1, &[Desc { offset: 64, len: 4, kind: DESC_INLINE }], 1, b"x", b"abcd");
    bad += 2;
    // Inline lengths claiming more than the record holds.
    h.push_msg(1, &[Desc { offset: 0, len: 4000, kind: DESC_INLINE }], 1, b"x", b"abcd");
    bad += 1;
    // Total over the server's max_message (each piece is in range).
    h.push_msg(2 | ack, &[pool_desc(0, 40_000), pool_desc(40_000, 40_000)], 1, b"x", &[]);
    bad += 1;
    let mut out = Vec::new();
    server.recv_batch(&mut out, 64).unwrap();
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(server.stats().dropped_malformed, bad);
    // Every record that asked for an acknowledgement was counted.
    assert_eq!(h.tx.acked(), 4);

    // A valid message after all that: gathered from our pool and inline.
    h.push_msg(2 | ack, &[pool_desc(1000, 3000), Desc { offset: 0, len: 3, kind: DESC_INLINE }], 77, b"first", b"end");
    // Our pool grows; a descriptor past the old end makes the server
    // re-map (after checking the new size).
    ftruncate(&h.pool, 2 * FAKE_POOL as u64).unwrap();
    pwrite(&h.pool, &[0xEE; 100], FAKE_POOL as u64 + 500).unwrap();
    h.push_msg(1 | ack, &[pool_desc(FAKE_POOL as u64 + 500, 100)], 78, b"", &[]);
    out.clear();
    server.recv_batch(&mut out, 64).unwrap();
    assert_eq!(out.len(), 2);
    let mut expect = b"first".to_vec();
    expect.extend_from_slice(&fake_pool_bytes(1000, 3000));
    expect.extend_from_slice(b"end");
    assert_eq!((out[0].conn, out[0].msg_id), (id, 77));
    assert_eq!(&out[0].payload[..], &expect[..]);
    assert_eq!(&out[1].payload[..], &[0xEE; 100][..]);
    assert_eq!(server.shm_stats().peer_pool_remaps, 1);
    assert_eq!(server.stats().dropped_malformed, bad);
    assert_eq!(h.tx.acked(), 6);
    // The connection still works both ways.
    server.push_buf(id, 5, b"reply").unwrap();
    let mut got = Vec::new();
    h.rx.try_pop(&mut got).unwrap().unwrap();
    assert_eq!(&got[8..], b"reply");
}

/// Reads the ring key from a ring memfd (header word at offset 24).
fn ring_key(fd: &impl AsFd) -> u64 {
    let mut k = [0u8; 8];
    pread(fd, &mut k, 24).unwrap();
    u64::from_le_bytes(k)
}

/// Writes a record header at data offset `off` for position `pos`.
fn forge_header(fd: &impl AsFd, off: usize, pos: u64, len: u32, info: u32) {
    let mut hdr = [0u8; 16];
    hdr[0..8].copy_from_slice(&(pos ^ ring_key(fd)).to_le_bytes());
    hdr[8..12].copy_from_slice(&len.to_le_bytes());
    hdr[12..16].copy_from_slice(&info.to_le_bytes());
    pwrite(fd, &hdr, (CONTROL_BYTES + off) as u64).unwrap();
}

#[test]
fn corrupt_ring_closes_only_that_connection() {
    let mut server = server("corrupt");
    let (h1, id1) = hostile_connect(&mut server, "corrupt");
    let (mut h2, id2) = hostile_connect(&mut server, "corrupt");
    let mut honest = ShmDatapath::new(ShmConfig::default()).unwrap();
    let (s_honest, c_honest) = ShmDatapath::link(&mut server, &mut honest).unwrap();
    // Connection 1: a published header with an impossible length.
    forge_header(&h1.tx.memfd(), 0, 0, 0x7FFF_FFF0, 0);
    // Connection 2: one good message, then a wrap record that does not end
    // at the end of the ring.
    h2.push_msg(0, &[], 9, b"good", &[]);
    forge_header(&h2.tx.memfd(), 32, 32, 64, 1 << 31);
    honest.push_buf(c_honest, 1, b"honest").unwrap();
    let mut out = Vec::new();
    let mut closed = Vec::new();
    for _ in 0..10 {
        match server.recv_batch(&mut out, 64) {
            Ok(_) => {}
            Err(RecvError::Closed(id)) => closed.push(id),
            Err(e) => panic!("{e}"),
        }
    }
    closed.sort();
    let mut expect_closed = vec![id1, id2];
    expect_closed.sort();
    assert_eq!(closed, expect_closed);
    assert_eq!(server.shm_stats().corrupt_rings, 2);
    let mut got: Vec<_> = out.iter().map(|r| (r.conn, r.payload.to_vec())).collect();
    got.sort();
    let mut expect = vec![(id2, b"good".to_vec()), (s_honest, b"honest".to_vec())];
    expect.sort();
    assert_eq!(got, expect);
    // Serving continues.
    assert!(matches!(server.push_buf(id1, 0, b"x"), Err(SendError::Closed(_))));
    server.push_buf(s_honest, 2, b"still serving").unwrap();
    let mut back = Vec::new();
    while back.is_empty() {
        honest.recv_batch(&mut back, 1).unwrap();
    }
    assert_eq!(&back[0].payload[..], b"still serving");
}

#[test]
fn lies_about_credits_and_acknowledgements() {
    let mut server = server("credits");
    let (h, id) = hostile_connect(&mut server, "credits");
    // An acknowledgement of sends never made is ignored.
    let value = server.pool().alloc_copy(&[1u8; 1000]).unwrap();
    server.push_segments(id, 1, &[Segment::ZeroCopy(value.clone())]).unwrap();
    pwrite(h.rx.memfd(), &1000u64.to_le_bytes(), 136).unwrap();
    assert_eq!(server.poll_completions().unwrap(), 0);
    assert_eq!(value.ref_count(), 2);
    // A real one releases the buffer.
    h.rx.set_acked(1);
    assert_eq!(server.poll_completions().unwrap(), 1);
    assert_eq!(value.ref_count(), 1);
    // Credits beyond what was ever written: the server stops sending to
    // this peer (Closed), without panicking.
    pwrite(h.rx.memfd(), &(1u64 << 40).to_le_bytes(), 128).unwrap();
    let err = loop {
        match server.push_buf(id, 2, &[0u8; 1000]) {
            Ok(()) => {}
            Err(e) => break e,
        }
    };
    assert!(matches!(err, SendError::Closed(c) if c == id), "{err:?}");
}

#[test]
fn bad_handshakes_are_refused() {
    let mut server = server("handshake");
    let pool = fake_pool();
    // A ring memfd that is not sealed: could shrink under the server.
    let sock = UnixStream::connect(socket_path("handshake")).unwrap();
    let unsealed = memfd_create("unsealed", MemfdFlags::CLOEXEC).unwrap();
    ftruncate(&unsealed, (CONTROL_BYTES + 4096) as u64).unwrap();
    let hello = Hello { ring_size: 4096, max_message: 1 << 20, pid: 0, flags: 0 };
    send_fds(&sock, &hello.encode(), &[unsealed.as_fd(), pool.as_fd()]).unwrap();
    assert!(matches!(server.accept(Duration::from_secs(5)), Err(ShmError::Ring(_))));
    // One descriptor instead of two.
    let sock2 = UnixStream::connect(socket_path("handshake")).unwrap();
    let rx = RingConsumer::create(4096).unwrap();
    send_fds(&sock2, &hello.encode(), &[rx.memfd()]).unwrap();
    assert!(matches!(server.accept(Duration::from_secs(5)), Err(ShmError::Handshake(_))));
    // A bad magic.
    let sock3 = UnixStream::connect(socket_path("handshake")).unwrap();
    send_fds(&sock3, &[0u8; HELLO_LEN], &[rx.memfd(), pool.as_fd()]).unwrap();
    assert!(matches!(server.accept(Duration::from_secs(5)), Err(ShmError::Handshake(_))));
    // A peer of another build (protocol version 1) is told so.
    let sock4 = UnixStream::connect(socket_path("handshake")).unwrap();
    let mut old = hello.encode();
    old[8..12].copy_from_slice(&1u32.to_le_bytes());
    send_fds(&sock4, &old, &[rx.memfd(), pool.as_fd()]).unwrap();
    let err = server.accept(Duration::from_secs(5)).unwrap_err();
    assert!(matches!(err, ShmError::Version { peer: 1, .. }), "{err}");
    assert!(err.to_string().contains("run the same Cornflakes build on both sides"), "{err}");
    // A peer that says nothing times out (short timeout for the test).
    let config = ShmConfig { handshake_timeout: Duration::from_millis(100), ..ShmConfig::default() };
    let path = socket_path("silent");
    let mut quiet_server = ShmDatapath::listen(&path, config).unwrap();
    let _silent = UnixStream::connect(&path).unwrap();
    assert!(matches!(quiet_server.accept(Duration::from_secs(5)), Err(ShmError::Handshake(_))));
    // The server still accepts a good peer.
    drop((sock, sock2, sock3, sock4));
    let (_h, id) = hostile_connect(&mut server, "handshake");
    assert_eq!(server.connections().collect::<Vec<_>>(), [id]);
}

/// A peer whose pool file could shrink under our gathers is refused.
#[test]
fn unsealed_peer_pool_is_refused() {
    let name = "unsealed";
    let mut server = ShmDatapath::listen(socket_path(name), ShmConfig::default()).unwrap();
    let sock = UnixStream::connect(socket_path(name)).unwrap();
    let rx = RingConsumer::create(4096).unwrap();
    let pool = unsealed_pool();
    let hello = Hello { ring_size: 4096, max_message: 1 << 20, pid: 0, flags: 0 };
    send_fds(&sock, &hello.encode(), &[rx.memfd(), pool.as_fd()]).unwrap();
    let err = server.accept(Duration::from_secs(5)).expect_err("an unsealed peer pool must be refused");
    assert!(err.to_string().contains("seal"), "{err}");
}

/// Returned values (`DESC_RETURN`, our own pool) from a peer that lies:
/// refused unless we accept returns, and then found only when the range is
/// a live, frozen buffer of ours; a free slot, a buffer still being
/// written, a range across buffers or past the pool is dropped and
/// counted, and never read.
#[test]
fn returns_naming_anything_but_our_live_buffers_are_dropped() {
    let ret = |offset: usize, len: u32| Desc { offset: offset as u64, len, kind: DESC_RETURN };
    // Not accepted: malformed whatever it names.
    let mut plain = server("returns-refused");
    let (mut h, _) = hostile_connect(&mut plain, "returns-refused");
    let live = plain.pool().alloc_copy(&[4u8; 600]).unwrap();
    let at = live.as_ptr() as usize - plain.pool().base() as usize;
    h.push_msg(1, &[ret(at, 600)], 1, b"x", &[]);
    assert!(plain.recv_batch(&mut Vec::new(), 8).unwrap() == 0);
    assert_eq!(plain.stats().dropped_malformed, 1);

    let mut server = server_with("returns", ShmConfig { accept_returns: true, ..ShmConfig::default() });
    let (mut h, _) = hostile_connect(&mut server, "returns");
    let base = server.pool().base() as usize;
    let off = |b: &[u8]| b.as_ptr() as usize - base;
    let live = server.pool().alloc_copy(&[4u8; 600]).unwrap();
    let freed = server.pool().alloc_copy(&[5u8; 600]).unwrap();
    let freed_at = off(&freed);
    drop(freed);
    let writable = server.pool().alloc(600).unwrap();
    let mut bad = 0;
    h.push_msg(1, &[ret(freed_at, 8)], 1, b"x", &[]);
    h.push_msg(1, &[ret(off(&writable), 8)], 1, b"x", &[]);
    h.push_msg(1, &[ret(off(&live) + 500, 600)], 1, b"x", &[]);
    h.push_msg(1, &[ret(usize::MAX - 3, 8)], 1, b"x", &[]);
    h.push_msg(1, &[ret(off(&live), 0)], 1, b"x", &[]);
    bad += 5;
    // Whole (gathered) and in place, a live value is found.
    h.push_msg(1, &[ret(off(&live) + 100, 200)], 2, b"hd", &[]);
    let mut out = Vec::new();
    server.recv_batch(&mut out, 16).unwrap();
    assert_eq!(server.stats().dropped_malformed, bad);
    assert_eq!(out.len(), 1);
    assert_eq!(&out[0].payload[..], [&b"hd"[..], &[4u8; 200]].concat());
    h.push_msg(1, &[ret(off(&live) + 100, 200)], 3, b"hd", &[]);
    let mut in_place = Vec::new();
    server.recv_batch_in_place(&mut in_place, 16).unwrap();
    let m = in_place.pop().expect("delivered in place");
    assert_eq!(m.returned_segments(), 1);
    assert!(m.eq_bytes(&[&b"hd"[..], &[4u8; 200]].concat()).unwrap());
    drop(writable);
}

/// The pool memfd a peer receives is read-only: it cannot map our shared
/// pool writable (our `&[u8]`s of shared-pool buffers must not change under
/// us), only read it.
#[test]
fn the_pool_a_peer_receives_cannot_be_mapped_writable() {
    use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
    let mut server = server("pool-read-only");
    let sock = UnixStream::connect(socket_path("pool-read-only")).unwrap();
    let rx = RingConsumer::create(4096).unwrap();
    let pool = fake_pool();
    let hello = Hello { ring_size: 4096, max_message: 1 << 20, pid: 0, flags: 0 };
    send_fds(&sock, &hello.encode(), &[rx.memfd(), pool.as_fd()]).unwrap();
    server.accept(Duration::from_secs(5)).unwrap();
    let mut buf = [0u8; HELLO_LEN];
    let (_, mut fds) = recv_fds(&sock, &mut buf).unwrap();
    let theirs = fds.pop().expect("the pool memfd");
    // A hugepage-backed pool maps in 2 MiB units.
    let len = 2 << 20;
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    // SAFETY: a fresh mapping chosen by the kernel (none is made: it must fail).
    let writable = unsafe { mmap(std::ptr::null_mut(), len, rw, MapFlags::SHARED, &theirs, 0) };
    assert!(writable.is_err(), "a peer mapped our pool writable");
    // SAFETY: as above.
    let readable = unsafe { mmap(std::ptr::null_mut(), len, ProtFlags::READ, MapFlags::SHARED, &theirs, 0) }.unwrap();
    // SAFETY: the mapping just made, of `len` bytes.
    unsafe { munmap(readable, len) }.unwrap();
    assert!(pwrite(&theirs, b"x", 0).is_err(), "a peer wrote our pool");
}

/// The fuzz harness's record parser (`fuzz/fuzz_targets/shm_record.rs`
/// models it): a return naming a range inside one of its live buffers is
/// delivered with that buffer's bytes, on both receive paths; a range into
/// its freed slot, its slot still being written, an unused slot or across
/// two buffers is malformed.
#[test]
fn the_fuzz_parser_resolves_returns_against_its_live_buffers() {
    use cornflakes_datapath::shm::__fuzz::{own_byte, Dropped, RecordParser, OWN_BUFFERS, OWN_BUFFER_LEN};
    let mut parser = RecordParser::new(1 << 20);
    let live = parser.own_live().to_vec();
    assert_eq!(live.len(), OWN_BUFFERS - 2, "one freed, one writable");
    let record = |offset: usize, len: u32| {
        let mut body = descs(&[Desc { offset: offset as u64, len, kind: DESC_RETURN }]);
        body.extend_from_slice(&packet(7));
        body.extend_from_slice(b"hdr");
        (body, 1 | INFO_NEEDS_ACK)
    };
    for &b in &live {
        let (body, info) = record(b + 100, 200);
        let mut want = b"hdr".to_vec();
        want.extend((b + 100..b + 300).map(own_byte));
        assert_eq!(parser.parse(&body, info), Ok((7, want.clone())));
        let (id, bytes, _) = parser.parse_in_place(&body, info).unwrap();
        assert_eq!((id, bytes), (7, want));
    }
    // Every slot of the size class that is not live: freed, writable, unused.
    // (The slots follow the first live one: a fresh region of that class.)
    let not_live: Vec<usize> =
        (0..OWN_BUFFERS + 2).map(|s| live[0] + s * OWN_BUFFER_LEN).filter(|o| !live.contains(o)).collect();
    assert_eq!(not_live.len(), 4, "{live:?}");
    let across = live.iter().find(|&&b| live.contains(&(b + OWN_BUFFER_LEN))).expect("two adjacent live buffers");
    let mut bad: Vec<(usize, u32)> = not_live.iter().map(|&o| (o, 16)).collect();
    bad.extend([(across + OWN_BUFFER_LEN - 8, 16), (live[0], 0), (usize::MAX - 4, 16)]);
    for (offset, len) in bad {
        let (body, info) = record(offset, len);
        assert_eq!(parser.parse(&body, info), Err(Dropped::Malformed), "offset {offset} len {len}");
        assert_eq!(parser.parse_in_place(&body, info).map(|r| r.0), Err(Dropped::Malformed), "offset {offset}");
    }
}

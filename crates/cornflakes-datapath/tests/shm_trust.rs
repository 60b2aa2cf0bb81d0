//! The trust model of the shared-memory datapath (see the `shm` module
//! docs): a peer can read the server's *shared* pool and the rings of its
//! own connection, nothing else.
//!
//! Two clients connect to one server datapath. Client A is an ordinary
//! `ShmDatapath`; client B is hand-made (it speaks the set-up protocol
//! itself, like `shm_hostile.rs`) so that it can read every byte of every
//! memfd the server gave it. A sends requests carrying a unique marker
//! (copied, and zero-copy from A's shared pool, so it takes the gather
//! path); the server keeps them, echoes them (zero-copy from the received
//! payload, and from a scratch buffer) and sends B a value from its shared
//! pool on purpose. B must find that value and must not find A's marker.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use cornflakes_datapath::shm::proto::{Desc, Hello, DESC_LEN, DESC_POOL, HELLO_LEN, INFO_NEEDS_ACK};
use cornflakes_datapath::shm::ring::{RingConsumer, RingProducer};
use cornflakes_datapath::shm::{recv_fds, send_fds, ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment};
use rustix::fs::{fstat, ftruncate, memfd_create, MemfdFlags};
use rustix::io::pread;

fn socket_path() -> PathBuf {
    std::env::temp_dir().join(format!("cf-shm-trust-{}.sock", std::process::id()))
}

/// Bytes unlikely to occur by chance.
fn marker(tag: &[u8]) -> Vec<u8> {
    let mut m = b"cornflakes-trust-marker:".to_vec();
    m.extend_from_slice(tag);
    m.extend_from_slice(format!(":{}", std::process::id()).as_bytes());
    m
}

/// Every byte of the file behind `fd`.
fn read_all(fd: &impl AsFd) -> Vec<u8> {
    let len = fstat(fd).unwrap().st_size as usize;
    let mut out = vec![0u8; len];
    let mut at = 0;
    while at < len {
        let n = pread(fd, &mut out[at..], at as u64).unwrap();
        assert!(n > 0);
        at += n;
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Client B: everything the server handed it.
struct Snoop {
    _sock: UnixStream,
    /// The ring the server writes to B (B created it).
    rx: RingConsumer,
    /// The ring B writes to the server (the server created it).
    _tx: RingProducer,
    /// Raw memfds received from the server: its ring and its shared pool.
    server_ring: OwnedFd,
    server_pool: OwnedFd,
}

fn snoop_connect(server: &mut ShmDatapath) -> (Snoop, ConnId) {
    let sock = UnixStream::connect(socket_path()).unwrap();
    let rx = RingConsumer::create(4096).unwrap();
    let pool = memfd_create("b-pool", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING).unwrap();
    ftruncate(&pool, 1 << 16).unwrap();
    rustix::fs::fcntl_add_seals(&pool, rustix::fs::SealFlags::SHRINK).unwrap();
    let hello = Hello { ring_size: 4096, max_message: 1 << 20, pid: 0, flags: 0 };
    send_fds(&sock, &hello.encode(), &[rx.memfd(), pool.as_fd()]).unwrap();
    let id = server.accept(Duration::from_secs(5)).unwrap();
    let mut buf = [0u8; HELLO_LEN];
    let (n, mut fds) = recv_fds(&sock, &mut buf).unwrap();
    assert_eq!((n, fds.len()), (HELLO_LEN, 2), "a hello with exactly a ring and one pool");
    let server_pool = fds.pop().unwrap();
    let server_ring = fds.pop().unwrap();
    let tx = RingProducer::attach(server_ring.try_clone().unwrap()).unwrap();
    (Snoop { _sock: sock, rx, _tx: tx, server_ring, server_pool }, id)
}

impl Snoop {
    /// Everything B can read of the server: its shared pool, both rings.
    fn everything(&self) -> Vec<u8> {
        let mut all = read_all(&self.server_pool);
        all.extend(read_all(&self.server_ring));
        all.extend(read_all(&self.rx.memfd()));
        all
    }
}

fn recv_all(dp: &mut ShmDatapath, want: usize) -> Vec<Received> {
    let mut got = Vec::new();
    while got.len() < want {
        assert!(dp.wait(Duration::from_secs(5)).unwrap(), "timed out");
        dp.recv_batch(&mut got, 16).unwrap();
    }
    got
}

#[test]
fn a_client_cannot_read_another_clients_requests() {
    let config = ShmConfig { ring_size: 64 << 10, ..ShmConfig::default() };
    let mut server = ShmDatapath::listen(socket_path(), config.clone()).unwrap();
    // A over a socket pair (both hellos in one thread), B over the path.
    let mut a = ShmDatapath::new(config).unwrap();
    let (server_a, a_conn) = ShmDatapath::link(&mut server, &mut a).unwrap();
    let (mut b, server_b) = snoop_connect(&mut server);

    // A's requests: one copied, one zero-copy from A's shared pool (the
    // server gathers it), one segment list mixing both.
    let secret = marker(b"client-A-request");
    a.push_buf(a_conn, 1, &secret).unwrap();
    let mut big = secret.repeat(4096 / secret.len() + 1);
    big.truncate(4096);
    let big = a.pool().alloc_copy(&big).unwrap();
    a.push_segments(a_conn, 2, &[Segment::Copy(b"hdr"), Segment::ZeroCopy(big)]).unwrap();
    a.push_segments(a_conn, 3, &[Segment::Copy(&secret), Segment::Copy(&secret)]).unwrap();
    let requests = recv_all(&mut server, 3);
    assert!(requests.iter().all(|r| r.conn == server_a));
    assert!(contains(&requests[1].payload, &secret));
    // The requests are live in the server: B looks for them at once.
    assert!(!contains(&b.everything(), &secret), "B read client A's requests in the server's memory");

    // The server answers A: the received payload sent back "zero-copy"
    // (private: must be copied) and a per-request buffer from `alloc`.
    let mut scratch = server.alloc(secret.len()).unwrap();
    scratch.copy_from_slice(&secret);
    let scratch = scratch.freeze();
    assert!(!server.pool().contains(&scratch), "alloc is the private pool");
    assert!(!server.pool().contains(&requests[1].payload), "receive buffers are private");
    server
        .push_segments(server_a, 10, &[Segment::Copy(b"re:"), Segment::ZeroCopy(requests[1].payload.clone())])
        .unwrap();
    server.push_segments(server_a, 11, &[Segment::ZeroCopy(scratch)]).unwrap();
    assert_eq!(server.inflight(server_a), 0, "nothing of A's was sent by descriptor");
    assert_eq!(server.stats().zero_copy_copied, 2);
    let echoes = recv_all(&mut a, 2);
    assert_eq!(&echoes[0].payload[..3], b"re:");
    assert_eq!(&echoes[0].payload[3..], &requests[1].payload[..]);
    assert_eq!(&echoes[1].payload[..], &secret[..]);

    // And B gets a value the server exposes on purpose, by descriptor.
    let public = marker(b"server-value-sent-zero-copy");
    let mut value = public.repeat(2048 / public.len() + 1);
    value.truncate(2048);
    let value = server.pool().alloc_copy(&value).unwrap();
    server.push_segments(server_b, 20, &[Segment::Copy(b"v"), Segment::ZeroCopy(value)]).unwrap();
    assert_eq!(server.inflight(server_b), 1);
    let mut rec = Vec::new();
    let info = b.rx.try_pop(&mut rec).unwrap().expect("a record for B");
    assert_eq!(info, 1 | INFO_NEEDS_ACK);
    let d = Desc::decode(rec[..DESC_LEN].try_into().unwrap());
    assert_eq!((d.kind, d.len), (DESC_POOL, 2048));

    // B reads everything it was given.
    let all = b.everything();
    assert!(contains(&all, &public), "B must see the value sent to it zero-copy (else this test proves nothing)");
    assert!(!contains(&all, &secret), "B read client A's request bytes through the server's memory");
    drop(requests);
}

//! Every serializer's server and client codec over one in-process pair of
//! shared-memory datapaths: each operation with small and large values,
//! error statuses, responses too large for the datapath, and hostile bytes
//! (random, truncated, corrupted), which must be refused as malformed or
//! answered, never panic.

use std::time::{Duration, Instant};

use cornflakes::field::{DEFAULT_THRESHOLD, ONLY_COPY, ONLY_ZERO_COPY};
use cornflakes::Pool;
use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received};
use cornflakes_kv::codec::capnp::{CapnpClient, CapnpServer};
use cornflakes_kv::codec::cornflakes::{CornflakesClient, CornflakesServer};
use cornflakes_kv::codec::flatbuffers::{FlatbuffersClient, FlatbuffersServer};
use cornflakes_kv::codec::prost::{ProstClient, ProstServer};
use cornflakes_kv::codec::rkyv::{RkyvClient, RkyvServer};
use cornflakes_kv::{ClientCodec, HandleError, Limits, Op, Request, ServerCodec, Status, Store, System};

/// Largest message the test datapaths accept: responses above it must come
/// back as `TooLarge`.
const MAX_MESSAGE: usize = 64 << 10;

const SMALL: usize = 100;
const LARGE: usize = 4096;

/// A value of `len` bytes, different for each `seed`.
fn value(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A small deterministic generator for hostile bytes (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn req<'r>(op: Op, keys: &[&'r [u8]], vals: &[&'r [u8]], index: u32) -> Request<'r> {
    Request { op: op as u32, keys: keys.iter().copied().collect(), vals: vals.iter().copied().collect(), index }
}

/// A server codec and a client codec over a linked pair of datapaths.
struct Harness<S, C> {
    system: System,
    server_dp: ShmDatapath,
    client_dp: ShmDatapath,
    client_conn: ConnId,
    server_conn: ConnId,
    store: Store,
    server: S,
    client: C,
    next_id: u32,
}

/// Receives one message on `dp`, waiting up to 5 s.
fn recv_one(dp: &mut ShmDatapath) -> Received {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.is_empty() {
        assert!(Instant::now() < deadline, "no message within 5 s");
        dp.recv_batch(&mut out, 1).unwrap();
        if out.is_empty() {
            dp.wait(Duration::from_millis(10)).unwrap();
        }
    }
    assert_eq!(out.len(), 1);
    out.pop().unwrap()
}

impl<S: ServerCodec, C: ClientCodec> Harness<S, C> {
    fn new(system: System, make: impl FnOnce(&Pool, &Pool) -> (S, C)) -> Self {
        let config = ShmConfig { max_message: MAX_MESSAGE, ..ShmConfig::default() };
        let (server_dp, client_dp) = ShmDatapath::pair(config).unwrap();
        let server_conn = server_dp.connections().next().unwrap();
        let client_conn = client_dp.connections().next().unwrap();
        let limits = Limits { max_response: 4 * MAX_MESSAGE, ..Limits::default() };
        let store = Store::new(server_dp.pool().clone(), limits);
        // As `server::serve`: the server codec builds responses in the
        // scratch pool (private on shm), the store's values are in `pool`.
        let (server, client) = make(server_dp.scratch_pool(), client_dp.pool());
        Harness { system, server_dp, client_dp, client_conn, server_conn, store, server, client, next_id: 1 }
    }

    /// Sends `req` through the client codec and returns what the server
    /// received.
    fn send(&mut self, req: &Request<'_>) -> Received {
        let id = self.next_id;
        self.next_id += 1;
        self.client.send_request(&mut self.client_dp, self.client_conn, id, req).unwrap();
        self.client_dp.flush().unwrap();
        let rx = recv_one(&mut self.server_dp);
        assert_eq!((rx.conn, rx.msg_id), (self.server_conn, id));
        rx
    }

    /// Lets the server handle `rx`; on success reads the response with the
    /// client codec (which must accept it).
    fn serve(&mut self, rx: &Received) -> Result<(Status, Vec<Vec<u8>>), HandleError> {
        let handled = self.server.handle(&mut self.server_dp, &mut self.store, rx);
        self.server.end_batch();
        self.server_dp.flush().unwrap();
        handled?;
        let resp = recv_one(&mut self.client_dp);
        assert_eq!(resp.msg_id, rx.msg_id);
        let mut out = None;
        self.client
            .read_response(&resp.payload, &mut |status, vals| {
                out = Some((status, vals.iter().map(|v| v.to_vec()).collect()));
            })
            .unwrap_or_else(|e| panic!("{}: the client refuses the server's response: {e}", self.system.name()));
        self.client.end_batch();
        self.server_dp.poll_completions().unwrap();
        self.client_dp.poll_completions().unwrap();
        Ok(out.expect("read_response calls check"))
    }

    /// A full round trip.
    fn call(&mut self, req: &Request<'_>) -> (Status, Vec<Vec<u8>>) {
        let rx = self.send(req);
        self.serve(&rx).unwrap_or_else(|e| panic!("{}: {e}", self.system.name()))
    }

    /// Hands the server `bytes` as a received request: `Ok` (answered, and
    /// the answer is readable) or `Malformed`, nothing else.
    fn hostile(&mut self, bytes: &[u8]) -> Result<Status, ()> {
        let id = self.next_id;
        self.next_id += 1;
        let payload = self.server_dp.pool().alloc_copy(bytes).unwrap();
        let rx = Received { conn: self.server_conn, msg_id: id, payload };
        match self.serve(&rx) {
            Ok((status, _)) => Ok(status),
            Err(HandleError::Malformed) => Err(()),
            Err(e) => panic!("{}: hostile request gave {e}", self.system.name()),
        }
    }

    /// Zero-copy segments the server sent by descriptor, and those it had
    /// to copy (not in its shared pool).
    fn server_zero_copy(&self) -> (u64, u64) {
        let s = self.server_dp.stats();
        (s.zero_copy_segments, s.zero_copy_copied)
    }
}

/// The whole suite for one system.
fn suite<S: ServerCodec, C: ClientCodec>(system: System, make: impl FnOnce(&Pool, &Pool) -> (S, C)) {
    let mut h = Harness::new(system, make);
    let name = system.name();
    let (small, large, small2) = (value(1, SMALL), value(2, LARGE), value(3, SMALL));
    let list = [small.clone(), large.clone(), small2.clone()];
    h.store.insert_with(b"small", &[SMALL as u32], |_, b| b.copy_from_slice(&small)).unwrap();
    h.store.insert_with(b"large", &[LARGE as u32], |_, b| b.copy_from_slice(&large)).unwrap();
    h.store
        .insert_with(b"list", &[SMALL as u32, LARGE as u32, SMALL as u32], |i, b| b.copy_from_slice(&list[i]))
        .unwrap();
    // 20 x 4 KiB: more than one message can carry on these datapaths.
    h.store.insert_with(b"huge", &[LARGE as u32; 20], |i, b| b.copy_from_slice(&value(i as u8, LARGE))).unwrap();
    let ok = |vals: &[&Vec<u8>]| (Status::Ok, vals.iter().map(|v| v.to_vec()).collect::<Vec<_>>());

    // Get, small and large.
    assert_eq!(h.call(&req(Op::Get, &[b"small"], &[], 0)), ok(&[&small]), "{name}: get small");
    assert_eq!(h.call(&req(Op::Get, &[b"large"], &[], 0)), ok(&[&large]), "{name}: get large");

    // The baselines post a large response, built in pinned scratch memory,
    // as a zero-copy segment, and copy a short one. On shm the scratch pool
    // is private (no peer maps it), so the datapath copies that segment
    // into the record instead of sending a descriptor.
    if system.is_baseline_library() {
        let (zc, copied) = h.server_zero_copy();
        h.call(&req(Op::Get, &[b"small"], &[], 0));
        assert_eq!(h.server_zero_copy(), (zc, copied), "{name}: a short response is copied");
        h.call(&req(Op::Get, &[b"large"], &[], 0));
        assert_eq!(h.server_zero_copy(), (zc, copied + 1), "{name}: a large private response is copied by shm");
    }

    // Put (one value, and a list value), then read back.
    for (key, v) in [(&b"new-small"[..], &small), (b"new-large", &large)] {
        assert_eq!(h.call(&req(Op::Put, &[key], &[v], 0)), ok(&[]), "{name}: put");
        assert_eq!(h.call(&req(Op::Get, &[key], &[], 0)), ok(&[v]), "{name}: get after put");
    }
    assert_eq!(h.call(&req(Op::Put, &[b"new-list"], &[&large, &small], 0)), ok(&[]), "{name}: put list");
    assert_eq!(h.call(&req(Op::GetList, &[b"new-list"], &[], 0)), ok(&[&large, &small]), "{name}: get list");

    // GetM.
    assert_eq!(
        h.call(&req(Op::GetM, &[b"small", b"large", b"new-small"], &[], 0)),
        ok(&[&small, &large, &small]),
        "{name}: getm"
    );

    // GetList, GetFromList.
    assert_eq!(h.call(&req(Op::GetList, &[b"list"], &[], 0)), ok(&[&small, &large, &small2]), "{name}: get list");
    for (i, v) in list.iter().enumerate() {
        assert_eq!(h.call(&req(Op::GetFromList, &[b"list"], &[], i as u32)), ok(&[v]), "{name}: element {i}");
    }
    assert_eq!(h.call(&req(Op::GetFromList, &[b"list"], &[], 3)), (Status::NotFound, vec![]), "{name}: past the end");

    // Append (creating the list), small and large.
    assert_eq!(h.call(&req(Op::Append, &[b"appended"], &[&small], 0)), ok(&[]), "{name}: append");
    assert_eq!(h.call(&req(Op::Append, &[b"appended"], &[&large], 0)), ok(&[]), "{name}: append");
    assert_eq!(h.call(&req(Op::GetList, &[b"appended"], &[], 0)), ok(&[&small, &large]), "{name}: appended");

    // PutM.
    assert_eq!(h.call(&req(Op::PutM, &[b"m1", b"m2"], &[&large, &small2], 0)), ok(&[]), "{name}: putm");
    assert_eq!(h.call(&req(Op::GetM, &[b"m1", b"m2"], &[], 0)), ok(&[&large, &small2]), "{name}: getm after putm");

    // Echo: small, large, empty; and no values at all.
    let empty = Vec::new();
    assert_eq!(
        h.call(&req(Op::Echo, &[], &[&small, &large, &empty], 0)),
        ok(&[&small, &large, &empty]),
        "{name}: echo"
    );
    assert_eq!(h.call(&req(Op::Echo, &[], &[], 0)), ok(&[]), "{name}: empty echo");

    // Error statuses.
    assert_eq!(h.call(&req(Op::Get, &[b"missing"], &[], 0)), (Status::NotFound, vec![]), "{name}: missing");
    assert_eq!(h.call(&req(Op::GetM, &[b"small", b"missing"], &[], 0)).0, Status::NotFound, "{name}: getm missing");
    assert_eq!(h.call(&req(Op::Get, &[b"small", b"large"], &[], 0)).0, Status::BadRequest, "{name}: two keys");
    assert_eq!(h.call(&req(Op::Get, &[b"list"], &[], 0)).0, Status::BadRequest, "{name}: get of a list");
    for op in [0, 9, 99, u32::MAX] {
        let unknown = Request { op, keys: [&b"small"[..]].into_iter().collect(), ..Request::default() };
        assert_eq!(h.call(&unknown), (Status::UnknownOp, vec![]), "{name}: op {op}");
    }

    // A response larger than the datapath carries comes back as TooLarge,
    // and the server goes on.
    assert_eq!(h.call(&req(Op::GetList, &[b"huge"], &[], 0)), (Status::TooLarge, vec![]), "{name}: too large");
    assert_eq!(h.call(&req(Op::Get, &[b"large"], &[], 0)), ok(&[&large]), "{name}: after too large");

    // Hostile bytes. A valid request cut inside its large value is
    // malformed for every serializer.
    let valid = h.send(&req(Op::Put, &[b"key"], &[&large], 0)).payload.as_slice().to_vec();
    assert_eq!(h.hostile(&valid[..valid.len() / 2]), Err(()), "{name}: truncated in a value");
    // Every other truncation, random bytes, and corrupted valid requests
    // are either answered (some byte strings are valid messages) or refused.
    let short = h.send(&req(Op::GetM, &[b"small", b"list"], &[&small], 1)).payload.as_slice().to_vec();
    for n in 0..short.len() {
        let _ = h.hostile(&short[..n]);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ system as u64);
    let mut refused = 0;
    for round in 0..400 {
        let len = [0, 1, 4, 7, 8, 16, 64, 200, 1000][round % 9];
        refused += h.hostile(&rng.bytes(len)).is_err() as usize;
    }
    assert!(refused > 0, "{name}: random bytes are (mostly) refused");
    for source in [&short, &valid] {
        for _ in 0..300 {
            let mut bytes = source.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
            let _ = h.hostile(&bytes);
        }
    }
    // Structure-aware garbage for each format's framing.
    let prefixes: [&[u8]; 6] = [
        &[0xff; 16],                              // huge counts, invalid varints and wire types
        &[0x1a, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3], // protobuf: a field claiming 4 GiB
        &[0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0],    // capnp: 2^31 segments
        &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f],    // capnp: one segment of 2^31 words
        &[0xf8, 0xff, 0xff, 0xff, 1, 2, 3, 4],    // flatbuffers: root offset far away
        &[4, 0, 0, 0, 8, 0, 0, 0],                // flatbuffers: vtable before the start
    ];
    let refused_by: &[usize] = match system {
        System::Protobuf => &[0, 1],
        System::Capnp => &[0, 2, 3],
        System::Flatbuffers => &[0, 4, 5],
        _ => &[],
    };
    for (i, p) in prefixes.iter().enumerate() {
        let got = h.hostile(p);
        assert!(got.is_err() || !refused_by.contains(&i), "{name}: garbage {i} accepted");
    }

    // The server still works, and every zero-copy send was released.
    assert_eq!(h.call(&req(Op::Get, &[b"large"], &[], 0)), ok(&[&large]), "{name}: after hostile bytes");
    h.server_dp.poll_completions().unwrap();
    assert_eq!(h.server_dp.inflight(h.server_conn), 0, "{name}: completions release every send");

    // The client refuses garbage responses without panicking.
    for round in 0..200 {
        let payload = h.client_dp.pool().alloc_copy(&rng.bytes([1, 8, 16, 100][round % 4])).unwrap();
        let _ = h.client.read_response(&payload, &mut |_, _| {});
    }
}

#[test]
fn cornflakes() {
    suite(System::Cornflakes, |s, c| (CornflakesServer::new(s, DEFAULT_THRESHOLD, true), CornflakesClient::new(c)));
}

#[test]
fn cornflakes_only_sg() {
    suite(System::CornflakesOnlySg, |s, c| (CornflakesServer::new(s, ONLY_ZERO_COPY, true), CornflakesClient::new(c)));
}

#[test]
fn cornflakes_only_copy() {
    suite(System::CornflakesOnlyCopy, |s, c| (CornflakesServer::new(s, ONLY_COPY, true), CornflakesClient::new(c)));
}

#[test]
fn cornflakes_no_sas() {
    suite(System::CornflakesNoSas, |s, c| {
        (CornflakesServer::new(s, DEFAULT_THRESHOLD, false), CornflakesClient::new(c))
    });
}

#[test]
fn protobuf() {
    suite(System::Protobuf, |s, c| (ProstServer::new(s), ProstClient::new(c)));
}

#[test]
fn flatbuffers() {
    suite(System::Flatbuffers, |s, c| (FlatbuffersServer::new(s), FlatbuffersClient::new(c)));
}

#[test]
fn capnp() {
    suite(System::Capnp, |s, c| (CapnpServer::new(s), CapnpClient::new(c)));
}

#[test]
fn rkyv() {
    suite(System::Rkyv, |s, c| (RkyvServer::new(s), RkyvClient::new(c)));
}

/// Every system of the table has its test above (`raw` only echoes).
#[test]
fn the_table_covers_every_system() {
    let tested = [
        System::Cornflakes,
        System::CornflakesOnlySg,
        System::CornflakesOnlyCopy,
        System::CornflakesNoSas,
        System::Protobuf,
        System::Flatbuffers,
        System::Capnp,
        System::Rkyv,
    ];
    for system in System::ALL {
        assert!(
            tested.contains(&system) || system == System::Raw || !system.runs_on_datapath(),
            "{} has no test",
            system.name()
        );
    }
}

/// One large get served by `serve`'s loop with `system`, read by `client`.
fn serve_one<C: ClientCodec>(system: System, client: impl FnOnce(&Pool) -> C) {
    let (mut server_dp, mut client_dp) = ShmDatapath::pair(ShmConfig::default()).unwrap();
    let conn = client_dp.connections().next().unwrap();
    let mut client = client(client_dp.pool());
    let mut store = Store::new(server_dp.pool().clone(), Limits::default());
    let large = value(9, LARGE);
    store.insert_with(b"k", &[LARGE as u32], |_, b| b.copy_from_slice(&large)).unwrap();
    client.send_request(&mut client_dp, conn, 7, &req(Op::Get, &[b"k"], &[], 0)).unwrap();
    let stats = cornflakes_kv::server::serve(&mut server_dp, &mut store, system, |s| {
        s.handled + s.malformed + s.dropped_full + s.send_failed == 0
    })
    .unwrap();
    assert_eq!((stats.handled, stats.malformed), (1, 0), "{}", system.name());
    let resp = recv_one(&mut client_dp);
    assert_eq!(resp.msg_id, 7);
    let mut got = None;
    client
        .read_response(&resp.payload, &mut |status, vals| {
            got = Some((status, vals.iter().map(|v| v.to_vec()).collect::<Vec<_>>()))
        })
        .unwrap();
    assert_eq!(got, Some((Status::Ok, vec![large])), "{}", system.name());
}

/// `serve` runs the baselines (no longer placeholders).
#[test]
fn serve_runs_the_baselines() {
    serve_one(System::Protobuf, ProstClient::new);
    serve_one(System::Flatbuffers, FlatbuffersClient::new);
    serve_one(System::Capnp, CapnpClient::new);
    serve_one(System::Rkyv, RkyvClient::new);
}

//! The engine thread end to end over the shared-memory datapath: objects
//! posted as descriptors arrive at a peer as prost's bytes, the peer's
//! replies come back parsed, malformed replies are counted and dropped,
//! bad objects complete with an error, and nothing blocks.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Pair;
use cornflakes_datapath::shm::{ShmConfig, ShmDatapath};
use cornflakes_datapath::{ConnId, Datapath, Received, Segment};
use cornflakes_offload::{
    Arena, BufId, EncodeError, Engine, EngineConfig, ObjId, RxDescriptor, Sidecar, Slot, TxDescriptor, TxError,
};
use prost::Message as _;

/// The peer on the engine's thread: checks each message is prost's
/// encoding of what was posted, then answers with the same bytes, except
/// message id 13 which gets garbage.
struct CheckingEcho {
    dp: ShmDatapath,
    got: Vec<Received>,
    expected: Vec<u8>,
}

impl Sidecar for CheckingEcho {
    fn poll(&mut self) -> Result<(), String> {
        self.dp.recv_batch(&mut self.got, 32).map_err(|e| e.to_string())?;
        for r in self.got.drain(..) {
            if r.payload[..] != self.expected[..] {
                return Err(format!("message {} is not prost's encoding", r.msg_id));
            }
            let reply: &[u8] = if r.msg_id == 13 { &[0x0f, 0xff] } else { &r.payload };
            self.dp.push_segments(r.conn, r.msg_id, &[Segment::Copy(reply)]).map_err(|e| e.to_string())?;
        }
        self.dp.poll_completions().map_err(|e| e.to_string())?;
        Ok(())
    }
}

fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out");
        std::hint::spin_loop();
    }
}

#[test]
fn engine_sends_prost_bytes_and_parses_replies() {
    let set = Arc::new(common::schemas().clone());
    let pair = set.id("offload.Pair").unwrap();
    let a = vec![0xA5u8; 2048];
    let b: Vec<u8> = (0..2048).map(|i| i as u8).collect();
    let expected = Pair { a: a.clone(), b: b.clone() }.encode_to_vec();
    let config = EngineConfig {
        schemas: Arc::clone(&set),
        rx_schema: pair,
        threshold: 512,
        ring_capacity: 8,
        rx_arena_limit: 1 << 20,
        registered: vec![a.clone(), b.clone()],
    };
    let conn_slot = Arc::new(std::sync::Mutex::new(None::<ConnId>));
    let conn_out = Arc::clone(&conn_slot);
    let mut engine = Engine::spawn(config, move || {
        let (dp, peer) = ShmDatapath::pair(ShmConfig::default()).map_err(|e| e.to_string())?;
        *conn_out.lock().unwrap() = dp.connections().next();
        Ok((dp, CheckingEcho { dp: peer, got: Vec::new(), expected }))
    })
    .unwrap();
    let conn = conn_slot.lock().unwrap().unwrap();
    let table = set.table(pair);
    let mut arenas: Vec<Box<Arena>> = (0..4).map(|_| Box::default()).collect();
    let mut replies = 0;
    for msg_id in 0..200u32 {
        let mut arena = match arenas.pop() {
            Some(a) => a,
            None => wait_for(|| engine.poll_completion()).arena,
        };
        arena.clear();
        let root = arena.alloc(table.slots).unwrap();
        arena.set(root, table.field("a").unwrap().slot, Slot::Registered { buf: BufId(0), off: 0, len: 2048 });
        arena.set(root, table.field("b").unwrap().slot, Slot::Registered { buf: BufId(1), off: 0, len: 2048 });
        let mut d = TxDescriptor { arena, root, schema: pair, conn, msg_id };
        while let Err(back) = engine.post(d) {
            d = back;
            while let Some(c) = engine.poll_completion() {
                assert_eq!(c.result.unwrap(), expected_len());
                arenas.push(c.arena);
            }
        }
        if msg_id == 13 {
            continue; // its reply is garbage: dropped by the engine
        }
        let rx: RxDescriptor = wait_for(|| engine.poll_received());
        assert_eq!(rx.msg_id, msg_id);
        let slot = |name| rx.arena.get(rx.root, table.field(name).unwrap().slot).unwrap();
        assert_eq!(rx.arena.bytes(slot("a")).unwrap(), &a[..]);
        assert_eq!(rx.arena.bytes(slot("b")).unwrap(), &b[..]);
        engine.recycle(rx.arena);
        replies += 1;
    }
    assert_eq!(replies, 199);

    // A bad object completes with an error and sends nothing.
    let mut arena = Box::<Arena>::default();
    let root = arena.alloc(table.slots).unwrap();
    arena.set(root, 0, Slot::Registered { buf: BufId(9), off: 0, len: 1 });
    let mut d = TxDescriptor { arena, root, schema: pair, conn, msg_id: 999 };
    while let Err(back) = engine.post(d) {
        d = back;
        engine.poll_completion();
    }
    let c = wait_for(|| engine.poll_completion().filter(|c| c.msg_id == 999));
    assert!(matches!(c.result, Err(TxError::Encode(EncodeError::BadRegistered { .. }))));

    let stats = engine.stop().unwrap();
    assert_eq!(stats.sent, 200);
    assert_eq!(stats.zero_copy_segments, 400, "both 2048 B fields went zero-copy");
    assert_eq!(stats.received, 199);
    assert_eq!(stats.malformed, 1);
    assert_eq!(stats.encode_errors, 1);
}

fn expected_len() -> usize {
    2 * (1 + 2 + 2048)
}

#[test]
fn bad_objects_are_errors_not_panics() {
    let set = common::schemas();
    let everything = set.id("offload.Everything").unwrap();
    let t = set.table(everything);
    let inner = t.field("inner").unwrap().slot;
    let mut enc = cornflakes_offload::Encoder::new(512);

    // A cycle: an Inner object that is its own child.
    let inner_table = set.table(set.id("offload.Inner").unwrap());
    let mut arena = Arena::new();
    let root = arena.alloc(t.slots).unwrap();
    let looped = arena.alloc(inner_table.slots).unwrap();
    arena.set(looped, inner_table.field("child").unwrap().slot, Slot::Message(looped));
    arena.set(root, inner, Slot::Message(looped));
    assert_eq!(enc.encode(set, everything, &arena, root, &[]), Err(EncodeError::TooDeep));

    // A scalar where a message belongs, a list in a singular field, an
    // object past the arena's end, a bytes slot past the heap.
    let cases = [
        (inner, Slot::Scalar(1)),
        (t.field("i32").unwrap().slot, Slot::List { start: 0, len: 1 }),
        (inner, Slot::Message(ObjId(1_000_000))),
        (t.field("data").unwrap().slot, Slot::Bytes { off: 0, len: 10 }),
        (t.field("r_i32").unwrap().slot, Slot::List { start: 0, len: 1_000 }),
        (t.field("r_i32").unwrap().slot, Slot::Scalar(3)),
    ];
    for (slot, value) in cases {
        let mut arena = Arena::new();
        let root = arena.alloc(t.slots).unwrap();
        arena.set(root, slot, value);
        assert!(enc.encode(set, everything, &arena, root, &[]).is_err(), "{value:?} in slot {slot}");
    }
}

//! Arbitrary bytes into the protobuf-wire decoder (`Wire::Protobuf`) of
//! `pwtest.Tree` (every scalar type, packed and unpacked lists, nesting,
//! a oneof, a map), from a plain slice and from a pool buffer with
//! thresholds 0 and 512. A decode may fail with a `ProtoDecodeError`; it
//! must not panic. On success: every string is read as text (which may
//! fail, never panic), zero-copy fields point into the packet, and the
//! message re-encodes (contiguously and by serialize-and-send, which must
//! agree) into bytes that decode and re-encode to themselves.
#![no_main]

use cornflakes::mem::HugePages;
use cornflakes::protowire::{gather, ProtoMessage};
use cornflakes::{Arena, Pool, PoolConfig};
use cornflakes_tests::pwtest::Tree;
use libfuzzer_sys::fuzz_target;

thread_local! {
    static POOL: Pool = Pool::with_config(PoolConfig { max_bytes: 64 << 20, hugepages: HugePages::Never, lock: false })
        .expect("cannot create the fuzzing pool");
}

fn walk(t: &Tree<'_>) {
    let _ = t.get_opt_string().as_str();
    if let Some(s) = t.get_scalars() {
        let _ = s.get_f_string().as_str();
    }
    if let Some(r) = t.get_repeats() {
        for s in r.get_r_string().iter() {
            let _ = s.as_str();
        }
    }
    for e in t.get_labels().iter() {
        let _ = e.get_key().as_str();
    }
    for c in t.get_children().iter() {
        walk(c);
    }
}

fn reencode(t: &Tree<'_>) -> Vec<u8> {
    let layout = t.proto_layout();
    let mut copied = vec![0u8; layout.copy_len];
    let mut zc = Vec::new();
    t.write_proto(&layout, &mut copied, |at, b| zc.push((at, b.clone()))).expect("sized by layout");
    let sent = gather(&copied, &zc);
    assert_eq!(sent, t.serialize_proto_to_vec(), "serialize-and-send and contiguous encoding differ");
    sent
}

fn check(t: &Tree<'_>, pool: &Pool) {
    walk(t);
    let bytes = reencode(t);
    let arena = Arena::copying();
    let again = Tree::deserialize_proto_from_slice(&bytes, &arena).expect("our own encoding decodes");
    assert_eq!(reencode(&again), bytes, "decode(encode(m)) re-encodes differently");
    let pkt = pool.alloc_copy(&bytes).expect("pool");
    let arena = Arena::with_threshold(Some(pool), 0);
    let zc = Tree::deserialize_proto(&pkt, &arena).expect("our own encoding decodes zero-copy");
    assert_eq!(reencode(&zc), bytes);
}

fuzz_target!(|data: &[u8]| {
    POOL.with(|pool| {
        let arena = Arena::copying();
        if let Ok(t) = Tree::deserialize_proto_from_slice(data, &arena) {
            check(&t, pool);
        }
        let Ok(pkt) = pool.alloc_copy(data) else { return };
        for threshold in [0, 512] {
            let arena = Arena::with_threshold(Some(pool), threshold);
            if let Ok(t) = Tree::deserialize_proto(&pkt, &arena) {
                if threshold == 0 {
                    let big = t.get_big();
                    assert!(big.is_empty() || big.is_zero_copy(), "threshold 0: non-empty bytes are zero-copy");
                }
                check(&t, pool);
            };
        }
    });
});

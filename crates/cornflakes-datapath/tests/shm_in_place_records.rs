//! Receiving in place must read every record exactly as gathering does:
//! the same verdict (valid or malformed), the same message id, the same
//! bytes. Generated records, mostly well formed (pool and inline
//! descriptors, in and past the peer pool's first mapping), some with a
//! byte broken, go through both parsers of `shm::__fuzz` (the fuzz target
//! `fuzz/fuzz_targets/shm_record.rs` adds arbitrary bytes and a model).

use cornflakes_datapath::shm::__fuzz::{peer_pool_byte, Dropped, RecordParser, PEER_POOL_FILE, PEER_POOL_MAPPED};
use cornflakes_datapath::shm::proto::{DESC_INLINE, DESC_POOL, INFO_NEEDS_ACK};
use cornflakes_datapath::{write_packet_header, PACKET_HEADER_LEN};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A record body and its info word: descriptors, packet (header and first
/// segment), inline bytes.
fn record(rng: &mut Rng) -> (Vec<u8>, u32) {
    let n = rng.below(5) as usize;
    let mut descs = Vec::new();
    let mut inline = Vec::new();
    for _ in 0..n {
        let len = rng.below(3000) as u32;
        if rng.below(3) == 0 {
            descs.push((0u64, len, DESC_INLINE));
            inline.extend((0..len).map(|i| (i % 7) as u8));
        } else {
            // Mostly inside the first mapping, sometimes past it (re-map),
            // sometimes past the file (malformed).
            let limit = match rng.below(10) {
                0 => PEER_POOL_FILE as u64 + 4096,
                1..=3 => PEER_POOL_FILE as u64,
                _ => PEER_POOL_MAPPED as u64,
            };
            descs.push((rng.below(limit.saturating_sub(u64::from(len)).max(1)), len, DESC_POOL));
        }
    }
    let mut body = Vec::new();
    for (offset, len, kind) in &descs {
        body.extend_from_slice(&offset.to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&kind.to_le_bytes());
    }
    let mut header = [0u8; PACKET_HEADER_LEN];
    write_packet_header(&mut header, rng.next() as u32);
    body.extend_from_slice(&header);
    body.extend((0..rng.below(200)).map(|i| i as u8));
    body.extend_from_slice(&inline);
    let mut info = n as u32 | INFO_NEEDS_ACK;
    match rng.below(20) {
        0 if !body.is_empty() => {
            let at = rng.below(body.len() as u64) as usize;
            body[at] ^= 1 << rng.below(8);
        }
        1 => info ^= 1 << rng.below(12),
        2 => info &= !INFO_NEEDS_ACK,
        _ => {}
    }
    (body, info)
}

#[test]
fn in_place_and_gathered_records_agree() {
    let mut parser = RecordParser::new(128 << 10);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut valid, mut leased, mut malformed) = (0, 0, 0);
    for _ in 0..3000 {
        let (body, info) = record(&mut rng);
        let whole = parser.parse(&body, info);
        if parser.remaps() > 0 {
            // Let the in-place parse take the re-map path too.
            parser.unmap_peer_tail();
        }
        let in_place = parser.parse_in_place(&body, info);
        match (&whole, &in_place) {
            (Ok((id, bytes)), Ok((id2, bytes2, runs))) => {
                assert_eq!((id, bytes), (id2, bytes2));
                valid += 1;
                leased += usize::from(*runs > 0);
            }
            (Err(Dropped::Malformed), Err(Dropped::Malformed)) => malformed += 1,
            other => panic!("the two receives disagree: {other:?}"),
        }
        if parser.remaps() > 0 {
            parser.unmap_peer_tail();
        }
    }
    // The pool bytes of a leased message are the peer pool's.
    let mut body = Vec::new();
    body.extend_from_slice(&100u64.to_le_bytes());
    body.extend_from_slice(&5u32.to_le_bytes());
    body.extend_from_slice(&DESC_POOL.to_le_bytes());
    let mut header = [0u8; PACKET_HEADER_LEN];
    write_packet_header(&mut header, 9);
    body.extend_from_slice(&header);
    let (id, bytes, runs) = parser.parse_in_place(&body, 1 | INFO_NEEDS_ACK).unwrap();
    assert_eq!((id, runs), (9, 1));
    assert_eq!(bytes, (100..105).map(peer_pool_byte).collect::<Vec<_>>());
    assert!(
        valid > 1000 && leased > 500 && malformed > 100,
        "{valid} valid ({leased} in place), {malformed} malformed"
    );
}

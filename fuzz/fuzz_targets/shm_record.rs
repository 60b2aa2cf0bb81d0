//! Arbitrary bytes as a ring record of the shared-memory datapath, into
//! `receive_record` (the parser of what a hostile peer writes), with a fake
//! peer pool memfd of `PEER_POOL_FILE` bytes of which `PEER_POOL_MAPPED`
//! are mapped at first (descriptors past them take the re-map path).
//!
//! Input: two bytes of info word (little-endian; the valid bits and a few
//! invalid ones), then the record body. The record body is a heap copy of
//! exactly its length, so AddressSanitizer sees any read past it.
//!
//! Oracle: a plain safe-Rust reading of the record layout
//! (`crates/cornflakes-datapath/src/shm/proto.rs`) decides whether the
//! record is valid and what message it carries; the datapath must agree
//! exactly (same verdict, same message id, same payload bytes), both when
//! it gathers (`receive_record`) and when it receives in place, leaving
//! pool segments in the peer pool (`receive_record_in_place`). Returned
//! values (`DESC_RETURN`, ranges of *our* shared pool) are valid exactly
//! when they lie inside one of the parser's live buffers (`own_live`); a
//! range into its freed slot, its slot still being written, an unused
//! slot, or across two buffers is malformed.
#![no_main]

use std::cell::RefCell;

use cornflakes_datapath::shm::__fuzz::{
    own_byte, peer_pool_byte, Dropped, RecordParser, OWN_BUFFER_LEN, PEER_POOL_FILE,
};
use cornflakes_datapath::shm::proto::{
    DESC_INLINE, DESC_LEN, DESC_POOL, DESC_RETURN, INFO_DESC_MASK, INFO_VALID_BITS, MAX_SEGMENTS,
};
use cornflakes_datapath::{read_packet_header, PACKET_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

/// Large enough for pool descriptors past the first mapping.
const MAX_MESSAGE: usize = 128 << 10;

thread_local! {
    // Creating a parser makes a memfd and a pool: once. After a re-map the
    // peer pool's tail is unmapped again, so the re-map path stays reachable.
    static PARSER: RefCell<RecordParser> = RefCell::new(RecordParser::new(MAX_MESSAGE));
}

/// The record layout read the obvious way.
fn model(body: &[u8], info: u32, own_live: &[usize]) -> Option<(u32, Vec<u8>)> {
    if info & !INFO_VALID_BITS != 0 {
        return None;
    }
    let n = (info & INFO_DESC_MASK) as usize;
    if n > MAX_SEGMENTS {
        return None;
    }
    let desc_bytes = n * DESC_LEN;
    if body.len() < desc_bytes + PACKET_HEADER_LEN {
        return None;
    }
    let mut descs = Vec::new();
    let mut inline_total = 0usize;
    for i in 0..n {
        let d = &body[i * DESC_LEN..(i + 1) * DESC_LEN];
        let offset = u64::from_le_bytes(d[0..8].try_into().unwrap());
        let len = u32::from_le_bytes(d[8..12].try_into().unwrap()) as usize;
        let kind = u32::from_le_bytes(d[12..16].try_into().unwrap());
        match kind {
            DESC_POOL => {
                let end = offset.checked_add(len as u64)?;
                if end > PEER_POOL_FILE as u64 {
                    return None;
                }
            }
            DESC_INLINE if offset == 0 => inline_total += len,
            DESC_RETURN => {
                let end = offset.checked_add(len as u64)?;
                let inside = |b: &usize| *b as u64 <= offset && end <= (*b + OWN_BUFFER_LEN) as u64;
                if len == 0 || !own_live.iter().any(inside) {
                    return None;
                }
            }
            _ => return None,
        }
        descs.push((kind, offset as usize, len));
    }
    let packet_len = (body.len() - desc_bytes).checked_sub(inline_total)?;
    if packet_len < PACKET_HEADER_LEN {
        return None;
    }
    let total: usize = packet_len - PACKET_HEADER_LEN + descs.iter().map(|d| d.2).sum::<usize>();
    if total > MAX_MESSAGE {
        return None;
    }
    let id = read_packet_header(&body[desc_bytes..desc_bytes + PACKET_HEADER_LEN])?;
    let mut out = body[desc_bytes + PACKET_HEADER_LEN..desc_bytes + packet_len].to_vec();
    let mut inline_at = desc_bytes + packet_len;
    for (kind, offset, len) in descs {
        if kind == DESC_POOL {
            out.extend((offset..offset + len).map(peer_pool_byte));
        } else if kind == DESC_RETURN {
            out.extend((offset..offset + len).map(own_byte));
        } else {
            out.extend_from_slice(&body[inline_at..inline_at + len]);
            inline_at += len;
        }
    }
    assert_eq!(inline_at, body.len(), "model: inline area ends the record");
    Some((id, out))
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let info = u16::from_le_bytes([data[0], data[1]]) as u32;
    let body = data[2..].to_vec();
    PARSER.with(|p| {
        let mut parser = p.borrow_mut();
        let expected = model(&body, info, parser.own_live());
        let got = parser.parse(&body, info);
        match (&got, &expected) {
            (Err(Dropped::NoBuffer), _) => {}
            (Ok(g), Some(e)) => assert!(g == e, "parser and model disagree on the message"),
            (Err(Dropped::Malformed), None) => {}
            _ => panic!(
                "parser {:?} but model {}",
                got.as_ref().map(|g| g.0),
                if expected.is_some() { "valid" } else { "malformed" }
            ),
        }
        let in_place = parser.parse_in_place(&body, info);
        match (&in_place, &expected) {
            (Err(Dropped::NoBuffer), _) | (Err(Dropped::Malformed), None) => {}
            (Ok((id, bytes, _)), Some(e)) => assert!((*id, bytes) == (e.0, &e.1), "in place and model disagree"),
            _ => panic!("in place {:?} but model {}", in_place.as_ref().map(|g| g.0), expected.is_some()),
        }
        if parser.remaps() > 0 {
            parser.unmap_peer_tail();
        }
    });
});

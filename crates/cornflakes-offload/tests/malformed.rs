//! Hostile input to the receive path: never a panic, every malformed
//! message an error, agreement with prost on what is malformed, and the
//! limits (nesting, arena memory) hold.

mod common;

use common::{Everything, Inner, Reader};
use cornflakes_offload::{Arena, DecodeError, Decoder, RECURSION_LIMIT};
use proptest::prelude::*;
use prost::Message as _;

fn decode_ours(bytes: &[u8]) -> Result<Everything, DecodeError> {
    let set = common::schemas();
    let mut arena = Arena::with_limit(1 << 20);
    let root = Decoder::new().decode(set, set.id("offload.Everything").unwrap(), bytes, &mut arena)?;
    Ok(Reader { set, arena: &arena }.everything(root))
}

/// Ours and prost accept the same inputs, and read the same values from
/// those they accept (compared by re-encoding, so NaNs compare).
fn agree(bytes: &[u8]) -> Result<(), TestCaseError> {
    let ours = decode_ours(bytes);
    let theirs = Everything::decode(bytes);
    match (&ours, &theirs) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a.encode_to_vec(), b.encode_to_vec()),
        (Err(_), Err(_)) => {}
        _ => prop_assert!(false, "disagree on {:02x?}: ours {:?}, prost {:?}", bytes, ours.err(), theirs.err()),
    }
    Ok(())
}

fn sample() -> Vec<u8> {
    Everything {
        i32: -5,
        text: "héllo".into(),
        data: vec![1, 2, 3],
        inner: Some(Inner { id: 3, name: "n".into(), deltas: vec![-1, 2], child: Some(Box::new(Inner::default())) }),
        r_i32: vec![1, 300, -7],
        r_fl: vec![1.0, 2.5],
        r_text: vec!["a".into(), "bc".into()],
        r_inner: vec![Inner::default(), Inner { id: 9, ..Default::default() }],
        u_i32: vec![4, 5],
        u_db: vec![0.5],
        maybe: Some(0),
        big_number: 77,
        ..Default::default()
    }
    .encode_to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn random_bytes_never_panic_and_agree_with_prost(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        agree(&bytes)?;
    }

    #[test]
    fn mutated_messages_agree_with_prost(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = sample();
        for (at, value, kind) in edits {
            let i = at.index(bytes.len());
            match kind {
                0 => bytes[i] = value,
                1 => bytes.insert(i, value),
                _ => { bytes.remove(i); }
            }
        }
        agree(&bytes)?;
        agree(&bytes[..cut.index(bytes.len() + 1)])?;
    }
}

/// `depth` Inner messages nested in `Everything.inner`.
fn nested(depth: usize) -> Vec<u8> {
    let mut inner = Inner::default();
    for _ in 1..depth {
        inner = Inner { child: Some(Box::new(inner)), ..Default::default() };
    }
    Everything { inner: Some(inner), ..Default::default() }.encode_to_vec()
}

#[test]
fn nesting_limit_is_prosts() {
    // The root is level 0; RECURSION_LIMIT nested levels are fine.
    let limit = RECURSION_LIMIT as usize;
    assert!(decode_ours(&nested(limit)).is_ok());
    assert_eq!(decode_ours(&nested(limit + 1)).unwrap_err(), DecodeError::TooDeep);
    assert_eq!(decode_ours(&nested(5 * limit)).unwrap_err(), DecodeError::TooDeep);
    for depth in [limit - 2, limit - 1, limit, limit + 1] {
        assert_eq!(
            decode_ours(&nested(depth)).is_ok(),
            Everything::decode(&nested(depth)[..]).is_ok(),
            "prost agrees at depth {depth}"
        );
    }
}

#[test]
fn hand_made_malformed_inputs() {
    let cases: &[(&str, &[u8], DecodeError)] = &[
        ("field number 0", &[0x00, 0x01], DecodeError::BadKey),
        ("wire type 7", &[0x0f, 0x01], DecodeError::BadKey),
        ("length past the end", &[0x82, 0x01, 0x05, b'a'], DecodeError::Truncated), // field 16, 5 bytes, 1 given
        ("huge length", &[0x82, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f], DecodeError::Truncated),
        (
            "11-byte varint",
            &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            DecodeError::BadVarint,
        ),
        (
            "varint past 64 bits",
            &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            DecodeError::BadVarint,
        ),
        ("truncated varint", &[0x08, 0xff], DecodeError::Truncated),
        ("fixed32 cut short", &[0x3d, 0x01, 0x02], DecodeError::Truncated),
        ("int32 as length-delimited", &[0x0a, 0x00], DecodeError::WrongWireType(1)),
        ("string not UTF-8", &[0x7a, 0x02, 0xc3, 0x28], DecodeError::InvalidUtf8(15)),
        ("unknown group left open", &[0xfb, 0x07], DecodeError::BadGroup), // field 127, start group
        ("end group without start", &[0xfc, 0x07], DecodeError::BadGroup),
    ];
    for (what, bytes, want) in cases {
        assert_eq!(decode_ours(bytes).unwrap_err(), *want, "{what}");
        assert!(Everything::decode(*bytes).is_err(), "prost also refuses: {what}");
    }
    // Unknown fields of every wire type are skipped, as prost does.
    let mut unknown = vec![0xf8, 0x07, 0x96, 0x01]; // field 127 varint
    unknown.extend([0xf9, 0x07, 1, 2, 3, 4, 5, 6, 7, 8]); // fixed64
    unknown.extend([0xfa, 0x07, 0x02, 9, 9]); // length-delimited
    unknown.extend([0xfd, 0x07, 1, 2, 3, 4]); // fixed32
    unknown.extend([0xfb, 0x07, 0x80, 0x08, 0x01, 0xfc, 0x07]); // group holding field 128
    unknown.extend([0x08, 0x2a]); // i32 = 42
    assert_eq!(decode_ours(&unknown).unwrap().i32, 42);
    assert_eq!(Everything::decode(&unknown[..]).unwrap().i32, 42);
}

/// A small message that expands into many slots is stopped by the
/// arena's limit, not by running out of memory.
#[test]
fn arena_limit_bounds_memory() {
    let set = common::schemas();
    let id = set.id("offload.Everything").unwrap();
    // 100 000 packed bools: 100 kB on the wire, 1.6 MB of 16-byte slots.
    let wire = Everything { r_flag: vec![true; 100_000], ..Default::default() }.encode_to_vec();
    let mut small = Arena::with_limit(64 << 10);
    assert_eq!(Decoder::new().decode(set, id, &wire, &mut small).unwrap_err(), DecodeError::ArenaFull);
    let mut big = Arena::with_limit(4 << 20);
    assert!(Decoder::new().decode(set, id, &wire, &mut big).is_ok());
}

//! The runtime driven by a hand-written message (see
//! `reference_message.rs`), independent of the code generator.

mod reference_message;

use cornflakes::{Arena, Message, Pool};
use reference_message::example::Inner;

#[test]
fn inner_round_trips_in_every_mode() {
    let pool = Pool::new().unwrap();
    let big = pool.alloc_copy(&[0xAB; 2048]).unwrap();
    for threshold in [0, 512, usize::MAX] {
        let arena = Arena::with_threshold(Some(&pool), threshold);
        let mut m = Inner::new_in(&arena);
        m.set_a(7);
        m.set_data(&big);
        assert_eq!(m.get_data().is_zero_copy(), threshold <= 2048);
        let bytes = m.serialize_to_vec().unwrap();
        let back = Inner::deserialize_from_slice(&bytes, &arena).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.get_a(), 7);
    }
}

#[test]
fn inner_wire_bytes_are_as_specified() {
    let arena = Arena::copying();
    let mut m = Inner::new_in(&arena);
    m.set_a(0x0102_0304);
    m.set_data(b"hi");
    let bytes = m.serialize_to_vec().unwrap();
    #[rustfmt::skip]
    let expected = [
        1, 0, 0, 0,             // one bitmap word
        3, 0, 0, 0,             // fields 0 and 1 present
        4, 3, 2, 1,             // a
        20, 0, 0, 0, 2, 0, 0, 0, // data: offset 20, length 2
        b'h', b'i',
    ];
    assert_eq!(bytes, expected);
}

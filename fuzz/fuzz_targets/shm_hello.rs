//! Arbitrary bytes as the hello a shared-memory peer sends at set-up, into
//! `Hello::decode` and the checks set-up applies to it.
//!
//! Properties: decoding never panics; an accepted hello is exactly the
//! encoding of its fields (no byte the decoder ignores, so every byte of a
//! hello means something and reserved bytes stay usable by later
//! versions); the limit kept for the peer never exceeds what one pool
//! buffer holds.
#![no_main]

use cornflakes::mem::MAX_ALLOC;
use cornflakes_datapath::shm::__fuzz::check_hello;
use cornflakes_datapath::shm::proto::{Hello, HELLO_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = data.get(..HELLO_LEN) else { return };
    let bytes: &[u8; HELLO_LEN] = bytes.try_into().unwrap();
    let decoded = Hello::decode(bytes);
    let checked = check_hello(bytes);
    assert_eq!(decoded.is_some(), checked.is_some(), "decode and set-up checks disagree");
    if let (Some(h), Some((ring_size, max_message))) = (decoded, checked) {
        assert_eq!(&h.encode(), bytes, "an accepted hello is not the encoding of its fields");
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        assert_eq!(ring_size, h.ring_size);
        assert!(max_message <= MAX_ALLOC);
        assert_eq!(max_message as u64, h.max_message.min(MAX_ALLOC as u64));
    }
});

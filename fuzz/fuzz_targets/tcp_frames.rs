//! Arbitrary bytes as one TCP connection's received stream into the tcp
//! datapath's frame scan (`tcp::__fuzz::scan_frames`), with an arbitrary
//! message limit, against a model of the framing in the `tcp` module docs:
//! the 8-byte packet header whose second word is the length.
//!
//! Input: `max_message` (u16 LE), then the received bytes.
#![no_main]

use cornflakes_datapath::tcp::__fuzz::scan_frames;
use cornflakes_datapath::PACKET_HEADER_LEN;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let max = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let bytes = &data[2..];
    let (frames, consumed, next, bad) = scan_frames(bytes, max);
    // The model: walk the frames one header at a time.
    let mut pos = 0;
    let mut want = Vec::new();
    let (model_next, model_bad) = loop {
        if bytes.len() - pos < PACKET_HEADER_LEN {
            break (PACKET_HEADER_LEN, false);
        }
        let h = &bytes[pos..pos + PACKET_HEADER_LEN];
        let id = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
        if len > max {
            break (0, true);
        }
        if bytes.len() - pos - PACKET_HEADER_LEN < len {
            break (PACKET_HEADER_LEN + len, false);
        }
        want.push((id, pos + PACKET_HEADER_LEN, len));
        pos += PACKET_HEADER_LEN + len;
    };
    assert_eq!(frames, want);
    assert_eq!((consumed, next, bad), (pos, model_next, model_bad));
    assert!(frames.iter().all(|&(_, at, len)| at + len <= bytes.len() && len <= max));
    if !bad {
        assert!(bytes.len() - consumed < next, "the rest is an incomplete frame");
    }
});

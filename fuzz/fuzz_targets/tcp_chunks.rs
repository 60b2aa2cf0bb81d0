//! Arbitrary bytes as one TCP connection's received stream, cut into
//! chunks at arbitrary places, through the multishot receive path's
//! assembly (`tcp::__fuzz::assemble_chunks`: frames whole in a chunk
//! delivered in place, frames spanning chunks copied into one buffer),
//! against the frame scan of the whole stream (`scan_frames`, itself
//! checked against a model by `tcp_frames`).
//!
//! Input: `max_message` (u16 LE), the number of cuts `n` (u8), `n` cut
//! positions (u16 LE each, taken modulo the stream length), then the
//! received bytes.
#![no_main]

use cornflakes_datapath::tcp::__fuzz::{assemble_chunks, scan_frames};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let max = usize::from(u16::from_le_bytes([data[0], data[1]]));
    let cuts = usize::from(data[2]);
    let Some(rest) = data.get(3 + 2 * cuts..) else { return };
    let stream = rest;
    let mut at: Vec<usize> = data[3..3 + 2 * cuts]
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (stream.len() + 1))
        .collect();
    at.push(0);
    at.push(stream.len());
    at.sort_unstable();
    at.dedup();
    let chunks: Vec<&[u8]> = at.windows(2).map(|w| &stream[w[0]..w[1]]).collect();
    let (got, closed) = assemble_chunks(&chunks, max);
    let (frames, _consumed, _next, bad) = scan_frames(stream, max);
    let want: Vec<(u32, Vec<u8>)> = frames.iter().map(|&(id, at, len)| (id, stream[at..at + len].to_vec())).collect();
    assert_eq!(got, want, "the same frames, whole and in order, however the stream is cut");
    assert_eq!(closed, bad, "closed exactly when a frame is over the limit");
});

//! Framing on the byte stream: the crate's 8-byte packet header, whose
//! second word (reserved, zero, on the other datapaths) carries the length
//! of the message that follows.
//!
//! ```text
//!  ┌──────────────┬──────────────┬──────────── len bytes ────────────┐
//!  │ msg_id u32 LE│ len u32 LE   │ message                           │
//!  └──────────────┴──────────────┴───────────────────────────────────┘
//! ```
//!
//! Every header parses (both words are plain integers); a length above the
//! receiver's limit is the one way a header is bad, and it closes that
//! connection ([`TcpStats::bad_frames`](super::TcpStats::bad_frames)).

use crate::PACKET_HEADER_LEN;

/// Writes the frame header for a message of `len` bytes into the first
/// [`PACKET_HEADER_LEN`] bytes of `buf`.
///
/// # Panics
///
/// When `buf` is shorter than [`PACKET_HEADER_LEN`] or `len` exceeds
/// `u32::MAX` (the senders check the limit, far below, first).
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::tcp::{read_frame_header, write_frame_header};
///
/// let mut h = [0u8; 8];
/// write_frame_header(&mut h, 7, 513);
/// assert_eq!(read_frame_header(&h), Some((7, 513)));
/// ```
#[inline(always)]
pub fn write_frame_header(buf: &mut [u8], msg_id: u32, len: usize) {
    let len = u32::try_from(len).expect("frame length fits u32");
    buf[..4].copy_from_slice(&msg_id.to_le_bytes());
    buf[4..8].copy_from_slice(&len.to_le_bytes());
}

/// The message id and length from the first bytes of a frame; `None` when
/// fewer than [`PACKET_HEADER_LEN`] bytes are given. Never panics.
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::tcp::read_frame_header;
///
/// assert_eq!(read_frame_header(&[1, 0, 0, 0, 0, 1, 0, 0]), Some((1, 256)));
/// assert_eq!(read_frame_header(&[1, 0, 0]), None);
/// ```
#[inline(always)]
pub fn read_frame_header(bytes: &[u8]) -> Option<(u32, usize)> {
    let h: &[u8; PACKET_HEADER_LEN] = bytes.get(..PACKET_HEADER_LEN)?.try_into().ok()?;
    let id = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    Some((id, len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame header for message 0x0102_0304 of 0x0200 bytes, by hand.
    const HEADER_BYTES: [u8; 8] = [0x04, 0x03, 0x02, 0x01, 0x00, 0x02, 0x00, 0x00];

    #[test]
    fn header_bytes_round_trip() {
        assert_eq!(read_frame_header(&HEADER_BYTES), Some((0x0102_0304, 512)));
        let mut b = [0u8; 8];
        write_frame_header(&mut b, 0x0102_0304, 512);
        assert_eq!(b, HEADER_BYTES);
        for n in 0..8 {
            assert_eq!(read_frame_header(&HEADER_BYTES[..n]), None);
        }
        assert_eq!(read_frame_header(&[0xFF; 8]), Some((u32::MAX, u32::MAX as usize)));
    }
}

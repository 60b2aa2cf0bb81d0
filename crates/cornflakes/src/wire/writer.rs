use super::Layout;
use crate::field::CfBytes;

/// Writes one message into its first segment: object headers and tables
/// from the front, copied data after them, and offsets (but not bytes) for
/// zero-copy data after that. Created by [`Message::write_header_and_copies`].
///
/// Writes are bounds-checked slices of a buffer sized from the message's
/// [`Layout`]; a mismatch between layout and write is a bug in generated
/// code and panics rather than corrupting memory.
///
/// [`Message::write_header_and_copies`]: super::Message::write_header_and_copies
pub struct Writer<'b> {
    buf: &'b mut [u8],
    header_end: usize,
    copy_at: usize,
    zero_copy_at: usize,
}

impl<'b> Writer<'b> {
    pub(crate) fn new(buf: &'b mut [u8], layout: &Layout) -> Self {
        Writer { buf, header_end: 0, copy_at: layout.header_len, zero_copy_at: layout.first_segment_len() }
    }

    pub(crate) fn is_complete(&self, layout: &Layout) -> bool {
        self.header_end == layout.header_len
            && self.copy_at == layout.first_segment_len()
            && self.zero_copy_at == layout.total_len()
    }

    /// Reserves `len` bytes of header area and returns their offset.
    #[inline(always)]
    pub fn alloc_header(&mut self, len: usize) -> usize {
        let at = self.header_end;
        self.header_end += len;
        at
    }

    /// Writes the bitmap word count and words at `at`; returns the offset of
    /// the first entry.
    #[inline(always)]
    pub fn put_bitmap(&mut self, at: usize, words: &[u32]) -> usize {
        self.put_u32(at, words.len() as u32);
        let mut pos = at + 4;
        for &w in words {
            self.put_u32(pos, w);
            pos += 4;
        }
        pos
    }

    /// Writes one byte.
    #[inline(always)]
    pub fn put_u8(&mut self, at: usize, v: u8) {
        self.buf[at] = v;
    }

    /// Writes a little-endian u32.
    #[inline(always)]
    pub fn put_u32(&mut self, at: usize, v: u32) {
        self.buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Writes a little-endian u64.
    #[inline(always)]
    pub fn put_u64(&mut self, at: usize, v: u64) {
        self.buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// Writes a bytes entry (offset, length) at `entry`, copying the data
    /// into the copied area, or assigning it the next zero-copy offset.
    #[inline(always)]
    pub fn put_bytes(&mut self, entry: usize, field: &CfBytes<'_>) {
        // Selects rather than a match on the variant: in a list whose
        // elements are copied or not at random, branches here mispredict
        // often.
        let data = field.as_bytes();
        let len = data.len();
        let zero_copy = field.is_zero_copy();
        let copied = if zero_copy { 0 } else { len };
        let off = if zero_copy { self.zero_copy_at } else { self.copy_at };
        // The one branch left: a zero-copy field copies nothing (a masked
        // store of no bytes made lists of zero-copy fields 2-3 ns per field
        // slower in `benches/shapes.rs`).
        if !zero_copy {
            let at = self.copy_at;
            crate::mem::copy_short(&mut self.buf[at..at + copied], &data[..copied]);
        }
        self.copy_at += copied;
        self.zero_copy_at += len - copied;
        // One 8-byte store: offset in the low word, length in the high one.
        self.put_u64(entry, off as u64 | (len as u64) << 32);
    }
}

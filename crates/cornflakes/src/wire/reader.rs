use super::DecodeError;
use crate::field::{Arena, CfBytes};
use crate::mem::RcBuf;

/// Limits for decoding untrusted input (compare Cap'n Proto's
/// `ReaderOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Deepest nesting of objects accepted. Stops stack exhaustion through
    /// recursive schemas and self-referencing offsets. Default 64; values
    /// above [`MAX_DEPTH_CAP`] are treated as the cap, since each level
    /// takes a stack frame.
    pub max_depth: u32,
    /// Most bytes the decoder visits (object headers, list tables and
    /// bytes/string data), as a multiple of the input length. An honest
    /// encoder places each byte once, so 1 suffices; offsets that point back
    /// into visited headers or data fail instead of multiplying work and
    /// memory. Default 1.
    pub traversal_limit: usize,
    /// Most stack bytes a decode may use below the frame that started it,
    /// checked each time an object is entered (a nested message is one
    /// recursion). Frames differ by schema and build (a 41-field recursive
    /// message takes about 18 KiB per level in a debug build, measured by
    /// `cornflakes-tests/tests/stack_depth.rs`), so the depth counter alone
    /// cannot keep a decode inside a thread's stack; this can. Default
    /// 1 MiB: half of Rust's default 2 MiB thread stack, leaving a margin
    /// of more than 50 of the deepest frames we know (and a recursive
    /// 4-field message decodes more than 64 levels in debug builds). Exceeding it is
    /// [`DecodeError::TooDeep`] with the depth reached. (Not checked under
    /// Miri, whose locals have no stack addresses.)
    pub max_stack: usize,
}

/// The deepest nesting any decode accepts, whatever the options say.
pub const MAX_DEPTH_CAP: u32 = 1000;

impl Default for DecodeOptions {
    fn default() -> Self {
        Self { max_depth: 64, traversal_limit: 1, max_stack: 1024 * 1024 }
    }
}

/// Bounds-checked reads from a received message; driven by generated
/// `read_object` code.
pub struct Reader<'a> {
    buf: &'a [u8],
    pkt: Option<&'a RcBuf>,
    arena: &'a Arena,
    threshold: usize,
    depth: u32,
    max_depth: u32,
    budget: usize,
    limit: usize,
    /// Address of a local in the frame that created the reader.
    stack_base: usize,
    max_stack: usize,
}

/// The address of a local of the calling frame: where the stack is now.
#[inline(never)]
fn stack_position() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

impl<'a> Reader<'a> {
    /// A reader over `buf`; when `pkt` is the pool buffer `buf` lies in,
    /// long bytes fields become zero-copy references to it.
    pub fn new(buf: &'a [u8], pkt: Option<&'a RcBuf>, arena: &'a Arena, options: DecodeOptions) -> Self {
        let limit = buf.len().saturating_mul(options.traversal_limit).max(64);
        Reader {
            buf,
            pkt,
            arena,
            threshold: arena.threshold(),
            depth: 0,
            max_depth: options.max_depth.min(MAX_DEPTH_CAP),
            budget: limit,
            limit,
            stack_base: stack_position(),
            max_stack: options.max_stack,
        }
    }

    /// The arena decoded lists and nested messages go into.
    #[inline(always)]
    pub fn arena(&self) -> &'a Arena {
        self.arena
    }

    #[inline(always)]
    fn slice(&self, at: usize, len: usize) -> Result<&'a [u8], DecodeError> {
        match at.checked_add(len) {
            Some(end) if end <= self.buf.len() => Ok(&self.buf[at..end]),
            _ => Err(DecodeError::OutOfBounds { at: at as u64, need: len as u64, len: self.buf.len() }),
        }
    }

    #[inline(always)]
    fn charge(&mut self, bytes: usize) -> Result<(), DecodeError> {
        match self.budget.checked_sub(bytes) {
            Some(rest) => {
                self.budget = rest;
                Ok(())
            }
            None => Err(DecodeError::TraversalLimit(self.limit)),
        }
    }

    /// Reads one byte.
    ///
    /// # Errors
    ///
    /// [`DecodeError::OutOfBounds`] if the read falls outside the message.
    #[inline(always)]
    pub fn u8(&self, at: usize) -> Result<u8, DecodeError> {
        Ok(self.slice(at, 1)?[0])
    }

    /// Reads a bool byte, which must be 0 or 1.
    ///
    /// # Errors
    ///
    /// [`DecodeError::OutOfBounds`] if the byte lies outside the message,
    /// [`DecodeError::InvalidBool`] if it is neither 0 nor 1.
    #[inline(always)]
    pub fn bool(&self, at: usize) -> Result<bool, DecodeError> {
        match self.u8(at)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::InvalidBool { at, value }),
        }
    }

    /// Reads a little-endian u32.
    ///
    /// # Errors
    ///
    /// [`DecodeError::OutOfBounds`] if the read falls outside the message.
    #[inline(always)]
    pub fn u32(&self, at: usize) -> Result<u32, DecodeError> {
        let b = self.slice(at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a little-endian u64.
    ///
    /// # Errors
    ///
    /// [`DecodeError::OutOfBounds`] if the read falls outside the message.
    #[inline(always)]
    pub fn u64(&self, at: usize) -> Result<u64, DecodeError> {
        let b = self.slice(at, 8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("slice of 8")))
    }

    /// Reads a bytes entry (offset, length) at `entry` and returns the data:
    /// a zero-copy reference into the packet when at least the threshold
    /// long, else a borrowed slice. The length is charged to the traversal
    /// budget, so entries that all name the same bytes cannot make the
    /// decoded message (and anything that re-encodes or scans it) larger
    /// than the input.
    ///
    /// # Errors
    ///
    /// [`DecodeError::OutOfBounds`] if the entry or the data lies outside
    /// the message, [`DecodeError::TraversalLimit`] if the data exhausts the
    /// budget.
    #[inline]
    pub fn bytes(&mut self, entry: usize) -> Result<CfBytes<'a>, DecodeError> {
        let off = self.u32(entry)? as usize;
        let len = self.u32(entry + 4)? as usize;
        let data = self.slice(off, len)?;
        self.charge(len)?;
        if len >= self.threshold && len > 0 {
            if let Some(buf) = self.pkt.and_then(|p| p.slice_ref(data)) {
                return Ok(CfBytes::ZeroCopy(buf));
            }
        }
        Ok(CfBytes::Copied(data))
    }

    /// Reads a list entry (count, offset) at `entry` whose elements take
    /// `elem_len` bytes each; checks the table lies inside the message and
    /// charges it to the traversal budget. Returns (count, table offset).
    ///
    /// # Errors
    ///
    /// [`DecodeError::OutOfBounds`] if the entry or the table lies outside
    /// the message (or its size overflows), [`DecodeError::TraversalLimit`]
    /// if the table exhausts the budget.
    #[inline]
    pub fn table(&mut self, entry: usize, elem_len: usize) -> Result<(usize, usize), DecodeError> {
        let count = self.u32(entry)? as usize;
        let off = self.u32(entry + 4)? as usize;
        let bytes = count.checked_mul(elem_len).ok_or(DecodeError::OutOfBounds {
            at: off as u64,
            need: u64::MAX,
            len: self.buf.len(),
        })?;
        self.slice(off, bytes)?;
        self.charge(bytes)?;
        Ok((count, off))
    }

    /// Enters the object whose header starts at `at`: checks depth and
    /// bounds, copies the bitmap words this schema knows into `bitmap`
    /// (clearing bits of fields it does not know), and returns the offset of
    /// the first entry. Call [`Reader::leave_object`] when done.
    ///
    /// The header prefix is charged to the traversal budget at the larger of
    /// its length on the wire and the length this schema re-encodes it with
    /// (`bitmap.len()` words), so that a decoded message never re-encodes
    /// larger than the budget.
    ///
    /// # Errors
    ///
    /// [`DecodeError::TooDeep`] past the depth limit,
    /// [`DecodeError::OutOfBounds`] if the header prefix lies outside the
    /// message, [`DecodeError::TraversalLimit`] if it exhausts the budget.
    #[inline]
    pub fn enter_object(&mut self, at: usize, bitmap: &mut [u32], field_count: usize) -> Result<usize, DecodeError> {
        if self.depth >= self.max_depth {
            return Err(DecodeError::TooDeep(self.max_depth));
        }
        #[cfg(not(miri))]
        if stack_position().abs_diff(self.stack_base) > self.max_stack {
            return Err(DecodeError::TooDeep(self.depth));
        }
        self.depth += 1;
        let words = self.u32(at)? as usize;
        let prefix = words.checked_mul(4).and_then(|b| b.checked_add(4)).ok_or(DecodeError::OutOfBounds {
            at: at as u64,
            need: u64::MAX,
            len: self.buf.len(),
        })?;
        self.slice(at, prefix)?;
        self.charge(prefix.max(4 + 4 * bitmap.len()))?;
        let known = words.min(bitmap.len());
        for (i, word) in bitmap.iter_mut().enumerate() {
            *word = if i < known { self.u32(at + 4 + 4 * i)? } else { 0 };
        }
        // Bits past the schema's last field belong to newer schemas; their
        // entries follow ours and are skipped.
        if !field_count.is_multiple_of(32) {
            if let Some(last) = bitmap.last_mut() {
                *last &= (1u32 << (field_count % 32)) - 1;
            }
        }
        Ok(at + prefix)
    }

    /// Leaves the object entered last, whose entries (those this schema
    /// knows) occupy `start..end`: they are charged to the traversal budget,
    /// so that entries shared by several objects (offsets pointing at one
    /// header from many places) count each time they are decoded.
    ///
    /// # Errors
    ///
    /// [`DecodeError::TraversalLimit`] if the entries exhaust the budget.
    #[inline(always)]
    pub fn leave_object(&mut self, start: usize, end: usize) -> Result<(), DecodeError> {
        self.depth -= 1;
        self.charge(end.saturating_sub(start))
    }
}

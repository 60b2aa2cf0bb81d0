use super::Arena;
use crate::mem::RcBuf;

/// A `bytes` field: copied when the message is written, or sent zero-copy
/// as its own scatter-gather entry.
#[derive(Clone)]
pub enum CfBytes<'a> {
    /// Bytes copied into the first segment when the message is written.
    /// They are borrowed (from the caller, the arena or a received packet)
    /// until then.
    Copied(&'a [u8]),
    /// A reference to pool memory, posted as its own segment.
    ZeroCopy(RcBuf),
}

impl<'a> CfBytes<'a> {
    /// Applies the hybrid rule to `data`: zero-copy when it is at least the
    /// arena's threshold long and lies in the arena's pool, copy otherwise.
    #[inline(always)]
    pub fn new(data: &'a [u8], arena: &Arena) -> Self {
        if data.len() >= arena.threshold() {
            if let Some(buf) = arena.pool().and_then(|p| p.recover(data)) {
                return CfBytes::ZeroCopy(buf);
            }
        }
        CfBytes::Copied(data)
    }

    /// Like [`CfBytes::new`] for data that does not outlive the message:
    /// a value that is not sent zero-copy is first copied into the arena.
    #[inline]
    pub fn copy_in(data: &[u8], arena: &'a Arena) -> Self {
        if data.len() >= arena.threshold() {
            if let Some(buf) = arena.pool().and_then(|p| p.recover(data)) {
                return CfBytes::ZeroCopy(buf);
            }
        }
        CfBytes::Copied(arena.bump().alloc_slice_copy(data))
    }

    /// Applies the hybrid rule to a buffer the caller already holds: it is
    /// kept as a zero-copy reference when long enough, else copied into the
    /// arena.
    #[inline]
    pub fn from_rcbuf(buf: RcBuf, arena: &'a Arena) -> Self {
        if buf.len() >= arena.threshold() && !buf.is_empty() {
            CfBytes::ZeroCopy(buf)
        } else {
            CfBytes::Copied(arena.bump().alloc_slice_copy(&buf))
        }
    }

    /// An empty field.
    pub const fn empty() -> Self {
        CfBytes::Copied(&[])
    }

    /// The bytes.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            CfBytes::Copied(b) => b,
            CfBytes::ZeroCopy(b) => b.as_slice(),
        }
    }

    /// Length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        match self {
            CfBytes::Copied(b) => b.len(),
            CfBytes::ZeroCopy(b) => b.len(),
        }
    }

    /// Whether the field is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the field will be sent as its own scatter-gather entry.
    #[inline(always)]
    pub fn is_zero_copy(&self) -> bool {
        matches!(self, CfBytes::ZeroCopy(_))
    }
}

impl Default for CfBytes<'_> {
    fn default() -> Self {
        CfBytes::empty()
    }
}

impl std::ops::Deref for CfBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for CfBytes<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CfBytes<'_> {}

impl std::fmt::Debug for CfBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_zero_copy() { "ZeroCopy" } else { "Copied" };
        write!(f, "{kind}({} bytes)", self.len())
    }
}

/// A `string` field: a [`CfBytes`] whose UTF-8 is checked only when it is
/// read as `&str` ([`CfString::as_str`]), never while decoding.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CfString<'a>(CfBytes<'a>);

impl<'a> CfString<'a> {
    /// Applies the hybrid rule to `s` (see [`CfBytes::new`]).
    #[inline]
    pub fn new(s: &'a str, arena: &Arena) -> Self {
        CfString(CfBytes::new(s.as_bytes(), arena))
    }

    /// Like [`CfString::new`], copying into the arena when not zero-copy.
    #[inline]
    pub fn copy_in(s: &str, arena: &'a Arena) -> Self {
        CfString(CfBytes::copy_in(s.as_bytes(), arena))
    }

    /// Wraps bytes that have not been checked to be UTF-8 (as decoded).
    #[inline(always)]
    pub fn from_unchecked_bytes(bytes: CfBytes<'a>) -> Self {
        CfString(bytes)
    }

    /// The string, after checking that it is UTF-8.
    pub fn as_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(self.0.as_bytes())
    }

    /// The raw bytes, unchecked.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The field as bytes.
    #[inline(always)]
    pub fn as_cf_bytes(&self) -> &CfBytes<'a> {
        &self.0
    }

    /// Length in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the string is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the field will be sent as its own scatter-gather entry.
    pub fn is_zero_copy(&self) -> bool {
        self.0.is_zero_copy()
    }
}

impl std::fmt::Debug for CfString<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.as_str() {
            Ok(s) if s.len() <= 64 => write!(f, "{s:?}"),
            _ => write!(f, "{:?}", self.0),
        }
    }
}

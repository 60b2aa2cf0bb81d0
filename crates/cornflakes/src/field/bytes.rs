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
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::new(&pool);
    /// let in_pool = pool.alloc_copy(&[1u8; 1024]).unwrap();
    /// assert!(CfBytes::new(&in_pool, &arena).is_zero_copy());
    /// assert!(!CfBytes::new(&in_pool[..100], &arena).is_zero_copy()); // short
    /// assert!(!CfBytes::new(&[1u8; 1024], &arena).is_zero_copy()); // not in the pool
    /// ```
    #[inline(always)]
    pub fn new(data: &'a [u8], arena: &Arena) -> Self {
        if data.len() >= arena.threshold() {
            if let Some(buf) = arena.pool().and_then(|p| p.recover(data)) {
                return CfBytes::ZeroCopy(buf);
            }
        }
        crate::mem::prefetch(data);
        CfBytes::Copied(data)
    }

    /// Like [`CfBytes::new`] for data that does not outlive the message:
    /// a value that is not sent zero-copy is first copied into the arena.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes};
    /// let arena = Arena::copying();
    /// let field = {
    ///     let temporary = String::from("dropped before the field");
    ///     CfBytes::copy_in(temporary.as_bytes(), &arena)
    /// };
    /// assert_eq!(&*field, b"dropped before the field");
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::new(&pool);
    /// assert!(CfBytes::from_rcbuf(pool.alloc_copy(&[0u8; 600]).unwrap(), &arena).is_zero_copy());
    /// assert!(!CfBytes::from_rcbuf(pool.alloc_copy(b"short").unwrap(), &arena).is_zero_copy());
    /// ```
    #[inline]
    pub fn from_rcbuf(buf: RcBuf, arena: &'a Arena) -> Self {
        if buf.len() >= arena.threshold() && !buf.is_empty() {
            CfBytes::ZeroCopy(buf)
        } else {
            CfBytes::Copied(arena.bump().alloc_slice_copy(&buf))
        }
    }

    /// An empty field (what an unset field holds).
    ///
    /// # Examples
    ///
    /// ```
    /// let field = cornflakes::CfBytes::empty();
    /// assert!(field.is_empty() && !field.is_zero_copy());
    /// ```
    pub const fn empty() -> Self {
        CfBytes::Copied(&[])
    }

    /// The bytes, wherever they live.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes};
    /// let arena = Arena::copying();
    /// assert_eq!(CfBytes::new(b"abc", &arena).as_bytes(), b"abc");
    /// ```
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            CfBytes::Copied(b) => b,
            CfBytes::ZeroCopy(b) => b.as_slice(),
        }
    }

    /// Length in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes};
    /// let arena = Arena::copying();
    /// assert_eq!(CfBytes::new(b"abc", &arena).len(), 3);
    /// ```
    #[inline(always)]
    pub fn len(&self) -> usize {
        match self {
            CfBytes::Copied(b) => b.len(),
            CfBytes::ZeroCopy(b) => b.len(),
        }
    }

    /// Whether the field is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(cornflakes::CfBytes::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the field will be sent as its own scatter-gather entry.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::new(&pool);
    /// let value = pool.alloc_copy(&[0u8; 512]).unwrap();
    /// assert!(CfBytes::new(&value, &arena).is_zero_copy()); // at the threshold
    /// assert!(!CfBytes::new(&value[..511], &arena).is_zero_copy());
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString};
    /// let arena = Arena::copying();
    /// assert_eq!(CfString::new("user:42", &arena).as_str(), Ok("user:42"));
    /// ```
    #[inline]
    pub fn new(s: &'a str, arena: &Arena) -> Self {
        CfString(CfBytes::new(s.as_bytes(), arena))
    }

    /// Like [`CfString::new`], copying into the arena when not zero-copy.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString};
    /// let arena = Arena::copying();
    /// let key = CfString::copy_in(&format!("user:{}", 42), &arena);
    /// assert_eq!(key.as_str(), Ok("user:42"));
    /// ```
    #[inline]
    pub fn copy_in(s: &str, arena: &'a Arena) -> Self {
        CfString(CfBytes::copy_in(s.as_bytes(), arena))
    }

    /// Applies the hybrid rule to a pool buffer holding text (see
    /// [`CfBytes::from_rcbuf`]): adopted as a zero-copy reference when at
    /// least the threshold long, else copied into the arena. UTF-8 is not
    /// checked here; [`CfString::as_str`] checks.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::new(&pool);
    /// let s = CfString::from_rcbuf(pool.alloc_copy(b"user:42").unwrap(), &arena);
    /// assert_eq!(s.as_str(), Ok("user:42"));
    /// assert!(!s.is_zero_copy());
    /// ```
    #[inline]
    pub fn from_rcbuf(buf: RcBuf, arena: &'a Arena) -> Self {
        CfString(CfBytes::from_rcbuf(buf, arena))
    }

    /// Wraps bytes that have not been checked to be UTF-8 (as decoded).
    /// Nothing is checked here; [`CfString::as_str`] checks.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes, CfString};
    /// let arena = Arena::copying();
    /// let s = CfString::from_unchecked_bytes(CfBytes::new(&[0xff], &arena));
    /// assert!(s.as_str().is_err());
    /// ```
    #[inline(always)]
    pub fn from_unchecked_bytes(bytes: CfBytes<'a>) -> Self {
        CfString(bytes)
    }

    /// The string, after checking that it is UTF-8.
    ///
    /// # Errors
    ///
    /// The [`Utf8Error`](std::str::Utf8Error) of the check when the bytes
    /// (for example as received from a peer) are not UTF-8.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes, CfString};
    /// let arena = Arena::copying();
    /// assert_eq!(CfString::new("héllo", &arena).as_str(), Ok("héllo"));
    /// let bad = CfString::from_unchecked_bytes(CfBytes::new(b"\xc3(", &arena));
    /// assert_eq!(bad.as_str().unwrap_err().valid_up_to(), 0);
    /// ```
    pub fn as_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(self.0.as_bytes())
    }

    /// The raw bytes, unchecked.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString};
    /// let arena = Arena::copying();
    /// assert_eq!(CfString::new("abc", &arena).as_bytes(), b"abc");
    /// ```
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The field as bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString};
    /// let arena = Arena::copying();
    /// let s = CfString::new("abc", &arena);
    /// assert_eq!(s.as_cf_bytes().len(), 3);
    /// ```
    #[inline(always)]
    pub fn as_cf_bytes(&self) -> &CfBytes<'a> {
        &self.0
    }

    /// Length in bytes (not characters).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString};
    /// let arena = Arena::copying();
    /// assert_eq!(CfString::new("héllo", &arena).len(), 6);
    /// ```
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the string is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(cornflakes::CfString::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the field will be sent as its own scatter-gather entry.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::new(&pool);
    /// let text = pool.alloc_copy("x".repeat(1000).as_bytes()).unwrap();
    /// let long = std::str::from_utf8(&text).unwrap();
    /// assert!(CfString::new(long, &arena).is_zero_copy());
    /// ```
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

use bumpalo::Bump;

use crate::mem::Pool;

/// The zero-copy threshold the paper measured on its hardware: fields of at
/// least 512 bytes are sent zero-copy.
pub const DEFAULT_THRESHOLD: usize = 512;
/// Threshold that copies every field ("only copy" in the paper's ablations).
pub const ONLY_COPY: usize = usize::MAX;
/// Threshold that sends every non-empty pool-resident field zero-copy
/// ("only scatter-gather").
pub const ONLY_ZERO_COPY: usize = 0;

/// Per-request memory for messages: a bump arena for lists, nested
/// messages and copied values, plus the policy deciding copy versus
/// zero-copy: the pool whose memory may be referenced, and the threshold.
///
/// Reuse one arena per request loop and [`reset`](Arena::reset) it between
/// requests; that frees every allocation at once.
///
/// # Examples
///
/// ```
/// use cornflakes::{Arena, Pool, CfBytes};
/// let pool = Pool::new().unwrap();
/// let arena = Arena::new(&pool);
/// let big = pool.alloc_copy(&[1u8; 4096]).unwrap();
/// assert!(CfBytes::new(&big, &arena).is_zero_copy());
/// assert!(!CfBytes::new(b"small", &arena).is_zero_copy());
/// ```
pub struct Arena {
    bump: Bump,
    pool: Option<Pool>,
    threshold: usize,
}

impl Arena {
    /// An arena whose fields may reference `pool`, with the paper's
    /// threshold of 512 bytes, whatever the machine: code and tests behave
    /// the same everywhere. Servers that want this machine's measured
    /// threshold use [`Arena::calibrated`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{field::DEFAULT_THRESHOLD, Arena, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::new(&pool);
    /// assert_eq!(arena.threshold(), DEFAULT_THRESHOLD);
    /// assert!(arena.pool().is_some());
    /// ```
    pub fn new(pool: &Pool) -> Self {
        Self::with_threshold(Some(pool), DEFAULT_THRESHOLD)
    }

    /// An arena whose fields may reference `pool`, with this machine's
    /// threshold: the one `cf calibrate` measured and wrote, or the paper's
    /// 512 bytes when there is none (see
    /// [`machine_threshold`](super::machine_threshold) for where it is
    /// looked up and how to override it).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{field::machine_threshold, Arena, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::calibrated(&pool);
    /// assert_eq!(arena.threshold(), machine_threshold().default);
    /// ```
    pub fn calibrated(pool: &Pool) -> Self {
        Self::with_threshold(Some(pool), super::machine_threshold().default)
    }

    /// An arena with an explicit threshold: [`ONLY_COPY`],
    /// [`ONLY_ZERO_COPY`] or any size. With no pool, every field is copied.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{field::ONLY_ZERO_COPY, Arena, CfBytes, Pool};
    /// let pool = Pool::new().unwrap();
    /// let arena = Arena::with_threshold(Some(&pool), ONLY_ZERO_COPY);
    /// let small = pool.alloc_copy(b"eight by").unwrap();
    /// assert!(CfBytes::new(&small, &arena).is_zero_copy());
    /// ```
    pub fn with_threshold(pool: Option<&Pool>, threshold: usize) -> Self {
        Self { bump: Bump::new(), pool: pool.cloned(), threshold }
    }

    /// An arena that copies every field (no pool memory is referenced).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes};
    /// let arena = Arena::copying();
    /// assert!(arena.pool().is_none());
    /// assert!(!CfBytes::new(&[0u8; 8192], &arena).is_zero_copy());
    /// ```
    pub fn copying() -> Self {
        Self::with_threshold(None, ONLY_COPY)
    }

    /// Fields at least this long (and in the pool) go zero-copy.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{field::ONLY_COPY, Arena};
    /// assert_eq!(Arena::copying().threshold(), ONLY_COPY);
    /// ```
    #[inline(always)]
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Changes the threshold for fields set from now on; fields already
    /// set keep their choice.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes, Pool};
    /// let pool = Pool::new().unwrap();
    /// let value = pool.alloc_copy(&[1u8; 100]).unwrap();
    /// let mut arena = Arena::new(&pool);
    /// assert!(!CfBytes::new(&value, &arena).is_zero_copy()); // 100 < 512
    /// arena.set_threshold(64);
    /// assert!(CfBytes::new(&value, &arena).is_zero_copy());
    /// ```
    pub fn set_threshold(&mut self, threshold: usize) {
        self.threshold = threshold;
    }

    /// The pool zero-copy fields may reference (none for a copying arena).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, Pool};
    /// let pool = Pool::new().unwrap();
    /// assert!(Arena::new(&pool).pool().is_some());
    /// assert!(Arena::copying().pool().is_none());
    /// ```
    #[inline(always)]
    pub fn pool(&self) -> Option<&Pool> {
        self.pool.as_ref()
    }

    /// The bump allocator behind lists, nested messages and copies.
    #[inline(always)]
    pub(crate) fn bump(&self) -> &Bump {
        &self.bump
    }

    /// Frees every allocation made in the arena. Needs `&mut`, so no
    /// message built in it can still be alive.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes};
    /// let mut arena = Arena::copying();
    /// for request in [&b"first"[..], b"second"] {
    ///     let field = CfBytes::copy_in(request, &arena); // copied into the arena
    ///     assert_eq!(&*field, request);
    ///     drop(field);
    ///     arena.reset(); // the next request reuses the memory
    /// }
    /// ```
    pub fn reset(&mut self) {
        self.bump.reset();
    }

    /// Bytes the arena has taken from the system allocator (kept across
    /// [`reset`](Arena::reset) for reuse).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfBytes};
    /// let arena = Arena::copying();
    /// let before = arena.allocated_bytes();
    /// let _field = CfBytes::copy_in(&[0u8; 4096], &arena);
    /// assert!(arena.allocated_bytes() >= before + 4096);
    /// ```
    pub fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena").field("threshold", &self.threshold).field("pool", &self.pool.is_some()).finish()
    }
}

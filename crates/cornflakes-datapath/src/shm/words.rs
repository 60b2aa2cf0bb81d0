//! A page of atomic words shared by the processes of one family: created
//! before `fork`, it is the same memory in the parent and every child.
//! The drop-in socket layer keeps there what forked processes sharing one
//! connection must agree on (who holds an end now, where it stands).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

use super::sys::{self, Mapping, Populate};

const PAGE: usize = 4096;
/// Words of one page.
pub const WORDS_PER_PAGE: usize = PAGE / 8;

/// `len` atomic words in a shared mapping of a sealed memfd.
///
/// Every process that inherits the mapping may write the words at any
/// time, so they are only ever reached as atomics.
///
/// # Examples
///
/// ```
/// use cornflakes_datapath::shm::words::SharedWords;
/// use std::sync::atomic::Ordering;
///
/// let w = SharedWords::create(4).unwrap();
/// w.word(3).store(7, Ordering::Relaxed);
/// assert_eq!(w.word(3).load(Ordering::Relaxed), 7);
/// assert_eq!(w.word(0).load(Ordering::Relaxed), 0); // zeroed
/// ```
#[derive(Debug)]
pub struct SharedWords {
    map: Mapping,
    fd: OwnedFd,
    len: usize,
}

// The mapping is owned outright.
// SAFETY: it is reached only through atomics, which any thread may use.
unsafe impl Send for SharedWords {}
// SAFETY: as above: `&self` gives out only `&AtomicU64`.
unsafe impl Sync for SharedWords {}

impl SharedWords {
    /// A new zeroed mapping of `len` words (1 to [`WORDS_PER_PAGE`]),
    /// inherited by children forked later.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a `len` out of range; the `memfd_create` or `mmap`
    /// error.
    pub fn create(len: usize) -> io::Result<Self> {
        if len == 0 || len > WORDS_PER_PAGE {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "1 to 512 shared words"));
        }
        let fd = sys::create_sealed_memfd("cornflakes-words", PAGE)?;
        let map = Mapping::map(fd.as_fd(), PAGE, true, Populate::Always)?;
        Ok(Self { map, fd, len })
    }

    /// Maps the words of another process's [`SharedWords`] from its memfd
    /// (passed through `exec` or a Unix socket); `len` words are used.
    ///
    /// # Errors
    ///
    /// `InvalidInput` when the file is not a sealed page (so it could
    /// shrink under us) or `len` is out of range; the `mmap` error.
    pub fn attach(fd: OwnedFd, len: usize) -> io::Result<Self> {
        if len == 0 || len > WORDS_PER_PAGE {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "1 to 512 shared words"));
        }
        if !sys::is_shrink_sealed(fd.as_fd()) || sys::file_size(fd.as_fd())? != PAGE as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a sealed page of shared words"));
        }
        let map = Mapping::map(fd.as_fd(), PAGE, true, Populate::Always)?;
        Ok(Self { map, fd, len })
    }

    /// Moves the memfd's descriptor to the lowest free number at or above
    /// `floor` (close-on-exec), as [`RingProducer::move_memfd_above`]
    /// does.
    ///
    /// [`RingProducer::move_memfd_above`]: super::RingProducer::move_memfd_above
    ///
    /// # Errors
    ///
    /// The `fcntl(F_DUPFD_CLOEXEC)` error; the descriptor is then unchanged.
    pub fn move_memfd_above(&mut self, floor: i32) -> io::Result<()> {
        self.fd = rustix::io::fcntl_dupfd_cloexec(&self.fd, floor)?;
        Ok(())
    }

    /// The memfd behind the words.
    pub fn memfd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no words (never: `create` refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Word `i`.
    ///
    /// # Panics
    ///
    /// When `i >= len()`.
    #[inline(always)]
    pub fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len, "shared word {i} of {}", self.len);
        // The mapping is a page long, page aligned and lives as long as
        // `self`; other processes may write it, which an atomic allows.
        // SAFETY: word `i` (i < len <= 512) lies inside it, 8-aligned.
        unsafe { &*self.map.ptr().as_ptr().cast::<AtomicU64>().add(i) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn out_of_range_sizes_are_refused() {
        assert!(SharedWords::create(0).is_err());
        assert!(SharedWords::create(WORDS_PER_PAGE + 1).is_err());
        let w = SharedWords::create(WORDS_PER_PAGE).unwrap();
        w.word(WORDS_PER_PAGE - 1).fetch_add(1, Ordering::Relaxed);
        assert_eq!(w.word(WORDS_PER_PAGE - 1).load(Ordering::Relaxed), 1);
    }

    #[test]
    fn attached_words_are_the_same_memory() {
        let a = SharedWords::create(8).unwrap();
        let b = SharedWords::attach(a.memfd().try_clone_to_owned().unwrap(), 8).unwrap();
        a.word(5).store(42, Ordering::Relaxed);
        assert_eq!(b.word(5).load(Ordering::Relaxed), 42);
        // A file that is not a sealed page is refused.
        let f = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&f, 4096).unwrap();
        assert!(SharedWords::attach(f, 8).is_err());
    }

    #[test]
    #[should_panic(expected = "shared word 2 of 2")]
    fn a_word_past_the_end_panics() {
        let _ = SharedWords::create(2).unwrap().word(2);
    }
}

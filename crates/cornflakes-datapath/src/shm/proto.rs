//! What two [`ShmDatapath`](super::ShmDatapath) processes say to each other:
//! the hello exchanged over the Unix socket at set-up, and the layout of a
//! message record in a ring. Public so that tools and tests can play a
//! (possibly hostile) peer; applications do not need it.
//!
//! # Hello
//!
//! Each side sends one [`HELLO_LEN`]-byte hello (little-endian) with two
//! descriptors attached (`SCM_RIGHTS`): the memfd of the ring it will
//! *consume* (created and sealed by itself), then its pool's memfd
//! ([`Pool::backing_fd`](cornflakes::Pool::backing_fd)), which the peer maps
//! read-only to gather zero-copy segments. Both sides send first and then
//! read, so the exchange cannot deadlock. `flags` holds
//! [`HELLO_ACCEPTS_RETURNS`] or nothing.
//!
//! ```text
//! 0        8        12       16            24             32     36       64
//! │ magic  │version │ flags  │ ring_size   │ max_message  │ pid  │ zero … │
//! ```
//!
//! # Message record
//!
//! The body of a ring record (see [`ring`](super::ring)) whose info word
//! has `n = info & INFO_DESC_MASK` descriptors:
//!
//! ```text
//! ┌─────────────────────────┬───────────────┬────────────────┬─────────────────┐
//! │ n descriptors (16 B)    │ packet header │ first segment  │ inline segments │
//! │ offset u64│len u32│kind │ msg id│ 0     │ (header+copies)│ (kind INLINE)   │
//! └─────────────────────────┴───────────────┴────────────────┴─────────────────┘
//! ```
//!
//! The message the receiver delivers is the first segment followed by each
//! descriptor's bytes, in order. A [`DESC_POOL`] descriptor names
//! `len` bytes at `offset` in the sender's pool memfd; a [`DESC_INLINE`]
//! one (offset 0) takes the next `len` bytes of the inline area at the end
//! of the body (segments that were not in the sender's pool). The first
//! segment's length is what remains: body length less descriptors less
//! inline bytes. [`INFO_NEEDS_ACK`] marks records with pool descriptors:
//! the receiver counts them and publishes the count in the ring's
//! acknowledgement word once it has copied them, which completes the sends.
//!
//! A [`DESC_RETURN`] descriptor names `len` bytes at `offset` in the
//! *receiver's* own pool: a value the receiver sent and the sender,
//! receiving in place, answers with by reference (an echo). It is sent only
//! to a peer whose hello set [`HELLO_ACCEPTS_RETURNS`], and only while the
//! sender still holds the lease on the record that brought the value, so
//! the receiver has not had that record acknowledged yet. Such a receiver
//! releases an acknowledged send only once it has consumed every record
//! the peer published before the acknowledgement, so a returned value is
//! still its own when it arrives; it finds the value in its pool in O(1)
//! and refuses (drops, counts) a range that is not a live buffer of it.

use crate::PACKET_HEADER_LEN;

/// Bytes of a hello.
pub const HELLO_LEN: usize = 64;
/// Hello magic.
pub const HELLO_MAGIC: u64 = u64::from_le_bytes(*b"CFKSHELO");
/// Protocol version: 2 since the hello's `flags` and [`DESC_RETURN`]
/// descriptors (version 1 had neither). Peers of different versions refuse
/// each other at set-up ([`ShmError::Version`](super::ShmError::Version)).
pub const VERSION: u32 = 2;

/// Bytes of one descriptor.
pub const DESC_LEN: usize = 16;
/// Descriptor kind: bytes in the sender's pool memfd.
pub const DESC_POOL: u32 = 0;
/// Descriptor kind: bytes inline at the end of the record.
pub const DESC_INLINE: u32 = 1;
/// Descriptor kind: bytes in the *receiver's* shared pool, returned by
/// reference (see the module docs).
pub const DESC_RETURN: u32 = 2;
/// Hello flag: this side accepts [`DESC_RETURN`] descriptors.
pub const HELLO_ACCEPTS_RETURNS: u32 = 1;
/// Every hello flag a valid hello may set.
pub const HELLO_VALID_FLAGS: u32 = HELLO_ACCEPTS_RETURNS;
/// Most descriptors in one record (segments beyond the first).
pub const MAX_SEGMENTS: usize = 64;
/// Bits of a record's info word holding the descriptor count.
pub const INFO_DESC_MASK: u32 = 0xFF;
/// Info bit: the record holds pool descriptors and must be acknowledged.
pub const INFO_NEEDS_ACK: u32 = 1 << 8;
/// Every info bit a valid record may set.
pub const INFO_VALID_BITS: u32 = INFO_DESC_MASK | INFO_NEEDS_ACK;

const _: () = assert!(MAX_SEGMENTS as u32 <= INFO_DESC_MASK);
const _: () = assert!(PACKET_HEADER_LEN == 8);

/// The set-up message each side sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Data size of the ring the sender consumes (its memfd is attached).
    pub ring_size: u64,
    /// Largest message (payload) the sender accepts.
    pub max_message: u64,
    /// The sender's process id (diagnostics only).
    pub pid: u32,
    /// [`HELLO_ACCEPTS_RETURNS`] or 0.
    pub flags: u32,
}

impl Hello {
    /// The wire bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::proto::{Hello, HELLO_LEN};
    ///
    /// let bytes = Hello { ring_size: 1 << 20, max_message: 4096, pid: 1, flags: 0 }.encode();
    /// assert_eq!((bytes.len(), &bytes[..8]), (HELLO_LEN, &b"CFKSHELO"[..]));
    /// ```
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..8].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.ring_size.to_le_bytes());
        b[24..32].copy_from_slice(&self.max_message.to_le_bytes());
        b[32..36].copy_from_slice(&self.pid.to_le_bytes());
        b
    }

    /// Parses a hello (untrusted bytes from the peer).
    ///
    /// Returns `None` for a wrong magic or version, unknown flags, or any
    /// non-zero reserved byte (36 to 63): every accepted hello is exactly
    /// the [`encode`](Self::encode)ing of its fields, so the reserved bytes
    /// stay free for a later version to use.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::proto::Hello;
    ///
    /// let h = Hello { ring_size: 1 << 20, max_message: 4096, pid: 7, flags: 0 };
    /// assert_eq!(Hello::decode(&h.encode()), Some(h));
    /// let mut reserved = h.encode();
    /// reserved[59] = 10;
    /// assert_eq!(Hello::decode(&reserved), None);
    /// ```
    pub fn decode(b: &[u8; HELLO_LEN]) -> Option<Self> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let flags = u32_at(12);
        if u64_at(0) != HELLO_MAGIC || u32_at(8) != VERSION || flags & !HELLO_VALID_FLAGS != 0 {
            return None;
        }
        if b[36..].iter().any(|&x| x != 0) {
            return None;
        }
        Some(Self { ring_size: u64_at(16), max_message: u64_at(24), pid: u32_at(32), flags })
    }

    /// The protocol version a hello claims, if it is a Cornflakes hello at
    /// all (right magic): what tells a peer of another build apart from
    /// garbage.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::proto::{Hello, VERSION};
    ///
    /// let mut b = Hello { ring_size: 1 << 20, max_message: 4096, pid: 7, flags: 0 }.encode();
    /// assert_eq!(Hello::version(&b), Some(VERSION));
    /// b[8] = 1;
    /// assert_eq!((Hello::version(&b), Hello::decode(&b)), (Some(1), None));
    /// assert_eq!(Hello::version(&[0; 64]), None);
    /// ```
    pub fn version(b: &[u8; HELLO_LEN]) -> Option<u32> {
        let magic = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        (magic == HELLO_MAGIC).then(|| u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")))
    }
}

/// One descriptor, as copied out of shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// Offset in the sender's pool memfd ([`DESC_POOL`]), in the
    /// receiver's ([`DESC_RETURN`]), or 0 ([`DESC_INLINE`]).
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
    /// [`DESC_POOL`], [`DESC_INLINE`] or [`DESC_RETURN`].
    pub kind: u32,
}

impl Desc {
    /// Writes the descriptor into the first [`DESC_LEN`] bytes of `buf`.
    ///
    /// # Panics
    ///
    /// When `buf` is shorter than [`DESC_LEN`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes_datapath::shm::proto::{Desc, DESC_LEN, DESC_POOL};
    ///
    /// let d = Desc { offset: 4096, len: 100, kind: DESC_POOL };
    /// let mut raw = [0u8; DESC_LEN];
    /// d.encode(&mut raw);
    /// assert_eq!(Desc::decode(&raw), d);
    /// ```
    #[inline(always)]
    pub fn encode(&self, buf: &mut [u8]) {
        buf[0..8].copy_from_slice(&self.offset.to_le_bytes());
        buf[8..12].copy_from_slice(&self.len.to_le_bytes());
        buf[12..16].copy_from_slice(&self.kind.to_le_bytes());
    }

    /// Reads a descriptor (any bytes are a descriptor; the receiver checks
    /// its kind, offset and length).
    ///
    /// # Examples
    ///
    /// See [`encode`](Self::encode).
    #[inline(always)]
    pub fn decode(buf: &[u8; DESC_LEN]) -> Self {
        Self {
            offset: u64::from_le_bytes(buf[0..8].try_into().expect("8 bytes")),
            len: u32::from_le_bytes(buf[8..12].try_into().expect("4 bytes")),
            kind: u32::from_le_bytes(buf[12..16].try_into().expect("4 bytes")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `shm_hello` fuzz target (minimized): a hello whose
    /// reserved byte 59 is 10 was accepted, and so was not the encoding of
    /// its fields. Reserved bytes must be zero.
    const RESERVED_BYTE_SET: [u8; HELLO_LEN] = {
        let mut b = [0u8; HELLO_LEN];
        let magic = *b"CFKSHELO";
        let mut i = 0;
        while i < 8 {
            b[i] = magic[i];
            i += 1;
        }
        b[8] = VERSION as u8;
        b[59] = 10;
        b
    };

    #[test]
    fn hello_with_a_reserved_byte_set_is_refused() {
        assert_eq!(Hello::decode(&RESERVED_BYTE_SET), None);
        let mut clean = RESERVED_BYTE_SET;
        clean[59] = 0;
        assert_eq!(Hello::decode(&clean), Some(Hello { ring_size: 0, max_message: 0, pid: 0, flags: 0 }));
        for i in 36..HELLO_LEN {
            let mut b = clean;
            b[i] = 1;
            assert_eq!(Hello::decode(&b), None, "reserved byte {i}");
        }
    }

    #[test]
    fn hello_and_desc_round_trip() {
        let h = Hello { ring_size: 1 << 20, max_message: 4096, pid: 7, flags: HELLO_ACCEPTS_RETURNS };
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        let mut bad = h.encode();
        bad[12] = 2;
        assert_eq!(Hello::decode(&bad), None);
        let d = Desc { offset: 1 << 40, len: 99, kind: DESC_INLINE };
        let mut b = [0u8; DESC_LEN];
        d.encode(&mut b);
        assert_eq!(Desc::decode(&b), d);
    }
}

//! The Cornflakes wire format and the interface a transmit path drives.
//!
//! The byte-level specification, with a worked example, is
//! `docs/wire-format.md`; in brief (all little-endian, offsets absolute from
//! the start of the message):
//!
//! ```text
//! ┌────────────────────────── header area ──────────────────────────┬─ copied ─┬─ zero-copy ─┐
//! │ W │ bitmap[W] │ entries of present fields │ tables, nested headers │  data    │ data        │
//! └─────────────────────────────────────────────────────────────────┴──────────┴─────────────┘
//!   first segment: header area + copied data            one segment per zero-copy field
//! ```
//!
//! # Contract
//!
//! Encoding ([`Message::layout`], [`Message::write_header_and_copies`],
//! [`Message::for_each_zero_copy`]) never allocates and never fails once the
//! caller's buffer is at least [`Layout::first_segment_len`] long.
//!
//! Decoding ([`Message::deserialize`], [`Message::deserialize_from_slice`])
//! accepts untrusted input: every offset, length, count and depth is
//! checked, and a malformed message yields a [`DecodeError`], never a panic
//! or an out-of-bounds read. Allocation is bounded by a constant times the
//! input length: each list's table must fit in the input, and the total of
//! headers, tables and field data visited may not exceed the input length
//! ([`DecodeOptions::traversal_limit`]), so offsets that point back into
//! already-visited headers or data cannot multiply the work, and a decoded
//! message is never larger than what was received.

// What generated code drives (field entries, object headers, the bounded
// reader and the writer) is reachable only through `crate::__private`.
pub(crate) mod field;
pub(crate) mod object;
mod owned;
pub(crate) mod reader;
pub(crate) mod writer;

pub use owned::PacketOwner;
pub use reader::{DecodeOptions, MAX_DEPTH_CAP};

use object::MessageImpl;
use reader::Reader;
use writer::Writer;

use crate::field::Arena;
use crate::mem::RcBuf;

/// Sizes of a serialized message, computed in one pass before writing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of all object headers, list tables and nested headers.
    pub header_len: usize,
    /// Bytes of copied field data.
    pub copy_len: usize,
    /// Bytes of zero-copy field data.
    pub zero_copy_len: usize,
    /// Number of zero-copy fields (scatter-gather entries beyond the first).
    pub zero_copy_entries: usize,
}

impl Layout {
    /// Length of the first segment: header area plus copied data.
    ///
    /// # Examples
    ///
    /// ```
    /// let layout = cornflakes::Layout { header_len: 24, copy_len: 7, zero_copy_len: 4096, zero_copy_entries: 1 };
    /// assert_eq!(layout.first_segment_len(), 31);
    /// ```
    #[inline(always)]
    pub fn first_segment_len(&self) -> usize {
        self.header_len + self.copy_len
    }

    /// Length of the whole serialized message.
    ///
    /// # Examples
    ///
    /// ```
    /// let layout = cornflakes::Layout { header_len: 24, copy_len: 7, zero_copy_len: 4096, zero_copy_entries: 1 };
    /// assert_eq!(layout.total_len(), 4127);
    /// ```
    #[inline(always)]
    pub fn total_len(&self) -> usize {
        self.header_len + self.copy_len + self.zero_copy_len
    }
}

/// Why a message could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The caller's buffer is shorter than the bytes to write.
    #[error("buffer of {have} bytes is too small: the message needs {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes provided.
        have: usize,
    },
    /// Offsets are 32-bit: a message cannot reach 4 GiB.
    #[error("message of {0} bytes exceeds the 4 GiB limit of 32-bit offsets")]
    TooLarge(usize),
}

/// Why received bytes could not be decoded. Cheap to create and copy: it is
/// returned on the receive path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A read of `need` bytes at `at` falls outside the `len`-byte message.
    #[error("truncated or corrupt message: {need} bytes at offset {at} lie outside its {len} bytes")]
    OutOfBounds {
        /// Offset of the read.
        at: u64,
        /// Bytes the read needs.
        need: u64,
        /// Message length.
        len: usize,
    },
    /// Nested objects go deeper than [`DecodeOptions::max_depth`].
    #[error("message nests deeper than the limit of {0}")]
    TooDeep(u32),
    /// More header, table and data bytes were visited than the traversal
    /// limit allows (offsets pointing back into visited headers or data).
    #[error("message visits more than {0} bytes of headers and data (traversal limit)")]
    TraversalLimit(usize),
    /// The message has a field that the decoder's schema `reserved`: it
    /// was encoded with an older schema that still had the field. Its
    /// entry cannot be skipped (entries carry no type), so the message is
    /// refused rather than misread.
    #[error(
        "the message has field number {0}, which this schema reserves: the sender's schema still has the field; \
         on the Cornflakes wire a deleted field's entry cannot be skipped, so keep deleted fields in the schema \
         (marked `[deprecated = true]`) until no sender sets them"
    )]
    ReservedField(u32),
    /// A bool holds something other than 0 or 1.
    #[error("invalid bool byte {value} at offset {at}")]
    InvalidBool {
        /// Offset of the byte.
        at: usize,
        /// The byte.
        value: u8,
    },
}

/// A generated Cornflakes message: what applications and transmit paths
/// call on every type `cornflakes-build` generates.
///
/// Bring it into scope with `use cornflakes::Message;` to call these
/// methods. Generated code implements it together with a hidden supertrait
/// that carries the per-field plumbing; do not implement it by hand.
///
/// A transmit path sends a message without an intermediate list of
/// segments:
///
/// ```text
/// let layout = msg.layout();
/// let first = alloc(PKT_HDR + layout.first_segment_len());
/// msg.write_header_and_copies(&layout, &mut first[PKT_HDR..])?;
/// post(first);
/// msg.for_each_zero_copy(|buf| post(buf.clone()));
/// ```
///
/// The examples below use the types generated from `cornflakes-build`'s
/// golden schema (`crates/cornflakes-build/tests/golden/example.proto`).
pub trait Message<'a>: MessageImpl<'a> {
    /// Number of fields in the schema (bits in the presence bitmap).
    const FIELD_COUNT: usize;

    /// An empty message whose lists and nested messages live in `arena`.
    /// Generated types also have it as an inherent `new_in`; the trait's
    /// is for generic code.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message};
    /// use example::GetM;
    ///
    /// fn empty<'a, M: Message<'a>>(arena: &'a Arena) -> M {
    ///     M::new_in(arena)
    /// }
    /// let arena = Arena::copying();
    /// let m: GetM<'_> = empty(&arena);
    /// assert!(!m.has_id());
    /// ```
    fn new_in(arena: &'a Arena) -> Self;

    /// The arena the message was created in.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message};
    ///
    /// let arena = Arena::copying();
    /// let m = example::GetM::new_in(&arena);
    /// assert!(std::ptr::eq(m.arena(), &arena));
    /// ```
    fn arena(&self) -> &'a Arena;

    /// Sizes of the serialized message: the header area, copied data and
    /// zero-copy data, computed in one pass over the present fields.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message, Pool};
    ///
    /// let pool = Pool::new().unwrap();
    /// let big = pool.alloc_copy(&[7u8; 4096]).unwrap();
    /// let arena = Arena::new(&pool); // zero-copy from 512 bytes
    /// let mut m = example::GetM::new_in(&arena);
    /// m.append_keys("user:42"); // copied
    /// m.append_vals(&big); // zero-copy
    /// let layout = m.layout();
    /// assert_eq!(layout.copy_len, 7);
    /// assert_eq!((layout.zero_copy_entries, layout.zero_copy_len), (1, 4096));
    /// assert_eq!(layout.total_len(), layout.first_segment_len() + 4096);
    /// ```
    #[inline]
    fn layout(&self) -> Layout {
        let mut layout = Layout { header_len: self.header_len(), ..Layout::default() };
        self.add_children_layout(&mut layout);
        layout
    }

    /// Length in bytes of the serialized message, every segment together
    /// (what prost's `encoded_len` gives): `self.layout().total_len()`.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message};
    ///
    /// let arena = Arena::copying();
    /// let mut m = example::GetM::new_in(&arena);
    /// m.set_id(7);
    /// m.append_keys("user:42");
    /// assert_eq!(m.encoded_len(), m.serialize_to_vec().unwrap().len());
    /// ```
    #[inline]
    fn encoded_len(&self) -> usize {
        self.layout().total_len()
    }

    /// Writes the header area and the copied data (the first segment) into
    /// `buf`, which must hold at least `layout.first_segment_len()` bytes.
    /// `layout` must come from [`Message::layout`] on the unchanged message.
    /// The zero-copy data follows as one segment per buffer of
    /// [`Message::for_each_zero_copy`].
    ///
    /// # Errors
    ///
    /// [`EncodeError::BufferTooSmall`] if `buf` is shorter than
    /// `layout.first_segment_len()`, [`EncodeError::TooLarge`] if the whole
    /// message reaches 4 GiB. Nothing is written in either case.
    ///
    /// # Panics
    ///
    /// May panic if `layout` was not computed from this message as it is
    /// now.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, EncodeError, Message, Pool};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = Pool::new()?;
    /// let big = pool.alloc_copy(&[7u8; 4096])?;
    /// let arena = Arena::new(&pool);
    /// let mut m = example::GetM::new_in(&arena);
    /// m.set_id(1);
    /// m.append_vals(&big);
    ///
    /// let layout = m.layout();
    /// let mut first = vec![0u8; layout.first_segment_len()];
    /// m.write_header_and_copies(&layout, &mut first)?;
    /// let mut segments = vec![first];
    /// m.for_each_zero_copy(|buf| segments.push(buf.to_vec()));
    /// assert_eq!(segments.concat(), m.serialize_to_vec()?);
    ///
    /// let err = m.write_header_and_copies(&layout, &mut [0u8; 4]).unwrap_err();
    /// assert!(matches!(err, EncodeError::BufferTooSmall { have: 4, .. }));
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    fn write_header_and_copies(&self, layout: &Layout, buf: &mut [u8]) -> Result<(), EncodeError> {
        let need = layout.first_segment_len();
        if buf.len() < need {
            return Err(EncodeError::BufferTooSmall { need, have: buf.len() });
        }
        if layout.total_len() > u32::MAX as usize {
            return Err(EncodeError::TooLarge(layout.total_len()));
        }
        let mut w = Writer::new(&mut buf[..need], layout);
        let at = w.alloc_header(self.header_len());
        self.write_object(&mut w, at);
        debug_assert!(w.is_complete(layout), "layout and write disagree");
        Ok(())
    }

    /// Calls `f` on each zero-copy field, in the order their data follows
    /// the copied data on the wire.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message, Pool};
    ///
    /// let pool = Pool::new().unwrap();
    /// let (a, b) = (pool.alloc_copy(&[1u8; 600]).unwrap(), pool.alloc_copy(&[2u8; 700]).unwrap());
    /// let arena = Arena::new(&pool);
    /// let mut m = example::GetM::new_in(&arena);
    /// m.append_vals(&a);
    /// m.append_vals(b"short: copied");
    /// m.append_vals(&b);
    /// let mut lens = Vec::new();
    /// m.for_each_zero_copy(|buf| lens.push(buf.len()));
    /// assert_eq!(lens, [600, 700]);
    /// ```
    #[inline]
    fn for_each_zero_copy<F: FnMut(&RcBuf)>(&self, mut f: F) {
        self.visit_zero_copy(&mut f);
    }

    /// Serializes into one contiguous buffer (zero-copy data is copied in
    /// after the first segment); returns the length written.
    ///
    /// # Errors
    ///
    /// [`EncodeError::BufferTooSmall`] if `buf` is shorter than
    /// `self.layout().total_len()`, [`EncodeError::TooLarge`] if the message
    /// reaches 4 GiB.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message};
    ///
    /// let arena = Arena::copying();
    /// let mut m = example::GetM::new_in(&arena);
    /// m.set_id(7);
    /// let mut buf = [0u8; 64];
    /// let n = m.serialize_into(&mut buf).unwrap();
    /// assert_eq!(&buf[..n], &m.serialize_to_vec().unwrap()[..]);
    /// assert!(m.serialize_into(&mut buf[..n - 1]).is_err());
    /// ```
    fn serialize_into(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let layout = self.layout();
        let total = layout.total_len();
        if buf.len() < total {
            return Err(EncodeError::BufferTooSmall { need: total, have: buf.len() });
        }
        self.write_header_and_copies(&layout, buf)?;
        let mut at = layout.first_segment_len();
        self.for_each_zero_copy(|seg| {
            buf[at..at + seg.len()].copy_from_slice(seg);
            at += seg.len();
        });
        Ok(total)
    }

    /// Serializes into a new vector.
    ///
    /// # Errors
    ///
    /// [`EncodeError::TooLarge`] for a message of 4 GiB or more; nothing
    /// else.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message};
    ///
    /// let arena = Arena::copying();
    /// let mut m = example::GetM::new_in(&arena);
    /// m.set_id(7);
    /// m.append_keys("user:42");
    /// let bytes = m.serialize_to_vec().unwrap();
    /// assert_eq!(bytes.len(), m.layout().total_len());
    /// ```
    fn serialize_to_vec(&self) -> Result<Vec<u8>, EncodeError> {
        let total = self.layout().total_len();
        if total > u32::MAX as usize {
            return Err(EncodeError::TooLarge(total));
        }
        let mut out = vec![0u8; total];
        let n = self.serialize_into(&mut out)?;
        debug_assert_eq!(n, out.len());
        Ok(out)
    }

    /// Decodes a received buffer without copying: bytes fields at least the
    /// arena's threshold long become zero-copy references into `pkt`
    /// (re-sendable without a copy); shorter ones borrow from it.
    ///
    /// # Errors
    ///
    /// A [`DecodeError`] when `pkt` is not a well-formed message within the
    /// default [`DecodeOptions`]: an offset, length or count outside the
    /// buffer, nesting deeper than 64 (or than fits in the 1 MiB stack
    /// budget), more bytes visited than received, or
    /// a bool that is not 0 or 1. Decoding never panics on bad input.
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, Message, Pool};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pool = Pool::new()?;
    /// let sender = Arena::copying();
    /// let mut m = example::GetM::new_in(&sender);
    /// m.append_vals(&[9u8; 1024]);
    /// let pkt = pool.alloc_copy(&m.serialize_to_vec()?)?; // as received
    ///
    /// let arena = Arena::new(&pool);
    /// let back = example::GetM::deserialize(&pkt, &arena)?;
    /// assert!(back.get_vals()[0].is_zero_copy()); // references `pkt`
    /// assert_eq!(back, m);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    fn deserialize(pkt: &'a RcBuf, arena: &'a Arena) -> Result<Self, DecodeError> {
        let mut r = Reader::new(pkt.as_slice(), Some(pkt), arena, DecodeOptions::default());
        Self::read_object(&mut r, 0)
    }

    /// Decodes bytes that are not in a pool; every field borrows from `data`.
    ///
    /// # Errors
    ///
    /// As [`Message::deserialize`]: a [`DecodeError`] when `data` is not a
    /// well-formed message within the default [`DecodeOptions`].
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, DecodeError, Message};
    ///
    /// let arena = Arena::copying();
    /// let mut m = example::GetM::new_in(&arena);
    /// m.append_keys("user:42");
    /// let bytes = m.serialize_to_vec().unwrap();
    /// let back = example::GetM::deserialize_from_slice(&bytes, &arena).unwrap();
    /// assert_eq!(back.get_keys()[0].as_str(), Ok("user:42"));
    ///
    /// let truncated = &bytes[..bytes.len() - 1];
    /// let err = example::GetM::deserialize_from_slice(truncated, &arena).unwrap_err();
    /// assert!(matches!(err, DecodeError::OutOfBounds { .. }));
    /// ```
    #[inline]
    fn deserialize_from_slice(data: &'a [u8], arena: &'a Arena) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data, None, arena, DecodeOptions::default());
        Self::read_object(&mut r, 0)
    }

    /// Decodes with explicit limits. When `pkt` is the pool buffer `data`
    /// lies in, long bytes fields become zero-copy references to it, as in
    /// [`Message::deserialize`].
    ///
    /// # Errors
    ///
    /// A [`DecodeError`] when `data` is not a well-formed message within
    /// `options` (for example [`DecodeError::TooDeep`] past
    /// `options.max_depth`).
    ///
    /// # Examples
    ///
    /// ```
    /// # mod example { include!("../../../cornflakes-build/tests/golden/example.rs"); }
    /// use cornflakes::{Arena, DecodeError, DecodeOptions, Message};
    /// use example::Node;
    ///
    /// let arena = Arena::copying();
    /// let mut tree = Node::new_in(&arena);
    /// tree.get_mut_left().get_mut_left().set_value(3);
    /// let bytes = tree.serialize_to_vec().unwrap();
    ///
    /// let shallow = DecodeOptions { max_depth: 2, ..DecodeOptions::default() };
    /// let err = Node::deserialize_with_options(&bytes, None, &arena, shallow).unwrap_err();
    /// assert_eq!(err, DecodeError::TooDeep(2));
    /// assert!(Node::deserialize_with_options(&bytes, None, &arena, DecodeOptions::default()).is_ok());
    /// ```
    fn deserialize_with_options(
        data: &'a [u8],
        pkt: Option<&'a RcBuf>,
        arena: &'a Arena,
        options: DecodeOptions,
    ) -> Result<Self, DecodeError> {
        let mut r = Reader::new(data, pkt, arena, options);
        Self::read_object(&mut r, 0)
    }
}

//! The protobuf wire format (proto3), with the hybrid rule of Cornflakes:
//! serialize-and-send for messages that any protobuf peer can read.
//!
//! Read first: the protobuf encoding guide
//! (<https://protobuf.dev/programming-guides/encoding/>), and
//! `docs/protobuf-wire.md`, which says what this module does and why.
//!
//! Types generated with `cornflakes_build::Config::wire(Wire::Protobuf)`
//! implement [`ProtoMessage`]: the same structs, setters and arena as the
//! Cornflakes format, but the bytes are standard proto3, byte-identical to
//! what prost writes for the same values. A `bytes` or `string` field that
//! the hybrid rule made zero-copy ([`CfBytes::ZeroCopy`]) is not copied: its
//! tag and length are written into the copied buffer, and its payload is
//! posted from the application's buffer as its own scatter-gather entry.
//!
//! ```text
//!   copied buffer (write_proto)           zero-copy payloads (on_zero_copy)
//! ┌──────────────────────────────┐
//! │ tag len "short" tag len      │──┐    ┌───────────────────────┐
//! │                              │  └──▶ │ 4096 B, the app's own │  posted after buf[..at]
//! │ tag len tag len ...          │◀──┐   └───────────────────────┘
//! └──────────────────────────────┘   └── then buf[at..], and so on
//! ```
//!
//! # Contract
//!
//! Encoding ([`ProtoMessage::proto_layout`], [`ProtoMessage::write_proto`])
//! never allocates. Sizes are computed in one pass first, as prost's
//! `encoded_len`; the pass stores each nested message's length in the
//! message (a cached size, as protobuf-C++ does), so writing never computes
//! a nested length again. Writing panics (bounds-checked slices, never
//! undefined behaviour) if the message changed between the two calls.
//!
//! Decoding ([`ProtoMessage::deserialize_proto`]) accepts untrusted input:
//! every varint, tag, length and nesting level is checked; a malformed
//! message is a [`ProtoDecodeError`], never a panic or an out-of-bounds
//! read. Unknown fields (groups included) are skipped, nesting is limited as
//! prost limits it ([`RECURSION_LIMIT`]), and strings are checked for UTF-8
//! only when read as text ([`crate::CfString::as_str`]). Each decoded element
//! consumes at least one input byte, so memory is bounded by a constant (per
//! schema) times the input length.

mod codec;
mod decode;
mod encode;

pub use decode::RECURSION_LIMIT;

use crate::field::{Arena, CfBytes};
use crate::mem::RcBuf;
use crate::wire::{EncodeError, Layout, Message};

/// Why received bytes are not a valid protobuf message. Cheap to create and
/// copy: it is returned on the receive path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtoDecodeError {
    /// The input ends inside a value (or a length points past the end of
    /// the enclosing message).
    #[error("truncated message: {need} bytes needed at offset {at}, the enclosing message ends at {end}")]
    Truncated {
        /// Offset of the read.
        at: usize,
        /// Bytes the read needs.
        need: u64,
        /// End of the enclosing message.
        end: usize,
    },
    /// A varint longer than 10 bytes or above `u64::MAX`.
    #[error("invalid varint at offset {0}")]
    InvalidVarint(usize),
    /// A key with field number 0, above `u32`, or wire type 6 or 7.
    #[error("invalid field key {key} at offset {at}")]
    InvalidKey {
        /// Offset of the key.
        at: usize,
        /// The key's value.
        key: u64,
    },
    /// A known field arrived with a wire type its schema type cannot have.
    #[error("field {field} has wire type {got}, its type needs {expected}")]
    WrongWireType {
        /// Field number.
        field: u32,
        /// Wire type received.
        got: u8,
        /// Wire type of the schema's type.
        expected: u8,
    },
    /// Messages (or groups being skipped) nest deeper than [`RECURSION_LIMIT`].
    #[error("message nests deeper than the recursion limit of {RECURSION_LIMIT}")]
    RecursionLimit,
    /// An end-group key without its start, or for another field.
    #[error("unexpected end-group key for field {0}")]
    UnexpectedEndGroup(u32),
}

/// A message generated with the protobuf wire format
/// (`cornflakes_build::Wire::Protobuf`): serialize-and-send and zero-copy
/// decoding of standard proto3 bytes. Implemented for every type that
/// implements the hidden plumbing trait generated code provides.
///
/// A transmit path:
///
/// ```text
/// let layout = msg.proto_layout();
/// let first = alloc(layout.copy_len);
/// let mut zc = small_vec();
/// msg.write_proto(&layout, first, |at, buf| zc.push((at, buf.clone())))?;
/// // post first[..at0], zc0, first[at0..at1], zc1, ..., first[atN..]
/// ```
pub trait ProtoMessage<'a>: Message<'a> + ProtoImpl<'a> {
    /// Sizes of the encoded message: `copy_len` bytes written by
    /// [`ProtoMessage::write_proto`] (keys, lengths, scalars, copied data)
    /// and `zero_copy_len` bytes in `zero_copy_entries` payloads sent from
    /// their own buffers; `header_len` is 0. Also caches each nested
    /// message's length for the write that follows.
    #[inline]
    fn proto_layout(&self) -> Layout {
        let mut tally = Tally::default();
        let total = self.pw_size(&mut tally);
        Layout {
            header_len: 0,
            copy_len: total - tally.zero_copy_len,
            zero_copy_len: tally.zero_copy_len,
            zero_copy_entries: tally.zero_copy_entries,
        }
    }

    /// Writes the copied bytes into `buf[..layout.copy_len]` and calls
    /// `on_zero_copy(at, payload)` for each zero-copy payload, in wire order:
    /// on the wire, `payload` follows `buf[..at]` (after earlier payloads).
    /// `layout` must come from [`ProtoMessage::proto_layout`] on the
    /// unchanged message.
    ///
    /// # Errors
    ///
    /// [`EncodeError::BufferTooSmall`] if `buf` is shorter than
    /// `layout.copy_len`; nothing is written then.
    ///
    /// # Panics
    ///
    /// If the message changed since `layout` was computed.
    #[inline]
    fn write_proto<F: FnMut(usize, &RcBuf)>(
        &self,
        layout: &Layout,
        buf: &mut [u8],
        on_zero_copy: F,
    ) -> Result<(), EncodeError> {
        let need = layout.copy_len;
        if buf.len() < need {
            return Err(EncodeError::BufferTooSmall { need, have: buf.len() });
        }
        let mut w = ProtoWriter::new(&mut buf[..need], on_zero_copy);
        self.pw_write(&mut w);
        assert_eq!(w.position(), need, "message changed between proto_layout and write_proto");
        Ok(())
    }

    /// Length in bytes of the protobuf encoding, zero-copy payloads
    /// included: what prost's `encoded_len` gives for the same values.
    #[inline]
    fn proto_encoded_len(&self) -> usize {
        self.pw_size(&mut Tally::default())
    }

    /// Encodes into one contiguous vector (zero-copy payloads copied in).
    #[inline]
    fn serialize_proto_to_vec(&self) -> Vec<u8> {
        let layout = self.proto_layout();
        let mut copied = vec![0u8; layout.copy_len];
        let mut zero_copy: Vec<(usize, RcBuf)> = Vec::new();
        self.write_proto(&layout, &mut copied, |at, buf| zero_copy.push((at, buf.clone())))
            .expect("the buffer has the layout's length");
        gather(&copied, &zero_copy)
    }

    /// Decodes a received pool buffer: `bytes`/`string` fields at least the
    /// arena's threshold long become zero-copy references into `pkt`,
    /// shorter ones borrow from it.
    ///
    /// # Errors
    ///
    /// A [`ProtoDecodeError`] when `pkt` is not a valid protobuf encoding of
    /// this message type.
    #[inline]
    fn deserialize_proto(pkt: &'a RcBuf, arena: &'a Arena) -> Result<Self, ProtoDecodeError> {
        let mut r = ProtoReader::new(pkt.as_slice(), Some(pkt), arena);
        decode::decode_top(&mut r)
    }

    /// Decodes from any slice; every field borrows from `data`.
    ///
    /// # Errors
    ///
    /// As [`ProtoMessage::deserialize_proto`].
    #[inline]
    fn deserialize_proto_from_slice(data: &'a [u8], arena: &'a Arena) -> Result<Self, ProtoDecodeError> {
        let mut r = ProtoReader::new(data, None, arena);
        decode::decode_top(&mut r)
    }
}

impl<'a, T: Message<'a> + ProtoImpl<'a>> ProtoMessage<'a> for T {}

/// The wire bytes of a message written by [`ProtoMessage::write_proto`]:
/// the copied buffer with each zero-copy payload inserted at its offset.
///
/// # Panics
///
/// If the offsets are not increasing or lie past `copied`.
pub fn gather(copied: &[u8], zero_copy: &[(usize, RcBuf)]) -> Vec<u8> {
    let total = copied.len() + zero_copy.iter().map(|(_, b)| b.len()).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    let mut from = 0;
    for (at, buf) in zero_copy {
        out.extend_from_slice(&copied[from..*at]);
        out.extend_from_slice(buf);
        from = *at;
    }
    out.extend_from_slice(&copied[from..]);
    out
}

/// The per-message plumbing that generated code implements (hidden: not
/// part of the documented API, may change in any release).
#[doc(hidden)]
pub trait ProtoImpl<'a>: Message<'a> {
    /// Encoded length of the message's fields (without its own key and
    /// length), zero-copy payloads included and also added to `tally`;
    /// stores the result in the message's cached size.
    fn pw_size(&self, tally: &mut Tally) -> usize;
    /// The length the last [`ProtoImpl::pw_size`] computed.
    fn pw_cached_size(&self) -> usize;
    /// Writes the fields, in prost's order.
    fn pw_write<F: FnMut(usize, &RcBuf)>(&self, w: &mut ProtoWriter<'_, F>);
    /// Merges one field whose key has been read.
    ///
    /// # Errors
    ///
    /// The [`ProtoDecodeError`] of the field's value.
    fn pw_merge_field(&mut self, r: &mut ProtoReader<'a>, number: u32, wire: WireType) -> Result<(), ProtoDecodeError>;
}

/// Zero-copy payloads counted by the size pass.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Bytes of zero-copy payloads.
    pub zero_copy_len: usize,
    /// Number of zero-copy payloads.
    pub zero_copy_entries: usize,
}

/// A `bytes` or `string` field as the encoder sees it.
#[doc(hidden)]
pub trait BytesField<'a>: Sized {
    /// The bytes.
    fn cf_bytes(&self) -> &CfBytes<'a>;
    /// Wraps decoded bytes (strings: unchecked until read as text).
    fn from_cf_bytes(b: CfBytes<'a>) -> Self;
}

impl<'a> BytesField<'a> for CfBytes<'a> {
    #[inline(always)]
    fn cf_bytes(&self) -> &CfBytes<'a> {
        self
    }
    #[inline(always)]
    fn from_cf_bytes(b: CfBytes<'a>) -> Self {
        b
    }
}

impl<'a> BytesField<'a> for crate::field::CfString<'a> {
    #[inline(always)]
    fn cf_bytes(&self) -> &CfBytes<'a> {
        self.as_cf_bytes()
    }
    #[inline(always)]
    fn from_cf_bytes(b: CfBytes<'a>) -> Self {
        crate::field::CfString::from_unchecked_bytes(b)
    }
}

pub use codec::{
    Bool, Double, Fixed32, Fixed64, Float, Int32, Int64, ScalarCodec, Sfixed32, Sfixed64, Sint32, Sint64, Uint32,
    Uint64, WireType,
};
pub use decode::ProtoReader;
pub use encode::{CachedSize, ProtoWriter};

/// What generated code calls (through `crate::__private::pw`).
#[doc(hidden)]
pub mod private {
    pub use super::codec::*;
    pub use super::decode::{
        merge_list, merge_list_bytes, merge_list_message, merge_message, merge_nested, merge_single,
        merge_single_bytes, read_bytes, read_scalar, ProtoReader as Reader,
    };
    pub use super::encode::{
        bytes_len, message_len, packed_len, put_bytes, put_message, put_packed, put_scalar, put_unpacked, scalar_len,
        unpacked_len, CachedSize, ProtoWriter as Writer,
    };
    pub use super::{BytesField, ProtoDecodeError as DecodeError, ProtoImpl, Tally};
}

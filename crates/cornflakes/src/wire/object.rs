//! How a message object is laid out: the half of a message that generated
//! code implements, one runtime call per field. Reached only through
//! [`crate::__private`]; applications use [`Message`](super::Message).

use super::{DecodeError, Layout, Reader, Writer};
use crate::mem::RcBuf;

/// The per-object plumbing of a generated message, driven by the provided
/// methods of [`Message`](super::Message) and by the [`Field`](super::field::Field)
/// impl of nested messages.
///
/// Generated code implements it; applications never call it (it is not
/// part of the documented API and may change in any release).
pub trait MessageImpl<'a>: Sized + 'a {
    /// Length of this object's own header: word count, bitmap, entries of
    /// present fields.
    fn header_len(&self) -> usize;

    /// Adds everything below this object's own header to `layout`: list
    /// tables, nested headers, copied and zero-copy data.
    fn add_children_layout(&self, layout: &mut Layout);

    /// Writes this object's header at `at` (already reserved by the caller)
    /// and everything below it.
    fn write_object(&self, w: &mut Writer<'_>, at: usize);

    /// Calls `f` on each zero-copy field, in wire order.
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, f: &mut F);

    /// Decodes the object whose header starts at `at`.
    ///
    /// # Errors
    ///
    /// Any [`DecodeError`] of the header or of a present field.
    fn read_object(r: &mut Reader<'a>, at: usize) -> Result<Self, DecodeError>;
}

/// Bytes of an object header before the entries: the word count and
/// `bitmap_words` bitmap words.
#[inline(always)]
pub const fn header_prefix_len(bitmap_words: usize) -> usize {
    4 + 4 * bitmap_words
}

/// Number of bitmap words for a message with `field_count` fields.
#[inline(always)]
pub const fn bitmap_words(field_count: usize) -> usize {
    field_count.div_ceil(32)
}

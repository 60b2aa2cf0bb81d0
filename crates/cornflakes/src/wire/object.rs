//! How a message object is laid out: the half of a message that generated
//! code implements, one runtime call per field. Reached only through
//! [`crate::__private`]; applications use [`Message`](super::Message).

use super::field::Field;
use super::{DecodeError, Layout, Reader, Writer};
use crate::field::storage::{bit, set_bit};
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

// Per-field decoding steps of generated `read_object`. They live here, not
// inline in generated code, so that a field's temporaries (its `Result`,
// its value) take stack only in this helper's frame while it runs, not once
// per field in the frame of `read_object`, which recursion multiplies: in a
// debug build a 41-field recursive message took about 37 KiB of stack per
// level with the reads inline, 18 KiB with these helpers (measured by
// `cornflakes-tests/tests/stack_depth.rs`).

/// Reads field `i` when its bit is set in `bitmap` (advancing `pos` past its
/// entry) into `slot`, recording presence in `presence` as proto3 says: a
/// value equal to the default is absent unless the field has explicit
/// presence (`optional`).
///
/// # Errors
///
/// The [`DecodeError`] of the entry.
#[inline(never)]
pub fn read_single<'a, T: Field<'a> + PartialEq + Default>(
    r: &mut Reader<'a>,
    bitmap: &[u32],
    i: usize,
    pos: &mut usize,
    slot: &mut T,
    presence: &mut [u32],
    explicit: bool,
) -> Result<(), DecodeError> {
    if bit(bitmap, i) {
        let v = T::read_entry(r, *pos)?;
        *pos += T::ENTRY_LEN;
        if explicit || v != T::default() {
            *slot = v;
            set_bit(presence, i);
        }
    }
    Ok(())
}

/// Reads field `i` when its bit is set into `slot` (a list: replaced; a
/// message: `Some`), advancing `pos`.
///
/// # Errors
///
/// The [`DecodeError`] of the entry.
#[inline(never)]
pub fn read_into<'a, T: Field<'a>>(
    r: &mut Reader<'a>,
    bitmap: &[u32],
    i: usize,
    pos: &mut usize,
    slot: &mut T,
) -> Result<(), DecodeError> {
    if bit(bitmap, i) {
        *slot = T::read_entry(r, *pos)?;
        *pos += T::ENTRY_LEN;
    }
    Ok(())
}

/// Refuses an object whose bitmap has the bit of a reserved field number:
/// `reserved` lists (ordinal, field number) of the numbers the schema
/// reserves below its highest field number, which keep their ordinals so
/// that the fields after them keep theirs.
///
/// # Errors
///
/// [`DecodeError::ReservedField`] with the first such number.
#[inline(never)]
pub fn refuse_reserved(bitmap: &[u32], reserved: &[(usize, u32)]) -> Result<(), DecodeError> {
    match reserved.iter().find(|&&(i, _)| bit(bitmap, i)) {
        Some(&(_, number)) => Err(DecodeError::ReservedField(number)),
        None => Ok(()),
    }
}

/// Reads field `i` when its bit is set into `slot` as `Some`.
///
/// # Errors
///
/// The [`DecodeError`] of the entry.
#[inline(never)]
pub fn read_option<'a, T: Field<'a>>(
    r: &mut Reader<'a>,
    bitmap: &[u32],
    i: usize,
    pos: &mut usize,
    slot: &mut Option<T>,
) -> Result<(), DecodeError> {
    if bit(bitmap, i) {
        *slot = Some(T::read_entry(r, *pos)?);
        *pos += T::ENTRY_LEN;
    }
    Ok(())
}

/// Reads oneof member `i` when its bit is set into `slot`, wrapped by
/// `variant`; a later member replaces an earlier one (last one wins).
///
/// # Errors
///
/// The [`DecodeError`] of the entry.
#[inline(never)]
pub fn read_member<'a, T: Field<'a>, O>(
    r: &mut Reader<'a>,
    bitmap: &[u32],
    i: usize,
    pos: &mut usize,
    slot: &mut Option<O>,
    variant: fn(T) -> O,
) -> Result<(), DecodeError> {
    if bit(bitmap, i) {
        *slot = Some(variant(T::read_entry(r, *pos)?));
        *pos += T::ENTRY_LEN;
    }
    Ok(())
}

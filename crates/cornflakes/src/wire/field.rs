//! How each field type is laid out: its fixed-size entry in an object
//! header (or list table), what it adds below the header, and how it is
//! read back.

use super::{DecodeError, Layout, Message, MessageImpl, Reader, Writer};
use crate::field::{CfBytes, CfString, List, Nested};
use crate::mem::RcBuf;

/// A type that can be a field or a list element.
///
/// Generated code calls these once per present field; users do not.
pub trait Field<'a>: Sized {
    /// Bytes of the field's entry in its object header or list table.
    const ENTRY_LEN: usize;

    /// Adds what the field places outside its entry (tables, nested
    /// headers, data) to `layout`.
    #[inline(always)]
    fn add_layout(&self, _layout: &mut Layout) {}

    /// Writes the entry at `entry` and everything the field places below.
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize);

    /// Calls `f` on each zero-copy buffer of the field, in wire order.
    #[inline(always)]
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, _f: &mut F) {}

    /// Reads the field from its entry at `entry`.
    ///
    /// # Errors
    ///
    /// Any [`DecodeError`] of the [`Reader`] calls it makes.
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError>;
}

/// Scalars stored inline in the header: integers, floats and bools.
pub trait Scalar: Copy + Default + PartialEq + std::fmt::Debug {}

macro_rules! int_field {
    ($($t:ty => $len:expr, $put:ident, $get:ident, $wire:ty);* $(;)?) => {$(
        impl Scalar for $t {}
        impl<'a> Field<'a> for $t {
            const ENTRY_LEN: usize = $len;
            #[inline(always)]
            fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
                w.$put(entry, *self as $wire);
            }
            #[inline(always)]
            fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
                Ok(r.$get(entry)? as $t)
            }
        }
    )*};
}

int_field! {
    u32 => 4, put_u32, u32, u32;
    i32 => 4, put_u32, u32, u32;
    u64 => 8, put_u64, u64, u64;
    i64 => 8, put_u64, u64, u64;
}

impl Scalar for f32 {}
impl<'a> Field<'a> for f32 {
    const ENTRY_LEN: usize = 4;
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        w.put_u32(entry, self.to_bits());
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        Ok(f32::from_bits(r.u32(entry)?))
    }
}

impl Scalar for f64 {}
impl<'a> Field<'a> for f64 {
    const ENTRY_LEN: usize = 8;
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        w.put_u64(entry, self.to_bits());
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        Ok(f64::from_bits(r.u64(entry)?))
    }
}

impl Scalar for bool {}
impl<'a> Field<'a> for bool {
    const ENTRY_LEN: usize = 1;
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        w.put_u8(entry, *self as u8);
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        r.bool(entry)
    }
}

impl<'a> Field<'a> for CfBytes<'a> {
    const ENTRY_LEN: usize = 8;
    #[inline(always)]
    fn add_layout(&self, layout: &mut Layout) {
        // Arithmetic rather than a match: in a list whose elements are
        // copied or not at random, a branch here mispredicts often.
        let len = self.len();
        let zero_copy = usize::from(self.is_zero_copy());
        layout.copy_len += len * (1 - zero_copy);
        layout.zero_copy_len += len * zero_copy;
        layout.zero_copy_entries += zero_copy;
    }
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        w.put_bytes(entry, self);
    }
    #[inline(always)]
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, f: &mut F) {
        if let CfBytes::ZeroCopy(buf) = self {
            f(buf);
        }
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        r.bytes(entry)
    }
}

impl<'a> Field<'a> for CfString<'a> {
    const ENTRY_LEN: usize = 8;
    #[inline(always)]
    fn add_layout(&self, layout: &mut Layout) {
        self.as_cf_bytes().add_layout(layout);
    }
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        w.put_bytes(entry, self.as_cf_bytes());
    }
    #[inline(always)]
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, f: &mut F) {
        self.as_cf_bytes().visit_zero_copy(f);
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        Ok(CfString::from_unchecked_bytes(r.bytes(entry)?))
    }
}

/// A nested message: its entry is the offset of its own header, which is
/// placed in the header area when the entry is written.
impl<'a, M: Message<'a>> Field<'a> for M {
    const ENTRY_LEN: usize = 4;
    #[inline(always)]
    fn add_layout(&self, layout: &mut Layout) {
        layout.header_len += self.header_len();
        self.add_children_layout(layout);
    }
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        let at = w.alloc_header(self.header_len());
        w.put_u32(entry, at as u32);
        self.write_object(w, at);
    }
    #[inline(always)]
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, f: &mut F) {
        MessageImpl::visit_zero_copy(self, f);
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        let at = r.u32(entry)? as usize;
        M::read_object(r, at)
    }
}

impl<'a, M: Message<'a>> Field<'a> for Nested<'a, M> {
    const ENTRY_LEN: usize = 4;
    #[inline(always)]
    fn add_layout(&self, layout: &mut Layout) {
        Field::add_layout(&**self, layout);
    }
    #[inline(always)]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        Field::write_entry(&**self, w, entry);
    }
    #[inline(always)]
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, f: &mut F) {
        MessageImpl::visit_zero_copy(&**self, f);
    }
    #[inline(always)]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        let m = <M as Field<'a>>::read_entry(r, entry)?;
        Ok(crate::field::storage::nested_in(m, r.arena()))
    }
}

/// A list: its entry is (count, table offset); the table holds one element
/// entry per element and is placed in the header area.
impl<'a, T: Field<'a>> Field<'a> for List<'a, T> {
    const ENTRY_LEN: usize = 8;
    #[inline(always)]
    fn add_layout(&self, layout: &mut Layout) {
        layout.header_len += self.len() * T::ENTRY_LEN;
        for elem in self.iter() {
            elem.add_layout(layout);
        }
    }
    #[inline]
    fn write_entry(&self, w: &mut Writer<'_>, entry: usize) {
        let table = w.alloc_header(self.len() * T::ENTRY_LEN);
        w.put_u32(entry, self.len() as u32);
        w.put_u32(entry + 4, table as u32);
        for (i, elem) in self.iter().enumerate() {
            elem.write_entry(w, table + i * T::ENTRY_LEN);
        }
    }
    #[inline(always)]
    fn visit_zero_copy<F: FnMut(&RcBuf)>(&self, f: &mut F) {
        for elem in self.iter() {
            elem.visit_zero_copy(f);
        }
    }
    #[inline]
    fn read_entry(r: &mut Reader<'a>, entry: usize) -> Result<Self, DecodeError> {
        let (count, table) = r.table(entry, T::ENTRY_LEN)?;
        let mut list = List::with_capacity_in(count, r.arena());
        for i in 0..count {
            list.append(T::read_entry(r, table + i * T::ENTRY_LEN)?);
        }
        Ok(list)
    }
}

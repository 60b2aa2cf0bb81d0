//! Scalar encodings of proto3: one zero-sized codec type per proto scalar
//! type, since several share a Rust type (`int32`, `sint32` and `sfixed32`
//! are all `i32`) but not an encoding.

use super::decode::ProtoReader;
use super::encode::ProtoWriter;
use super::ProtoDecodeError;
use crate::mem::RcBuf;

/// A protobuf wire type (the low three bits of a key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum WireType {
    /// Varint: int32, int64, uint32, uint64, sint32, sint64, bool, enum.
    Varint = 0,
    /// 8 bytes: fixed64, sfixed64, double.
    Fixed64 = 1,
    /// Length-delimited: string, bytes, messages, packed repeated fields.
    Len = 2,
    /// Start of a group (proto2; skipped as unknown).
    StartGroup = 3,
    /// End of a group.
    EndGroup = 4,
    /// 4 bytes: fixed32, sfixed32, float.
    Fixed32 = 5,
}

impl WireType {
    /// The wire type of the low three bits of a key, if valid.
    #[inline(always)]
    pub fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            _ => return None,
        })
    }
}

/// Bytes of `v` as a varint (prost's formula: no branch).
#[inline(always)]
pub const fn varint_len(v: u64) -> usize {
    ((((v | 1).leading_zeros() ^ 63) * 9 + 73) / 64) as usize
}

/// ZigZag encoding of a `sint32`.
#[inline(always)]
pub const fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

/// ZigZag encoding of a `sint64`.
#[inline(always)]
pub const fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// How one proto scalar type is encoded.
pub trait ScalarCodec {
    /// The Rust type generated code stores.
    type Value: Copy + PartialEq + Default;
    /// The wire type of a single value.
    const WIRE_TYPE: WireType;
    /// Bytes of the encoded value.
    fn encoded_len(v: Self::Value) -> usize;
    /// Writes the value.
    fn put<F: FnMut(usize, &RcBuf)>(w: &mut ProtoWriter<'_, F>, v: Self::Value);
    /// Reads a value.
    ///
    /// # Errors
    ///
    /// [`ProtoDecodeError::Truncated`] or [`ProtoDecodeError::InvalidVarint`].
    fn get(r: &mut ProtoReader<'_>) -> Result<Self::Value, ProtoDecodeError>;
}

macro_rules! varint_codec {
    ($($(#[$doc:meta])* $name:ident: $t:ty, |$e:ident| $enc:expr, |$d:ident| $dec:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;
        impl ScalarCodec for $name {
            type Value = $t;
            const WIRE_TYPE: WireType = WireType::Varint;
            #[inline(always)]
            fn encoded_len($e: $t) -> usize {
                varint_len($enc)
            }
            #[inline(always)]
            fn put<F: FnMut(usize, &RcBuf)>(w: &mut ProtoWriter<'_, F>, $e: $t) {
                w.put_varint($enc);
            }
            #[inline(always)]
            fn get(r: &mut ProtoReader<'_>) -> Result<$t, ProtoDecodeError> {
                let $d = r.varint()?;
                Ok($dec)
            }
        }
    )*};
}

varint_codec! {
    /// `int32` (and enums): sign-extended to 64 bits, so negatives take 10 bytes.
    Int32: i32, |v| v as i64 as u64, |d| d as i32;
    /// `int64`.
    Int64: i64, |v| v as u64, |d| d as i64;
    /// `uint32`.
    Uint32: u32, |v| u64::from(v), |d| d as u32;
    /// `uint64`.
    Uint64: u64, |v| v, |d| d;
    /// `sint32`: ZigZag.
    Sint32: i32, |v| u64::from(zigzag32(v)), |d| { let u = d as u32; ((u >> 1) as i32) ^ -((u & 1) as i32) };
    /// `sint64`: ZigZag.
    Sint64: i64, |v| zigzag64(v), |d| ((d >> 1) as i64) ^ -((d & 1) as i64);
    /// `bool`: any non-zero varint reads as true, as in prost.
    Bool: bool, |v| u64::from(v), |d| d != 0;
}

macro_rules! fixed_codec {
    ($($(#[$doc:meta])* $name:ident: $t:ty, $wire:ident, $len:expr, $put:ident, $get:ident, |$e:ident| $enc:expr, |$d:ident| $dec:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;
        impl ScalarCodec for $name {
            type Value = $t;
            const WIRE_TYPE: WireType = WireType::$wire;
            #[inline(always)]
            fn encoded_len(_: $t) -> usize {
                $len
            }
            #[inline(always)]
            fn put<F: FnMut(usize, &RcBuf)>(w: &mut ProtoWriter<'_, F>, $e: $t) {
                w.$put($enc);
            }
            #[inline(always)]
            fn get(r: &mut ProtoReader<'_>) -> Result<$t, ProtoDecodeError> {
                let $d = r.$get()?;
                Ok($dec)
            }
        }
    )*};
}

fixed_codec! {
    /// `fixed32`.
    Fixed32: u32, Fixed32, 4, put_fixed32, fixed32, |v| v, |d| d;
    /// `sfixed32`.
    Sfixed32: i32, Fixed32, 4, put_fixed32, fixed32, |v| v as u32, |d| d as i32;
    /// `float`.
    Float: f32, Fixed32, 4, put_fixed32, fixed32, |v| v.to_bits(), |d| f32::from_bits(d);
    /// `fixed64`.
    Fixed64: u64, Fixed64, 8, put_fixed64, fixed64, |v| v, |d| d;
    /// `sfixed64`.
    Sfixed64: i64, Fixed64, 8, put_fixed64, fixed64, |v| v as u64, |d| d as i64;
    /// `double`.
    Double: f64, Fixed64, 8, put_fixed64, fixed64, |v| v.to_bits(), |d| f64::from_bits(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_len_at_every_boundary() {
        assert_eq!(varint_len(0), 1);
        for bits in 1..64u32 {
            let v = 1u64 << bits;
            assert_eq!(varint_len(v - 1), (bits as usize).div_ceil(7), "{v}-1");
            assert_eq!(varint_len(v), (bits as usize + 1).div_ceil(7), "{v}");
        }
        assert_eq!(varint_len(u64::MAX), 10);
    }

    #[test]
    fn zigzag_matches_the_spec_table() {
        // https://protobuf.dev/programming-guides/encoding/#signed-ints
        assert_eq!([0, -1, 1, -2, 2].map(zigzag32), [0, 1, 2, 3, 4]);
        assert_eq!(zigzag32(i32::MAX), 0xffff_fffe);
        assert_eq!(zigzag32(i32::MIN), 0xffff_ffff);
        assert_eq!(zigzag64(i64::MIN), u64::MAX);
    }
}

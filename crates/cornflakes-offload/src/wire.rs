//! Varints, zigzag and the proto3 default rules: the engine's "serializer
//! block" (the Verilog one is in `hw/varint/`).

use crate::schema::FieldType;

/// Bytes of `v` as a varint (1 to 10).
#[inline(always)]
pub fn varint_len(v: u64) -> usize {
    // 1 + floor(bits / 7), as prost's `encoded_len_varint`.
    ((((v | 1).leading_zeros() ^ 63) * 9 + 73) / 64) as usize
}

/// Appends `v` as a varint.
#[inline(always)]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it; `None` when the input ends
/// first or the varint has more than 64 bits (prost's "invalid varint").
#[inline]
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = *buf.get(*pos + i)?;
        if i == 9 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            *pos += i + 1;
            return Some(v);
        }
    }
    None
}

/// The varint written for a varint-typed scalar in canonical form (see
/// [`Slot`](crate::Slot)).
#[inline(always)]
pub fn encoded_value(ty: FieldType, v: u64) -> u64 {
    match ty {
        FieldType::Int32 => i64::from(v as i32) as u64,
        FieldType::Uint32 => u64::from(v as u32),
        FieldType::Sint32 => {
            let n = v as i32;
            u64::from(((n << 1) ^ (n >> 31)) as u32)
        }
        FieldType::Sint64 => {
            let n = v as i64;
            ((n << 1) ^ (n >> 63)) as u64
        }
        FieldType::Bool => u64::from(v != 0),
        _ => v,
    }
}

/// The canonical slot value of a received varint (inverse of
/// [`encoded_value`], with prost's truncations).
#[inline(always)]
pub fn decoded_value(ty: FieldType, v: u64) -> u64 {
    match ty {
        FieldType::Int32 => i64::from(v as i32) as u64,
        FieldType::Uint32 => u64::from(v as u32),
        FieldType::Sint32 => {
            let n = v as u32;
            i64::from(((n >> 1) as i32) ^ -((n & 1) as i32)) as u64
        }
        FieldType::Sint64 => (((v >> 1) as i64) ^ -((v & 1) as i64)) as u64,
        FieldType::Bool => u64::from(v != 0),
        _ => v,
    }
}

/// The canonical slot value of a received fixed-width value.
#[inline(always)]
pub fn decoded_fixed32(ty: FieldType, v: u32) -> u64 {
    match ty {
        FieldType::Sfixed32 => i64::from(v as i32) as u64,
        _ => u64::from(v),
    }
}

/// Whether a scalar has its type's default value (proto3 does not write
/// those without explicit presence). Floats compare as prost does
/// (`!= 0.0`: -0.0 is default, NaN is not).
#[inline(always)]
pub fn is_default(ty: FieldType, v: u64) -> bool {
    match ty {
        FieldType::Float => f32::from_bits(v as u32) == 0.0,
        FieldType::Double => f64::from_bits(v) == 0.0,
        FieldType::Int32 | FieldType::Uint32 | FieldType::Sint32 | FieldType::Fixed32 | FieldType::Sfixed32 => {
            v as u32 == 0
        }
        _ => v == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths_at_every_boundary() {
        for bits in 0..64u32 {
            let v = 1u64 << bits;
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(u64::MAX), 10);
    }

    #[test]
    fn overlong_and_truncated_varints_are_refused() {
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80, 0x80], &mut pos), None);
        assert_eq!(get_varint(&[0xff; 9].iter().copied().chain([2]).collect::<Vec<_>>(), &mut 0), None);
        assert_eq!(get_varint(&[0xff; 11], &mut 0), None);
    }

    #[test]
    fn zigzag_round_trips() {
        for n in [0i64, -1, 1, i64::MIN, i64::MAX, -64, 63] {
            let slot = n as u64;
            assert_eq!(decoded_value(FieldType::Sint64, encoded_value(FieldType::Sint64, slot)), slot);
        }
        for n in [0i32, -1, 1, i32::MIN, i32::MAX] {
            let slot = i64::from(n) as u64;
            assert_eq!(decoded_value(FieldType::Sint32, encoded_value(FieldType::Sint32, slot)), slot);
        }
        assert_eq!(encoded_value(FieldType::Sint32, (-1i64) as u64), 1);
        assert_eq!(encoded_value(FieldType::Sint64, (-2i64) as u64), 3);
    }
}

//! Decoding untrusted protobuf bytes into generated messages, without
//! copying: `bytes` and `string` fields become views of the input.

use super::codec::{ScalarCodec, WireType};
use super::{BytesField, ProtoDecodeError, ProtoImpl};
use crate::field::{Arena, CfBytes, List, Nested};
use crate::mem::RcBuf;

/// How deep messages (and skipped groups) may nest: prost's
/// `RECURSION_LIMIT`, so that both accept and refuse the same inputs.
pub const RECURSION_LIMIT: u32 = 100;

/// A bounds-checked cursor over a received message. Every read is checked
/// against the end of the message being decoded (`end`), which never lies
/// past the input.
pub struct ProtoReader<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    depth_left: u32,
    pkt: Option<&'a RcBuf>,
    arena: &'a Arena,
    threshold: usize,
}

impl<'a> ProtoReader<'a> {
    pub(crate) fn new(buf: &'a [u8], pkt: Option<&'a RcBuf>, arena: &'a Arena) -> Self {
        ProtoReader {
            buf,
            pos: 0,
            end: buf.len(),
            depth_left: RECURSION_LIMIT,
            pkt,
            arena,
            threshold: arena.threshold(),
        }
    }

    /// The arena decoded lists and nested messages go into.
    #[inline(always)]
    pub fn arena(&self) -> &'a Arena {
        self.arena
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoDecodeError> {
        if self.end - self.pos < n {
            return Err(ProtoDecodeError::Truncated { at: self.pos, need: n as u64, end: self.end });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads a varint (at most 10 bytes, at most `u64::MAX`).
    ///
    /// # Errors
    ///
    /// [`ProtoDecodeError::Truncated`], [`ProtoDecodeError::InvalidVarint`].
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64, ProtoDecodeError> {
        let start = self.pos;
        let rest = &self.buf[self.pos..self.end];
        if let Some(&b) = rest.first() {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        let mut v = 0u64;
        for (i, &b) in rest.iter().take(10).enumerate() {
            if i == 9 && b > 1 {
                return Err(ProtoDecodeError::InvalidVarint(start));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.pos += i + 1;
                return Ok(v);
            }
        }
        if rest.len() < 10 {
            Err(ProtoDecodeError::Truncated { at: start, need: rest.len() as u64 + 1, end: self.end })
        } else {
            Err(ProtoDecodeError::InvalidVarint(start))
        }
    }

    /// Reads 4 little-endian bytes.
    ///
    /// # Errors
    ///
    /// [`ProtoDecodeError::Truncated`].
    #[inline(always)]
    pub fn fixed32(&mut self) -> Result<u32, ProtoDecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads 8 little-endian bytes.
    ///
    /// # Errors
    ///
    /// [`ProtoDecodeError::Truncated`].
    #[inline(always)]
    pub fn fixed64(&mut self) -> Result<u64, ProtoDecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads a length prefix and checks the payload lies inside the
    /// enclosing message; returns the payload's length.
    #[inline(always)]
    fn len_prefix(&mut self) -> Result<usize, ProtoDecodeError> {
        let at = self.pos;
        let len = self.varint()?;
        if len > (self.end - self.pos) as u64 {
            return Err(ProtoDecodeError::Truncated { at, need: len, end: self.end });
        }
        Ok(len as usize)
    }

    /// Reads a length-delimited payload as a field: a zero-copy reference
    /// into the packet when at least the arena's threshold long, else a
    /// borrowed slice.
    ///
    /// # Errors
    ///
    /// [`ProtoDecodeError::Truncated`], [`ProtoDecodeError::InvalidVarint`].
    #[inline]
    pub fn bytes(&mut self) -> Result<CfBytes<'a>, ProtoDecodeError> {
        let len = self.len_prefix()?;
        let data = self.take(len)?;
        if len >= self.threshold && len > 0 {
            if let Some(buf) = self.pkt.and_then(|p| p.slice_ref(data)) {
                return Ok(CfBytes::ZeroCopy(buf));
            }
        }
        Ok(CfBytes::Copied(data))
    }

    /// Reads a key: (field number, wire type).
    ///
    /// # Errors
    ///
    /// [`ProtoDecodeError::InvalidKey`] for field number 0, a key above
    /// `u32::MAX` or wire type 6 or 7; the varint's errors.
    #[inline(always)]
    pub fn key(&mut self) -> Result<(u32, WireType), ProtoDecodeError> {
        let at = self.pos;
        let key = self.varint()?;
        let wire = WireType::from_bits((key & 7) as u8);
        match wire {
            Some(wire) if key <= u64::from(u32::MAX) && key >> 3 != 0 => Ok(((key >> 3) as u32, wire)),
            _ => Err(ProtoDecodeError::InvalidKey { at, key }),
        }
    }

    /// Skips the value of an unknown field (groups included, as prost does).
    ///
    /// # Errors
    ///
    /// Any error of the value; [`ProtoDecodeError::UnexpectedEndGroup`] for
    /// an end-group key on its own; [`ProtoDecodeError::RecursionLimit`] for
    /// groups nested too deep.
    pub fn skip(&mut self, number: u32, wire: WireType) -> Result<(), ProtoDecodeError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.take(8).map(drop),
            WireType::Fixed32 => self.take(4).map(drop),
            WireType::Len => {
                let len = self.len_prefix()?;
                self.take(len).map(drop)
            }
            WireType::EndGroup => Err(ProtoDecodeError::UnexpectedEndGroup(number)),
            WireType::StartGroup => {
                self.descend()?;
                loop {
                    let (n, w) = self.key()?;
                    if w == WireType::EndGroup {
                        if n != number {
                            return Err(ProtoDecodeError::UnexpectedEndGroup(n));
                        }
                        break;
                    }
                    self.skip(n, w)?;
                }
                self.depth_left += 1;
                Ok(())
            }
        }
    }

    #[inline(always)]
    fn descend(&mut self) -> Result<(), ProtoDecodeError> {
        self.depth_left = self.depth_left.checked_sub(1).ok_or(ProtoDecodeError::RecursionLimit)?;
        Ok(())
    }
}

/// Decodes the top-level message: the whole input.
pub(super) fn decode_top<'a, M: ProtoImpl<'a>>(r: &mut ProtoReader<'a>) -> Result<M, ProtoDecodeError> {
    let mut m = M::new_in(r.arena);
    merge_fields(&mut m, r)?;
    Ok(m)
}

/// Merges fields until the end of the current message.
#[inline]
fn merge_fields<'a, M: ProtoImpl<'a>>(m: &mut M, r: &mut ProtoReader<'a>) -> Result<(), ProtoDecodeError> {
    while r.pos < r.end {
        let (number, wire) = r.key()?;
        m.pw_merge_field(r, number, wire)?;
    }
    Ok(())
}

#[inline(always)]
fn expect(number: u32, got: WireType, expected: WireType) -> Result<(), ProtoDecodeError> {
    if got == expected {
        Ok(())
    } else {
        Err(ProtoDecodeError::WrongWireType { field: number, got: got as u8, expected: expected as u8 })
    }
}

/// Merges a length-delimited nested message into `m` (protobuf merges a
/// message field that occurs twice). Not inlined: it is the recursion.
///
/// # Errors
///
/// The wire type is not `Len`, the payload does not fit, nesting passes
/// [`RECURSION_LIMIT`], or any error inside.
#[inline(never)]
pub fn merge_message<'a, M: ProtoImpl<'a>>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
    m: &mut M,
) -> Result<(), ProtoDecodeError> {
    expect(number, wire, WireType::Len)?;
    let len = r.len_prefix()?;
    r.descend()?;
    let outer_end = r.end;
    r.end = r.pos + len;
    merge_fields(m, r)?;
    r.end = outer_end;
    r.depth_left += 1;
    Ok(())
}

/// Reads one scalar value of field `number`.
///
/// # Errors
///
/// A wire type other than the codec's, or the value's error.
#[inline(always)]
pub fn read_scalar<C: ScalarCodec>(
    r: &mut ProtoReader<'_>,
    number: u32,
    wire: WireType,
) -> Result<C::Value, ProtoDecodeError> {
    expect(number, wire, C::WIRE_TYPE)?;
    C::get(r)
}

/// Reads one `bytes`/`string` value of field `number`.
///
/// # Errors
///
/// A wire type other than `Len`, or a payload that does not fit.
#[inline(always)]
pub fn read_bytes<'a, B: BytesField<'a>>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
) -> Result<B, ProtoDecodeError> {
    expect(number, wire, WireType::Len)?;
    Ok(B::from_cf_bytes(r.bytes()?))
}

/// Stores a decoded singular value with proto3 presence: a default value
/// is absent unless the field has explicit presence (`optional`).
#[inline(always)]
fn store<T: PartialEq + Default>(v: T, slot: &mut T, presence: &mut [u32], i: usize, explicit: bool) {
    let present = explicit || v != T::default();
    *slot = v;
    if present {
        crate::field::storage::set_bit(presence, i);
    } else {
        crate::field::storage::clear_bit(presence, i);
    }
}

/// Merges a singular scalar field (the last occurrence wins).
///
/// # Errors
///
/// As [`read_scalar`].
#[inline(always)]
pub fn merge_single<C: ScalarCodec>(
    r: &mut ProtoReader<'_>,
    number: u32,
    wire: WireType,
    slot: &mut C::Value,
    presence: &mut [u32],
    i: usize,
    explicit: bool,
) -> Result<(), ProtoDecodeError> {
    let v = read_scalar::<C>(r, number, wire)?;
    store(v, slot, presence, i, explicit);
    Ok(())
}

/// Merges a singular `bytes`/`string` field (the last occurrence wins).
///
/// # Errors
///
/// As [`read_bytes`].
#[inline(always)]
pub fn merge_single_bytes<'a, B: BytesField<'a> + PartialEq + Default>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
    slot: &mut B,
    presence: &mut [u32],
    i: usize,
    explicit: bool,
) -> Result<(), ProtoDecodeError> {
    let v = read_bytes::<B>(r, number, wire)?;
    store(v, slot, presence, i, explicit);
    Ok(())
}

/// Merges a singular message field: into the message already there, or a
/// new one.
///
/// # Errors
///
/// As [`merge_message`].
#[inline(always)]
pub fn merge_nested<'a, M: ProtoImpl<'a>>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
    slot: &mut Option<Nested<'a, M>>,
) -> Result<(), ProtoDecodeError> {
    let arena = r.arena;
    let m = slot.get_or_insert_with(|| crate::field::storage::nested_in(M::new_in(arena), arena));
    merge_message(r, number, wire, &mut **m)
}

/// Appends to a repeated scalar field, packed (`Len`) or not: a decoder
/// accepts both, as the protobuf specification requires.
///
/// # Errors
///
/// Another wire type, or a value's error.
#[inline]
pub fn merge_list<'a, C: ScalarCodec>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
    list: &mut List<'a, C::Value>,
) -> Result<(), ProtoDecodeError> {
    if wire == WireType::Len {
        let len = r.len_prefix()?;
        let end = r.pos + len;
        let outer_end = r.end;
        r.end = end;
        while r.pos < end {
            list.append(C::get(r)?);
        }
        r.end = outer_end;
        Ok(())
    } else {
        list.append(read_scalar::<C>(r, number, wire)?);
        Ok(())
    }
}

/// Appends one element to a repeated `bytes`/`string` field.
///
/// # Errors
///
/// As [`read_bytes`].
#[inline]
pub fn merge_list_bytes<'a, B: BytesField<'a>>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
    list: &mut List<'a, B>,
) -> Result<(), ProtoDecodeError> {
    list.append(read_bytes::<B>(r, number, wire)?);
    Ok(())
}

/// Appends one element to a repeated message field.
///
/// # Errors
///
/// As [`merge_message`].
#[inline]
pub fn merge_list_message<'a, M: ProtoImpl<'a>>(
    r: &mut ProtoReader<'a>,
    number: u32,
    wire: WireType,
    list: &mut List<'a, M>,
) -> Result<(), ProtoDecodeError> {
    expect(number, wire, WireType::Len)?;
    let mut m = M::new_in(r.arena);
    merge_message(r, number, wire, &mut m)?;
    list.append(m);
    Ok(())
}

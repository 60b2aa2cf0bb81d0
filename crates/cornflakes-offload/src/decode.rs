//! The receive half of the engine: parses proto3 bytes into arena objects
//! with the table, as Zerializer's NIC writes received objects into the RX
//! arena.
//!
//! # Contract (hostile input)
//!
//! Never panics and never reads out of bounds, whatever the bytes: every
//! length is checked against what remains, varints longer than 64 bits,
//! field number 0, wire types 6 and 7, wire types that do not fit a known
//! field, strings that are not UTF-8 and nesting deeper than
//! [`RECURSION_LIMIT`] are [`DecodeError`]s. Unknown fields are skipped
//! (groups too, within the same depth limit). Memory is bounded by the
//! arena's limit ([`Arena::with_limit`]): past it, [`DecodeError::ArenaFull`].
//! Semantics follow prost's merge: a repeated singular field keeps the last
//! value, a repeated message field merges, repeated fields append, and
//! packed and unpacked encodings of a repeated scalar are both accepted.

use crate::encode::RECURSION_LIMIT;
use crate::object::{Arena, ObjId, Slot};
use crate::schema::{
    FieldEntry, FieldType, MessageTable, SchemaId, SchemaSet, WIRE_END_GROUP, WIRE_FIXED32, WIRE_FIXED64, WIRE_LEN,
    WIRE_START_GROUP, WIRE_VARINT,
};
use crate::wire::{decoded_fixed32, decoded_value, get_varint};

/// Why received bytes could not be parsed. The engine counts it and drops
/// the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends inside a value.
    #[error("truncated input")]
    Truncated,
    /// A varint longer than 10 bytes or 64 bits.
    #[error("invalid varint")]
    BadVarint,
    /// Field number 0 or above 2^29 - 1, or wire type 6 or 7.
    #[error("invalid key")]
    BadKey,
    /// A known field arrived with a wire type its type cannot have.
    #[error("field {0}: wrong wire type")]
    WrongWireType(u32),
    /// A string field that is not UTF-8.
    #[error("field {0}: string is not UTF-8")]
    InvalidUtf8(u32),
    /// Nesting deeper than [`RECURSION_LIMIT`].
    #[error("recursion limit reached")]
    TooDeep,
    /// A group not closed by its own end tag.
    #[error("unbalanced group")]
    BadGroup,
    /// The receive arena's limit.
    #[error("message needs more memory than the receive arena's limit")]
    ArenaFull,
    /// The schema id is not in the set.
    #[error("unknown schema id {0}")]
    UnknownSchema(u32),
}

impl From<crate::object::ArenaFull> for DecodeError {
    fn from(_: crate::object::ArenaFull) -> Self {
        Self::ArenaFull
    }
}

/// The decoder: reusable scratch for repeated fields.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Items of repeated fields not yet placed, as (slot, item).
    pending: Vec<(u16, Slot)>,
}

impl Decoder {
    /// A decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `buf` as a message of table `schema` into a new object of
    /// `arena`.
    ///
    /// # Errors
    ///
    /// See [`DecodeError`]; the arena may then hold a partial object
    /// (clear it before reuse).
    pub fn decode(
        &mut self,
        set: &SchemaSet,
        schema: SchemaId,
        buf: &[u8],
        arena: &mut Arena,
    ) -> Result<ObjId, DecodeError> {
        self.pending.clear();
        let table = set.get(schema).ok_or(DecodeError::UnknownSchema(schema.0))?;
        let root = arena.alloc(table.slots)?;
        self.merge(set, table, buf, arena, root, 0)?;
        Ok(root)
    }

    fn merge(
        &mut self,
        set: &SchemaSet,
        table: &MessageTable,
        buf: &[u8],
        arena: &mut Arena,
        obj: ObjId,
        depth: u32,
    ) -> Result<(), DecodeError> {
        if depth > RECURSION_LIMIT {
            return Err(DecodeError::TooDeep);
        }
        let base = self.pending.len();
        let mut pos = 0;
        while pos < buf.len() {
            let (number, wire) = read_key(buf, &mut pos)?;
            let Some(f) = table.field_by_number(number) else {
                skip_field(buf, &mut pos, number, wire, depth)?;
                continue;
            };
            if f.repeated {
                self.repeated(set, f, wire, buf, &mut pos, arena, depth)?;
            } else {
                let value = self.singular(set, f, wire, buf, &mut pos, arena, obj, depth)?;
                arena.set(obj, f.slot, value);
            }
        }
        self.place_lists(arena, obj, base)
    }

    #[allow(clippy::too_many_arguments)]
    fn singular(
        &mut self,
        set: &SchemaSet,
        f: &FieldEntry,
        wire: u32,
        buf: &[u8],
        pos: &mut usize,
        arena: &mut Arena,
        obj: ObjId,
        depth: u32,
    ) -> Result<Slot, DecodeError> {
        if wire != f.ty.wire_type() {
            return Err(DecodeError::WrongWireType(f.number));
        }
        match f.ty {
            FieldType::Message(id) => {
                let body = read_len(buf, pos)?;
                let t = set.get(id).ok_or(DecodeError::UnknownSchema(id.0))?;
                // A message field seen twice merges (prost, protobuf).
                let child = match arena.get(obj, f.slot) {
                    Some(Slot::Message(child)) => child,
                    _ => arena.alloc(t.slots)?,
                };
                self.merge(set, t, body, arena, child, depth + 1)?;
                Ok(Slot::Message(child))
            }
            _ => scalar_or_bytes(f, wire, buf, pos, arena),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn repeated(
        &mut self,
        set: &SchemaSet,
        f: &FieldEntry,
        wire: u32,
        buf: &[u8],
        pos: &mut usize,
        arena: &mut Arena,
        depth: u32,
    ) -> Result<(), DecodeError> {
        match f.ty {
            FieldType::Message(id) => {
                if wire != WIRE_LEN {
                    return Err(DecodeError::WrongWireType(f.number));
                }
                let body = read_len(buf, pos)?;
                let t = set.get(id).ok_or(DecodeError::UnknownSchema(id.0))?;
                let child = arena.alloc(t.slots)?;
                self.merge(set, t, body, arena, child, depth + 1)?;
                self.pending.push((f.slot, Slot::Message(child)));
            }
            ty if ty.packable() && wire == WIRE_LEN => {
                let body = read_len(buf, pos)?;
                let mut at = 0;
                while at < body.len() {
                    let item = scalar_or_bytes(f, ty.wire_type(), body, &mut at, arena)?;
                    self.pending.push((f.slot, item));
                }
            }
            _ => {
                if wire != f.ty.wire_type() {
                    return Err(DecodeError::WrongWireType(f.number));
                }
                let item = scalar_or_bytes(f, wire, buf, pos, arena)?;
                self.pending.push((f.slot, item));
            }
        }
        // Each pending item consumed at least one input byte: the scratch
        // is bounded by the message's length.
        Ok(())
    }

    /// Moves the repeated items this object collected (`pending[base..]`)
    /// into contiguous lists, appending to lists a merge already made.
    fn place_lists(&mut self, arena: &mut Arena, obj: ObjId, base: usize) -> Result<(), DecodeError> {
        if self.pending.len() == base {
            return Ok(());
        }
        self.pending[base..].sort_by_key(|(slot, _)| *slot); // stable: keeps wire order
        let mut i = base;
        while i < self.pending.len() {
            let slot = self.pending[i].0;
            let end = i + self.pending[i..].iter().take_while(|(s, _)| *s == slot).count();
            let old: Vec<Slot> = match arena.get(obj, slot) {
                Some(s @ Slot::List { .. }) => arena.list(s).map(<[Slot]>::to_vec).unwrap_or_default(),
                _ => Vec::new(),
            };
            let len = old.len() + (end - i);
            let items = old.into_iter().chain(self.pending[i..end].iter().map(|(_, item)| *item));
            let start = arena.extend_slots(items, len)?;
            arena.set(obj, slot, Slot::List { start, len: len as u32 });
            i = end;
        }
        self.pending.truncate(base);
        Ok(())
    }
}

/// A scalar, bytes or string value with the field's wire type.
#[inline]
fn scalar_or_bytes(
    f: &FieldEntry,
    wire: u32,
    buf: &[u8],
    pos: &mut usize,
    arena: &mut Arena,
) -> Result<Slot, DecodeError> {
    Ok(match wire {
        WIRE_VARINT => Slot::Scalar(decoded_value(f.ty, get_varint(buf, pos).ok_or_else(|| varint_error(buf, *pos))?)),
        WIRE_FIXED32 => {
            let b: [u8; 4] = take(buf, pos, 4)?.try_into().map_err(|_| DecodeError::Truncated)?;
            Slot::Scalar(decoded_fixed32(f.ty, u32::from_le_bytes(b)))
        }
        WIRE_FIXED64 => {
            let b: [u8; 8] = take(buf, pos, 8)?.try_into().map_err(|_| DecodeError::Truncated)?;
            Slot::Scalar(u64::from_le_bytes(b))
        }
        _ => {
            let data = read_len(buf, pos)?;
            if f.ty == FieldType::String && std::str::from_utf8(data).is_err() {
                return Err(DecodeError::InvalidUtf8(f.number));
            }
            arena.push_bytes(data)?
        }
    })
}

fn varint_error(buf: &[u8], pos: usize) -> DecodeError {
    // Ran off the end, or more than 64 bits.
    if buf.len().saturating_sub(pos) < 10 && buf[pos.min(buf.len())..].iter().all(|b| b & 0x80 != 0) {
        DecodeError::Truncated
    } else {
        DecodeError::BadVarint
    }
}

#[inline]
fn read_key(buf: &[u8], pos: &mut usize) -> Result<(u32, u32), DecodeError> {
    let key = get_varint(buf, pos).ok_or_else(|| varint_error(buf, *pos))?;
    let number = key >> 3;
    let wire = (key & 7) as u32;
    if number == 0 || number > (1 << 29) - 1 || wire > WIRE_FIXED32 {
        return Err(DecodeError::BadKey);
    }
    Ok((number as u32, wire))
}

#[inline]
fn take<'b>(buf: &'b [u8], pos: &mut usize, n: usize) -> Result<&'b [u8], DecodeError> {
    let end = pos.checked_add(n).ok_or(DecodeError::Truncated)?;
    let out = buf.get(*pos..end).ok_or(DecodeError::Truncated)?;
    *pos = end;
    Ok(out)
}

#[inline]
fn read_len<'b>(buf: &'b [u8], pos: &mut usize) -> Result<&'b [u8], DecodeError> {
    let len = get_varint(buf, pos).ok_or_else(|| varint_error(buf, *pos))?;
    let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
    take(buf, pos, len)
}

/// Skips an unknown field's value (groups included, depth-limited).
fn skip_field(buf: &[u8], pos: &mut usize, number: u32, wire: u32, depth: u32) -> Result<(), DecodeError> {
    match wire {
        WIRE_VARINT => {
            get_varint(buf, pos).ok_or_else(|| varint_error(buf, *pos))?;
        }
        WIRE_FIXED64 => {
            take(buf, pos, 8)?;
        }
        WIRE_FIXED32 => {
            take(buf, pos, 4)?;
        }
        WIRE_LEN => {
            read_len(buf, pos)?;
        }
        WIRE_START_GROUP => {
            if depth + 1 > RECURSION_LIMIT {
                return Err(DecodeError::TooDeep);
            }
            loop {
                if *pos >= buf.len() {
                    return Err(DecodeError::BadGroup);
                }
                let (n, w) = read_key(buf, pos)?;
                if w == WIRE_END_GROUP {
                    if n != number {
                        return Err(DecodeError::BadGroup);
                    }
                    break;
                }
                skip_field(buf, pos, n, w, depth + 1)?;
            }
        }
        _ => return Err(DecodeError::BadGroup), // an end tag with no start
    }
    Ok(())
}

//! The transmit half of the engine: walks an object with its table and
//! writes standard proto3 (byte-identical to prost), as scatter-gather
//! pieces.
//!
//! Two passes, as protobuf's cached sizes and prost's `encoded_len`:
//! 1. **sizes**: one walk computes the length of every nested message and
//!    packed run, in pre-order, into a list; nothing is written.
//! 2. **write**: a second walk writes keys, varints, fixed values and the
//!    lengths from the list into the copied run; each registered bytes
//!    field at or above the threshold ends the run and becomes a zero-copy
//!    piece (its key and length are the last bytes of the run before it).
//!
//! Nothing is encoded twice. Every slot read is bounds- and type-checked
//! in pass 1 ([`EncodeError`]); nesting deeper than [`RECURSION_LIMIT`]
//! (which a cycle of `Message` slots would reach) is refused.

use cornflakes::RcBuf;
use cornflakes_datapath::Segment;
use smallvec::SmallVec;

use crate::object::{Arena, ObjId, Slot};
use crate::schema::{FieldEntry, FieldType, MessageTable, SchemaId, SchemaSet};
use crate::wire::{encoded_value, is_default, put_varint, varint_len};

/// How many levels of messages may nest below the root, on transmit and
/// receive (prost's limit: 100 levels decode, 101 do not).
pub const RECURSION_LIMIT: u32 = 100;

/// Why an object could not be encoded. The engine reports it on the
/// completion ring; nothing is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The descriptor's schema id is not in the engine's set.
    #[error("unknown schema id {0}")]
    UnknownSchema(u32),
    /// A slot index points outside the arena.
    #[error("field {field}: slot outside the arena")]
    BadSlot {
        /// Field number.
        field: u32,
    },
    /// A slot's kind does not fit the field's type.
    #[error("field {field}: slot kind does not match the field type")]
    TypeMismatch {
        /// Field number.
        field: u32,
    },
    /// A registered buffer id or range is wrong.
    #[error("field {field}: unknown registered buffer or range outside it")]
    BadRegistered {
        /// Field number.
        field: u32,
    },
    /// Nesting deeper than [`RECURSION_LIMIT`] (or a cycle).
    #[error("messages nest deeper than {RECURSION_LIMIT} (a cycle of Message slots?)")]
    TooDeep,
}

/// One piece of an encoded message.
#[derive(Debug)]
enum Piece {
    /// `out[start..end]`, copied by the datapath.
    Copied(usize, usize),
    /// A registered buffer's bytes, sent zero-copy.
    ZeroCopy(RcBuf),
}

/// The encoder: reusable scratch (sizes, the copied runs, the pieces).
#[derive(Debug)]
pub struct Encoder {
    threshold: usize,
    sizes: Vec<usize>,
    out: Vec<u8>,
    pieces: Vec<Piece>,
    run_start: usize,
}

impl Encoder {
    /// An encoder that sends registered bytes of `threshold` bytes or more
    /// zero-copy (`usize::MAX`: copy everything).
    pub fn new(threshold: usize) -> Self {
        Self { threshold, sizes: Vec::new(), out: Vec::new(), pieces: Vec::new(), run_start: 0 }
    }

    /// Encodes the object `root` (of table `schema`) of `arena`;
    /// `registered` are the buffers [`Slot::Registered`] refers to. Returns
    /// the message's length; the pieces are then available from
    /// [`segments`](Self::segments) or [`to_vec`](Self::to_vec).
    ///
    /// # Errors
    ///
    /// See [`EncodeError`]; nothing is kept of a failed encoding.
    pub fn encode(
        &mut self,
        set: &SchemaSet,
        schema: SchemaId,
        arena: &Arena,
        root: ObjId,
        registered: &[RcBuf],
    ) -> Result<usize, EncodeError> {
        self.sizes.clear();
        self.out.clear();
        self.pieces.clear();
        self.run_start = 0;
        let table = set.get(schema).ok_or(EncodeError::UnknownSchema(schema.0))?;
        let mut walk = Sizer { set, arena, registered, sizes: &mut self.sizes };
        let len = walk.message(table, root, 0)?;
        self.out.reserve(len.min(1 << 16));
        let mut cursor = 1; // sizes[0] is the root's length
        self.write_message(set, table, arena, root, registered, &mut cursor);
        if self.out.len() > self.run_start || self.pieces.is_empty() {
            self.pieces.push(Piece::Copied(self.run_start, self.out.len()));
        }
        Ok(len)
    }

    /// The last encoded message as datapath segments, in order.
    pub fn segments(&self) -> SmallVec<[Segment<'_>; 8]> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Copied(s, e) => Segment::Copy(&self.out[*s..*e]),
                Piece::ZeroCopy(b) => Segment::ZeroCopy(b.clone()),
            })
            .collect()
    }

    /// Number of zero-copy pieces in the last encoded message.
    pub fn zero_copy_pieces(&self) -> usize {
        self.pieces.iter().filter(|p| matches!(p, Piece::ZeroCopy(_))).count()
    }

    /// The last encoded message as one contiguous buffer (tests, and
    /// comparing with prost).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for p in &self.pieces {
            match p {
                Piece::Copied(s, e) => v.extend_from_slice(&self.out[*s..*e]),
                Piece::ZeroCopy(b) => v.extend_from_slice(b),
            }
        }
        v
    }

    // Pass 2. Every slot was checked by pass 1, so lookups that fail here
    // cannot happen; they write nothing rather than panic.
    fn write_message(
        &mut self,
        set: &SchemaSet,
        table: &MessageTable,
        arena: &Arena,
        obj: ObjId,
        registered: &[RcBuf],
        cursor: &mut usize,
    ) {
        for f in &table.fields {
            let Some(slot) = arena.get(obj, f.slot) else { continue };
            if !f.repeated {
                if emitted(f, slot) {
                    self.write_value(set, f, slot, arena, registered, cursor, true);
                }
                continue;
            }
            let Some(items) = arena.list(slot) else { continue };
            if items.is_empty() {
                continue;
            }
            if f.packed {
                put_varint(&mut self.out, u64::from(f.key));
                let body = self.sizes.get(*cursor).copied().unwrap_or(0);
                *cursor += 1;
                put_varint(&mut self.out, body as u64);
                for item in items {
                    self.write_value(set, f, *item, arena, registered, cursor, false);
                }
            } else {
                for item in items {
                    self.write_value(set, f, *item, arena, registered, cursor, true);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn write_value(
        &mut self,
        set: &SchemaSet,
        f: &FieldEntry,
        slot: Slot,
        arena: &Arena,
        registered: &[RcBuf],
        cursor: &mut usize,
        with_key: bool,
    ) {
        if with_key {
            put_varint(&mut self.out, u64::from(f.key));
        }
        match (f.ty, slot) {
            (FieldType::Message(id), Slot::Message(child)) => {
                let len = self.sizes.get(*cursor).copied().unwrap_or(0);
                *cursor += 1;
                put_varint(&mut self.out, len as u64);
                if let Some(t) = set.get(id) {
                    self.write_message(set, t, arena, child, registered, cursor);
                }
            }
            (FieldType::Bytes | FieldType::String, Slot::Bytes { .. }) => {
                let data = arena.bytes(slot).unwrap_or_default();
                put_varint(&mut self.out, data.len() as u64);
                self.out.extend_from_slice(data);
            }
            (FieldType::Bytes | FieldType::String, Slot::Registered { buf, off, len }) => {
                put_varint(&mut self.out, u64::from(len));
                let Some(b) = registered.get(buf.0 as usize) else { return };
                let range = off as usize..off as usize + len as usize;
                if len as usize >= self.threshold {
                    if let Some(piece) = b.try_slice(range) {
                        self.pieces.push(Piece::Copied(self.run_start, self.out.len()));
                        self.pieces.push(Piece::ZeroCopy(piece));
                        self.run_start = self.out.len();
                    }
                } else if let Some(data) = b.get(range) {
                    self.out.extend_from_slice(data);
                }
            }
            (ty, Slot::Scalar(v)) => match ty.wire_type() {
                crate::schema::WIRE_FIXED32 => self.out.extend_from_slice(&(v as u32).to_le_bytes()),
                crate::schema::WIRE_FIXED64 => self.out.extend_from_slice(&v.to_le_bytes()),
                _ => put_varint(&mut self.out, encoded_value(ty, v)),
            },
            _ => {}
        }
    }
}

/// Whether a singular field's slot is written (proto3 presence rules, as
/// prost: implicit-presence scalars and bytes only when not the default;
/// messages whenever set; explicit presence whenever set).
#[inline]
fn emitted(f: &FieldEntry, slot: Slot) -> bool {
    match slot {
        Slot::Empty => false,
        _ if f.explicit_presence => true,
        Slot::Scalar(v) => !is_default(f.ty, v),
        Slot::Bytes { len, .. } | Slot::Registered { len, .. } => len != 0,
        Slot::Message(_) | Slot::List { .. } => true,
    }
}

/// Pass 1.
struct Sizer<'a> {
    set: &'a SchemaSet,
    arena: &'a Arena,
    registered: &'a [RcBuf],
    sizes: &'a mut Vec<usize>,
}

impl Sizer<'_> {
    fn message(&mut self, table: &MessageTable, obj: ObjId, depth: u32) -> Result<usize, EncodeError> {
        if depth > RECURSION_LIMIT {
            return Err(EncodeError::TooDeep);
        }
        let me = self.sizes.len();
        self.sizes.push(0);
        let mut total = 0usize;
        for f in &table.fields {
            let slot = self.arena.get(obj, f.slot).ok_or(EncodeError::BadSlot { field: f.number })?;
            let key_len = varint_len(u64::from(f.key));
            if !f.repeated {
                if matches!(slot, Slot::List { .. }) {
                    return Err(EncodeError::TypeMismatch { field: f.number });
                }
                if emitted(f, slot) {
                    total += key_len + self.value(f, slot, depth)?;
                }
                continue;
            }
            let items = match slot {
                Slot::Empty => continue,
                Slot::List { .. } => self.arena.list(slot).ok_or(EncodeError::BadSlot { field: f.number })?,
                _ => return Err(EncodeError::TypeMismatch { field: f.number }),
            };
            if items.is_empty() {
                continue;
            }
            if f.packed {
                let at = self.sizes.len();
                self.sizes.push(0);
                let mut body = 0;
                for item in items {
                    body += self.value(f, *item, depth)?;
                }
                self.sizes[at] = body;
                total += key_len + varint_len(body as u64) + body;
            } else {
                for item in items {
                    total += key_len + self.value(f, *item, depth)?;
                }
            }
        }
        self.sizes[me] = total;
        Ok(total)
    }

    /// Bytes of one value (with its length prefix, without its key).
    #[inline]
    fn value(&mut self, f: &FieldEntry, slot: Slot, depth: u32) -> Result<usize, EncodeError> {
        let mismatch = EncodeError::TypeMismatch { field: f.number };
        Ok(match (f.ty, slot) {
            (FieldType::Message(id), Slot::Message(child)) => {
                let t = self.set.get(id).ok_or(EncodeError::UnknownSchema(id.0))?;
                let len = self.message(t, child, depth + 1)?;
                varint_len(len as u64) + len
            }
            (FieldType::Message(_), _) => return Err(mismatch),
            (FieldType::Bytes | FieldType::String, Slot::Bytes { len, .. }) => {
                self.arena.bytes(slot).ok_or(EncodeError::BadSlot { field: f.number })?;
                varint_len(u64::from(len)) + len as usize
            }
            (FieldType::Bytes | FieldType::String, Slot::Registered { buf, off, len }) => {
                let b = self.registered.get(buf.0 as usize).ok_or(EncodeError::BadRegistered { field: f.number })?;
                if (off as usize).checked_add(len as usize).is_none_or(|end| end > b.len()) {
                    return Err(EncodeError::BadRegistered { field: f.number });
                }
                varint_len(u64::from(len)) + len as usize
            }
            (FieldType::Bytes | FieldType::String, _) => return Err(mismatch),
            (ty, Slot::Scalar(v)) => match ty.wire_type() {
                crate::schema::WIRE_FIXED32 => 4,
                crate::schema::WIRE_FIXED64 => 8,
                _ => varint_len(encoded_value(ty, v)),
            },
            _ => return Err(mismatch),
        })
    }
}

//! Schema tables: what the engine reads instead of generated code, as
//! Zerializer's NIC is "programmed" with a message layout (§3-4).
//!
//! A [`SchemaSet`] holds one [`MessageTable`] per message type, each a list
//! of [`FieldEntry`] rows sorted by field number (the order prost writes
//! fields in). A row says where the field's value lives in an object (its
//! slot index), its protobuf type (which varint transform or fixed width to
//! use), whether it is repeated and packed, and whether it has explicit
//! presence. Tables are built once, at start, from `.proto` files with
//! protox ([`SchemaSet::from_protos`]).

use std::collections::HashMap;
use std::path::Path;

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

/// Index of a message table in its [`SchemaSet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SchemaId(pub u32);

/// The protobuf type of a field: how its values become bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// `int32` and enums: varint of the value sign-extended to 64 bits.
    Int32,
    /// `int64`: varint of the two's complement.
    Int64,
    /// `uint32`: varint.
    Uint32,
    /// `uint64`: varint.
    Uint64,
    /// `sint32`: zigzag, then varint.
    Sint32,
    /// `sint64`: zigzag, then varint.
    Sint64,
    /// `bool`: varint 0 or 1.
    Bool,
    /// `fixed32`: 4 bytes little-endian.
    Fixed32,
    /// `sfixed32`: 4 bytes little-endian.
    Sfixed32,
    /// `float`: IEEE 754 bits, 4 bytes little-endian.
    Float,
    /// `fixed64`: 8 bytes little-endian.
    Fixed64,
    /// `sfixed64`: 8 bytes little-endian.
    Sfixed64,
    /// `double`: IEEE 754 bits, 8 bytes little-endian.
    Double,
    /// `string`: length-delimited, UTF-8 checked on receive.
    String,
    /// `bytes`: length-delimited.
    Bytes,
    /// A nested message (the table it uses): length-delimited.
    Message(SchemaId),
}

/// Protobuf wire types.
pub(crate) const WIRE_VARINT: u32 = 0;
pub(crate) const WIRE_FIXED64: u32 = 1;
pub(crate) const WIRE_LEN: u32 = 2;
pub(crate) const WIRE_START_GROUP: u32 = 3;
pub(crate) const WIRE_END_GROUP: u32 = 4;
pub(crate) const WIRE_FIXED32: u32 = 5;

impl FieldType {
    /// The wire type of one value of this type.
    pub fn wire_type(self) -> u32 {
        match self {
            Self::Int32 | Self::Int64 | Self::Uint32 | Self::Uint64 | Self::Sint32 | Self::Sint64 | Self::Bool => {
                WIRE_VARINT
            }
            Self::Fixed32 | Self::Sfixed32 | Self::Float => WIRE_FIXED32,
            Self::Fixed64 | Self::Sfixed64 | Self::Double => WIRE_FIXED64,
            Self::String | Self::Bytes | Self::Message(_) => WIRE_LEN,
        }
    }

    /// Whether repeated values of this type may be packed (scalars only).
    pub fn packable(self) -> bool {
        self.wire_type() != WIRE_LEN
    }
}

/// One row of a message table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldEntry {
    /// The field's name in the schema (for diagnostics and look-ups).
    pub name: String,
    /// Field number (1 ..= 2^29 - 1).
    pub number: u32,
    /// Protobuf type.
    pub ty: FieldType,
    /// `repeated`.
    pub repeated: bool,
    /// Repeated scalars written as one length-delimited run (proto3's
    /// default; `[packed = false]` turns it off).
    pub packed: bool,
    /// proto3 `optional` or a `oneof` member: written whenever set, even
    /// with the default value.
    pub explicit_presence: bool,
    /// Index of the field's slot in an object of this type.
    pub slot: u16,
    /// The field's key (tag and wire type) as a varint, precomputed.
    pub(crate) key: u32,
}

/// The table of one message type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageTable {
    /// Fully qualified name, without the leading dot (`offload.Pair`).
    pub name: String,
    /// Fields sorted by number.
    pub fields: Vec<FieldEntry>,
    /// Slots in an object of this type (one per field).
    pub slots: u16,
    /// Field number -> row index, for field numbers below [`DENSE_LOOKUP`].
    dense: Vec<u16>,
}

/// Field numbers below this are looked up in a direct table on receive;
/// larger ones by binary search.
pub const DENSE_LOOKUP: u32 = 64;
const NO_FIELD: u16 = u16::MAX;

impl MessageTable {
    /// The row of field `number`, if the message has one.
    #[inline]
    pub fn field_by_number(&self, number: u32) -> Option<&FieldEntry> {
        if number < DENSE_LOOKUP {
            let i = *self.dense.get(number as usize)?;
            return (i != NO_FIELD).then(|| &self.fields[usize::from(i)]);
        }
        self.fields.binary_search_by_key(&number, |f| f.number).ok().map(|i| &self.fields[i])
    }

    /// The row of the field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldEntry> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Why schema tables could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// protox could not read or compile the `.proto` files.
    #[error("cannot compile the schema: {0}")]
    Parse(String),
    /// The schema uses something the engine does not implement.
    #[error("{message}.{field}: {what} is not supported by the offload engine")]
    Unsupported {
        /// The message.
        message: String,
        /// The field.
        field: String,
        /// What is missing.
        what: &'static str,
    },
    /// A message refers to a type that is not in the set.
    #[error("{0}: unknown type {1}")]
    UnknownType(String, String),
    /// Too many fields or messages for the table's integer widths.
    #[error("{0}: too many fields or messages")]
    TooLarge(String),
}

/// Every message table of a schema, by id and by name.
#[derive(Clone, Debug, Default)]
pub struct SchemaSet {
    tables: Vec<MessageTable>,
    by_name: HashMap<String, SchemaId>,
}

impl SchemaSet {
    /// Compiles `.proto` files (with protox, no `protoc` needed) and builds
    /// a table for every message in them and their imports.
    ///
    /// # Errors
    ///
    /// [`SchemaError::Parse`] when the files do not compile;
    /// [`SchemaError::Unsupported`] for maps and groups.
    ///
    /// # Examples
    ///
    /// ```
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
    /// let set = cornflakes_offload::SchemaSet::from_protos(&[format!("{dir}/offload.proto")], &[dir])?;
    /// let pair = set.table(set.id("offload.Pair").unwrap());
    /// assert_eq!(pair.fields.len(), 2);
    /// # Ok::<(), cornflakes_offload::SchemaError>(())
    /// ```
    pub fn from_protos(protos: &[impl AsRef<Path>], includes: &[impl AsRef<Path>]) -> Result<Self, SchemaError> {
        let fds = protox::compile(protos, includes).map_err(|e| SchemaError::Parse(format!("{e:?}")))?;
        Self::from_descriptors(&fds)
    }

    /// Compiles one `.proto` file given as text (no imports other than
    /// protobuf's well-known types), named `name`.
    ///
    /// # Errors
    ///
    /// As [`from_protos`](Self::from_protos).
    ///
    /// # Examples
    ///
    /// ```
    /// let set = cornflakes_offload::SchemaSet::from_source(
    ///     "kv.proto",
    ///     "syntax = \"proto3\"; package kv; message Get { uint32 id = 1; bytes key = 2; }",
    /// )?;
    /// assert_eq!(set.table(set.id("kv.Get").unwrap()).fields[1].name, "key");
    /// # Ok::<(), cornflakes_offload::SchemaError>(())
    /// ```
    pub fn from_source(name: &str, source: &str) -> Result<Self, SchemaError> {
        // Owned: the compiler wants a 'static resolver.
        struct OneFile {
            name: String,
            source: String,
        }
        impl protox::file::FileResolver for OneFile {
            fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
                if name == self.name {
                    protox::file::File::from_source(name, &self.source)
                } else {
                    protox::file::GoogleFileResolver::new().open_file(name)
                }
            }
        }
        let mut compiler =
            protox::Compiler::with_file_resolver(OneFile { name: name.to_owned(), source: source.to_owned() });
        compiler.include_imports(true);
        compiler.open_file(name).map_err(|e| SchemaError::Parse(format!("{e:?}")))?;
        Self::from_descriptors(&compiler.file_descriptor_set())
    }

    /// Builds tables from a compiled descriptor set.
    ///
    /// # Errors
    ///
    /// As [`from_protos`](Self::from_protos), without `Parse`.
    pub fn from_descriptors(fds: &FileDescriptorSet) -> Result<Self, SchemaError> {
        // First pass: give every message an id, so fields can refer to any.
        let mut named: Vec<(String, &DescriptorProto)> = Vec::new();
        let mut enums = std::collections::HashSet::new();
        for file in &fds.file {
            // proto2 and editions differ in presence and packing defaults.
            if file.syntax() != "proto3" {
                return Err(SchemaError::Unsupported {
                    message: file.name().to_owned(),
                    field: String::new(),
                    what: "a syntax other than proto3",
                });
            }
            let prefix = if file.package().is_empty() { String::new() } else { format!("{}.", file.package()) };
            for e in &file.enum_type {
                enums.insert(format!("{prefix}{}", e.name()));
            }
            for m in &file.message_type {
                collect(&prefix, m, &mut named, &mut enums);
            }
        }
        let mut set = SchemaSet::default();
        for (i, (name, _)) in named.iter().enumerate() {
            let id = u32::try_from(i).map_err(|_| SchemaError::TooLarge(name.clone()))?;
            set.by_name.insert(name.clone(), SchemaId(id));
        }
        for (name, m) in &named {
            let table = build_table(name, m, &set.by_name, &enums)?;
            set.tables.push(table);
        }
        Ok(set)
    }

    /// The id of the message called `name` (fully qualified, no leading dot).
    pub fn id(&self, name: &str) -> Option<SchemaId> {
        self.by_name.get(name).copied()
    }

    /// The table with id `id`.
    ///
    /// # Panics
    ///
    /// When `id` is not from this set (use [`get`](Self::get) otherwise).
    pub fn table(&self, id: SchemaId) -> &MessageTable {
        &self.tables[id.0 as usize]
    }

    /// The table with id `id`, if it is from this set.
    #[inline]
    pub fn get(&self, id: SchemaId) -> Option<&MessageTable> {
        self.tables.get(id.0 as usize)
    }

    /// Number of tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// Whether the set has no tables.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

fn collect<'d>(
    prefix: &str,
    m: &'d DescriptorProto,
    out: &mut Vec<(String, &'d DescriptorProto)>,
    enums: &mut std::collections::HashSet<String>,
) {
    let name = format!("{prefix}{}", m.name());
    let inner = format!("{name}.");
    for e in &m.enum_type {
        enums.insert(format!("{inner}{}", e.name()));
    }
    for nested in &m.nested_type {
        collect(&inner, nested, out, enums);
    }
    out.push((name, m));
}

fn build_table(
    name: &str,
    m: &DescriptorProto,
    ids: &HashMap<String, SchemaId>,
    enums: &std::collections::HashSet<String>,
) -> Result<MessageTable, SchemaError> {
    let unsupported =
        |field: &str, what| SchemaError::Unsupported { message: name.to_owned(), field: field.to_owned(), what };
    let mut fields = Vec::with_capacity(m.field.len());
    for f in &m.field {
        let type_name = f.type_name().trim_start_matches('.');
        let ty = match f.r#type() {
            Type::Int32 => FieldType::Int32,
            Type::Int64 => FieldType::Int64,
            Type::Uint32 => FieldType::Uint32,
            Type::Uint64 => FieldType::Uint64,
            Type::Sint32 => FieldType::Sint32,
            Type::Sint64 => FieldType::Sint64,
            Type::Bool => FieldType::Bool,
            Type::Fixed32 => FieldType::Fixed32,
            Type::Sfixed32 => FieldType::Sfixed32,
            Type::Float => FieldType::Float,
            Type::Fixed64 => FieldType::Fixed64,
            Type::Sfixed64 => FieldType::Sfixed64,
            Type::Double => FieldType::Double,
            Type::String => FieldType::String,
            Type::Bytes => FieldType::Bytes,
            Type::Enum if enums.contains(type_name) => FieldType::Int32,
            Type::Enum => return Err(SchemaError::UnknownType(name.to_owned(), type_name.to_owned())),
            Type::Message => {
                let id = *ids
                    .get(type_name)
                    .ok_or_else(|| SchemaError::UnknownType(name.to_owned(), type_name.to_owned()))?;
                FieldType::Message(id)
            }
            Type::Group => return Err(unsupported(f.name(), "a group")),
        };
        if matches!(ty, FieldType::Message(_))
            && m.nested_type.iter().any(|n| {
                n.options.as_ref().is_some_and(|o| o.map_entry()) && type_name == format!("{name}.{}", n.name())
            })
        {
            return Err(unsupported(f.name(), "a map"));
        }
        let repeated = f.label() == Label::Repeated;
        // proto3: packed unless the option says otherwise.
        let packed = repeated && ty.packable() && f.options.as_ref().and_then(|o| o.packed).unwrap_or(true);
        let explicit_presence = f.proto3_optional() || f.oneof_index.is_some();
        let number = u32::try_from(f.number()).map_err(|_| SchemaError::TooLarge(name.to_owned()))?;
        let wire = if packed { crate::schema::WIRE_LEN } else { ty.wire_type() };
        fields.push(FieldEntry {
            name: f.name().to_owned(),
            number,
            ty,
            repeated,
            packed,
            explicit_presence,
            slot: 0,
            key: (number << 3) | wire,
        });
    }
    let slots = u16::try_from(fields.len()).map_err(|_| SchemaError::TooLarge(name.to_owned()))?;
    if slots == NO_FIELD {
        return Err(SchemaError::TooLarge(name.to_owned()));
    }
    // Slots in declaration order; rows sorted by number (prost's write order).
    for (i, f) in fields.iter_mut().enumerate() {
        f.slot = i as u16;
    }
    fields.sort_by_key(|f| f.number);
    let mut dense = vec![NO_FIELD; DENSE_LOOKUP as usize];
    for (i, f) in fields.iter().enumerate() {
        if f.number < DENSE_LOOKUP {
            dense[f.number as usize] = i as u16;
        }
    }
    Ok(MessageTable { name: name.to_owned(), fields, slots, dense })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_follow_the_schema() {
        let set = SchemaSet::from_source(
            "t.proto",
            r#"syntax = "proto3"; package t;
               message M {
                 repeated int32 packed_by_default = 7;
                 repeated int32 unpacked = 3 [packed = false];
                 optional sint32 maybe = 1;
                 oneof choice { string s = 9; N n = 10; }
                 enum E { Z = 0; }
                 E e = 2;
                 message N { repeated bytes b = 1; }
               }"#,
        )
        .unwrap();
        let m = set.table(set.id("t.M").unwrap());
        let numbers: Vec<u32> = m.fields.iter().map(|f| f.number).collect();
        assert_eq!(numbers, [1, 2, 3, 7, 9, 10], "sorted by number");
        let f = |n| m.field_by_number(n).unwrap();
        assert!(f(7).packed && f(7).repeated && f(7).key == (7 << 3) | WIRE_LEN);
        assert!(!f(3).packed && f(3).key == 3 << 3);
        assert!(f(1).explicit_presence && f(1).ty == FieldType::Sint32);
        assert!(f(9).explicit_presence && f(10).explicit_presence, "oneof members");
        assert_eq!(f(2).ty, FieldType::Int32, "enums are int32 on the wire");
        assert_eq!(f(10).ty, FieldType::Message(set.id("t.M.N").unwrap()));
        assert_eq!(f(7).slot, 0, "slots in declaration order");
        assert!(m.field_by_number(4).is_none() && m.field_by_number(1000).is_none());
        let n = set.table(set.id("t.M.N").unwrap());
        assert!(!n.fields[0].packed, "bytes are never packed");
    }

    #[test]
    fn maps_and_bad_schemas_are_refused() {
        let map = SchemaSet::from_source("m.proto", r#"syntax = "proto3"; message M { map<string, int32> m = 1; }"#);
        assert!(matches!(map, Err(SchemaError::Unsupported { what: "a map", .. })), "{map:?}");
        let proto2 = SchemaSet::from_source("p.proto", r#"syntax = "proto2"; message M { optional int32 x = 1; }"#);
        assert!(matches!(proto2, Err(SchemaError::Unsupported { .. })), "{proto2:?}");
        let bad = SchemaSet::from_source("b.proto", "syntax = \"proto3\"; message M { int32 x = 0; }");
        assert!(matches!(bad, Err(SchemaError::Parse(_))), "{bad:?}");
    }
}

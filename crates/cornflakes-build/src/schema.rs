//! Reads proto3 files with protox and checks them against what Cornflakes
//! supports, producing a small model for the code generator.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto, SourceCodeInfo};

use crate::Error;

/// A schema feature Cornflakes does not support, with where it was used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {feature} is not supported by Cornflakes ({detail})")]
pub struct Unsupported {
    /// Schema file, as named on the command line or import.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// The feature: "oneof", "map", "enum", "proto2 syntax", ...
    pub feature: &'static str,
    /// What was found there.
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    Bool,
}

impl Scalar {
    pub(crate) fn rust(self) -> &'static str {
        match self {
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::Bool => "bool",
        }
    }
}

/// A reference to a message or enum type: its package and the messages it
/// is nested in, or the Rust path it is mapped to by an extern path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TypeRef {
    pub(crate) package: Vec<String>,
    pub(crate) parents: Vec<String>,
    pub(crate) name: String,
    /// Rust path of the package when the type is provided by a crate (as
    /// `.google.protobuf` is by `::cornflakes::well_known`).
    pub(crate) extern_root: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Scalar(Scalar),
    Bytes,
    String,
    Message(TypeRef),
    /// An open enum: stored and encoded as its `i32` value.
    Enum(TypeRef),
}

/// A `map<K, V>` field: on the wire, a list of its entry messages.
#[derive(Clone, Debug)]
pub(crate) struct MapDef {
    pub(crate) key: Kind,
    pub(crate) value: Kind,
}

#[derive(Clone, Debug)]
pub(crate) struct FieldDef {
    pub(crate) name: String,
    pub(crate) number: i32,
    pub(crate) kind: Kind,
    pub(crate) repeated: bool,
    /// proto3 `optional`: explicit presence.
    pub(crate) optional: bool,
    /// Index into the message's `oneofs` when the field is a oneof member.
    pub(crate) oneof: Option<usize>,
    pub(crate) map: Option<MapDef>,
    /// The protobuf-wire codec of a scalar or enum field
    /// (`cornflakes::__private::pw::<codec>`): `Sint32`, `Fixed64`, ...
    pub(crate) codec: &'static str,
    /// A repeated scalar or enum field encoded packed (proto3's default,
    /// unless `[packed = false]`).
    pub(crate) packed: bool,
    /// The schema's comment above the field (empty if none).
    pub(crate) doc: String,
}

#[derive(Clone, Debug)]
pub(crate) struct OneofDef {
    pub(crate) name: String,
}

#[derive(Clone, Debug)]
pub(crate) struct EnumDef {
    pub(crate) name: String,
    /// (proto name, number), aliases removed (the first name of a number
    /// wins, as in prost).
    pub(crate) values: Vec<(String, i32)>,
    /// (line, column) of its declaration.
    pub(crate) location: (u32, u32),
    /// The schema's comment above the enum, and above each value (in the
    /// order of `values`).
    pub(crate) doc: String,
    pub(crate) value_docs: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct MessageDef {
    pub(crate) name: String,
    /// Fields in field-number order: the order of bitmap bits and entries.
    pub(crate) fields: Vec<FieldDef>,
    /// The `reserved` numbers below the highest field number, ascending:
    /// each keeps an ordinal (a bitmap bit, never set by an encoder), so
    /// that deleting a field and reserving its number leaves the ordinals
    /// of the others as they were, and a decoder can refuse a message that
    /// still has the deleted field instead of misreading every entry after
    /// it.
    pub(crate) reserved_slots: Vec<i32>,
    /// Real (not synthetic) oneofs.
    pub(crate) oneofs: Vec<OneofDef>,
    pub(crate) nested: Vec<MessageDef>,
    pub(crate) enums: Vec<EnumDef>,
    /// The position of the message in its file (source-info path), for
    /// errors found while generating.
    pub(crate) location: (u32, u32),
    /// The schema's comment above the message (empty if none).
    pub(crate) doc: String,
}

#[derive(Clone, Debug)]
pub(crate) struct SchemaFile {
    pub(crate) name: String,
    pub(crate) package: String,
    pub(crate) messages: Vec<MessageDef>,
    pub(crate) enums: Vec<EnumDef>,
}

pub(crate) struct Parsed {
    /// The files asked for, and the files they import that no extern path
    /// covers (as prost-build generates them too), in protox's order.
    pub(crate) files: Vec<SchemaFile>,
    /// Every schema file read, for `rerun-if-changed`.
    pub(crate) source_paths: Vec<PathBuf>,
    /// Their descriptors (`Config::file_descriptor_set_path`).
    pub(crate) descriptors: prost_types::FileDescriptorSet,
}

pub(crate) fn parse(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
    extern_paths: &[(String, String)],
) -> Result<Parsed, Error> {
    let mut compiler =
        protox::Compiler::new(includes.iter().map(|p| p.as_ref())).map_err(|e| Error::Parse(format!("{e:?}")))?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(protos.iter().map(|p| p.as_ref())).map_err(|e| {
        let text = format!("{e:?}");
        // protox says a file that does not exist "is not in any include path".
        let missing = protos.iter().map(|p| p.as_ref()).find(|p| {
            !p.exists() && !includes.iter().any(|i| i.as_ref().join(p).exists()) && text.contains(&*p.to_string_lossy())
        });
        if let Some(missing) = missing {
            Error::Parse(format!(
                "{}: no such file (looked for it as given and under each include path)",
                missing.display()
            ))
        } else if text.contains("found 'edition'") {
            Error::Parse(format!(
                "protobuf editions (`edition = ...`) are not supported by Cornflakes: write `syntax = \"proto3\";` ({text})"
            ))
        } else {
            Error::Parse(text)
        }
    })?;
    let fds = compiler.file_descriptor_set();

    let requested: Vec<String> = compiler.files().filter(|f| !f.is_import()).map(|f| f.name().to_owned()).collect();
    let source_paths = compiler.files().filter_map(|f| f.path().map(Path::to_path_buf)).collect();

    let mut known: HashMap<String, TypeInfo> = collect_types(&fds.file, extern_paths);
    let is_requested = |fd: &FileDescriptorProto| requested.iter().any(|r| r == fd.name());
    // An import is generated too, so that the types the requested files name
    // from it exist (prost-build does the same). One that uses features
    // Cornflakes lacks is left out, not an error (an unused import, or one
    // of a proto2 package, stays harmless), but its types are marked, so a
    // field that uses one is an error that says why. Leaving one out can
    // make another fail (it used the first's types): repeat until none does.
    let mut left_out: Vec<&str> = Vec::new();
    for fd in &fds.file {
        if !is_requested(fd) && is_extern(fd, extern_paths) && !provided_externally(fd, extern_paths) {
            let why = format!(
                "{} is not among the well-known files `::cornflakes::well_known` provides ({}); generate it with your \
                 schema instead (`Config::clear_extern_paths()`, or an extern path of your own for `.google.protobuf`)",
                fd.name(),
                crate::WELL_KNOWN_FILES.join(", ")
            );
            mark_unavailable(&mut known, fd, &why);
        }
    }
    loop {
        let mut changed = false;
        for fd in &fds.file {
            if is_requested(fd) || is_extern(fd, extern_paths) || left_out.contains(&fd.name()) {
                continue;
            }
            if let Err(u) = convert_file(fd, &known) {
                let why = format!("{} is not generated: {u}", fd.name());
                mark_unavailable(&mut known, fd, &why);
                left_out.push(fd.name());
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut files = Vec::new();
    for fd in &fds.file {
        if is_requested(fd) || (!is_extern(fd, extern_paths) && !left_out.contains(&fd.name())) {
            files.push(convert_file(fd, &known)?);
        }
    }
    Ok(Parsed { files, source_paths, descriptors: fds })
}

/// Whether the Rust an extern path names for `fd` exists: always for the
/// application's own paths; for the default `.google.protobuf` one, only
/// for the files `::cornflakes::well_known` holds.
fn provided_externally(fd: &FileDescriptorProto, extern_paths: &[(String, String)]) -> bool {
    let default = extern_paths
        .iter()
        .any(|(p, r)| p == ".google.protobuf" && (r == crate::WELL_KNOWN || r == crate::WELL_KNOWN_PROTOWIRE));
    !(default && fd.package() == "google.protobuf") || crate::WELL_KNOWN_FILES.contains(&fd.name())
}

/// Marks every type of `fd` as one that will not exist, and why.
fn mark_unavailable(known: &mut HashMap<String, TypeInfo>, fd: &FileDescriptorProto, why: &str) {
    let prefix = if fd.package().is_empty() { String::new() } else { format!(".{}", fd.package()) };
    fn walk(
        known: &mut HashMap<String, TypeInfo>,
        msgs: &[DescriptorProto],
        enums: &[EnumDescriptorProto],
        prefix: &str,
        why: &str,
    ) {
        for e in enums {
            if let Some(info) = known.get_mut(&format!("{prefix}.{}", e.name())) {
                info.unavailable = Some(why.to_owned());
            }
        }
        for m in msgs {
            let full = format!("{prefix}.{}", m.name());
            if let Some(info) = known.get_mut(&full) {
                info.unavailable = Some(why.to_owned());
            }
            walk(known, &m.nested_type, &m.enum_type, &full, why);
        }
    }
    walk(known, &fd.message_type, &fd.enum_type, &prefix, why);
}

/// Whether an extern path covers `fd`'s package, or a type in it (then the
/// package is the application's to provide, as it chose).
fn is_extern(fd: &FileDescriptorProto, extern_paths: &[(String, String)]) -> bool {
    let package = if fd.package().is_empty() { String::new() } else { format!(".{}", fd.package()) };
    let types: Vec<String> = fd
        .message_type
        .iter()
        .map(|m| m.name())
        .chain(fd.enum_type.iter().map(|e| e.name()))
        .map(|name| format!("{package}.{name}"))
        .collect();
    extern_paths.iter().any(|(proto, _)| {
        let covers_package = !package.is_empty() && (package == *proto || package.starts_with(&format!("{proto}.")));
        let covers_a_type = types.iter().any(|t| proto == t || proto.starts_with(&format!("{t}.")));
        covers_package || covers_a_type
    })
}

struct TypeInfo {
    type_ref: TypeRef,
    /// For a map entry message: its key and value fields.
    map_entry: Option<(prost_types::FieldDescriptorProto, prost_types::FieldDescriptorProto)>,
    is_enum: bool,
    /// Why the type will not exist in Rust (its file is left out), if so.
    unavailable: Option<String>,
}

fn collect_types(files: &[FileDescriptorProto], extern_paths: &[(String, String)]) -> HashMap<String, TypeInfo> {
    struct Ctx<'x> {
        package: &'x [String],
        extern_root: Option<String>,
        out: HashMap<String, TypeInfo>,
    }
    fn type_ref(ctx: &Ctx<'_>, parents: &[String], name: &str) -> TypeRef {
        TypeRef {
            package: ctx.package.to_vec(),
            parents: parents.to_vec(),
            name: name.to_owned(),
            extern_root: ctx.extern_root.clone(),
        }
    }
    fn walk(
        ctx: &mut Ctx<'_>,
        msgs: &[DescriptorProto],
        enums: &[EnumDescriptorProto],
        prefix: &str,
        parents: &[String],
    ) {
        for e in enums {
            let full = format!("{prefix}.{}", e.name());
            let info = TypeInfo {
                type_ref: type_ref(ctx, parents, e.name()),
                map_entry: None,
                is_enum: true,
                unavailable: None,
            };
            ctx.out.insert(full, info);
        }
        for m in msgs {
            let full = format!("{prefix}.{}", m.name());
            let map_entry = if m.options.as_ref().and_then(|o| o.map_entry).unwrap_or(false) {
                let key = m.field.iter().find(|f| f.number() == 1).cloned().unwrap_or_default();
                let value = m.field.iter().find(|f| f.number() == 2).cloned().unwrap_or_default();
                Some((key, value))
            } else {
                None
            };
            let info =
                TypeInfo { type_ref: type_ref(ctx, parents, m.name()), map_entry, is_enum: false, unavailable: None };
            ctx.out.insert(full.clone(), info);
            let mut p = parents.to_vec();
            p.push(m.name().to_owned());
            walk(ctx, &m.nested_type, &m.enum_type, &full, &p);
        }
    }
    let mut ctx = Ctx { package: &[], extern_root: None, out: HashMap::new() };
    for f in files {
        let package: Vec<String> = f.package().split('.').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        let prefix = if f.package().is_empty() { String::new() } else { format!(".{}", f.package()) };
        // The longest extern path that is the package or a parent of it.
        let extern_root = extern_paths
            .iter()
            .filter(|(proto, _)| prefix == *proto || prefix.starts_with(&format!("{proto}.")))
            .max_by_key(|(proto, _)| proto.len())
            .map(|(proto, rust)| {
                let rest: Vec<String> =
                    prefix[proto.len()..].split('.').filter(|s| !s.is_empty()).map(crate::codegen::to_snake).collect();
                std::iter::once(rust.clone()).chain(rest).collect::<Vec<_>>().join("::")
            });
        let mut c = Ctx { package: &package, extern_root, out: std::mem::take(&mut ctx.out) };
        walk(&mut c, &f.message_type, &f.enum_type, &prefix, &[]);
        ctx.out = c.out;
    }
    ctx.out
}

/// Maps source-info paths to (line, column), both 1-based, and to the
/// comments above the elements.
struct Locations(HashMap<Vec<i32>, (u32, u32)>, HashMap<Vec<i32>, String>);

impl Locations {
    fn new(info: Option<&SourceCodeInfo>) -> Self {
        let (mut map, mut docs) = (HashMap::new(), HashMap::new());
        if let Some(info) = info {
            for loc in &info.location {
                if loc.span.len() >= 2 {
                    map.entry(loc.path.clone()).or_insert((loc.span[0] as u32 + 1, loc.span[1] as u32 + 1));
                }
                if let Some(text) = loc.leading_comments.as_deref().filter(|t| !t.trim().is_empty()) {
                    docs.entry(loc.path.clone()).or_insert_with(|| text.to_owned());
                }
            }
        }
        Locations(map, docs)
    }

    /// The comment above the element at `path` (empty if none).
    fn doc(&self, path: &[i32]) -> String {
        self.1.get(path).cloned().unwrap_or_default()
    }

    /// The position of `path`, or of its nearest enclosing element that has
    /// one (never 0:0: the file's start as a last resort).
    fn at(&self, path: &[i32]) -> (u32, u32) {
        let mut p = path;
        loop {
            if let Some(pos) = self.0.get(p) {
                return *pos;
            }
            match p.len() {
                0 => return (1, 1),
                n => p = &p[..n - 1],
            }
        }
    }

    fn unsupported(&self, file: &str, path: &[i32], feature: &'static str, detail: String) -> Unsupported {
        let (line, column) = self.at(path);
        Unsupported { file: file.to_owned(), line, column, feature, detail }
    }
}

// Field numbers in descriptor.proto, for source-info paths.
const FILE_MESSAGE: i32 = 4;
const FILE_ENUM: i32 = 5;
const FILE_EXTENSION: i32 = 7;
const FILE_SYNTAX: i32 = 12;
const MSG_FIELD: i32 = 2;
const MSG_NESTED: i32 = 3;
const MSG_ENUM: i32 = 4;
const ENUM_VALUE: i32 = 2;
const MSG_EXTENSION_RANGE: i32 = 5;
const MSG_EXTENSION: i32 = 6;
const MSG_RESERVED_RANGE: i32 = 9;

fn convert_file(fd: &FileDescriptorProto, known: &HashMap<String, TypeInfo>) -> Result<SchemaFile, Unsupported> {
    let locs = Locations::new(fd.source_code_info.as_ref());
    let name = fd.name().to_owned();
    if fd.syntax() != "proto3" {
        let syntax = if fd.syntax().is_empty() { "proto2" } else { fd.syntax() };
        return Err(locs.unsupported(
            &name,
            &[FILE_SYNTAX],
            "non-proto3 syntax",
            format!("syntax \"{syntax}\"; write `syntax = \"proto3\";`"),
        ));
    }
    if !fd.extension.is_empty() {
        return Err(locs.unsupported(
            &name,
            &[FILE_EXTENSION, 0],
            "extension",
            format!("extend {}: Cornflakes has no extensions (custom options included)", fd.extension[0].extendee()),
        ));
    }
    let enums = fd.enum_type.iter().enumerate().map(|(i, e)| convert_enum(e, &[FILE_ENUM, i as i32], &locs)).collect();
    let mut messages = Vec::new();
    for (i, m) in fd.message_type.iter().enumerate() {
        messages.push(convert_message(m, &[FILE_MESSAGE, i as i32], &name, &locs, known)?);
    }
    Ok(SchemaFile { name, package: fd.package().to_owned(), messages, enums })
}

fn convert_enum(e: &EnumDescriptorProto, path: &[i32], locs: &Locations) -> EnumDef {
    let mut values: Vec<(String, i32)> = Vec::new();
    let mut value_docs = Vec::new();
    for (k, v) in e.value.iter().enumerate() {
        if !values.iter().any(|(_, n)| *n == v.number()) {
            values.push((v.name().to_owned(), v.number()));
            value_docs.push(locs.doc(&[path, &[ENUM_VALUE, k as i32]].concat()));
        }
    }
    EnumDef { name: e.name().to_owned(), values, location: locs.at(path), doc: locs.doc(path), value_docs }
}

fn scalar_kind(f: &prost_types::FieldDescriptorProto, known: &HashMap<String, TypeInfo>) -> Result<Kind, &'static str> {
    Ok(match f.r#type() {
        Type::Double => Kind::Scalar(Scalar::F64),
        Type::Float => Kind::Scalar(Scalar::F32),
        Type::Int64 | Type::Sint64 | Type::Sfixed64 => Kind::Scalar(Scalar::I64),
        Type::Uint64 | Type::Fixed64 => Kind::Scalar(Scalar::U64),
        Type::Int32 | Type::Sint32 | Type::Sfixed32 => Kind::Scalar(Scalar::I32),
        Type::Uint32 | Type::Fixed32 => Kind::Scalar(Scalar::U32),
        Type::Bool => Kind::Scalar(Scalar::Bool),
        Type::String => Kind::String,
        Type::Bytes => Kind::Bytes,
        Type::Group => return Err("group"),
        Type::Enum | Type::Message => {
            let info = known.get(f.type_name()).ok_or("unresolved type")?;
            if info.is_enum {
                Kind::Enum(info.type_ref.clone())
            } else {
                Kind::Message(info.type_ref.clone())
            }
        }
    })
}

/// The protobuf-wire codec of a scalar or enum type (empty for others).
fn proto_codec(t: Type) -> &'static str {
    match t {
        Type::Double => "Double",
        Type::Float => "Float",
        Type::Int64 => "Int64",
        Type::Uint64 => "Uint64",
        Type::Int32 | Type::Enum => "Int32",
        Type::Fixed64 => "Fixed64",
        Type::Fixed32 => "Fixed32",
        Type::Bool => "Bool",
        Type::Uint32 => "Uint32",
        Type::Sfixed32 => "Sfixed32",
        Type::Sfixed64 => "Sfixed64",
        Type::Sint32 => "Sint32",
        Type::Sint64 => "Sint64",
        Type::String | Type::Bytes | Type::Message | Type::Group => "",
    }
}

fn convert_message(
    m: &DescriptorProto,
    path: &[i32],
    file: &str,
    locs: &Locations,
    known: &HashMap<String, TypeInfo>,
) -> Result<MessageDef, Unsupported> {
    let at = |suffix: &[i32]| [path, suffix].concat();
    if !m.extension.is_empty() {
        return Err(locs.unsupported(
            file,
            &at(&[MSG_EXTENSION, 0]),
            "extension",
            format!("extend {} in message {}", m.extension[0].extendee(), m.name()),
        ));
    }
    if !m.extension_range.is_empty() {
        return Err(locs.unsupported(
            file,
            &at(&[MSG_EXTENSION_RANGE, 0]),
            "extension",
            format!("extension range in message {}", m.name()),
        ));
    }
    // Real oneofs get an index; synthetic ones (proto3 `optional`) do not.
    let mut oneofs = Vec::new();
    let mut oneof_index = vec![None; m.oneof_decl.len()];
    for (j, oneof) in m.oneof_decl.iter().enumerate() {
        let synthetic = m.field.iter().filter(|f| f.oneof_index == Some(j as i32)).all(|f| f.proto3_optional());
        if !synthetic {
            oneof_index[j] = Some(oneofs.len());
            oneofs.push(OneofDef { name: oneof.name().to_owned() });
        }
    }
    let mut fields = Vec::new();
    for (j, f) in m.field.iter().enumerate() {
        let fpath = at(&[MSG_FIELD, j as i32]);
        let repeated = f.label() == Label::Repeated;
        let kind = scalar_kind(f, known)
            .map_err(|feature| locs.unsupported(file, &fpath, feature, format!("field {}", f.name())))?;
        // A type (or a map's value type) whose file is left out.
        let value_type = known.get(f.type_name()).and_then(|i| i.map_entry.as_ref()).map(|(_, v)| v.type_name());
        for t in [f.type_name()].into_iter().chain(value_type) {
            if let Some(why) = known.get(t).and_then(|i| i.unavailable.as_ref()) {
                return Err(locs.unsupported(
                    file,
                    &fpath,
                    "a type Cornflakes does not generate",
                    format!("field {} uses {}: {why}", f.name(), t.trim_start_matches('.')),
                ));
            }
        }
        let map = match &kind {
            Kind::Message(_) => match known.get(f.type_name()).and_then(|i| i.map_entry.as_ref()) {
                Some((k, v)) => {
                    let bad =
                        |what: &str| locs.unsupported(file, &fpath, "map", format!("map field {}: {what}", f.name()));
                    let key = scalar_kind(k, known).map_err(bad)?;
                    let value = scalar_kind(v, known).map_err(bad)?;
                    Some(MapDef { key, value })
                }
                None => None,
            },
            _ => None,
        };
        let oneof = f.oneof_index.and_then(|i| oneof_index.get(i as usize).copied().flatten());
        let codec = proto_codec(f.r#type());
        let packed = repeated && !codec.is_empty() && f.options.as_ref().and_then(|o| o.packed).unwrap_or(true);
        fields.push(FieldDef {
            doc: locs.doc(&fpath),
            codec,
            packed,
            name: f.name().to_owned(),
            number: f.number(),
            kind,
            repeated,
            optional: f.proto3_optional(),
            oneof,
            map,
        });
    }
    fields.sort_by_key(|f| f.number);
    let reserved_slots = reserved_slots(m, &fields).map_err(|(k, detail)| {
        locs.unsupported(file, &at(&[MSG_RESERVED_RANGE, k as i32]), "a large reserved range", detail)
    })?;
    let mut nested = Vec::new();
    for (k, n) in m.nested_type.iter().enumerate() {
        nested.push(convert_message(n, &at(&[MSG_NESTED, k as i32]), file, locs, known)?);
    }
    let enums =
        m.enum_type.iter().enumerate().map(|(k, e)| convert_enum(e, &at(&[MSG_ENUM, k as i32]), locs)).collect();
    Ok(MessageDef {
        name: m.name().to_owned(),
        fields,
        oneofs,
        nested,
        enums,
        reserved_slots,
        location: locs.at(path),
        doc: locs.doc(path),
    })
}

/// Most reserved numbers below a message's highest field number: each is a
/// bitmap bit in every header of the message.
const MAX_RESERVED_SLOTS: usize = 1024;

/// The reserved numbers of `m` below its highest field number, ascending;
/// or the index of the range that makes them too many, and why.
fn reserved_slots(m: &DescriptorProto, fields: &[FieldDef]) -> Result<Vec<i32>, (usize, String)> {
    let Some(highest) = fields.last().map(|f| f.number) else {
        return Ok(Vec::new());
    };
    let mut slots = Vec::new();
    for (k, range) in m.reserved_range.iter().enumerate() {
        // `end` is exclusive in descriptors (protox writes `to max` as 2^29).
        let (start, end) = (range.start(), range.end().min(highest));
        if end - start > (MAX_RESERVED_SLOTS - slots.len().min(MAX_RESERVED_SLOTS)) as i32 {
            return Err((
                k,
                format!(
                    "message {} reserves more than {MAX_RESERVED_SLOTS} numbers below its highest field number \
                     {highest}; on the Cornflakes wire each one keeps a presence bit in every header: reserve \
                     fewer, or give the fields lower numbers",
                    m.name()
                ),
            ));
        }
        slots.extend(start..end);
    }
    slots.sort_unstable();
    slots.dedup();
    Ok(slots)
}

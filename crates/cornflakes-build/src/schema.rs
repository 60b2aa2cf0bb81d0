//! Reads proto3 files with protox and checks them against what Cornflakes
//! supports, producing a small model for the code generator.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorProto, SourceCodeInfo};

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

/// A reference to a message type: its package and the messages it is
/// nested in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TypeRef {
    pub(crate) package: Vec<String>,
    pub(crate) parents: Vec<String>,
    pub(crate) name: String,
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Scalar(Scalar),
    Bytes,
    String,
    Message(TypeRef),
}

#[derive(Clone, Debug)]
pub(crate) struct FieldDef {
    pub(crate) name: String,
    pub(crate) number: i32,
    pub(crate) kind: Kind,
    pub(crate) repeated: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct MessageDef {
    pub(crate) name: String,
    /// Fields in field-number order: the order of bitmap bits and entries.
    pub(crate) fields: Vec<FieldDef>,
    pub(crate) nested: Vec<MessageDef>,
}

#[derive(Clone, Debug)]
pub(crate) struct SchemaFile {
    pub(crate) name: String,
    pub(crate) package: String,
    pub(crate) messages: Vec<MessageDef>,
}

pub(crate) struct Parsed {
    /// The files asked for, in order (imports are resolved but not emitted).
    pub(crate) files: Vec<SchemaFile>,
    /// Every schema file read, for `rerun-if-changed`.
    pub(crate) source_paths: Vec<PathBuf>,
}

pub(crate) fn parse(protos: &[impl AsRef<Path>], includes: &[impl AsRef<Path>]) -> Result<Parsed, Error> {
    let mut compiler =
        protox::Compiler::new(includes.iter().map(|p| p.as_ref())).map_err(|e| Error::Parse(format!("{e:?}")))?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(protos.iter().map(|p| p.as_ref())).map_err(|e| Error::Parse(format!("{e:?}")))?;
    let fds = compiler.file_descriptor_set();

    let requested: Vec<String> = compiler.files().filter(|f| !f.is_import()).map(|f| f.name().to_owned()).collect();
    let source_paths = compiler.files().filter_map(|f| f.path().map(Path::to_path_buf)).collect();

    let known: HashMap<String, TypeInfo> = collect_types(&fds.file);
    let mut files = Vec::new();
    for fd in &fds.file {
        // Imported files are checked too: a message we reference must be
        // representable.
        let file = convert_file(fd, &known)?;
        if requested.iter().any(|r| r == fd.name()) {
            files.push(file);
        }
    }
    Ok(Parsed { files, source_paths })
}

struct TypeInfo {
    type_ref: TypeRef,
    map_entry: bool,
}

fn collect_types(files: &[FileDescriptorProto]) -> HashMap<String, TypeInfo> {
    fn walk(
        msgs: &[DescriptorProto],
        prefix: &str,
        package: &[String],
        parents: &[String],
        out: &mut HashMap<String, TypeInfo>,
    ) {
        for m in msgs {
            let full = format!("{prefix}.{}", m.name());
            let map_entry = m.options.as_ref().and_then(|o| o.map_entry).unwrap_or(false);
            out.insert(
                full.clone(),
                TypeInfo {
                    type_ref: TypeRef {
                        package: package.to_vec(),
                        parents: parents.to_vec(),
                        name: m.name().to_owned(),
                    },
                    map_entry,
                },
            );
            let mut p = parents.to_vec();
            p.push(m.name().to_owned());
            walk(&m.nested_type, &full, package, &p, out);
        }
    }
    let mut out = HashMap::new();
    for f in files {
        let package: Vec<String> = f.package().split('.').filter(|s| !s.is_empty()).map(str::to_owned).collect();
        let prefix = if f.package().is_empty() { String::new() } else { format!(".{}", f.package()) };
        walk(&f.message_type, &prefix, &package, &[], &mut out);
    }
    out
}

/// Maps source-info paths to (line, column), both 1-based.
struct Locations(HashMap<Vec<i32>, (u32, u32)>);

impl Locations {
    fn new(info: Option<&SourceCodeInfo>) -> Self {
        let mut map = HashMap::new();
        if let Some(info) = info {
            for loc in &info.location {
                if loc.span.len() >= 2 {
                    map.entry(loc.path.clone()).or_insert((loc.span[0] as u32 + 1, loc.span[1] as u32 + 1));
                }
            }
        }
        Locations(map)
    }

    fn unsupported(&self, file: &str, path: &[i32], feature: &'static str, detail: String) -> Unsupported {
        let (line, column) = self.0.get(path).copied().unwrap_or((0, 0));
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
const MSG_ONEOF: i32 = 8;

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
    if let Some(e) = fd.enum_type.first() {
        return Err(locs.unsupported(
            &name,
            &[FILE_ENUM, 0],
            "enum",
            format!("enum {}; use an integer field", e.name()),
        ));
    }
    if !fd.extension.is_empty() {
        return Err(locs.unsupported(&name, &[FILE_EXTENSION, 0], "extension", "extend blocks".into()));
    }
    let mut messages = Vec::new();
    for (i, m) in fd.message_type.iter().enumerate() {
        messages.push(convert_message(m, &[FILE_MESSAGE, i as i32], &name, &locs, known)?);
    }
    Ok(SchemaFile { name, package: fd.package().to_owned(), messages })
}

fn convert_message(
    m: &DescriptorProto,
    path: &[i32],
    file: &str,
    locs: &Locations,
    known: &HashMap<String, TypeInfo>,
) -> Result<MessageDef, Unsupported> {
    let at = |suffix: &[i32]| [path, suffix].concat();
    if let Some(e) = m.enum_type.first() {
        return Err(locs.unsupported(
            file,
            &at(&[MSG_ENUM, 0]),
            "enum",
            format!("enum {} in message {}; use an integer field", e.name(), m.name()),
        ));
    }
    if !m.extension.is_empty() || !m.extension_range.is_empty() {
        return Err(locs.unsupported(file, path, "extension", format!("extensions in message {}", m.name())));
    }
    for (j, oneof) in m.oneof_decl.iter().enumerate() {
        // proto3 `optional` is a one-member "synthetic" oneof: allowed.
        let synthetic = m.field.iter().filter(|f| f.oneof_index == Some(j as i32)).all(|f| f.proto3_optional());
        if !synthetic {
            return Err(locs.unsupported(
                file,
                &at(&[MSG_ONEOF, j as i32]),
                "oneof",
                format!("oneof {} in message {}; use separate fields", oneof.name(), m.name()),
            ));
        }
    }
    let mut fields = Vec::new();
    for (j, f) in m.field.iter().enumerate() {
        let fpath = at(&[MSG_FIELD, j as i32]);
        let repeated = f.label() == Label::Repeated;
        let kind = match f.r#type() {
            Type::Double => Kind::Scalar(Scalar::F64),
            Type::Float => Kind::Scalar(Scalar::F32),
            Type::Int64 | Type::Sint64 | Type::Sfixed64 => Kind::Scalar(Scalar::I64),
            Type::Uint64 | Type::Fixed64 => Kind::Scalar(Scalar::U64),
            Type::Int32 | Type::Sint32 | Type::Sfixed32 => Kind::Scalar(Scalar::I32),
            Type::Uint32 | Type::Fixed32 => Kind::Scalar(Scalar::U32),
            Type::Bool => Kind::Scalar(Scalar::Bool),
            Type::String => Kind::String,
            Type::Bytes => Kind::Bytes,
            Type::Enum => {
                return Err(locs.unsupported(
                    file,
                    &fpath,
                    "enum",
                    format!("field {} of enum type {}; use an integer field", f.name(), f.type_name()),
                ))
            }
            Type::Group => return Err(locs.unsupported(file, &fpath, "group", format!("field {}", f.name()))),
            Type::Message => {
                let info = known.get(f.type_name()).expect("protox resolved every type name");
                if info.map_entry {
                    return Err(locs.unsupported(
                        file,
                        &fpath,
                        "map",
                        format!("map field {}; use a repeated message of key/value pairs", f.name()),
                    ));
                }
                Kind::Message(info.type_ref.clone())
            }
        };
        fields.push(FieldDef { name: f.name().to_owned(), number: f.number(), kind, repeated });
    }
    fields.sort_by_key(|f| f.number);
    let mut nested = Vec::new();
    for (k, n) in m.nested_type.iter().enumerate() {
        if n.options.as_ref().and_then(|o| o.map_entry).unwrap_or(false) {
            continue;
        }
        nested.push(convert_message(n, &at(&[MSG_NESTED, k as i32]), file, locs, known)?);
    }
    Ok(MessageDef { name: m.name().to_owned(), fields, nested })
}

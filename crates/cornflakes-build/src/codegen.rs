//! Emits Rust for the schema model: one struct per message with
//! `get_`/`set_`/`has_` accessors, a `cornflakes::Message` impl, and a
//! `cornflakes::__private::MessageImpl` impl whose methods make one runtime
//! call per field; one Rust enum per proto enum and per `oneof`, as
//! prost-build generates them. All encoding logic lives in the runtime
//! (`cornflakes::__private::Field`), so the output stays thin.
//!
//! Every runtime item is named by its full path: the public API as
//! `::cornflakes::...`, and what only generated code uses (field entries,
//! the reader and writer, presence bits, storage) as
//! `::cornflakes::__private::...`. The struct members that are not fields
//! are named `__cf_*`: a proto field name never becomes such a member,
//! because snake-casing drops leading underscores.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use heck::{ToSnakeCase, ToUpperCamelCase};

use crate::schema::{EnumDef, FieldDef, Kind, MessageDef, Parsed, TypeRef, Unsupported};
use crate::{Error, GeneratedFile};

/// The runtime's public API.
const RT: &str = "::cornflakes";
/// The runtime's plumbing for generated code (hidden from its docs).
const PRIV: &str = "::cornflakes::__private";

pub(crate) struct Options {
    pub(crate) samples: bool,
    pub(crate) wire: crate::Wire,
    pub(crate) attributes: Attributes,
}

/// Attributes for generated types, each with the proto path it applies to
/// (`Config::type_attribute` and its message and enum forms).
#[derive(Clone, Debug, Default)]
pub(crate) struct Attributes {
    pub(crate) types: Vec<(String, String)>,
    pub(crate) messages: Vec<(String, String)>,
    pub(crate) enums: Vec<(String, String)>,
}

impl Attributes {
    /// Refuses an attribute that is not Rust attribute syntax, naming it,
    /// before anything is generated.
    pub(crate) fn check(&self) -> Result<(), Error> {
        use syn::parse::Parser;
        for (path, attribute) in self.types.iter().chain(&self.messages).chain(&self.enums) {
            if let Err(e) = syn::Attribute::parse_outer.parse_str(attribute) {
                return Err(Error::Attribute {
                    path: path.clone(),
                    attribute: attribute.clone(),
                    reason: e.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The attributes for the type with fully qualified name `fq`
    /// (`.pkg.Outer.Inner`), a message or an enum (or oneof), one a line.
    fn for_type(&self, fq: &str, message: bool) -> String {
        let own = if message { &self.messages } else { &self.enums };
        self.types
            .iter()
            .chain(own)
            .filter(|(path, _)| path_matches(path, fq))
            .map(|(_, attribute)| format!("{attribute}\n"))
            .collect()
    }
}

/// Whether the proto `path` of an attribute covers the type `fq`, by
/// prost-build's rules: `.` everything, a fully qualified path its type or
/// package and everything in it, a relative one the end of the name.
fn path_matches(path: &str, fq: &str) -> bool {
    if path == "." {
        return true;
    }
    if path.starts_with('.') {
        return fq.strip_prefix(path).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
    }
    fq.strip_suffix(path).is_some_and(|head| head.ends_with('.'))
}

/// The protobuf wire format's plumbing in the runtime.
const PW: &str = "::cornflakes::__private::pw";

pub(crate) fn generate(parsed: &Parsed, options: &Options) -> Result<Vec<GeneratedFile>, Error> {
    let mut by_package: BTreeMap<&str, Vec<&crate::schema::SchemaFile>> = BTreeMap::new();
    for f in &parsed.files {
        by_package.entry(f.package.as_str()).or_default().push(f);
    }
    let mut out = Vec::new();
    for (package, files) in by_package {
        let sources: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        let module: Vec<String> = package.split('.').filter(|s| !s.is_empty()).map(to_snake).collect();
        let mut code = String::new();
        let mut messages = Vec::new();
        // One module for the package, whichever files declare its types.
        let mut items = Items::default();
        for file in &files {
            let mut gen = Gen { code: &mut code, file: &file.name, package, options, messages: &mut messages };
            for e in &file.enums {
                items.add_type(&upper_camel(&e.name), &file.name, e.location)?;
                gen.emit_enum(e, &[])?;
            }
            for m in &file.messages {
                items.add_type(&upper_camel(&m.name), &file.name, m.location)?;
                items.add_type(&owned_name(&upper_camel(&m.name)), &file.name, m.location)?;
                if has_module(m) {
                    items.add_module(&to_snake(&m.name), &file.name, m.location)?;
                }
                gen.emit_message(m, &module, &[])?;
            }
        }
        let parsed_file = syn::parse_file(&code)
            .map_err(|e| Error::Parse(format!("internal error: generated code does not parse: {e}\n{code}")))?;
        let header = format!(
            "// @generated by cornflakes-build from {}. DO NOT EDIT.\n// Package: {}\n\n",
            sources.join(", "),
            if package.is_empty() { "(none)" } else { package }
        );
        let name = if package.is_empty() { "_.rs".to_owned() } else { format!("{package}.rs") };
        out.push(GeneratedFile {
            name,
            package: package.to_owned(),
            code: header + &prettyplease::unparse(&parsed_file),
            messages,
        });
    }
    Ok(out)
}

/// Names declared in one Rust module, to report two proto names that
/// become the same Rust name: each with where it was declared first.
#[derive(Default)]
struct Items {
    types: HashMap<String, (String, (u32, u32))>,
    modules: HashMap<String, (String, (u32, u32))>,
}

impl Items {
    fn add_type(&mut self, name: &str, file: &str, at: (u32, u32)) -> Result<(), Unsupported> {
        if let Some((first, (line, _))) = self.types.insert(name.to_owned(), (file.to_owned(), at)) {
            return Err(collision(
                file,
                at,
                format!("two types in one module are both named `{name}` in Rust (the first at {first}:{line})"),
            ));
        }
        Ok(())
    }
    fn add_module(&mut self, name: &str, file: &str, at: (u32, u32)) -> Result<(), Unsupported> {
        if let Some((first, (line, _))) = self.modules.insert(name.to_owned(), (file.to_owned(), at)) {
            return Err(collision(
                file,
                at,
                format!("two messages both need the nested-type module `{name}` (the first at {first}:{line})"),
            ));
        }
        Ok(())
    }
}

fn collision(file: &str, at: (u32, u32), detail: String) -> Unsupported {
    Unsupported { file: file.to_owned(), line: at.0, column: at.1, feature: "a Rust name collision", detail }
}

/// Whether message `m` gets a module for nested messages, enums and oneofs.
fn has_module(m: &MessageDef) -> bool {
    !m.nested.is_empty() || !m.enums.is_empty() || !m.oneofs.is_empty()
}

/// A Rust identifier for a name already in the right case, as
/// prost-build's `sanitize_identifier` makes it: keywords become raw
/// identifiers, the few that cannot be raw get a trailing underscore, and a
/// leading digit gets a leading underscore.
pub(crate) fn ident(name: &str) -> String {
    // Rust keywords (https://doc.rust-lang.org/reference/keywords.html):
    // strict and reserved ones of the 2015, 2018 and 2024 editions.
    const RAW: &[&str] = &[
        "as", "break", "const", "continue", "else", "enum", "false", "fn", "for", "if", "impl", "in", "let", "loop",
        "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type", "unsafe",
        "use", "where", "while", "dyn", "abstract", "become", "box", "do", "final", "macro", "override", "priv",
        "typeof", "unsized", "virtual", "yield", "async", "await", "try", "gen",
    ];
    match name {
        "_" | "super" | "self" | "Self" | "extern" | "crate" => format!("{name}_"),
        _ if RAW.contains(&name) => format!("r#{name}"),
        _ if name.starts_with(|c: char| c.is_ascii_digit()) => format!("_{name}"),
        _ => name.to_owned(),
    }
}

/// A field, package or module name for a proto name, as prost-build's
/// `to_snake` makes it: `snake_case` by heck's rules (so `HTTPServer`
/// becomes `http_server` and `maxConns` becomes `max_conns`), then
/// [`ident`].
pub(crate) fn to_snake(name: &str) -> String {
    ident(&name.to_snake_case())
}

/// A type name for a proto message, enum or oneof name, as prost-build's
/// `to_upper_camel` makes it (`HTTPServer` becomes `HttpServer`).
pub(crate) fn upper_camel(name: &str) -> String {
    ident(&name.to_upper_camel_case())
}

/// The owned form of message type `name` (from [`upper_camel`]):
/// `MOwned`, and `SelfOwned` for a message `Self` (escaped `Self_`), which
/// `Self_Owned` would make a non-camel-case name that warns.
fn owned_name(name: &str) -> String {
    format!("{}Owned", name.strip_suffix('_').unwrap_or(name))
}

/// The Rust module path of a type's parent scope, from the crate root of
/// the generated packages.
fn scope_of(t: &TypeRef) -> Vec<String> {
    t.package.iter().map(|p| to_snake(p)).chain(t.parents.iter().map(|p| to_snake(p))).collect()
}

/// Path from module `from` to type `to`: relative (`super::...`), or
/// absolute for extern types.
fn type_path(from: &[String], to: &TypeRef) -> String {
    if let Some(root) = &to.extern_root {
        let mut path = root.clone();
        for p in &to.parents {
            path.push_str("::");
            path.push_str(&to_snake(p));
        }
        return format!("{path}::{}", upper_camel(&to.name));
    }
    let target = scope_of(to);
    let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut path = String::new();
    for _ in common..from.len() {
        path.push_str("super::");
    }
    for seg in &target[common..] {
        path.push_str(seg);
        path.push_str("::");
    }
    path.push_str(&upper_camel(&to.name));
    path
}

/// How a field is stored and encoded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A singular scalar, enum, bytes or string: presence in the bitmap.
    Single,
    /// A singular message: `Option<Nested<..>>`.
    Message,
    /// `repeated` or `map`: a list, present when not empty.
    List,
    /// A member of a oneof: a variant of the oneof's enum.
    Oneof,
}

struct FieldCode<'f> {
    def: &'f FieldDef,
    /// Bit and field position.
    index: usize,
    shape: Shape,
    /// Struct member (a sanitized identifier); for a oneof member, the
    /// oneof's member.
    member: String,
    /// Suffix of the accessors (`get_{accessor}`): snake case, not
    /// sanitized, since the prefix already makes it a valid identifier.
    accessor: String,
    /// Type of the struct member.
    storage: String,
    /// Type whose `Field` impl encodes the value (message: `Nested<..>`).
    codec: String,
    /// Element type of a list, or the value type of a single field.
    elem: String,
    /// For a oneof member: `module::Oneof::Variant`.
    variant: String,
    /// For an enum field: the enum's Rust path.
    enum_path: Option<String>,
    /// For a map: the argument type of a value in `insert_`.
    map_value: Option<String>,
}

fn elem_type(kind: &Kind, module: &[String]) -> String {
    match kind {
        Kind::Scalar(s) => s.rust().to_owned(),
        Kind::Enum(_) => "i32".to_owned(),
        Kind::Bytes => format!("{RT}::CfBytes<'a>"),
        Kind::String => format!("{RT}::CfString<'a>"),
        Kind::Message(t) => format!("{}<'a>", type_path(module, t)),
    }
}

fn needs_lifetime(kind: &Kind) -> bool {
    matches!(kind, Kind::Bytes | Kind::String | Kind::Message(_))
}

struct Gen<'g> {
    code: &'g mut String,
    file: &'g str,
    /// The proto package (`a.b`; empty for none).
    package: &'g str,
    options: &'g Options,
    /// Rust paths (relative to the package module) of generated messages.
    messages: &'g mut Vec<String>,
}

impl Gen<'_> {
    /// The fully qualified proto name of `name` nested in messages
    /// `parents` (`.pkg.Outer.Inner`).
    fn full_name(&self, parents: &[String], name: &str) -> String {
        let mut fq = String::new();
        for segment in std::iter::once(self.package).filter(|p| !p.is_empty()).chain(parents.iter().map(String::as_str))
        {
            fq.push('.');
            fq.push_str(segment);
        }
        fq.push('.');
        fq.push_str(name);
        fq
    }

    fn emit_enum(&mut self, e: &EnumDef, parents: &[String]) -> Result<(), Unsupported> {
        let name = upper_camel(&e.name);
        let default = e.values.iter().position(|(_, n)| *n == 0).unwrap_or(0);
        let variants: Vec<(String, &str, i32)> =
            e.values.iter().map(|(v, n)| (variant_name(&e.name, v), v.as_str(), *n)).collect();
        for (k, (v, proto, _)) in variants.iter().enumerate() {
            if let Some((_, first, _)) = variants[..k].iter().find(|(w, _, _)| w == v) {
                return Err(collision(
                    self.file,
                    e.location,
                    format!(
                        "in enum {}, `{first}` and `{proto}` are both the variant `{v}` in Rust (the enum's prefix is stripped, as prost does); rename one of them",
                        e.name
                    ),
                ));
            }
        }
        let attributes = self.options.attributes.for_type(&self.full_name(parents, &e.name), false);
        let code = &mut *self.code;
        code.push_str(&schema_doc(&e.doc));
        let _ = writeln!(
            code,
            "/// Enum `{}`: an open enum, so fields hold its `i32` value and keep values this schema does not know.\n{attributes}#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]\n#[repr(i32)]\npub enum {name} {{",
            e.name
        );
        for (i, (v, proto, n)) in variants.iter().enumerate() {
            let attr = if i == default { "#[default]\n" } else { "" };
            let doc = schema_doc(e.value_docs.get(i).map_or("", String::as_str));
            let _ = writeln!(code, "{doc}/// `{proto}`.\n{attr}{v} = {n},");
        }
        code.push_str("}\n");
        let _ = writeln!(code, "impl {name} {{");
        let _ = writeln!(
            code,
            "/// The value's name in the schema.\npub fn as_str_name(&self) -> &'static str {{ match self {{"
        );
        for (v, proto, _) in &variants {
            let _ = writeln!(code, "Self::{v} => \"{proto}\",");
        }
        code.push_str("} }\n");
        let _ = writeln!(
            code,
            "/// Whether the schema names `value` (prost's `is_valid`).\npub fn is_valid(value: i32) -> bool {{ <Self as ::core::convert::TryFrom<i32>>::try_from(value).is_ok() }}"
        );
        let _ = writeln!(code, "/// The value of a name in the schema.\npub fn from_str_name(value: &str) -> ::core::option::Option<Self> {{ match value {{");
        for (v, proto, _) in &variants {
            let _ = writeln!(code, "\"{proto}\" => ::core::option::Option::Some(Self::{v}),");
        }
        code.push_str("_ => ::core::option::Option::None, } }\n}\n");
        let _ = writeln!(code, "impl ::core::convert::TryFrom<i32> for {name} {{\ntype Error = {RT}::UnknownEnumValue;\nfn try_from(value: i32) -> ::core::result::Result<Self, {RT}::UnknownEnumValue> {{ match value {{");
        for (v, _, n) in &variants {
            let _ = writeln!(code, "{n} => ::core::result::Result::Ok(Self::{v}),");
        }
        let _ = writeln!(code, "_ => ::core::result::Result::Err({RT}::UnknownEnumValue(value)), }} }}\n}}");
        let _ = writeln!(
            code,
            "impl ::core::convert::From<{name}> for i32 {{\nfn from(value: {name}) -> i32 {{ value as i32 }}\n}}\n"
        );
        Ok(())
    }

    fn field_code<'f>(&self, f: &'f FieldDef, index: usize, m: &MessageDef, module: &[String]) -> FieldCode<'f> {
        let elem = elem_type(&f.kind, module);
        let shape = if f.repeated {
            Shape::List
        } else if f.oneof.is_some() {
            Shape::Oneof
        } else if matches!(f.kind, Kind::Message(_)) {
            Shape::Message
        } else {
            Shape::Single
        };
        let nested = format!("{PRIV}::Nested<'a, {elem}>");
        let (storage, codec) = match shape {
            Shape::List => {
                let list = format!("{RT}::List<'a, {elem}>");
                (list.clone(), list)
            }
            Shape::Message => (format!("::core::option::Option<{nested}>"), nested),
            Shape::Oneof if matches!(f.kind, Kind::Message(_)) => (String::new(), nested),
            _ => (elem.clone(), elem.clone()),
        };
        let (member, variant) = match f.oneof {
            Some(o) => {
                let oneof = &m.oneofs[o].name;
                (to_snake(oneof), format!("{}::{}::{}", to_snake(&m.name), upper_camel(oneof), upper_camel(&f.name)))
            }
            None => (to_snake(&f.name), String::new()),
        };
        let enum_path = match &f.kind {
            Kind::Enum(t) => Some(type_path(module, t)),
            _ => None,
        };
        let map_value = f.map.as_ref().map(|map| match &map.value {
            Kind::Enum(t) => type_path(module, t),
            Kind::Bytes => "&'a [u8]".to_owned(),
            Kind::String => "&'a str".to_owned(),
            other => elem_type(other, module),
        });
        FieldCode {
            def: f,
            index,
            shape,
            member,
            accessor: f.name.to_snake_case(),
            storage,
            codec,
            elem,
            variant,
            enum_path,
            map_value,
        }
    }

    fn emit_message(&mut self, m: &MessageDef, package: &[String], parents: &[String]) -> Result<(), Error> {
        let module: Vec<String> = package.iter().cloned().chain(parents.iter().map(|p| to_snake(p))).collect();
        let name = upper_camel(&m.name);
        // Ordinals: fields and the reserved numbers below the highest one,
        // in number order (docs/wire-format.md).
        let n = m.fields.len() + m.reserved_slots.len();
        let words = n.div_ceil(32);
        let ordinal = |i: usize, f: &FieldDef| i + m.reserved_slots.partition_point(|&r| r < f.number);
        let fields: Vec<FieldCode> =
            m.fields.iter().enumerate().map(|(i, f)| self.field_code(f, ordinal(i, f), m, &module)).collect();
        let reserved: Vec<String> = m
            .reserved_slots
            .iter()
            .enumerate()
            .map(|(j, &r)| format!("({}, {r})", j + m.fields.partition_point(|f| f.number < r)))
            .collect();
        let rel: Vec<String> = parents.iter().map(|p| to_snake(p)).chain(std::iter::once(name.clone())).collect();
        self.messages.push(rel.join("::"));
        if self.options.wire == crate::Wire::Protobuf {
            // Messages from other crates (`extern_path`) are not known to
            // have protobuf-wire code; the runtime's well-known types for it
            // (`::cornflakes::well_known::protowire`) have.
            let foreign = |t: &TypeRef| t.extern_root.as_ref().is_some_and(|r| r != crate::WELL_KNOWN_PROTOWIRE);
            if let Some(f) = m.fields.iter().find(|f| matches!(&f.kind, Kind::Message(t) if foreign(t))) {
                return Err(Unsupported {
                    file: self.file.to_owned(),
                    line: m.location.0,
                    column: m.location.1,
                    feature: "an extern message type with Wire::Protobuf",
                    detail: format!(
                        "field {}.{} uses a message mapped by extern_path, which may have no protobuf-wire code; generate that package with Wire::Protobuf in the same run instead (Google's well-known types need nothing: they map to `::cornflakes::well_known::protowire`)",
                        m.name, f.name
                    ),
                }
                .into());
            }
        }

        // Accessors go into a separate buffer first, so that their names
        // can be checked for collisions.
        let mut acc = Accessors::default();
        for f in &fields {
            acc.field(f, m);
        }
        for (o, oneof) in m.oneofs.iter().enumerate() {
            acc.oneof(o, oneof.name.as_str(), m, &fields);
        }
        acc.check(self.file, m)?;
        let mut members: HashMap<String, String> = HashMap::new();
        let mut member_names: Vec<(String, String)> =
            fields.iter().filter(|f| f.shape != Shape::Oneof).map(|f| (f.member.clone(), f.def.name.clone())).collect();
        member_names.extend(m.oneofs.iter().map(|o| (to_snake(&o.name), o.name.clone())));
        for (member, proto) in member_names {
            if let Some(other) = members.insert(member.clone(), proto.clone()) {
                return Err(collision(
                    self.file,
                    m.location,
                    format!("in message {}, `{other}` and `{proto}` both become the Rust field `{member}`", m.name),
                )
                .into());
            }
        }

        let attributes = self.options.attributes.for_type(&self.full_name(parents, &m.name), true);
        let code = &mut *self.code;
        // The struct.
        code.push_str(&schema_doc(&m.doc));
        let _ = writeln!(code, "/// Message `{}`. Create it with `new_in(&arena)`: it lives in a per-request arena, so it has no `Default`.", m.name);
        let _ = writeln!(code, "{attributes}#[derive(Clone, PartialEq)]\npub struct {name}<'a> {{");
        let _ = writeln!(code, "__cf_arena: {PRIV}::ArenaRef<'a>,\n__cf_bitmap: [u32; {words}],");
        let protobuf = self.options.wire == crate::Wire::Protobuf;
        if protobuf {
            let _ = writeln!(code, "__cf_size: {PW}::CachedSize,");
        }
        for f in fields.iter().filter(|f| f.shape != Shape::Oneof) {
            let _ = writeln!(code, "{}: {},", f.member, f.storage);
        }
        for (o, oneof) in m.oneofs.iter().enumerate() {
            let lt =
                if fields.iter().any(|f| f.def.oneof == Some(o) && needs_lifetime(&f.def.kind)) { "<'a>" } else { "" };
            let _ = writeln!(
                code,
                "{}: ::core::option::Option<{}::{}{lt}>,",
                to_snake(&oneof.name),
                to_snake(&m.name),
                upper_camel(&oneof.name)
            );
        }
        code.push_str("}\n\n");

        // Debug shows the fields as prost's derive does, not the internals.
        let _ = write!(
            code,
            "impl ::core::fmt::Debug for {name}<'_> {{\nfn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{\nf.debug_struct(\"{name}\")"
        );
        for f in fields.iter().filter(|f| f.shape != Shape::Oneof) {
            let _ = write!(code, ".field(\"{}\", &{})", f.member.trim_start_matches("r#"), debug_value(f));
        }
        for oneof in &m.oneofs {
            let mem = to_snake(&oneof.name);
            let _ = write!(code, ".field(\"{}\", &self.{mem})", mem.trim_start_matches("r#"));
        }
        code.push_str(".finish()\n}\n}\n\n");

        let _ = writeln!(code, "impl<'a> {name}<'a> {{");
        let _ = writeln!(
            code,
            "/// An empty message in `arena`.\n#[inline]\npub fn new_in(arena: &'a {RT}::Arena) -> Self {{ <Self as {RT}::Message<'a>>::new_in(arena) }}"
        );
        code.push_str(&acc.code);
        if protobuf {
            // prost's names, for the format this type is generated for (the
            // trait `Message`'s methods are the Cornflakes format's).
            let _ = writeln!(
                code,
                "/// Length of the protobuf encoding, as prost's `encoded_len` (this type's Cornflakes-format length is [`{RT}::Message::encoded_len`]).\n#[inline]\npub fn encoded_len(&self) -> usize {{ <Self as {RT}::protowire::ProtoMessage<'a>>::proto_encoded_len(self) }}\n\
                 /// The protobuf encoding, as prost's `encode_to_vec`.\n#[inline]\npub fn encode_to_vec(&self) -> ::std::vec::Vec<u8> {{ <Self as {RT}::protowire::ProtoMessage<'a>>::serialize_proto_to_vec(self) }}\n\
                 /// Decodes a protobuf encoding, as prost's `decode`: fields borrow from `data` (from a pool buffer, [`{RT}::protowire::ProtoMessage::deserialize_proto`] makes long ones zero-copy references).\n///\n/// # Errors\n///\n/// When `data` is not a valid protobuf encoding of this message.\n#[inline]\npub fn decode(data: &'a [u8], arena: &'a {RT}::Arena) -> ::core::result::Result<Self, {RT}::protowire::ProtoDecodeError> {{ <Self as {RT}::protowire::ProtoMessage<'a>>::deserialize_proto_from_slice(data, arena) }}"
            );
        }
        if self.options.samples {
            emit_sample(code, m, &fields);
        }
        code.push_str("}\n\n");

        // Its protobuf name (what `Any` records).
        let proto_name: String = parents.iter().map(|p| format!("{p}.")).chain([m.name.clone()]).collect();
        let _ = writeln!(
            code,
            "impl {RT}::Name for {name}<'_> {{
const NAME: &'static str = {proto_name:?};
const PACKAGE: &'static str = {:?};
}}
",
            self.package
        );

        // The Message impl.
        let _ = writeln!(code, "impl<'a> {RT}::Message<'a> for {name}<'a> {{");
        let _ = writeln!(code, "const FIELD_COUNT: usize = {n};");
        let _ = writeln!(code, "#[inline]\nfn new_in(arena: &'a {RT}::Arena) -> Self {{\nSelf {{\n__cf_arena: {PRIV}::ArenaRef::new(arena),\n__cf_bitmap: [0; {words}],");
        if protobuf {
            code.push_str("__cf_size: ::core::default::Default::default(),\n");
        }
        for f in fields.iter().filter(|f| f.shape != Shape::Oneof) {
            let init = match f.shape {
                Shape::List => format!("{RT}::List::new_in(arena)"),
                Shape::Message => "::core::option::Option::None".to_owned(),
                _ => "::core::default::Default::default()".to_owned(),
            };
            let _ = writeln!(code, "{}: {init},", f.member);
        }
        for oneof in &m.oneofs {
            let _ = writeln!(code, "{}: ::core::option::Option::None,", to_snake(&oneof.name));
        }
        code.push_str("}\n}\n");
        let _ = writeln!(code, "#[inline]\nfn arena(&self) -> &'a {RT}::Arena {{ self.__cf_arena.get() }}\n}}\n");

        // The plumbing impl.
        let _ = writeln!(code, "impl<'a> {PRIV}::MessageImpl<'a> for {name}<'a> {{");
        if n == 0 {
            let _ = writeln!(code, "#[inline]\nfn header_len(&self) -> usize {{ {PRIV}::header_prefix_len(0) }}");
        } else {
            let _ = writeln!(
                code,
                "#[inline]\nfn header_len(&self) -> usize {{\nlet mut len = {PRIV}::header_prefix_len({words});"
            );
            for f in &fields {
                let _ =
                    writeln!(code, "if {} {{ len += <{} as {PRIV}::Field>::ENTRY_LEN; }}", present_cond(f), f.codec);
            }
            code.push_str("len\n}\n");
        }

        let _ = writeln!(code, "#[inline]\nfn add_children_layout(&self, layout: &mut {RT}::Layout) {{");
        for f in fields.iter().filter(|f| !is_plain_scalar(f)) {
            let _ = writeln!(
                code,
                "if let ::core::option::Option::Some(v) = {} {{ {PRIV}::Field::add_layout(v, layout); }}",
                present(f)
            );
        }
        let _ = writeln!(code, "let _ = layout;\n}}");

        if n == 0 {
            let _ = writeln!(code, "#[inline]\nfn write_object(&self, w: &mut {PRIV}::Writer<'_>, at: usize) {{\nlet _ = w.put_bitmap(at, &self.__cf_bitmap);\n}}");
        } else {
            let _ = writeln!(code, "#[inline]\nfn write_object(&self, w: &mut {PRIV}::Writer<'_>, at: usize) {{\nlet mut bitmap = [0u32; {words}];");
            for f in &fields {
                let _ = writeln!(code, "if {} {{ {PRIV}::set_bit(&mut bitmap, {}); }}", present_cond(f), f.index);
            }
            let _ = writeln!(code, "let mut pos = w.put_bitmap(at, &bitmap);");
            for f in &fields {
                let _ = writeln!(
                    code,
                    "if let ::core::option::Option::Some(v) = {} {{ {PRIV}::Field::write_entry(v, w, pos); pos += <{} as {PRIV}::Field>::ENTRY_LEN; }}",
                    present(f),
                    f.codec
                );
            }
            code.push_str("let _ = pos;\n}\n");
        }

        let _ = writeln!(code, "#[inline]\nfn visit_zero_copy<F: FnMut(&{RT}::RcBuf)>(&self, f: &mut F) {{");
        for f in fields.iter().filter(|f| !is_plain_scalar(f)) {
            let _ = writeln!(
                code,
                "if let ::core::option::Option::Some(v) = {} {{ {PRIV}::Field::visit_zero_copy(v, f); }}",
                present(f)
            );
        }
        let _ = writeln!(code, "let _ = f;\n}}");

        let _ = writeln!(
            code,
            "#[inline]\nfn read_object(r: &mut {PRIV}::Reader<'a>, at: usize) -> ::core::result::Result<Self, {RT}::DecodeError> {{"
        );
        if n == 0 {
            let _ = writeln!(code, "let mut bitmap = [0u32; 0];\nlet start = r.enter_object(at, &mut bitmap, 0)?;\nr.leave_object(start, start)?;\n::core::result::Result::Ok(Self::new_in(r.arena()))\n}}\n}}\n");
        } else {
            let _ = writeln!(code, "let mut m = Self::new_in(r.arena());\nlet mut bitmap = [0u32; {words}];\nlet start = r.enter_object(at, &mut bitmap, {n})?;\nlet mut pos = start;");
            if !reserved.is_empty() {
                let _ = writeln!(code, "{PRIV}::refuse_reserved(&bitmap, &[{}])?;", reserved.join(", "));
            }
            for f in &fields {
                let (i, mem, codec) = (f.index, &f.member, &f.codec);
                let _ = match f.shape {
                    Shape::Single => writeln!(
                        code,
                        "{PRIV}::read_single::<{codec}>(r, &bitmap, {i}, &mut pos, &mut m.{mem}, &mut m.__cf_bitmap, {})?;",
                        f.def.optional
                    ),
                    Shape::Message => {
                        writeln!(code, "{PRIV}::read_option::<{codec}>(r, &bitmap, {i}, &mut pos, &mut m.{mem})?;")
                    }
                    Shape::List => writeln!(code, "{PRIV}::read_into::<{codec}>(r, &bitmap, {i}, &mut pos, &mut m.{mem})?;"),
                    Shape::Oneof => writeln!(
                        code,
                        "{PRIV}::read_member::<{codec}, _>(r, &bitmap, {i}, &mut pos, &mut m.{mem}, {})?;",
                        f.variant
                    ),
                };
            }
            code.push_str("r.leave_object(start, pos)?;\n::core::result::Result::Ok(m)\n}\n}\n\n");
        }

        if protobuf {
            emit_proto_impl(code, &name, m, &fields);
        }

        // The owned form: message, packet and arena in one value.
        let owned = owned_name(&name);
        let _ = writeln!(
            code,
            "{PRIV}::self_cell!(\n/// A decoded [`{name}`] together with the packet and arena it borrows from: one owned value, which can outlive the function that received the packet. Read it with [`{owned}::with`].\npub struct {owned} {{\nowner: {RT}::PacketOwner,\n#[not_covariant]\ndependent: {name},\n}}\nimpl {{Debug}}\n);"
        );
        let _ = writeln!(
            code,
            "impl {owned} {{\n/// Decodes `pkt` into `arena` (as [`{RT}::Message::deserialize`]) and keeps all three together.\n///\n/// # Errors\n///\n/// The [`{RT}::DecodeError`] of the decode; the packet and arena are dropped.\npub fn decode(pkt: {RT}::RcBuf, arena: {RT}::Arena) -> ::core::result::Result<Self, {RT}::DecodeError> {{ Self::try_new({RT}::PacketOwner::new(pkt, arena), |o| <{name}<'_> as {RT}::Message<'_>>::deserialize(o.packet(), o.arena())) }}\n/// Calls `f` with the message.\npub fn with<R>(&self, f: impl for<'a> ::core::ops::FnOnce(&{name}<'a>) -> R) -> R {{ self.with_dependent(|_, m| f(m)) }}\n/// Drops the message and returns the packet and the arena (to reset and reuse).\npub fn into_parts(self) -> ({RT}::RcBuf, {RT}::Arena) {{ self.into_owner().into_parts() }}\n}}\n"
        );

        if has_module(m) {
            let _ = writeln!(code, "/// Types nested in message `{}`.\npub mod {} {{", m.name, to_snake(&m.name));
            let mut inner_parents = parents.to_vec();
            inner_parents.push(m.name.clone());
            let inner_module: Vec<String> =
                package.iter().cloned().chain(inner_parents.iter().map(|p| to_snake(p))).collect();
            let mut items = Items::default();
            for e in &m.enums {
                items.add_type(&upper_camel(&e.name), self.file, e.location)?;
                self.emit_enum(e, &inner_parents)?;
            }
            for (o, oneof) in m.oneofs.iter().enumerate() {
                items.add_type(&upper_camel(&oneof.name), self.file, m.location)?;
                let attributes = self.options.attributes.for_type(&self.full_name(&inner_parents, &oneof.name), false);
                emit_oneof(self.code, o, &oneof.name, m, &inner_module, &attributes);
            }
            for nested in &m.nested {
                items.add_type(&upper_camel(&nested.name), self.file, nested.location)?;
                items.add_type(&owned_name(&upper_camel(&nested.name)), self.file, nested.location)?;
                if has_module(nested) {
                    items.add_module(&to_snake(&nested.name), self.file, nested.location)?;
                }
                self.emit_message(nested, package, &inner_parents)?;
            }
            self.code.push_str("}\n\n");
        }
        Ok(())
    }
}

/// The Rust name of an enum value, as prost-build makes it: the enum's name
/// is stripped from the front when what remains is a valid name
/// (`Color.COLOR_RED` becomes `Color::Red`).
fn variant_name(enum_name: &str, value: &str) -> String {
    let enum_camel = enum_name.to_upper_camel_case();
    let value_camel = value.to_upper_camel_case();
    let stripped = match value_camel.strip_prefix(&enum_camel) {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_uppercase()) => rest.to_owned(),
        _ => value_camel,
    };
    ident(&stripped)
}

fn emit_oneof(code: &mut String, o: usize, oneof: &str, m: &MessageDef, module: &[String], attributes: &str) {
    let members: Vec<&FieldDef> = m.fields.iter().filter(|f| f.oneof == Some(o)).collect();
    let lt = if members.iter().any(|f| needs_lifetime(&f.kind)) { "<'a>" } else { "" };
    // With an enum member, Debug names its value (as prost's does).
    let has_enum = members.iter().any(|f| matches!(f.kind, Kind::Enum(_)));
    let derive = if has_enum { "Clone, PartialEq" } else { "Clone, Debug, PartialEq" };
    let name = upper_camel(oneof);
    let _ = writeln!(
        code,
        "/// Oneof `{oneof}` of message `{}`: at most one member is set.\n{attributes}#[derive({derive})]\npub enum {name}{lt} {{",
        m.name,
    );
    for f in &members {
        let elem = elem_type(&f.kind, module);
        let ty = if matches!(f.kind, Kind::Message(_)) { format!("{PRIV}::Nested<'a, {elem}>") } else { elem };
        let _ = writeln!(code, "/// Field `{}` = {}.\n{}({ty}),", f.name, f.number, upper_camel(&f.name));
    }
    code.push_str("}\n\n");
    // A message member's variant holds it boxed in its arena: constructors,
    // so that no one has to name the box (`Kind::Prepaid(..)` as in prost
    // is `Kind::prepaid(..)` here).
    let message_members: Vec<&&FieldDef> = members.iter().filter(|f| matches!(f.kind, Kind::Message(_))).collect();
    if !message_members.is_empty() {
        let _ = writeln!(code, "impl<'a> {name}<'a> {{");
        for f in message_members {
            let elem = elem_type(&f.kind, module);
            let _ = writeln!(
                code,
                "/// The variant `{v}` holding `value` (boxed in the arena `value` was made in).\n#[inline]\npub fn {ctor}(value: {elem}) -> Self {{ let arena = <{elem} as {RT}::Message<'a>>::arena(&value); Self::{v}({PRIV}::nested_in(value, arena)) }}",
                v = upper_camel(&f.name),
                ctor = to_snake(&f.name),
            );
        }
        code.push_str("}\n\n");
    }
    if has_enum {
        let _ = writeln!(
            code,
            "impl ::core::fmt::Debug for {name}{} {{\nfn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {{\nmatch self {{",
            if lt.is_empty() { "" } else { "<'_>" }
        );
        for f in &members {
            let v = upper_camel(&f.name);
            let value = match &f.kind {
                Kind::Enum(t) => format!("&{PRIV}::EnumDebug::<{}>::new(*v)", type_path(module, t)),
                _ => "v".to_owned(),
            };
            let _ = writeln!(code, "Self::{v}(v) => f.debug_tuple(\"{v}\").field({value}).finish(),");
        }
        code.push_str("}\n}\n}\n\n");
    }
}

/// The protobuf key of field `number` with wire type `wire`, as the bytes
/// of its varint (a Rust byte-array literal).
fn proto_key(number: i32, wire: u8) -> (String, usize) {
    let mut v = (number as u64) << 3 | u64::from(wire);
    let mut bytes = Vec::new();
    loop {
        if v < 0x80 {
            bytes.push(v as u8);
            break;
        }
        bytes.push((v as u8) | 0x80);
        v >>= 7;
    }
    let list: Vec<String> = bytes.iter().map(|b| format!("{b:#04x}")).collect();
    (format!("&[{}]", list.join(", ")), bytes.len())
}

/// The wire type of one value of a scalar codec.
fn codec_wire(codec: &str) -> u8 {
    match codec {
        "Fixed64" | "Sfixed64" | "Double" => 1,
        "Fixed32" | "Sfixed32" | "Float" => 5,
        _ => 0,
    }
}

/// `impl ProtoImpl`: the protobuf wire format (size pass, write, merge),
/// one runtime call per field, fields in prost's order (by field number,
/// a oneof at the place of its lowest member).
fn emit_proto_impl(code: &mut String, name: &str, m: &MessageDef, fields: &[FieldCode]) {
    let scalar = |f: &FieldCode| matches!(f.def.kind, Kind::Scalar(_) | Kind::Enum(_));
    let key_of = |f: &FieldCode| {
        let wire = match (&f.def.kind, f.shape) {
            (Kind::Scalar(_) | Kind::Enum(_), Shape::List) if f.def.packed => 2,
            (Kind::Scalar(_) | Kind::Enum(_), _) => codec_wire(f.def.codec),
            _ => 2,
        };
        proto_key(f.def.number, wire)
    };
    // Encoding units in prost's order.
    let mut units: Vec<(i32, Vec<&FieldCode>)> = Vec::new();
    for f in fields.iter().filter(|f| f.def.oneof.is_none()) {
        units.push((f.def.number, vec![f]));
    }
    for o in 0..m.oneofs.len() {
        let members: Vec<&FieldCode> = fields.iter().filter(|f| f.def.oneof == Some(o)).collect();
        if let Some(min) = members.iter().map(|f| f.def.number).min() {
            units.push((min, members));
        }
    }
    units.sort_by_key(|(n, _)| *n);

    // One statement per field for the size pass (`size`) or the write.
    let stmt = |f: &FieldCode, size: bool| -> String {
        let (key, key_len) = key_of(f);
        let mem = &f.member;
        let c = f.def.codec;
        let (k, call) = if size { (key_len.to_string(), "len +=") } else { (key, "") };
        let tally = if size { ", tally" } else { "" };
        let w = if size { "" } else { "w, " };
        let value = |v: &str| -> String {
            match (&f.def.kind, size) {
                (Kind::Scalar(_) | Kind::Enum(_), true) => format!("{PW}::scalar_len::<{PW}::{c}>({k}, {v})"),
                (Kind::Scalar(_) | Kind::Enum(_), false) => format!("{PW}::put_scalar::<{PW}::{c}, _>(w, {k}, {v})"),
                (Kind::Bytes | Kind::String, true) => format!("{PW}::bytes_len({k}, {v}{tally})"),
                (Kind::Bytes | Kind::String, false) => format!("{PW}::put_bytes({w}{k}, {v})"),
                (Kind::Message(_), true) => format!("{PW}::message_len({k}, {v}{tally})"),
                (Kind::Message(_), false) => format!("{PW}::put_message({w}{k}, {v})"),
            }
        };
        match f.shape {
            Shape::Single => {
                let v = if scalar(f) { format!("self.{mem}") } else { format!("&self.{mem}") };
                format!("if {PRIV}::bit(&self.__cf_bitmap, {}) {{ {call} {}; }}", f.index, value(&v))
            }
            Shape::Message => {
                format!("if let ::core::option::Option::Some(v) = &self.{mem} {{ {call} {}; }}", value("&**v"))
            }
            Shape::List if scalar(f) => {
                let how = if f.def.packed { "packed" } else { "unpacked" };
                if size {
                    format!("len += {PW}::{how}_len::<{PW}::{c}>({k}, &self.{mem});")
                } else {
                    format!("{PW}::put_{how}::<{PW}::{c}, _>(w, {k}, &self.{mem});")
                }
            }
            Shape::List => format!("for v in self.{mem}.iter() {{ {call} {}; }}", value("v")),
            Shape::Oneof => {
                let v = match f.def.kind {
                    Kind::Scalar(_) | Kind::Enum(_) => "*v",
                    Kind::Message(_) => "&**v",
                    _ => "v",
                };
                format!("::core::option::Option::Some({}(v)) => {{ {call} {}; }}", f.variant, value(v))
            }
        }
    };

    let _ = writeln!(code, "impl<'a> {PW}::ProtoImpl<'a> for {name}<'a> {{");
    // Size pass.
    // (`mut` only when there is something to add: a message without fields
    // would warn, failing crates that deny warnings.)
    let binding = if units.is_empty() { "let len" } else { "let mut len" };
    let _ = writeln!(code, "#[inline]\nfn pw_size(&self, tally: &mut {PW}::Tally) -> usize {{\n{binding} = 0usize;");
    for (_, unit) in &units {
        if unit[0].shape == Shape::Oneof {
            let _ = writeln!(code, "match &self.{} {{", unit[0].member);
            for f in unit {
                let _ = writeln!(code, "{}", stmt(f, true));
            }
            code.push_str("::core::option::Option::None => {}\n}\n");
        } else {
            let _ = writeln!(code, "{}", stmt(unit[0], true));
        }
    }
    code.push_str("let _ = &tally;\nself.__cf_size.set(len);\nlen\n}\n");
    code.push_str("#[inline(always)]\nfn pw_cached_size(&self) -> usize { self.__cf_size.get() }\n");
    // Write.
    let _ = writeln!(
        code,
        "#[inline]\nfn pw_write<F: ::core::ops::FnMut(usize, &{RT}::RcBuf)>(&self, w: &mut {PW}::Writer<'_, F>) {{"
    );
    for (_, unit) in &units {
        if unit[0].shape == Shape::Oneof {
            let _ = writeln!(code, "match &self.{} {{", unit[0].member);
            for f in unit {
                let _ = writeln!(code, "{}", stmt(f, false));
            }
            code.push_str("::core::option::Option::None => {}\n}\n");
        } else {
            let _ = writeln!(code, "{}", stmt(unit[0], false));
        }
    }
    code.push_str("let _ = w;\n}\n");
    // Merge.
    let _ = writeln!(
        code,
        "#[inline]\nfn pw_merge_field(&mut self, r: &mut {PW}::Reader<'a>, number: u32, wire: {RT}::protowire::WireType) -> ::core::result::Result<(), {PW}::DecodeError> {{"
    );
    if fields.is_empty() {
        // A `match` with only the wildcard arm is a clippy warning.
        code.push_str("r.skip(number, wire)\n}\n}\n\n");
        return;
    }
    code.push_str("match number {\n");
    for f in fields {
        let (n, mem, c, i) = (f.def.number, &f.member, f.def.codec, f.index);
        let arm = match (f.shape, &f.def.kind) {
            (Shape::Single, Kind::Scalar(_) | Kind::Enum(_)) => format!(
                "{PW}::merge_single::<{PW}::{c}>(r, number, wire, &mut self.{mem}, &mut self.__cf_bitmap, {i}, {})",
                f.def.optional
            ),
            (Shape::Single, _) => format!(
                "{PW}::merge_single_bytes(r, number, wire, &mut self.{mem}, &mut self.__cf_bitmap, {i}, {})",
                f.def.optional
            ),
            (Shape::Message, _) => format!("{PW}::merge_nested(r, number, wire, &mut self.{mem})"),
            (Shape::List, Kind::Scalar(_) | Kind::Enum(_)) => {
                format!("{PW}::merge_list::<{PW}::{c}>(r, number, wire, &mut self.{mem})")
            }
            (Shape::List, Kind::Message(_)) => format!("{PW}::merge_list_message(r, number, wire, &mut self.{mem})"),
            (Shape::List, _) => format!("{PW}::merge_list_bytes(r, number, wire, &mut self.{mem})"),
            (Shape::Oneof, Kind::Scalar(_) | Kind::Enum(_)) => format!(
                "{{ self.{mem} = ::core::option::Option::Some({}({PW}::read_scalar::<{PW}::{c}>(r, number, wire)?)); ::core::result::Result::Ok(()) }}",
                f.variant
            ),
            (Shape::Oneof, Kind::Message(_)) => format!(
                "{{ if !::core::matches!(self.{mem}, ::core::option::Option::Some({v}(_))) {{ let arena = self.__cf_arena.get(); self.{mem} = ::core::option::Option::Some({v}({PRIV}::nested_in(<{e} as {RT}::Message<'a>>::new_in(arena), arena))); }} match &mut self.{mem} {{ ::core::option::Option::Some({v}(m)) => {PW}::merge_message(r, number, wire, &mut **m), _ => ::core::result::Result::Ok(()) }} }}",
                v = f.variant,
                e = f.elem
            ),
            (Shape::Oneof, _) => format!(
                "{{ self.{mem} = ::core::option::Option::Some({}({PW}::read_bytes(r, number, wire)?)); ::core::result::Result::Ok(()) }}",
                f.variant
            ),
        };
        let _ = writeln!(code, "{n} => {arm},");
    }
    code.push_str("_ => r.skip(number, wire),\n}\n}\n}\n\n");
}

fn is_plain_scalar(f: &FieldCode) -> bool {
    matches!(f.def.kind, Kind::Scalar(_) | Kind::Enum(_)) && matches!(f.shape, Shape::Single)
}

/// Expression: whether the field is encoded.
fn present_cond(f: &FieldCode) -> String {
    match f.shape {
        Shape::Single => format!("{PRIV}::bit(&self.__cf_bitmap, {})", f.index),
        Shape::Message => format!("self.{}.is_some()", f.member),
        Shape::List => format!("!self.{}.is_empty()", f.member),
        Shape::Oneof => format!("::core::matches!(self.{}, ::core::option::Option::Some({}(_)))", f.member, f.variant),
    }
}

/// Expression yielding `Option<&codec>`: the field when encoded.
fn present(f: &FieldCode) -> String {
    match f.shape {
        Shape::Message => format!("self.{}.as_ref()", f.member),
        Shape::Oneof => format!(
            "match &self.{} {{ ::core::option::Option::Some({}(v)) => ::core::option::Option::Some(v), _ => ::core::option::Option::None }}",
            f.member, f.variant
        ),
        _ => format!(
            "if {} {{ ::core::option::Option::Some(&self.{}) }} else {{ ::core::option::Option::None }}",
            present_cond(f),
            f.member
        ),
    }
}

/// Expression for a field in the message's `Debug`, printed as prost's
/// derive prints it: enums by name (the number if the schema does not know
/// it), `optional` fields as `Some(..)` or `None`.
fn debug_value(f: &FieldCode) -> String {
    let mem = &f.member;
    if let Some(map) = &f.def.map {
        // As prost's `HashMap` prints: `{key: value, ..}`, from the
        // entries' accessors (their fields are private to their module).
        let entry = f.elem.replace("<'a>", "<'_>");
        let value_ty = f.map_value.clone().unwrap_or_default().replace("<'a>", "<'_>");
        let put = match &map.value {
            Kind::Enum(_) => format!("m.entry(&e.get_key(), &{PRIV}::EnumDebug::<{value_ty}>::new(e.get_value_raw()));"),
            // A message value that is absent reads as its default, as in prost.
            Kind::Message(_) => format!(
                "match e.get_value() {{ ::core::option::Option::Some(v) => {{ m.entry(&e.get_key(), v); }} \
                 ::core::option::Option::None => {{ m.entry(&e.get_key(), &<{value_ty} as {RT}::Message<'_>>::new_in(<{entry} as {RT}::Message<'_>>::arena(e))); }} }}"
            ),
            _ => "m.entry(&e.get_key(), &e.get_value());".to_owned(),
        };
        return format!(
            "{PRIV}::MapDebug::new(&self.{mem}, |e: &{entry}, m: &mut ::core::fmt::DebugMap<'_, '_>| {{ {put} }})"
        );
    }
    let enum_path = f.enum_path.as_ref();
    match (f.shape, enum_path) {
        (Shape::List, Some(e)) => format!("{PRIV}::EnumListDebug::<{e}>::new(&self.{mem})"),
        (Shape::Single, e) => {
            let value = match e {
                Some(e) => format!("{PRIV}::EnumDebug::<{e}>::new(self.{mem})"),
                None => format!("&self.{mem}"),
            };
            if f.def.optional {
                format!(
                    "if {} {{ ::core::option::Option::Some({value}) }} else {{ ::core::option::Option::None }}",
                    present_cond(f)
                )
            } else if e.is_some() {
                value
            } else {
                format!("self.{mem}")
            }
        }
        _ => format!("self.{mem}"),
    }
}

/// A schema comment as doc lines (then an empty one, before what the
/// generator says), made safe for rustdoc as prost-build makes it: no line
/// is indented (an indented block would be a doctest), a fenced block is
/// `text`, and brackets are escaped (not links).
fn schema_doc(comment: &str) -> String {
    if comment.trim().is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let mut fenced = false;
    let lines: Vec<&str> = comment.trim_end().lines().collect();
    let first = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
    for line in &lines[first..] {
        let line = line.trim_end();
        let text = if line.trim_start().starts_with("```") {
            fenced = !fenced;
            if fenced {
                "```text".to_owned()
            } else {
                "```".to_owned()
            }
        } else if fenced {
            line.strip_prefix(' ').unwrap_or(line).to_owned()
        } else {
            line.trim_start().replace('[', "\\[").replace(']', "\\]")
        };
        let _ = writeln!(out, "///{}{text}", if text.is_empty() { "" } else { " " });
    }
    if fenced {
        out.push_str("/// ```\n");
    }
    out.push_str("///\n");
    out
}

/// Generated accessor methods, with their names for the collision check.
#[derive(Default)]
struct Accessors {
    code: String,
    /// Method name -> the proto field or oneof that generated it.
    names: Vec<(String, String)>,
    /// The getter of the field being generated and the schema's comment on
    /// that field, which its getter's docs begin with (as prost puts it on
    /// the struct field).
    field_doc: Option<(String, String)>,
}

impl Accessors {
    fn method(&mut self, name: String, owner: &str, doc: &str, sig: &str, body: &str) {
        if let Some((_, schema)) = self.field_doc.as_ref().filter(|(get, _)| *get == name) {
            self.code.push_str(&schema_doc(schema));
        }
        let _ = writeln!(self.code, "/// {doc}\n#[inline]\npub fn {name}{sig} {{ {body} }}");
        self.names.push((name, owner.to_owned()));
    }

    fn check(&self, file: &str, m: &MessageDef) -> Result<(), Unsupported> {
        let mut seen: HashMap<&str, &str> = HashMap::new();
        seen.insert("new_in", "(the constructor)");
        for (name, owner) in &self.names {
            if let Some(first) = seen.insert(name, owner) {
                return Err(collision(
                    file,
                    m.location,
                    format!(
                        "in message {}, `{first}` and `{owner}` both generate the method `{name}`; rename one of them",
                        m.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// (argument type, expression building the stored value from `value`)
    /// for a setter or an append of a value of `kind`.
    fn arg(kind: &Kind, enum_path: Option<&String>, elem: &str) -> (String, String) {
        match kind {
            Kind::Scalar(s) => (s.rust().to_owned(), "value".to_owned()),
            Kind::Enum(_) => (enum_path.cloned().unwrap_or_default(), "i32::from(value)".to_owned()),
            Kind::Bytes => ("&'a [u8]".to_owned(), format!("{RT}::CfBytes::new(value, self.__cf_arena.get())")),
            Kind::String => ("&'a str".to_owned(), format!("{RT}::CfString::new(value, self.__cf_arena.get())")),
            Kind::Message(_) => (elem.to_owned(), "value".to_owned()),
        }
    }

    fn field(&mut self, f: &FieldCode, m: &MessageDef) {
        let (i, mem, n, a) = (f.index, f.member.as_str(), f.def.name.as_str(), f.accessor.as_str());
        self.field_doc = (!f.def.doc.is_empty()).then(|| (format!("get_{a}"), f.def.doc.clone()));
        let set_bit = format!("{PRIV}::set_bit(&mut self.__cf_bitmap, {i});");
        let clear_bit = format!("{PRIV}::clear_bit(&mut self.__cf_bitmap, {i});");
        let ty = f.elem.as_str();
        let st = f.storage.as_str();
        match f.shape {
            Shape::Oneof => {
                // Per-member setters; the value is read through the oneof.
                let oneof = &m.oneofs[f.def.oneof.unwrap_or(0)].name;
                let (arg, value) = Self::arg(&f.def.kind, f.enum_path.as_ref(), ty);
                let value = if matches!(f.def.kind, Kind::Message(_)) {
                    format!("{PRIV}::nested_in(value, self.__cf_arena.get())")
                } else {
                    value
                };
                self.method(
                    format!("set_{a}"),
                    n,
                    &format!("Sets oneof `{oneof}` to `{n}`."),
                    &format!("(&mut self, value: {arg})"),
                    &format!("self.{mem} = ::core::option::Option::Some({}({value}));", f.variant),
                );
            }
            Shape::List => {
                let list = &f.storage;
                self.method(
                    format!("has_{a}"),
                    n,
                    &format!("Whether `{n}` has elements (what decides whether it is sent)."),
                    "(&self) -> bool",
                    &format!("!self.{mem}.is_empty()"),
                );
                self.method(
                    format!("get_{a}"),
                    n,
                    &format!("The list `{n}`."),
                    &format!("(&self) -> &{list}"),
                    &format!("&self.{mem}"),
                );
                self.method(
                    format!("get_mut_{a}"),
                    n,
                    &format!("The list `{n}`, for changes."),
                    &format!("(&mut self) -> &mut {list}"),
                    &format!("&mut self.{mem}"),
                );
                self.method(
                    format!("init_{a}"),
                    n,
                    &format!("Replaces `{n}` with an empty list with room for `capacity` elements."),
                    &format!("(&mut self, capacity: usize) -> &mut {list}"),
                    &format!(
                        "self.{mem} = {RT}::List::with_capacity_in(capacity, self.__cf_arena.get()); &mut self.{mem}"
                    ),
                );
                self.method(
                    format!("clear_{a}"),
                    n,
                    &format!("Clears `{n}`."),
                    "(&mut self)",
                    &format!("self.{mem}.clear();"),
                );
                if let Some(map) = &f.def.map {
                    let entry = ty;
                    let (karg, key_eq) = match &map.key {
                        Kind::String => ("&'a str".to_owned(), "e.get_key().as_bytes() == key.as_bytes()".to_owned()),
                        Kind::Scalar(s) => (s.rust().to_owned(), "e.get_key() == key".to_owned()),
                        _ => ("i32".to_owned(), "e.get_key_raw() == key".to_owned()),
                    };
                    let varg = f.map_value.clone().unwrap_or_default();
                    let key_lookup = karg.replace("&'a ", "&");
                    // The body of an insert, with the entry's setters it uses.
                    let insert = |kset: &str, vset: &str| {
                        format!(
                            "if let ::core::option::Option::Some(e) = self.{mem}.iter_mut().rev().find(|e| {key_eq}) {{ e.{vset}(value); return; }} \
                             let mut e = <{entry} as {RT}::Message<'a>>::new_in(self.__cf_arena.get()); e.{kset}(key); e.{vset}(value); self.{mem}.append(e);"
                        )
                    };
                    self.method(
                        format!("insert_{a}"),
                        n,
                        &format!("Sets `{n}[key]` to `value`: replaces the value of an entry with this key, or appends an entry."),
                        &format!("(&mut self, key: {karg}, value: {varg})"),
                        &insert("set_key", "set_value"),
                    );
                    // Keys and values that do not outlive the message.
                    let short = |k: &Kind| match k {
                        Kind::String => Some("&str"),
                        Kind::Bytes => Some("&[u8]"),
                        _ => None,
                    };
                    if short(&map.key).is_some() || short(&map.value).is_some() {
                        let kshort = short(&map.key).map_or(karg.clone(), str::to_owned);
                        let vshort = short(&map.value).map_or(varg.clone(), str::to_owned);
                        let kset = if short(&map.key).is_some() { "set_key_copied" } else { "set_key" };
                        let vset = if short(&map.value).is_some() { "set_value_copied" } else { "set_value" };
                        self.method(
                            format!("insert_{a}_copied"),
                            n,
                            &format!("[`insert_{a}`](Self::insert_{a}) of a key and value that may not outlive the message (`&format!(..)`, a local): strings and bytes copied into the arena unless zero-copy."),
                            &format!("(&mut self, key: {kshort}, value: {vshort})"),
                            &insert(kset, vset),
                        );
                    }
                    self.method(
                        format!("lookup_{a}"),
                        n,
                        &format!("The entry of `{n}` with this key (the last one, as protobuf's last-wins rule says, if a peer sent several)."),
                        &format!("(&self, key: {key_lookup}) -> ::core::option::Option<&{entry}>"),
                        &format!("self.{mem}.iter().rev().find(|e| {key_eq})"),
                    );
                    self.method(
                        format!("lookup_{a}_mut"),
                        n,
                        &format!("[`lookup_{a}`](Self::lookup_{a}), to change the entry's value in place (prost's `get_mut` of the map)."),
                        &format!("(&mut self, key: {key_lookup}) -> ::core::option::Option<&mut {entry}>"),
                        &format!("self.{mem}.iter_mut().rev().find(|e| {key_eq})"),
                    );
                    return;
                }
                let (arg, value) = Self::arg(&f.def.kind, f.enum_path.as_ref(), ty);
                self.method(
                    format!("append_{a}"),
                    n,
                    &format!("Appends to `{n}`."),
                    &format!("(&mut self, value: {arg})"),
                    &format!("self.{mem}.append({value});"),
                );
                if let Some(e) = &f.enum_path {
                    self.method(
                        format!("iter_{a}"),
                        n,
                        &format!("The elements of `{n}` as enums; a value this schema does not know reads as the default, as in prost's getter (the `i32`s: `get_{a}`)."),
                        &format!("(&self) -> impl ::core::iter::Iterator<Item = {e}> + '_"),
                        &format!("self.{mem}.iter().map(|v| {e}::try_from(*v).unwrap_or_default())"),
                    );
                }
                if matches!(f.def.kind, Kind::Bytes | Kind::String) {
                    let (short, ctor) =
                        if matches!(f.def.kind, Kind::Bytes) { ("&[u8]", "CfBytes") } else { ("&str", "CfString") };
                    self.method(
                        format!("append_{a}_copied"),
                        n,
                        &format!("Appends to `{n}` a value that may not outlive the message: copied into the arena unless zero-copy."),
                        &format!("(&mut self, value: {short})"),
                        &format!("self.{mem}.append({RT}::{ctor}::copy_in(value, self.__cf_arena.get()));"),
                    );
                }
            }
            Shape::Message => {
                self.method(
                    format!("has_{a}"),
                    n,
                    &format!("Whether `{n}` is set."),
                    "(&self) -> bool",
                    &format!("self.{mem}.is_some()"),
                );
                self.method(
                    format!("get_{a}"),
                    n,
                    &format!("`{n}`, if set."),
                    &format!("(&self) -> ::core::option::Option<&{ty}>"),
                    &format!("self.{mem}.as_deref()"),
                );
                self.method(
                    format!("get_mut_{a}"),
                    n,
                    &format!("`{n}` for changes, created empty (and so set) if unset."),
                    &format!("(&mut self) -> &mut {ty}"),
                    &format!("let arena = self.__cf_arena.get(); self.{mem}.get_or_insert_with(|| {PRIV}::nested_in(<{ty} as {RT}::Message<'a>>::new_in(arena), arena))"),
                );
                self.method(
                    format!("set_{a}"),
                    n,
                    &format!("Sets `{n}`."),
                    &format!("(&mut self, value: {ty})"),
                    &format!(
                        "self.{mem} = ::core::option::Option::Some({PRIV}::nested_in(value, self.__cf_arena.get()));"
                    ),
                );
                self.method(
                    format!("clear_{a}"),
                    n,
                    &format!("Clears `{n}`."),
                    "(&mut self)",
                    &format!("self.{mem} = ::core::option::Option::None;"),
                );
            }
            Shape::Single => {
                // proto3: a field without `optional` is sent only when it is
                // not its default; with `optional`, whenever it was set.
                let mark = if f.def.optional {
                    set_bit.clone()
                } else {
                    format!(
                        "if self.{mem} != <{st} as ::core::default::Default>::default() {{ {set_bit} }} else {{ {clear_bit} }}"
                    )
                };
                let has_doc = if f.def.optional {
                    format!("Whether `{n}` is set (it has explicit presence: `optional`).")
                } else {
                    format!("Whether `{n}` differs from its default (proto3: only then is it sent).")
                };
                self.method(
                    format!("has_{a}"),
                    n,
                    &has_doc,
                    "(&self) -> bool",
                    &format!("{PRIV}::bit(&self.__cf_bitmap, {i})"),
                );
                self.method(
                    format!("clear_{a}"),
                    n,
                    &format!("Clears `{n}`."),
                    "(&mut self)",
                    &format!("self.{mem} = ::core::default::Default::default(); {clear_bit}"),
                );
                if f.def.optional {
                    // What a prost user reads from the field's `Option`.
                    let (ret, some) = match &f.def.kind {
                        Kind::Enum(_) => {
                            let e = f.enum_path.clone().unwrap_or_default();
                            (e.clone(), format!("{e}::try_from(self.{mem}).unwrap_or_default()"))
                        }
                        Kind::Bytes | Kind::String => (format!("&{ty}"), format!("&self.{mem}")),
                        _ => (ty.to_owned(), format!("self.{mem}")),
                    };
                    self.method(
                        format!("get_{a}_opt"),
                        n,
                        &format!("`{n}` if set, else `None` (it has explicit presence: `optional`), as prost's `Option` field reads."),
                        &format!("(&self) -> ::core::option::Option<{ret}>"),
                        &format!("if {PRIV}::bit(&self.__cf_bitmap, {i}) {{ ::core::option::Option::Some({some}) }} else {{ ::core::option::Option::None }}"),
                    );
                }
                match &f.def.kind {
                    Kind::Scalar(_) => {
                        self.method(
                            format!("get_{a}"),
                            n,
                            &format!("`{n}` (its default when unset)."),
                            &format!("(&self) -> {ty}"),
                            &format!("self.{mem}"),
                        );
                        self.method(
                            format!("set_{a}"),
                            n,
                            &format!("Sets `{n}`."),
                            &format!("(&mut self, value: {ty})"),
                            &format!("self.{mem} = value; {mark}"),
                        );
                    }
                    Kind::Enum(_) => {
                        let e = f.enum_path.clone().unwrap_or_default();
                        self.method(format!("get_{a}"), n, &format!("`{n}`; a value this schema does not know reads as the default, as in prost (see `get_{a}_raw`)."), &format!("(&self) -> {e}"), &format!("{e}::try_from(self.{mem}).unwrap_or_default()"));
                        self.method(
                            format!("get_{a}_raw"),
                            n,
                            &format!("`{n}` as sent: an `i32`, kept even when this schema does not know it."),
                            "(&self) -> i32",
                            &format!("self.{mem}"),
                        );
                        self.method(
                            format!("set_{a}"),
                            n,
                            &format!("Sets `{n}`."),
                            &format!("(&mut self, value: {e})"),
                            &format!("self.{mem} = i32::from(value); {mark}"),
                        );
                        self.method(
                            format!("set_{a}_raw"),
                            n,
                            &format!("Sets `{n}` to any `i32`, known to the schema or not."),
                            "(&mut self, value: i32)",
                            &format!("self.{mem} = value; {mark}"),
                        );
                    }
                    Kind::Bytes | Kind::String => {
                        let (cf, arg, short, owned) = if matches!(f.def.kind, Kind::Bytes) {
                            ("CfBytes", "&'a [u8]", "&[u8]", "::std::vec::Vec<u8>")
                        } else {
                            ("CfString", "&'a str", "&str", "::std::string::String")
                        };
                        self.method(
                            format!("get_{a}"),
                            n,
                            &format!("`{n}` (empty when unset)."),
                            &format!("(&self) -> &{RT}::{cf}<'a>"),
                            &format!("&self.{mem}"),
                        );
                        self.method(
                            format!("set_{a}"),
                            n,
                            &format!("Sets `{n}` to borrowed data: zero-copy when at least the arena's threshold long and in its pool, else copied when the message is written."),
                            &format!("(&mut self, value: {arg})"),
                            &format!("self.{mem} = {RT}::{cf}::new(value, self.__cf_arena.get()); {mark}"),
                        );
                        self.method(
                            format!("set_{a}_copied"),
                            n,
                            &format!("Sets `{n}` from data that may not outlive the message (`&format!(..)`, a local): copied into the arena unless zero-copy."),
                            &format!("(&mut self, value: {short})"),
                            &format!("self.{mem} = {RT}::{cf}::copy_in(value, self.__cf_arena.get()); {mark}"),
                        );
                        self.method(
                            format!("set_{a}_owned"),
                            n,
                            &format!("Sets `{n}` from an owned value, which is copied into the arena (heap memory cannot be sent zero-copy)."),
                            &format!("(&mut self, value: {owned})"),
                            &format!("self.{mem} = {RT}::{cf}::copy_in(&value, self.__cf_arena.get()); {mark}"),
                        );
                        self.method(
                            format!("set_{a}_buf"),
                            n,
                            &format!("Sets `{n}` from a pool buffer, adopted as a zero-copy reference when at least the arena's threshold long, else copied into the arena."),
                            &format!("(&mut self, value: {RT}::RcBuf)"),
                            &format!("self.{mem} = {RT}::{cf}::from_rcbuf(value, self.__cf_arena.get()); {mark}"),
                        );
                        self.method(
                            format!("set_{a}_field"),
                            n,
                            &format!("Sets `{n}` to an already-built field."),
                            &format!("(&mut self, value: {RT}::{cf}<'a>)"),
                            &format!("self.{mem} = value; {mark}"),
                        );
                    }
                    Kind::Message(_) => {}
                }
            }
        }
    }

    fn oneof(&mut self, o: usize, oneof: &str, m: &MessageDef, fields: &[FieldCode]) {
        let lt = if fields.iter().any(|f| f.def.oneof == Some(o) && needs_lifetime(&f.def.kind)) { "<'a>" } else { "" };
        let ty = format!("{}::{}{lt}", to_snake(&m.name), upper_camel(oneof));
        let mem = to_snake(oneof);
        let a = oneof.to_snake_case();
        self.method(
            format!("has_{a}"),
            oneof,
            &format!("Whether a member of oneof `{oneof}` is set."),
            "(&self) -> bool",
            &format!("self.{mem}.is_some()"),
        );
        self.method(
            format!("get_{a}"),
            oneof,
            &format!("The member of oneof `{oneof}` that is set."),
            &format!("(&self) -> ::core::option::Option<&{ty}>"),
            &format!("self.{mem}.as_ref()"),
        );
        self.method(
            format!("get_mut_{a}"),
            oneof,
            &format!("The member of oneof `{oneof}` that is set, for changes."),
            &format!("(&mut self) -> ::core::option::Option<&mut {ty}>"),
            &format!("self.{mem}.as_mut()"),
        );
        self.method(
            format!("set_{a}"),
            oneof,
            &format!("Sets oneof `{oneof}` (replacing any member set before)."),
            &format!("(&mut self, value: {ty})"),
            &format!("self.{mem} = ::core::option::Option::Some(value);"),
        );
        self.method(
            format!("clear_{a}"),
            oneof,
            &format!("Clears oneof `{oneof}`."),
            "(&mut self)",
            &format!("self.{mem} = ::core::option::Option::None;"),
        );
    }
}

/// `__cf_sample`: a message with every field set, for the generated-code
/// tests (`Config::test_samples`).
fn emit_sample(code: &mut String, m: &MessageDef, fields: &[FieldCode]) {
    let _ = writeln!(
        code,
        "/// Test support: every field set from `blob` (ASCII), nested messages `depth` deep.\n#[doc(hidden)]\n#[allow(unused_variables, unused_mut)]\npub fn __cf_sample(arena: &'a {RT}::Arena, blob: &'a [u8], depth: u32) -> Self {{\nlet mut m = Self::new_in(arena);\nlet text = ::core::str::from_utf8(blob).unwrap_or(\"\");"
    );
    let value = |kind: &Kind, i: usize, j: usize| -> Option<String> {
        let k = i * 3 + j + 1;
        Some(match kind {
            Kind::Scalar(s) => match s.rust() {
                "bool" => "true".to_owned(),
                "f32" | "f64" => format!("{k}.5"),
                "i32" | "i64" => format!("-{k}"),
                _ => format!("{k}"),
            },
            Kind::Enum(_) => format!("{}", k % 3),
            Kind::Bytes => match [5, 600, 0, 1000][k % 4] {
                0 => "&blob[..0]".to_owned(),
                n => format!("&blob[..blob.len().min({n})]"),
            },
            Kind::String => format!("&text[..text.len().min({})]", [7, 520, 1, 3][k % 4]),
            Kind::Message(_) => return None,
        })
    };
    let mut oneof_done = vec![false; m.oneofs.len()];
    for f in fields {
        let a = &f.accessor;
        let i = f.index;
        match f.shape {
            Shape::Oneof => {
                let o = f.def.oneof.unwrap_or(0);
                if oneof_done[o] {
                    continue;
                }
                let members: Vec<&FieldCode> = fields.iter().filter(|g| g.def.oneof == Some(o)).collect();
                // Which member: varies with depth, so that every member is used.
                let _ = writeln!(code, "match depth as usize % {} {{", members.len());
                for (j, g) in members.iter().enumerate() {
                    let set = match (&g.def.kind, value(&g.def.kind, g.index, 0)) {
                        (Kind::Message(_), _) => format!(
                            "m.set_{}(<{}>::__cf_sample(arena, blob, depth.saturating_sub(1)))",
                            g.accessor, g.elem
                        ),
                        (Kind::Enum(_), Some(v)) => {
                            format!("m.{} = ::core::option::Option::Some({}({v}))", g.member, g.variant)
                        }
                        (_, Some(v)) => format!("m.set_{}({v})", g.accessor),
                        _ => String::new(),
                    };
                    let _ = writeln!(code, "{j} => {{ {set}; }}");
                }
                code.push_str("_ => {}\n}\n");
                oneof_done[o] = true;
            }
            Shape::List => {
                if let Some(map) = &f.def.map {
                    for j in 0..2 {
                        let key = match &map.key {
                            Kind::String => format!("[\"\", \"k\"][{j}]"),
                            Kind::Scalar(s) if s.rust() == "bool" => format!("{}", j == 1),
                            _ => format!("{}", j + i),
                        };
                        let val = match (&map.value, value(&map.value, i, j)) {
                            (Kind::Message(_), _) => format!(
                                "<{}>::__cf_sample(arena, blob, depth - 1)",
                                f.map_value.clone().unwrap_or_default()
                            ),
                            (Kind::Enum(_), Some(v)) => {
                                format!("::core::convert::TryFrom::try_from({v}).unwrap_or_default()")
                            }
                            (_, Some(v)) => v,
                            _ => String::new(),
                        };
                        if matches!(map.value, Kind::Message(_)) {
                            let _ = writeln!(code, "if depth > 0 {{ m.insert_{a}({key}, {val}); }}");
                        } else {
                            let _ = writeln!(code, "m.insert_{a}({key}, {val});");
                        }
                    }
                    continue;
                }
                for j in 0..2 {
                    match (&f.def.kind, value(&f.def.kind, i, j)) {
                        (Kind::Message(_), _) => {
                            let _ = writeln!(
                                code,
                                "if depth > 0 {{ m.append_{a}(<{}>::__cf_sample(arena, blob, depth - 1)); }}",
                                f.elem
                            );
                        }
                        (Kind::Enum(_), Some(v)) => {
                            let _ = writeln!(code, "m.get_mut_{a}().append({v});");
                        }
                        (_, Some(v)) => {
                            let _ = writeln!(code, "m.append_{a}({v});");
                        }
                        _ => {}
                    }
                }
            }
            Shape::Message => {
                let _ =
                    writeln!(code, "if depth > 0 {{ m.set_{a}(<{}>::__cf_sample(arena, blob, depth - 1)); }}", f.elem);
            }
            Shape::Single => match (&f.def.kind, value(&f.def.kind, i, 0)) {
                (Kind::Enum(_), Some(v)) => {
                    let _ = writeln!(code, "m.set_{a}_raw({v});");
                }
                (_, Some(v)) => {
                    let _ = writeln!(code, "m.set_{a}({v});");
                }
                _ => {}
            },
        }
    }
    code.push_str("m\n}\n");
}

#[cfg(test)]
mod tests {
    use super::{ident, to_snake};

    /// prost-build's `ident.rs` tests of `to_snake`, which field and module
    /// names must pass the same way.
    #[test]
    fn to_snake_matches_prost() {
        let cases = [
            ("HTTPServer", "http_server"),
            ("maxConns", "max_conns"),
            ("FooBar", "foo_bar"),
            ("FooBarBAZ", "foo_bar_baz"),
            ("XMLHttpRequest", "xml_http_request"),
            ("While", "r#while"),
            ("FUZZ_BUSTER", "fuzz_buster"),
            ("foo_bar_baz", "foo_bar_baz"),
            ("FUZZ_buster", "fuzz_buster"),
            ("_FUZZ", "fuzz"),
            ("_fuzz", "fuzz"),
            ("_Fuzz", "fuzz"),
            ("FUZZ_", "fuzz"),
            ("fuzz_", "fuzz"),
            ("Fuzz_", "fuzz"),
            ("FuzZ_", "fuz_z"),
            // From test_messages_proto3.proto.
            ("fieldname1", "fieldname1"),
            ("field_name2", "field_name2"),
            ("_field_name3", "field_name3"),
            ("field__name4_", "field_name4"),
            ("field0name5", "field0name5"),
            ("field_0_name6", "field_0_name6"),
            ("fieldName7", "field_name7"),
            ("FieldName8", "field_name8"),
            ("field_Name9", "field_name9"),
            ("Field_Name10", "field_name10"),
            ("FIELD_NAME11", "field_name11"),
            ("FIELD_name12", "field_name12"),
            ("__field_name13", "field_name13"),
            ("__Field_name14", "field_name14"),
            ("field__name15", "field_name15"),
            ("field__Name16", "field_name16"),
            ("field_name17__", "field_name17"),
            ("Field_name18__", "field_name18"),
            // Names in this repository's schemas stay as they are.
            ("r_i32", "r_i32"),
            ("f64", "f64"),
        ];
        for (proto, rust) in cases {
            assert_eq!(to_snake(proto), rust, "to_snake({proto:?})");
        }
    }

    #[test]
    fn keywords_are_escaped_as_prost_does() {
        for kw in [
            "as", "break", "const", "continue", "else", "enum", "false", "fn", "for", "if", "impl", "in", "let",
            "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type",
            "unsafe", "use", "where", "while", "dyn", "abstract", "become", "box", "do", "final", "macro", "override",
            "priv", "typeof", "unsized", "virtual", "yield", "async", "await", "try", "gen",
        ] {
            assert_eq!(to_snake(kw), format!("r#{kw}"));
        }
        for kw in ["self", "super", "extern", "crate"] {
            assert_eq!(to_snake(kw), format!("{kw}_"));
        }
        assert_eq!(ident("Self"), "Self_");
        assert_eq!(ident("0foo"), "_0foo");
        assert_eq!(ident("foo_"), "foo_");
        assert_eq!(ident("_foo"), "_foo");
    }
}

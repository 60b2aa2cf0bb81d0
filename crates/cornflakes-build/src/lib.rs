//! Generates Cornflakes message types from proto3 schemas, the way
//! `prost-build` does for prost: call [`compile_protos`] from `build.rs`, or
//! configure a [`Config`], or run the `cornflakes-codegen` command.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), cornflakes_build::Error> {
//!     cornflakes_build::compile_protos(&["proto/kv.proto"], &["proto"])
//! }
//! ```
//!
//! ```ignore
//! // src/lib.rs: one file per proto package, in OUT_DIR.
//! pub mod kv {
//!     include!(concat!(env!("OUT_DIR"), "/kv.rs"));
//! }
//! ```
//!
//! Parsing is done by `protox` (a complete protobuf compiler in Rust), so no
//! `protoc` is needed. Supported: everything proto3 has except extensions
//! (and so custom options): scalars, `string`, `bytes`, nested messages,
//! `repeated`, `optional`, enums (open, as prost: unknown values are kept as
//! `i32`), `oneof` (one Rust enum per oneof), `map<K, V>`, imports across
//! packages (imported files are generated too, as prost-build does, unless
//! an extern path covers them), and the well-known types (`google/protobuf/*.proto`, bundled by
//! protox), which map to `::cornflakes::well_known`. proto2 files (and with
//! them groups) and `extend` are errors naming the file, line and feature.
//!
//! Names follow prost-build: messages and enums in `UpperCamelCase`
//! (`HTTPServer` is `HttpServer`), fields, packages and modules in
//! `snake_case`, Rust keywords escaped (`package acme.type;` is module
//! `acme::r#type`). Two schema names that would generate the same Rust name
//! (fields `foo` and `foo_copied` both need a method `set_foo_copied`) are
//! an error at build time that names both.
//!
//! Each message `M` gets: `new_in(&arena)` (messages live in a per-request
//! arena, so there is no `Default`), `Clone`, `Debug`, `PartialEq`; per
//! field `has_`/`get_`/`set_`/`clear_` (and `set_x_copied`, `set_x_owned`,
//! `set_x_buf` for values that do not outlive the message, `get_mut_`,
//! `init_`, `append_` for lists, `insert_`/`lookup_` for maps, `get_x_raw`
//! for enums); and `MOwned`, a decoded message owned together with its
//! packet. proto3 presence: a field without `optional` set to its default
//! is not encoded.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod codegen;
mod schema;

use std::path::{Path, PathBuf};

pub use schema::Unsupported;

/// Google's well-known types that `::cornflakes::well_known` provides (the
/// files protox bundles); a schema imports them as usual
/// (`import "google/protobuf/timestamp.proto";`) without listing them.
pub const WELL_KNOWN_FILES: [&str; 7] = [
    "google/protobuf/any.proto",
    "google/protobuf/duration.proto",
    "google/protobuf/empty.proto",
    "google/protobuf/field_mask.proto",
    "google/protobuf/struct.proto",
    "google/protobuf/timestamp.proto",
    "google/protobuf/wrappers.proto",
];

/// Where the runtime has the well-known types for the Cornflakes format.
pub(crate) const WELL_KNOWN: &str = "::cornflakes::well_known";
/// And with protobuf-wire code ([`Wire::Protobuf`]).
pub(crate) const WELL_KNOWN_PROTOWIRE: &str = "::cornflakes::well_known::protowire";

/// Why code generation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The schema does not parse or does not resolve (message carries
    /// file:line:column).
    #[error("{0}")]
    Parse(String),
    /// The schema uses a feature Cornflakes does not support.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// Writing output failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// File being written.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `OUT_DIR` is not set (not running from a build script) and no output
    /// directory was configured.
    #[error("OUT_DIR is not set: call from build.rs, or set Config::out_dir")]
    NoOutDir,
    /// An attribute given to [`Config::type_attribute`] (or the message and
    /// enum forms) is not Rust attribute syntax.
    #[error("attribute {attribute:?} for {path:?} is not a Rust attribute (write it as `#[derive(Hash)]`): {reason}")]
    Attribute {
        /// The proto path it was given for.
        path: String,
        /// The attribute text.
        attribute: String,
        /// What the parser said.
        reason: String,
    },
}

/// One generated file: the proto package it holds and its Rust source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// File name, `<package>.rs` (`_.rs` for no package).
    pub name: String,
    /// The proto package (empty for none).
    pub package: String,
    /// Formatted Rust source.
    pub code: String,
    /// Rust paths of the generated message types, relative to the
    /// package's module (`Outer`, `outer::Inner`).
    pub messages: Vec<String>,
}

/// The wire format generated types encode to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wire {
    /// The Cornflakes format (`docs/wire-format.md`): an indexed header,
    /// then copied data, then zero-copy data. Only Cornflakes reads it.
    #[default]
    Cornflakes,
    /// Standard proto3 bytes, byte-identical to prost's, with
    /// serialize-and-send (`docs/protobuf-wire.md`): the types also
    /// implement `cornflakes::protowire::ProtoMessage`, so any protobuf peer
    /// can read what they send. They keep the same accessors, and the
    /// Cornflakes-format `Message` methods as well.
    Protobuf,
}

/// Code generation settings, in the builder style of `prost_build::Config`.
#[derive(Clone, Debug)]
pub struct Config {
    out_dir: Option<PathBuf>,
    rerun_if_changed: bool,
    extern_paths: Vec<(String, String)>,
    samples: bool,
    wire: Wire,
    include_file: Option<PathBuf>,
    attributes: codegen::Attributes,
    descriptor_set: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// Default settings: write to `OUT_DIR`, emit `rerun-if-changed`, map
    /// `.google.protobuf` to `::cornflakes::well_known`.
    pub fn new() -> Self {
        Config {
            out_dir: None,
            rerun_if_changed: true,
            extern_paths: vec![(".google.protobuf".to_owned(), WELL_KNOWN.to_owned())],
            samples: false,
            wire: Wire::Cornflakes,
            include_file: None,
            attributes: codegen::Attributes::default(),
            descriptor_set: None,
        }
    }

    /// Also writes the schemas' `FileDescriptorSet` (protobuf-encoded, the
    /// files imported and their source info included, as `protoc
    /// --include_imports --include_source_info` writes it) to `path`, as
    /// `prost_build::Config::file_descriptor_set_path` does: for gRPC
    /// reflection or a reflection library such as prost-reflect.
    ///
    /// ```text
    /// config.file_descriptor_set_path(out_dir.join("descriptors.bin"));
    /// static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));
    /// ```
    pub fn file_descriptor_set_path(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.descriptor_set = Some(path.into());
        self
    }

    /// Adds `attribute` (Rust attribute syntax, `#[derive(Hash)]`) to the
    /// generated types of the messages, enums and oneofs that `path`
    /// matches, as `prost_build::Config::type_attribute` does: `"."` matches
    /// every type; a path with a leading dot is fully qualified and matches
    /// that type or package and everything in it (`".acme.shop"`,
    /// `".acme.shop.Order"`); one without is matched against the end of the
    /// fully qualified name (`"Order"`, `"Order.Line"`; a oneof's path is
    /// its message's and its own name, `"Order.payment"`).
    ///
    /// Messages hold references into their arena, so derives they would
    /// need on every member (`Hash`, `serde`) work on enums only; attributes
    /// such as `#[non_exhaustive]`, `#[must_use]` or lint levels work on both.
    ///
    /// ```
    /// let mut config = cornflakes_build::Config::new();
    /// config.enum_attribute(".", "#[derive(serde::Serialize)]").type_attribute("Order", "#[must_use]");
    /// ```
    pub fn type_attribute(&mut self, path: impl Into<String>, attribute: impl Into<String>) -> &mut Self {
        self.attributes.types.push((path.into(), attribute.into()));
        self
    }

    /// As [`type_attribute`](Self::type_attribute), for messages only (the
    /// struct of each matching message).
    pub fn message_attribute(&mut self, path: impl Into<String>, attribute: impl Into<String>) -> &mut Self {
        self.attributes.messages.push((path.into(), attribute.into()));
        self
    }

    /// As [`type_attribute`](Self::type_attribute), for enums and oneofs
    /// only.
    pub fn enum_attribute(&mut self, path: impl Into<String>, attribute: impl Into<String>) -> &mut Self {
        self.attributes.enums.push((path.into(), attribute.into()));
        self
    }

    /// Also writes `name` (in the output directory) with one `pub mod` per
    /// package segment around an `include!` of each generated file, as
    /// `prost_build::Config::include_file` does, so a crate includes every
    /// package at once:
    ///
    /// ```text
    /// pub mod proto { include!(concat!(env!("OUT_DIR"), "/protos.rs")); }
    /// // proto::acme::shop::v1::Order
    /// ```
    pub fn include_file(&mut self, name: impl Into<PathBuf>) -> &mut Self {
        self.include_file = Some(name.into());
        self
    }

    /// Uses the Rust types at `rust_path` for the proto package (or message)
    /// `proto_path` instead of generating them, as `prost_build::Config::extern_path`
    /// does: `config.extern_path(".acme.common", "::acme_common")`. By default
    /// `.google.protobuf` maps to `::cornflakes::well_known`.
    pub fn extern_path(&mut self, proto_path: impl Into<String>, rust_path: impl Into<String>) -> &mut Self {
        let proto_path = proto_path.into();
        self.extern_paths.retain(|(p, _)| *p != proto_path);
        self.extern_paths.push((proto_path, rust_path.into()));
        self
    }

    /// Removes every extern path, the default one included (used to
    /// generate `::cornflakes::well_known` itself).
    pub fn clear_extern_paths(&mut self) -> &mut Self {
        self.extern_paths.clear();
        self
    }

    /// Also generates, on every message, a hidden `__cf_sample(arena, blob,
    /// depth)` that sets every field: test support for generated code.
    pub fn test_samples(&mut self, on: bool) -> &mut Self {
        self.samples = on;
        self
    }

    /// The wire format of the generated types (default
    /// [`Wire::Cornflakes`]); [`Wire::Protobuf`] adds standard proto3
    /// encoding with serialize-and-send. The default extern path of
    /// `.google.protobuf` follows: `::cornflakes::well_known` for the
    /// Cornflakes format, `::cornflakes::well_known::protowire` (the same
    /// types with protobuf-wire code) for protobuf.
    pub fn wire(&mut self, wire: Wire) -> &mut Self {
        self.wire = wire;
        let (from, to) = match wire {
            Wire::Cornflakes => (WELL_KNOWN_PROTOWIRE, WELL_KNOWN),
            Wire::Protobuf => (WELL_KNOWN, WELL_KNOWN_PROTOWIRE),
        };
        for (proto, rust) in &mut self.extern_paths {
            if proto == ".google.protobuf" && rust == from {
                *rust = to.to_owned();
            }
        }
        self
    }

    /// Writes generated files to `dir` instead of `OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` lines for every schema file
    /// read (on by default; turn off outside build scripts).
    pub fn emit_rerun_if_changed(&mut self, on: bool) -> &mut Self {
        self.rerun_if_changed = on;
        self
    }

    /// Parses `protos` (searching imports in `includes`) and returns the
    /// generated files without writing them.
    pub fn generate(
        &self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<Vec<GeneratedFile>, Error> {
        self.generate_with_descriptors(protos, includes).map(|(files, _)| files)
    }

    /// [`generate`](Self::generate), and the schemas' descriptor set.
    fn generate_with_descriptors(
        &self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(Vec<GeneratedFile>, prost_types::FileDescriptorSet), Error> {
        self.attributes.check()?;
        let parsed = schema::parse(protos, includes, &self.extern_paths)?;
        if self.rerun_if_changed {
            for path in &parsed.source_paths {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        let options = codegen::Options { samples: self.samples, wire: self.wire, attributes: self.attributes.clone() };
        Ok((codegen::generate(&parsed, &options)?, parsed.descriptors))
    }

    /// Generates and writes one `<package>.rs` per proto package; files
    /// whose content is unchanged are not rewritten. Returns the paths.
    pub fn compile_protos(
        &self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<Vec<PathBuf>, Error> {
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or(Error::NoOutDir)?,
        };
        let (files, descriptors) = self.generate_with_descriptors(protos, includes)?;
        if let Some(path) = &self.descriptor_set {
            use prost::Message as _;
            let path = out_dir.join(path);
            std::fs::write(&path, descriptors.encode_to_vec()).map_err(|source| Error::Io { path, source })?;
        }
        let packages: Vec<(String, String)> = files.iter().map(|f| (f.package.clone(), f.name.clone())).collect();
        std::fs::create_dir_all(&out_dir).map_err(|source| Error::Io { path: out_dir.clone(), source })?;
        let mut written = Vec::new();
        for file in files {
            let path = out_dir.join(&file.name);
            let unchanged = std::fs::read_to_string(&path).map(|old| old == file.code).unwrap_or(false);
            if !unchanged {
                std::fs::write(&path, &file.code).map_err(|source| Error::Io { path: path.clone(), source })?;
            }
            written.push(path);
        }
        if let Some(name) = &self.include_file {
            let path = out_dir.join(name);
            let code = include_file_code(&packages);
            std::fs::write(&path, code).map_err(|source| Error::Io { path: path.clone(), source })?;
            written.push(path);
        }
        Ok(written)
    }
}

/// The module tree of [`Config::include_file`]: `(package, file name)`s.
fn include_file_code(packages: &[(String, String)]) -> String {
    #[derive(Default)]
    struct Tree(std::collections::BTreeMap<String, Tree>, Vec<String>);
    let mut root = Tree::default();
    for (package, file) in packages {
        let mut node = &mut root;
        for seg in package.split('.').filter(|s| !s.is_empty()) {
            node = node.0.entry(seg.to_owned()).or_default();
        }
        node.1.push(file.clone());
    }
    fn emit(t: &Tree, path: &str, code: &mut String) {
        for file in &t.1 {
            // Relative to this file, which is in the same directory.
            code.push_str(&format!("include!(\"{file}\");\n"));
        }
        for (seg, child) in &t.0 {
            let package = if path.is_empty() { seg.clone() } else { format!("{path}.{seg}") };
            code.push_str(&format!("/// Proto package `{package}`.\npub mod {} {{\n", codegen::to_snake(seg)));
            emit(child, &package, code);
            code.push_str("}\n");
        }
    }
    let mut code = String::from("// @generated by cornflakes-build. DO NOT EDIT.\n");
    emit(&root, "", &mut code);
    code
}

/// Generates code for `protos` into `OUT_DIR`, with default settings. The
/// one line a `build.rs` needs.
pub fn compile_protos(protos: &[impl AsRef<Path>], includes: &[impl AsRef<Path>]) -> Result<(), Error> {
    Config::new().compile_protos(protos, includes).map(|_| ())
}

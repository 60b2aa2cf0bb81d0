//! Zerializer's offload engine (HotOS 2021, §3-4) in software.
//!
//! The application describes a message as an object in an [`Arena`] and
//! posts a descriptor (arena, root object, schema id, connection); an
//! engine thread on another core plays the NIC: it walks the object with a
//! schema table loaded at start (no generated code), writes standard proto3
//! (byte-identical to prost) as scatter-gather segments and hands them to a
//! [`Datapath`](cornflakes_datapath::Datapath); received messages are
//! parsed into arena objects and handed back on a ring.
//!
//! Layers, from the bottom:
//! - [`schema`]: the tables ([`SchemaSet`], [`MessageTable`], [`FieldEntry`]),
//!   built from `.proto` files with protox.
//! - [`object`]: the object model ([`Arena`], [`Slot`]).
//! - [`wire`]: varints, zigzag, proto3 defaults.
//! - [`encode`] and [`decode`]: the table-driven walks, usable inline too
//!   (that is the "without the engine" baseline of `cf offload`).
//! - [`engine`]: the rings and the engine thread.
//!
//! No `unsafe`: every object reference is an index checked against the
//! arena, so a wrong object is an error, and arenas move between threads
//! by ownership.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod decode;
pub mod encode;
pub mod engine;
pub mod object;
pub mod schema;
pub mod wire;

pub use decode::{DecodeError, Decoder};
pub use encode::{EncodeError, Encoder, RECURSION_LIMIT};
pub use engine::{
    Completion, Engine, EngineConfig, EngineError, EngineStats, RxDescriptor, Sidecar, TxDescriptor, TxError,
};
pub use object::{Arena, ArenaFull, BufId, ObjId, Slot};
pub use schema::{FieldEntry, FieldType, MessageTable, SchemaError, SchemaId, SchemaSet};

/// The schema of the engine's tests and of `cf offload`
/// (`proto/offload.proto`, built into the binary), compiled at run time.
///
/// # Errors
///
/// When it does not compile (a bug).
pub fn bundled_schemas() -> Result<SchemaSet, SchemaError> {
    SchemaSet::from_source("offload.proto", include_str!("../proto/offload.proto"))
}

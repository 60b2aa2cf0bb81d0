//! A key-value store over the Cornflakes datapaths (paper §6.1.2) that runs
//! every serializer on the same store, values and datapath, so that only
//! the serializer differs between systems.
//!
//! - [`protocol`]: operations, statuses, limits, the decoded request
//!   (re-exported from `cornflakes-kv-protocol`); the messages are in
//!   `proto/kv.proto`.
//! - [`store`]: keys to values in pinned pool buffers.
//! - [`codec`]: one server and one client codec per serializer.
//! - [`server`]: the serving loop.
//! - [`phase`]: the steps of answering a request, for profilers.
//! - [`resp`]: the same store behind a Redis-compatible (RESP2) front end.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
pub mod phase;
pub mod resp;
pub mod server;
pub mod store;

/// The key-value protocol (the crate `cornflakes-kv-protocol`).
pub use cornflakes_kv_protocol as protocol;

pub use codec::{ClientCodec, HandleError, Malformed, ServerCodec};
pub use protocol::{Limits, Op, Request, ResponseVals, Status};
pub use server::{ServerStats, System};
pub use store::Store;

/// Cornflakes types generated from `proto/kv.proto`.
#[allow(missing_docs, dead_code, clippy::all)]
pub mod kv_proto {
    include!(concat!(env!("OUT_DIR"), "/kv.rs"));
}

/// The same types generated with the protobuf wire format
/// (`cornflakes_build::Wire::Protobuf`), for `cornflakes-protobuf`.
#[allow(missing_docs, dead_code, clippy::all)]
pub mod kv_pw {
    include!(concat!(env!("OUT_DIR"), "/protowire/kv.rs"));
}

//! The messages of `crates/cornflakes-kv/proto/kv.proto` for prost, as
//! prost-build would generate them with `.bytes(["."])` (no `protoc`
//! needed), except that `keys` is declared `bytes` (same wire format as
//! `string`): prost decodes a `string` into a fresh `String`, an allocation
//! per key, so the codec checks UTF-8 itself (see `cornflakes-kv`'s
//! `codec::prost`).

use bytes::Bytes;

/// `kv.KvRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct KvRequest {
    /// An `Op`.
    #[prost(uint32, tag = "1")]
    pub op: u32,
    /// Keys (`string` on the wire).
    #[prost(bytes = "bytes", repeated, tag = "2")]
    pub keys: Vec<Bytes>,
    /// Values.
    #[prost(bytes = "bytes", repeated, tag = "3")]
    pub vals: Vec<Bytes>,
    /// Element index for get-from-list.
    #[prost(uint32, tag = "4")]
    pub index: u32,
}

/// `kv.KvResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct KvResponse {
    /// A `Status`.
    #[prost(uint32, tag = "1")]
    pub status: u32,
    /// Values.
    #[prost(bytes = "bytes", repeated, tag = "2")]
    pub vals: Vec<Bytes>,
}

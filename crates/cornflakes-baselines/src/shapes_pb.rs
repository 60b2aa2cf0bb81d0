//! The messages of `crates/cornflakes-bench/proto/shapes.proto` for prost,
//! as prost-build would generate them with `.bytes(["."])` (no `protoc`
//! needed).

use bytes::Bytes;

/// Shapes (a), (b).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Single {
    /// The value.
    #[prost(bytes = "bytes", tag = "1")]
    pub data: Bytes,
}

/// Shapes (c), (d), (e).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Repeated {
    /// The values.
    #[prost(bytes = "bytes", repeated, tag = "1")]
    pub vals: Vec<Bytes>,
}

/// Shape (f), nested part.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Inner {
    /// A scalar.
    #[prost(uint32, tag = "1")]
    pub a: u32,
    /// A 128-byte value.
    #[prost(bytes = "bytes", tag = "2")]
    pub data: Bytes,
}

/// Shape (f).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Outer {
    /// A scalar.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// A 64-byte value.
    #[prost(bytes = "bytes", tag = "2")]
    pub data: Bytes,
    /// The nested message.
    #[prost(message, optional, tag = "3")]
    pub inner: Option<Inner>,
}

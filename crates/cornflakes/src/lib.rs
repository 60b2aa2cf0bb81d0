//! Cornflakes: hybrid zero-copy serialization for microsecond-scale networking.
//!
//! The crate is layered the way a message travels:
//!
//! - [`mem`]: pinned pools of reference-counted buffers ([`RcBuf`]) and
//!   `recover`, which maps any pointer into a pool back to its buffer.
//! - [`field`]: the hybrid bytes and string fields ([`CfBytes`],
//!   [`CfString`]), copied or zero-copy, decided when the field is set; the
//!   per-request [`Arena`]; lists.
//! - [`wire`]: the wire format (see `docs/wire-format.md`), the
//!   [`Message`] trait that a transmit path drives (layout, write the header
//!   and copied data, visit zero-copy entries), and bounds-checked decoding.
//!
//! Generated code (from `cornflakes-build`) is thin: structs with
//! `get_`/`set_`/`has_` accessors over these types.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(unsafe_code)]
pub mod mem;

pub use mem::{AllocError, Pool, PoolConfig, RcBuf, RcBufMut};
pub mod field;
pub mod wire;

pub use field::{Arena, CfBytes, CfString, List, Nested};
pub use wire::{DecodeError, DecodeOptions, EncodeError, Layout, Message};

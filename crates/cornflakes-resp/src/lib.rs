//! RESP2, the protocol Redis speaks, for a Cornflakes key-value server
//! that unmodified `redis-cli` and `redis-benchmark` can talk to.
//!
//! - [`parse`]: requests, from a byte stream that may hold a partial one
//!   or several (pipelining): multibulk (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`)
//!   and inline (`GET k\r\n`, with Redis's quoting rules) commands. Multibulk
//!   arguments are slices of the input (no copy); every length is checked
//!   against [`Limits`] before anything is allocated, and malformed input is
//!   a [`ProtocolError`] whose text is the one Redis sends before it closes
//!   the connection.
//! - [`reply`]: replies as a list of parts to send, following Cornflakes'
//!   hybrid rule: framing (`$5\r\n`, `*3\r\n`, `\r\n`) and values shorter
//!   than a threshold are copied into one contiguous run, values at or above
//!   it are referenced ([`Part::Value`]) so that a datapath can send them
//!   from the application's own buffers.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod parse;
pub mod reply;

pub use parse::{next_command, parse_command, Args, Command, Limits, Next, ProtocolError};
pub use reply::{Part, Reply};

//! The TCP datapath on loopback (IPv4 and IPv6): messages of every size
//! class round-trip, serialize-and-send, zero-copy values freed and their
//! pool slots reused while in flight, back-pressure on a peer that does not
//! read, a peer that closes, and a thousand connections.

/// The receive mode these tests run with.
const RECV_MODE: cornflakes_datapath::tcp::RecvMode = cornflakes_datapath::tcp::RecvMode::Single;

#[path = "common/waker.rs"]
mod waker_check;

include!("tcp_common/tcp_loopback.rs");

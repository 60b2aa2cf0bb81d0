//! Hostile peers of a TCP server: one announces a huge length, one sends a
//! truncated frame and closes, one sends random bytes. Each is disconnected
//! once and counted, while 100 other connections keep being answered
//! correctly, before, during and after.
//!
//! The frame header is two plain integers, so random bytes are caught by
//! the length bound: the seed below yields a first length far above it
//! (asserted), as 2047 in 2048 random lengths are.

/// The receive mode these tests run with.
const RECV_MODE: cornflakes_datapath::tcp::RecvMode = cornflakes_datapath::tcp::RecvMode::Single;

include!("tcp_common/tcp_hostile.rs");

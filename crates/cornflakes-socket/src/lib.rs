//! Drop-in user-space sockets in the manner of SocksDirect: the pieces that
//! are not the preload library itself.
//!
//! - [`proto`]: the 16-byte frames spoken between the preload library
//!   (`libcfsocket.so`, crate `cornflakes-socket-preload`) and the monitor.
//! - [`monitor`]: the per-host monitor (`cf socket-monitor`): the table of
//!   listening addresses; matches a `connect` to a `listen` and hands the
//!   listener the connection's ring memfds. Never on the data path.
//!
//! The design, the call table and what is missing are in `docs/sockets.md`.
//! This crate holds no `#[no_mangle]` symbol, so linking it (as `cf` does)
//! interposes nothing.
#![deny(unsafe_code)]

pub mod monitor;
pub mod proto;

pub use monitor::{run as run_monitor, MonitorAddr, MonitorOptions, MonitorStats};

//! The Cornflakes evaluation: what `cf` runs, as a library so that other
//! front ends (a Redis server, a socket layer) and tests can reuse it.
//!
//! Layers, from the bottom:
//!
//! - [`transport`], [`pin`], [`child`]: opening the datapaths by name,
//!   pinning threads to cores, and the server process a benchmark starts
//!   (`cf serve` / `cf kv-server`) with its control line protocol;
//!   [`hiccup`]: how often the machine takes a core away (`cf hiccup`).
//! - [`loadgen`]: one open-loop load point against the key-value server
//!   (Poisson arrivals, every response checked, HDR latencies);
//!   [`sweep`]: the capacity probe and the load points around it, with the
//!   rules that decide which points were kept up with.
//! - [`kv`]: `cf kv-server` and `cf loadgen`, the two halves by hand;
//!   [`compare`]: the paper's comparisons (every system on every workload);
//!   [`report`]: what they print and write (the JSON objects, built with
//!   serde; the tables); [`plot`]: the PNG charts.
//! - [`calibrate`]: `cf calibrate`, the threshold study (paper §5) and the
//!   calibration file it writes.
//! - [`reproduce`]: `cf reproduce`, each evaluation result of the paper
//!   made again on this machine; [`phases`]: `cf phases`, instructions and
//!   estimated cycles per step of a request, from callgrind.
//! - [`stall`]: `cf stall`, other clients' service while one stops
//!   reading.
//! - [`overload`]: `cf overload`, a soak at a multiple of the server's
//!   capacity (goodput, memory and recovery), built from load points.
//! - [`offload`]: `cf offload`, Zerializer's offload engine on the second
//!   core against encoding on the application core.
//! - [`resp_server`]: `cf kv-server --protocol resp`, the store behind a
//!   Redis-compatible front end; [`redis_compare`]: `cf redis-compare`,
//!   it and `redis-server` side by side under `redis-benchmark`.
//! - [`bulk`]: `cf bulk`, large messages one way over the tcp datapath
//!   against a blocking `std::net` loop; [`zcprobe`]: `cf zc-probe`, the
//!   zero-copy send break-even on a path.
//! - [`pingpong`], [`echo`], [`shapes`]: the smaller benchmarks, and
//!   [`ipc`]: iceoryx2 ping-pong side by side with ours; and
//!   [`serve`]: the server half of `pingpong` and `echo`.
//!
//! Every function that can fail returns [`Error`]: [`Error::Invalid`] for
//! settings that cannot work (a command line maps it to a usage error),
//! [`Error::Failed`] for everything else.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bulk;
pub mod calibrate;
pub mod child;
pub mod compare;
pub mod echo;
mod error;
pub mod gap_trains;
pub mod glibc;
pub mod hiccup;
pub mod hugepages;
pub mod ipc;
pub mod kv;
pub mod loadgen;
pub mod offload;
pub mod overload;
pub mod phases;
pub mod pin;
pub mod pingpong;
pub mod plot;
pub mod redis_compare;
pub mod report;
pub mod reproduce;
pub mod resp_load;
pub mod resp_server;
pub mod serve;
pub mod shapes;
pub mod sockets_bench;
pub mod stall;
pub mod sweep;
pub mod tails;
pub mod transport;
pub mod zcprobe;

pub use error::Error;

#[allow(missing_docs, dead_code, clippy::all)]
mod echo_proto {
    include!(concat!(env!("OUT_DIR"), "/echo.rs"));
}

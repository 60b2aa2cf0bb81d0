//! Hybrid fields: what a generated message holds for `bytes`, `string`,
//! `repeated` and nested fields, and the per-request [`Arena`] they live in.
//!
//! The copy-or-zero-copy choice is made once, when a field is set
//! ([`CfBytes::new`]): a value at least `threshold` bytes long that lies in
//! the arena's pool becomes a zero-copy reference ([`CfBytes::ZeroCopy`],
//! one count increment via `recover`); anything else is copied when the
//! message is written ([`CfBytes::Copied`]). The decision never touches the
//! value's bytes, and a zero-copy field never touches them at all: per
//! field, Cornflakes takes either the metadata cache miss or the data cache
//! miss, never both.

mod adaptive;
mod arena;
mod bytes;
mod list;
mod threshold;
// Storage helpers of generated structs, reachable only through
// `crate::__private`.
pub(crate) mod storage;

pub use adaptive::{AdaptiveConfig, AdaptiveThreshold, CANDIDATES as ADAPTIVE_CANDIDATES};
pub use arena::{Arena, DEFAULT_THRESHOLD, ONLY_COPY, ONLY_ZERO_COPY};
pub use bytes::{CfBytes, CfString};
pub use list::List;
pub(crate) use storage::Nested;
pub use threshold::{calibration_path, load_threshold, machine_threshold, Threshold, ThresholdSource};

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

mod arena;
mod bytes;
mod list;

pub use arena::{Arena, DEFAULT_THRESHOLD, ONLY_COPY, ONLY_ZERO_COPY};
pub use bytes::{CfBytes, CfString};
pub use list::List;

/// A nested message as a field holds it: boxed in the arena, so recursive
/// schemas have a finite size, and dropped (releasing its buffers) with the
/// parent.
pub type Nested<'a, T> = bumpalo::boxed::Box<'a, T>;

/// The arena a generated message was created in. Compares equal to any
/// other, so that messages compare by content.
#[derive(Clone, Copy)]
pub struct ArenaRef<'a>(&'a Arena);

impl<'a> ArenaRef<'a> {
    /// Wraps an arena reference.
    #[inline(always)]
    pub fn new(arena: &'a Arena) -> Self {
        ArenaRef(arena)
    }

    /// The arena.
    #[inline(always)]
    pub fn get(&self) -> &'a Arena {
        self.0
    }
}

impl PartialEq for ArenaRef<'_> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for ArenaRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Arena")
    }
}

/// Whether bit `i` of a presence bitmap is set.
#[inline(always)]
pub fn bit(bitmap: &[u32], i: usize) -> bool {
    bitmap[i / 32] & (1 << (i % 32)) != 0
}

/// Sets bit `i` of a presence bitmap.
#[inline(always)]
pub fn set_bit(bitmap: &mut [u32], i: usize) {
    bitmap[i / 32] |= 1 << (i % 32);
}

/// Clears bit `i` of a presence bitmap.
#[inline(always)]
pub fn clear_bit(bitmap: &mut [u32], i: usize) {
    bitmap[i / 32] &= !(1 << (i % 32));
}

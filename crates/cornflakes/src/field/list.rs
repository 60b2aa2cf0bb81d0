use std::ops::{Deref, DerefMut};

use bumpalo::collections::Vec as BumpVec;

use super::Arena;

/// A `repeated` field: a vector in the request's arena. Dropping it drops
/// the elements (releasing zero-copy references) but returns no memory;
/// the arena's reset does that.
#[derive(Debug, PartialEq)]
pub struct List<'a, T>(BumpVec<'a, T>);

impl<'a, T> List<'a, T> {
    /// An empty list in `arena` (allocates nothing).
    #[inline]
    pub fn new_in(arena: &'a Arena) -> Self {
        List(BumpVec::new_in(arena.bump()))
    }

    /// An empty list in `arena` with room for `cap` elements.
    #[inline]
    pub fn with_capacity_in(cap: usize, arena: &'a Arena) -> Self {
        List(BumpVec::with_capacity_in(cap, arena.bump()))
    }

    /// Appends an element.
    #[inline]
    pub fn append(&mut self, value: T) {
        self.0.push(value);
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl<'a, T> Deref for List<'a, T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<'a, T> DerefMut for List<'a, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<'a, 'b, T> IntoIterator for &'b List<'a, T> {
    type Item = &'b T;
    type IntoIter = std::slice::Iter<'b, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

use std::ops::{Deref, DerefMut};

use bumpalo::collections::Vec as BumpVec;

use super::Arena;

/// A `repeated` field: a vector in the request's arena. Dropping it drops
/// the elements (releasing zero-copy references) but returns no memory;
/// the arena's reset does that.
#[derive(Clone, PartialEq)]
pub struct List<'a, T>(BumpVec<'a, T>);

/// Prints the elements as a slice does (`[1, 2]`), as a prost user's `Vec`
/// would print.
impl<T: std::fmt::Debug> std::fmt::Debug for List<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<'a, T> List<'a, T> {
    /// An empty list in `arena` (allocates nothing).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, List};
    /// let arena = Arena::copying();
    /// let list: List<'_, u32> = List::new_in(&arena);
    /// assert!(list.is_empty());
    /// ```
    #[inline]
    pub fn new_in(arena: &'a Arena) -> Self {
        List(BumpVec::new_in(arena.bump()))
    }

    /// An empty list in `arena` with room for `cap` elements.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, List};
    /// let arena = Arena::copying();
    /// let mut list = List::with_capacity_in(2, &arena);
    /// list.append(1u64);
    /// list.append(2);
    /// assert_eq!(&list[..], [1, 2]);
    /// ```
    #[inline]
    pub fn with_capacity_in(cap: usize, arena: &'a Arena) -> Self {
        List(BumpVec::with_capacity_in(cap, arena.bump()))
    }

    /// Appends an element.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, CfString, List};
    /// let arena = Arena::copying();
    /// let mut keys = List::new_in(&arena);
    /// keys.append(CfString::new("a", &arena));
    /// assert_eq!(keys[0].as_str(), Ok("a"));
    /// ```
    #[inline]
    pub fn append(&mut self, value: T) {
        self.0.push(value);
    }

    /// Removes every element (dropping them releases zero-copy
    /// references; the memory returns with the arena's reset).
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, List};
    /// let arena = Arena::copying();
    /// let mut list = List::new_in(&arena);
    /// list.append(true);
    /// list.clear();
    /// assert!(list.is_empty());
    /// ```
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

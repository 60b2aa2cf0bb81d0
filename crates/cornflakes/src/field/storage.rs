//! What a generated struct stores besides its fields: the arena it was
//! created in, the presence bitmap, and boxed nested messages. Generated
//! code reaches these through [`crate::__private`]; applications see only
//! the accessors built on them.

use super::Arena;

/// A nested message as a field holds it: boxed in the arena, so recursive
/// schemas have a finite size, and dropped (releasing its buffers) with the
/// parent. Cloning a message clones it into the message's own arena.
pub struct Nested<'a, T>(bumpalo::boxed::Box<'a, T>);

/// Boxes `value` in `arena` as a nested field.
#[inline(always)]
pub fn nested_in<T>(value: T, arena: &Arena) -> Nested<'_, T> {
    Nested(bumpalo::boxed::Box::new_in(value, arena.bump()))
}

impl<T> std::ops::Deref for Nested<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Nested<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<'a, T: crate::Message<'a> + Clone> Clone for Nested<'a, T> {
    fn clone(&self) -> Self {
        nested_in((*self.0).clone(), self.0.arena())
    }
}

impl<T: PartialEq> PartialEq for Nested<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        *self.0 == *other.0
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Nested<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (*self.0).fmt(f)
    }
}

/// How a message's `Debug` shows an enum field, which holds an `i32`: the
/// enum's variant when the schema knows the value, else the number (as
/// prost's derive prints it).
pub struct EnumDebug<E>(pub i32, pub std::marker::PhantomData<fn() -> E>);

impl<E> EnumDebug<E> {
    /// Wraps a stored value.
    #[inline]
    pub fn new(value: i32) -> Self {
        EnumDebug(value, std::marker::PhantomData)
    }
}

impl<E: TryFrom<i32> + std::fmt::Debug> std::fmt::Debug for EnumDebug<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match E::try_from(self.0) {
            Ok(known) => known.fmt(f),
            Err(_) => self.0.fmt(f),
        }
    }
}

/// A repeated enum field in a message's `Debug`: each element as
/// [`EnumDebug`] shows it.
pub struct EnumListDebug<'l, E>(pub &'l [i32], pub std::marker::PhantomData<fn() -> E>);

impl<'l, E> EnumListDebug<'l, E> {
    /// Wraps a stored list.
    #[inline]
    pub fn new(values: &'l [i32]) -> Self {
        EnumListDebug(values, std::marker::PhantomData)
    }
}

impl<E: TryFrom<i32> + std::fmt::Debug> std::fmt::Debug for EnumListDebug<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|v| EnumDebug::<E>::new(*v))).finish()
    }
}

/// A map field (a list of entry messages) in a message's `Debug`: printed
/// as a map, `{key: value, ..}`, as prost's `HashMap` prints; `put` adds one
/// entry.
pub struct MapDebug<'l, E, F>(&'l [E], F);

impl<'l, E, F: Fn(&E, &mut std::fmt::DebugMap<'_, '_>)> MapDebug<'l, E, F> {
    /// Wraps a stored list of entries.
    #[inline]
    pub fn new(entries: &'l [E], put: F) -> Self {
        MapDebug(entries, put)
    }
}

impl<E, F: Fn(&E, &mut std::fmt::DebugMap<'_, '_>)> std::fmt::Debug for MapDebug<'_, E, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for e in self.0 {
            (self.1)(e, &mut m);
        }
        m.finish()
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_cross_word_boundaries() {
        let mut bitmap = [0u32; 2];
        set_bit(&mut bitmap, 0);
        set_bit(&mut bitmap, 33);
        assert_eq!(bitmap, [1, 2]);
        assert!(bit(&bitmap, 33) && !bit(&bitmap, 32));
        clear_bit(&mut bitmap, 33);
        assert_eq!(bitmap, [1, 0]);
    }
}

//! The store's key tables: a hash map from keys to values that a scan can
//! resume from a cursor, as Redis's SCAN does, in O(COUNT) per call.
//!
//! Redis's cursor works because its table chains: every key with hash `h`
//! sits in bucket `h & mask`, so visiting one bucket visits one *class* of
//! hashes, and visiting the classes in bit-reversed order stays correct when
//! the table doubles or halves between calls (a class splits into two whose
//! reversed indices follow each other). A swiss table probes instead: a key
//! sits somewhere along the probe sequence that starts at `h & mask`.
//! [`KeyMap::for_class`] finds a class all the same, by asking the table
//! for the buckets that may hold each of the 128 hashes that start there and
//! differ in the 7 bits the table keeps per bucket (its tag), and keeping
//! the keys whose hash is in the class (and whose tag is the one asked
//! for: the portable group search also yields others). That is a property
//! of hashbrown's `HashTable::iter_hash_buckets` (the buckets it yields for
//! `h` include those on `h`'s probe sequence with `h`'s tag, which is every
//! key whose hash starts there and has that tag), not a documented
//! contract, so the tests check it over growth, deletions and collisions,
//! natively and under Miri (which runs the portable search).

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

/// How many bits of a hash a hashbrown bucket keeps as its tag (the top 7).
const TAG_BITS: u32 = 7;

/// A key, its hash and its value.
#[derive(Clone)]
struct Slot<V> {
    hash: u64,
    key: Box<[u8]>,
    value: V,
}

/// Keys to values, with [`scan_step`] over classes of their hashes. Each
/// key keeps its hash (8 bytes), so that a scan tells a class's keys from
/// their neighbours' without reading them, and growing rehashes none.
#[derive(Clone)]
pub struct KeyMap<V> {
    table: HashTable<Slot<V>>,
    hasher: DefaultHashBuilder,
}

impl<V> Default for KeyMap<V> {
    /// An empty map with a seed of its own.
    fn default() -> Self {
        KeyMap::with_hasher(DefaultHashBuilder::default())
    }
}

impl<V> std::fmt::Debug for KeyMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyMap({} keys)", self.len())
    }
}

impl<V> KeyMap<V> {
    /// An empty map hashing with `hasher` (seeded at random per process or
    /// per store, as a server's tables must be; maps scanned together
    /// share one, so that a key's class is the same in both).
    pub fn with_hasher(hasher: DefaultHashBuilder) -> Self {
        KeyMap { table: HashTable::new(), hasher }
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        let hash = self.hash(key);
        self.table.find(hash, |s| s.hash == hash && *s.key == *key).map(|s| &s.value)
    }

    /// The value of `key`, to change.
    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let hash = self.hash(key);
        self.table.find_mut(hash, |s| s.hash == hash && *s.key == *key).map(|s| &mut s.value)
    }

    /// Whether `key` is there.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`; what it held.
    pub fn insert(&mut self, key: Box<[u8]>, value: V) -> Option<V> {
        let hash = self.hash(&key);
        match self.table.entry(hash, |s| s.hash == hash && s.key == key, |s| s.hash) {
            hashbrown::hash_table::Entry::Occupied(mut e) => Some(std::mem::replace(&mut e.get_mut().value, value)),
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(Slot { hash, key, value });
                None
            }
        }
    }

    /// Removes `key`; what it held.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let hash = self.hash(key);
        match self.table.find_entry(hash, |s| s.hash == hash && *s.key == *key) {
            Ok(e) => Some(e.remove().0.value),
            Err(_) => None,
        }
    }

    /// Removes every key (the table keeps its size).
    pub fn clear(&mut self) {
        self.table.clear();
    }

    /// The keys, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &Box<[u8]>> + '_ {
        self.table.iter().map(|s| &s.key)
    }

    /// The mask that makes a hash's class: the number of buckets less one.
    fn class_mask(&self) -> u64 {
        // A table of 2^57 buckets or more cannot be allocated: a class and
        // a tag never overlap.
        self.table.num_buckets() as u64 - 1
    }

    /// Calls `f` with every key whose hash `h` has `h & mask == class`,
    /// for a `mask` at least [`class_mask`](Self::class_mask) (a class of
    /// a table this size or larger).
    fn for_class<'a>(&'a self, class: u64, mask: u64, mut f: impl FnMut(&'a [u8], &'a V)) {
        if self.is_empty() {
            return;
        }
        let start = class & self.class_mask();
        for tag in 0..1u64 << TAG_BITS {
            let probe = start | tag << (u64::BITS - TAG_BITS);
            for index in self.table.iter_hash_buckets(probe) {
                // The table may yield buckets of other tags too (its
                // portable group search has false positives): each key
                // once, under its own tag.
                if let Some(s) = self.table.get_bucket(index) {
                    if s.hash & mask == class && s.hash >> (u64::BITS - TAG_BITS) == tag {
                        f(&s.key, &s.value);
                    }
                }
            }
        }
    }

    /// One step of a scan of this map alone, as [`scan_step`] (with each
    /// key's value).
    pub fn scan_step<'a>(&'a self, cursor: u64, f: impl FnMut(&'a [u8], &'a V)) -> u64 {
        let m = self.class_mask();
        self.for_class(cursor & m, m, f);
        next_reversed(cursor & m, m)
    }
}

/// One step of a scan over `a` and `b` together (two maps with disjoint
/// keys, hashed alike), and the cursor to pass next (0 when the scan is
/// over). The cursor counts the classes of the larger table in
/// bit-reversed order, as Redis's `dictScan` does, and a step visits that
/// class in both tables (in the smaller one, the part of its own class
/// that falls in it). Read in reversed bits, the cursor is a position
/// below which every class has been visited, in both tables, at the
/// granularity of the larger one. Tables only grow (hashbrown shrinks
/// only when asked to, and the store never asks), so that stays true when
/// either grows between steps, and a key present from a scan's first step
/// to its last is passed to `f` at least once, even if it moves from one
/// map to the other (SET over a hash, RENAME). Keys in a class visited
/// before its table grew may come again.
pub fn scan_step<A, B>(a: &KeyMap<A>, b: &KeyMap<B>, cursor: u64, mut f: impl FnMut(&[u8])) -> u64 {
    let m = a.class_mask().max(b.class_mask());
    let v = cursor & m;
    a.for_class(v, m, |k, _| f(k));
    b.for_class(v, m, |k, _| f(k));
    next_reversed(v, m)
}

/// The cursor after `v` when the table's mask is `mask`: `v`'s bits under
/// the mask incremented from the top down (bit-reversed order).
fn next_reversed(v: u64, mask: u64) -> u64 {
    (v | !mask).reverse_bits().wrapping_add(1).reverse_bits()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn pair<A, B>() -> (KeyMap<A>, KeyMap<B>) {
        let hasher = DefaultHashBuilder::default();
        (KeyMap::with_hasher(hasher.clone()), KeyMap::with_hasher(hasher))
    }

    fn scan_all<A, B>(a: &KeyMap<A>, b: &KeyMap<B>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = scan_step(a, b, cursor, |k| out.push(k.to_vec()));
            if cursor == 0 {
                return out;
            }
        }
    }

    fn key(i: usize) -> Box<[u8]> {
        format!("key:{i}").into_bytes().into()
    }

    #[test]
    fn a_scan_of_a_still_map_returns_every_key_exactly_once() {
        for n in [0, 1, 2, 3, 15, 16, 17, 100, if cfg!(miri) { 129 } else { 5000 }] {
            let (mut a, mut b) = pair();
            for i in 0..n {
                if i % 3 == 0 {
                    b.insert(key(i), ());
                } else {
                    a.insert(key(i), i);
                }
            }
            let mut got = scan_all(&a, &b);
            got.sort();
            let mut want: Vec<Vec<u8>> = (0..n).map(|i| key(i).to_vec()).collect();
            want.sort();
            assert_eq!(got, want, "n = {n}");
        }
    }

    /// Keys present for the whole scan come at least once while the maps
    /// grow, shrink by deletions, and keys move between them.
    #[test]
    // 22 minutes under Miri (128 probes a class, thousands of steps); the
    // still-map and class tests run the portable group search there.
    #[cfg_attr(miri, ignore)]
    fn a_scan_misses_no_key_that_stays_while_the_maps_change() {
        let n = if cfg!(miri) { 90 } else { 3000 };
        let (mut a, mut b): (KeyMap<usize>, KeyMap<()>) = pair();
        for i in 0..n {
            a.insert(key(i), i);
        }
        let first_mask = a.class_mask();
        // Keys below n/2 stay; the rest churn, and new ones arrive.
        let stay: HashSet<Vec<u8>> = (0..n / 2).map(|i| key(i).to_vec()).collect();
        let (mut seen, mut cursor, mut step, mut next_new) = (HashSet::new(), 0, 0usize, n);
        loop {
            cursor = scan_step(&a, &b, cursor, |k| {
                seen.insert(k.to_vec());
            });
            if cursor == 0 {
                break;
            }
            step += 1;
            // Grow a past a doubling or two: keys in bursts. (Inserting
            // faster than a step visits keys, under one per step, would
            // keep a scan going for ever, in Redis as here.)
            for _ in 0..if step % (n / 10) == 0 { n * 2 / 15 } else { 0 } {
                a.insert(key(next_new), next_new);
                next_new += 1;
            }
            // Delete churning keys.
            for i in (n / 2 + step..n / 2 + step + 1).filter(|&i| i < n) {
                a.remove(&key(i));
            }
            // Grow b now and then too, and move a staying key from one
            // map to the other and back.
            if step % (n / 30) == 0 {
                for _ in 0..12 {
                    b.insert(key(next_new), ());
                    next_new += 1;
                }
            }
            let m = key(step % (n / 2));
            if a.remove(&m).is_some() {
                b.insert(m, ());
            } else if b.remove(&m).is_some() {
                a.insert(m, 0);
            }
            assert!(step < 100_000, "the scan does not end");
        }
        assert!(
            a.class_mask() > first_mask && b.class_mask() >= 63,
            "the tables grew: {} {}",
            a.class_mask(),
            b.class_mask()
        );
        let missed: Vec<_> = stay.difference(&seen).collect();
        assert!(missed.is_empty(), "{} keys missed, e.g. {:?}", missed.len(), missed.first());
    }

    /// Many keys in one class (a tiny table) and every tag.
    #[test]
    fn a_class_holds_every_key_whose_hash_is_in_it() {
        let mut a: KeyMap<()> = KeyMap::with_hasher(DefaultHashBuilder::default());
        for i in 0..if cfg!(miri) { 64 } else { 2048 } {
            a.insert(key(i), ());
        }
        let mask = a.class_mask();
        let mut per_class = 0;
        let last = if cfg!(miri) { mask.min(7) } else { mask };
        for class in 0..=last {
            let mut got = Vec::new();
            a.for_class(class, mask, |k, _| got.push(k.to_vec()));
            let mut want: Vec<Vec<u8>> = a.keys().filter(|k| a.hash(k) & mask == class).map(|k| k.to_vec()).collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "class {class}");
            per_class += got.len();
        }
        assert!(per_class > 0);
    }

    #[test]
    fn the_map_is_a_map() {
        let mut a: KeyMap<u32> = KeyMap::with_hasher(DefaultHashBuilder::default());
        assert_eq!(a.insert(key(1), 1), None);
        assert_eq!(a.insert(key(1), 2), Some(1));
        assert_eq!(a.get(&key(1)), Some(&2));
        *a.get_mut(&key(1)).unwrap() = 3;
        assert!(a.contains_key(&key(1)) && !a.contains_key(&key(2)));
        assert_eq!(a.len(), 1);
        assert_eq!(a.remove(&key(1)), Some(3));
        assert_eq!(a.remove(&key(1)), None);
        assert!(a.is_empty());
    }
}

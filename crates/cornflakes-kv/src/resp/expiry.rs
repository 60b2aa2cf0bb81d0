//! Keys' expiry times, found by key (a TTL read, the check on each access)
//! and by time (the active expiry that reclaims keys nobody reads again,
//! as Redis's expire cycle does: without it, a cache of short-lived keys
//! grows until `maxmemory` refuses every write).

use std::collections::BTreeSet;
use std::time::Instant;

use indexmap::IndexMap;

#[derive(Default)]
pub(crate) struct Expiry {
    /// By key, in an order with O(1) access by position: the volatile
    /// eviction policies pick keys at random.
    by_key: IndexMap<Box<[u8]>, Instant>,
    /// The same entries, soonest first.
    by_time: BTreeSet<(Instant, Box<[u8]>)>,
    /// Changes made so far (WATCH: did a command change an expiry?).
    changes: u64,
}

impl Expiry {
    pub(crate) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Instant> {
        self.by_key.get(key)
    }

    /// Sets (or moves) `key`'s expiry time.
    pub(crate) fn insert(&mut self, key: Box<[u8]>, at: Instant) {
        self.changes += 1;
        if let Some(old) = self.by_key.insert(key.clone(), at) {
            self.by_time.remove(&(old, key.clone()));
        }
        self.by_time.insert((at, key));
    }

    /// Forgets `key`'s expiry time; the time it had.
    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Instant> {
        let (key, at) = self.by_key.swap_remove_entry(key)?;
        self.changes += 1;
        self.by_time.remove(&(at, key));
        Some(at)
    }

    /// How many changes there have been.
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    pub(crate) fn clear(&mut self) {
        self.changes += 1;
        self.by_key.clear();
        self.by_time.clear();
    }

    /// Takes the key whose time is up soonest, if its time is up at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Box<[u8]>> {
        if self.by_time.first().is_none_or(|(at, _)| *at > now) {
            return None;
        }
        let (_, key) = self.by_time.pop_first()?;
        self.by_key.swap_remove(&key);
        Some(key)
    }

    /// A key with an expiry time, chosen uniformly at random.
    pub(crate) fn random_key(&self) -> Option<&[u8]> {
        if self.by_key.is_empty() {
            return None;
        }
        self.by_key.get_index(fastrand::usize(..self.by_key.len())).map(|(k, _)| &k[..])
    }

    /// The key whose time is up soonest (volatile-ttl's victim).
    pub(crate) fn soonest(&self) -> Option<&[u8]> {
        self.by_time.first().map(|(_, k)| &k[..])
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn keys_come_due_in_time_order_and_moves_and_removals_are_kept() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut e = Expiry::default();
        e.insert(b"c"[..].into(), at(30));
        e.insert(b"a"[..].into(), at(10));
        e.insert(b"b"[..].into(), at(20));
        e.insert(b"c"[..].into(), at(5)); // moved earlier
        assert_eq!(e.remove(b"b"), Some(at(20)));
        assert_eq!(e.remove(b"b"), None);
        assert_eq!(e.len(), 2);
        assert_eq!(e.pop_due(at(4)), None, "nothing due yet");
        assert_eq!(e.pop_due(at(10)).as_deref(), Some(&b"c"[..]));
        assert_eq!(e.pop_due(at(10)).as_deref(), Some(&b"a"[..]));
        assert_eq!(e.pop_due(at(100)), None);
        assert!(e.is_empty() && e.by_time.is_empty());
    }
}

//! Every key with its accesses, for eviction (RESP's `maxmemory-policy`):
//! kept only while a policy needs it, so the key-value protocol and a
//! server that evicts nothing pay for none of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use indexmap::IndexMap;

/// What eviction knows of a key's use: the LRU's last access and the LFU's
/// counter, as Redis keeps them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Position of the key's last access among all accesses of every
    /// index in the process (larger: more recent), so that keys of
    /// different stores (RESP's databases) compare.
    pub last: u64,
    /// Redis's logarithmic frequency counter (0..=255, new keys at 5).
    pub frequency: u8,
    /// Minute (of the index's clock) the counter was last decayed at.
    decayed_at: u32,
    /// Second (of the index's clock) of the last access.
    pub at_second: u32,
}

/// Redis's `LFU_INIT_VAL`: a new key's counter, so that it is not evicted
/// before it had a chance to be read.
const LFU_INIT: u8 = 5;
/// Redis's `lfu-log-factor` default: 255 takes about a million accesses.
const LFU_LOG_FACTOR: f64 = 10.0;

/// The accesses so far, of every index: [`Access::last`].
static ACCESSES: AtomicU64 = AtomicU64::new(0);

fn next_access() -> u64 {
    ACCESSES.fetch_add(1, Ordering::Relaxed) + 1
}

/// Every key with its [`Access`], in an order with O(1) access by
/// position (eviction samples keys at random).
#[derive(Debug)]
pub struct KeyIndex {
    keys: IndexMap<Box<[u8]>, Access>,
    started: Instant,
}

impl Default for KeyIndex {
    fn default() -> Self {
        KeyIndex { keys: IndexMap::new(), started: Instant::now() }
    }
}

impl KeyIndex {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn minute(&self) -> u32 {
        self.second() / 60
    }

    /// Seconds since the index began.
    pub fn second(&self) -> u32 {
        u32::try_from(self.started.elapsed().as_secs()).unwrap_or(u32::MAX)
    }

    pub(super) fn insert(&mut self, key: &[u8]) {
        let now = self.second();
        let access = Access { last: next_access(), frequency: LFU_INIT, decayed_at: now / 60, at_second: now };
        self.keys.insert(key.into(), access);
    }

    pub(super) fn remove(&mut self, key: &[u8]) {
        self.keys.swap_remove(key);
    }

    /// `from` is now `to`, its record kept.
    pub(super) fn rename(&mut self, from: &[u8], to: &[u8]) {
        if let Some(access) = self.keys.swap_remove(from) {
            self.keys.insert(to.into(), access);
        }
    }

    pub(super) fn clear(&mut self) {
        self.keys.clear();
    }

    /// Records an access of `key`: now its most recent, and its counter
    /// decayed (one a minute unused) and then incremented with Redis's
    /// probability `1 / ((counter - 5) * 10 + 1)`.
    pub(super) fn touch(&mut self, key: &[u8]) {
        let second = self.second();
        let minute = second / 60;
        let Some(a) = self.keys.get_mut(key) else { return };
        a.last = next_access();
        a.at_second = second;
        a.frequency = decayed(a.frequency, a.decayed_at, minute);
        a.decayed_at = minute;
        if a.frequency < 255 {
            let base = f64::from(a.frequency.saturating_sub(LFU_INIT));
            if fastrand::f64() < 1.0 / (base * LFU_LOG_FACTOR + 1.0) {
                a.frequency += 1;
            }
        }
    }

    /// The access record of `key`, its counter decayed to now.
    pub fn get(&self, key: &[u8]) -> Option<Access> {
        let minute = self.minute();
        self.keys.get(key).map(|a| Access { frequency: decayed(a.frequency, a.decayed_at, minute), ..*a })
    }

    /// A key chosen uniformly at random, with its access record.
    pub fn random(&self) -> Option<(&[u8], Access)> {
        if self.keys.is_empty() {
            return None;
        }
        let (k, _) = self.keys.get_index(fastrand::usize(..self.keys.len()))?;
        Some((&k[..], self.get(k)?))
    }
}

/// `counter` less one for each minute since `at` (Redis's
/// `lfu-decay-time` 1).
fn decayed(counter: u8, at: u32, now: u32) -> u8 {
    let minutes = now.saturating_sub(at);
    counter.saturating_sub(u8::try_from(minutes).unwrap_or(u8::MAX))
}

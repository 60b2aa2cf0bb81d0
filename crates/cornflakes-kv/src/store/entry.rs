//! A key's value as a whole, taken out of one store and put into another
//! (RESP's MOVE and COPY between databases): its buffers move or are
//! shared, never copied (a stored buffer is never written again).

use cornflakes::RcBuf;

use super::{Collection, Store, Value};

/// A value of any kind, outside a store.
#[derive(Clone, Debug)]
pub struct Entry(Held);

#[derive(Clone, Debug)]
enum Held {
    /// A string or list: its elements, and those prepended (newest last).
    Elems(Value, Vec<RcBuf>),
    Collection(Collection),
}

impl Entry {
    /// Bytes of keys (fields) and of values it holds.
    fn bytes(&self) -> (usize, usize) {
        match &self.0 {
            Held::Elems(back, front) => (0, back.iter().chain(front).map(|b| b.len()).sum()),
            Held::Collection(c) => c.bytes(),
        }
    }
}

impl Store {
    /// The value of `key`, shared (for COPY): the same buffers, counted
    /// again where it is put.
    pub fn entry(&self, key: &[u8]) -> Option<Entry> {
        if let Some(back) = self.map.get(key) {
            let front =
                if self.fronts.is_empty() { Vec::new() } else { self.fronts.get(key).cloned().unwrap_or_default() };
            return Some(Entry(Held::Elems(back.clone(), front)));
        }
        self.collection(key).map(|c| Entry(Held::Collection(c.clone())))
    }

    /// Removes `key` and returns its value (for MOVE).
    pub fn take(&mut self, key: &[u8]) -> Option<Entry> {
        let entry = self.entry(key)?;
        self.remove(key);
        Some(entry)
    }

    /// Sets `key` to `entry`, replacing what it held.
    pub fn put_entry(&mut self, key: &[u8], entry: Entry) {
        self.remove(key);
        let (keys, values) = entry.bytes();
        self.writes += 1;
        self.key_added(key);
        self.key_bytes += key.len() + keys;
        self.value_bytes += values;
        match entry.0 {
            Held::Elems(back, front) => {
                self.map.insert(key.into(), back);
                if !front.is_empty() {
                    self.fronts.insert(key.into(), front);
                }
            }
            Held::Collection(c) => {
                self.collections.insert(key.into(), c);
            }
        }
    }
}

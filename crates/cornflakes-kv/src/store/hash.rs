//! Hash values (RESP's HSET family): a key's fields and their values, the
//! values in pool buffers like every other value, so a large one is
//! replied by reference.

use cornflakes::RcBuf;
use indexmap::IndexMap;

use super::Store;
use crate::protocol::Status;

/// Fields past which a removal may reorder the rest (O(1) instead of a
/// shift): Redis keeps a hash of up to 128 fields (`hash-max-listpack-entries`)
/// in insertion order and a larger one in no particular order, so replies
/// list fields in the order Redis would wherever Redis's order is defined.
const ORDERED_FIELDS: usize = 128;

/// The fields of a hash value, each with its value.
#[derive(Debug, Default)]
pub struct Hash {
    fields: IndexMap<Box<[u8]>, RcBuf>,
}

impl Hash {
    /// Number of fields (never 0 for a stored key).
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether it has no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&RcBuf> {
        self.fields.get(field)
    }

    /// The fields and their values: in insertion order while the hash has
    /// at most 128 fields, as in Redis.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &RcBuf)> + '_ {
        self.fields.iter().map(|(f, v)| (&f[..], v))
    }

    /// Bytes of its fields and of its values.
    fn bytes(&self) -> (usize, usize) {
        self.fields.iter().fold((0, 0), |(f, v), (field, value)| (f + field.len(), v + value.len()))
    }
}

impl Store {
    /// The hash value of `key`; `None` when it is missing or of another
    /// kind ([`get`](Self::get) has those).
    #[inline]
    pub fn hash(&self, key: &[u8]) -> Option<&Hash> {
        if self.hashes.is_empty() {
            return None;
        }
        self.hashes.get(key)
    }

    /// Whether fields and values `pairs` (field, value, field, value, ...)
    /// are within the limits (fields as long as keys may be, values as
    /// values), so that a command setting several refuses them all or sets
    /// them all.
    pub fn check_hash_set(&self, key: &[u8], pairs: &[&[u8]]) -> Result<(), Status> {
        self.check_key(key)?;
        for pair in pairs.chunks(2) {
            let [field, value] = pair else { return Err(Status::BadRequest) };
            if field.len() > self.limits.max_key || value.len() > self.limits.max_value {
                return Err(Status::TooLarge);
            }
        }
        Ok(())
    }

    /// Sets `field` of the hash value of `key` to a copy of `value`,
    /// creating the hash (a string or list value of `key` is replaced: the
    /// caller checks kinds); whether the field is new. The old value's
    /// buffer lives on while an in-flight send references it.
    pub fn hash_set(&mut self, key: &[u8], field: &[u8], value: &[u8]) -> Result<bool, Status> {
        self.check_hash_set(key, &[field, value])?;
        let buf = self.pool.alloc_copy(value).map_err(|_| Status::NoMemory)?;
        if !self.hashes.contains_key(key) {
            self.remove(key);
            self.key_bytes += key.len();
            self.hashes.insert(key.into(), Hash::default());
        }
        let hash = self.hashes.get_mut(key).expect("just made");
        self.value_bytes += buf.len();
        match hash.fields.get_mut(field) {
            Some(slot) => {
                // In place: the field keeps its position, as in Redis.
                self.value_bytes -= std::mem::replace(slot, buf).len();
                Ok(false)
            }
            None => {
                self.key_bytes += field.len();
                hash.fields.insert(field.into(), buf);
                Ok(true)
            }
        }
    }

    /// Removes `field` from the hash value of `key`, and the key with its
    /// last field; whether the field was there.
    pub fn hash_remove(&mut self, key: &[u8], field: &[u8]) -> bool {
        if self.hashes.is_empty() {
            return false;
        }
        let Some(hash) = self.hashes.get_mut(key) else { return false };
        let removed = if hash.len() <= ORDERED_FIELDS {
            hash.fields.shift_remove_entry(field)
        } else {
            hash.fields.swap_remove_entry(field)
        };
        let Some((field, value)) = removed else { return false };
        self.key_bytes -= field.len();
        self.value_bytes -= value.len();
        if hash.is_empty() {
            self.hashes.remove(key);
            self.key_bytes -= key.len();
        }
        true
    }

    /// Drops the hash value of `key`, if it has one; whether it had.
    pub(super) fn remove_hash(&mut self, key: &[u8]) -> bool {
        if self.hashes.is_empty() {
            return false;
        }
        match self.hashes.remove(key) {
            Some(old) => {
                let (fields, values) = old.bytes();
                self.key_bytes -= key.len() + fields;
                self.value_bytes -= values;
                true
            }
            None => false,
        }
    }
}

//! The values RESP has beside strings and lists: hashes (HSET ...) and
//! sets (SADD ...). A hash's values are in pool buffers like every other
//! value, so a large one is replied by reference; a set's members are
//! short names kept on the heap.

use cornflakes::RcBuf;
use indexmap::{IndexMap, IndexSet};

use super::zset::ZSet;
use super::Store;
use crate::protocol::Status;

/// Entries past which a removal may reorder the rest (O(1) instead of a
/// shift): Redis keeps a hash of up to 128 fields (`hash-max-listpack-entries`)
/// in insertion order and a larger one in no particular order, so replies
/// list fields in the order Redis would wherever Redis's order is defined.
const ORDERED_ENTRIES: usize = 128;

/// A key's hash or set.
#[derive(Clone, Debug)]
pub enum Collection {
    /// Fields and their values.
    Hash(Hash),
    /// Members.
    Set(Set),
    /// Members with scores, in score order.
    ZSet(ZSet),
}

impl Collection {
    /// Bytes of keys (fields) and of values (hash values, set members).
    pub(super) fn bytes(&self) -> (usize, usize) {
        match self {
            Collection::Hash(h) => {
                h.fields.iter().fold((0, 0), |(f, v), (field, value)| (f + field.len(), v + value.len()))
            }
            Collection::Set(s) => (0, s.members.iter().map(|m| m.len()).sum()),
            Collection::ZSet(z) => (0, z.bytes()),
        }
    }
}

/// The fields of a hash value, each with its value.
#[derive(Clone, Debug, Default)]
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

    /// The `i`th field and its value, in [`iter`](Self::iter)'s order.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &RcBuf)> {
        self.fields.get_index(i).map(|(f, v)| (&f[..], v))
    }

    /// The fields and their values: in insertion order while the hash has
    /// at most 128 fields, as in Redis.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &RcBuf)> + '_ {
        self.fields.iter().map(|(f, v)| (&f[..], v))
    }
}

/// The members of a set value.
#[derive(Clone, Debug, Default)]
pub struct Set {
    members: IndexSet<Box<[u8]>>,
}

impl Set {
    /// Number of members (never 0 for a stored key).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether it has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `member` is one.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Member `i` (`0..len()`), in [`iter`](Self::iter)'s order: O(1), for
    /// a random pick.
    pub fn get_index(&self, i: usize) -> Option<&[u8]> {
        self.members.get_index(i).map(|m| &m[..])
    }

    /// The members, in insertion order while there are at most 128 (Redis
    /// lists a set in an order of its own: compare sorted).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.members.iter().map(|m| &m[..])
    }
}

impl Store {
    /// The hash or set value of `key`.
    #[inline]
    pub fn collection(&self, key: &[u8]) -> Option<&Collection> {
        if self.collections.is_empty() {
            return None;
        }
        self.collections.get(key)
    }

    /// The hash value of `key`; `None` when it is missing or of another
    /// kind ([`get`](Self::get) has strings and lists, [`set`](Self::set)
    /// sets).
    #[inline]
    pub fn hash(&self, key: &[u8]) -> Option<&Hash> {
        match self.collection(key)? {
            Collection::Hash(h) => Some(h),
            _ => None,
        }
    }

    /// The set value of `key`; `None` when it is missing or of another
    /// kind.
    #[inline]
    pub fn set(&self, key: &[u8]) -> Option<&Set> {
        match self.collection(key)? {
            Collection::Set(s) => Some(s),
            _ => None,
        }
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

    /// Whether `members` may be added to a set at `key` (members as long
    /// as keys may be).
    pub fn check_set_add(&self, key: &[u8], members: &[&[u8]]) -> Result<(), Status> {
        self.check_key(key)?;
        if members.iter().any(|m| m.len() > self.limits.max_key) {
            return Err(Status::TooLarge);
        }
        Ok(())
    }

    /// The collection at `key`, made empty of kind `make` when `key` holds
    /// something else or nothing (a string or list value is replaced: the
    /// caller checks kinds).
    pub(super) fn collection_mut(
        &mut self,
        key: &[u8],
        is: fn(&Collection) -> bool,
        make: fn() -> Collection,
    ) -> &mut Collection {
        if !self.collections.get(key).is_some_and(is) {
            self.remove(key);
            self.key_added(key);
            self.key_bytes += key.len();
            self.collections.insert(key.into(), make());
        }
        self.collections.get_mut(key).expect("just made")
    }

    /// Sets `field` of the hash value of `key` to a copy of `value`,
    /// creating the hash (a value of another kind at `key` is replaced: the
    /// caller checks kinds); whether the field is new. The old value's
    /// buffer lives on while an in-flight send references it.
    pub fn hash_set(&mut self, key: &[u8], field: &[u8], value: &[u8]) -> Result<bool, Status> {
        self.check_hash_set(key, &[field, value])?;
        let buf = self.pool.alloc_copy(value).map_err(|_| Status::NoMemory)?;
        let len = buf.len();
        let Collection::Hash(hash) =
            self.collection_mut(key, |c| matches!(c, Collection::Hash(_)), || Collection::Hash(Hash::default()))
        else {
            unreachable!("made a hash")
        };
        let (new, old_len) = match hash.fields.get_mut(field) {
            // In place: the field keeps its position, as in Redis.
            Some(slot) => (false, std::mem::replace(slot, buf).len()),
            None => {
                hash.fields.insert(field.into(), buf);
                (true, 0)
            }
        };
        self.writes += 1;
        self.value_bytes = self.value_bytes + len - old_len;
        if new {
            self.key_bytes += field.len();
        }
        Ok(new)
    }

    /// Adds `member` to the set value of `key`, creating the set (a value
    /// of another kind at `key` is replaced: the caller checks kinds);
    /// whether it is new.
    pub fn set_add(&mut self, key: &[u8], member: &[u8]) -> Result<bool, Status> {
        self.check_set_add(key, &[member])?;
        let Collection::Set(set) =
            self.collection_mut(key, |c| matches!(c, Collection::Set(_)), || Collection::Set(Set::default()))
        else {
            unreachable!("made a set")
        };
        let new = set.members.insert(member.into());
        if new {
            self.writes += 1;
            self.value_bytes += member.len();
        }
        Ok(new)
    }

    /// Removes `field` from the hash value of `key`, and the key with its
    /// last field; whether the field was there.
    pub fn hash_remove(&mut self, key: &[u8], field: &[u8]) -> bool {
        let Some(Collection::Hash(hash)) = self.collections.get_mut(key) else { return false };
        let removed = if hash.len() <= ORDERED_ENTRIES {
            hash.fields.shift_remove_entry(field)
        } else {
            hash.fields.swap_remove_entry(field)
        };
        let Some((field, value)) = removed else { return false };
        let empty = hash.is_empty();
        self.writes += 1;
        self.key_bytes -= field.len();
        self.value_bytes -= value.len();
        if empty {
            self.remove_collection(key);
        }
        true
    }

    /// Removes `member` from the set value of `key`, and the key with its
    /// last member; whether it was there.
    pub fn set_remove(&mut self, key: &[u8], member: &[u8]) -> bool {
        let Some(Collection::Set(set)) = self.collections.get_mut(key) else { return false };
        let removed = if set.len() <= ORDERED_ENTRIES {
            set.members.shift_remove(member)
        } else {
            set.members.swap_remove(member)
        };
        if !removed {
            return false;
        }
        let empty = set.is_empty();
        self.writes += 1;
        self.value_bytes -= member.len();
        if empty {
            self.remove_collection(key);
        }
        true
    }

    /// Removes and returns member `i` of the set value of `key` (SPOP's
    /// random pick), and the key with its last member.
    pub fn set_take(&mut self, key: &[u8], i: usize) -> Option<Box<[u8]>> {
        let Some(Collection::Set(set)) = self.collections.get_mut(key) else { return None };
        let member = set.members.swap_remove_index(i)?;
        let empty = set.is_empty();
        self.writes += 1;
        self.value_bytes -= member.len();
        if empty {
            self.remove_collection(key);
        }
        Some(member)
    }

    /// Drops the hash or set value of `key`, if it has one; whether it had.
    pub(super) fn remove_collection(&mut self, key: &[u8]) -> bool {
        if self.collections.is_empty() {
            return false;
        }
        match self.collections.remove(key) {
            Some(old) => {
                self.writes += 1;
                self.key_gone(key);
                let (keys, values) = old.bytes();
                self.key_bytes -= key.len() + keys;
                self.value_bytes -= values;
                true
            }
            None => false,
        }
    }
}

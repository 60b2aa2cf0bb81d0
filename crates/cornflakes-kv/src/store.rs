//! The key store: keys to values held in pinned pool buffers, the same for
//! every serializer.
//!
//! A value is one buffer or a list of buffers (the paper's linked list of
//! buffers), or, for RESP, a hash ([`Hash`]), a set ([`Set`]) or a sorted
//! set ([`ZSet`]). A put allocates new buffers and swaps them in, so a value being
//! sent (referenced by an in-flight zero-copy send) is never modified in
//! place: the old buffers live on until the datapath releases them.

use cornflakes::{AllocError, Pool, RcBuf};
use hashbrown::HashMap;
use smallvec::SmallVec;

pub use self::access::{Access, KeyIndex};
pub use self::collection::{Collection, Hash, Set};
pub use self::entry::Entry;
use self::key_map::KeyMap;
pub use self::zset::ZSet;
use crate::protocol::{Limits, Op, Request, ResponseVals, Status};

mod access;
mod collection;
mod entry;
mod key_map;
mod zset;

/// A value: its elements (one for a plain value).
pub type Value = SmallVec<[RcBuf; 1]>;

/// Keys to values in pinned memory.
pub struct Store {
    pool: Pool,
    map: KeyMap<Value>,
    /// Elements prepended to a key's value (RESP's `LPUSH`), newest last, so
    /// that a prepend is amortized O(1) as in Redis rather than a shift of
    /// the whole list. Empty unless something was prepended, so a lookup of
    /// the key-value protocol pays one `is_empty`.
    fronts: HashMap<Box<[u8]>, Vec<RcBuf>>,
    /// Keys holding hashes and sets (RESP's HSET and SADD), none of them
    /// in `map`: a key is in one of the two at most. Empty unless RESP made
    /// one, so the key-value protocol pays nothing for them.
    collections: KeyMap<Collection>,
    /// Every key with its accesses, while an eviction policy needs them
    /// ([`track_accesses`](Self::track_accesses)).
    index: Option<KeyIndex>,
    /// Changes made so far (RESP's WATCH asks whether a command changed
    /// anything).
    writes: u64,
    limits: Limits,
    value_bytes: usize,
    key_bytes: usize,
}

/// The elements of a stored value, in order: a view that
/// [`Store::get`] returns.
#[derive(Clone, Copy, Debug, Default)]
pub struct Elems<'a> {
    /// Prepended elements, newest (the first element) last.
    front: &'a [RcBuf],
    back: &'a [RcBuf],
}

impl<'a> Elems<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.front.len() + self.back.len()
    }

    /// Whether there are none (never, for a stored key).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<&'a RcBuf> {
        match i.checked_sub(self.front.len()) {
            None => self.front.get(self.front.len() - 1 - i),
            Some(j) => self.back.get(j),
        }
    }

    /// The first element.
    pub fn first(&self) -> Option<&'a RcBuf> {
        self.get(0)
    }

    /// The element of a one-element value (a plain value); `None` for a
    /// list of another length.
    pub fn single(&self) -> Option<&'a RcBuf> {
        match (self.front, self.back) {
            ([], [one]) | ([one], []) => Some(one),
            _ => None,
        }
    }

    /// The elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &'a RcBuf> + 'a {
        self.front.iter().rev().chain(self.back.iter())
    }
}

impl Store {
    /// An empty store whose values live in `pool`.
    pub fn new(pool: Pool, limits: Limits) -> Self {
        // One seed for both tables: SCAN visits a class of hashes in both.
        let hasher = hashbrown::DefaultHashBuilder::default();
        Store {
            pool,
            map: KeyMap::with_hasher(hasher.clone()),
            fronts: HashMap::new(),
            collections: KeyMap::with_hasher(hasher),
            index: None,
            writes: 0,
            limits,
            value_bytes: 0,
            key_bytes: 0,
        }
    }

    /// The pool the values live in.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The limits requests are checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Number of keys (hashes and sets included).
    pub fn len(&self) -> usize {
        self.map.len() + self.collections.len()
    }

    /// Whether the store has no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many changes the store has had (any put, push, pop, removal,
    /// rename, ...): equal before and after a command that changed nothing.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Bytes of all values.
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// Bytes of all keys and values (what RESP's `maxmemory` counts).
    pub fn data_bytes(&self) -> usize {
        self.key_bytes + self.value_bytes
    }

    /// The keys, in no particular order (hashes and sets included).
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.map.keys().chain(self.collections.keys()).map(|k| &k[..])
    }

    /// One step of a scan of the keys (Redis's SCAN): calls `f` with some
    /// keys and returns the cursor to pass next, 0 when the scan is over.
    /// Start at 0. A key present for the whole scan comes at least once
    /// (twice at most when the store grew or shrank in between), whatever
    /// else changes; each step visits one class of the keys' hashes, about
    /// as many keys as the tables' load (under one, on average).
    pub fn scan_step(&self, cursor: u64, f: impl FnMut(&[u8])) -> u64 {
        key_map::scan_step(&self.map, &self.collections, cursor, f)
    }

    /// The value of `key` (`None` for a hash or a set: see
    /// [`hash`](Self::hash) and [`set`](Self::set)).
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Elems<'_>> {
        let back = self.map.get(key)?.as_slice();
        let front =
            if self.fronts.is_empty() { &[][..] } else { self.fronts.get(key).map_or(&[][..], |f| f.as_slice()) };
        Some(Elems { front, back })
    }

    /// Sets `key` to a value of `sizes.len()` elements, each filled by
    /// `fill(element_index, bytes)` (used to preload a workload).
    pub fn insert_with(
        &mut self,
        key: &[u8],
        sizes: &[u32],
        mut fill: impl FnMut(usize, &mut [u8]),
    ) -> Result<(), AllocError> {
        let mut value = Value::with_capacity(sizes.len());
        for (i, &size) in sizes.iter().enumerate() {
            let mut buf = self.pool.alloc(size as usize)?;
            fill(i, &mut buf);
            value.push(buf.freeze());
        }
        self.swap_in(key, value);
        Ok(())
    }

    /// Sets `key` to copies of `elems` in new buffers, then swaps them in.
    pub fn put(&mut self, key: &[u8], elems: &[&[u8]]) -> Result<(), Status> {
        self.check_key(key)?;
        if elems.is_empty() || elems.len() > self.limits.max_list {
            return Err(Status::BadRequest);
        }
        let value = self.copy_in(elems)?;
        self.swap_in(key, value);
        Ok(())
    }

    /// Appends a copy of `elem` to the list value of `key`, creating it.
    pub fn append(&mut self, key: &[u8], elem: &[u8]) -> Result<(), Status> {
        self.check_push(key)?;
        let buf = self.alloc_value(elem)?;
        self.push_checked(key, buf, false);
        Ok(())
    }

    /// Prepends a copy of `elem` to the list value of `key`, creating it
    /// (RESP's `LPUSH`). Amortized O(1).
    pub fn prepend(&mut self, key: &[u8], elem: &[u8]) -> Result<(), Status> {
        self.check_push(key)?;
        let buf = self.alloc_value(elem)?;
        self.push_checked(key, buf, true);
        Ok(())
    }

    /// A copy of `value` in a pool buffer, to store (refused past the
    /// value limit, or when the pool is exhausted).
    pub fn alloc_value(&self, value: &[u8]) -> Result<RcBuf, Status> {
        if value.len() > self.limits.max_value {
            return Err(Status::TooLarge);
        }
        self.pool.alloc_copy(value).map_err(|_| Status::NoMemory)
    }

    /// Whether one more element may be pushed onto the list of `key`.
    pub fn check_push(&self, key: &[u8]) -> Result<(), Status> {
        self.check_key(key)?;
        if self.get(key).map_or(0, |v| v.len()) >= self.limits.max_list {
            return Err(Status::TooLarge);
        }
        Ok(())
    }

    /// Pushes `buf` (a buffer already stored or allocated, moved without a
    /// copy: RESP's LMOVE) onto the front or the back of the list value of
    /// `key`, creating it. Amortized O(1); allocates no pool buffer, so it
    /// fails only on the limits.
    pub fn push_buf(&mut self, key: &[u8], buf: RcBuf, front: bool) -> Result<(), Status> {
        self.check_push(key)?;
        self.push_checked(key, buf, front);
        Ok(())
    }

    /// [`push_buf`](Self::push_buf) once [`check_push`](Self::check_push)
    /// has passed.
    fn push_checked(&mut self, key: &[u8], buf: RcBuf, front: bool) {
        self.writes += 1;
        self.value_bytes += buf.len();
        match self.map.get_mut(key) {
            Some(v) if !front => v.push(buf),
            Some(_) => match self.fronts.get_mut(key) {
                Some(f) => f.push(buf),
                None => {
                    self.fronts.insert(key.into(), vec![buf]);
                }
            },
            None => {
                self.remove_collection(key);
                self.key_added(key);
                self.key_bytes += key.len();
                self.map.insert(key.into(), smallvec::smallvec![buf]);
            }
        }
    }

    /// Edits the elements of the value of `key` in place through a
    /// [`ListEdit`] (RESP's LSET, LTRIM, LREM, LINSERT), removing the key
    /// when none are left; `None` when `key` has no such value. Setting an
    /// element is O(1); inserting and removing move the elements after
    /// them (pointers, not values). Prepended elements are first merged in
    /// (once: O(n)).
    pub fn edit_list<R>(&mut self, key: &[u8], edit: impl FnOnce(&mut ListEdit<'_>) -> R) -> Option<R> {
        if !self.fronts.is_empty() {
            if let Some(front) = self.fronts.remove(key) {
                let back = self.map.get_mut(key)?;
                let mut merged: Value = front.into_iter().rev().collect();
                merged.extend(back.drain(..));
                *back = merged;
            }
        }
        let elems = self.map.get_mut(key)?;
        let mut list = ListEdit { elems, added: 0, removed: 0 };
        let out = edit(&mut list);
        let (added, removed, empty) = (list.added, list.removed, list.elems.is_empty());
        self.writes += 1;
        self.value_bytes = self.value_bytes + added - removed;
        if empty {
            self.map.remove(key);
            self.key_gone(key);
            self.key_bytes -= key.len();
        }
        Some(out)
    }

    /// Removes and returns the first element (`front`) or the last of the
    /// value of `key` (RESP's `LPOP` and `RPOP`); the key goes with its
    /// last element. Amortized O(1): when the end popped from has nothing
    /// left, half of the other end's elements move over.
    pub fn pop(&mut self, key: &[u8], front: bool) -> Option<RcBuf> {
        let back = self.map.get_mut(key)?;
        let fronts = &mut self.fronts;
        let popped = if front {
            match fronts.get_mut(key).and_then(|f| f.pop()) {
                Some(b) => Some(b),
                None if back.len() > 1 => {
                    // The first half, reversed: the first element last.
                    let mut moved: Vec<RcBuf> = back.drain(..back.len().div_ceil(2)).rev().collect();
                    let first = moved.pop();
                    match fronts.get_mut(key) {
                        Some(f) => *f = moved,
                        None => {
                            fronts.insert(key.into(), moved);
                        }
                    }
                    first
                }
                None => back.pop(),
            }
        } else {
            match back.pop() {
                Some(b) => Some(b),
                None => match fronts.get_mut(key) {
                    // The list's last elements are the front's first ones.
                    Some(f) if !f.is_empty() => {
                        let mut moved: Value = f.drain(..f.len().div_ceil(2)).rev().collect();
                        let last = moved.pop();
                        *back = moved;
                        last
                    }
                    _ => None,
                },
            }
        };
        // An emptied front goes, so that reads of other keys skip the
        // fronts again once none is left.
        if !fronts.is_empty() && fronts.get(key).is_some_and(Vec::is_empty) {
            fronts.remove(key);
        }
        let popped = popped?;
        self.writes += 1;
        self.value_bytes -= popped.len();
        if self.get(key).is_some_and(|v| v.is_empty()) {
            self.remove(key);
        }
        Some(popped)
    }

    /// Removes `key`; whether it was there. Its buffers live on while an
    /// in-flight send references them.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.remove_front(key);
        match self.map.remove(key) {
            Some(old) => {
                self.writes += 1;
                self.key_gone(key);
                self.key_bytes -= key.len();
                self.value_bytes -= old.iter().map(|b| b.len()).sum::<usize>();
                true
            }
            None => self.remove_collection(key),
        }
    }

    /// Moves the value of `from` to `to` (replacing what `to` held), its
    /// buffers and all, without copying; whether `from` was there.
    pub fn rename(&mut self, from: &[u8], to: &[u8]) -> bool {
        if from == to {
            return self.map.contains_key(from) || self.collection(from).is_some();
        }
        self.writes += 1;
        let collection = if self.collections.is_empty() { None } else { self.collections.remove(from) };
        if let Some(collection) = collection {
            self.remove(to);
            self.key_moved(from, to);
            self.key_bytes = self.key_bytes - from.len() + to.len();
            self.collections.insert(to.into(), collection);
            return true;
        }
        let Some(value) = self.map.remove(from) else { return false };
        let front = if self.fronts.is_empty() { None } else { self.fronts.remove(from) };
        self.remove(to);
        self.key_moved(from, to);
        self.key_bytes = self.key_bytes - from.len() + to.len();
        self.map.insert(to.into(), value);
        if let Some(front) = front {
            self.fronts.insert(to.into(), front);
        }
        true
    }

    /// Starts (`true`) or stops keeping every key with its accesses, which
    /// the eviction policies read ([`key_index`](Self::key_index)):
    /// starting indexes the keys there are, O(keys).
    pub fn track_accesses(&mut self, on: bool) {
        match (on, self.index.is_some()) {
            (true, false) => {
                let mut index = KeyIndex::default();
                for k in self.map.keys().chain(self.collections.keys()) {
                    index.insert(k);
                }
                self.index = Some(index);
            }
            (false, true) => self.index = None,
            _ => {}
        }
    }

    /// Every key with its accesses, while tracked.
    pub fn key_index(&self) -> Option<&KeyIndex> {
        self.index.as_ref()
    }

    /// Records an access of `key` (an existing key: a read or a write),
    /// while accesses are tracked.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        if let Some(index) = &mut self.index {
            index.touch(key);
        }
    }

    pub(super) fn key_added(&mut self, key: &[u8]) {
        if let Some(index) = &mut self.index {
            index.insert(key);
        }
    }

    pub(super) fn key_gone(&mut self, key: &[u8]) {
        if let Some(index) = &mut self.index {
            index.remove(key);
        }
    }

    /// `from` is now `to`, with its accesses (RENAME moves the value).
    fn key_moved(&mut self, from: &[u8], to: &[u8]) {
        if let Some(index) = &mut self.index {
            index.rename(from, to);
        }
    }

    /// Drops what was prepended to `key`.
    fn remove_front(&mut self, key: &[u8]) {
        if !self.fronts.is_empty() {
            if let Some(old) = self.fronts.remove(key) {
                self.value_bytes -= old.iter().map(|b| b.len()).sum::<usize>();
            }
        }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.writes += 1;
        self.map.clear();
        self.key_bytes = 0;
        self.fronts.clear();
        self.collections.clear();
        if let Some(index) = &mut self.index {
            index.clear();
        }
        self.value_bytes = 0;
    }

    /// Runs `req`, pushing the response's values (views of stored buffers
    /// or of the request) onto `out`. On an error status `out` is cleared.
    pub fn execute<'s, 'r: 's>(&'s mut self, req: &Request<'r>, out: &mut ResponseVals<'s>) -> Status {
        let status = match self.run(req, out) {
            Ok(()) => Status::Ok,
            Err(status) => status,
        };
        if status != Status::Ok {
            out.clear();
        }
        status
    }

    fn run<'s, 'r: 's>(&'s mut self, req: &Request<'r>, out: &mut ResponseVals<'s>) -> Result<(), Status> {
        let op = Op::from_u32(req.op).ok_or(Status::UnknownOp)?;
        self.limits.check_keys(req.keys.len())?;
        let one_key = || match req.keys.as_slice() {
            [key] => Ok(*key),
            _ => Err(Status::BadRequest),
        };
        match op {
            Op::Get => {
                let key = one_key()?;
                let value = self.get(key).ok_or(Status::NotFound)?.single().ok_or(Status::BadRequest)?;
                out.push(value.as_slice());
            }
            Op::GetM => {
                if req.keys.is_empty() {
                    return Err(Status::BadRequest);
                }
                for key in &req.keys {
                    let value = self.get(key).ok_or(Status::NotFound)?.single().ok_or(Status::BadRequest)?;
                    out.push(value.as_slice());
                }
            }
            Op::GetList => {
                let key = one_key()?;
                out.extend(self.get(key).ok_or(Status::NotFound)?.iter().map(|b| b.as_slice()));
            }
            Op::GetFromList => {
                let key = one_key()?;
                let value = self.get(key).ok_or(Status::NotFound)?;
                out.push(value.get(req.index as usize).ok_or(Status::NotFound)?.as_slice());
            }
            Op::Put => {
                let key = one_key()?;
                self.put(key, &req.vals)?;
            }
            Op::PutM => {
                if req.keys.is_empty() || req.keys.len() != req.vals.len() {
                    return Err(Status::BadRequest);
                }
                for (key, val) in req.keys.iter().zip(&req.vals) {
                    self.put(key, &[val])?;
                }
            }
            Op::Append => {
                let key = one_key()?;
                let [val] = req.vals.as_slice() else { return Err(Status::BadRequest) };
                self.append(key, val)?;
            }
            Op::Echo => out.extend(req.vals.iter().copied()),
        }
        self.limits.check_response(out.iter().map(|v| v.len()).sum())
    }

    /// Whether `key` and a value of `elems` are within the limits (what
    /// [`put`](Self::put) refuses before writing anything), so that a
    /// command writing several keys can refuse them all or write them all.
    pub fn check_put(&self, key: &[u8], elems: &[&[u8]]) -> Result<(), Status> {
        self.check_key(key)?;
        if elems.len() > self.limits.max_list || elems.iter().any(|e| e.len() > self.limits.max_value) {
            return Err(Status::TooLarge);
        }
        Ok(())
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Status> {
        if key.is_empty() {
            Err(Status::BadRequest)
        } else if key.len() > self.limits.max_key {
            Err(Status::TooLarge)
        } else {
            Ok(())
        }
    }

    fn copy_in(&self, elems: &[&[u8]]) -> Result<Value, Status> {
        let mut value = Value::with_capacity(elems.len());
        for elem in elems {
            if elem.len() > self.limits.max_value {
                return Err(Status::TooLarge);
            }
            value.push(self.pool.alloc_copy(elem).map_err(|_| Status::NoMemory)?);
        }
        Ok(value)
    }

    fn swap_in(&mut self, key: &[u8], value: Value) {
        self.writes += 1;
        self.remove_front(key);
        self.value_bytes += value.iter().map(|b| b.len()).sum::<usize>();
        // The old buffers are dropped here; one still referenced by an
        // in-flight send lives until that send completes.
        match self.map.get_mut(key) {
            Some(slot) => {
                let old = std::mem::replace(slot, value);
                self.value_bytes -= old.iter().map(|b| b.len()).sum::<usize>();
            }
            None => {
                self.remove_collection(key);
                self.key_added(key);
                self.key_bytes += key.len();
                self.map.insert(key.into(), value);
            }
        }
    }
}

/// A list value being edited in place ([`Store::edit_list`]), its byte
/// count kept as elements come and go.
pub struct ListEdit<'s> {
    elems: &'s mut Value,
    added: usize,
    removed: usize,
}

impl ListEdit<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.elems.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// The elements, in order.
    pub fn elems(&self) -> &[RcBuf] {
        self.elems
    }

    /// Replaces element `i` (below [`len`](Self::len)) by `buf`.
    pub fn set(&mut self, i: usize, buf: RcBuf) {
        self.added += buf.len();
        self.removed += std::mem::replace(&mut self.elems[i], buf).len();
    }

    /// Inserts `buf` at position `i` (at most [`len`](Self::len)).
    pub fn insert(&mut self, i: usize, buf: RcBuf) {
        self.added += buf.len();
        self.elems.insert(i, buf);
    }

    /// Keeps the elements at positions `keep`, drops the others.
    pub fn keep(&mut self, keep: std::ops::Range<usize>) {
        self.removed += self.elems[keep.end..].iter().chain(&self.elems[..keep.start]).map(|b| b.len()).sum::<usize>();
        self.elems.truncate(keep.end);
        self.elems.drain(..keep.start);
    }

    /// Drops the elements at positions `drop`, in increasing order.
    pub fn remove_positions(&mut self, drop: &[usize]) {
        let (mut i, mut next) = (0, 0);
        let removed = &mut self.removed;
        self.elems.retain(|b| {
            let gone = drop.get(next) == Some(&i);
            if gone {
                next += 1;
                *removed += b.len();
            }
            i += 1;
            !gone
        });
    }
}

#[cfg(test)]
mod tests;

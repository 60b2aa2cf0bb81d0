//! The key store: keys to values held in pinned pool buffers, the same for
//! every serializer.
//!
//! A value is one buffer or a list of buffers (the paper's linked list of
//! buffers). A put allocates new buffers and swaps them in, so a value being
//! sent (referenced by an in-flight zero-copy send) is never modified in
//! place: the old buffers live on until the datapath releases them.

use cornflakes::{AllocError, Pool, RcBuf};
use hashbrown::HashMap;
use smallvec::SmallVec;

use crate::protocol::{Limits, Op, Request, ResponseVals, Status};

/// A value: its elements (one for a plain value).
pub type Value = SmallVec<[RcBuf; 1]>;

/// Keys to values in pinned memory.
pub struct Store {
    pool: Pool,
    map: HashMap<Box<[u8]>, Value>,
    limits: Limits,
    value_bytes: usize,
}

impl Store {
    /// An empty store whose values live in `pool`.
    pub fn new(pool: Pool, limits: Limits) -> Self {
        Store { pool, map: HashMap::new(), limits, value_bytes: 0 }
    }

    /// The limits requests are checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the store has no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of all values.
    pub fn value_bytes(&self) -> usize {
        self.value_bytes
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[RcBuf]> {
        self.map.get(key).map(|v| v.as_slice())
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
        self.check_key(key)?;
        let len = self.map.get(key).map_or(0, |v| v.len());
        if len >= self.limits.max_list {
            return Err(Status::TooLarge);
        }
        let [buf] = self.copy_in(&[elem])?.into_inner().map_err(|_| Status::BadRequest)?;
        self.value_bytes += buf.len();
        match self.map.get_mut(key) {
            Some(v) => v.push(buf),
            None => {
                self.map.insert(key.into(), smallvec::smallvec![buf]);
            }
        }
        Ok(())
    }

    /// Prepends a copy of `elem` to the list value of `key`, creating it
    /// (RESP's `LPUSH`). O(length of the list).
    pub fn prepend(&mut self, key: &[u8], elem: &[u8]) -> Result<(), Status> {
        self.check_key(key)?;
        let len = self.map.get(key).map_or(0, |v| v.len());
        if len >= self.limits.max_list {
            return Err(Status::TooLarge);
        }
        let [buf] = self.copy_in(&[elem])?.into_inner().map_err(|_| Status::BadRequest)?;
        self.value_bytes += buf.len();
        match self.map.get_mut(key) {
            Some(v) => v.insert(0, buf),
            None => {
                self.map.insert(key.into(), smallvec::smallvec![buf]);
            }
        }
        Ok(())
    }

    /// Removes `key`; whether it was there. Its buffers live on while an
    /// in-flight send references them.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        match self.map.remove(key) {
            Some(old) => {
                self.value_bytes -= old.iter().map(|b| b.len()).sum::<usize>();
                true
            }
            None => false,
        }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.map.clear();
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
                match self.get(key).ok_or(Status::NotFound)? {
                    [value] => out.push(value.as_slice()),
                    _ => return Err(Status::BadRequest),
                }
            }
            Op::GetM => {
                if req.keys.is_empty() {
                    return Err(Status::BadRequest);
                }
                for key in &req.keys {
                    match self.map.get(*key).ok_or(Status::NotFound)?.as_slice() {
                        [value] => out.push(value.as_slice()),
                        _ => return Err(Status::BadRequest),
                    }
                }
            }
            Op::GetList => {
                let key = one_key()?;
                out.extend(self.map.get(key).ok_or(Status::NotFound)?.iter().map(|b| b.as_slice()));
            }
            Op::GetFromList => {
                let key = one_key()?;
                let value = self.map.get(key).ok_or(Status::NotFound)?;
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
        self.value_bytes += value.iter().map(|b| b.len()).sum::<usize>();
        // The old buffers are dropped here; one still referenced by an
        // in-flight send lives until that send completes.
        match self.map.get_mut(key) {
            Some(slot) => {
                let old = std::mem::replace(slot, value);
                self.value_bytes -= old.iter().map(|b| b.len()).sum::<usize>();
            }
            None => {
                self.map.insert(key.into(), value);
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The list commands beyond pushes, pops and reads: LSET, LTRIM, LREM,
//! LINSERT, LPOS, LMOVE, RPOPLPUSH, LPUSHX, RPUSHX, with Redis 7.0's
//! replies and errors. LMOVE moves the element's buffer without a copy.

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;

use super::{integer_arg, status_error, Kind, RespDb, NOT_INTEGER, SYNTAX};

impl RespDb {
    /// Whether `key` is a list: `Ok(false)` when missing, `Err` when of
    /// another kind (expired keys removed first).
    fn is_list(&mut self, key: &[u8]) -> Result<bool, &'static str> {
        self.expect_kind(key, Kind::List)
    }

    /// Runs list command `name` (its arity checked).
    pub(super) fn list_command(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        match name {
            "lpushx" | "rpushx" => match self.is_list(key) {
                Err(e) => reply.error(e),
                Ok(false) => reply.integer(0),
                Ok(true) => self.push(name == "lpushx", args, reply),
            },
            "lset" => self.lset(args, reply),
            "ltrim" => {
                let (Some(start), Some(stop)) = (integer_arg(&args[1]), integer_arg(&args[2])) else {
                    return reply.error(NOT_INTEGER);
                };
                match self.is_list(key) {
                    Err(e) => return reply.error(e),
                    Ok(false) => return reply.simple("OK"),
                    Ok(true) => {}
                }
                self.store.edit_list(key, |list| match range(list.len(), start, stop) {
                    None => list.keep(0..0),
                    Some((a, b)) => list.keep(a..b + 1),
                });
                self.settle_list(key);
                reply.simple("OK")
            }
            "lrem" => {
                let Some(count) = integer_arg(&args[1]) else { return reply.error(NOT_INTEGER) };
                match self.is_list(key) {
                    Err(e) => return reply.error(e),
                    Ok(false) => return reply.integer(0),
                    Ok(true) => {}
                }
                let target = &args[2][..];
                // Nothing to remove: nothing changes (no watch aborts).
                if !self.store.get(key).is_some_and(|l| l.iter().any(|b| b.as_slice() == target)) {
                    return reply.integer(0);
                }
                // The positions to remove: the first `count` matches from the
                // head (or, negative, from the tail; 0: all).
                let max = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
                let removed = self
                    .store
                    .edit_list(key, |list| {
                        let hits = |(i, b): (usize, &RcBuf)| (b.as_slice() == target).then_some(i);
                        let mut drop: Vec<usize> = if count >= 0 {
                            list.elems().iter().enumerate().filter_map(hits).take(max).collect()
                        } else {
                            list.elems().iter().enumerate().rev().filter_map(hits).take(max).collect()
                        };
                        drop.sort_unstable();
                        list.remove_positions(&drop);
                        drop.len()
                    })
                    .unwrap_or(0);
                self.settle_list(key);
                reply.integer(removed as i64)
            }
            "linsert" => self.linsert(args, reply),
            "lpos" => self.lpos(args, reply),
            "lmove" => {
                let (Some(from), Some(to)) = (side(&args[2]), side(&args[3])) else { return reply.error(SYNTAX) };
                self.lmove(&args[0], &args[1], from, to, reply)
            }
            "rpoplpush" => self.lmove(&args[0], &args[1], false, true, reply),
            _ => unreachable!("not a list command: {name}"),
        }
    }

    /// After an edit of the list of `key`: removes the key from the
    /// keyspace (its expiry and list mark too) when the list lost its last
    /// element, or marks it a list, so that one left with one element is
    /// not taken for a string.
    fn settle_list(&mut self, key: &[u8]) {
        if self.store.get(key).is_none() {
            self.delete(key);
        } else if !self.lists.contains(key) {
            self.lists.insert(key.into());
        }
    }

    fn lset(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        let Some(index) = integer_arg(&args[1]) else { return reply.error(NOT_INTEGER) };
        match self.is_list(key) {
            Err(e) => return reply.error(e),
            Ok(false) => return reply.error("ERR no such key"),
            Ok(true) => {}
        }
        let len = self.store.get(key).map_or(0, |l| l.len()) as i64;
        let i = if index < 0 { index + len } else { index };
        if !(0..len).contains(&i) {
            return reply.error("ERR index out of range");
        }
        let buf = match self.store.alloc_value(&args[2]) {
            Ok(b) => b,
            Err(s) => return reply.error(status_error(s)),
        };
        // The old buffer lives on while a reply still references it.
        self.store.edit_list(key, |list| list.set(i as usize, buf));
        self.settle_list(key);
        reply.simple("OK")
    }

    fn linsert(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        let after = if args[1].eq_ignore_ascii_case(b"after") {
            true
        } else if args[1].eq_ignore_ascii_case(b"before") {
            false
        } else {
            return reply.error(SYNTAX);
        };
        match self.is_list(key) {
            Err(e) => return reply.error(e),
            Ok(false) => return reply.integer(0),
            Ok(true) => {}
        }
        let pivot = &args[2][..];
        let Some(at) = self.store.get(key).and_then(|l| l.iter().position(|b| b.as_slice() == pivot)) else {
            return reply.integer(-1);
        };
        let buf = match self.store.alloc_value(&args[3]) {
            Ok(b) => b,
            Err(s) => return reply.error(status_error(s)),
        };
        let len = self.store.edit_list(key, |list| {
            list.insert(at + usize::from(after), buf);
            list.len()
        });
        self.settle_list(key);
        reply.integer(len.unwrap_or(0) as i64)
    }

    /// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
    fn lpos(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (mut rank, mut count, mut maxlen) = (1i64, None::<usize>, 0usize);
        let mut opts = args[2..].chunks(2);
        for opt in &mut opts {
            let [o, v] = opt else { return reply.error(SYNTAX) };
            let Some(n) = integer_arg(v) else { return reply.error(NOT_INTEGER) };
            if o.eq_ignore_ascii_case(b"rank") {
                if n == 0 {
                    return reply.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
                }
                if n == i64::MIN {
                    return reply.error("ERR value is out of range");
                }
                rank = n;
            } else if o.eq_ignore_ascii_case(b"count") {
                if n < 0 {
                    return reply.error("ERR COUNT can't be negative");
                }
                count = Some(n as usize);
            } else if o.eq_ignore_ascii_case(b"maxlen") {
                if n < 0 {
                    return reply.error("ERR MAXLEN can't be negative");
                }
                maxlen = n as usize;
            } else {
                return reply.error(SYNTAX);
            }
        }
        let key = &args[0][..];
        let present = match self.is_list(key) {
            Err(e) => return reply.error(e),
            Ok(p) => p,
        };
        let list = if present { self.store.get(key).unwrap_or_default() } else { Default::default() };
        let len = list.len();
        let element = &args[1][..];
        let scanned = if maxlen == 0 { len } else { maxlen.min(len) };
        let want = match count {
            None => 1,
            Some(0) => usize::MAX,
            Some(n) => n,
        };
        let mut skip = rank.unsigned_abs() as usize - 1;
        let mut found = Vec::new();
        let positions: Box<dyn Iterator<Item = usize>> =
            if rank > 0 { Box::new(0..scanned) } else { Box::new((len - scanned..len).rev()) };
        for i in positions {
            if found.len() >= want {
                break;
            }
            if list.get(i).is_some_and(|b| b.as_slice() == element) {
                if skip > 0 {
                    skip -= 1;
                } else {
                    found.push(i as i64);
                }
            }
        }
        match count {
            None => match found.first() {
                Some(&i) => reply.integer(i),
                None => reply.null(),
            },
            Some(_) => {
                reply.array(found.len());
                for i in found {
                    reply.integer(i);
                }
            }
        }
    }

    /// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT` (`from_left`,
    /// `to_left`), checked in Redis's order: a missing source is nil
    /// whatever the destination, a destination of another kind an error
    /// before anything moves.
    pub(super) fn lmove(&mut self, src: &[u8], dst: &[u8], from_left: bool, to_left: bool, reply: &mut Reply<RcBuf>) {
        match self.is_list(src) {
            Err(e) => return reply.error(e),
            Ok(false) => return reply.null(),
            Ok(true) => {}
        }
        if let Err(e) = self.is_list(dst) {
            return reply.error(e);
        }
        if src != dst {
            if let Err(s) = self.store.check_push(dst) {
                return reply.error(status_error(s));
            }
        }
        let Some(buf) = self.store.pop(src, from_left) else { return reply.null() };
        if let Err(s) = self.store.push_buf(dst, buf.clone(), to_left) {
            // Checked above, so not expected: put it back where it was.
            let _ = self.store.push_buf(src, buf, from_left);
            return reply.error(status_error(s));
        }
        if src != dst {
            self.settle_list(src);
        }
        self.lists.insert(dst.into());
        self.value(reply, &buf);
    }
}

/// LEFT or RIGHT: whether left.
pub(super) fn side(arg: &[u8]) -> Option<bool> {
    if arg.eq_ignore_ascii_case(b"left") {
        Some(true)
    } else if arg.eq_ignore_ascii_case(b"right") {
        Some(false)
    } else {
        None
    }
}

/// The positions `start..=stop` of a list of `len` elements select, with
/// Redis's negative indexes and clamping (LRANGE, LTRIM); `None` when
/// empty.
fn range(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let stop = if stop < 0 { len + stop } else { stop.min(len - 1) };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

//! The hash commands (HSET, HGET, HDEL, HGETALL, HINCRBY, HSCAN, ...), with
//! Redis 7.0's replies and errors. Fields are listed in insertion order
//! while a hash has at most 128 of them, as Redis's small hashes list
//! them; values of at least the threshold are replied by reference.

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;

use super::long_double::{LongDouble, NOT_A_FLOAT};
use super::{arity_error, glob_match, integer_arg, status_error, Kind, RespDb, NOT_INTEGER, SYNTAX};
use crate::store::Hash;

impl RespDb {
    /// `HRANDFIELD key [count [WITHVALUES]]`: the arguments checked before
    /// the key, as Redis does; a positive count picks distinct fields, a
    /// negative one may repeat them (bounded, as SRANDMEMBER's).
    fn hrandfield(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (count, with_values) = match super::set::random_count_args(args, Some(b"withvalues")) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let threshold = self.threshold;
        let hash = match self.hash_of(&args[0]) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let len = hash.map_or(0, Hash::len);
        let put = |reply: &mut Reply<RcBuf>, i: usize| {
            let Some((field, v)) = hash.and_then(|h| h.get_index(i)) else { return };
            reply.bulk(field);
            if with_values {
                if v.len() >= threshold {
                    reply.bulk_value(v.clone());
                } else {
                    reply.bulk(v);
                }
            }
        };
        super::set::reply_random_picks(reply, len, count, if with_values { 2 } else { 1 }, put);
    }

    /// The hash of `key`: `Ok(None)` when missing, `Err` when of another
    /// kind (expired keys removed first).
    fn hash_of(&mut self, key: &[u8]) -> Result<Option<&Hash>, &'static str> {
        Ok(if self.expect_kind(key, Kind::Hash)? { self.store.hash(key) } else { None })
    }

    /// Runs hash command `name` (an `h` command of the table, its arity
    /// checked).
    pub(super) fn hash_command(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        if matches!(name, "hset" | "hmset" | "hsetnx") {
            return self.hash_write(name, args, reply);
        }
        if matches!(name, "hincrby" | "hincrbyfloat") {
            return self.hincr(name == "hincrbyfloat", key, &args[1], &args[2], reply);
        }
        if name == "hrandfield" {
            return self.hrandfield(args, reply);
        }
        let threshold = self.threshold;
        let hash = match self.hash_of(key) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let value = |reply: &mut Reply<RcBuf>, v: &RcBuf| {
            if v.len() >= threshold {
                reply.bulk_value(v.clone());
            } else {
                reply.bulk(v);
            }
        };
        match name {
            "hget" => match hash.and_then(|h| h.get(&args[1])) {
                Some(v) => value(reply, v),
                None => reply.null(),
            },
            "hmget" => {
                reply.array(args.len() - 1);
                for field in &args[1..] {
                    match hash.and_then(|h| h.get(field)) {
                        Some(v) => value(reply, v),
                        None => reply.null(),
                    }
                }
            }
            "hexists" => reply.integer(i64::from(hash.is_some_and(|h| h.get(&args[1]).is_some()))),
            "hlen" => reply.integer(hash.map_or(0, |h| h.len() as i64)),
            "hstrlen" => reply.integer(hash.and_then(|h| h.get(&args[1])).map_or(0, |v| v.len() as i64)),
            "hkeys" | "hvals" | "hgetall" => {
                let Some(hash) = hash else { return reply.array(0) };
                reply.array(if name == "hgetall" { 2 * hash.len() } else { hash.len() });
                for (field, v) in hash.iter() {
                    if name != "hvals" {
                        reply.bulk(field);
                    }
                    if name != "hkeys" {
                        value(reply, v);
                    }
                }
            }
            "hscan" => hscan(hash, &args[1..], reply, value),
            "hdel" => {
                if hash.is_none() {
                    return reply.integer(0);
                }
                let n = args[1..].iter().filter(|f| self.store.hash_remove(key, f)).count();
                if self.store.hash(key).is_none() {
                    // The key went with its last field.
                    self.delete(key);
                }
                reply.integer(n as i64)
            }
            _ => unreachable!("not a hash command: {name}"),
        }
    }

    /// HSET, HMSET and HSETNX.
    fn hash_write(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        let pairs: Vec<&[u8]> = args[1..].iter().map(|a| &a[..]).collect();
        if matches!(name, "hset" | "hmset") && !pairs.len().is_multiple_of(2) {
            return reply.error(&arity_error(name));
        }
        let hash = match self.hash_of(key) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let pairs: Cow<'_, [&[u8]]> = match name {
            "hsetnx" if hash.is_some_and(|h| h.get(pairs[0]).is_some()) => return reply.integer(0),
            _ => Cow::Borrowed(&pairs[..]),
        };
        // Every pair checked before any is set: a refused HSET sets nothing.
        if let Err(s) = self.store.check_hash_set(key, &pairs) {
            return reply.error(status_error(s));
        }
        let mut added = 0;
        for pair in pairs.chunks(2) {
            match self.store.hash_set(key, pair[0], pair[1]) {
                Ok(new) => added += i64::from(new),
                // The pool ran out part way: the fields before stay set, as
                // in Redis when memory runs out part way.
                Err(s) => return reply.error(status_error(s)),
            }
        }
        match name {
            "hmset" => reply.simple("OK"),
            _ => reply.integer(added),
        }
    }
}

impl RespDb {
    /// `HINCRBY key field increment` (an integer) and HINCRBYFLOAT (a
    /// `long double`, as Redis adds): the increment checked before the
    /// key, as Redis does.
    fn hincr(&mut self, float: bool, key: &[u8], field: &[u8], by: &[u8], reply: &mut Reply<RcBuf>) {
        enum By {
            Integer(i64),
            Float(LongDouble),
        }
        let by = if float {
            match LongDouble::parse(by) {
                None => return reply.error(NOT_A_FLOAT),
                Some(x) if !x.is_finite() => return reply.error("ERR value is NaN or Infinity"),
                Some(x) => By::Float(x),
            }
        } else {
            match integer_arg(by) {
                None => return reply.error(NOT_INTEGER),
                Some(n) => By::Integer(n),
            }
        };
        let current = match self.hash_of(key) {
            Ok(h) => h.and_then(|h| h.get(field)),
            Err(e) => return reply.error(e),
        };
        // The new value as stored, and as an integer for HINCRBY's reply.
        let (next, integer) = match by {
            By::Integer(by) => {
                let current = match current.map(|v| integer_arg(v)) {
                    None => 0,
                    Some(Some(n)) => n,
                    Some(None) => return reply.error("ERR hash value is not an integer"),
                };
                match current.checked_add(by) {
                    Some(next) => (next.to_string(), Some(next)),
                    None => return reply.error("ERR increment or decrement would overflow"),
                }
            }
            By::Float(by) => {
                let current = match current.map(|v| LongDouble::parse(v)) {
                    None => LongDouble::ZERO,
                    Some(Some(x)) => x,
                    Some(None) => return reply.error("ERR hash value is not a float"),
                };
                match current.checked_add(by) {
                    Some(next) => (next.to_string(), None),
                    None => return reply.error("ERR increment would produce NaN or Infinity"),
                }
            }
        };
        match (self.store.hash_set(key, field, next.as_bytes()), integer) {
            (Ok(_), Some(n)) => reply.integer(n),
            (Ok(_), None) => reply.bulk(next.as_bytes()),
            (Err(s), _) => reply.error(status_error(s)),
        }
    }
}

/// `HSCAN key cursor [MATCH pattern] [COUNT n]` (see [`index_page`]).
fn hscan(
    hash: Option<&Hash>,
    args: &[Cow<'_, [u8]>],
    reply: &mut Reply<RcBuf>,
    value: impl Fn(&mut Reply<RcBuf>, &RcBuf),
) {
    let scan = match scan_args(args) {
        Ok(s) => s,
        Err(e) => return reply.error(e),
    };
    let (positions, next) = index_page(hash.map_or(0, Hash::len), scan.cursor, scan.count);
    let found: Vec<(&[u8], &RcBuf)> = positions
        .filter_map(|i| hash.and_then(|h| h.get_index(i)))
        .filter(|(f, _)| scan.pattern.is_none_or(|p| glob_match(p, f)))
        .collect();
    reply.array(2);
    reply.bulk(next.to_string().as_bytes());
    reply.array(2 * found.len());
    for (field, v) in found {
        reply.bulk(field);
        value(reply, v);
    }
}

/// Entries up to which Redis keeps a hash or a sorted set compact and
/// scans it in one call, COUNT or not (its listpacks); so does this server,
/// for sets too.
pub(super) const SCANNED_WHOLE: usize = 128;

/// HSCAN's, SSCAN's and ZSCAN's `cursor [MATCH pattern] [COUNT n]`,
/// checked as Redis checks them.
pub(super) struct ScanArgs<'c> {
    pub cursor: u64,
    pub pattern: Option<&'c [u8]>,
    pub count: usize,
}

/// Reads [`ScanArgs`]; the error to reply.
pub(super) fn scan_args<'c>(args: &'c [Cow<'_, [u8]>]) -> Result<ScanArgs<'c>, &'static str> {
    // Redis reads the cursor with strtoull, which takes a negative one too.
    let text = std::str::from_utf8(&args[0]).ok();
    let cursor = text
        .and_then(|c| c.parse::<u64>().ok().or_else(|| c.parse::<i64>().ok().map(|n| n as u64)))
        .ok_or("ERR invalid cursor")?;
    let (mut pattern, mut count): (Option<&[u8]>, usize) = (None, 10);
    for opt in args[1..].chunks(2) {
        match opt {
            [o, v] if o.eq_ignore_ascii_case(b"match") => pattern = Some(v),
            [o, v] if o.eq_ignore_ascii_case(b"count") => match integer_arg(v) {
                None => return Err(NOT_INTEGER),
                Some(n) if n < 1 => return Err(SYNTAX),
                Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
            },
            _ => return Err(SYNTAX),
        }
    }
    Ok(ScanArgs { cursor, pattern, count })
}

/// The positions of a hash or set of `len` entries that one HSCAN/SSCAN
/// call visits, and the cursor to reply. At most [`SCANNED_WHOLE`]
/// entries: all, cursor 0. Past that, COUNT positions from the end down:
/// the cursor is how many positions are left to visit (0 to start). A
/// removal moves entries only towards the front (the last one into the
/// hole, or every later one down by one), so an entry that stays is never
/// moved from the positions left into those visited: each is returned at
/// least once, some twice, as Redis promises; entries added go at the end,
/// already passed.
pub(super) fn index_page(len: usize, cursor: u64, count: usize) -> (std::ops::Range<usize>, u64) {
    if len <= SCANNED_WHOLE {
        return (0..len, 0);
    }
    let left = if cursor == 0 { len } else { usize::try_from(cursor).unwrap_or(usize::MAX).min(len) };
    let start = left.saturating_sub(count);
    (start..left, start as u64)
}

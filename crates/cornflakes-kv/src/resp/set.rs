//! The set commands (SADD, SREM, SMEMBERS, SINTER, SUNIONSTORE, SPOP, ...),
//! with Redis 7.0's replies and errors. Members are listed in insertion
//! order (Redis lists a set in an order of its own, which clients may not
//! rely on); SPOP and SRANDMEMBER pick uniformly at random.

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use indexmap::IndexSet;

use super::hash::{index_page, scan_args};
use super::{glob_match, integer_arg, status_error, Kind, RespDb, NOT_INTEGER, SYNTAX, WRONGTYPE};
use crate::store::Set;

/// How SINTER, SUNION and SDIFF combine their sets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Combine {
    Inter,
    Union,
    Diff,
}

impl RespDb {
    /// The set of `key`: `Ok(None)` when missing, `Err` when of another
    /// kind (expired keys removed first).
    fn set_of(&mut self, key: &[u8]) -> Result<Option<&Set>, &'static str> {
        Ok(if self.expect_kind(key, Kind::Set)? { self.store.set(key) } else { None })
    }

    /// Removes `key` from the keyspace (its expiry too) when its set lost
    /// its last member.
    fn drop_if_emptied(&mut self, key: &[u8]) {
        if self.store.set(key).is_none() {
            self.delete(key);
        }
    }

    /// Runs set command `name` (an `s` command of the table, its arity
    /// checked).
    pub(super) fn set_command(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        match name {
            "sadd" => self.sadd(key, &args[1..], reply),
            "srem" => match self.set_of(key) {
                Err(e) => reply.error(e),
                Ok(None) => reply.integer(0),
                Ok(Some(_)) => {
                    let n = args[1..].iter().filter(|m| self.store.set_remove(key, m)).count();
                    self.drop_if_emptied(key);
                    reply.integer(n as i64)
                }
            },
            "scard" => match self.set_of(key) {
                Err(e) => reply.error(e),
                Ok(set) => reply.integer(set.map_or(0, |s| s.len() as i64)),
            },
            "sismember" => match self.set_of(key) {
                Err(e) => reply.error(e),
                Ok(set) => reply.integer(i64::from(set.is_some_and(|s| s.contains(&args[1])))),
            },
            "smismember" => match self.set_of(key) {
                Err(e) => reply.error(e),
                Ok(set) => {
                    reply.array(args.len() - 1);
                    for m in &args[1..] {
                        reply.integer(i64::from(set.is_some_and(|s| s.contains(m))));
                    }
                }
            },
            "smembers" => match self.set_of(key) {
                Err(e) => reply.error(e),
                Ok(set) => {
                    reply.array(set.map_or(0, Set::len));
                    for m in set.into_iter().flat_map(Set::iter) {
                        reply.bulk(m);
                    }
                }
            },
            "sscan" => {
                let scan = match scan_args(&args[1..]) {
                    Ok(s) => s,
                    Err(e) => return reply.error(e),
                };
                let set = match self.set_of(key) {
                    Ok(set) => set,
                    Err(e) => return reply.error(e),
                };
                let (positions, next) = index_page(set.map_or(0, Set::len), scan.cursor, scan.count);
                let found: Vec<&[u8]> = positions
                    .filter_map(|i| set.and_then(|s| s.get_index(i)))
                    .filter(|m| scan.pattern.is_none_or(|p| glob_match(p, m)))
                    .collect();
                reply.array(2);
                reply.bulk(next.to_string().as_bytes());
                reply.array(found.len());
                for m in found {
                    reply.bulk(m);
                }
            }
            "sinter" | "sunion" | "sdiff" => match self.combine(combine_of(name), args) {
                Err(e) => reply.error(e),
                Ok(members) => {
                    reply.array(members.len());
                    for m in &members {
                        reply.bulk(m);
                    }
                }
            },
            "sinterstore" | "sunionstore" | "sdiffstore" => self.combine_store(combine_of(name), args, reply),
            "sintercard" => self.sintercard(args, reply),
            "smove" => self.smove(args, reply),
            "spop" => self.spop(args, reply),
            "srandmember" => self.srandmember(args, reply),
            _ => unreachable!("not a set command: {name}"),
        }
    }

    fn sadd(&mut self, key: &[u8], members: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        if let Err(e) = self.set_of(key) {
            return reply.error(e);
        }
        let members: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
        // Every member checked before any is added.
        if let Err(s) = self.store.check_set_add(key, &members) {
            return reply.error(status_error(s));
        }
        let mut added = 0;
        for m in members {
            match self.store.set_add(key, m) {
                Ok(new) => added += i64::from(new),
                Err(s) => return reply.error(status_error(s)),
            }
        }
        reply.integer(added)
    }

    /// The members SINTER, SUNION or SDIFF of `keys` gives (missing keys
    /// are empty sets; any key of another kind is an error, as in Redis,
    /// which checks them all).
    fn combine(&mut self, how: Combine, keys: &[Cow<'_, [u8]>]) -> Result<Vec<Box<[u8]>>, &'static str> {
        for k in keys {
            self.set_of(k)?;
        }
        let sets: Vec<Option<&Set>> = keys.iter().map(|k| self.store.set(k)).collect();
        Ok(match how {
            Combine::Inter => {
                if sets.iter().any(Option::is_none) {
                    return Ok(Vec::new());
                }
                let sets: Vec<&Set> = sets.into_iter().flatten().collect();
                let smallest = sets.iter().min_by_key(|s| s.len()).expect("one key at least");
                smallest.iter().filter(|m| sets.iter().all(|s| s.contains(m))).map(Box::from).collect()
            }
            Combine::Union => {
                let mut all: IndexSet<&[u8]> = IndexSet::new();
                all.extend(sets.into_iter().flatten().flat_map(Set::iter));
                all.into_iter().map(Box::from).collect()
            }
            Combine::Diff => match sets[0] {
                None => Vec::new(),
                Some(first) => {
                    first.iter().filter(|m| !sets[1..].iter().flatten().any(|s| s.contains(m))).map(Box::from).collect()
                }
            },
        })
    }

    /// SINTERSTORE, SUNIONSTORE, SDIFFSTORE: the result replaces the
    /// destination (its expiry too); an empty result deletes it.
    fn combine_store(&mut self, how: Combine, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let dest = &args[0][..];
        let members = match self.combine(how, &args[1..]) {
            Ok(m) => m,
            Err(e) => return reply.error(e),
        };
        let refs: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
        if !refs.is_empty() {
            if let Err(s) = self.store.check_set_add(dest, &refs) {
                return reply.error(status_error(s));
            }
        }
        self.delete(dest);
        for m in &refs {
            if let Err(s) = self.store.set_add(dest, m) {
                return reply.error(status_error(s));
            }
        }
        reply.integer(refs.len() as i64)
    }

    /// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
    fn sintercard(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let numkeys = match integer_arg(&args[0]) {
            Some(n) if n > 0 => n as usize,
            _ => return reply.error("ERR numkeys should be greater than 0"),
        };
        if numkeys > args.len() - 1 {
            return reply.error("ERR Number of keys can't be greater than number of args");
        }
        let (keys, opts) = args[1..].split_at(numkeys);
        let mut limit = 0;
        let mut opts = opts.iter();
        while let Some(opt) = opts.next() {
            match opts.next() {
                Some(n) if opt.eq_ignore_ascii_case(b"limit") => match integer_arg(n) {
                    Some(n) if n >= 0 => limit = n as usize,
                    _ => return reply.error("ERR LIMIT can't be negative"),
                },
                _ => return reply.error(SYNTAX),
            }
        }
        match self.combine(Combine::Inter, keys) {
            Err(e) => reply.error(e),
            Ok(m) => reply.integer(if limit == 0 { m.len() } else { m.len().min(limit) } as i64),
        }
    }

    /// `SMOVE source destination member`, checked in Redis's order.
    fn smove(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (src, dst, member) = (&args[0][..], &args[1][..], &args[2][..]);
        let src_kind = self.kind(src);
        let dst_kind = self.kind(dst);
        if src_kind.is_none() {
            return reply.integer(0);
        }
        if src_kind != Some(Kind::Set) || dst_kind.is_some_and(|k| k != Kind::Set) {
            return reply.error(WRONGTYPE);
        }
        if src == dst {
            return reply.integer(i64::from(self.store.set(src).is_some_and(|s| s.contains(member))));
        }
        if !self.store.set_remove(src, member) {
            return reply.integer(0);
        }
        self.drop_if_emptied(src);
        match self.store.set_add(dst, member) {
            Ok(_) => reply.integer(1),
            Err(s) => reply.error(status_error(s)),
        }
    }

    /// `SPOP key [count]`: members removed at random.
    fn spop(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let count = match args {
            [_] => None,
            [_, n] => match integer_arg(n) {
                Some(n) if n >= 0 => Some(n as usize),
                _ => return reply.error("ERR value is out of range, must be positive"),
            },
            _ => return reply.error(SYNTAX),
        };
        let key = &args[0][..];
        let len = match self.set_of(key) {
            Err(e) => return reply.error(e),
            Ok(set) => set.map_or(0, Set::len),
        };
        match count {
            None if len == 0 => reply.null(),
            None => {
                if let Some(m) = self.store.set_take(key, fastrand::usize(..len)) {
                    reply.bulk(&m);
                }
            }
            Some(n) => {
                let n = n.min(len);
                reply.array(n);
                for left in (len - n + 1..=len).rev() {
                    if let Some(m) = self.store.set_take(key, fastrand::usize(..left)) {
                        reply.bulk(&m);
                    }
                }
            }
        }
        self.drop_if_emptied(key);
    }

    /// `SRANDMEMBER key [count]`: distinct members at random for a
    /// positive count, `-count` picks that may repeat for a negative one.
    fn srandmember(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (count, _) = match random_count_args(args, None) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let set = match self.set_of(&args[0]) {
            Err(e) => return reply.error(e),
            Ok(set) => set,
        };
        let len = set.map_or(0, Set::len);
        let pick = |i: usize| set.and_then(|s| s.get_index(i)).unwrap_or_default();
        reply_random_picks(reply, len, count, 1, |reply, i| reply.bulk(pick(i)));
    }
}

/// The reply of SRANDMEMBER, HRANDFIELD and ZRANDMEMBER of a collection of
/// `len` members: without a count, one member (nil when there is none);
/// with one, an array of the [`random_positions`] it asks for, each
/// written by `put` as `per` items.
pub(super) fn reply_random_picks(
    reply: &mut Reply<RcBuf>,
    len: usize,
    count: Option<i64>,
    per: usize,
    mut put: impl FnMut(&mut Reply<RcBuf>, usize),
) {
    match count {
        None if len == 0 => reply.null(),
        None => put(reply, fastrand::usize(..len)),
        Some(count) => match random_positions(len, count) {
            Err(e) => reply.error(e),
            Ok((n, picks)) => {
                reply.array(n * per);
                for i in picks {
                    put(reply, i);
                }
            }
        },
    }
}

/// The `count [option]` of SRANDMEMBER (no option), HRANDFIELD
/// (`WITHVALUES`) and ZRANDMEMBER (`WITHSCORES`) after the key: the count
/// if given, and whether the option was; checked as Redis 7.0 does.
pub(super) fn random_count_args(
    args: &[Cow<'_, [u8]>],
    option: Option<&[u8]>,
) -> Result<(Option<i64>, bool), &'static str> {
    let Some(count) = args.get(1) else { return Ok((None, false)) };
    let most = if option.is_some() { 3 } else { 2 };
    if option.is_none() && args.len() > most {
        return Err(SYNTAX);
    }
    let count = match integer_arg(count) {
        None => return Err(NOT_INTEGER),
        Some(i64::MIN) => {
            return Err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        }
        Some(n) => n,
    };
    let with = match (&args[2..], option) {
        ([], _) => false,
        ([opt], Some(name)) if opt.eq_ignore_ascii_case(name) => true,
        _ => return Err(SYNTAX),
    };
    // Redis bounds a count with the option to half the range.
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err("ERR value is out of range");
    }
    Ok((Some(count), with))
}

/// The positions of `len` members SRANDMEMBER, HRANDFIELD and ZRANDMEMBER
/// reply with for `count`: `count` distinct ones at most for a positive
/// count, `-count` that may repeat for a negative one (none of an empty
/// collection); how many, and the positions.
///
/// # Errors
///
/// A negative count of more than [`MAX_PICKS`] of a collection that has
/// members: a reply that large is refused (Redis builds it, gigabytes of
/// it, and stops answering meanwhile).
pub(super) fn random_positions(len: usize, count: i64) -> Result<(usize, impl Iterator<Item = usize>), &'static str> {
    if len > 0 && count < -MAX_PICKS {
        return Err("ERR value is out of range");
    }
    let repeats = if count < 0 && len > 0 { count.unsigned_abs() as usize } else { 0 };
    let distinct = if count > 0 { distinct_positions(len, count as usize) } else { Vec::new() };
    Ok((repeats + distinct.len(), (0..repeats).map(move |_| fastrand::usize(..len)).chain(distinct)))
}

/// `n` distinct positions of `len` (all when `n >= len`), at random: drawn
/// one by one, a repeat drawn again, when they are few (O(n), as Redis's
/// fourth case); else the first `n` of a partial shuffle.
fn distinct_positions(len: usize, n: usize) -> Vec<usize> {
    let n = n.min(len);
    if n.saturating_mul(3) <= len {
        let mut seen = hashbrown::HashSet::with_capacity(n);
        let mut picked = Vec::with_capacity(n);
        while picked.len() < n {
            let i = fastrand::usize(..len);
            if seen.insert(i) {
                picked.push(i);
            }
        }
        return picked;
    }
    let mut order: Vec<usize> = (0..len).collect();
    for i in 0..n {
        order.swap(i, fastrand::usize(i..len));
    }
    order.truncate(n);
    order
}

/// Picks SRANDMEMBER, HRANDFIELD and ZRANDMEMBER with a negative count may
/// ask for at most.
const MAX_PICKS: i64 = 1 << 24;

fn combine_of(name: &str) -> Combine {
    match name.trim_end_matches("store") {
        "sinter" => Combine::Inter,
        "sunion" => Combine::Union,
        _ => Combine::Diff,
    }
}

//! The sorted set commands (ZADD, ZRANGE, ZRANK, ZPOPMIN, ...), with Redis
//! 7.0's replies and errors, scores printed as Redis prints them (an
//! integer when the score is one, else 17 significant digits).

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use rustc_apfloat::ieee::Double;
use rustc_apfloat::Float;

use super::hash::{scan_args, SCANNED_WHOLE};
use super::long_double::{read_float, read_in_range};
use super::{glob_match, integer_arg, status_error, Kind, RespDb, NOT_INTEGER, SYNTAX};
use crate::store::ZSet;

const NOT_FLOAT: &str = "ERR value is not a valid float";
const BAD_RANGE: &str = "ERR min or max is not a float";
const BAD_LEX_RANGE: &str = "ERR min or max not valid string range item";

impl RespDb {
    /// The sorted set of `key`: `Ok(None)` when missing, `Err` when of
    /// another kind (expired keys removed first).
    pub(super) fn zset_of(&mut self, key: &[u8]) -> Result<Option<&ZSet>, &'static str> {
        Ok(if self.expect_kind(key, Kind::ZSet)? { self.store.zset(key) } else { None })
    }

    /// Runs sorted set command `name` (a `z` command of the table, its
    /// arity checked).
    pub(super) fn zset_command(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        match name {
            "zadd" => self.zadd(args, reply),
            "zincrby" => match parse_score(&args[1]) {
                None => reply.error(NOT_FLOAT),
                Some(by) => self.zadd_one(key, &args[2], by, ZaddFlags { incr: true, ..ZaddFlags::default() }, reply),
            },
            "zrem" => match self.zset_of(key) {
                Err(e) => reply.error(e),
                Ok(None) => reply.integer(0),
                Ok(Some(_)) => {
                    let n = args[1..].iter().filter(|m| self.store.zset_remove(key, m).is_some()).count();
                    self.drop_if_no_zset(key);
                    reply.integer(n as i64)
                }
            },
            "zpopmin" | "zpopmax" => {
                if args.len() > 2 {
                    return reply.error(SYNTAX);
                }
                let count = match args.get(1).map(|n| integer_arg(n)) {
                    None => None,
                    Some(Some(n)) if n >= 0 => Some(n as usize),
                    Some(_) => return reply.error("ERR value is out of range, must be positive"),
                };
                let len = match self.zset_of(key) {
                    Err(e) => return reply.error(e),
                    Ok(z) => z.map_or(0, ZSet::len),
                };
                let n = count.unwrap_or(1).min(len);
                reply.array(2 * n);
                for _ in 0..n {
                    let Some(z) = self.store.zset(key) else { break };
                    let at = if name == "zpopmin" { 0 } else { z.len() - 1 };
                    let Some((member, score)) = z.get_index(at).map(|(m, s)| (Box::<[u8]>::from(m), s)) else { break };
                    self.store.zset_remove(key, &member);
                    reply.bulk(&member);
                    reply.bulk(format_score(score).as_bytes());
                }
                self.drop_if_no_zset(key);
            }
            "zremrangebyrank" | "zremrangebyscore" | "zremrangebylex" => {
                // The range is checked before the key, as Redis does.
                let by = match name {
                    "zremrangebyrank" => match (integer_arg(&args[1]), integer_arg(&args[2])) {
                        (Some(start), Some(stop)) => By::Index(start, stop),
                        _ => return reply.error(NOT_INTEGER),
                    },
                    "zremrangebyscore" => match (parse_bound(&args[1]), parse_bound(&args[2])) {
                        (Some(min), Some(max)) => By::Score(min, max),
                        _ => return reply.error(BAD_RANGE),
                    },
                    _ => match (Lex::parse(&args[1]), Lex::parse(&args[2])) {
                        (Some(min), Some(max)) => By::Lex(min, max),
                        _ => return reply.error(BAD_LEX_RANGE),
                    },
                };
                let z = match self.zset_of(key) {
                    Err(e) => return reply.error(e),
                    Ok(z) => z,
                };
                let range = z.map_or(0..0, |z| RangeQuery::whole(by).positions(z));
                let doomed: Vec<Box<[u8]>> =
                    z.map(|z| z.range(range).map(|(m, _)| Box::from(m)).collect()).unwrap_or_default();
                for m in &doomed {
                    self.store.zset_remove(key, m);
                }
                self.drop_if_no_zset(key);
                reply.integer(doomed.len() as i64)
            }
            _ => self.zset_read(name, args, reply),
        }
    }

    /// The sorted set commands that change nothing.
    fn zset_read(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let key = &args[0][..];
        // Options are checked before the key, as Redis does.
        let range = match name {
            "zrange" | "zrevrange" | "zrangebyscore" | "zrevrangebyscore" | "zrangebylex" | "zrevrangebylex" => {
                match RangeQuery::parse(name, args) {
                    Ok(q) => Some(q),
                    Err(e) => return reply.error(e),
                }
            }
            "zcount" => match (parse_bound(&args[1]), parse_bound(&args[2])) {
                (Some(min), Some(max)) => Some(RangeQuery::whole(By::Score(min, max))),
                _ => return reply.error(BAD_RANGE),
            },
            "zlexcount" => match (Lex::parse(&args[1]), Lex::parse(&args[2])) {
                (Some(min), Some(max)) => Some(RangeQuery::whole(By::Lex(min, max))),
                _ => return reply.error(BAD_LEX_RANGE),
            },
            _ => None,
        };
        let scan = if name == "zscan" {
            match scan_args(&args[1..]) {
                Ok(s) => Some(s),
                Err(e) => return reply.error(e),
            }
        } else {
            None
        };
        let z = match self.zset_of(key) {
            Err(e) => return reply.error(e),
            Ok(z) => z,
        };
        match name {
            "zcard" => reply.integer(z.map_or(0, ZSet::len) as i64),
            "zscore" => match z.and_then(|z| z.score(&args[1])) {
                Some(s) => reply.bulk(format_score(s).as_bytes()),
                None => reply.null(),
            },
            "zmscore" => {
                reply.array(args.len() - 1);
                for m in &args[1..] {
                    match z.and_then(|z| z.score(m)) {
                        Some(s) => reply.bulk(format_score(s).as_bytes()),
                        None => reply.null(),
                    }
                }
            }
            "zrank" | "zrevrank" => match z.and_then(|z| Some((z.rank(&args[1])?, z.len()))) {
                Some((r, _)) if name == "zrank" => reply.integer(r as i64),
                Some((r, len)) => reply.integer((len - 1 - r) as i64),
                None => reply.null(),
            },
            "zcount" | "zlexcount" => {
                let q = range.expect("parsed");
                reply.integer(z.map_or(0, |z| q.positions(z).len()) as i64)
            }
            "zscan" => {
                let scan = scan.expect("parsed");
                let keep = |m: &[u8]| scan.pattern.is_none_or(|p| glob_match(p, m));
                let mut found: Vec<(&[u8], f64)> = Vec::new();
                let mut next = 0;
                match z {
                    None => {}
                    // Whole, in score order, as Redis scans its listpacks.
                    Some(z) if z.len() <= SCANNED_WHOLE => found.extend(z.iter().filter(|(m, _)| keep(m))),
                    // Redis's cursor over the members' hashes, as SCAN's.
                    Some(z) => {
                        let mut seen = 0;
                        next = super::scan_steps(scan.cursor, scan.count, |c| {
                            let next = z.scan_step(c, |m, s| {
                                seen += 1;
                                if keep(m) {
                                    found.push((m, s));
                                }
                            });
                            (next, seen)
                        });
                    }
                }
                reply.array(2);
                reply.bulk(next.to_string().as_bytes());
                reply.array(2 * found.len());
                for (m, s) in found {
                    reply.bulk(m);
                    reply.bulk(format_score(s).as_bytes());
                }
            }
            _ => {
                let q = range.expect("a range command");
                let Some(z) = z else { return reply.array(0) };
                let members = q.select(z);
                reply.array(members.len() * if q.with_scores { 2 } else { 1 });
                for (m, s) in members {
                    reply.bulk(m);
                    if q.with_scores {
                        reply.bulk(format_score(s).as_bytes());
                    }
                }
            }
        }
    }

    /// Removes `key` from the keyspace (its expiry too) when its sorted set
    /// lost its last member.
    fn drop_if_no_zset(&mut self, key: &[u8]) {
        if self.store.zset(key).is_none() {
            self.delete(key);
        }
    }

    /// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
    fn zadd(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let mut f = ZaddFlags::default();
        let mut i = 1;
        while let Some(opt) = args.get(i) {
            let is = |s: &[u8]| opt.eq_ignore_ascii_case(s);
            if is(b"nx") {
                f.nx = true;
            } else if is(b"xx") {
                f.xx = true;
            } else if is(b"gt") {
                f.gt = true;
            } else if is(b"lt") {
                f.lt = true;
            } else if is(b"ch") {
                f.ch = true;
            } else if is(b"incr") {
                f.incr = true;
            } else {
                break;
            }
            i += 1;
        }
        let pairs = &args[i..];
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return reply.error(SYNTAX);
        }
        if f.nx && f.xx {
            return reply.error("ERR XX and NX options at the same time are not compatible");
        }
        if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
            return reply.error("ERR GT, LT, and/or NX options at the same time are not compatible");
        }
        if f.incr && pairs.len() > 2 {
            return reply.error("ERR INCR option supports a single increment-element pair");
        }
        // Every score parsed before anything changes.
        let Some(scores) = pairs.chunks(2).map(|p| parse_score(&p[0])).collect::<Option<Vec<f64>>>() else {
            return reply.error(NOT_FLOAT);
        };
        let key = &args[0][..];
        if f.incr {
            return self.zadd_one(key, &pairs[1], scores[0], f, reply);
        }
        if let Err(e) = self.zset_of(key) {
            return reply.error(e);
        }
        let members: Vec<&[u8]> = pairs.chunks(2).map(|p| &p[1][..]).collect();
        if let Err(s) = self.store.check_zset_add(key, &members) {
            return reply.error(status_error(s));
        }
        let mut counted = 0;
        for (member, score) in members.into_iter().zip(scores) {
            match self.zadd_apply(key, member, score, f) {
                Ok(Some((added, changed, _))) => counted += i64::from(added || (f.ch && changed)),
                Ok(None) => {}
                Err(e) => return reply.error(e),
            }
        }
        reply.integer(counted)
    }

    /// ZADD INCR and ZINCRBY: the new score, or nil when a flag refused.
    fn zadd_one(&mut self, key: &[u8], member: &[u8], by: f64, f: ZaddFlags, reply: &mut Reply<RcBuf>) {
        if let Err(e) = self.zset_of(key) {
            return reply.error(e);
        }
        match self.zadd_apply(key, member, by, f) {
            Err(e) => reply.error(e),
            Ok(None) => reply.null(),
            // The score computed (Redis's reply prints `-0` as such).
            Ok(Some((_, _, score))) => reply.bulk(format_signed_score(score).as_bytes()),
        }
    }

    /// Adds or updates one member as `f` says; `(added, changed, its
    /// score)`, or `None` when a flag refused. A score of `-0` is kept as
    /// `0`, as Redis's small sorted sets (listpacks) keep it.
    fn zadd_apply(
        &mut self,
        key: &[u8],
        member: &[u8],
        score: f64,
        f: ZaddFlags,
    ) -> Result<Option<(bool, bool, f64)>, &'static str> {
        let current = self.store.zset(key).and_then(|z| z.score(member));
        let new = match current {
            None if f.xx => return Ok(None),
            None => score,
            Some(_) if f.nx => return Ok(None),
            Some(old) => {
                let new = if f.incr { old + score } else { score };
                if new.is_nan() {
                    return Err("ERR resulting score is not a number (NaN)");
                }
                if (f.gt && new <= old) || (f.lt && new >= old) {
                    return Ok(None);
                }
                new
            }
        };
        if current == Some(new) {
            return Ok(Some((false, false, new)));
        }
        let stored = if new == 0.0 { 0.0 } else { new };
        self.store.zset_insert(key, member, stored).map_err(status_error)?;
        Ok(Some((current.is_none(), current.is_some(), new)))
    }
}

/// ZADD's options.
#[derive(Clone, Copy, Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What ZRANGE, ZRANGESTORE and the older forms ask for: which positions,
/// in which direction, which of them, with scores or not.
pub(super) struct RangeQuery {
    by: By,
    rev: bool,
    offset: usize,
    count: usize,
    with_scores: bool,
}

enum By {
    /// Positions, Redis's negative ones allowed (from the low end, or from
    /// the high end when reversed).
    Index(i64, i64),
    Score((f64, bool), (f64, bool)),
    Lex(Lex, Lex),
}

/// A bound of a lexicographic range: `-` and `+` (below and above every
/// member), `[member` (inclusive) or `(member` (exclusive).
#[derive(Clone, Debug, PartialEq)]
enum Lex {
    Lowest,
    Highest,
    Inclusive(Box<[u8]>),
    Exclusive(Box<[u8]>),
}

impl Lex {
    /// Parses `-`, `+`, `[member` or `(member`, as Redis's
    /// `zslParseLexRangeItem` does.
    fn parse(arg: &[u8]) -> Option<Lex> {
        match arg {
            b"-" => Some(Lex::Lowest),
            b"+" => Some(Lex::Highest),
            [b'[', rest @ ..] => Some(Lex::Inclusive(rest.into())),
            [b'(', rest @ ..] => Some(Lex::Exclusive(rest.into())),
            _ => None,
        }
    }

    /// Whether `member` is at or past this bound taken as a minimum.
    fn admits_from_below(&self, member: &[u8]) -> bool {
        match self {
            Lex::Lowest => true,
            Lex::Highest => false,
            Lex::Inclusive(v) => member >= &v[..],
            Lex::Exclusive(v) => member > &v[..],
        }
    }

    /// Whether `member` is at or before this bound taken as a maximum.
    fn admits_from_above(&self, member: &[u8]) -> bool {
        match self {
            Lex::Lowest => false,
            Lex::Highest => true,
            Lex::Inclusive(v) => member <= &v[..],
            Lex::Exclusive(v) => member < &v[..],
        }
    }
}

/// The positions of the members within `min` and `max`, in a sorted set
/// whose members all have one score (as Redis, the lexicographic commands
/// assume it; with several scores the answer is some range, as Redis's
/// is unspecified).
fn lex_range(z: &ZSet, min: &Lex, max: &Lex) -> std::ops::Range<usize> {
    let lo = z.partition_point(|m, _| !min.admits_from_below(m));
    let hi = z.partition_point(|m, _| max.admits_from_above(m));
    lo..hi.max(lo)
}

/// Which kind of range a ZRANGE-family command asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeKind {
    Rank,
    Score,
    Lex,
}

impl RangeQuery {
    /// Every member `by` covers, low to high.
    fn whole(by: By) -> RangeQuery {
        RangeQuery { by, rev: false, offset: 0, count: usize::MAX, with_scores: false }
    }

    /// Parses the arguments `key min max [options]` of `name` (ZRANGE,
    /// ZRANGESTORE without its destination, ZREVRANGE, ZRANGEBYSCORE,
    /// ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX), with Redis's checks
    /// in Redis's order.
    pub(super) fn parse(name: &str, args: &[Cow<'_, [u8]>]) -> Result<RangeQuery, &'static str> {
        let store = name == "zrangestore";
        let generic = store || name == "zrange";
        // ZRANGE and ZRANGESTORE take REV, BYSCORE and BYLEX as options;
        // the older forms have them in their names.
        let mut kind = (!generic).then(|| {
            if name.ends_with("byscore") {
                RangeKind::Score
            } else if name.ends_with("bylex") {
                RangeKind::Lex
            } else {
                RangeKind::Rank
            }
        });
        let mut rev = (!generic).then(|| name.starts_with("zrev"));
        let (mut limit, mut with_scores) = (None, false);
        let mut i = 3;
        while let Some(opt) = args.get(i) {
            let is = |s: &[u8]| opt.eq_ignore_ascii_case(s);
            if !store && is(b"withscores") {
                with_scores = true;
            } else if is(b"limit") && i + 2 < args.len() {
                let (Some(off), Some(n)) = (integer_arg(&args[i + 1]), integer_arg(&args[i + 2])) else {
                    return Err(NOT_INTEGER);
                };
                limit = Some((off, n));
                i += 2;
            } else if rev.is_none() && is(b"rev") {
                rev = Some(true);
            } else if kind.is_none() && is(b"byscore") {
                kind = Some(RangeKind::Score);
            } else if kind.is_none() && is(b"bylex") {
                kind = Some(RangeKind::Lex);
            } else {
                return Err(SYNTAX);
            }
            i += 1;
        }
        let (kind, rev) = (kind.unwrap_or(RangeKind::Rank), rev.unwrap_or(false));
        // Redis takes a count of -1 (its "no limit") as no LIMIT at all.
        if kind == RangeKind::Rank && limit.is_some_and(|(_, n)| n != -1) {
            return Err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
        }
        if kind == RangeKind::Lex && with_scores {
            return Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        }
        // Reversed, a score or lexicographic range gives the maximum first.
        let (lo, hi) = if rev && kind != RangeKind::Rank { (&args[2], &args[1]) } else { (&args[1], &args[2]) };
        let by = match kind {
            RangeKind::Rank => match (integer_arg(lo), integer_arg(hi)) {
                (Some(a), Some(b)) => By::Index(a, b),
                _ => return Err(NOT_INTEGER),
            },
            RangeKind::Score => match (parse_bound(lo), parse_bound(hi)) {
                (Some(min), Some(max)) => By::Score(min, max),
                _ => return Err(BAD_RANGE),
            },
            RangeKind::Lex => match (Lex::parse(lo), Lex::parse(hi)) {
                (Some(min), Some(max)) => By::Lex(min, max),
                _ => return Err(BAD_LEX_RANGE),
            },
        };
        let (offset, count) = match limit {
            // A negative offset selects nothing; a negative count, all.
            Some((off, _)) if off < 0 && kind != RangeKind::Rank => (0, 0),
            Some((off, n)) if kind != RangeKind::Rank => (off as usize, usize::try_from(n).unwrap_or(usize::MAX)),
            _ => (0, usize::MAX),
        };
        Ok(RangeQuery { by, rev, offset, count, with_scores })
    }

    /// The positions (in the low-to-high order) the query covers, before
    /// its LIMIT.
    fn positions(&self, z: &ZSet) -> std::ops::Range<usize> {
        match &self.by {
            &By::Score(min, max) => z.score_range(min, max),
            By::Lex(min, max) => lex_range(z, min, max),
            &By::Index(a, b) if self.rev => {
                // Positions counted from the high end.
                let r = index_range(z.len(), a, b);
                z.len() - r.end..z.len() - r.start
            }
            &By::Index(a, b) => index_range(z.len(), a, b),
        }
    }

    /// The members and scores the query selects of `z`, in the order it
    /// asks for.
    pub(super) fn select<'z>(&self, z: &'z ZSet) -> Vec<(&'z [u8], f64)> {
        let positions = self.positions(z);
        if self.rev {
            z.range(positions).rev().skip(self.offset).take(self.count).collect()
        } else {
            z.range(positions).skip(self.offset).take(self.count).collect()
        }
    }
}

/// Positions `start..=stop` of `len`, Redis's negative indexes and
/// clamping, as a range (empty when they select nothing).
fn index_range(len: usize, start: i64, stop: i64) -> std::ops::Range<usize> {
    let n = len as i64;
    let start = if start < 0 { (n + start).max(0) } else { start };
    let stop = if stop < 0 { n + stop } else { stop.min(n - 1) };
    if start > stop || start >= n {
        0..0
    } else {
        start as usize..stop as usize + 1
    }
}

/// A score argument, as Redis's `string2d` takes it: what `strtod` reads
/// whole (decimal, hexadecimal, `inf`), never NaN, nothing around it, no
/// overflow or underflow to zero.
pub(super) fn parse_score(arg: &[u8]) -> Option<f64> {
    read_in_range::<Double>(arg).map(to_f64)
}

/// A ZCOUNT / ZRANGEBYSCORE bound, as Redis's `zslParseRange` reads it: a
/// score, exclusive after `(`, what `strtod` reads to the end (spaces
/// before it allowed, overflow to infinity too; nothing at all is 0).
fn parse_bound(arg: &[u8]) -> Option<(f64, bool)> {
    // strtod stops at a NUL, and Redis's check that it read to the end
    // with it: what follows a NUL is not looked at.
    let arg = arg.split(|&b| b == 0).next().unwrap_or_default();
    let (text, exclusive) = match arg.strip_prefix(b"(") {
        Some(rest) => (rest, true),
        None => (arg, false),
    };
    if text.is_empty() {
        return Some((0.0, exclusive));
    }
    let text = std::str::from_utf8(text).ok()?.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    read_float::<Double>(text).map(|(v, _)| (to_f64(v), exclusive))
}

fn to_f64(v: Double) -> f64 {
    f64::from_bits(v.to_bits() as u64)
}

/// A score Redis computed for the reply rather than read from a small
/// sorted set: as [`format_score`], but `-0` printed as `-0`.
pub(super) fn format_signed_score(v: f64) -> String {
    if v == 0.0 && v.is_sign_negative() {
        "-0".to_owned()
    } else {
        format_score(v)
    }
}

/// A score as Redis 7.0 prints it: `inf`, `-inf`, `0` (for `-0` too), an
/// integer below 2^52 as one, else `%.17g`.
pub(super) fn format_score(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if v == 0.0 {
        // `-0` too, as redis-server 7.0 prints it.
        return "0".to_owned();
    }
    if v > -4_503_599_627_370_495.0 && v < 4_503_599_627_370_496.0 && v == (v as i64) as f64 {
        return (v as i64).to_string();
    }
    // `%.17g`: 17 significant digits, fixed or exponent form by the
    // exponent, trailing zeros dropped.
    let sci = format!("{v:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if (-4..17).contains(&exp) {
        trim(&format!("{v:.*}", (16 - exp) as usize))
    } else {
        format!("{}e{}{:02}", trim(mantissa), if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use cornflakes::Pool;
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::Limits;
    use crate::store::Store;

    fn bound() -> impl Strategy<Value = Lex> {
        let member = || proptest::collection::vec(b'a'..b'e', 0..3).prop_map(Box::from);
        prop_oneof![
            Just(Lex::Lowest),
            Just(Lex::Highest),
            member().prop_map(Lex::Inclusive),
            member().prop_map(Lex::Exclusive),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 512 }))]

        /// With one score, a lexicographic range by bisection holds exactly
        /// the members a filter of every member keeps.
        #[test]
        fn lexicographic_ranges_are_the_members_within_the_bounds(
            members in proptest::collection::btree_set(proptest::collection::vec(b'a'..b'e', 0..4), 0..24),
            min in bound(),
            max in bound(),
        ) {
            let mut store = Store::new(Pool::new().expect("pool"), Limits::default());
            for m in &members {
                store.zset_insert(b"z", m, 0.0).unwrap();
            }
            let want: Vec<&[u8]> =
                members.iter().map(|m| &m[..]).filter(|m| min.admits_from_below(m) && max.admits_from_above(m)).collect();
            let got: Vec<&[u8]> = match store.zset(b"z") {
                Some(z) => z.range(lex_range(z, &min, &max)).map(|(m, _)| m).collect(),
                None => Vec::new(),
            };
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn score_bounds_end_at_a_nul_as_strtod_reads_them() {
        assert_eq!(parse_bound(b"1\0junk"), Some((1.0, false)));
        assert_eq!(parse_bound(b"(2.5\0"), Some((2.5, true)));
        assert_eq!(parse_bound(b"x\x001"), None);
    }

    #[test]
    fn lexicographic_bounds_parse_as_redis_reads_them() {
        assert_eq!(Lex::parse(b"-"), Some(Lex::Lowest));
        assert_eq!(Lex::parse(b"+"), Some(Lex::Highest));
        assert_eq!(Lex::parse(b"[a"), Some(Lex::Inclusive(Box::from(&b"a"[..]))));
        assert_eq!(Lex::parse(b"("), Some(Lex::Exclusive(Box::default())));
        for bad in [&b""[..], b"a", b"--", b"++", b"+a"] {
            assert_eq!(Lex::parse(bad), None, "{bad:?}");
        }
    }
}

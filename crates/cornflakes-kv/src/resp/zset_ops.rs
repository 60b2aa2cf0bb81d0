//! The sorted set commands that combine or copy sorted sets: ZUNION,
//! ZINTER, ZDIFF and their STORE forms, ZINTERCARD, ZRANGESTORE, and
//! ZRANDMEMBER, with Redis 7.0's replies and errors. A set counts as a
//! sorted set whose every score is 1, as in Redis.

use std::borrow::Cow;
use std::cmp::Ordering;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use hashbrown::HashMap;

use super::zset::{format_score, format_signed_score, parse_score, RangeQuery};
use super::{integer_arg, status_error, Kind, RespDb, NOT_INTEGER, SYNTAX, WRONGTYPE};
use crate::store::{Collection, Set, ZSet};

/// How the inputs combine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// How the weighted scores of a member found in several inputs combine.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// `into` combined with `score`; a sum of `inf` and `-inf` is 0, as in
    /// Redis.
    fn add(self, into: &mut f64, score: f64) {
        *into = match self {
            Aggregate::Sum => Some(*into + score).filter(|s| !s.is_nan()).unwrap_or(0.0),
            Aggregate::Min if score < *into => score,
            Aggregate::Max if score > *into => score,
            Aggregate::Min | Aggregate::Max => *into,
        };
    }
}

/// One input: a sorted set, a set (every score 1), or nothing (a missing
/// key), with its weight.
struct Input<'s> {
    members: Members<'s>,
    weight: f64,
}

enum Members<'s> {
    Missing,
    Set(&'s Set),
    ZSet(&'s ZSet),
}

impl Input<'_> {
    fn len(&self) -> usize {
        match self.members {
            Members::Missing => 0,
            Members::Set(s) => s.len(),
            Members::ZSet(z) => z.len(),
        }
    }

    /// The unweighted score of `member`, if it is there.
    fn score(&self, member: &[u8]) -> Option<f64> {
        match self.members {
            Members::Missing => None,
            Members::Set(s) => s.contains(member).then_some(1.0),
            Members::ZSet(z) => z.score(member),
        }
    }

    /// Members and unweighted scores.
    fn iter(&self) -> impl Iterator<Item = (&[u8], f64)> + '_ {
        let (set, zset) = match self.members {
            Members::Missing => (None, None),
            Members::Set(s) => (Some(s), None),
            Members::ZSet(z) => (None, Some(z)),
        };
        set.into_iter().flat_map(|s| s.iter().map(|m| (m, 1.0))).chain(zset.into_iter().flat_map(ZSet::iter))
    }

    /// `score` times the weight; NaN (0 times infinity) is 0, as in Redis.
    fn weighted(&self, score: f64) -> f64 {
        Some(score * self.weight).filter(|s| !s.is_nan()).unwrap_or(0.0)
    }
}

/// What a combining command asked for besides its keys.
struct Options {
    aggregate: Aggregate,
    with_scores: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: usize,
}

impl RespDb {
    /// ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD, checked in
    /// Redis's order: the key count, every key's kind, then the options.
    pub(super) fn zset_combine(&mut self, name: &str, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let op = match name.trim_end_matches("store") {
            "zunion" => Op::Union,
            "zinter" | "zintercard" => Op::Inter,
            _ => Op::Diff,
        };
        let (dest, rest) = if name.ends_with("store") { (Some(&args[0][..]), &args[1..]) } else { (None, args) };
        let count_only = name == "zintercard";
        let numkeys = match integer_arg(&rest[0]) {
            None => return reply.error(NOT_INTEGER),
            Some(n) if n < 1 => {
                return reply.error(&format!("ERR at least 1 input key is needed for '{name}' command"))
            }
            Some(n) => n as u64,
        };
        if numkeys > (rest.len() - 1) as u64 {
            return reply.error(SYNTAX);
        }
        let (keys, mut opts) = rest[1..].split_at(numkeys as usize);
        for key in keys {
            if matches!(self.kind(key), Some(Kind::String | Kind::List | Kind::Hash)) {
                return reply.error(WRONGTYPE);
            }
        }
        let mut weights = vec![1.0; keys.len()];
        let mut o = Options { aggregate: Aggregate::Sum, with_scores: false, limit: 0 };
        let weighs = op != Op::Diff && !count_only;
        while let Some(opt) = opts.first() {
            let is = |s: &[u8]| opt.eq_ignore_ascii_case(s);
            if weighs && opts.len() > keys.len() && is(b"weights") {
                for (w, arg) in weights.iter_mut().zip(&opts[1..]) {
                    match parse_score(arg) {
                        Some(v) => *w = v,
                        None => return reply.error("ERR weight value is not a float"),
                    }
                }
                opts = &opts[1 + keys.len()..];
            } else if weighs && opts.len() >= 2 && is(b"aggregate") {
                let how = &opts[1];
                o.aggregate = if how.eq_ignore_ascii_case(b"sum") {
                    Aggregate::Sum
                } else if how.eq_ignore_ascii_case(b"min") {
                    Aggregate::Min
                } else if how.eq_ignore_ascii_case(b"max") {
                    Aggregate::Max
                } else {
                    return reply.error(SYNTAX);
                };
                opts = &opts[2..];
            } else if dest.is_none() && !count_only && is(b"withscores") {
                o.with_scores = true;
                opts = &opts[1..];
            } else if count_only && opts.len() >= 2 && is(b"limit") {
                match integer_arg(&opts[1]) {
                    Some(n) if n >= 0 => o.limit = n as usize,
                    _ => return reply.error("ERR LIMIT can't be negative"),
                }
                opts = &opts[2..];
            } else {
                return reply.error(SYNTAX);
            }
        }
        let inputs: Vec<Input<'_>> = keys
            .iter()
            .zip(weights)
            .map(|(key, weight)| {
                let members = match self.store.collection(key) {
                    Some(Collection::Set(s)) => Members::Set(s),
                    Some(Collection::ZSet(z)) => Members::ZSet(z),
                    _ => Members::Missing,
                };
                Input { members, weight }
            })
            .collect();
        if count_only {
            return reply.integer(intersection_count(inputs, o.limit) as i64);
        }
        let result = combine(op, inputs, o.aggregate);
        match dest {
            Some(dest) => match self.replace_zset(dest, &result) {
                Ok(n) => reply.integer(n as i64),
                Err(e) => reply.error(e),
            },
            None => reply_members(reply, &result, o.with_scores),
        }
    }

    /// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset
    /// count]`: the members ZRANGE would list replace `dst`.
    pub(super) fn zrangestore(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let query = match RangeQuery::parse("zrangestore", &args[1..]) {
            Ok(q) => q,
            Err(e) => return reply.error(e),
        };
        let selected: Vec<(Box<[u8]>, f64)> = match self.zset_of(&args[1]) {
            Err(e) => return reply.error(e),
            Ok(z) => {
                z.map(|z| query.select(z).into_iter().map(|(m, s)| (Box::from(m), s)).collect()).unwrap_or_default()
            }
        };
        match self.replace_zset(&args[0], &selected) {
            Ok(n) => reply.integer(n as i64),
            Err(e) => reply.error(e),
        }
    }

    /// `ZRANDMEMBER key [count [WITHSCORES]]`.
    pub(super) fn zrandmember(&mut self, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let (count, with_scores) = match super::set::random_count_args(args, Some(b"withscores")) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let z = match self.zset_of(&args[0]) {
            Err(e) => return reply.error(e),
            Ok(z) => z,
        };
        let put = |reply: &mut Reply<RcBuf>, i: usize| {
            let Some((member, score)) = z.and_then(|z| z.get_index(i)) else { return };
            reply.bulk(member);
            if with_scores {
                reply.bulk(format_score(score).as_bytes());
            }
        };
        let len = z.map_or(0, ZSet::len);
        super::set::reply_random_picks(reply, len, count, if with_scores { 2 } else { 1 }, put);
    }

    /// Makes `members` the sorted set at `dest` (any value there replaced,
    /// its expiry dropped; nothing left at `dest` when `members` is empty);
    /// how many.
    fn replace_zset(&mut self, dest: &[u8], members: &[(Box<[u8]>, f64)]) -> Result<usize, &'static str> {
        let names: Vec<&[u8]> = members.iter().map(|(m, _)| &m[..]).collect();
        if !names.is_empty() {
            // Every member checked before the old value goes.
            self.store.check_zset_add(dest, &names).map_err(status_error)?;
        }
        self.delete(dest);
        for (member, score) in members {
            // `-0` kept as `0`, as a small sorted set keeps it.
            let score = if *score == 0.0 { 0.0 } else { *score };
            self.store.zset_insert(dest, member, score).map_err(status_error)?;
        }
        Ok(members.len())
    }
}

/// The members and scores `op` makes of `inputs`, in a sorted set's order
/// (by score, then member).
fn combine(op: Op, mut inputs: Vec<Input<'_>>, aggregate: Aggregate) -> Vec<(Box<[u8]>, f64)> {
    let mut out: Vec<(Box<[u8]>, f64)> = match op {
        Op::Union => {
            // Smallest first, as Redis adds them (sums of floats depend on
            // the order).
            inputs.sort_by_key(Input::len);
            let mut acc: HashMap<&[u8], f64> = HashMap::new();
            for input in &inputs {
                for (member, score) in input.iter() {
                    let score = input.weighted(score);
                    acc.entry(member).and_modify(|s| aggregate.add(s, score)).or_insert(score);
                }
            }
            acc.into_iter().map(|(m, s)| (Box::from(m), s)).collect()
        }
        Op::Inter => {
            inputs.sort_by_key(Input::len);
            let (first, rest) = inputs.split_first().expect("one key at least");
            first
                .iter()
                .filter_map(|(member, score)| {
                    // NaN (0 times infinity) is 0 for the first input only;
                    // after it the aggregate meets it (a sum becomes 0,
                    // MIN and MAX keep what they had), as in Redis.
                    let mut total = first.weighted(score);
                    for input in rest {
                        aggregate.add(&mut total, input.score(member)? * input.weight);
                    }
                    Some((Box::from(member), total))
                })
                .collect()
        }
        Op::Diff => {
            let (first, rest) = inputs.split_first().expect("one key at least");
            first
                .iter()
                .filter(|(member, _)| rest.iter().all(|input| input.score(member).is_none()))
                .map(|(member, score)| (Box::from(member), score))
                .collect()
        }
    };
    // Scores are never NaN; -0 and 0 are one score, as in a sorted set.
    out.sort_by(|(m1, s1), (m2, s2)| s1.partial_cmp(s2).unwrap_or(Ordering::Equal).then_with(|| m1.cmp(m2)));
    out
}

/// How many members all `inputs` share, counting up to `limit` (0: all).
fn intersection_count(mut inputs: Vec<Input<'_>>, limit: usize) -> usize {
    inputs.sort_by_key(Input::len);
    let (first, rest) = inputs.split_first().expect("one key at least");
    let shared = first.iter().filter(|(member, _)| rest.iter().all(|input| input.score(member).is_some()));
    if limit == 0 {
        shared.count()
    } else {
        shared.take(limit).count()
    }
}

/// ZUNION's, ZINTER's and ZDIFF's reply: the members, each followed by its
/// score when asked (computed scores: `-0` printed as such, as Redis does).
fn reply_members(reply: &mut Reply<RcBuf>, members: &[(Box<[u8]>, f64)], with_scores: bool) {
    reply.array(members.len() * if with_scores { 2 } else { 1 });
    for (member, score) in members {
        reply.bulk(member);
        if with_scores {
            reply.bulk(format_signed_score(*score).as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_opposite_infinities_and_zero_weights_of_infinities_are_zero() {
        let mut s = f64::INFINITY;
        Aggregate::Sum.add(&mut s, f64::NEG_INFINITY);
        assert_eq!(s, 0.0);
        let z = ZSet::default();
        let input = Input { members: Members::ZSet(&z), weight: 0.0 };
        assert_eq!(input.weighted(f64::INFINITY), 0.0);
        assert_eq!(input.weighted(2.5), 0.0);
        let mut m = 3.0;
        Aggregate::Min.add(&mut m, 1.0);
        Aggregate::Max.add(&mut m, 0.5);
        assert_eq!(m, 1.0);
    }
}

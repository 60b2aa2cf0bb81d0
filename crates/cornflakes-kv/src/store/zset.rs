//! Sorted sets (RESP's ZADD ...): members with scores, ordered by score
//! and then by member, with ranks and positions in O(log n) (an
//! order-statistic B-tree, `indexset`), as Redis's skip list gives them.

use std::cmp::Ordering;

use super::key_map::KeyMap;
use super::{Collection, Store};
use crate::protocol::Status;

/// A member at its place in the order: by score (`-0` equal to `0`, as in
/// Redis; scores are never NaN), then by member bytes.
#[derive(Clone, Debug)]
struct Entry {
    score: f64,
    member: Box<[u8]>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then_with(|| self.member.cmp(&other.member))
    }
}

/// The members of a sorted set with their scores.
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    scores: KeyMap<f64>,
    order: indexset::BTreeSet<Entry>,
}

impl ZSet {
    /// Number of members (never 0 for a stored key).
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// One step of a scan of the members (ZSCAN's, Redis's cursor: see
    /// [`Store::scan_step`]): calls `f` with some members and their
    /// scores; the next cursor, 0 at the end.
    pub fn scan_step<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], f64)) -> u64 {
        self.scores.scan_step(cursor, |m, &s| f(m, s))
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// The position of `member` in the order (0: the lowest score).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.order.rank(&Entry { score, member: member.into() }))
    }

    /// The member at position `i` and its score.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], f64)> {
        self.order.get_index(i).map(|e| (&e.member[..], e.score))
    }

    /// The members at positions `range` (within `0..len()`), in order.
    pub fn range(&self, range: std::ops::Range<usize>) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        let empty = range.is_empty();
        // `range_idx` takes an inclusive end; an empty range reads nothing.
        let end = range.end.saturating_sub(1);
        self.order.range_idx(range.start..=end).filter(move |_| !empty).map(|e| (&e.member[..], e.score))
    }

    /// How many members score less than `score`.
    pub fn count_below(&self, score: f64) -> usize {
        self.order.rank(&Entry { score, member: Box::default() })
    }

    /// The positions of the members whose score is within `min` and `max`
    /// (each exclusive when its flag says so).
    pub fn score_range(&self, (min, min_excl): (f64, bool), (max, max_excl): (f64, bool)) -> std::ops::Range<usize> {
        let len = self.len();
        let above = |s: f64| if s == f64::INFINITY { len } else { self.count_below(s.next_up()) };
        let lo = if min_excl { above(min) } else { self.count_below(min) };
        let hi = if max_excl { self.count_below(max) } else { above(max) };
        lo..hi.max(lo)
    }

    /// The number of positions, from the lowest, whose member and score
    /// `below` holds for (`below` must hold for a prefix of the order and
    /// for nothing after it), found by bisection: O(log² n).
    pub fn partition_point(&self, mut below: impl FnMut(&[u8], f64) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.order.get_index(mid) {
                Some(e) if below(&e.member, e.score) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// The members and scores, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.order.iter().map(|e| (&e.member[..], e.score))
    }

    /// Bytes of members (and 8 a score).
    pub(super) fn bytes(&self) -> usize {
        self.scores.keys().map(|m| m.len() + 8).sum()
    }
}

impl Store {
    /// The sorted set value of `key`; `None` when it is missing or of
    /// another kind.
    #[inline]
    pub fn zset(&self, key: &[u8]) -> Option<&ZSet> {
        match self.collection(key)? {
            Collection::ZSet(z) => Some(z),
            _ => None,
        }
    }

    /// Whether `members` may be added to a sorted set at `key` (members as
    /// long as keys may be).
    pub fn check_zset_add(&self, key: &[u8], members: &[&[u8]]) -> Result<(), Status> {
        self.check_set_add(key, members)
    }

    /// Sets the score of `member` in the sorted set value of `key`,
    /// creating it (a value of another kind at `key` is replaced: the
    /// caller checks kinds); the score it had.
    pub fn zset_insert(&mut self, key: &[u8], member: &[u8], score: f64) -> Result<Option<f64>, Status> {
        debug_assert!(!score.is_nan(), "scores are never NaN");
        self.check_set_add(key, &[member])?;
        let Collection::ZSet(z) =
            self.collection_mut(key, |c| matches!(c, Collection::ZSet(_)), || Collection::ZSet(ZSet::default()))
        else {
            unreachable!("made a sorted set")
        };
        let old = z.scores.insert(member.into(), score);
        if let Some(old) = old {
            z.order.remove(&Entry { score: old, member: member.into() });
        }
        z.order.insert(Entry { score, member: member.into() });
        self.writes += 1;
        if old.is_none() {
            self.value_bytes += member.len() + 8;
        }
        Ok(old)
    }

    /// Removes `member` from the sorted set value of `key`, and the key
    /// with its last member; the score it had.
    pub fn zset_remove(&mut self, key: &[u8], member: &[u8]) -> Option<f64> {
        let Some(Collection::ZSet(z)) = self.collections.get_mut(key) else { return None };
        let score = z.scores.remove(member)?;
        z.order.remove(&Entry { score, member: member.into() });
        let empty = z.is_empty();
        self.writes += 1;
        self.value_bytes -= member.len() + 8;
        if empty {
            self.remove_collection(key);
        }
        Some(score)
    }
}

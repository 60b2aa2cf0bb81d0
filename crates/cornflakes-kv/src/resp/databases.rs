//! Redis's numbered databases (`SELECT n`, 16 of them): each its own
//! keyspace (keys, list marks, expiry times, watches) over the one pinned
//! pool. The database a command runs in is swapped into the fields every
//! command uses ([`RespDb::use_db`], O(1)), so commands are written once,
//! for one keyspace; the others wait in [`RespDb`]'s `parked`.

use std::borrow::Cow;

use cornflakes::RcBuf;
use cornflakes_resp::Reply;
use hashbrown::HashSet;

use super::{expiry::Expiry, integer_arg, watch::Watchers, RespDb, NOT_INTEGER, SYNTAX};
use crate::store::Store;

/// Redis's default `databases`.
pub const DATABASES: usize = 16;

/// One database's keys and what is kept about them.
pub(super) struct Keyspace {
    pub(super) store: Store,
    pub(super) lists: HashSet<Box<[u8]>>,
    pub(super) expires: Expiry,
    pub(super) watchers: Watchers,
}

impl Keyspace {
    /// An empty database over `like`'s pool and limits, tracking accesses
    /// when `like` does.
    pub(super) fn empty_like(like: &Store) -> Keyspace {
        let mut store = Store::new(like.pool().clone(), *like.limits());
        store.track_accesses(like.key_index().is_some());
        Keyspace { store, lists: HashSet::new(), expires: Expiry::default(), watchers: Watchers::default() }
    }
}

impl RespDb {
    /// Makes database `n` (below [`DATABASES`]) the one the keyspace fields
    /// hold: the current one is parked in its slot and `n` taken out of
    /// its own.
    pub(super) fn use_db(&mut self, n: usize) {
        if n == self.db {
            return;
        }
        self.swap_with_slot(self.db);
        self.swap_with_slot(n);
        self.db = n;
    }

    /// Swaps the keyspace fields with parked slot `i`.
    fn swap_with_slot(&mut self, i: usize) {
        let slot = &mut self.parked[i];
        std::mem::swap(&mut self.store, &mut slot.store);
        std::mem::swap(&mut self.lists, &mut slot.lists);
        std::mem::swap(&mut self.expires, &mut slot.expires);
        std::mem::swap(&mut self.watchers, &mut slot.watchers);
    }

    /// Runs `f` on each database with keys or watches, in turn as the
    /// current one, then makes the database that was current current again.
    pub(super) fn for_each_db(&mut self, mut f: impl FnMut(&mut RespDb)) {
        let back = self.db;
        for n in 0..DATABASES {
            let busy = if n == self.db {
                !self.store.is_empty() || !self.watchers.is_empty()
            } else {
                !self.parked[n].store.is_empty() || !self.parked[n].watchers.is_empty()
            };
            if busy {
                self.use_db(n);
                f(self);
            }
        }
        self.use_db(back);
    }

    /// Bytes of keys and values in every database (what `maxmemory`
    /// bounds, as Redis's is one limit for all).
    pub(super) fn used_bytes(&self) -> usize {
        let parked: usize =
            self.parked.iter().enumerate().filter(|&(i, _)| i != self.db).map(|(_, k)| k.store.data_bytes()).sum();
        self.store.data_bytes() + parked
    }

    /// Database `n`'s key count and keys with an expiry time.
    pub(super) fn db_counts(&self, n: usize) -> (usize, usize) {
        if n == self.db {
            (self.store.len(), self.expires.len())
        } else {
            (self.parked[n].store.len(), self.parked[n].expires.len())
        }
    }

    /// `SWAPDB a b`: the two databases trade keyspaces; connections
    /// watching keys in either will abort their EXEC, as in Redis.
    pub(super) fn swap_dbs(&mut self, a: usize, b: usize) {
        self.candidates.clear();
        let back = self.db;
        // Park the current one, so that both live in `parked`.
        self.swap_with_slot(self.db);
        self.db = usize::MAX;
        // A watched key that exists in either database changed.
        for (x, y) in [(a, b), (b, a)] {
            let (one, other) = if x < y {
                let (lo, hi) = self.parked.split_at_mut(y);
                (&mut lo[x], &hi[0])
            } else if x > y {
                let (lo, hi) = self.parked.split_at_mut(x);
                (&mut hi[0], &lo[y])
            } else {
                break;
            };
            let exists = |s: &Store, k: &[u8]| s.get(k).is_some() || s.collection(k).is_some();
            one.watchers.touched_where(|k| exists(&one.store, k) || exists(&other.store, k));
        }
        self.parked.swap(a, b);
        self.swap_with_slot(back);
        self.db = back;
    }

    /// `MOVE key db` and `COPY source destination [DB db] [REPLACE]`:
    /// the value goes (or is shared) with its expiry time and list mark,
    /// checked in Redis's order.
    pub(super) fn move_or_copy(&mut self, copy: bool, args: &[Cow<'_, [u8]>], reply: &mut Reply<RcBuf>) {
        let here = self.db;
        let (src, dst, mut target, mut replace) = if copy {
            (&args[0][..], &args[1][..], here, false)
        } else {
            let Some(n) = integer_arg(&args[1]) else { return reply.error(NOT_INTEGER) };
            let Some(n) = usize::try_from(n).ok().filter(|&n| n < DATABASES) else {
                return reply.error("ERR DB index is out of range");
            };
            (&args[0][..], &args[0][..], n, false)
        };
        if copy {
            let mut opts = args[2..].iter();
            while let Some(opt) = opts.next() {
                if opt.eq_ignore_ascii_case(b"replace") {
                    replace = true;
                } else if let (true, Some(n)) = (opt.eq_ignore_ascii_case(b"db"), opts.next()) {
                    match integer_arg(n) {
                        None => return reply.error(NOT_INTEGER),
                        Some(n) if (0..DATABASES as i64).contains(&n) => target = n as usize,
                        Some(_) => return reply.error("ERR DB index is out of range"),
                    }
                } else {
                    return reply.error(SYNTAX);
                }
            }
        }
        if target == here && src == dst {
            return reply.error("ERR source and destination objects are the same");
        }
        if self.kind(src).is_none() {
            return reply.integer(0);
        }
        let ttl = self.expires.get(src).copied();
        let list = self.lists.contains(src);
        let entry = if copy { self.store.entry(src) } else { None };
        self.use_db(target);
        let exists = self.kind(dst).is_some();
        if exists && !(copy && replace) {
            self.use_db(here);
            return reply.integer(0);
        }
        let entry = match entry {
            Some(e) => e,
            None => {
                // MOVE: take it out of the source now that it can go.
                self.use_db(here);
                let e = self.store.take(src);
                self.expires.remove(src);
                self.lists.remove(src);
                self.watchers.touched(src);
                self.use_db(target);
                let Some(e) = e else { return reply.integer(0) };
                e
            }
        };
        self.delete(dst);
        self.store.put_entry(dst, entry);
        if let Some(at) = ttl {
            self.expires.insert(dst.into(), at);
        }
        if list {
            self.lists.insert(dst.into());
        }
        self.watchers.touched(dst);
        self.use_db(here);
        reply.integer(1)
    }
}

//! WATCH: optimistic transactions. A connection's watch is a flag that any
//! change to a watched key sets (a write that changed it, its expiry,
//! eviction, FLUSHALL); EXEC then answers a null array and runs nothing,
//! as in Redis.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use hashbrown::HashMap;

/// The watched keys, each with the flags of the connections watching it.
/// A connection that goes away leaves a dead flag, dropped the next time
/// its key changes or when dead ones may have piled up.
#[derive(Debug, Default)]
pub(super) struct Watchers {
    by_key: HashMap<Box<[u8]>, Vec<Weak<AtomicBool>>>,
    /// Flags held, live or dead, and as many at the last sweep.
    entries: usize,
    swept_at: usize,
}

impl Watchers {
    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Flags held (live or dead).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries
    }

    /// Sets `flag` when `key` changes.
    pub(super) fn watch(&mut self, key: &[u8], flag: &Arc<AtomicBool>) {
        let flags = self.by_key.entry_ref(key).or_default();
        // A connection watching a key again adds nothing.
        if flags.iter().any(|f| std::ptr::eq(f.as_ptr(), Arc::as_ptr(flag))) {
            return;
        }
        flags.push(Arc::downgrade(flag));
        self.entries += 1;
        // Amortized O(1): sweep once the flags have doubled since the last
        // sweep, so dead ones never outnumber the live by much.
        if self.entries > 2 * self.swept_at + 1024 {
            self.by_key.retain(|_, flags| {
                flags.retain(|f| f.strong_count() > 0);
                !flags.is_empty()
            });
            self.entries = self.by_key.values().map(Vec::len).sum();
            self.swept_at = self.entries;
        }
    }

    /// `key` changed: every connection watching it will abort its EXEC.
    pub(super) fn touched(&mut self, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        if let Some(flags) = self.by_key.remove(key) {
            self.entries -= flags.len();
            for f in flags.iter().filter_map(Weak::upgrade) {
                f.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The watched keys `changed` says changed (FLUSHALL, SWAPDB: those
    /// that existed, as Redis 7.0 signals).
    pub(super) fn touched_where(&mut self, mut changed: impl FnMut(&[u8]) -> bool) {
        let keys: Vec<Box<[u8]>> = self.by_key.keys().filter(|k| changed(k)).cloned().collect();
        for key in keys {
            self.touched(&key);
        }
    }
}

/// The keys a write command `name` may change, of its arguments `args`
/// (Redis's key specs for the commands here).
pub(super) fn written_keys<'c>(name: &str, args: &'c [std::borrow::Cow<'_, [u8]>]) -> Vec<&'c [u8]> {
    let all = |step: usize| args.iter().step_by(step).map(|a| &a[..]).collect();
    match name {
        "mset" | "msetnx" => all(2),
        "del" | "unlink" => all(1),
        "rename" | "renamenx" | "smove" | "lmove" | "rpoplpush" => args.iter().take(2).map(|a| &a[..]).collect(),
        "blmove" | "brpoplpush" => args.iter().take(2).map(|a| &a[..]).collect(),
        // Every key but the timeout.
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" => {
            args[..args.len().saturating_sub(1)].iter().map(|a| &a[..]).collect()
        }
        // numkeys, then the keys (BLMPOP: after the timeout).
        "lmpop" | "blmpop" | "zmpop" | "bzmpop" => {
            let at = usize::from(name.starts_with('b'));
            let n = args.get(at).and_then(|n| super::integer_arg(n)).and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
            args.iter().skip(at + 1).take(n).map(|a| &a[..]).collect()
        }
        _ => args.first().map(|a| vec![&a[..]]).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // a hundred thousand watches: minutes under Miri, and nothing unsafe in them
    fn flags_of_connections_that_went_away_do_not_pile_up() {
        let mut w = Watchers::default();
        let live = Arc::new(AtomicBool::new(false));
        w.watch(b"kept", &live);
        for i in 0..100_000u32 {
            // A connection that watches a key nobody changes, then goes.
            let gone = Arc::new(AtomicBool::new(false));
            w.watch(&i.to_le_bytes(), &gone);
        }
        assert!(w.entries < 3000, "{} flags held for 1 live watch", w.entries);
        assert_eq!(w.by_key.len(), w.entries);
        w.touched(b"kept");
        assert!(live.load(Ordering::Relaxed), "the live watch survived the sweeps");
    }
}

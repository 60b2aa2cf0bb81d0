//! Eviction under `maxmemory` (Redis's `maxmemory-policy`): before a
//! command runs while keys and values take more than the limit, keys are
//! removed by the policy until they fit; only when nothing can go does a
//! command that may add data get the `OOM` error, as in Redis.
//!
//! The LRU and LFU policies pick the best of `maxmemory-samples` keys
//! drawn at random (5 by default), as Redis approximates them (without its
//! pool of 16 candidates kept between evictions); LFU is Redis's
//! logarithmic counter, decayed a step a minute. `volatile-ttl` takes the
//! key whose time is up soonest, exactly.

use super::{RespDb, DATABASES};

/// What is evicted once `maxmemory` is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Nothing: commands that may add data get `OOM` (Redis's default).
    #[default]
    NoEviction,
    /// The least recently used key.
    AllKeysLru,
    /// The least frequently used key.
    AllKeysLfu,
    /// Any key.
    AllKeysRandom,
    /// The least recently used of the keys with an expiry time.
    VolatileLru,
    /// The least frequently used of the keys with an expiry time.
    VolatileLfu,
    /// Any key with an expiry time.
    VolatileRandom,
    /// The key with an expiry time that is up soonest.
    VolatileTtl,
}

impl EvictionPolicy {
    /// Every policy, as Redis names them.
    pub const ALL: [EvictionPolicy; 8] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
    ];

    /// Redis's name (`allkeys-lru`, ...).
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy Redis calls `name` (any case).
    ///
    /// ```
    /// use cornflakes_kv::resp::EvictionPolicy;
    ///
    /// assert_eq!(EvictionPolicy::from_name(b"ALLKEYS-LRU"), Some(EvictionPolicy::AllKeysLru));
    /// assert_eq!(EvictionPolicy::from_name(b"lru"), None);
    /// ```
    pub fn from_name(name: &[u8]) -> Option<EvictionPolicy> {
        EvictionPolicy::ALL.into_iter().find(|p| p.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// Whether it reads keys' accesses (the store then keeps them).
    fn needs_accesses(self) -> bool {
        !matches!(self, EvictionPolicy::NoEviction | EvictionPolicy::VolatileRandom | EvictionPolicy::VolatileTtl)
    }
}

impl std::str::FromStr for EvictionPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        EvictionPolicy::from_name(s.as_bytes()).ok_or_else(|| {
            let names: Vec<&str> = EvictionPolicy::ALL.iter().map(|p| p.name()).collect();
            format!("unknown maxmemory policy {s:?}; one of {}", names.join(", "))
        })
    }
}

impl std::fmt::Display for EvictionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Keys one command may evict before it runs (Redis bounds the time
/// instead): a limit lowered far below the data takes a few commands to
/// reach, while each stays short.
const MAX_EVICTIONS_PER_COMMAND: usize = 4096;

/// How far [`RespDb::evict`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Eviction {
    /// Keys and values fit `maxmemory`.
    Fits,
    /// Over still, after the per-command bound: the command runs, the next
    /// ones evict more (Redis's `EVICT_RUNNING`).
    Running,
    /// Over, and nothing the policy may evict is left: writes get `OOM`.
    Failed,
}

/// Redis's `maxmemory-samples` range.
pub(super) const SAMPLES: std::ops::RangeInclusive<usize> = 1..=i32::MAX as usize;

/// Keys drawn per eviction at most, whatever `maxmemory-samples` says (a
/// larger sample draws keys already drawn).
const MAX_SAMPLES: usize = 1024;

impl RespDb {
    /// Sets what is evicted once `maxmemory` is reached (Redis's
    /// `maxmemory-policy`; `CONFIG SET maxmemory-policy` too). The LRU and
    /// LFU policies keep every key's accesses while they are set.
    pub fn set_maxmemory_policy(&mut self, policy: EvictionPolicy) {
        self.policy = policy;
        self.candidates.clear();
        self.store.track_accesses(policy.needs_accesses());
        for parked in &mut self.parked {
            parked.store.track_accesses(policy.needs_accesses());
        }
    }

    /// The eviction policy.
    pub fn maxmemory_policy(&self) -> EvictionPolicy {
        self.policy
    }

    /// Evicts keys by the policy until keys and values fit `maxmemory`, at
    /// most [`MAX_EVICTIONS_PER_COMMAND`] of them. Each victim is the best
    /// of the databases' own (for the random policies: a database drawn by
    /// its share of the keys, then a key in it).
    pub(super) fn evict(&mut self) -> Eviction {
        let back = self.db;
        let mut result = Eviction::Running;
        for _ in 0..MAX_EVICTIONS_PER_COMMAND {
            if self.used_bytes() <= self.maxmemory {
                result = Eviction::Fits;
                break;
            }
            let Some((n, victim)) = self.victim() else {
                result = Eviction::Failed;
                break;
            };
            self.use_db(n);
            self.delete(&victim);
            self.watchers.touched(&victim);
            self.counters.evicted_keys += 1;
        }
        self.use_db(back);
        if result == Eviction::Running && self.used_bytes() <= self.maxmemory {
            result = Eviction::Fits;
        }
        result
    }

    /// The database and key the policy evicts next.
    fn victim(&mut self) -> Option<(usize, Box<[u8]>)> {
        let volatile = matches!(
            self.policy,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        );
        // Candidates per database: keys, or keys with an expiry time.
        let weights: Vec<usize> = (0..DATABASES)
            .map(|n| {
                let (keys, expiring) = self.db_counts(n);
                if volatile {
                    expiring
                } else {
                    keys
                }
            })
            .collect();
        let total: usize = weights.iter().sum();
        if total == 0 || self.policy == EvictionPolicy::NoEviction {
            return None;
        }
        if matches!(self.policy, EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom) {
            let mut pick = fastrand::usize(..total);
            let n = weights.iter().position(|&w| {
                let here = pick < w;
                pick = pick.saturating_sub(w);
                here
            })?;
            self.use_db(n);
            let key =
                if volatile { self.expires.random_key() } else { self.store.key_index()?.random().map(|(k, _)| k) };
            return key.map(|k| (n, k.into()));
        }
        if self.policy == EvictionPolicy::VolatileTtl {
            // Exact: the soonest of each database's soonest.
            let mut best: Option<(std::time::Instant, usize, Box<[u8]>)> = None;
            for n in (0..DATABASES).filter(|&n| weights[n] > 0) {
                self.use_db(n);
                if let Some((key, &at)) = self.expires.soonest().and_then(|k| Some((k, self.expires.get(k)?))) {
                    if best.as_ref().is_none_or(|(b, ..)| at < *b) {
                        best = Some((at, n, key.into()));
                    }
                }
            }
            return best.map(|(_, n, key)| (n, key));
        }
        // LRU and LFU: fresh samples from every database join the best
        // candidates kept from before (Redis's eviction pool); the best
        // one still there, and not used since it was ranked, goes.
        for n in (0..DATABASES).filter(|&n| weights[n] > 0) {
            self.use_db(n);
            let drawn: Vec<(Rank, Box<[u8]>)> = (0..self.samples.min(MAX_SAMPLES))
                .filter_map(|_| {
                    let key =
                        if volatile { self.expires.random_key() } else { Some(self.store.key_index()?.random()?.0) };
                    key.and_then(|k| Some((self.rank_of(k)?, k.into())))
                })
                .collect();
            for (rank, key) in drawn {
                self.candidates.offer(rank, n, key);
            }
        }
        while let Some((rank, n, key)) = self.candidates.pop() {
            self.use_db(n);
            if self.rank_of(&key) == Some(rank) {
                return Some((n, key));
            }
        }
        None
    }

    /// The rank of `key` in the current database under an LRU or LFU
    /// policy (lowest goes first; comparable across databases); `None`
    /// when it is gone, or, for a volatile policy, has no expiry time.
    fn rank_of(&self, key: &[u8]) -> Option<Rank> {
        let volatile = matches!(self.policy, EvictionPolicy::VolatileLru | EvictionPolicy::VolatileLfu);
        if volatile && self.expires.get(key).is_none() {
            return None;
        }
        let a = self.store.key_index()?.get(key)?;
        match self.policy {
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => Some((u64::from(a.frequency), a.last)),
            _ => Some((a.last, 0)),
        }
    }
}

/// Redis's eviction pool: the best candidates drawn so far (at most 16),
/// kept between evictions, so that each eviction weighs many more keys
/// than one sample holds.
#[derive(Debug, Default)]
pub(super) struct Candidates(Vec<(Rank, usize, Box<[u8]>)>);

/// Where a key stands for eviction (lowest goes first): LRU `(last, 0)`,
/// LFU `(frequency, last)`.
type Rank = (u64, u64);

/// Candidates kept (Redis's `EVPOOL_SIZE`).
const POOL: usize = 16;

impl Candidates {
    fn offer(&mut self, rank: Rank, db: usize, key: Box<[u8]>) {
        if self.0.iter().any(|(_, d, k)| *d == db && *k == key) {
            return;
        }
        if self.0.len() == POOL && self.0.last().is_some_and(|(worst, ..)| rank >= *worst) {
            return;
        }
        let at = self.0.partition_point(|(r, ..)| *r <= rank);
        self.0.insert(at, (rank, db, key));
        self.0.truncate(POOL);
    }

    fn pop(&mut self) -> Option<(Rank, usize, Box<[u8]>)> {
        (!self.0.is_empty()).then(|| self.0.remove(0))
    }

    /// Forgets every candidate (the policy or the databases changed).
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

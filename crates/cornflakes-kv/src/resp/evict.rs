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
        let mut best: Option<(Ranked, usize)> = None;
        for n in (0..DATABASES).filter(|&n| weights[n] > 0) {
            self.use_db(n);
            if let Some(candidate) = self.ranked_victim() {
                if best.as_ref().is_none_or(|(b, _)| candidate.0 < b.0) {
                    best = Some((candidate, n));
                }
            }
        }
        best.map(|((_, key), n)| (n, key))
    }

    /// The current database's candidate for an LRU, LFU or TTL policy,
    /// with its rank (lowest goes first; comparable across databases).
    fn ranked_victim(&self) -> Option<Ranked> {
        let index = self.store.key_index();
        let expires = &self.expires;
        let lru = |k: &[u8]| index?.get(k).map(|a| (a.last, 0));
        let lfu = |k: &[u8]| index?.get(k).map(|a| (u64::from(a.frequency), a.last));
        let any_key = || index?.random().map(|(k, _)| k);
        let volatile_key = || expires.random_key();
        let n = self.samples.min(MAX_SAMPLES);
        match self.policy {
            EvictionPolicy::VolatileTtl => {
                let key = expires.soonest()?;
                let at = expires.get(key)?.saturating_duration_since(self.started);
                Some(((at.as_nanos() as u64, 0), key.into()))
            }
            EvictionPolicy::AllKeysLru => best_of(n, any_key, lru),
            EvictionPolicy::AllKeysLfu => best_of(n, any_key, lfu),
            EvictionPolicy::VolatileLru => best_of(n, volatile_key, lru),
            EvictionPolicy::VolatileLfu => best_of(n, volatile_key, lfu),
            EvictionPolicy::NoEviction | EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom => None,
        }
    }
}

/// A candidate key with its rank: the lowest goes first.
type Ranked = ((u64, u64), Box<[u8]>);

/// Of `samples` keys drawn by `draw`, the one `rank` puts first (least
/// recently or least frequently used), with its rank.
fn best_of<'k>(
    samples: usize,
    draw: impl Fn() -> Option<&'k [u8]>,
    rank: impl Fn(&[u8]) -> Option<(u64, u64)>,
) -> Option<Ranked> {
    (0..samples).filter_map(|_| draw()).filter_map(|k| Some((rank(k)?, k))).min().map(|(r, k)| (r, k.into()))
}

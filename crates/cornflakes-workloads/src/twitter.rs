//! Twitter cache trace, cluster 4 (Yang et al., OSDI 2020; paper §6.1.4,
//! Fig. 7, 8, 12), synthesized from its published statistics because the
//! trace itself cannot be fetched (`data/twitter_cache_trace/SOURCE.md`).
//!
//! Targets, per request: mean key 67 B and mean value 2439 B
//! (`cluster004_summary.csv`), about 32 % of requests for values over 512 B
//! and about 8 % puts (paper), Zipf popularity with alpha 1.1004 (summary).
//!
//! Model (fitted as told in `data/twitter_cache_trace/FIT.md`):
//! - popularity rank `r` (0 = hottest) is drawn from Zipf(1.1004) over the
//!   keys, and mapped to a key index by a fixed bijection ([`Scatter`]);
//! - the value of rank `r` has size `exp(MU + SIGMA · Φ⁻¹(u_r))` rounded and
//!   clamped to 1..=[`CAP`], with `u_r = frac(1/2 + r · 0.618…)`, the golden
//!   ratio sequence. Every prefix of that sequence is spread evenly over
//!   (0, 1), so the few hot keys that receive most requests are a fair
//!   sample of the lognormal rather than a lucky draw, and the
//!   request-weighted statistics hold for any key count;
//! - key lengths are 47..=87 B, by a second such sequence (mean 67 B);
//! - values over 8192 B are split into 8192 B chunks and a remainder, as the
//!   paper's store does ("we break objects larger than an MTU"); they form a
//!   list value fetched with [`Op::GetList`], others a plain value fetched
//!   with [`Op::Get`]. A put ([`Op::Put`]) writes the key's own value back,
//!   so later gets stay checkable.
//!
//! MU and SIGMA were fitted so that the request-weighted mean size is 2439 B
//! and the request-weighted share over 512 B is 0.32 at the default key
//! count; the tests measure both at several key counts.

use std::sync::{Arc, OnceLock};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{
    mix64, norm_inv, pad_letters, push_decimal, weyl, KeyTable, Scatter, GOLDEN_STEP, KEY_TABLE_MAX, SQRT3_STEP,
};
use crate::zipf::ZipfRanks;
use crate::{Generator, Op, Request, Transaction, Workload};

/// 160,000 keys: 497 MB of values (paper: the first 4 M keys).
pub(crate) const DEFAULT_KEYS: u32 = 160_000;
/// Paper §6.1.4: "about 8 % of requests are put requests" (the published
/// cluster 4 statistics say 7 % sets).
pub(crate) const DEFAULT_PUTS: f64 = 0.08;
/// Key indices take at most 8 digits.
pub(crate) const MAX_KEYS: u32 = 100_000_000;
/// Location of the log of the value size (fitted).
pub(crate) const MU: f64 = 5.5134;
/// Scale of the log of the value size (fitted).
pub(crate) const SIGMA: f64 = 2.2856;
/// Largest value: 512 KiB (memcached's items stop at 1 MiB; this keeps one
/// response of at most 64 chunks well inside the store's 1 MiB limit).
pub(crate) const CAP: u32 = 512 * 1024;
/// Chunk size of large values (paper: split at 8192 B, `cluster4.0_8192`).
pub(crate) const CHUNK: u32 = 8192;
/// Shortest key.
const KEY_MIN: u32 = 47;
/// Number of key lengths: 47..=87, mean 67.
const KEY_SPAN: u32 = 41;
/// Salt for the key letters.
const SALT: u64 = 0x7717_7E54_C0DE_0004;

const SUMMARY_CSV: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/twitter_cache_trace/cluster004_summary.csv"));

/// A numeric field of the cluster 4 summary.
pub(crate) fn summary(field: &str) -> f64 {
    SUMMARY_CSV
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(',')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("cluster004_summary.csv has no numeric `{field}`"))
}

/// The Zipf exponent of cluster 4.
pub(crate) fn zipf_alpha() -> f64 {
    static ALPHA: OnceLock<f64> = OnceLock::new();
    *ALPHA.get_or_init(|| summary("zipf_alpha"))
}

/// Size of the value of popularity rank `rank`, before chunking.
#[inline]
pub(crate) fn object_size(rank: u32) -> u32 {
    lognormal_size(norm_inv(weyl(rank.into(), GOLDEN_STEP)), MU, SIGMA)
}

/// The size at standard normal quantile `z` of the capped lognormal.
#[inline]
fn lognormal_size(z: f64, mu: f64, sigma: f64) -> u32 {
    (mu + sigma * z).exp().round().clamp(1.0, f64::from(CAP)) as u32
}

/// Length of the key of popularity rank `rank`.
#[inline]
pub(crate) fn key_len(rank: u32) -> usize {
    (KEY_MIN + (weyl(rank.into(), SQRT3_STEP) * f64::from(KEY_SPAN)) as u32) as usize
}

pub(crate) struct Twitter {
    keys: u32,
    puts: f64,
    scatter: Scatter,
    ranks: Arc<ZipfRanks>,
    /// Each key's value size (before chunking), worked out once here: the
    /// load generator checks every response against it and the generator
    /// reads whether a key holds a list from it; computing it (an inverse
    /// normal CDF and an `exp`) was 6 % of the load generator's time at its
    /// Twitter maximum. Four bytes per key, about 1 % of a key's value
    /// (for the first [`KEY_TABLE_MAX`](crate::util::KEY_TABLE_MAX) keys).
    size_by_key: KeyTable<u32>,
}

impl Twitter {
    pub(crate) fn new(keys: u32, puts: f64) -> Self {
        Self::with_table_max(keys, puts, KEY_TABLE_MAX)
    }

    /// With sizes tabled for at most `max` keys.
    fn with_table_max(keys: u32, puts: f64, max: u32) -> Self {
        let ranks = Arc::new(ZipfRanks::new(keys, zipf_alpha()));
        let scatter = Scatter::new(keys);
        let size_by_key = KeyTable::new(keys, max, |key| object_size(scatter.rank_of(key)));
        Twitter { keys, puts, scatter, ranks, size_by_key }
    }
}

impl Workload for Twitter {
    fn name(&self) -> &str {
        "twitter"
    }

    fn num_keys(&self) -> u32 {
        self.keys
    }

    fn preload(&self) -> bool {
        true
    }

    fn key(&self, i: u32, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"tw4:");
        push_decimal(out, i.into(), 8);
        out.push(b':');
        pad_letters(out, key_len(self.scatter.rank_of(i)), mix64(u64::from(i) ^ SALT));
    }

    fn value_sizes(&self, i: u32, out: &mut Vec<u32>) {
        // (A key past the last one wraps around, as it always did.)
        let mut left = self.size_by_key.get_or(i, |i| object_size(self.scatter.rank_of(i)));
        out.clear();
        while left > 0 {
            let chunk = left.min(CHUNK);
            out.push(chunk);
            left -= chunk;
        }
    }

    fn generator(&self, seed: u64) -> Box<dyn Generator> {
        Box::new(TwitterGen {
            rng: SmallRng::seed_from_u64(seed),
            ranks: Arc::clone(&self.ranks),
            size_by_key: self.size_by_key.clone(),
            puts: self.puts,
            scatter: self.scatter,
        })
    }
}

struct TwitterGen {
    rng: SmallRng,
    ranks: Arc<ZipfRanks>,
    size_by_key: KeyTable<u32>,
    puts: f64,
    scatter: Scatter,
}

impl TwitterGen {
    /// Whether key `key` (below the key count: `key_of` made it) holds a
    /// list value (more than one chunk).
    #[inline]
    fn is_list(&self, key: u32) -> bool {
        self.size_by_key.get_or(key, |key| object_size(self.scatter.rank_of(key))) > CHUNK
    }
}

impl Generator for TwitterGen {
    fn next(&mut self, out: &mut Transaction) {
        let key = self.scatter.key_of(self.ranks.sample(&mut self.rng));
        let op = if self.rng.random::<f64>() < self.puts {
            Op::Put
        } else if self.is_list(key) {
            Op::GetList
        } else {
            Op::Get
        };
        out.requests.clear();
        out.requests.push(Request::one(op, key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;
    use std::collections::HashSet;

    /// Request-weighted statistics, exact: every key weighted by its Zipf
    /// probability.
    struct Exact {
        mean_value: f64,
        over_512: f64,
        mean_key: f64,
        mean_value_per_key: f64,
        capped: f64,
    }

    fn exact(n: u32) -> Exact {
        let alpha = zipf_alpha();
        let weights: Vec<f64> = (1..=n).map(|r| f64::from(r).powf(-alpha)).collect();
        let total: f64 = weights.iter().sum();
        let (mut mean_value, mut over_512, mut mean_key, mut per_key, mut capped) = (0.0, 0.0, 0.0, 0.0, 0u32);
        for (rank, w) in (0..n).zip(&weights) {
            let p = w / total;
            let size = object_size(rank);
            mean_value += p * f64::from(size);
            over_512 += if size > 512 { p } else { 0.0 };
            mean_key += p * key_len(rank) as f64;
            per_key += f64::from(size);
            capped += u32::from(size == CAP);
        }
        Exact {
            mean_value,
            over_512,
            mean_key,
            mean_value_per_key: per_key / f64::from(n),
            capped: f64::from(capped) / f64::from(n),
        }
    }

    fn report(n: u32) -> Exact {
        let e = exact(n);
        eprintln!(
            "twitter keys={n}: request-weighted mean value {:.1} B, share > 512 B {:.4}, mean key {:.2} B; \
             per-key mean value {:.1} B, capped keys {:.5}",
            e.mean_value, e.over_512, e.mean_key, e.mean_value_per_key, e.capped
        );
        e
    }

    #[test]
    fn fitted_statistics_hold_at_several_key_counts() {
        let (target_value, target_key) = (summary("mean_value_size_bytes"), summary("mean_key_size_bytes"));
        assert_eq!((target_value, target_key), (2439.0, 67.0));
        for n in [20_000, DEFAULT_KEYS, 1_000_000] {
            let e = report(n);
            assert!((e.mean_value / target_value - 1.0).abs() < 0.04, "keys={n}: mean {}", e.mean_value);
            assert!((e.over_512 - 0.32).abs() < 0.008, "keys={n}: share over 512 B {}", e.over_512);
            assert!((e.mean_key - target_key).abs() < 1.0, "keys={n}: key mean {}", e.mean_key);
        }
    }

    /// Redoes the fit of `data/twitter_cache_trace/FIT.md` and prints the
    /// statistics at more key counts (slow in debug):
    /// `cargo test -p cornflakes-workloads --release -- --ignored --nocapture fit_report`.
    #[test]
    #[ignore]
    fn fit_report() {
        let n = DEFAULT_KEYS;
        let alpha = zipf_alpha();
        let weights: Vec<f64> = (1..=n).map(|r| f64::from(r).powf(-alpha)).collect();
        let total: f64 = weights.iter().sum();
        let z: Vec<f64> = (0..n).map(|r| norm_inv(weyl(r.into(), GOLDEN_STEP))).collect();
        let stats = |mu: f64, sigma: f64| {
            let (mut mean, mut over) = (0.0, 0.0);
            for (w, &z) in weights.iter().zip(&z) {
                let size = lognormal_size(z, mu, sigma);
                mean += w / total * f64::from(size);
                over += if size > 512 { w / total } else { 0.0 };
            }
            (mean, over)
        };
        // The share over 512 B grows with mu: the smallest mu reaching 0.32.
        let mu_for = |sigma: f64| {
            let (mut lo, mut hi) = (0.0, 12.0);
            for _ in 0..50 {
                let mid = (lo + hi) / 2.0;
                if stats(mid, sigma).1 < 0.32 {
                    lo = mid
                } else {
                    hi = mid
                }
            }
            hi
        };
        // With that mu, the mean grows with sigma: the sigma giving 2439 B.
        let (mut lo, mut hi) = (1.0, 3.5);
        for _ in 0..40 {
            let mid = (lo + hi) / 2.0;
            if stats(mu_for(mid), mid).0 < summary("mean_value_size_bytes") {
                lo = mid
            } else {
                hi = mid
            }
        }
        let sigma = (lo + hi) / 2.0;
        let mu = mu_for(sigma);
        let (mean, over) = stats(mu, sigma);
        eprintln!("fit at keys={n}: mu {mu:.4}, sigma {sigma:.4} -> mean {mean:.1} B, share > 512 B {over:.4}");
        assert!((mu - MU).abs() < 0.01 && (sigma - SIGMA).abs() < 0.01, "constants are MU {MU}, SIGMA {SIGMA}");
        for n in [10_000, 20_000, 100_000, DEFAULT_KEYS, 1_000_000, 4_000_000] {
            report(n);
        }
    }

    #[test]
    fn generated_requests_match_the_statistics() {
        let w = WorkloadSpec::default_for("twitter").unwrap().build().unwrap();
        let mut g = w.generator(7);
        let mut t = Transaction::default();
        let (mut puts, mut over_512, mut value_sum, mut key_sum, mut multi) = (0u32, 0u32, 0f64, 0f64, 0u32);
        let mut sizes = Vec::new();
        let mut key = Vec::new();
        let n = 300_000;
        for _ in 0..n {
            g.next(&mut t);
            let [r] = t.requests.as_slice() else { panic!("one request per transaction") };
            let k = r.keys[0];
            assert!(k < w.num_keys());
            w.value_sizes(k, &mut sizes);
            let size: u32 = sizes.iter().sum();
            match r.op {
                Op::Put => puts += 1,
                Op::Get => assert_eq!(sizes.len(), 1),
                Op::GetList => {
                    assert!(sizes.len() > 1);
                    multi += 1;
                }
                op => panic!("unexpected {op:?}"),
            }
            over_512 += u32::from(size > 512);
            value_sum += f64::from(size);
            w.key(k, &mut key);
            key_sum += key.len() as f64;
        }
        let n = f64::from(n);
        let (put_share, over, mean, key_mean) =
            (f64::from(puts) / n, f64::from(over_512) / n, value_sum / n, key_sum / n);
        eprintln!(
            "twitter sampled: puts {put_share:.4}, share > 512 B {over:.4}, mean value {mean:.1} B, mean key \
             {key_mean:.2} B, list gets {:.4}",
            f64::from(multi) / n
        );
        assert!((put_share - DEFAULT_PUTS).abs() < 0.003, "{put_share}");
        assert!((over - 0.32).abs() < 0.012, "{over}");
        assert!((mean / 2439.0 - 1.0).abs() < 0.08, "{mean}");
        assert!((key_mean - 67.0).abs() < 1.5, "{key_mean}");
        assert!(multi > 0);
    }

    #[test]
    fn keys_past_the_size_table_are_worked_out() {
        let full = Twitter::new(20_000, DEFAULT_PUTS);
        let w = Twitter::with_table_max(20_000, DEFAULT_PUTS, 1_000);
        assert_eq!((full.size_by_key.len(), w.size_by_key.len()), (20_000, 1_000));
        let (mut sizes, mut want) = (Vec::new(), Vec::new());
        for i in 0..w.num_keys() {
            w.value_sizes(i, &mut sizes);
            full.value_sizes(i, &mut want);
            assert_eq!(sizes, want, "key {i}");
        }
        // The generator's list or not, too, for keys on both sides.
        let (mut g, mut t) = (w.generator(3), Transaction::default());
        let (mut past_table, mut lists) = (0, 0);
        for _ in 0..50_000 {
            g.next(&mut t);
            let r = &t.requests[0];
            full.value_sizes(r.keys[0], &mut want);
            match r.op {
                Op::Get => assert_eq!(want.len(), 1, "key {}", r.keys[0]),
                Op::GetList => assert!(want.len() > 1, "key {}", r.keys[0]),
                _ => continue,
            }
            past_table += u32::from(r.keys[0] >= 1_000);
            lists += u32::from(r.op == Op::GetList && r.keys[0] >= 1_000);
        }
        assert!(past_table > 5_000 && lists > 0, "draws past the table: {past_table}, lists among them {lists}");
    }

    #[test]
    fn values_are_chunked_and_keys_unique() {
        let w = Twitter::new(50_000, DEFAULT_PUTS);
        let mut sizes = Vec::new();
        let mut key = Vec::new();
        let mut seen = HashSet::new();
        for i in 0..w.num_keys() {
            w.value_sizes(i, &mut sizes);
            let total: u32 = sizes.iter().sum();
            assert_eq!(total, object_size(w.scatter.rank_of(i)));
            assert!((1..=CAP).contains(&total));
            assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == CHUNK));
            assert!((1..=CHUNK).contains(sizes.last().unwrap()));
            w.key(i, &mut key);
            assert!((47..=87).contains(&key.len()) && key.is_ascii(), "{key:?}");
            assert!(seen.insert(key.clone()));
        }
        // Past the last key, the size table is not consulted: sizes wrap.
        let past = w.num_keys() + 7;
        w.value_sizes(past, &mut sizes);
        assert_eq!(sizes.iter().sum::<u32>(), object_size(w.scatter.rank_of(past)));
    }
}

//! Google's fleet-wide protobuf `bytes` field sizes (Karandikar et al.,
//! MICRO 2021, Fig. 4c; paper §6.1.4, Table 1, Fig. 6).
//!
//! Each key is 64 bytes and its value a linked list of a length uniform in
//! 1..=`max` — inclusive, as the paper says ("1, 1-4, 1-8, or 1-16 fields";
//! the authors' code drew 1..max exclusive). Each field picks one of the nine
//! buckets of `data/google_protobuf_bytes/bytes_field_size_buckets.csv` by
//! weight, then a size uniform inside it; the last bucket ends at 8192 B.
//! When the list's total exceeds 8192 B (one jumbo frame's worth: "resampled
//! if the total size exceeds an MTU") every field is drawn again, keeping the
//! length. The draws come from a per-key generator seeded by the key index,
//! so a key's sizes are a pure function of the index.
//!
//! Queries: the paper does not say how keys are chosen; the authors' client
//! draws them uniformly, and so do we. A request is [`Op::GetList`] of one
//! key ("querying linked lists", Table 1), also for one-field values.

use std::sync::OnceLock;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::{mix64, pad_letters, push_decimal, KeyRng};
use crate::{Generator, Op, Request, Transaction, Workload};

/// 500,000 keys: 438 MB of values at the default `max` of 8 (paper: 10^6).
pub(crate) const DEFAULT_KEYS: u32 = 500_000;
/// Fig. 6 shows lists of 1-8 elements.
pub(crate) const DEFAULT_MAX: u32 = 8;
/// Key indices take at most 8 digits.
pub(crate) const MAX_KEYS: u32 = 100_000_000;
/// Longest list allowed: beyond it most lists exceed 8192 B and resampling
/// gets slow.
pub(crate) const MAX_LIST: u32 = 32;
/// Largest total of one value, and the end of the last bucket.
pub(crate) const MAX_TOTAL: u32 = 8192;
/// Key length (paper: 64-byte keys).
const KEY_LEN: usize = 64;
/// Salt of the per-key generator.
const SALT: u64 = 0x600D_1E5B_0B0F_0001;

const BUCKETS_CSV: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/google_protobuf_bytes/bytes_field_size_buckets.csv"));

/// One size bucket: inclusive bounds and its cumulative weight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bucket {
    pub(crate) min: u32,
    pub(crate) max: u32,
    /// Percent of fields in this bucket (as in the data).
    pub(crate) percent: f64,
    /// Fraction of fields in this bucket or an earlier one (normalised).
    cumulative: f64,
}

/// The buckets, parsed once from the embedded CSV.
pub(crate) fn buckets() -> &'static [Bucket] {
    static BUCKETS: OnceLock<Vec<Bucket>> = OnceLock::new();
    BUCKETS.get_or_init(|| {
        let mut out: Vec<Bucket> = BUCKETS_CSV
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let cols: Vec<&str> = l.trim().split(',').collect();
                let num = |s: &str| s.parse::<u32>().expect("bucket bound");
                let max = if cols[1] == "MAX" { MAX_TOTAL } else { num(cols[1]) };
                Bucket { min: num(cols[0]), max, percent: cols[2].parse().expect("bucket weight"), cumulative: 0.0 }
            })
            .collect();
        let total: f64 = out.iter().map(|b| b.percent).sum();
        let mut acc = 0.0;
        for b in &mut out {
            acc += b.percent;
            b.cumulative = acc / total;
        }
        out
    })
}

/// One field size drawn from the buckets.
fn field_size(rng: &mut KeyRng, buckets: &[Bucket]) -> u32 {
    let u = rng.unit();
    let b = buckets.iter().find(|b| u < b.cumulative).unwrap_or(&buckets[buckets.len() - 1]);
    b.min + rng.below(b.max - b.min + 1)
}

pub(crate) struct Google {
    keys: u32,
    max: u32,
    name: String,
    buckets: &'static [Bucket],
}

impl Google {
    pub(crate) fn new(keys: u32, max: u32) -> Self {
        let name = if max == 1 { "google-1".to_owned() } else { format!("google-1-{max}") };
        Google { keys, max, name, buckets: buckets() }
    }
}

impl Workload for Google {
    fn name(&self) -> &str {
        &self.name
    }

    fn num_keys(&self) -> u32 {
        self.keys
    }

    fn preload(&self) -> bool {
        true
    }

    fn key(&self, i: u32, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"gpb:");
        push_decimal(out, i.into(), 8);
        out.push(b':');
        pad_letters(out, KEY_LEN, mix64(u64::from(i) ^ SALT));
    }

    fn value_sizes(&self, i: u32, out: &mut Vec<u32>) {
        let mut rng = KeyRng::new(mix64(u64::from(i) ^ SALT).wrapping_add(u64::from(self.max)));
        let len = 1 + rng.below(self.max) as usize;
        // Resample until the total fits. A list of `len` one-byte fields
        // always fits, so after many tries (never seen in practice) fall
        // back to the smallest bucket to keep this a bounded computation.
        for _ in 0..10_000 {
            out.clear();
            out.extend((0..len).map(|_| field_size(&mut rng, self.buckets)));
            if out.iter().sum::<u32>() <= MAX_TOTAL {
                return;
            }
        }
        out.clear();
        out.resize(len, self.buckets[0].min);
    }

    fn generator(&self, seed: u64) -> Box<dyn Generator> {
        Box::new(GoogleGen { rng: SmallRng::seed_from_u64(seed), keys: self.keys })
    }
}

struct GoogleGen {
    rng: SmallRng,
    keys: u32,
}

impl Generator for GoogleGen {
    fn next(&mut self, out: &mut Transaction) {
        out.requests.clear();
        out.requests.push(Request::one(Op::GetList, self.rng.random_range(0..self.keys)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;

    #[test]
    fn buckets_match_the_paper() {
        let b = buckets();
        assert_eq!(b.len(), 9);
        assert_eq!((b[0].min, b[0].max, b[8].min, b[8].max), (1, 8, 4097, 8192));
        // Paper: 34 % of sizes are ≤ 8 B and 94.9 % ≤ 512 B.
        let le512: f64 = b.iter().filter(|b| b.max <= 512).map(|b| b.percent).sum();
        assert!((le512 - 94.9).abs() < 1e-9, "{le512}");
        assert!(b.windows(2).all(|w| w[0].max + 1 == w[1].min));
    }

    /// Fractions of single-field values (no resampling) in each bucket.
    #[test]
    fn field_sizes_follow_the_buckets() {
        let w = Google::new(60_000, 1);
        assert_eq!(w.name(), "google-1");
        let b = buckets();
        let total: f64 = b.iter().map(|b| b.percent).sum();
        let mut counts = vec![0u32; b.len()];
        let mut sizes = Vec::new();
        for i in 0..w.num_keys() {
            w.value_sizes(i, &mut sizes);
            assert_eq!(sizes.len(), 1);
            let s = sizes[0];
            let k = b.iter().position(|b| (b.min..=b.max).contains(&s)).expect("size inside a bucket");
            counts[k] += 1;
        }
        for (bucket, &c) in b.iter().zip(&counts) {
            let got = f64::from(c) / f64::from(w.num_keys());
            let want = bucket.percent / total;
            // 4 standard deviations of a binomial proportion.
            let tol = 4.0 * (want * (1.0 - want) / f64::from(w.num_keys())).sqrt();
            assert!((got - want).abs() < tol, "bucket {}..={}: {got} vs {want}", bucket.min, bucket.max);
        }
        let le8 = f64::from(counts[0]) / f64::from(w.num_keys());
        assert!((le8 - 0.338).abs() < 0.01, "{le8}");
    }

    #[test]
    fn lists_are_inclusive_bounded_and_resampled() {
        for max in [4u32, 16] {
            let w = Google::new(30_000, max);
            let mut sizes = Vec::new();
            let mut lens = vec![0u32; max as usize + 1];
            for i in 0..w.num_keys() {
                w.value_sizes(i, &mut sizes);
                assert!((1..=max as usize).contains(&sizes.len()));
                assert!(sizes.iter().sum::<u32>() <= MAX_TOTAL, "key {i}: {sizes:?}");
                assert!(sizes.iter().all(|&s| (1..=MAX_TOTAL).contains(&s)));
                lens[sizes.len()] += 1;
            }
            // Every length 1..=max appears, about equally (max included).
            let expect = f64::from(w.num_keys()) / f64::from(max);
            for (len, &c) in lens.iter().enumerate().skip(1) {
                assert!((f64::from(c) - expect).abs() < 0.1 * expect, "max {max}, length {len}: {c}");
            }
        }
        // A 16-field list of large fields must have been redrawn: without
        // resampling some totals would exceed 8192 B.
        let mut rng = KeyRng::new(1);
        let over = (0..2000).filter(|_| (0..16).map(|_| field_size(&mut rng, buckets())).sum::<u32>() > 8192).count();
        assert!(over > 50, "{over}");
    }

    #[test]
    fn keys_and_requests() {
        let w = WorkloadSpec::default_for("google").unwrap().build().unwrap();
        assert_eq!(w.name(), "google-1-8");
        let mut key = Vec::new();
        w.key(123, &mut key);
        assert_eq!(key.len(), 64);
        assert!(key.starts_with(b"gpb:00000123:") && key.is_ascii());
        let mut other = Vec::new();
        w.key(124, &mut other);
        assert_ne!(key, other);
        let mut g = w.generator(3);
        let mut t = Transaction::default();
        for _ in 0..1000 {
            g.next(&mut t);
            assert_eq!(t.requests.len(), 1);
            assert_eq!(t.requests[0].op, Op::GetList);
            assert!(t.requests[0].keys[0] < w.num_keys());
        }
    }
}

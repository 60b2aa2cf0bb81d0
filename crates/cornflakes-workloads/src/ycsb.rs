//! YCSB workload C (paper §5, §6.1.4, §6.3): read-only, keys drawn by YCSB's
//! `ScrambledZipfianGenerator` (Zipfian constant 0.99), values lists of
//! `fields` elements of `size` bytes.
//!
//! The generator follows YCSB (`data/ycsb_c/SOURCE.md`): an inner Zipfian
//! (Gray et al.) over ITEM_COUNT + 1 = 10^10 + 1 items with the precomputed
//! ZETAN, whose draw is scrambled onto the real keys by `fnvhash64(draw) mod
//! keys`. Because the inner Zipfian is over 10^10 items, the hottest key gets
//! 1/ZETAN ≈ 3.78 % of requests, less than a plain Zipf(0.99) over 10^6 keys
//! would give it (6.5 %); that is what YCSB, hence the paper, does.
//!
//! Operation: the paper's measurement study (§5) has "each client get query
//! fetch an entire linked list", so a request is [`Op::GetList`] of one key;
//! with one field the value is a plain buffer and the request is [`Op::Get`]
//! (Redis `get` of 1 × 4096 B, Table 3).
//!
//! Keys: the paper's keys are 30–31 bytes but its trace format is not public.
//! Ours are YCSB's `buildKeyName` ("user" + fnvhash64(i)), with the hash
//! zero-padded to 19 digits, followed by `i` in 7 or 8 digits (the hash's low
//! bit picks which): 30 or 31 bytes, unique by construction.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::util::push_decimal;
use crate::{Generator, Op, Request, Transaction, Workload};

/// 125,000 keys × 4 × 1024 B = 512 MB of values (paper: 10^6 keys).
pub(crate) const DEFAULT_KEYS: u32 = 125_000;
/// "YCSB 1024x4" (Table 5): four elements ...
pub(crate) const DEFAULT_FIELDS: u32 = 4;
/// ... of 1024 bytes.
pub(crate) const DEFAULT_SIZE: u32 = 1024;
/// The key index takes at most 7 digits.
pub(crate) const MAX_KEYS: u32 = 10_000_000;

/// YCSB `ScrambledZipfianGenerator.ITEM_COUNT`.
const ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB `ScrambledZipfianGenerator.ZETAN` = zeta(ITEM_COUNT, 0.99).
const ZETAN: f64 = 26.469_028_201_783_02;
/// YCSB `ZipfianGenerator.ZIPFIAN_CONSTANT`.
const THETA: f64 = 0.99;
/// YCSB `Utils.FNV_OFFSET_BASIS_64`.
const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// YCSB `Utils.FNV_PRIME_64`.
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 low-first bytes of `val`,
/// in wrapping 64-bit arithmetic, then Java's `Math.abs` (which leaves
/// `i64::MIN` as it is).
pub(crate) fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut h = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = (val & 0xff) as u64;
        val >>= 8;
        h ^= octet;
        h = h.wrapping_mul(FNV_PRIME_64);
    }
    (h as i64).wrapping_abs()
}

/// YCSB's `ScrambledZipfianGenerator(0, keys - 1)`, driven by a uniform draw.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScrambledZipfian {
    keys: u64,
    /// Inner Zipfian item count: `ITEM_COUNT + 1` (its range is 0..=ITEM_COUNT).
    items: f64,
    alpha: f64,
    eta: f64,
    /// `1 + 0.5^theta`: below it (times ZETAN) the draw is item 1.
    second: f64,
}

impl ScrambledZipfian {
    pub(crate) fn new(keys: u32) -> Self {
        let items = (ITEM_COUNT + 1) as f64;
        let zeta2theta = 1.0 + 0.5f64.powf(THETA);
        let eta = (1.0 - (2.0 / items).powf(1.0 - THETA)) / (1.0 - zeta2theta / ZETAN);
        ScrambledZipfian { keys: keys.into(), items, alpha: 1.0 / (1.0 - THETA), eta, second: zeta2theta }
    }

    /// The inner Zipfian item for uniform `u` in [0, 1) (0 = most popular).
    #[inline]
    pub(crate) fn item(&self, u: f64) -> u64 {
        let uz = u * ZETAN;
        if uz < 1.0 {
            0
        } else if uz < self.second {
            1
        } else {
            (self.items * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        }
    }

    /// The key for uniform `u`: the scrambled item. (YCSB takes a Java `%`,
    /// negative only for the one hash equal to `i64::MIN`; `rem_euclid`
    /// keeps even that in range.)
    #[inline]
    pub(crate) fn key(&self, u: f64) -> u32 {
        fnvhash64(self.item(u) as i64).rem_euclid(self.keys as i64) as u32
    }
}

pub(crate) struct Ycsb {
    keys: u32,
    fields: u32,
    size: u32,
    /// Keys drawn uniformly instead of by the scrambled Zipfian (the
    /// calibration grid, whose working set must be what it says).
    uniform: bool,
    /// Keys per request: above 1, each request is a get-many of that many.
    per_request: u32,
    name: String,
}

impl Ycsb {
    pub(crate) fn new(keys: u32, fields: u32, size: u32) -> Self {
        Ycsb { keys, fields, size, uniform: false, per_request: 1, name: format!("ycsb-{fields}x{size}B") }
    }

    /// YCSB's keys with one plain value each, every request a get-many of
    /// `n` keys.
    pub(crate) fn get_many(keys: u32, size: u32, n: u32) -> Self {
        Ycsb { keys, fields: 1, size, uniform: false, per_request: n, name: format!("mget-{n}x{size}B") }
    }

    /// The calibration grid's cell: YCSB's keys and values, keys drawn
    /// uniformly, so that `keys × fields × size` bytes are all touched.
    pub(crate) fn uniform(keys: u32, fields: u32, size: u32) -> Self {
        Ycsb { keys, fields, size, uniform: true, per_request: 1, name: format!("grid-{fields}x{size}B-{keys}keys") }
    }
}

impl Workload for Ycsb {
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
        let h = fnvhash64(i.into()).unsigned_abs();
        out.clear();
        out.extend_from_slice(b"user");
        push_decimal(out, h, 19);
        push_decimal(out, i.into(), 7 + (h & 1) as usize);
    }

    fn value_sizes(&self, _i: u32, out: &mut Vec<u32>) {
        out.clear();
        out.resize(self.fields as usize, self.size);
    }

    fn generator(&self, seed: u64) -> Box<dyn Generator> {
        let op = match (self.per_request, self.fields) {
            (2.., _) => Op::GetM,
            (_, 1) => Op::Get,
            _ => Op::GetList,
        };
        let zipf = (!self.uniform).then(|| ScrambledZipfian::new(self.keys));
        Box::new(YcsbGen {
            rng: SmallRng::seed_from_u64(seed),
            zipf,
            keys: self.keys,
            op,
            per_request: self.per_request,
        })
    }
}

struct YcsbGen {
    rng: SmallRng,
    /// `None`: uniform over `keys`.
    zipf: Option<ScrambledZipfian>,
    keys: u32,
    op: Op,
    per_request: u32,
}

impl YcsbGen {
    fn draw(&mut self) -> u32 {
        match &self.zipf {
            Some(z) => z.key(self.rng.random::<f64>()),
            None => self.rng.random_range(0..self.keys),
        }
    }
}

impl Generator for YcsbGen {
    fn next(&mut self, out: &mut Transaction) {
        out.requests.clear();
        let first = self.draw();
        let mut request = Request::one(self.op, first);
        for _ in 1..self.per_request {
            let key = self.draw();
            request.keys.push(key);
        }
        out.requests.push(request);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;
    use std::collections::HashSet;

    const PARAMETERS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/ycsb_c/parameters.csv"));

    fn parameter(name: &str) -> &'static str {
        PARAMETERS
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(',')))
            .and_then(|r| r.split(',').next())
            .unwrap_or_else(|| panic!("{name} not in parameters.csv"))
    }

    #[test]
    fn constants_match_the_data() {
        assert_eq!(parameter("ScrambledZipfianGenerator.ITEM_COUNT").parse::<u64>().unwrap(), ITEM_COUNT);
        assert_eq!(
            parameter("ScrambledZipfianGenerator.ZETAN (zeta(ITEM_COUNT; 0.99))").parse::<f64>().unwrap(),
            ZETAN
        );
        assert_eq!(parameter("ZipfianGenerator.ZIPFIAN_CONSTANT (theta)").parse::<f64>().unwrap(), THETA);
        assert_eq!(parameter("FNV_OFFSET_BASIS_64"), format!("0x{FNV_OFFSET_BASIS_64:X}"));
        assert_eq!(parameter("FNV_PRIME_64").parse::<u64>().unwrap(), FNV_PRIME_64);
        let z = ScrambledZipfian::new(1000);
        let eta: f64 = parameter("eta for items = ITEM_COUNT+1").parse().unwrap();
        assert!((z.eta - eta).abs() < 1e-9, "{} vs {eta}", z.eta);
        let zeta2: f64 = parameter("zeta(2; 0.99)").parse().unwrap();
        assert!((z.second - zeta2).abs() < 1e-12);
        assert_eq!(z.alpha.round(), parameter("alpha = 1/(1-theta)").parse::<f64>().unwrap());
    }

    #[test]
    fn fnv_matches_java_semantics() {
        // Reference values from YCSB's Utils.fnvhash64 (signed 64-bit Java).
        assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnvhash64(12_345), 1_792_800_413_050_876_852);
        assert_eq!(fnvhash64(10_000_000_000), 1_201_321_332_300_452_516);
    }

    #[test]
    fn keys_are_30_or_31_unique_ascii_bytes() {
        let w = WorkloadSpec::Ycsb { keys: 20_000, fields: 4, size: 1024 }.build().unwrap();
        let mut key = Vec::new();
        let mut seen = HashSet::new();
        let mut lens = [0u32; 2];
        for i in 0..w.num_keys() {
            w.key(i, &mut key);
            assert!(key.starts_with(b"user") && key[4..].iter().all(u8::is_ascii_digit), "{key:?}");
            assert!(key.len() == 30 || key.len() == 31, "{}", key.len());
            lens[key.len() - 30] += 1;
            assert!(seen.insert(key.clone()));
        }
        assert!(lens.iter().all(|&n| n > 9_000), "{lens:?}");
        // The largest index still fits.
        let big = Ycsb::new(MAX_KEYS, 1, 1);
        big.key(MAX_KEYS - 1, &mut key);
        assert!(key.len() == 30 || key.len() == 31);
    }

    #[test]
    fn values_and_ops() {
        let w = WorkloadSpec::default_for("ycsb").unwrap().build().unwrap();
        assert_eq!(w.name(), "ycsb-4x1024B");
        let mut sizes = Vec::new();
        w.value_sizes(3, &mut sizes);
        assert_eq!(sizes, [1024; 4]);
        assert_eq!(crate::total_value_bytes(w.as_ref()), 125_000 * 4096);
        let mut t = Transaction::default();
        w.generator(1).next(&mut t);
        assert_eq!(t.requests[0].op, Op::GetList);
        let one = WorkloadSpec::Ycsb { keys: 10, fields: 1, size: 4096 }.build().unwrap();
        one.generator(1).next(&mut t);
        assert_eq!((t.requests.len(), t.requests[0].op), (1, Op::Get));
    }

    #[test]
    fn the_grid_draws_every_key_about_equally() {
        let spec: WorkloadSpec = "grid:keys=100,fields=8,size=64".parse().unwrap();
        assert_eq!(spec.to_string(), "grid:keys=100,fields=8,size=64");
        let w = spec.build().unwrap();
        assert_eq!(w.name(), "grid-8x64B-100keys");
        assert_eq!(crate::total_value_bytes(w.as_ref()), 100 * 8 * 64);
        let (mut g, mut t, mut counts) = (w.generator(7), Transaction::default(), [0u32; 100]);
        for _ in 0..100_000 {
            g.next(&mut t);
            assert_eq!(t.requests[0].op, Op::GetList);
            counts[t.requests[0].keys[0] as usize] += 1;
        }
        // Uniform: each key near 1000 draws; the Zipfian's hottest of 100
        // keys would get thousands more.
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }

    #[test]
    fn skew_matches_ycsb() {
        // The hottest key is fnvhash64(0) mod n with probability 1/ZETAN; the
        // second fnvhash64(1) mod n with 0.5^0.99/ZETAN.
        let n = 125_000u32;
        let w = WorkloadSpec::Ycsb { keys: n, fields: 4, size: 1024 }.build().unwrap();
        let mut g = w.generator(42);
        let mut t = Transaction::default();
        let hot = [fnvhash64(0) as u64 % u64::from(n), fnvhash64(1) as u64 % u64::from(n)];
        let draws = 200_000;
        let mut counts = [0u32; 2];
        let mut distinct = HashSet::new();
        for _ in 0..draws {
            g.next(&mut t);
            let k = u64::from(t.requests[0].keys[0]);
            assert!(k < u64::from(n));
            distinct.insert(k);
            for (c, h) in counts.iter_mut().zip(hot) {
                *c += u32::from(k == h);
            }
        }
        let f0 = f64::from(counts[0]) / f64::from(draws);
        let f1 = f64::from(counts[1]) / f64::from(draws);
        assert!((f0 - 1.0 / ZETAN).abs() < 0.002, "hottest key {f0}, expected {}", 1.0 / ZETAN);
        assert!((f1 - 0.5f64.powf(THETA) / ZETAN).abs() < 0.0015, "second key {f1}");
        // Skewed but spread: many keys seen, far fewer than the draws.
        assert!(distinct.len() > 30_000 && distinct.len() < 120_000, "{}", distinct.len());
    }

    #[test]
    fn mget_asks_for_n_plain_values_per_request() {
        let spec: WorkloadSpec = "mget:keys=1000,size=2048,n=2".parse().unwrap();
        assert_eq!(spec.to_string().parse::<WorkloadSpec>().unwrap(), spec);
        assert!("mget:n=65".parse::<WorkloadSpec>().is_err(), "beyond the store's keys per request");
        let w = spec.build().unwrap();
        assert_eq!(w.name(), "mget-2x2048B");
        let mut sizes = Vec::new();
        w.value_sizes(3, &mut sizes);
        assert_eq!(sizes, [2048]);
        let (mut g, mut t) = (w.generator(5), Transaction::default());
        let mut distinct = HashSet::new();
        for _ in 0..1000 {
            g.next(&mut t);
            assert_eq!((t.requests.len(), t.requests[0].op, t.requests[0].keys.len()), (1, Op::GetM, 2));
            assert!(t.requests[0].keys.iter().all(|&k| k < 1000));
            distinct.insert(t.requests[0].keys[1]);
        }
        assert!(distinct.len() > 100, "the second key is drawn too, not copied");
    }
}

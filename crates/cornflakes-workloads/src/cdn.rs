//! CDN images (paper §6.1.4, Table 2, Fig. 11): Tragen's image traffic class
//! `tc-1` (`data/cdn_image/`).
//!
//! - Sizes: the per-object size marginal of `tc-1` (sizes in KB, as Tragen
//!   writes them; the authors made a value of `KB · 1000` bytes). Popularity
//!   rank `r` takes the quantile `frac(1/2 + r · 0.618…)` of that marginal
//!   (the golden-ratio sequence: every prefix of ranks is spread evenly over
//!   the distribution, so the hot objects are typical objects and the
//!   size mix per request follows the per-object marginal).
//! - Cap: [`CAP_KB`] = 2048 KB (256 segments), so one transaction stays
//!   bounded; it shortens 0.0096 % of objects (those of 2049 KB to 394 MB)
//!   and lowers the mean object from 22.16 KB to 21.75 KB.
//! - Segments: [`SEGMENT`] = 8000 bytes, the authors' `MAX_SUBOBJ_SIZE_KB
//!   = 8` times their 1000-byte KB (their code notes 8192 as a possible
//!   change it never made). An object is one key whose value is the list of
//!   its segments; 44.8 % of objects are one segment.
//! - Queries: one transaction fetches one object, with one
//!   [`Op::GetFromList`] per segment ("an individual client request queries a
//!   single sub-object, but all sub-objects within an object are requested"),
//!   and throughput is counted in objects.
//! - Popularity: Zipf over objects with [`ZIPF_ALPHA`] = 0.8, fitted to the
//!   share of requests that the top 0.01 / 0.1 / 1 / 10 % of objects get in
//!   the popularity file (see `data/cdn_image/FIT.md`).

use std::sync::{Arc, OnceLock};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::util::{mix64, pad_letters, push_decimal, weyl, KeyTable, Scatter, GOLDEN_STEP, KEY_TABLE_MAX};
use crate::zipf::ZipfRanks;
use crate::{Generator, Op, Request, Transaction, Workload};

/// 20,000 objects: 436 MB of values (paper: about 10,000 MB).
pub(crate) const DEFAULT_OBJECTS: u32 = 20_000;
/// Object indices take at most 8 digits.
pub(crate) const MAX_OBJECTS: u32 = 100_000_000;
/// Zipf exponent of object popularity (fitted, see `FIT.md`).
pub(crate) const ZIPF_ALPHA: f64 = 0.8;
/// Largest object, KB.
pub(crate) const CAP_KB: u32 = 2048;
/// Bytes per KB in Tragen's sizes, as the authors read them.
const KB: u32 = 1000;
/// Segment size, bytes.
pub(crate) const SEGMENT: u32 = 8 * KB;
/// Key length (paper: 64-byte keys).
const KEY_LEN: usize = 64;
/// Salt for the key letters.
const SALT: u64 = 0xCD17_0B1E_C700_0001;

const MARGINAL_CSV: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/cdn_image/tc-1_object_size_marginal.csv"));

/// One row of the marginal: a size and its object fraction (the third
/// column, the request fraction, is not used: sizes are drawn per object).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SizeRow {
    pub(crate) size_kb: u32,
    pub(crate) object_fraction: f64,
    /// Fraction of objects of this size or smaller (normalised).
    cumulative: f64,
}

/// The per-object size marginal, parsed once from the embedded CSV.
pub(crate) fn marginal() -> &'static [SizeRow] {
    static ROWS: OnceLock<Vec<SizeRow>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let mut rows: Vec<SizeRow> = MARGINAL_CSV
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let mut cols = l.trim().split(',');
                let mut next = || cols.next().expect("three columns");
                SizeRow {
                    size_kb: next().parse().expect("size_kb"),
                    object_fraction: next().parse().expect("object_fraction"),
                    cumulative: 0.0,
                }
            })
            .collect();
        let total: f64 = rows.iter().map(|r| r.object_fraction).sum();
        let mut acc = 0.0;
        for r in &mut rows {
            acc += r.object_fraction;
            r.cumulative = acc / total;
        }
        rows
    })
}

/// The marginal as the size lookup reads it: the cumulative fractions
/// alone, back to back (25 KB), and each row's size. Searched once per
/// object, when [`Cdn::new`] builds its table of sizes by key.
pub(crate) struct SizeTable {
    cumulative: Vec<f64>,
    size_kb: Vec<u32>,
}

/// The [`SizeTable`] of [`marginal`], built once.
pub(crate) fn size_table() -> &'static SizeTable {
    static TABLE: OnceLock<SizeTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let rows = marginal();
        SizeTable {
            cumulative: rows.iter().map(|r| r.cumulative).collect(),
            size_kb: rows.iter().map(|r| r.size_kb).collect(),
        }
    })
}

/// Size in KB of the object of popularity rank `rank`, before the cap.
#[inline]
pub(crate) fn raw_size_kb(table: &SizeTable, rank: u32) -> u32 {
    let u = weyl(rank.into(), GOLDEN_STEP);
    let i = table.cumulative.partition_point(|&c| c <= u).min(table.size_kb.len() - 1);
    table.size_kb[i]
}

pub(crate) struct Cdn {
    objects: u32,
    scatter: Scatter,
    table: &'static SizeTable,
    ranks: Arc<ZipfRanks>,
    /// Each object's size in KB (capped), by key: worked out once here, so
    /// that the load generator's check of each response and the generator's
    /// draw of each transaction look it up instead of repeating the
    /// key-to-rank modulo and the binary search over [`SizeTable`] (5 % of
    /// the load generator's time at its CDN maximum when they did). Two
    /// bytes per object against its 21.75 KB of values (for the first
    /// [`KEY_TABLE_MAX`](crate::util::KEY_TABLE_MAX) objects).
    kb_by_key: KeyTable<u16>,
}

impl Cdn {
    pub(crate) fn new(objects: u32) -> Self {
        Self::with_table_max(objects, KEY_TABLE_MAX)
    }

    /// With sizes tabled for at most `max` objects.
    fn with_table_max(objects: u32, max: u32) -> Self {
        let ranks = Arc::new(ZipfRanks::new(objects, ZIPF_ALPHA));
        let (scatter, table) = (Scatter::new(objects), size_table());
        let kb_by_key = KeyTable::new(objects, max, |key| capped_kb(table, scatter.rank_of(key)));
        Cdn { objects, scatter, table, ranks, kb_by_key }
    }

    /// Bytes of object `key` (a key past the last one wraps around, as it
    /// always did).
    #[inline]
    fn bytes_of(&self, key: u32) -> u32 {
        bytes_of(&self.kb_by_key, self.table, &self.scatter, key)
    }
}

/// Bytes of object `key`: from the table, else from its rank.
#[inline]
fn bytes_of(kb_by_key: &KeyTable<u16>, table: &SizeTable, scatter: &Scatter, key: u32) -> u32 {
    u32::from(kb_by_key.get_or(key, |key| capped_kb(table, scatter.rank_of(key)))) * KB
}

/// Size in KB of the object of popularity rank `rank`, capped (fits in
/// `u16`: [`CAP_KB`] is 2048).
fn capped_kb(table: &SizeTable, rank: u32) -> u16 {
    const _: () = assert!(CAP_KB <= u16::MAX as u32);
    raw_size_kb(table, rank).min(CAP_KB) as u16
}

impl Workload for Cdn {
    fn name(&self) -> &str {
        "cdn"
    }

    fn num_keys(&self) -> u32 {
        self.objects
    }

    fn preload(&self) -> bool {
        true
    }

    fn key(&self, i: u32, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"cdn:");
        push_decimal(out, i.into(), 8);
        out.push(b':');
        pad_letters(out, KEY_LEN, mix64(u64::from(i) ^ SALT));
    }

    fn value_sizes(&self, i: u32, out: &mut Vec<u32>) {
        let mut left = self.bytes_of(i);
        out.clear();
        while left > 0 {
            let seg = left.min(SEGMENT);
            out.push(seg);
            left -= seg;
        }
    }

    fn value_size(&self, i: u32, elem: u32) -> Option<u32> {
        let bytes = self.bytes_of(i);
        let start = elem.checked_mul(SEGMENT)?;
        (start < bytes).then(|| (bytes - start).min(SEGMENT))
    }

    fn generator(&self, seed: u64) -> Box<dyn Generator> {
        Box::new(CdnGen {
            rng: SmallRng::seed_from_u64(seed),
            ranks: Arc::clone(&self.ranks),
            scatter: self.scatter,
            table: self.table,
            kb_by_key: self.kb_by_key.clone(),
        })
    }

    fn unit(&self) -> &'static str {
        "objects"
    }
}

struct CdnGen {
    rng: SmallRng,
    ranks: Arc<ZipfRanks>,
    scatter: Scatter,
    table: &'static SizeTable,
    kb_by_key: KeyTable<u16>,
}

impl Generator for CdnGen {
    fn next(&mut self, out: &mut Transaction) {
        let rank = self.ranks.sample(&mut self.rng);
        let object = self.scatter.key_of(rank);
        let segments = bytes_of(&self.kb_by_key, self.table, &self.scatter, object).div_ceil(SEGMENT);
        out.requests.clear();
        out.requests.extend((0..segments).map(|j| Request::at(Op::GetFromList, object, j)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkloadSpec;

    /// Mean object (KB) and mean segment count of the marginal itself.
    fn marginal_means(cap_kb: u32) -> (f64, f64) {
        let rows = marginal();
        let total: f64 = rows.iter().map(|r| r.object_fraction).sum();
        let kb = rows.iter().map(|r| f64::from(r.size_kb.min(cap_kb)) * r.object_fraction).sum::<f64>() / total;
        let segs = rows
            .iter()
            .map(|r| f64::from((r.size_kb.min(cap_kb) * KB).div_ceil(SEGMENT)) * r.object_fraction)
            .sum::<f64>()
            / total;
        (kb, segs)
    }

    #[test]
    fn marginal_matches_source() {
        let rows = marginal();
        assert_eq!(rows.len(), 3215);
        assert_eq!((rows[0].size_kb, rows[rows.len() - 1].size_kb), (1, 394_402));
        let (kb, _) = marginal_means(u32::MAX);
        assert!((kb - 22.16).abs() < 0.01, "{kb}");
        let objects: f64 = rows.iter().map(|r| r.object_fraction).sum();
        assert!((objects - 1.0).abs() < 1e-9);
    }

    #[test]
    fn sizes_and_segments_follow_the_marginal() {
        let w = Cdn::new(DEFAULT_OBJECTS);
        let (want_kb, want_segs) = marginal_means(CAP_KB);
        let mut sizes = Vec::new();
        let (mut bytes, mut segs, mut single, mut capped) = (0u64, 0u64, 0u32, 0u32);
        for i in 0..w.num_keys() {
            w.value_sizes(i, &mut sizes);
            let rank = w.scatter.rank_of(i);
            assert_eq!(sizes.iter().sum::<u32>(), raw_size_kb(w.table, rank).min(CAP_KB) * KB, "key {i}");
            assert!(!sizes.is_empty() && sizes.len() <= (CAP_KB * KB / SEGMENT) as usize);
            assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == SEGMENT));
            let last = *sizes.last().unwrap();
            assert!(last > 0 && last <= SEGMENT && last % KB == 0);
            bytes += sizes.iter().map(|&s| u64::from(s)).sum::<u64>();
            segs += sizes.len() as u64;
            single += u32::from(sizes.len() == 1);
            capped += u32::from(raw_size_kb(w.table, w.scatter.rank_of(i)) > CAP_KB);
        }
        let n = f64::from(w.num_keys());
        let (kb, mean_segs) = (bytes as f64 / n / f64::from(KB), segs as f64 / n);
        eprintln!(
            "cdn objects={}: mean object {kb:.2} KB (marginal, capped: {want_kb:.2}), mean segments {mean_segs:.3} \
             ({want_segs:.3}), one-segment objects {:.4}, capped objects {capped}, working set {} B",
            w.num_keys(),
            f64::from(single) / n,
            bytes
        );
        assert!((kb / want_kb - 1.0).abs() < 0.02, "{kb} vs {want_kb}");
        assert!((mean_segs / want_segs - 1.0).abs() < 0.02, "{mean_segs} vs {want_segs}");
        assert!((f64::from(single) / n - 0.448).abs() < 0.01);
        assert!((bytes as f64 - 435e6).abs() < 15e6, "{bytes}");
    }

    #[test]
    fn one_element_size_agrees_with_the_list() {
        let w = Cdn::new(DEFAULT_OBJECTS);
        let mut sizes = Vec::new();
        for i in 0..w.num_keys() {
            w.value_sizes(i, &mut sizes);
            for (j, &s) in sizes.iter().enumerate() {
                assert_eq!(w.value_size(i, j as u32), Some(s), "key {i} element {j}");
            }
            assert_eq!(w.value_size(i, sizes.len() as u32), None);
            assert_eq!(w.value_size(i, u32::MAX), None);
        }
        // Past the last object the size table is not consulted: sizes wrap.
        let past = w.num_keys() + 7;
        w.value_sizes(past, &mut sizes);
        assert_eq!(sizes.iter().sum::<u32>(), raw_size_kb(w.table, w.scatter.rank_of(past)).min(CAP_KB) * KB);
    }

    #[test]
    fn objects_past_the_size_table_are_worked_out() {
        let full = Cdn::new(5_000);
        let w = Cdn::with_table_max(5_000, 300);
        assert_eq!((full.kb_by_key.len(), w.kb_by_key.len()), (5_000, 300));
        let (mut sizes, mut want) = (Vec::new(), Vec::new());
        for i in 0..w.num_keys() {
            w.value_sizes(i, &mut sizes);
            full.value_sizes(i, &mut want);
            assert_eq!(sizes, want, "object {i}");
        }
        // The generator, too: every transaction fetches its whole object.
        let (mut g, mut t) = (w.generator(5), Transaction::default());
        let mut past_table = 0;
        for _ in 0..20_000 {
            g.next(&mut t);
            let object = t.requests[0].keys[0];
            full.value_sizes(object, &mut want);
            assert_eq!(t.requests.len(), want.len(), "object {object}");
            past_table += u32::from(object >= 300);
        }
        assert!(past_table > 1_000, "the draws reach past the table: {past_table}");
    }

    #[test]
    fn transactions_fetch_whole_objects() {
        let w = WorkloadSpec::default_for("cdn").unwrap().build().unwrap();
        assert_eq!((w.name(), w.unit()), ("cdn", "objects"));
        let mut g = w.generator(11);
        let mut t = Transaction::default();
        let mut sizes = Vec::new();
        let (mut requests, mut bytes) = (0u64, 0u64);
        let n = 50_000;
        let hot = Cdn::new(w.num_keys()).scatter.key_of(0);
        let mut hot_count = 0u32;
        for _ in 0..n {
            g.next(&mut t);
            let object = t.requests[0].keys[0];
            w.value_sizes(object, &mut sizes);
            assert_eq!(t.requests.len(), sizes.len());
            for (j, r) in t.requests.iter().enumerate() {
                assert_eq!((r.op, r.keys.as_slice(), r.index), (Op::GetFromList, &[object][..], j as u32));
            }
            requests += t.requests.len() as u64;
            bytes += sizes.iter().map(|&s| u64::from(s)).sum::<u64>();
            hot_count += u32::from(object == hot);
        }
        // The hottest object gets 1/H(20000; 0.8) ≈ 3.14 % of transactions.
        let h: f64 = (1..=w.num_keys()).map(|r| f64::from(r).powf(-ZIPF_ALPHA)).sum();
        let hot_share = f64::from(hot_count) / f64::from(n);
        assert!((hot_share - 1.0 / h).abs() < 0.004, "{hot_share} vs {}", 1.0 / h);
        let mean_kb = bytes as f64 / f64::from(n) / f64::from(KB);
        eprintln!("cdn sampled: {:.3} requests per object, {mean_kb:.2} KB per object", requests as f64 / f64::from(n));
        assert!(mean_kb > 15.0 && mean_kb < 30.0, "{mean_kb}");
    }

    #[test]
    fn keys_are_64_unique_bytes() {
        let w = Cdn::new(5000);
        let mut key = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..w.num_keys() {
            w.key(i, &mut key);
            assert_eq!(key.len(), 64);
            assert!(key.is_ascii());
            assert!(seen.insert(key.clone()));
        }
    }
}

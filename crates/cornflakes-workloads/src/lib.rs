//! The key-value workloads of the Cornflakes paper (SOSP 2023, §2.2, §5 and
//! §6.1.4), as pure functions of a [`WorkloadSpec`] plus seeded generators.
//!
//! | spec | paper | values | operations |
//! |---|---|---|---|
//! | `echo` | Fig. 2, §6.2.3 | `fields` × `size` B, carried by the request, one of `keys` (64) payloads | [`Op::Echo`] |
//! | `ycsb` | §5 (Fig. 5), §6.3, Table 5 | lists of `fields` × `size` B | [`Op::GetList`] ([`Op::Get`] if 1 field) |
//! | `google` | §6.1.4, Table 1, Fig. 6 | lists of 1..=`max` fields, Google's bytes-field sizes | [`Op::GetList`] |
//! | `twitter` | §6.1.4, Fig. 7, 12 | fitted to cluster 4's statistics, chunks of ≤ 8192 B | [`Op::Get`] / [`Op::GetList`], [`Op::Put`] |
//! | `cdn` | §6.1.4, Table 2, Fig. 11 | Tragen `tc-1` image sizes in 8000 B segments | [`Op::GetFromList`] per segment |
//!
//! Keys are numbered `0..num_keys()`. A key's bytes ([`Workload::key`]) and
//! its value's element sizes ([`Workload::value_sizes`]) are pure functions
//! of the spec and the index, so a server preloads and a client checks
//! without sharing anything but the spec string. Value contents come from
//! [`fill_value`] and are checked in O(1) by [`check_value`]. The data the
//! workloads are built from is embedded from the repository's `data/`
//! folder, so nothing is read at run time.
//!
//! A put sends exactly the value the key already holds, so every later get
//! stays checkable in any order; no generator issues [`Op::Append`], which
//! would make list lengths depend on the order of requests. Names write
//! lists as count × bytes: `echo-2x2048B`, `ycsb-4x1024B` (the paper's
//! "YCSB 1024x4" writes bytes × count), `google-1-8`, `twitter`, `cdn`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod cdn;
mod echo;
mod google;
mod spec;
mod twitter;
mod util;
mod ycsb;
mod zipf;

pub use cornflakes_kv_protocol::Op;
pub use spec::{WorkloadError, WorkloadSpec};

use smallvec::SmallVec;

/// One request, by key index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The operation.
    pub op: Op,
    /// Key indices (one for every operation the generators issue).
    pub keys: SmallVec<[u32; 4]>,
    /// The list element, for [`Op::GetFromList`]; 0 otherwise.
    pub index: u32,
}

impl Request {
    /// A request for one key.
    pub fn one(op: Op, key: u32) -> Self {
        Request { op, keys: smallvec::smallvec![key], index: 0 }
    }

    /// A request for element `index` of one key's list value.
    pub fn at(op: Op, key: u32, index: u32) -> Self {
        Request { op, keys: smallvec::smallvec![key], index }
    }
}

/// What arrives at one instant of the open loop: one request for most
/// workloads, all segments of one object for CDN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transaction {
    /// The requests, sent in order.
    pub requests: SmallVec<[Request; 1]>,
}

/// A workload: its keys, their values, and how clients query them.
pub trait Workload: Send + Sync {
    /// Short name for reports and file names, e.g. `ycsb-4x1024B`.
    fn name(&self) -> &str;
    /// Number of keys (objects for CDN).
    fn num_keys(&self) -> u32;
    /// Whether the server preloads every key (false for echo).
    fn preload(&self) -> bool;
    /// Key bytes of key `i` (ASCII), appended to `out` after clearing it.
    fn key(&self, i: u32, out: &mut Vec<u8>);
    /// Element sizes of key `i`'s value (1 element = plain value; more = a
    /// list value), written to `out` after clearing it. For echo: the sizes
    /// of the values the request carries.
    fn value_sizes(&self, i: u32, out: &mut Vec<u32>);
    /// Size of element `elem` of key `i`'s value, `None` past its last
    /// element. The load generator asks it for every list element it
    /// checks; workloads with long lists answer without listing them all.
    fn value_size(&self, i: u32, elem: u32) -> Option<u32> {
        let mut sizes = Vec::new();
        self.value_sizes(i, &mut sizes);
        sizes.get(elem as usize).copied()
    }
    /// A per-client-thread generator of transactions, seeded.
    fn generator(&self, seed: u64) -> Box<dyn Generator>;
    /// What one transaction is, for reporting ("requests", "objects").
    fn unit(&self) -> &'static str {
        "requests"
    }
}

/// A stream of transactions for one client thread.
pub trait Generator: Send {
    /// Replaces the contents of `out` with the next transaction. Does not
    /// allocate once `out` has grown to the largest transaction.
    fn next(&mut self, out: &mut Transaction);
}

/// Sum of the value bytes of every key: the working set the server holds
/// (0 when the workload is not preloaded).
pub fn total_value_bytes(w: &dyn Workload) -> u64 {
    if !w.preload() {
        return 0;
    }
    let mut sizes = Vec::new();
    (0..w.num_keys())
        .map(|i| {
            w.value_sizes(i, &mut sizes);
            sizes.iter().map(|&s| u64::from(s)).sum::<u64>()
        })
        .sum()
}

/// The 8-byte fingerprint that starts element `elem` of key `key`'s value.
#[inline]
fn fingerprint(key: u32, elem: u32) -> u64 {
    util::mix64(((u64::from(key) << 32) | u64::from(elem)) ^ 0x5EED_F00D_CAFE_BABE)
}

/// Word `j` (8 bytes, little-endian) of element `elem` of key `key`'s
/// value: the fingerprint of (key, elem) mixed with the word's position, so
/// that a word of another value, or of this value at another offset, never
/// matches. Word 0 is the fingerprint itself.
#[inline(always)]
fn value_word(fp: u64, j: usize) -> u64 {
    // Added rather than xored: the check then steps each lane's expected
    // word with one add (one instruction per word fewer than an xor of the
    // fingerprint into a position it also steps).
    fp.wrapping_add((j as u64).wrapping_mul(WORD_MIX))
}

/// The multiplier of a word's position in [`value_word`].
const WORD_MIX: u64 = 0x9E37_79B9_7F4A_7C15;

/// Fills element `elem` of key `key`'s value: 8-byte words, each the
/// fingerprint of (key, elem) mixed with the word's index (the first word
/// is the fingerprint), the last word cut to the length. Every byte thus
/// depends on the key, the element and its position; one add per word
/// keeps preloading gigabytes fast. Shared by the server's preload and the
/// client's put and echo values.
pub fn fill_value(key: u32, elem: u32, out: &mut [u8]) {
    fill_words(fingerprint(key, elem), out);
}

/// The words of [`fill_value`], eight lanes per 64-byte step, each with
/// its own running value (one add per word instead of a multiply): the
/// server preloads gigabytes with it.
fn fill_words(fp: u64, out: &mut [u8]) {
    let len = out.len();
    let mut blocks = out.chunks_exact_mut(LANES * 8);
    let mut next: [u64; LANES] = core::array::from_fn(|j| value_word(fp, j));
    let step = (LANES as u64).wrapping_mul(WORD_MIX);
    for block in &mut blocks {
        for lane in 0..LANES {
            block[lane * 8..lane * 8 + 8].copy_from_slice(&next[lane].to_le_bytes());
            next[lane] = next[lane].wrapping_add(step);
        }
    }
    let rest = blocks.into_remainder();
    let first = len / (LANES * 8) * LANES;
    let mut words = rest.chunks_exact_mut(8);
    for (j, w) in (&mut words).enumerate() {
        w.copy_from_slice(&value_word(fp, first + j).to_le_bytes());
    }
    let tail = words.into_remainder();
    let n = tail.len();
    tail.copy_from_slice(&value_word(fp, len / 8).to_le_bytes()[..n]);
}

/// Words compared (or written) per step of the value loops: 64 bytes, one
/// AVX-512 register or two AVX2 ones.
const LANES: usize = 8;

/// Whether `data` is element `elem` of key `key`'s value of `expected_len`
/// bytes, **every byte** compared with what [`fill_value`] writes (one pass,
/// no allocation; see `examples/value_check_cost.rs` for its speed). A
/// zero-copy bug that corrupts the middle of a value, or hands out another
/// value's bytes, fails it.
pub fn check_value(key: u32, elem: u32, expected_len: u32, data: &[u8]) -> bool {
    data.len() == expected_len as usize && difference(fingerprint(key, elem), 0, data) == 0
}

/// [`check_value`] for a value read in pieces, in order (a value left in
/// a peer's memory, copied out a chunk at a time): every piece but the
/// last must be a multiple of 8 bytes long.
#[derive(Clone, Copy, Debug)]
pub struct ValueChecker {
    fp: u64,
    /// Bytes fed so far.
    at: usize,
    /// Non-zero once any byte differed (or a piece broke a word).
    diff: u64,
}

impl ValueChecker {
    /// A check of element `elem` of key `key`'s value.
    pub fn new(key: u32, elem: u32) -> Self {
        ValueChecker { fp: fingerprint(key, elem), at: 0, diff: 0 }
    }

    /// Compares the next `piece` of the value.
    #[inline]
    pub fn feed(&mut self, piece: &[u8]) {
        if !self.at.is_multiple_of(8) {
            // The previous piece ended inside a word: not a valid split.
            self.diff |= 1;
            return;
        }
        self.diff |= difference(self.fp, self.at / 8, piece);
        self.at += piece.len();
    }

    /// Whether every byte fed matched and there were `expected_len`.
    pub fn matches(&self, expected_len: u32) -> bool {
        self.at == expected_len as usize && self.diff == 0
    }
}

/// A value read 64 bytes at a time, by value: one left in a peer's memory,
/// which may not be borrowed as a slice (`PeerSlice::block` of the
/// shared-memory datapath).
pub trait Blocks {
    /// Its length in bytes.
    fn len(&self) -> usize;
    /// Whether it has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Block `i`: bytes `64 i .. 64 i + 64`, zero past the end; `None`
    /// when it cannot be read. Asked for in order, for each `i` below
    /// `len().div_ceil(64)`; make it `#[inline(always)]`, so that the check's
    /// vector loop reads each block straight into a register.
    fn block(&self, i: usize) -> Option<[u8; 64]>;
}

/// [`check_value`] for a value read block by block ([`Blocks`]): every
/// byte compared, each block straight from where it is read (no copy of
/// the value in memory first).
pub fn check_value_blocks(key: u32, elem: u32, expected_len: u32, data: &impl Blocks) -> bool {
    if data.len() != expected_len as usize {
        return false;
    }
    let fp = fingerprint(key, elem);
    simd::blocks_read_difference(fp, data).unwrap_or_else(|| blocks_read_difference(fp, data)) == Some(0)
}

/// [`check_value_blocks`]'s comparison, portably: zero exactly when every
/// block matched, `None` when one could not be read.
fn blocks_read_difference(fp: u64, data: &impl Blocks) -> Option<u64> {
    let mut diff = 0;
    for i in 0..data.len().div_ceil(64) {
        let n = (data.len() - i * 64).min(64);
        diff |= difference(fp, i * 8, &data.block(i)?[..n]);
    }
    Some(diff)
}

/// Zero exactly when `data` equals the words of the value with fingerprint
/// `fp` from word `first_word` on (the last one cut to the length).
///
/// The load generator runs this over every byte of every response (it was a
/// third of its instructions per request), so whole 64-byte steps use
/// AVX-512 or AVX2 where the CPU has them ([`simd`]).
#[inline]
fn difference(fp: u64, first_word: usize, data: &[u8]) -> u64 {
    let whole = data.len() / (LANES * 8) * (LANES * 8);
    let (blocks, rest) = data.split_at(whole);
    // A few steps are cheaper without the call into the vector code.
    let diff = if blocks.len() >= SIMD_FROM { simd::blocks_difference(fp, first_word, blocks) } else { None }
        .unwrap_or_else(|| blocks_difference(fp, first_word, blocks));
    diff | rest_difference(fp, first_word + whole / 8, rest)
}

/// Bytes of whole steps from which [`difference`] uses the vector code (measured
/// with `examples/value_check_cost.rs`).
const SIMD_FROM: usize = 256;

/// [`difference`] over whole 64-byte steps, portably: eight lanes, each
/// with its own running expected word.
fn blocks_difference(fp: u64, first_word: usize, blocks: &[u8]) -> u64 {
    let step = (LANES as u64).wrapping_mul(WORD_MIX);
    let mut want: [u64; LANES] = core::array::from_fn(|j| value_word(fp, first_word + j));
    let mut diff = [0u64; LANES];
    for block in blocks.chunks_exact(LANES * 8) {
        for lane in 0..LANES {
            let word = u64::from_le_bytes(block[lane * 8..lane * 8 + 8].try_into().expect("8 bytes"));
            diff[lane] |= word ^ want[lane];
            want[lane] = want[lane].wrapping_add(step);
        }
    }
    diff.iter().fold(0, |acc, d| acc | d)
}

/// [`difference`] over what follows the whole steps: up to seven words and
/// a cut one.
fn rest_difference(fp: u64, first_word: usize, rest: &[u8]) -> u64 {
    let words = rest.chunks_exact(8);
    let tail = words.remainder();
    let mut left = 0u64;
    for (j, w) in words.enumerate() {
        left |= u64::from_le_bytes(w.try_into().expect("8 bytes")) ^ value_word(fp, first_word + j);
    }
    if !tail.is_empty() {
        let mut got = [0u8; 8];
        got[..tail.len()].copy_from_slice(tail);
        let mut want = value_word(fp, first_word + rest.len() / 8).to_le_bytes();
        want[tail.len()..].fill(0);
        left |= u64::from_le_bytes(got) ^ u64::from_le_bytes(want);
    }
    left
}

/// The check's whole 64-byte steps in AVX-512 (one register per step) or
/// AVX2 (two), chosen by what the CPU reports at run time. The compiler's
/// own vectorization of the portable loop is at the mercy of its cost
/// model: compiled for AVX2 it interleaved steps and was 3x slower.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[allow(unsafe_code)]
mod simd {
    use core::arch::x86_64::{
        __m256i, __m512i, _mm256_add_epi64, _mm256_loadu_si256, _mm256_or_si256, _mm256_set_epi64x,
        _mm256_setzero_si256, _mm256_testz_si256, _mm256_xor_si256, _mm512_add_epi64, _mm512_loadu_si512,
        _mm512_or_si512, _mm512_set1_epi64, _mm512_set_epi64, _mm512_setzero_si512, _mm512_test_epi64_mask,
        _mm512_xor_si512,
    };

    use super::{value_word, LANES, WORD_MIX};

    /// How far each lane's expected word moves over one 64-byte step.
    const STEP: i64 = (LANES as u64).wrapping_mul(WORD_MIX) as i64;

    /// [`super::blocks_difference`] with vector instructions, or `None`
    /// when the CPU has neither AVX-512F nor AVX2 (or under valgrind, which
    /// reports no AVX-512: AVX2 then).
    #[inline]
    pub(super) fn blocks_difference(fp: u64, first_word: usize, blocks: &[u8]) -> Option<u64> {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked on the line above).
            Some(unsafe { avx512(fp, first_word, blocks) })
        } else if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked on the line above).
            Some(unsafe { avx2(fp, first_word, blocks) })
        } else {
            None
        }
    }

    /// [`super::blocks_read_difference`] with vector instructions, or
    /// `None` when the CPU has neither AVX-512F nor AVX2.
    #[inline]
    pub(super) fn blocks_read_difference(fp: u64, data: &impl super::Blocks) -> Option<Option<u64>> {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked on the line above).
            Some(unsafe { avx512_blocks(fp, data) })
        } else if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked on the line above).
            Some(unsafe { avx2_blocks(fp, data) })
        } else {
            None
        }
    }

    /// [`avx512`] over blocks read by value; a short last block takes the
    /// portable tail check. Generic, so that each block's read is compiled
    /// into this loop and goes straight into a register.
    #[target_feature(enable = "avx512f")]
    fn avx512_blocks(fp: u64, data: &impl super::Blocks) -> Option<u64> {
        let w = |j| word(fp, 0, j);
        let mut want: __m512i = _mm512_set_epi64(w(7), w(6), w(5), w(4), w(3), w(2), w(1), w(0));
        let step = _mm512_set1_epi64(STEP);
        let mut diff = _mm512_setzero_si512();
        let whole = data.len() / 64;
        for i in 0..whole {
            let block = data.block(i)?;
            // SAFETY: `block` is 64 readable bytes; the load has no alignment requirement.
            let got = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
            diff = _mm512_or_si512(diff, _mm512_xor_si512(got, want));
            want = _mm512_add_epi64(want, step);
        }
        let tail = tail_difference(fp, data, whole)?;
        Some(u64::from(_mm512_test_epi64_mask(diff, diff)) | tail)
    }

    /// [`avx2`] over blocks read by value (see [`avx512_blocks`]).
    #[target_feature(enable = "avx2")]
    fn avx2_blocks(fp: u64, data: &impl super::Blocks) -> Option<u64> {
        let w = |j| word(fp, 0, j);
        let mut low: __m256i = _mm256_set_epi64x(w(3), w(2), w(1), w(0));
        let mut high: __m256i = _mm256_set_epi64x(w(7), w(6), w(5), w(4));
        let step = _mm256_set_epi64x(STEP, STEP, STEP, STEP);
        let mut diff = _mm256_setzero_si256();
        let whole = data.len() / 64;
        for i in 0..whole {
            let block = data.block(i)?;
            // SAFETY: `block` is 64 readable bytes; the loads have no alignment requirement.
            let (a, b) = unsafe {
                (_mm256_loadu_si256(block.as_ptr().cast()), _mm256_loadu_si256(block.as_ptr().add(32).cast()))
            };
            diff = _mm256_or_si256(diff, _mm256_or_si256(_mm256_xor_si256(a, low), _mm256_xor_si256(b, high)));
            low = _mm256_add_epi64(low, step);
            high = _mm256_add_epi64(high, step);
        }
        let tail = tail_difference(fp, data, whole)?;
        Some(u64::from(_mm256_testz_si256(diff, diff) == 0) | tail)
    }

    /// The short last block after `whole` whole ones, if any, compared
    /// portably.
    fn tail_difference(fp: u64, data: &impl super::Blocks, whole: usize) -> Option<u64> {
        let n = data.len() - whole * 64;
        if n == 0 {
            return Some(0);
        }
        Some(super::rest_difference(fp, whole * 8, &data.block(whole)?[..n]))
    }

    /// Expected word `first + j` as the signed lane the intrinsics take.
    fn word(fp: u64, first: usize, j: usize) -> i64 {
        value_word(fp, first + j) as i64
    }

    /// One 64-byte step per iteration in one AVX-512 register.
    #[target_feature(enable = "avx512f")]
    fn avx512(fp: u64, first: usize, blocks: &[u8]) -> u64 {
        let w = |j| word(fp, first, j);
        let mut want: __m512i = _mm512_set_epi64(w(7), w(6), w(5), w(4), w(3), w(2), w(1), w(0));
        let step = _mm512_set1_epi64(STEP);
        let mut diff = _mm512_setzero_si512();
        for block in blocks.chunks_exact(64) {
            // SAFETY: `block` is 64 readable bytes; the load has no alignment requirement.
            let got = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
            diff = _mm512_or_si512(diff, _mm512_xor_si512(got, want));
            want = _mm512_add_epi64(want, step);
        }
        u64::from(_mm512_test_epi64_mask(diff, diff))
    }

    /// One 64-byte step per iteration in two AVX2 registers.
    #[target_feature(enable = "avx2")]
    fn avx2(fp: u64, first: usize, blocks: &[u8]) -> u64 {
        let w = |j| word(fp, first, j);
        let mut low: __m256i = _mm256_set_epi64x(w(3), w(2), w(1), w(0));
        let mut high: __m256i = _mm256_set_epi64x(w(7), w(6), w(5), w(4));
        let step = _mm256_set_epi64x(STEP, STEP, STEP, STEP);
        let mut diff = _mm256_setzero_si256();
        for block in blocks.chunks_exact(64) {
            // SAFETY: `block` is 64 readable bytes; the loads have no alignment requirement.
            let (a, b) = unsafe {
                (_mm256_loadu_si256(block.as_ptr().cast()), _mm256_loadu_si256(block.as_ptr().add(32).cast()))
            };
            diff = _mm256_or_si256(diff, _mm256_or_si256(_mm256_xor_si256(a, low), _mm256_xor_si256(b, high)));
            low = _mm256_add_epi64(low, step);
            high = _mm256_add_epi64(high, step);
        }
        u64::from(_mm256_testz_si256(diff, diff) == 0)
    }

    #[cfg(test)]
    mod tests {
        use super::super::{blocks_difference, fill_value, fingerprint};
        use crate::tests::whole;

        /// Each vector variant of the block check agrees with the portable
        /// loop on every flipped byte, a short last block included.
        #[test]
        fn every_block_variant_agrees_with_the_portable_loop() {
            type Variant = fn(u64, &[u8]) -> Option<u64>;
            let mut variants: Vec<(&str, Variant)> = Vec::new();
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F (checked on the line above).
                variants.push(("avx512", |f, b| unsafe { super::avx512_blocks(f, &whole(b)) }));
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked on the line above).
                variants.push(("avx2", |f, b| unsafe { super::avx2_blocks(f, &whole(b)) }));
            }
            for len in [64usize, 100, 640, 8000] {
                let mut buf = vec![0u8; len];
                fill_value(3, 1, &mut buf);
                let fp = fingerprint(3, 1);
                for (name, variant) in &variants {
                    assert_eq!(variant(fp, &buf), Some(0), "{name}, len {len}");
                    assert_ne!(variant(fingerprint(3, 2), &buf), Some(0), "{name}: another element");
                    for at in 0..len {
                        buf[at] ^= 0x80;
                        assert_ne!(variant(fp, &buf), Some(0), "{name}: byte {at} of {len}");
                        buf[at] ^= 0x80;
                    }
                }
            }
        }

        /// One implementation of the whole-step check.
        type Variant = fn(u64, usize, &[u8]) -> u64;

        /// Each vector variant the CPU has agrees with the portable loop on
        /// every flipped byte of values of several steps, from several
        /// starting words.
        #[test]
        fn every_variant_agrees_with_the_portable_loop() {
            let mut buf = vec![0u8; 64 * 10];
            fill_value(3, 1, &mut buf);
            let fp = fingerprint(3, 1);
            for first in [0usize, 8, 16] {
                let blocks = &mut buf[first * 8..first * 8 + 64 * 8];
                let mut variants: Vec<(&str, Variant)> = Vec::new();
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has AVX-512F (checked on the line above).
                    variants.push(("avx512", |f, w, b| unsafe { super::avx512(f, w, b) }));
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2 (checked on the line above).
                    variants.push(("avx2", |f, w, b| unsafe { super::avx2(f, w, b) }));
                }
                assert_eq!(blocks_difference(fp, first, blocks), 0);
                for (name, variant) in variants {
                    assert_eq!(variant(fp, first, blocks), 0, "{name} from word {first}");
                    assert_ne!(variant(fp, first + 1, blocks), 0, "{name}: shifted by a word");
                    for at in 0..blocks.len() {
                        blocks[at] ^= 0x80;
                        assert_ne!(variant(fp, first, blocks), 0, "{name}: byte {at} from word {first}");
                        assert_ne!(blocks_difference(fp, first, blocks), 0);
                        blocks[at] ^= 0x80;
                    }
                }
            }
        }
    }
}

/// Portable only: Miri and other architectures.
#[cfg(not(all(target_arch = "x86_64", not(miri))))]
mod simd {
    #[inline]
    pub(super) fn blocks_difference(_: u64, _: usize, _: &[u8]) -> Option<u64> {
        None
    }

    #[inline]
    pub(super) fn blocks_read_difference(_: u64, _: &impl super::Blocks) -> Option<Option<u64>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_check_round_trips() {
        for len in [0usize, 1, 7, 8, 9, 31, 32, 33, 40, 64, 100, 1000, 1023, 4096] {
            let mut buf = vec![0u8; len];
            fill_value(12, 3, &mut buf);
            assert!(check_value(12, 3, len as u32, &buf), "len {len}");
        }
    }

    #[test]
    fn every_byte_of_every_lane_counts() {
        // Lengths with whole 32-byte steps, leftover words and a tail.
        for len in [1usize, 8, 40, 100, 1023] {
            let mut buf = vec![0u8; len];
            fill_value(7, 1, &mut buf);
            for at in 0..len {
                buf[at] ^= 0x01;
                assert!(!check_value(7, 1, len as u32, &buf), "len {len}, byte {at}");
                buf[at] ^= 0x01;
            }
            assert!(check_value(7, 1, len as u32, &buf));
        }
    }

    /// A slice read as [`Blocks`], as a peer's memory is; `fail_at`: the
    /// block that cannot be read, as after a lease expired.
    pub(crate) struct SliceBlocks<'a> {
        bytes: &'a [u8],
        fail_at: Option<usize>,
    }

    impl Blocks for SliceBlocks<'_> {
        fn len(&self) -> usize {
            self.bytes.len()
        }

        fn block(&self, i: usize) -> Option<[u8; 64]> {
            if self.fail_at == Some(i) {
                return None;
            }
            let piece = &self.bytes[i * 64..self.bytes.len().min(i * 64 + 64)];
            let mut block = [0u8; 64];
            block[..piece.len()].copy_from_slice(piece);
            Some(block)
        }
    }

    pub(crate) fn whole(bytes: &[u8]) -> SliceBlocks<'_> {
        SliceBlocks { bytes, fail_at: None }
    }

    #[test]
    fn a_value_read_in_blocks_is_checked_as_a_slice() {
        for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 100, 1000, 1023, 4096, 8000] {
            let mut buf = vec![0u8; len];
            fill_value(9, 4, &mut buf);
            assert!(check_value_blocks(9, 4, len as u32, &whole(&buf)), "len {len}");
            assert!(!check_value_blocks(9, 5, len as u32, &whole(&buf)) || len == 0, "another element, len {len}");
            assert!(!check_value_blocks(9, 4, len as u32 + 1, &whole(&buf)), "a length, len {len}");
            for at in 0..len {
                buf[at] ^= 0x10;
                assert!(!check_value_blocks(9, 4, len as u32, &whole(&buf)), "len {len}, byte {at}");
                buf[at] ^= 0x10;
            }
            if len > 0 {
                let failing = SliceBlocks { bytes: &buf, fail_at: Some((len - 1) / 64) };
                assert!(!check_value_blocks(9, 4, len as u32, &failing), "an unread block, len {len}");
            }
        }
        // The portable loop, which Miri and other CPUs take, alike.
        let mut buf = vec![0u8; 1000];
        fill_value(9, 4, &mut buf);
        let fp = fingerprint(9, 4);
        assert_eq!(blocks_read_difference(fp, &whole(&buf)), Some(0));
        assert_eq!(blocks_read_difference(fp, &SliceBlocks { bytes: &buf, fail_at: Some(3) }), None);
        buf[999] ^= 1;
        assert_ne!(blocks_read_difference(fp, &whole(&buf)), Some(0));
    }

    #[test]
    fn a_value_checked_in_pieces_is_checked_whole() {
        let mut buf = vec![0u8; 4099];
        fill_value(5, 2, &mut buf);
        for piece in [8usize, 32, 1024, 4096] {
            let mut c = ValueChecker::new(5, 2);
            buf.chunks(piece).for_each(|p| c.feed(p));
            assert!(c.matches(4099), "pieces of {piece}");
            assert!(!c.matches(4098));
            for at in [0usize, 1000, 4098] {
                let mut bad = buf.clone();
                bad[at] ^= 0x10;
                let mut c = ValueChecker::new(5, 2);
                bad.chunks(piece).for_each(|p| c.feed(p));
                assert!(!c.matches(4099), "pieces of {piece}, byte {at}");
            }
        }
        // A split inside a word is refused rather than misread.
        let mut c = ValueChecker::new(5, 2);
        c.feed(&buf[..5]);
        c.feed(&buf[5..]);
        assert!(!c.matches(4099));
    }

    #[test]
    fn check_rejects_wrong_key_elem_or_length() {
        let mut buf = vec![0u8; 100];
        fill_value(12, 3, &mut buf);
        assert!(!check_value(13, 3, 100, &buf));
        assert!(!check_value(12, 4, 100, &buf));
        assert!(!check_value(12, 3, 99, &buf));
        assert!(!check_value(12, 3, 101, &buf));
        let mut other = buf.clone();
        other[5] ^= 1;
        assert!(!check_value(12, 3, 100, &other));
        // Every byte counts: the middle and the last.
        for at in [50, 99] {
            let mut other = buf.clone();
            other[at] ^= 0x40;
            assert!(!check_value(12, 3, 100, &other), "byte {at}");
        }
        // Another value's bytes at the same offset, or this value's bytes
        // shifted by a word, do not pass.
        let mut foreign = vec![0u8; 100];
        fill_value(13, 3, &mut foreign);
        let mut spliced = buf.clone();
        spliced[40..48].copy_from_slice(&foreign[40..48]);
        assert!(!check_value(12, 3, 100, &spliced));
        let mut shifted = buf.clone();
        shifted.copy_within(8..16, 16);
        assert!(!check_value(12, 3, 100, &shifted));
        // Key and element are not interchangeable.
        let mut swapped = vec![0u8; 100];
        fill_value(3, 12, &mut swapped);
        assert!(!check_value(12, 3, 100, &swapped));
    }

    /// The defaults' working sets are several times a 105 MiB L3 and fit a
    /// 24 GiB machine with room (printed with `--nocapture`, with the bytes
    /// of the power-of-two pool slots, 64 B at least, that hold them).
    #[test]
    fn default_working_sets() {
        for name in WorkloadSpec::names() {
            let w = WorkloadSpec::default_for(name).unwrap().build().unwrap();
            let bytes = total_value_bytes(w.as_ref());
            let (mut sizes, mut slots, mut elems) = (Vec::new(), 0u64, 0u64);
            for i in 0..if w.preload() { w.num_keys() } else { 0 } {
                w.value_sizes(i, &mut sizes);
                slots += sizes.iter().map(|&s| u64::from(s.max(64).next_power_of_two())).sum::<u64>();
                elems += sizes.len() as u64;
            }
            eprintln!(
                "{:<14} keys {:>7}  values {:>11} B  elements {:>8}  pool slots {:>11} B",
                w.name(),
                w.num_keys(),
                bytes,
                elems,
                slots
            );
            if w.preload() {
                assert!((400e6..=600e6).contains(&(bytes as f64)), "{}: {bytes}", w.name());
            }
        }
    }

    #[test]
    fn fill_pattern_starts_with_the_fingerprint_and_no_word_repeats() {
        let mut buf = vec![0u8; 4096];
        fill_value(1, 0, &mut buf);
        assert_eq!(buf[..8], fingerprint(1, 0).to_le_bytes());
        let words: std::collections::HashSet<&[u8]> = buf.chunks(8).collect();
        assert_eq!(words.len(), 512, "every word differs");
        // A shorter value is a prefix of a longer one.
        let mut short = vec![0u8; 21];
        fill_value(1, 0, &mut short);
        assert_eq!(short[..], buf[..21]);
    }
}

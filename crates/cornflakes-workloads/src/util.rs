//! Small pure helpers: hashing, low-discrepancy sequences, key formatting,
//! the normal quantile and a rank-to-key bijection. Everything here is a
//! deterministic function of its arguments, so that the server (preload) and
//! every client thread agree on keys and values without sharing state.

/// `frac((√5 − 1) / 2) · 2^64`: the golden-ratio Weyl step.
pub(crate) const GOLDEN_STEP: u64 = 0x9E37_79B9_7F4A_7C15;
/// `frac(√3) · 2^64`: a second Weyl step, independent of the golden one.
pub(crate) const SQRT3_STEP: u64 = 0xBB67_AE85_84CA_A73B;

/// The splitmix64 finaliser: a cheap bijective mix of 64 bits.
#[inline]
pub(crate) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Point `r` of the Weyl sequence `frac(1/2 + r · step / 2^64)`, strictly
/// inside (0, 1). With an irrational step every prefix of the sequence is
/// evenly spread over (0, 1), so giving popularity rank `r` the quantile
/// `weyl(r)` makes the hottest keys a fair sample of the size distribution
/// instead of a lucky or unlucky draw.
#[inline]
pub(crate) fn weyl(r: u64, step: u64) -> f64 {
    let x = r.wrapping_mul(step).wrapping_add(1 << 63);
    ((x >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

/// A tiny splitmix64 generator for per-key draws (pure per key: seeded from
/// the key index, so the same on server and clients, and independent of the
/// `rand` crate's algorithms).
pub(crate) struct KeyRng(u64);

impl KeyRng {
    /// A generator for `seed` (e.g. a salted key index).
    pub(crate) fn new(seed: u64) -> Self {
        KeyRng(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_STEP);
        mix64(self.0)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is below 2^-32).
    #[inline]
    pub(crate) fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * u64::from(n)) >> 32) as u32
    }

    /// Uniform in [0, 1).
    #[inline]
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Appends `v` in decimal, zero-padded to at least `width` digits (no
/// allocation, no formatting machinery: keys are built on the hot path).
pub(crate) fn push_decimal(out: &mut Vec<u8>, v: u64, width: usize) {
    // itoa writes two digits per step from a table: keys are built on the
    // load generator's hot path (a digit at a time cost ~10 instructions
    // per digit, ~500 per YCSB key).
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(v).as_bytes();
    out.extend(std::iter::repeat_n(b'0', width.saturating_sub(digits.len())));
    out.extend_from_slice(digits);
}

/// Letters to pad keys with (fixed, pseudo-random), twice a key's length.
const LETTERS: &[u8; 128] = b"oldvtpihymyxryegxwgtsbnvjothziltgjzbmofumufcorezmyeaqknpuievfhzx\
fecztnyjeluunapyzndcmvoarzvxsbopilcjwnjvgsqsfutjbsmrfqvszagwzwhr";

/// Pads `out` to `len` bytes with letters chosen by `h`: one copy from a
/// fixed string, since keys are built on the load generator's hot path. (Keys
/// are unique by their digits; the letters only give them their length.)
pub(crate) fn pad_letters(out: &mut Vec<u8>, len: usize, h: u64) {
    let need = len.saturating_sub(out.len());
    let start = (h % 64) as usize;
    let mut left = need;
    while left > 0 {
        let take = left.min(LETTERS.len() - start);
        out.extend_from_slice(&LETTERS[start..start + take]);
        left -= take;
    }
}

/// The standard normal quantile Φ⁻¹(p) for p in (0, 1), by Acklam's rational
/// approximation (relative error below 1.2e-9, far finer than a byte of
/// value size). Used to turn a key's quantile into a lognormal size.
pub(crate) fn norm_inv(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] =
        [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    const LOW: f64 = 0.02425;
    let p = p.clamp(1e-300, 1.0 - f64::EPSILON);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// A bijection between popularity ranks and key indices of `0..n`:
/// `key = rank · a mod n` with `a ≈ 0.618 n` coprime to `n`. It spreads the
/// hot ranks over the key space, so that preloading keys in index order
/// does not put the hot values next to each other in memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scatter {
    n: u64,
    a: u64,
    a_inv: u64,
}

impl Scatter {
    /// The bijection for `n ≥ 1` keys.
    pub(crate) fn new(n: u32) -> Self {
        let n = u64::from(n.max(1));
        let mut a = ((n as f64) * 0.618_033_988_749_895) as u64 % n;
        while gcd(a, n) != 1 {
            a = (a + 1) % n;
        }
        Scatter { n, a, a_inv: mod_inverse(a, n) }
    }

    /// The key index of popularity rank `rank` (0 = hottest).
    #[inline]
    pub(crate) fn key_of(&self, rank: u32) -> u32 {
        (u64::from(rank) * self.a % self.n) as u32
    }

    /// The popularity rank of key index `key`.
    #[inline]
    pub(crate) fn rank_of(&self, key: u32) -> u32 {
        (u64::from(key) * self.a_inv % self.n) as u32
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `a⁻¹ mod n` for `gcd(a, n) = 1` (extended Euclid).
fn mod_inverse(a: u64, n: u64) -> u64 {
    if n == 1 {
        return 0;
    }
    let (mut r0, mut r1) = (i128::from(n), i128::from(a));
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (t0, t1) = (t1, t0 - q * t1);
    }
    t0.rem_euclid(i128::from(n)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_padding() {
        let mut v = Vec::new();
        push_decimal(&mut v, 42, 5);
        assert_eq!(v, b"00042");
        v.clear();
        push_decimal(&mut v, 123_456, 3);
        assert_eq!(v, b"123456");
        v.clear();
        push_decimal(&mut v, u64::MAX, 0);
        assert_eq!(v, u64::MAX.to_string().as_bytes());
        v.clear();
        push_decimal(&mut v, 0, 0);
        assert_eq!(v, b"0");
    }

    #[test]
    fn normal_quantile() {
        assert!(norm_inv(0.5).abs() < 1e-12);
        assert!((norm_inv(0.975) - 1.959_963_984_540_054).abs() < 1e-8);
        assert!((norm_inv(0.68) - 0.467_698_799_114_508_6).abs() < 1e-8);
        assert!((norm_inv(1e-6) + 4.753_424_308_822_899).abs() < 1e-7);
        for p in [0.001, 0.01, 0.1, 0.3, 0.49] {
            assert!((norm_inv(p) + norm_inv(1.0 - p)).abs() < 1e-8, "{p}");
        }
    }

    #[test]
    fn weyl_is_inside_and_spread() {
        let n = 10_000u64;
        let mut below = [0u32; 10];
        for r in 0..n {
            let u = weyl(r, GOLDEN_STEP);
            assert!(u > 0.0 && u < 1.0);
            below[(u * 10.0) as usize] += 1;
        }
        assert!(below.iter().all(|&c| c.abs_diff(1000) <= 2), "{below:?}");
        assert!((weyl(0, GOLDEN_STEP) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn scatter_is_a_bijection() {
        for n in [1u32, 2, 3, 10, 97, 1000, 4096, 160_000] {
            let s = Scatter::new(n);
            let mut seen = vec![false; n as usize];
            for r in 0..n {
                let k = s.key_of(r);
                assert!(!seen[k as usize], "n={n} r={r}");
                seen[k as usize] = true;
                assert_eq!(s.rank_of(k), r);
            }
        }
    }

    #[test]
    fn key_rng_below_is_in_range() {
        let mut rng = KeyRng::new(7);
        let mut hits = [0u32; 5];
        for _ in 0..5000 {
            hits[rng.below(5) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| (900..1100).contains(&h)), "{hits:?}");
    }
}

/// Keys a [`KeyTable`] holds at most: 16 Mi, 32 MiB of CDN sizes or 64 MiB
/// of Twitter ones, built in under a second; keys past it are worked out
/// each time (as every key was before the tables).
pub(crate) const KEY_TABLE_MAX: u32 = 1 << 24;

/// A per-key quantity worked out once, for the first [`KEY_TABLE_MAX`]
/// keys: the load generator looks it up for every response it checks.
/// Shared by the generators of every thread.
#[derive(Clone, Debug)]
pub(crate) struct KeyTable<T>(std::sync::Arc<[T]>);

impl<T: Copy> KeyTable<T> {
    /// `of(key)` for the keys below `keys`, at most `max` of them
    /// ([`KEY_TABLE_MAX`] but in tests).
    pub(crate) fn new(keys: u32, max: u32, of: impl Fn(u32) -> T) -> Self {
        KeyTable((0..keys.min(max)).map(of).collect())
    }

    /// The value for `key`: looked up, or `of(key)` for a key past the table.
    #[inline]
    pub(crate) fn get_or(&self, key: u32, of: impl FnOnce(u32) -> T) -> T {
        match self.0.get(key as usize) {
            Some(&v) => v,
            None => of(key),
        }
    }

    /// Keys held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

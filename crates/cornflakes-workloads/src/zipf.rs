//! A fast sampler of Zipf popularity ranks: `P(rank k) ∝ k^-s` for k in
//! 1..=n. The hot head (most requests) comes from a cumulative table, found
//! through a guide table (Chen and Asau's cutpoints: one or two steps instead
//! of a binary search), the tail from rejection-inversion on `[HEAD, n]`, so a
//! draw costs a few tens of nanoseconds and the table stays small whatever
//! `n` is. (The load generator shares one core with nothing else but its
//! own sending and checking, so every draw counts.)

use rand::Rng;

/// Ranks kept in the table: most of the mass for the exponents used here
/// (73 % at s = 1.1 over 160 k keys, 69 % at s = 0.8 over 20 k objects).
const HEAD: u32 = 4096;

/// Zipf(`s`) over ranks 1..=`n`, returned 0-based.
#[derive(Clone, Debug)]
pub(crate) struct ZipfRanks {
    /// `head_cum[k]` = P(rank ≤ k + 1), for the first `head_cum.len()` ranks.
    head_cum: Box<[f64]>,
    /// `guide[j]` = the first head rank whose `head_cum` exceeds `j / len`.
    guide: Box<[u32]>,
    /// P(rank in the head) = the table's last entry.
    head_share: f64,
    n: u32,
    s: f64,
    /// Envelope integral at the head's end and at `n` (see [`Self::tail`]).
    g_lo: f64,
    g_hi: f64,
}

impl ZipfRanks {
    /// The sampler for `n ≥ 1` ranks and exponent `s ≥ 0`.
    pub(crate) fn new(n: u32, s: f64) -> Self {
        let head = n.min(HEAD);
        let mut cum: Vec<f64> = Vec::with_capacity(head as usize);
        let mut acc = 0.0;
        for k in 1..=head {
            acc += f64::from(k).powf(-s);
            cum.push(acc);
        }
        let total = acc + tail_sum(head, n, s);
        for c in &mut cum {
            *c /= total;
        }
        let head_share = cum.last().copied().unwrap_or(0.0);
        let m = cum.len();
        let guide = (0..m).map(|j| cum.partition_point(|&c| c <= j as f64 / m as f64).min(m - 1) as u32).collect();
        let g = |y: f64| envelope(y, s);
        ZipfRanks {
            head_cum: cum.into_boxed_slice(),
            guide,
            head_share,
            n,
            s,
            g_lo: g(f64::from(head)),
            g_hi: g(f64::from(n)),
        }
    }

    /// A rank in `0..n` (0 = most popular).
    #[inline]
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let u: f64 = rng.random();
        if u < self.head_share {
            let m = self.head_cum.len();
            let mut i = self.guide[((u * m as f64) as usize).min(m - 1)] as usize;
            while i + 1 < m && self.head_cum[i] <= u {
                i += 1;
            }
            i as u32
        } else {
            self.tail(rng) - 1
        }
    }

    /// A rank in `HEAD + 1..=n` (1-based) with P ∝ k^-s, by
    /// rejection-inversion: draw `y` in `[HEAD, n)` with density ∝ y^-s
    /// (inverting the envelope integral), round up to `k = ⌊y⌋ + 1`, accept
    /// with probability `(y / k)^s` ≤ 1. A candidate `k` comes from
    /// `[k − 1, k)` and survives with total weight ∫ y^-s (y/k)^s dy = k^-s.
    fn tail<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        loop {
            let v = self.g_lo + (self.g_hi - self.g_lo) * rng.random::<f64>();
            let y = envelope_inv(v, self.s);
            let k = (y.floor() + 1.0).min(f64::from(self.n));
            // (y/k)^s = (1 − d/k)^s with d = k − y in (0, 1] is at least
            // 1 − max(s, 1)·d/k (Bernoulli's inequality): accept below that
            // without computing the power, which for k > HEAD is nearly always.
            let u = rng.random::<f64>();
            if u < 1.0 - self.s.max(1.0) * (k - y) / k || u < (y / k).powf(self.s) {
                return k as u32;
            }
        }
    }
}

/// `∫_1^y x^-s dx` for y ≥ 1 (any increasing antiderivative works: only
/// differences and the inverse are used).
#[inline]
fn envelope(y: f64, s: f64) -> f64 {
    if (s - 1.0).abs() < 1e-12 {
        y.ln()
    } else {
        (y.powf(1.0 - s) - 1.0) / (1.0 - s)
    }
}

/// The inverse of [`envelope`].
#[inline]
fn envelope_inv(v: f64, s: f64) -> f64 {
    if (s - 1.0).abs() < 1e-12 {
        v.exp()
    } else {
        (1.0 + v * (1.0 - s)).powf(1.0 / (1.0 - s))
    }
}

/// `Σ_{k=a+1}^{b} k^-s` by Euler–Maclaurin (a ≥ 1; the next correction term
/// is below 1e-20 for a = 4096), or 0 when `b ≤ a`.
fn tail_sum(a: u32, b: u32, s: f64) -> f64 {
    if b <= a {
        return 0.0;
    }
    if b - a <= 64 {
        return (a + 1..=b).map(|k| f64::from(k).powf(-s)).sum();
    }
    let (lo, hi) = (f64::from(a + 1), f64::from(b));
    let f = |x: f64| x.powf(-s);
    let f1 = |x: f64| -s * x.powf(-s - 1.0);
    let f3 = |x: f64| -s * (s + 1.0) * (s + 2.0) * x.powf(-s - 3.0);
    let integral = envelope(hi, s) - envelope(lo, s);
    integral + (f(lo) + f(hi)) / 2.0 + (f1(hi) - f1(lo)) / 12.0 - (f3(hi) - f3(lo)) / 720.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn tail_sum_matches_direct_summation() {
        for (a, b, s) in [(4096u32, 20_000u32, 0.8), (4096, 160_000, 1.1004), (4096, 50_000, 1.0), (64, 1000, 0.5)] {
            let direct: f64 = (a + 1..=b).map(|k| f64::from(k).powf(-s)).sum();
            let em = tail_sum(a, b, s);
            assert!((em / direct - 1.0).abs() < 1e-12, "{a} {b} {s}: {em} vs {direct}");
        }
    }

    /// Observed shares of single ranks and of rank ranges against the exact
    /// probabilities, for a head-only, a mixed and an s = 1 sampler.
    #[test]
    fn samples_follow_zipf() {
        for (n, s) in [(1000u32, 1.1), (20_000, 0.8), (160_000, 1.1004), (30_000, 1.0), (1, 0.9)] {
            let z = ZipfRanks::new(n, s);
            let weights: Vec<f64> = (1..=n).map(|k| f64::from(k).powf(-s)).collect();
            let total: f64 = weights.iter().sum();
            let mut rng = SmallRng::seed_from_u64(u64::from(n));
            let draws = 400_000u32;
            let mut counts = vec![0u32; n as usize];
            for _ in 0..draws {
                counts[z.sample(&mut rng) as usize] += 1;
            }
            let check = |what: &str, lo: usize, hi: usize| {
                let p: f64 = weights[lo..hi].iter().sum::<f64>() / total;
                let got = f64::from(counts[lo..hi].iter().sum::<u32>()) / f64::from(draws);
                let tol = 5.0 * (p * (1.0 - p) / f64::from(draws)).sqrt() + 1e-9;
                assert!((got - p).abs() <= tol, "n={n} s={s} {what} [{lo}, {hi}): {got} vs {p}");
            };
            let n = n as usize;
            for k in [0usize, 1, 2, 9, 99].into_iter().filter(|&k| k < n) {
                check("rank", k, k + 1);
            }
            let edges = [0usize, 10, 100, 1000, 4095, 4096, 4097, 10_000, 50_000, n];
            for w in edges.windows(2) {
                let (lo, hi) = (w[0].min(n), w[1].min(n));
                if lo < hi {
                    check("ranks", lo, hi);
                }
            }
        }
    }
}

//! The `long double` arithmetic of Redis's INCRBYFLOAT and HINCRBYFLOAT,
//! on x86-64: the x87 80-bit format (a 64-bit significand, which `f64`
//! cannot reproduce), numbers read as glibc's `strtold` reads them with
//! Redis's checks (`string2ld`), sums rounded to nearest even, and results
//! printed as Redis's `ld2string` prints them (`%.17Lf`, trailing zeros
//! dropped). The arithmetic is LLVM's APFloat, ported (`rustc_apfloat`);
//! the printing an exact decimal expansion. [`read_float`] reads scores
//! (`strtod`'s grammar, hexadecimal included) for the sorted sets too.

use num_bigint::BigUint;
use rustc_apfloat::ieee::X87DoubleExtended;
use rustc_apfloat::{Float, Round, Status};

/// An x87 extended-precision number.
#[derive(Clone, Copy, Debug)]
pub(super) struct LongDouble(X87DoubleExtended);

/// What Redis answers for a number it cannot read.
pub(super) const NOT_A_FLOAT: &str = "ERR value is not a valid float";

/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer text is not a number to it.
const MAX_CHARS: usize = 5 * 1024;

impl LongDouble {
    pub(super) const ZERO: LongDouble = LongDouble(X87DoubleExtended::ZERO);

    /// `text` as Redis's `string2ld` reads it: what `strtold` takes whole
    /// (decimal, hexadecimal, `inf`, `infinity`, with a sign), never NaN,
    /// nothing before or after, no overflow or underflow to zero.
    pub(super) fn parse(text: &[u8]) -> Option<LongDouble> {
        if text.len() >= MAX_CHARS {
            return None;
        }
        read_in_range(text).map(LongDouble)
    }

    /// `self + other`, rounded to nearest even; `None` when the sum is NaN
    /// or infinite (Redis refuses to store it).
    pub(super) fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        let sum = self.0.add_r(other.0, Round::NearestTiesToEven).value;
        (!sum.is_nan() && !sum.is_infinite()).then_some(LongDouble(sum))
    }

    /// Redis 7.0's blocking timeout of these seconds: `(long long)
    /// ceill(secs * 1000.0)` in milliseconds; `None` where the conversion
    /// does not fit (x87 then gives `LLONG_MIN`, a negative timeout).
    pub(super) fn ceil_millis(self) -> Option<i64> {
        let thousand = X87DoubleExtended::from_i128(1000).value;
        let ms = self.0.mul_r(thousand, Round::NearestTiesToEven).value;
        let converted = ms.to_i128_r(64, Round::TowardPositive, &mut false);
        (!converted.status.contains(Status::INVALID_OP)).then_some(converted.value as i64)
    }

    /// Whether it is neither NaN nor infinite.
    pub(super) fn is_finite(self) -> bool {
        self.0.is_finite()
    }
}

impl std::fmt::Display for LongDouble {
    /// Redis's `ld2string(.., LD_STR_HUMAN)`: `%.17Lf` (17 decimals, the
    /// last rounded to nearest even, as glibc does), trailing zeros and a
    /// trailing dot dropped, `-0` printed `0`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const DECIMALS: usize = 17;
        if !self.0.is_finite() {
            return f.write_str(if self.0.is_nan() {
                "nan"
            } else if self.0.is_negative() {
                "-inf"
            } else {
                "inf"
            });
        }
        let bits = self.0.to_bits();
        let negative = (bits >> 79) & 1 == 1;
        let exponent = ((bits >> 64) & 0x7fff) as i64;
        let significand = BigUint::from(bits as u64);
        // |value| = significand * 2^power (a subnormal's exponent is that
        // of the smallest normal).
        let power = exponent.max(1) - 16383 - 63;
        let scaled = significand * BigUint::from(10u32).pow(DECIMALS as u32);
        let units = if power >= 0 {
            scaled << power as u64
        } else {
            let shift = power.unsigned_abs();
            let quotient: BigUint = &scaled >> shift;
            let remainder = &scaled - (&quotient << shift);
            let half = BigUint::from(1u32) << (shift - 1);
            if remainder > half || (remainder == half && quotient.bit(0)) {
                quotient + 1u32
            } else {
                quotient
            }
        };
        let digits = format!("{units:0>width$}", width = DECIMALS + 1);
        let (whole, fraction) = digits.split_at(digits.len() - DECIMALS);
        let fraction = fraction.trim_end_matches('0');
        let zero = whole == "0" && fraction.is_empty();
        if negative && !zero {
            f.write_str("-")?;
        }
        f.write_str(whole)?;
        if !fraction.is_empty() {
            write!(f, ".{fraction}")?;
        }
        Ok(())
    }
}

/// `text` as Redis's `string2d` and `string2ld` read it: what `strtod`
/// (`strtold`) takes whole, not empty, no space before it, never NaN, no
/// overflow or underflow to zero.
pub(super) fn read_in_range<F: Float>(text: &[u8]) -> Option<F> {
    let text = std::str::from_utf8(text).ok()?;
    match read_float::<F>(text)? {
        (v, false) => Some(v),
        (_, true) => None,
    }
}

/// What glibc's `strtod` (for `F` = `Double`) or `strtold` (`X87DoubleExtended`)
/// make of `text` when they take all of it: decimal or hexadecimal (its
/// exponent optional), `inf` or `infinity`, any case, an optional sign; no
/// space around it, never NaN. With the value, whether `strtod` would set
/// `ERANGE` in the way Redis refuses: past the range, or so small it became
/// 0 (a subnormal result is kept).
pub(super) fn read_float<F: Float>(text: &str) -> Option<(F, bool)> {
    let text = text.to_ascii_lowercase();
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, &text[..]),
    };
    let (value, out_of_range) = if body == "inf" || body == "infinity" {
        (F::INFINITY, false)
    } else {
        // strtod's grammar (APFloat's is looser: `1e` and hexadecimal
        // without an exponent) checked here; then APFloat converts.
        let (hex, digits) = match body.strip_prefix("0x") {
            Some(rest) => (true, rest),
            None => (false, body),
        };
        let (significand, exponent) = match digits.split_once(if hex { 'p' } else { 'e' }) {
            Some((s, e)) => (s, Some(e)),
            None => (digits, None),
        };
        let is_digit = |c: char| if hex { c.is_ascii_hexdigit() } else { c.is_ascii_digit() };
        let (whole, fraction) = significand.split_once('.').unwrap_or((significand, ""));
        let well_formed = !(whole.is_empty() && fraction.is_empty())
            && whole.chars().all(is_digit)
            && fraction.chars().all(is_digit)
            && exponent.is_none_or(|e| {
                let e = e.strip_prefix(['+', '-']).unwrap_or(e);
                !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
            });
        if !well_formed {
            return None;
        }
        let canonical = if hex {
            format!("0x{significand}p{}", exponent.unwrap_or("0"))
        } else {
            shortened_decimal(whole, fraction, exponent, F::PRECISION).unwrap_or_else(|| digits.to_owned())
        };
        let parsed = F::from_str_r(&canonical, Round::NearestTiesToEven).ok()?;
        let nonzero_digits = significand.bytes().any(|b| b != b'0' && b != b'.');
        let out_of_range = parsed.status.contains(Status::OVERFLOW) || (parsed.value.is_zero() && nonzero_digits);
        (parsed.value, out_of_range)
    };
    Some((if negative { -value } else { value }, out_of_range))
}

/// A decimal number of more significant digits than can change how it
/// rounds, written with fewer: the first [`decisive_digits`] of them and,
/// when any digit after those is not 0, one more `1` (it keeps the number
/// on the same side of every halfway point), so that converting it costs
/// what its first digits cost (APFloat's conversion is quadratic in the
/// digits; a score of a million digits would stall the server for a
/// second). `None` when the number is short enough as it is.
fn shortened_decimal(whole: &str, fraction: &str, exponent: Option<&str>, precision: usize) -> Option<String> {
    let keep = decisive_digits(precision);
    if whole.len() + fraction.len() <= keep {
        return None;
    }
    let digits = || whole.bytes().chain(fraction.bytes());
    let first = digits().position(|d| d != b'0')?;
    // The value is 0.d1 d2 d3 ... times 10^point (d1 the first nonzero).
    let point = whole.len() as i64 - first as i64;
    let mut kept: String = digits().skip(first).take(keep).map(char::from).collect();
    if digits().skip(first + keep).any(|d| d != b'0') {
        kept.push('1');
    }
    // An exponent past any format's range stays past it (saturated: the
    // text may have more digits than an i64).
    let exp: i64 = match exponent {
        None => 0,
        Some(e) => {
            let (negative, digits) = match e.strip_prefix('-') {
                Some(d) => (true, d),
                None => (false, e.strip_prefix('+').unwrap_or(e)),
            };
            let magnitude = digits.bytes().fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
            if negative {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    let exp = exp.saturating_add(point).clamp(-1_000_000, 1_000_000);
    Some(format!("0.{kept}e{exp}"))
}

/// Significant digits that can decide how a decimal number rounds to a
/// binary format of `precision` bits: every halfway point between two
/// doubles has at most 767 (binary64), between two x87 numbers at most
/// about 11 500 (which Redis's 5120-character limit on long doubles keeps
/// out of reach).
fn decisive_digits(precision: usize) -> usize {
    if precision <= 53 {
        800
    } else {
        12_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> Option<String> {
        let (a, b) = (LongDouble::parse(a.as_bytes())?, LongDouble::parse(b.as_bytes())?);
        a.checked_add(b).map(|s| s.to_string())
    }

    #[test]
    fn sums_print_as_redis_7_0_on_x86_64_prints_them() {
        // Answers of redis-server 7.0 (x86-64) to INCRBYFLOAT.
        assert_eq!(sum("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(sum("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(sum("5.0e3", "2.0e2").as_deref(), Some("5200"));
        assert_eq!(sum("3", "-3").as_deref(), Some("0"));
        assert_eq!(sum("-0", "-0").as_deref(), Some("0"));
        assert_eq!(sum("1e-20", "0").as_deref(), Some("0"));
        assert_eq!(sum("-1e-20", "0").as_deref(), Some("0"));
        assert_eq!(sum("1e30", "0").as_deref(), Some("1000000000000000000024696061952"));
        assert_eq!(sum("0x10", "0x1p-1").as_deref(), Some("16.5"));
        assert_eq!(sum("inf", "1"), None);
        assert_eq!(sum("1e4932", "1e4932"), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // million-digit strings: minutes under Miri, and nothing unsafe
    fn long_decimals_round_as_their_every_digit_says() {
        use rustc_apfloat::ieee::Double;
        let read = |t: &str| read_float::<Double>(t).map(|(v, _)| f64::from_bits(v.to_bits() as u64));
        // Halfway between 1 and the next double (1 + 2^-53), then a
        // difference a million digits on: it decides the rounding.
        let half = "1.00000000000000011102230246251565404236316680908203125";
        let above = format!("{half}{}1", "0".repeat(1_000_000));
        assert_eq!(read(half), Some(1.0), "a tie rounds to even");
        assert_eq!(read(&above), Some(1.0 + f64::EPSILON), "just above the tie rounds up");
        let below = format!("1.00000000000000011102230246251565404236316680908203124{}", "9".repeat(1_000_000));
        assert_eq!(read(&below), Some(1.0));
        // Leading zeros, a point late, exponents past any range.
        assert_eq!(read(&format!("{}1e-{}", "0".repeat(2000), 0)), Some(1.0));
        assert_eq!(read(&format!("{}e-1000", "1".repeat(2000))).map(f64::is_infinite), Some(true));
        assert_eq!(read(&format!("{}e-1990", "1".repeat(2000))), Some(1.111_111_111_111_111_1e9));
        assert_eq!(read(&format!("0.{}5e99999999999999999999", "0".repeat(900))).map(f64::is_infinite), Some(true));
        let (tiny, out_of_range) = read_float::<Double>(&format!("{}e-99999999999999999999", "7".repeat(900))).unwrap();
        assert!(tiny.is_zero() && out_of_range, "underflows to 0, as strtod's ERANGE");
    }

    #[test]
    fn a_tie_at_the_seventeenth_decimal_rounds_to_even() {
        // 2^-18 = 0.000003814697265625: 17 decimals leave ...62|5.
        let v = LongDouble::parse(b"0x1p-18").unwrap();
        assert_eq!(v.to_string(), "0.00000381469726562");
        // 3 * 2^-18 = 0.000011444091796875: ...87|5 rounds up.
        assert_eq!(LongDouble::parse(b"0x3p-18").unwrap().to_string(), "0.00001144409179688");
    }

    #[test]
    fn text_strtold_would_not_take_whole_is_refused() {
        for bad in [
            "",
            " 1",
            "1 ",
            "1e",
            "1e+",
            "e5",
            ".",
            "+",
            "-",
            "0x",
            "0x.",
            "0xp1",
            "0x1p",
            "0x1g",
            "nan",
            "-nan",
            "nan(1)",
            "infx",
            "infinit",
            "1.2.3",
            "1e400000",
            "1e-400000",
            "--1",
            "1,5",
            "١",
        ] {
            assert!(LongDouble::parse(bad.as_bytes()).is_none(), "{bad:?} was taken");
        }
        for good in
            ["1", "+1", "-1.", ".5", "1e5", "1E-5", "0x1.8p1", "0X.8", "0x10", "INF", "-Infinity", "0e99999", "1e-4940"]
        {
            assert!(LongDouble::parse(good.as_bytes()).is_some(), "{good:?} was refused");
        }
    }
}

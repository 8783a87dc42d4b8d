//! Sums in log space: `ln(e^a + e^b)` and `ln Σ e^{x_i}`.

/// Below this difference from the maximum a term's `e^{x − m}` is under `1e-307`: it cannot
/// change a sum that includes `e^0 = 1`, and `exp` would take its slow underflow path.
const UNDERFLOW: f64 = -707.0;

/// `ln(e^a + e^b)`, computed as `max + ln(1 + e^{min − max})` so that neither exponential
/// overflows or underflows; exact at `−∞` (`log_add_exp(−∞, b) = b`). NaN in, NaN out.
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        // Also covers a = b = −∞.
        return hi;
    }
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if lo - hi < UNDERFLOW {
        // e^{lo−hi} < 1e-307: hi + ln(1 + it) rounds to hi (and the slow underflow path of
        // `exp` is skipped).
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// `ln Σ e^{x_i}` over a slice; see [`log_sum_exp_iter`]. `−∞` for an empty or all-`−∞` slice.
pub fn log_sum_exp(xs: &[f64]) -> f64 {
    log_sum_exp_iter(xs.iter().copied())
}

/// `ln Σ e^{x_i}` with the maximum `m` factored out, `m + ln Σ e^{x_i − m}`, and the sum taken
/// with Neumaier's compensated summation (so long sums of terms of mixed size lose no accuracy
/// to their order). The iterator is traversed twice (once for the maximum). `−∞` for an empty or
/// all-`−∞` sequence; `+∞` if any term is `+∞`; NaN if any term is NaN.
pub fn log_sum_exp_iter<I: Iterator<Item = f64> + Clone>(xs: I) -> f64 {
    let mut max = f64::NEG_INFINITY;
    for x in xs.clone() {
        if x.is_nan() {
            return f64::NAN;
        }
        max = max.max(x);
    }
    if max.is_infinite() {
        return max;
    }
    let mut sum = NeumaierSum::default();
    for x in xs {
        if x - max < UNDERFLOW {
            continue;
        }
        sum.add((x - max).exp());
    }
    max + sum.value().ln()
}

/// Neumaier's compensated summation: the running sum and the rounding error it has dropped, so a
/// long sum of terms of mixed size is accurate to a few ulps whatever their order.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeumaierSum {
    sum: f64,
    compensation: f64,
}

impl NeumaierSum {
    /// Adds `t`.
    #[inline]
    pub fn add(&mut self, t: f64) {
        let n = self.sum + t;
        self.compensation += if self.sum.abs() >= t.abs() {
            (self.sum - n) + t
        } else {
            (t - n) + self.sum
        };
        self.sum = n;
    }

    /// The compensated sum so far.
    pub fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_add_and_lse() {
        assert!((log_add_exp(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_add_exp(f64::NEG_INFINITY, 1.0), 1.0);
        assert_eq!(log_add_exp(1.0, f64::NEG_INFINITY), 1.0);
        assert_eq!(
            log_add_exp(f64::NEG_INFINITY, f64::NEG_INFINITY),
            f64::NEG_INFINITY
        );
        assert!(log_add_exp(f64::NAN, 1.0).is_nan());
        assert!((log_sum_exp(&[1000.0, 1000.0]) - 1000.0 - 2f64.ln()).abs() < 1e-12);
        assert_eq!(log_sum_exp(&[]), f64::NEG_INFINITY);
        assert_eq!(log_sum_exp(&[f64::NEG_INFINITY; 3]), f64::NEG_INFINITY);
        assert!(log_sum_exp(&[0.0, f64::NAN]).is_nan());
    }

    #[test]
    fn compensated_sum_keeps_small_terms() {
        // One term of 1 and 10⁶ terms of 10⁻¹⁶: the naive sum would drop every small term and
        // return 0; the error left is the rounding of 1 + 10⁻¹⁰ before the final log.
        let mut xs = vec![0.0];
        xs.extend(std::iter::repeat_n((1e-16f64).ln(), 1_000_000));
        let want = (1e-10f64).ln_1p();
        let got = log_sum_exp(&xs);
        assert!((got - want).abs() < 2e-16, "{got}");
        // Order does not matter.
        let rev = log_sum_exp_iter(xs.iter().rev().copied());
        assert!((rev - want).abs() < 2e-16, "{rev}");
    }
}

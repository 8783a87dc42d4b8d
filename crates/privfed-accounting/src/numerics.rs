//! Private numerics: normal CDF in log space, log-sum-exp, log binomials, the regularized
//! incomplete beta function.
//!
//! These can later be replaced by `privfed_mechanisms::special::{norm_cdf, ln_norm_cdf,
//! ln_beta_inc}` once that module lands; until then they live here, tested against mpmath
//! (fixtures in `tests/data/special_reference.json`).

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// `ln(e^a + e^b)`, exact at `-inf`.
pub(crate) fn log_add(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + libm::log1p((lo - hi).exp())
}

/// `ln Σ e^{x_i}` (returns `-inf` for an empty or all `-inf` slice).
pub(crate) fn log_sum_exp(xs: &[f64]) -> f64 {
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m.is_infinite() {
        return m;
    }
    m + xs.iter().map(|&x| (x - m).exp()).sum::<f64>().ln()
}

/// `ln C(n, k)` for real `n ≥ k ≥ 0` via `lgamma`; exact 0 at the ends.
pub(crate) fn log_comb(n: f64, k: f64) -> f64 {
    if k == 0.0 || k == n {
        return 0.0;
    }
    libm::lgamma(n + 1.0) - libm::lgamma(k + 1.0) - libm::lgamma(n - k + 1.0)
}

/// Standard normal CDF `Φ(x) = ½ erfc(−x/√2)`.
pub(crate) fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// A point `x` together with its nearer normal tail: `Φ(x)` if `x ≤ 0`, `Φ̄(x) = Φ(−x)` if
/// `x > 0`. Differences `Φ(b) − Φ(a)` of two such points are taken from the nearer tail, which
/// keeps tiny differences far in either tail accurate, with one `erfc` per point.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NormPoint {
    x: f64,
    tail: f64,
}

impl NormPoint {
    pub(crate) fn new(x: f64) -> Self {
        let tail = if x <= 0.0 { norm_cdf(x) } else { norm_cdf(-x) };
        Self { x, tail }
    }

    /// `Φ(b) − Φ(a)` for `a = self ≤ b`.
    pub(crate) fn diff_to(&self, b: &NormPoint) -> f64 {
        if self.x >= b.x {
            0.0
        } else if self.x > 0.0 {
            (self.tail - b.tail).max(0.0)
        } else if b.x <= 0.0 {
            (b.tail - self.tail).max(0.0)
        } else {
            (1.0 - b.tail - self.tail).max(0.0)
        }
    }
}

/// `ln Φ(x)`, accurate in the far lower tail (asymptotic series below −30, where `erfc`
/// would underflow near −38.5) and near 1 (`log1p(−Φ(−x))`).
pub(crate) fn ln_norm_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x > 0.0 {
        return libm::log1p(-norm_cdf(-x));
    }
    if x > -30.0 {
        return norm_cdf(x).ln();
    }
    if x == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    // Φ(x) = φ(x)/|x| · (1 − 1/x² + 3/x⁴ − 15/x⁶ + …), terms (2n−1)!!/x^{2n}; at |x| ≥ 30 the
    // tenth term is below 1e-20 relative.
    let x2 = x * x;
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..=10 {
        term *= -((2 * n - 1) as f64) / x2;
        sum += term;
    }
    -0.5 * x2 - (-x).ln() - 0.5 * (2.0 * PI).ln() + sum.ln()
}

/// `ln B(a, b)`.
pub(crate) fn ln_beta(a: f64, b: f64) -> f64 {
    if a > 1e3 && b < 10.0 {
        // ln B = lgamma(b) − [lgamma(a+b) − lgamma(a)], the bracket from Stirling's series so
        // that the two large lgamma values do not cancel.
        libm::lgamma(b) - lgamma_diff(a, b)
    } else if b > 1e3 && a < 10.0 {
        libm::lgamma(a) - lgamma_diff(b, a)
    } else {
        libm::lgamma(a) + libm::lgamma(b) - libm::lgamma(a + b)
    }
}

/// `lgamma(a+b) − lgamma(a)` for large `a` (≥ 1e3) and small `b`, via Stirling's series
/// `lgamma(x) = (x−½)ln x − x + ½ln 2π + 1/(12x) − 1/(360x³) + 1/(1260x⁵)`.
fn lgamma_diff(a: f64, b: f64) -> f64 {
    let c = |x: f64| {
        let x2 = x * x;
        1.0 / (12.0 * x) - 1.0 / (360.0 * x * x2) + 1.0 / (1260.0 * x * x2 * x2)
    };
    // (a+b−½)ln(a+b) − (a−½)ln a − b = (a−½)·ln(1+b/a) + b·ln(a+b) − b
    (a - 0.5) * libm::log1p(b / a) + b * (a + b).ln() - b + c(a + b) - c(a)
}

/// `ln I_x(a, b)`, the log of the regularized incomplete beta function, by the continued
/// fraction of `I_x(a,b)` (modified Lentz) with the prefactor `x^a (1−x)^b / (a B(a,b))` in
/// log space; the symmetry `I_x(a,b) = 1 − I_{1−x}(b,a)` when `x > (a+1)/(a+b+2)`. The caller
/// passes both `x` and `y = 1 − x` (computed accurately: e.g. `y = t²` when `x = 1 − t²`).
pub(crate) fn ln_beta_inc(a: f64, b: f64, x: f64, y: f64) -> Result<f64, String> {
    let valid = a > 0.0
        && b > 0.0
        && a.is_finite()
        && b.is_finite()
        && (0.0..=1.0).contains(&x)
        && (0.0..=1.0).contains(&y);
    if !valid {
        return Err(format!(
            "ln_beta_inc: bad arguments a={a}, b={b}, x={x}, y={y}"
        ));
    }
    if x == 0.0 {
        return Ok(f64::NEG_INFINITY);
    }
    if y == 0.0 {
        return Ok(0.0);
    }
    // ln x and ln y from whichever of x, y is small (log1p of the other), so that large a or b
    // does not amplify the rounding of x = 1 − y.
    let ln2 = |x: f64, y: f64| if x < 0.5 { x.ln() } else { libm::log1p(-y) };
    let ln_front =
        |a: f64, b: f64, x: f64, y: f64| a * ln2(x, y) + b * ln2(y, x) - ln_beta(a, b) - a.ln();
    if x <= (a + 1.0) / (a + b + 2.0) {
        Ok(ln_front(a, b, x, y) + beta_cf(a, b, x)?.ln())
    } else {
        let other = (ln_front(b, a, y, x) + beta_cf(b, a, y)?.ln()).exp();
        Ok(libm::log1p(-other))
    }
}

/// The continued fraction for `I_x(a,b)` (1/(1+ d₁/(1+ d₂/(1+ …)))) by the modified Lentz
/// method, with `d_{2m+1} = −(a+m)(a+b+m)x/((a+2m)(a+2m+1))`, `d_{2m} = m(b−m)x/((a+2m−1)(a+2m))`.
fn beta_cf(a: f64, b: f64, x: f64) -> Result<f64, String> {
    const TINY: f64 = 1e-300;
    const MAX_ITER: usize = 1_000_000;
    let qab = a + b;
    let qap = a + 1.0;
    let qam = a - 1.0;
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..MAX_ITER {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            return Ok(h);
        }
    }
    Err(format!(
        "incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})"
    ))
}

/// Bisection for a decreasing predicate boundary: given `lo < hi` with `ok(hi)` true, returns
/// the smallest `x` in `[lo, hi]` (to relative tolerance `rel_tol`, geometric bisection when
/// `lo > 0`) with `ok(x)` true; the returned value always satisfies `ok`.
pub(crate) fn bisect_smallest<E>(
    mut lo: f64,
    mut hi: f64,
    rel_tol: f64,
    mut ok: impl FnMut(f64) -> Result<bool, E>,
) -> Result<f64, E> {
    for _ in 0..200 {
        if hi - lo <= rel_tol * hi {
            break;
        }
        let mid = if lo > 0.0 {
            (lo * hi).sqrt()
        } else {
            0.5 * (lo + hi)
        };
        if ok(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_norm_cdf_matches_direct_and_series_join() {
        // Continuity at the −30 switch: the series and erfc agree to 1e-13 relative in ln.
        let a = norm_cdf(-29.999_999).ln();
        let b = ln_norm_cdf(-30.000_001);
        assert!((a - b).abs() < 1e-4, "{a} {b}");
        // mpmath (50 digits): ln Φ(−40) = −804.608442013754...
        assert!((ln_norm_cdf(-40.0) + 804.608_442_013_754).abs() < 1e-9);
        // ln Φ(3) = ln(0.998650101968370) = −0.0013508099647482
        assert!((ln_norm_cdf(3.0) + 0.001_350_809_964_748_2).abs() < 1e-15);
    }

    #[test]
    fn log_add_and_lse() {
        assert!((log_add(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_add(f64::NEG_INFINITY, 1.0), 1.0);
        assert!((log_sum_exp(&[1000.0, 1000.0]) - 1000.0 - 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn norm_cdf_diff_tails() {
        // Φ̄(10) − Φ̄(10.001) ≈ φ(10)·0.001 = 7.69e-26: keeps relative accuracy in the tail.
        let d = NormPoint::new(10.0).diff_to(&NormPoint::new(10.001));
        let approx = (-50.0f64).exp() / (2.0 * PI).sqrt() * 0.001;
        assert!((d / approx - 1.0).abs() < 0.02, "{d} {approx}");
    }

    #[test]
    fn bisection_finds_boundary() {
        let x = bisect_smallest::<()>(0.0, 10.0, 1e-12, |x| Ok(x * x >= 2.0)).unwrap();
        assert!((x - 2f64.sqrt()).abs() < 1e-10 && x * x >= 2.0);
    }
}

//! The standard normal distribution: density, tails, their logs, quantiles and `erfcx`.

use std::f64::consts::{FRAC_1_SQRT_2, LN_2, PI};

use crate::erfcx_pieces::ERFCX_PIECES;

/// `1/√(2π)`.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// `√(2/π)`.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// `1/√π`.
const INV_SQRT_PI: f64 = 0.564_189_583_547_756_3;
/// Below `x = 0.5`, `erfcx(x) = e^{x²}·erfc(x)` is evaluated directly.
const ERFCX_DIRECT_MAX: f64 = 0.5;
/// Width of the polynomial pieces of `erfcx` on `[ERFCX_DIRECT_MAX, ERFCX_ASYMPTOTIC_MIN)`.
const ERFCX_PIECE_WIDTH: f64 = 0.5;
/// From here on `erfcx` uses its asymptotic series.
const ERFCX_ASYMPTOTIC_MIN: f64 = 12.0;
/// The central region of the quantile: `|p − ½| ≤ 0.425`.
const CENTRAL_HALF_WIDTH: f64 = 0.425;

/// `exp(−z²/2)` without the rounding error of `z²`: with `z = h + l`, `h` carrying 26 bits,
/// `z² = h² + l·(z + h)` where `h²` is exact (the same splitting as Cody's `erfc`).
/// At `z = 35` this avoids a relative error of `z²/2·2⁻⁵³ ≈ 7·10⁻¹⁴`.
pub(crate) fn exp_neg_half_sq(z: f64) -> f64 {
    let z = z.abs();
    if !z.is_finite() {
        return if z.is_nan() { f64::NAN } else { 0.0 };
    }
    let h = f64::from_bits(z.to_bits() & 0xFFFF_FFFF_F800_0000);
    let l = z - h;
    (-0.5 * h * h).exp() * (-0.5 * l * (z + h)).exp()
}

/// `exp(x²)` with the same splitting as [`exp_neg_half_sq`].
fn exp_sq(x: f64) -> f64 {
    let x = x.abs();
    let h = f64::from_bits(x.to_bits() & 0xFFFF_FFFF_F800_0000);
    let l = x - h;
    (h * h).exp() * (l * (x + h)).exp()
}

/// Scaled complementary error function `erfcx(x) = e^{x²}·erfc(x)`.
///
/// * `0 ≤ x < 0.5`: `exp(x²)·erfc(x)` directly;
/// * `0.5 ≤ x < 12`: one of 23 polynomials of degree 13 (pieces of width ½, interpolating
///   erfcx at Chebyshev nodes; coefficients from `scripts/reference/erfcx_pieces.py`, worst
///   relative error 2.2e-16 in double precision), no `exp` at all;
/// * `x ≥ 12`: the asymptotic series `erfcx(x) = (1/(x√π))·Σ_n (−1)^n (2n−1)!!/(2x²)^n`, summed
///   until the terms fall below `10⁻¹⁷` (≤ 13 terms; `erfcx(x) ≈ 1/(x√π)` for large x);
/// * `x < 0`: `erfcx(x) = 2·e^{x²} − erfcx(−x)` (overflows to `+∞` below `x ≈ −26.6`).
///
/// `erfc` is `libm::erfc` (fdlibm). Tested against mpmath from `x = −26` to `10⁸`.
/// NaN in, NaN out.
pub fn erfcx(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        if x < -26.7 {
            return f64::INFINITY;
        }
        return 2.0 * exp_sq(x) - erfcx(-x);
    }
    if x < ERFCX_DIRECT_MAX {
        (x * x).exp() * libm::erfc(x)
    } else if x < ERFCX_ASYMPTOTIC_MIN {
        let k = (((x - ERFCX_DIRECT_MAX) / ERFCX_PIECE_WIDTH) as usize).min(ERFCX_PIECES.len() - 1);
        let centre = ERFCX_DIRECT_MAX + ERFCX_PIECE_WIDTH * (k as f64 + 0.5);
        let t = (x - centre) * (2.0 / ERFCX_PIECE_WIDTH);
        ERFCX_PIECES[k]
            .iter()
            .rev()
            .fold(0.0, |acc, &c| acc * t + c)
    } else if x.is_infinite() {
        0.0
    } else {
        let v = 1.0 / (2.0 * x * x);
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut n = 1.0;
        loop {
            term *= -(2.0 * n - 1.0) * v;
            sum += term;
            if term.abs() < 1e-17 * sum || n > 40.0 {
                break;
            }
            n += 1.0;
        }
        INV_SQRT_PI / x * sum
    }
}

/// Standard normal density `φ(z) = e^{−z²/2}/√(2π)`, with `z²` split so that the tail keeps full
/// relative accuracy (underflows to 0 beyond `|z| ≈ 38.6`). NaN in, NaN out.
pub fn norm_pdf(z: f64) -> f64 {
    INV_SQRT_2PI * exp_neg_half_sq(z)
}

/// Upper tail `Q(z) = 1 − Φ(z) = Φ(−z)` with relative accuracy in both tails.
///
/// * `0 ≤ z ≤ 1`: `Q(z) = ½·erfc(z/√2)`;
/// * `z > 1`: `Q(z) = ½·e^{−z²/2}·erfcx(z/√2)` (no `erfc` underflow issue beyond the true
///   underflow of `Q` near `z ≈ 38.5`, and no error amplification from rounding `z/√2`);
/// * `z < 0`: `Q(z) = 1 − Q(−z)` (a value in `[½, 1]`, no cancellation).
///
/// NaN in, NaN out; `Q(−∞) = 1`, `Q(+∞) = 0`.
pub fn norm_sf(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z < 0.0 {
        return 1.0 - norm_sf(-z);
    }
    if z <= 1.0 {
        0.5 * libm::erfc(z * FRAC_1_SQRT_2)
    } else if z.is_infinite() {
        0.0
    } else {
        0.5 * exp_neg_half_sq(z) * erfcx(z * FRAC_1_SQRT_2)
    }
}

/// Standard normal CDF `Φ(z) = Q(−z)`, relative accuracy in both tails (via `erfc`/`erfcx`,
/// never `1 − erf`): see [`norm_sf`]. NaN in, NaN out.
pub fn norm_cdf(z: f64) -> f64 {
    norm_sf(-z)
}

/// `ln Q(z) = ln(1 − Φ(z))`, finite far beyond the underflow of `Q`.
///
/// * `z > 1`: `ln Q(z) = −z²/2 − ln 2 + ln erfcx(z/√2)` (so `ln Q(10⁶) ≈ −5·10¹¹` is exact to
///   rounding);
/// * `0 ≤ z ≤ 1`: `ln Q(z)` from [`norm_sf`];
/// * `z < 0`: `ln Q(z) = log1p(−Q(−z))` (accurate near 0 for large `|z|`).
///
/// NaN in, NaN out; `ln Q(+∞) = −∞`, `ln Q(−∞) = 0`.
pub fn ln_norm_sf(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z < 0.0 {
        return (-norm_sf(-z)).ln_1p();
    }
    if z <= 1.0 {
        norm_sf(z).ln()
    } else if z.is_infinite() {
        f64::NEG_INFINITY
    } else {
        -0.5 * z * z - LN_2 + erfcx(z * FRAC_1_SQRT_2).ln()
    }
}

/// `ln Φ(z) = ln Q(−z)`: accurate for `z` down to `−10⁶` and beyond (asymptotically `−z²/2`),
/// and near 0 for large positive `z` (`log1p(−Q(z))`). See [`ln_norm_sf`]. NaN in, NaN out.
pub fn ln_norm_cdf(z: f64) -> f64 {
    ln_norm_sf(-z)
}

/// A point `x` together with its nearer normal tail: `Φ(x)` if `x ≤ 0`, `Q(x) = Φ(−x)` if
/// `x > 0` (one [`norm_cdf`] evaluation per point).
///
/// Differences `Φ(b) − Φ(a)` of two such points ([`NormPoint::diff_to`]) are taken from the
/// nearer tail, `Q(a) − Q(b)` when both are positive, `Φ(b) − Φ(a)` when both are negative, and
/// `1 − Q(b) − Φ(a)` across 0, which keeps tiny differences far in either tail relatively
/// accurate (where `Φ(b) − Φ(a)` directly would cancel to 0). Used for the masses of a
/// discretized Gaussian privacy-loss distribution.
#[derive(Debug, Clone, Copy)]
pub struct NormPoint {
    x: f64,
    tail: f64,
}

impl NormPoint {
    /// The point `x` and its nearer tail.
    pub fn new(x: f64) -> Self {
        let tail = if x <= 0.0 { norm_cdf(x) } else { norm_cdf(-x) };
        Self { x, tail }
    }

    /// `Φ(b) − Φ(a)` for `a = self`; 0 when `b ≤ a` (never negative).
    pub fn diff_to(&self, b: &NormPoint) -> f64 {
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

/// Hazard function (inverse Mills ratio) `h(z) = φ(z)/(1 − Φ(z))`.
///
/// * `z ≥ 0`: `h(z) = √(2/π) / erfcx(z/√2)`, stable for large `z` (`h(z) ≈ z + 1/z`);
/// * `z < 0`: `φ(z)/Q(z)` directly (`Q(z) ≥ ½`; `h → 0` as `z → −∞`).
///
/// NaN in, NaN out.
pub fn norm_hazard(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z >= 0.0 {
        if z.is_infinite() {
            return f64::INFINITY;
        }
        SQRT_2_OVER_PI / erfcx(z * FRAC_1_SQRT_2)
    } else {
        norm_pdf(z) / norm_sf(z)
    }
}

/// Solves `Φ(z) − ½ = c` for `|c| ≤ 0.425` by Halley's method on `½·erf(z/√2) − c`
/// (`erf` keeps relative accuracy near 0, so `z` is relatively accurate even for tiny `c`).
fn central_quantile(c: f64) -> f64 {
    if c == 0.0 {
        return 0.0;
    }
    // Start from the inverse of the cubic Taylor term, Φ(z) − ½ ≈ φ(0)·(z − z³/6).
    let mut z = c * (2.0 * PI).sqrt();
    z *= 1.0 + z * z / 6.0;
    for _ in 0..20 {
        let f = 0.5 * libm::erf(z * FRAC_1_SQRT_2) - c;
        let d = f / norm_pdf(z);
        // Halley: Φ'' = −zφ.
        let step = d / (1.0 + 0.5 * z * d);
        z -= step;
        if step.abs() <= 1e-17 * z.abs() {
            break;
        }
    }
    z
}

/// Solves `ln Q(w) = ln_q` for `ln_q ≤ ln 0.075` (so `w ≥ 1.43`): Abramowitz–Stegun 26.2.23 as the
/// start (`t = √(−2·ln q)`, error < 4.5·10⁻⁴), then Newton steps on the concave `ln Q`,
/// `w ← w + (ln Q(w) − ln_q)/h(w)` with `h` the hazard [`norm_hazard`].
fn tail_quantile(ln_q: f64) -> f64 {
    let t = (-2.0 * ln_q).sqrt();
    let mut w = t
        - (2.515_517 + t * (0.802_853 + t * 0.010_328))
            / (1.0 + t * (1.432_788 + t * (0.189_269 + t * 0.001_308)));
    for _ in 0..20 {
        let step = (ln_norm_sf(w) - ln_q) / norm_hazard(w);
        w += step;
        if step.abs() <= 1e-16 * w {
            break;
        }
    }
    w
}

/// Standard normal quantile `Φ⁻¹(p)`, to about `10⁻¹⁶` relative error for `p ∈ (0, 1)`.
///
/// * `|p − ½| ≤ 0.425`: Halley iterations on `½·erf(z/√2) = p − ½` (`p − ½` is exact here);
/// * lower tail: `−w` with `ln Q(w) = ln p` solved by Newton in log space (see
///   [`norm_sf_inv_ln`]), so `p` down to the smallest subnormal works;
/// * upper tail: `w` with `ln Q(w) = ln(1 − p)` (`1 − p` is exact for `p ≥ ½`).
///
/// `Φ⁻¹(0) = −∞`, `Φ⁻¹(1) = +∞`; `p` outside `[0, 1]` or NaN returns NaN.
pub fn norm_quantile(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let c = p - 0.5;
    if c.abs() <= CENTRAL_HALF_WIDTH {
        central_quantile(c)
    } else if c < 0.0 {
        -tail_quantile(p.ln())
    } else {
        tail_quantile((1.0 - p).ln())
    }
}

/// Upper-tail quantile in log space: `z` with `ln(1 − Φ(z)) = ln_q`, for `ln_q ≤ 0` (works for
/// `ln_q` down to `−10⁵` and far beyond; `z ≈ √(−2·ln_q)`).
///
/// * `q = e^{ln_q} ≤ 0.075`: Newton on `ln Q` (see [`norm_quantile`]);
/// * `0.075 < q < 0.925`: central Halley iteration with `Φ(z) − ½ = ½ − q`;
/// * `q ≥ 0.925`: `z = −w` with `ln Q(w) = ln(1 − q) = ln(−expm1(ln_q))`.
///
/// `ln_q = 0` gives `−∞`, `ln_q = −∞` gives `+∞`; `ln_q > 0` or NaN returns NaN.
pub fn norm_sf_inv_ln(ln_q: f64) -> f64 {
    if ln_q.is_nan() || ln_q > 0.0 {
        return f64::NAN;
    }
    if ln_q == 0.0 {
        return f64::NEG_INFINITY;
    }
    if ln_q == f64::NEG_INFINITY {
        return f64::INFINITY;
    }
    let q = ln_q.exp();
    if q <= 0.5 - CENTRAL_HALF_WIDTH {
        tail_quantile(ln_q)
    } else if q < 0.5 + CENTRAL_HALF_WIDTH {
        central_quantile(0.5 - q)
    } else {
        -tail_quantile((-ln_q.exp_m1()).ln())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_closed_forms() {
        assert_eq!(norm_cdf(0.0), 0.5);
        assert_eq!(norm_sf(0.0), 0.5);
        assert_eq!(norm_quantile(0.5), 0.0);
        assert!((norm_pdf(0.0) - INV_SQRT_2PI).abs() < 1e-17);
        // Φ(1.959963984540054) = 0.975 (the 97.5% quantile, 16 digits).
        assert!((norm_quantile(0.975) - 1.959_963_984_540_054).abs() < 4e-16);
        assert!((norm_cdf(1.959_963_984_540_054) - 0.975).abs() < 2e-16);
        // Symmetry and complement.
        for &z in &[-30.0, -5.0, -1.2, 0.3, 2.0, 9.0] {
            assert_eq!(norm_cdf(z), norm_sf(-z));
            let s = norm_cdf(z) + norm_sf(z);
            assert!((s - 1.0).abs() < 3e-16, "z={z}");
        }
        // erfcx(x) ≈ 1/(x√π)·(1 − 1/(2x²)) for large x.
        let x = 1e6;
        assert!((erfcx(x) * x / INV_SQRT_PI - (1.0 - 0.5 / (x * x))).abs() < 1e-15);
        // Hazard ≈ z + 1/z − 2/z³ for large z; ln Q(z) ≈ −z²/2 for huge z.
        let z: f64 = 1e4;
        assert!((norm_hazard(z) - (z + 1.0 / z)).abs() < 1e-11);
        assert!((ln_norm_sf(1e6) / -5e11 - 1.0).abs() < 1e-10);
    }

    /// Far tail against the asymptotic series `ln Q(z) = −z²/2 − ln z − ½ln 2π +
    /// ln(1 − 1/z² + 3/z⁴ − 15/z⁶)` (error below `10⁻²⁰` at these z), and the quantile back.
    #[test]
    fn far_tail_matches_asymptotic_series() {
        for &z in &[1e3_f64, 1e4, 1e5, 1e6] {
            let v = 1.0 / (z * z);
            let want = -0.5 * z * z - z.ln() - 0.5 * (2.0 * PI).ln()
                + (-v + 3.0 * v * v - 15.0 * v * v * v).ln_1p();
            assert!((ln_norm_sf(z) - want).abs() <= 2e-16 * want.abs(), "z={z}");
            assert_eq!(ln_norm_cdf(-z), ln_norm_sf(z));
            let back = norm_sf_inv_ln(want);
            assert!((back - z).abs() <= 4e-16 * z, "z={z}: {back}");
        }
    }

    /// The test values of the accounting crate's former `ln_norm_cdf` (asymptotic series below
    /// −30): the erfcx-based one is continuous there and matches mpmath.
    #[test]
    fn ln_norm_cdf_accounting_values() {
        let a = norm_cdf(-29.999_999).ln();
        let b = ln_norm_cdf(-30.000_001);
        assert!((a - b).abs() < 1e-4, "{a} {b}");
        // mpmath (50 digits): ln Φ(−40) = −804.608442013754...
        assert!((ln_norm_cdf(-40.0) + 804.608_442_013_754).abs() < 1e-9);
        // ln Φ(3) = ln(0.998650101968370) = −0.0013508099647482
        assert!((ln_norm_cdf(3.0) + 0.001_350_809_964_748_2).abs() < 1e-15);
    }

    #[test]
    fn norm_cdf_diff_tails() {
        // Q(10) − Q(10.001) ≈ φ(10)·0.001 = 7.69e-26: keeps relative accuracy in the tail.
        let d = NormPoint::new(10.0).diff_to(&NormPoint::new(10.001));
        let approx = (-50.0f64).exp() / (2.0 * PI).sqrt() * 0.001;
        assert!((d / approx - 1.0).abs() < 0.02, "{d} {approx}");
        // Lower tail, across 0, and the empty interval.
        let d = NormPoint::new(-10.001).diff_to(&NormPoint::new(-10.0));
        assert!((d / approx - 1.0).abs() < 0.02, "{d} {approx}");
        let d = NormPoint::new(-1.0).diff_to(&NormPoint::new(1.0));
        assert!((d - (1.0 - 2.0 * norm_sf(1.0))).abs() < 4e-16);
        assert_eq!(NormPoint::new(2.0).diff_to(&NormPoint::new(1.0)), 0.0);
    }

    #[test]
    fn quantile_round_trips() {
        for &p in &[
            1e-300,
            1e-20,
            0.01,
            0.074,
            0.076,
            0.2,
            0.49,
            0.51,
            0.9,
            0.93,
            1.0 - 1e-12,
        ] {
            let z = norm_quantile(p);
            let back = if p < 0.5 { norm_cdf(z) } else { norm_sf(z) };
            let want = if p < 0.5 { p } else { 1.0 - p };
            assert!(
                (back / want - 1.0).abs() < 1e-13,
                "p={p}: z={z}, back={back}"
            );
        }
        for &lq in &[-1e5, -700.0, -3.0, -2.0, -0.5, -0.01, -1e-10] {
            let z = norm_sf_inv_ln(lq);
            assert!(
                (ln_norm_sf(z) - lq).abs() < 1e-13 * lq.abs().max(1.0),
                "ln_q={lq}"
            );
        }
        assert!(norm_quantile(-0.1).is_nan());
        assert!(norm_quantile(f64::NAN).is_nan());
        assert_eq!(norm_quantile(0.0), f64::NEG_INFINITY);
        assert!(norm_sf_inv_ln(0.1).is_nan());
        assert_eq!(norm_sf_inv_ln(0.0), f64::NEG_INFINITY);
    }
}

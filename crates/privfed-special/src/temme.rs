//! Temme's uniform asymptotic expansion of the symmetric incomplete beta `I_x(a,a)` for large `a`.
//!
//! Derivation (N. M. Temme, *Special Functions*, 1996, §11.3; the same idea as the `basym`
//! expansion of DiDonato & Morris 1992). For `x ≤ ½` put `t = 1 − 2s` in the integral:
//!
//! `I_x(a,a) = (1/(2·4^{a−1}·B(a,a)))·∫_{t₀}^1 (1−t²)^{a−1} dt`, `t₀ = 1 − 2x`,
//!
//! and then `1 − t² = e^{−u²}` (`u ≥ 0`), which turns the integrand into a Gaussian times a smooth
//! even function: `(1−t²)^{a−1} dt = e^{−a·u²}·g(u) du` with `g(u) = (v/(1 − e^{−v}))^{1/2}`,
//! `v = u²`. With `g(u) = Σ_k g_k v^k` and `∫_{u₀}^∞ e^{−a u²} u^{2k} du = Γ(k+½, a u₀²)/(2a^{k+½})`,
//! and `ln B(a,a) = ½·ln(2π/a) − (2a−½)·ln 2 + 2δ(a) − δ(2a)` (Stirling),
//!
//! `I_x(a,a) = e^{δ(2a)−2δ(a)}/(2√π) · Σ_k g_k · Γ(k+½, X)/a^k`, `X = a·u₀² = −a·ln(4x(1−x))`.
//!
//! The `k = 0` term is `½·erfc(√X)`. The series in `v` converges for `|v| < 2π`
//! (`g_k ~ (2π)^{−k}`), so the terms shrink like `max(k, X)/(2πa)`: for `a ≥ 100`, `X ≤ 60`,
//! 30 terms reach `10⁻¹⁷`. `Γ(k+½, X)` follows from `Γ(½, X) = √π·erfc(√X)` by the stable upward
//! recurrence `Γ(s+1, X) = s·Γ(s, X) + X^s e^{−X}`.

use super::gamma::{STIRLING, ln_beta};
use super::point::{Point, symmetric_delta};

/// Smallest `a` for which the expansion is used.
pub(crate) const TEMME_MIN_A: f64 = 100.0;
/// Largest `X = −a·ln(4x(1−x))` for which the expansion is used (beyond it the continued
/// fraction converges in few steps).
pub(crate) const TEMME_MAX_X: f64 = 60.0;

/// Taylor coefficients `g_k` of `g(v) = (v/(1 − e^{−v}))^{1/2}` in `v`, k = 0..30 (computed with
/// mpmath at 50 digits from the Bernoulli series `v/(1−e^{−v}) = Σ_n B_n⁺ vⁿ/n!` and the
/// square-root recurrence; re-derived in f64 by a unit test below).
/// (The literals keep mpmath's 22 digits; the compiler rounds them to the nearest f64.)
#[allow(clippy::excessive_precision)]
const G: [f64; 31] = [
    1.0,
    0.25,
    0.010_416_666_666_666_666_666_67,
    -0.002_604_166_666_666_666_666_667,
    -0.000_097_656_25,
    0.000_051_540_798_611_111_111_111_11,
    0.000_001_275_602_471_891_534_391_534,
    -0.000_001_110_097_087_880_291_005_291,
    -1.967_058_400_418_182_319_224e-8,
    2.483_631_988_471_567_735_891e-8,
    3.396_661_996_038_674_505_471e-10,
    -5.690_071_833_942_187_640_918e-10,
    -6.337_230_155_667_130_237_995e-12,
    1.325_131_515_587_890_358_009e-11,
    1.246_835_896_099_680_336_479e-13,
    -3.122_999_378_063_188_785_674e-13,
    -2.546_988_626_356_897_021_172e-15,
    7.426_702_350_918_158_535_196e-15,
    5.348_885_890_032_736_627_029e-17,
    -1.778_579_261_088_921_993_577e-16,
    -1.147_398_954_227_047_550_103e-18,
    4.283_476_654_726_128_114_62e-18,
    2.503_033_743_518_024_422_476e-20,
    -1.036_386_291_075_954_437_009e-19,
    -5.535_498_379_178_477_496_949e-22,
    2.517_185_267_159_961_017_089e-21,
    1.238_159_595_643_812_440_05e-23,
    -6.133_662_439_105_411_900_21e-23,
    -2.796_137_031_429_405_876_237e-25,
    1.498_765_280_596_104_049_706e-24,
    6.366_526_460_482_833_104_546e-27,
];

/// `X = −a·ln(4x(1−x)) = −a·ln(1 − t²)` at a point with `x ≤ ½`.
fn big_x(a: f64, p: &Point) -> f64 {
    debug_assert!(p.x <= 0.5);
    // t = 1 − 2x, exact when the defining value is x ∈ [¼, ½] or y ∈ [½, ¾].
    if p.x >= 0.25 {
        let t = if p.x_exact {
            1.0 - 2.0 * p.x
        } else {
            2.0 * p.y - 1.0
        };
        -a * (-t * t).ln_1p()
    } else {
        -a * (4f64.ln() + p.ln_x + p.ln_y)
    }
}

/// `ln` of the smaller tail of `I_x(a,a)` by the expansion, and whether it is the lower tail;
/// `None` where the expansion is not used (`a < 100` or `X > 60`).
pub(crate) fn symmetric_ln_small(a: f64, p: &Point) -> Option<(f64, bool)> {
    if a < TEMME_MIN_A {
        return None;
    }
    let (q, lower) = if p.x <= 0.5 {
        (*p, true)
    } else {
        (p.reflect(), false)
    };
    let x_big = big_x(a, &q);
    if x_big.is_nan() || x_big > TEMME_MAX_X {
        return None;
    }
    Some((ln_symmetric_lower(a, x_big), lower))
}

/// `ln I_x(a,a)` for `x ≤ ½` from `X = −a·ln(4x(1−x))`, by the series in the module docs.
fn ln_symmetric_lower(a: f64, x_big: f64) -> f64 {
    let sqrt_pi = std::f64::consts::PI.sqrt();
    let root = x_big.sqrt();
    let e = (-x_big).exp();
    // Γ(½, X) and the power term X^{k−½}·e^{−X}, starting at k = 1: X^{½}·e^{−X}.
    let mut gamma = sqrt_pi * libm::erfc(root);
    let mut power = root * e;
    let mut sum = gamma;
    let mut inv_a_k = 1.0;
    for (k, &g) in G.iter().enumerate().skip(1) {
        gamma = (k as f64 - 0.5) * gamma + power;
        power *= x_big;
        inv_a_k /= a;
        let term = g * gamma * inv_a_k;
        sum += term;
        if term.abs() <= 1e-17 * sum {
            break;
        }
    }
    symmetric_delta(a) + sum.ln() - (2.0 * sqrt_pi).ln()
}

/// Largest `z = −a·ln x` for which [`ln_lower_half`] is used.
pub(crate) const HALF_MAX_Z: f64 = 100.0;

/// `ln I_x(a, ½)` for large `a` (`a ≥ 100`) and `x` close to 1 (`z = −a·ln x ≤ 100`), the
/// region where the continued fraction loses up to `10⁻¹¹` relative accuracy to cancellation
/// (the reconstruction bound, docs/ALGORITHMS.md §1.6, lives there).
///
/// With `s = e^{−v}`: `I_x(a,b) = (1/B(a,b))·∫_u^∞ e^{−a v}(1 − e^{−v})^{b−1} dv`, `u = −ln x`.
/// Writing `(1 − e^{−v})^{b−1} = v^{b−1}·exp((b−1)·L(v))` with
/// `L(v) = ln((1−e^{−v})/v) = −v/2 + Σ_k B_{2k} v^{2k}/(2k·(2k)!)` and
/// `exp((b−1)L(v)) = Σ_n c_n vⁿ` (`c₀ = 1`, `c_n = (1/n)·Σ_k k·(b−1)·l_k·c_{n−k}`),
///
/// `I_x(a,b) = (1/B(a,b))·Σ_n c_n·Γ(b+n, a·u)/a^{b+n}`
///
/// (the `bgrat` idea of DiDonato & Morris 1992). For `b = ½`, `Γ(½, z) = √π·erfc(√z)` and the
/// upward recurrence gives the rest; the terms shrink like `max(n, z)/(2πa)`.
pub(crate) fn ln_lower_half(a: f64, p: &Point) -> Option<f64> {
    const N: usize = 40;
    let b = 0.5;
    if a < TEMME_MIN_A || p.x <= 0.5 {
        return None;
    }
    let u = -p.ln_x;
    let z = a * u;
    if z.is_nan() || z > HALF_MAX_Z {
        return None;
    }
    // l_k: coefficients of L(v); l_{2k} = B_{2k}/(2k·(2k)!) = STIRLING[k−1]·(2k−1)/(2k)!.
    let mut l = [0.0; 2 * STIRLING.len() + 1];
    l[1] = -0.5;
    let mut fact = 1.0;
    for k in 1..=STIRLING.len() {
        let n2 = 2 * k;
        fact *= ((n2 - 1) * n2) as f64;
        l[n2] = STIRLING[k - 1] * (n2 - 1) as f64 / fact;
    }
    let mut c = [0.0; N];
    c[0] = 1.0;
    let sqrt_pi = std::f64::consts::PI.sqrt();
    let root = z.sqrt();
    let mut gamma = sqrt_pi * libm::erfc(root);
    let mut power = root * (-z).exp();
    let mut sum = gamma;
    let mut inv_a_n = 1.0;
    for n in 1..N {
        let mut acc = 0.0;
        for k in 1..=n.min(l.len() - 1) {
            acc += k as f64 * (b - 1.0) * l[k] * c[n - k];
        }
        c[n] = acc / n as f64;
        gamma = (n as f64 - 0.5) * gamma + power;
        power *= z;
        inv_a_n /= a;
        let term = c[n] * gamma * inv_a_n;
        sum += term;
        if term.abs() <= 1e-17 * sum {
            break;
        }
    }
    Some(sum.ln() - b * a.ln() - ln_beta(a, b))
}

#[cfg(test)]
mod tests {
    use super::super::beta::{beta_cf, ln_prefactor};
    use super::*;

    /// Two independent methods agree over the whole region where the expansion is used,
    /// including its edges (`a = 100`, `X = 60`): the expansion against the continued fraction.
    #[test]
    fn agrees_with_continued_fraction() {
        for &a in &[100.0_f64, 137.5, 250.0, 1e4, 7.5e5] {
            for &xb in &[1e-6_f64, 0.01, 0.3, 1.0, 3.0, 10.0, 25.0, 45.0, 59.9] {
                // x ≤ ½ with −a·ln(4x(1−x)) = X.
                let t = (-(-xb / a).exp_m1()).sqrt();
                let x = 0.5 * (1.0 - t);
                let p = Point::from_x(x);
                let (ln_series, lower) = symmetric_ln_small(a, &p).expect("in region");
                assert!(lower);
                let (h, _) = beta_cf(a, a, &p).expect("converges");
                let ln_cf = ln_prefactor(a, a, &p) - a.ln() + h.ln();
                // The fraction itself carries ~3·10⁻¹³ of accumulated rounding near the median
                // at a ~ 10⁶ (hundreds of steps; cf. the binomial rows of the mpmath test).
                let err = (ln_series - ln_cf).abs();
                assert!(
                    err < 1e-12 * ln_cf.abs().max(1.0),
                    "a={a} X={xb}: {ln_series} vs {ln_cf}"
                );
            }
        }
    }

    /// Re-derives the coefficients in f64: the reciprocal of `(1 − e^{−v})/v = Σ (−1)^n vⁿ/(n+1)!`
    /// by series division, then the square root by `s_n = (c_n − Σ_{j=1}^{n−1} s_j s_{n−j})/2`.
    #[test]
    fn coefficients_match_series_arithmetic() {
        let n = G.len();
        let mut fact = vec![1.0_f64; n + 2];
        for i in 1..n + 2 {
            fact[i] = fact[i - 1] * i as f64;
        }
        let d: Vec<f64> = (0..n)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 } / fact[i + 1])
            .collect();
        let mut c = vec![0.0; n];
        c[0] = 1.0;
        for i in 1..n {
            c[i] = -(1..=i).map(|j| d[j] * c[i - j]).sum::<f64>();
        }
        let mut s = vec![0.0; n];
        s[0] = 1.0;
        for i in 1..n {
            s[i] = (c[i] - (1..i).map(|j| s[j] * s[i - j]).sum::<f64>()) / 2.0;
        }
        for k in 0..n {
            // The f64 recurrences lose a few digits for the tiny high-order coefficients.
            let tol = 1e-12 * G[k].abs() + 1e-30;
            assert!((s[k] - G[k]).abs() <= tol, "k={k}: {} vs {}", s[k], G[k]);
        }
    }

    #[test]
    fn median_is_one_half() {
        // At x = ½ (X = 0) the series must give exactly ½: Σ g_k Γ(k+½)/a^k = √π·e^{−(δ(2a)−2δ(a))}.
        for &a in &[100.0, 499.5, 4999.5, 499_999.5] {
            let got = ln_symmetric_lower(a, 0.0).exp();
            assert!((got - 0.5).abs() < 2e-16, "a={a}: {got}");
        }
    }
}

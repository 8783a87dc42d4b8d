//! Dithering (unbiased randomized rounding) to a `b`-bit grid (`docs/ALGORITHMS.md` §3.1; paper 004
//! §2.4 and App. B.1).
//!
//! ## Scalar
//! The grid is `{0, 1/(B−1), …, 1}` with `B = 2^b` levels, mapped affinely onto `[lo, hi]`
//! (`g_i = lo + (hi − lo)·i/(B−1)`). For `x ∈ [g_i, g_{i+1}]` and `λ = (x − g_i)/(g_{i+1} − g_i)`,
//! dithering returns `g_{i+1}` with probability `λ` and `g_i` otherwise, so `E[Dither(x)] = x` and
//! `E[(Dither(x) − x)²] = λ(1−λ)h² ≤ h²/4` with `h = (hi − lo)/(B − 1)`.
//! The Bernoulli draw is exact for the `f64` value of `λ` (see [`crate::sampling`]).
//!
//! ## Vectors and norm bounds
//! [`dither_vector`] dithers every coordinate independently: unbiased, but the norm of the result
//! can exceed the norm of the input (paper 004 Lemma 10: for `‖v‖₂ ≤ 1` and spacing `Δ`,
//! `‖v'‖₂² ≤ ‖v‖₂² + √2‖v‖₂Δ·log(4/δ) + dΔ²/4 + √(2d)Δ·log(4/δ)` with probability `1 − δ`;
//! [`lemma10_l2_bound`]). A mechanism whose privacy analysis needs the *dithered* vector inside a
//! ball of radius `R` uses [`conditional_dither_vector_indices`]: dither, and redraw the whole vector
//! until `‖v'‖_p ≤ R` (rejection sampling, paper 004 App. B.1).
//!
//! **Bias of conditional dithering.** The result is distributed as `v'` conditioned on the event
//! `A = {‖v'‖_p ≤ R}`, so `E[v' | A] = (v − P(Aᶜ)·E[v' | Aᶜ])/P(A)` and the bias is
//! `E[v' | A] − v = P(Aᶜ)·(v − E[v' | Aᶜ])/P(A)`: at most `P(Aᶜ)/P(A)·sup‖v − v'‖` in norm,
//! i.e. `O(P(Aᶜ))`. It vanishes when the bound is never active and is small when `R` is chosen so
//! that `P(Aᶜ)` is small (e.g. from [`lemma10_l2_bound`] with a small `δ`). It is **not zero** in
//! general: conditional dithering trades a small bias for a hard norm bound.

use crate::domain::check_range;
use crate::error::{MechanismError, Result};
use crate::sampling::bernoulli_exact;
use rand::Rng;

/// Largest number of bits accepted by the dithering functions (`B = 2^24` levels).
pub const MAX_DITHER_BITS: u32 = 24;

/// Validates the report size of the grid randomized-response mechanisms (unbiased bitwise and
/// generalized RR): `bits ∈ 1..=16`.
pub(crate) fn check_report_bits(bits: u32) -> Result<()> {
    if (1..=16).contains(&bits) {
        Ok(())
    } else {
        Err(MechanismError::invalid(
            "bits",
            f64::from(bits),
            "must be in 1..=16",
        ))
    }
}

/// The randomized rounding step of dithering: from the cell `(i, λ)` of [`locate`], index
/// `i + 1` with probability `λ` (exact Bernoulli), else `i`.
pub(crate) fn round_index<R: Rng + ?Sized>(i: usize, lam: f64, rng: &mut R) -> usize {
    if bernoulli_exact(rng, lam) { i + 1 } else { i }
}

/// The output law of a mechanism that dithers and then draws from the row of the rounded index:
/// `(1−λ)·r0 + λ·r1` (rows of two adjacent grid points).
pub(crate) fn mix_rows(r0: &[f64], r1: &[f64], lam: f64) -> Vec<f64> {
    r0.iter()
        .zip(r1)
        .map(|(a, b)| (1.0 - lam) * a + lam * b)
        .collect()
}

/// `(1−λ)v0 + λv1 + λ(1−λ)h²`: the variance at fraction `λ` of a grid interval of width `h` of an
/// unbiased mechanism that dithers, when `v0, v1` are its variances at the two end points (law of
/// total variance over the rounding).
pub(crate) fn interval_value(v0: f64, v1: f64, h: f64, lam: f64) -> f64 {
    (1.0 - lam) * v0 + lam * v1 + lam * (1.0 - lam) * h * h
}

/// Maximum over `λ ∈ [0,1]` of [`interval_value`] (concave in `λ`): returns `(λ*, f(λ*))`.
pub(crate) fn interval_max(v0: f64, v1: f64, h: f64) -> (f64, f64) {
    let h2 = h * h;
    let lam = if h2 > 0.0 {
        (0.5 + (v1 - v0) / (2.0 * h2)).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (lam, interval_value(v0, v1, h, lam))
}

/// The exact worst case over `[g_0, g_{n−1}]` of [`interval_value`] on a uniform grid of spacing
/// `h` with end-point variances `v` (the maximum of [`interval_max`] over the cells).
pub(crate) fn uniform_grid_worst_case(v: &[f64], h: f64) -> f64 {
    v.windows(2)
        .map(|w| interval_max(w[0], w[1], h).1)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// Validates `bits ∈ 1..=MAX_DITHER_BITS` and returns `B = 2^bits`.
pub(crate) fn levels(bits: u32) -> Result<usize> {
    if (1..=MAX_DITHER_BITS).contains(&bits) {
        Ok(1usize << bits)
    } else {
        Err(MechanismError::invalid(
            "bits",
            f64::from(bits),
            format!("must be in 1..={MAX_DITHER_BITS}"),
        ))
    }
}

/// Locates `x ∈ [lo, hi]` on the `levels`-point grid: returns `(i, λ)` with
/// `x = g_i + λ(g_{i+1} − g_i)`, `0 ≤ i ≤ levels − 2`, `λ ∈ [0, 1]`. Errors on NaN, infinities
/// and points outside `[lo, hi]`.
pub fn locate(x: f64, levels: usize, lo: f64, hi: f64) -> Result<(usize, f64)> {
    if !x.is_finite() {
        return Err(MechanismError::NonFiniteInput { index: 0, value: x });
    }
    if x < lo || x > hi {
        return Err(MechanismError::OutOfDomain(format!(
            "{x} is outside [{lo}, {hi}]"
        )));
    }
    if levels < 2 {
        return Err(MechanismError::invalid(
            "levels",
            levels as f64,
            "need at least 2 grid points",
        ));
    }
    let t = ((x - lo) / (hi - lo)).clamp(0.0, 1.0) * (levels - 1) as f64;
    let i = (t.floor() as usize).min(levels - 2);
    let lam = (t - i as f64).clamp(0.0, 1.0);
    Ok((i, lam))
}

/// Dithers `x ∈ [lo, hi]` to the index of a point of the `2^bits`-level grid on `[lo, hi]`:
/// returns `i+1` with probability `λ`, else `i` (module docs), so `E[g_I] = x`.
pub fn dither_index<R: Rng + ?Sized>(
    x: f64,
    bits: u32,
    lo: f64,
    hi: f64,
    rng: &mut R,
) -> Result<usize> {
    let b = levels(bits)?;
    check_range(lo, hi)?;
    let (i, lam) = locate(x, b, lo, hi)?;
    Ok(round_index(i, lam, rng))
}

/// The value of grid point `i` of the `2^bits`-level grid on `[lo, hi]`:
/// `lo + (hi − lo)·i/(B − 1)` (exactly `lo` and `hi` at the ends).
pub fn grid_point(i: usize, levels: usize, lo: f64, hi: f64) -> f64 {
    let s = i as f64 / (levels - 1) as f64;
    lo * (1.0 - s) + hi * s
}

/// Dithers the scalar `x ∈ [lo, hi]` to the `2^bits`-level grid (unbiased; error variance
/// `λ(1−λ)h² ≤ h²/4`).
pub fn dither_scalar<R: Rng + ?Sized>(
    x: f64,
    bits: u32,
    lo: f64,
    hi: f64,
    rng: &mut R,
) -> Result<f64> {
    let i = dither_index(x, bits, lo, hi, rng)?;
    Ok(grid_point(i, 1 << bits, lo, hi))
}

/// Exact `E[(Dither(x) − x)²] = λ(1−λ)h²` for `x ∈ [lo, hi]` on the `2^bits`-level grid.
pub fn dither_variance(x: f64, bits: u32, lo: f64, hi: f64) -> Result<f64> {
    let b = levels(bits)?;
    check_range(lo, hi)?;
    let (_, lam) = locate(x, b, lo, hi)?;
    let h = (hi - lo) / (b - 1) as f64;
    Ok(lam * (1.0 - lam) * h * h)
}

/// Dithers every coordinate of `x` (each in `[lo, hi]`) independently into grid indices
/// (`out[l]` is the index of coordinate `l`). Unbiased coordinate-wise; see the module docs for
/// the norm growth.
pub fn dither_vector_indices<R: Rng + ?Sized>(
    x: &[f64],
    bits: u32,
    lo: f64,
    hi: f64,
    out: &mut [usize],
    rng: &mut R,
) -> Result<()> {
    let b = levels(bits)?;
    check_range(lo, hi)?;
    if out.len() != x.len() {
        return Err(MechanismError::DimensionMismatch {
            expected: x.len(),
            got: out.len(),
        });
    }
    // Validate everything before drawing anything.
    let mut cells = Vec::with_capacity(x.len());
    for (index, &v) in x.iter().enumerate() {
        let c = locate(v, b, lo, hi).map_err(|e| match e {
            MechanismError::NonFiniteInput { value, .. } => {
                MechanismError::NonFiniteInput { index, value }
            }
            other => other,
        })?;
        cells.push(c);
    }
    for (o, (i, lam)) in out.iter_mut().zip(cells) {
        *o = round_index(i, lam, rng);
    }
    Ok(())
}

/// Dithers every coordinate of `x` (each in `[lo, hi]`) to the `2^bits`-level grid: the vector
/// of grid values.
pub fn dither_vector<R: Rng + ?Sized>(
    x: &[f64],
    bits: u32,
    lo: f64,
    hi: f64,
    rng: &mut R,
) -> Result<Vec<f64>> {
    let mut idx = vec![0usize; x.len()];
    dither_vector_indices(x, bits, lo, hi, &mut idx, rng)?;
    let b = 1usize << bits;
    Ok(idx.iter().map(|&i| grid_point(i, b, lo, hi)).collect())
}

/// `‖v‖_p` for `p = 1` or `p = 2` (other powers: the general formula).
pub fn lp_norm(v: &[f64], p: u32) -> f64 {
    match p {
        1 => v.iter().map(|x| x.abs()).sum(),
        2 => crate::domain::l2_norm(v),
        _ => v
            .iter()
            .map(|x| x.abs().powi(p as i32))
            .sum::<f64>()
            .powf(1.0 / f64::from(p)),
    }
}

/// Conditional dithering (paper 004 App. B.1): dithers every coordinate of `x ∈ [lo, hi]^d`
/// to the `2^bits`-level grid, redrawing the whole vector until its `ℓp` norm is at most `bound`
/// (`p ∈ {1, 2}`); fills `out` with the grid indices and returns the number of draws used.
///
/// **Biased** when the bound can be active (module docs: bias `O(P(‖v'‖_p > bound))`).
/// Errors with [`MechanismError::Infeasible`] after `max_draws` rejected draws (the bound is
/// too tight for this input and grid) — never loops forever.
#[allow(clippy::too_many_arguments)]
pub fn conditional_dither_vector_indices<R: Rng + ?Sized>(
    x: &[f64],
    bits: u32,
    lo: f64,
    hi: f64,
    p: u32,
    bound: f64,
    max_draws: usize,
    out: &mut [usize],
    rng: &mut R,
) -> Result<usize> {
    if !(p == 1 || p == 2) {
        return Err(MechanismError::invalid("p", f64::from(p), "must be 1 or 2"));
    }
    crate::error::check_positive("bound", bound)?;
    let b = levels(bits)?;
    let mut vals = vec![0.0; x.len()];
    for draw in 1..=max_draws.max(1) {
        dither_vector_indices(x, bits, lo, hi, out, rng)?;
        for (v, &i) in vals.iter_mut().zip(out.iter()) {
            *v = grid_point(i, b, lo, hi);
        }
        if lp_norm(&vals, p) <= bound {
            return Ok(draw);
        }
    }
    Err(MechanismError::Infeasible(format!(
        "conditional dithering: no draw with ℓ{p} norm ≤ {bound} in {max_draws} attempts; \
         increase the bound or the number of bits"
    )))
}

/// Paper 004 Lemma 10, scaled: for `‖v‖₂ ≤ norm` with coordinates dithered on a grid of spacing
/// `spacing` in dimension `d`, `‖Dither(v)‖₂ ≤ sqrt(norm² + √2·norm·spacing·log(4/δ) + d·spacing²/4
/// + √(2d)·spacing·log(4/δ))` with probability at least `1 − δ`.
pub fn lemma10_l2_bound(norm: f64, spacing: f64, d: usize, delta: f64) -> Result<f64> {
    crate::error::check_open_interval("delta", delta, 0.0, 1.0)?;
    crate::error::check_positive("spacing", spacing)?;
    if !(norm.is_finite() && norm >= 0.0) {
        return Err(MechanismError::invalid(
            "norm",
            norm,
            "must be finite and >= 0",
        ));
    }
    let l = (4.0 / delta).ln();
    let df = d as f64;
    Ok((norm * norm
        + std::f64::consts::SQRT_2 * norm * spacing * l
        + df * spacing * spacing / 4.0
        + (2.0 * df).sqrt() * spacing * l)
        .sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_z, z_mean_known_variance};

    #[test]
    fn locate_and_grid() {
        assert_eq!(locate(0.0, 8, 0.0, 1.0).unwrap(), (0, 0.0));
        assert_eq!(locate(1.0, 8, 0.0, 1.0).unwrap(), (6, 1.0));
        let (i, l) = locate(0.5, 8, 0.0, 1.0).unwrap();
        assert_eq!(i, 3);
        assert!((l - 0.5).abs() < 1e-12);
        assert_eq!(grid_point(7, 8, -1.0, 1.0), 1.0);
        assert_eq!(grid_point(0, 8, -1.0, 1.0), -1.0);
        assert!(locate(f64::NAN, 8, 0.0, 1.0).is_err());
        assert!(locate(1.5, 8, 0.0, 1.0).is_err());
        assert!(dither_scalar(0.5, 0, 0.0, 1.0, &mut seeded_rng_for_experiments(0)).is_err());
        assert!(dither_scalar(0.5, 3, 1.0, 1.0, &mut seeded_rng_for_experiments(0)).is_err());
    }

    #[test]
    fn scalar_dither_is_unbiased_with_the_exact_variance() {
        // Two-sided z-tests at α = 6e-7 (|z| < 4.99) on the mean error (exact variance) and on the
        // mean squared error against the exact variance, with the bound Var(d²) ≤ E d⁴ ≤ h²·E d²
        // for a two-point error of spread h as its variance (conservative); 4 inputs.
        let mut rng = seeded_rng_for_experiments(1);
        let n = 400_000;
        for x in [-0.93, -0.1, 0.3141, 0.999] {
            let v = dither_variance(x, 3, -1.0, 1.0).unwrap();
            let mut s = 0.0;
            let mut s2 = 0.0;
            for _ in 0..n {
                let d = dither_scalar(x, 3, -1.0, 1.0, &mut rng).unwrap() - x;
                s += d;
                s2 += d * d;
            }
            let z = z_mean_known_variance(s / n as f64, n, 0.0, v);
            assert_z(z, 6e-7, &format!("x={x}: mean error"));
            let h: f64 = 2.0 / 7.0;
            let z = z_mean_known_variance(s2 / n as f64, n, v, h * h * v);
            assert_z(z, 6e-7, &format!("x={x}: squared error vs variance {v}"));
            assert!(v <= h * h / 4.0 + 1e-15);
        }
        // Grid points are returned unchanged.
        for i in 0..8 {
            let g = grid_point(i, 8, -1.0, 1.0);
            assert_eq!(dither_scalar(g, 3, -1.0, 1.0, &mut rng).unwrap(), g);
        }
    }

    #[test]
    fn conditional_dithering_respects_the_bound_and_reports_failure() {
        let mut rng = seeded_rng_for_experiments(2);
        let x = vec![0.1, -0.2, 0.05, 0.3];
        let mut idx = vec![0; 4];
        for _ in 0..1000 {
            conditional_dither_vector_indices(&x, 2, -1.0, 1.0, 1, 1.5, 1000, &mut idx, &mut rng)
                .unwrap();
            let v: Vec<f64> = idx.iter().map(|&i| grid_point(i, 4, -1.0, 1.0)).collect();
            assert!(lp_norm(&v, 1) <= 1.5);
        }
        // With 4 levels on [-1,1] every grid point has |g| ≥ 1/3: ℓ1 norm ≥ 4/3 > 1.
        assert!(matches!(
            conditional_dither_vector_indices(&x, 2, -1.0, 1.0, 1, 1.0, 50, &mut idx, &mut rng),
            Err(MechanismError::Infeasible(_))
        ));
        assert!(
            conditional_dither_vector_indices(&x, 2, -1.0, 1.0, 3, 1.0, 50, &mut idx, &mut rng)
                .is_err()
        );
        let mut short = vec![0; 3];
        assert!(dither_vector_indices(&x, 2, -1.0, 1.0, &mut short, &mut rng).is_err());
        assert!(matches!(
            dither_vector(&[0.0, f64::NAN], 2, -1.0, 1.0, &mut rng),
            Err(MechanismError::NonFiniteInput { index: 1, .. })
        ));
    }

    #[test]
    fn lemma10_bound_holds_empirically() {
        // The bound holds with probability ≥ 1 − δ = 0.99; with 2000 draws the count of
        // violations is Binomial(2000, ≤ 0.01): more than 50 has probability < 1e-7.
        let mut rng = seeded_rng_for_experiments(3);
        let d = 64;
        let mut v: Vec<f64> = (0..d).map(|i| ((i * 37 % 11) as f64 - 5.0) / 5.0).collect();
        let n = crate::domain::l2_norm(&v);
        v.iter_mut().for_each(|x| *x /= n);
        let spacing = 2.0 / 7.0;
        let bound = lemma10_l2_bound(1.0, spacing, d, 0.01).unwrap();
        let mut bad = 0;
        for _ in 0..2000 {
            let w = dither_vector(&v, 3, -1.0, 1.0, &mut rng).unwrap();
            if crate::domain::l2_norm(&w) > bound {
                bad += 1;
            }
        }
        assert!(bad <= 50, "{bad} violations");
    }
}

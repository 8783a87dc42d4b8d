//! Pearson's chi-square tests.
//!
//! Goodness of fit of observed counts against exact cell probabilities (Pearson 1900):
//! `X² = Σ_i (O_i − E_i)²/E_i` with `E_i = n·p_i`, asymptotically `χ²` with `cells − 1` degrees
//! of freedom under `H₀`. The approximation needs every expected count reasonably large, so
//! consecutive cells are pooled until each pooled expected count is at least `min_expected`
//! ([`MIN_EXPECTED`] `= 5` by default, Cochran's rule); a trailing remainder joins the last pooled
//! cell. Cells of probability zero are not pooled: any count in one rejects outright (`p = 0`).
//!
//! The survival function is `P(χ²_k > x) = Q(k/2, x/2)` (A&S 26.4.19), the regularized upper
//! incomplete gamma function of `privfed_special`. Under `H₀` a test at level `α` (reject when
//! `p < α`) has FPR `α` up to the error of the `χ²` approximation, which is small when the pooled
//! expected counts are large (the kit's calibration test checks it at `α = 0.05`).

use crate::{TestkitError, check_alpha};

/// Default minimum expected count per pooled cell (Cochran's rule of thumb).
pub const MIN_EXPECTED: f64 = 5.0;

/// Result of a chi-square test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChiSquare {
    /// Pearson's statistic `X²` (`+∞` if a zero-probability cell was observed).
    pub statistic: f64,
    /// Degrees of freedom `k` (pooled cells − 1 for a goodness-of-fit test).
    pub dof: usize,
    /// `P(χ²_k ≥ X²)` under `H₀`.
    pub p_value: f64,
}

/// Chi-square survival function `P(χ²_k > x) = Q(k/2, x/2)` for `k > 0` degrees of freedom
/// (A&S 26.4.19); 1 for `x ≤ 0`, NaN for NaN arguments or `k ≤ 0`.
pub fn chi_square_sf(x: f64, dof: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    privfed_special::gamma_inc_complement(dof / 2.0, x.max(0.0) / 2.0)
}

/// Pearson's chi-square goodness of fit of `observed` counts against exact probabilities
/// `probs` (same length, non-negative, summing to 1 within `10⁻⁹`), pooling consecutive cells
/// until each expected count is at least `min_expected` (see the module doc).
///
/// Errors: length mismatch, invalid probabilities, no observations, fewer than two pooled cells.
pub fn chi_square_gof(
    observed: &[u64],
    probs: &[f64],
    min_expected: f64,
) -> Result<ChiSquare, TestkitError> {
    if observed.len() != probs.len() {
        return Err(TestkitError::LengthMismatch {
            left: observed.len(),
            right: probs.len(),
        });
    }
    if let Some(&p) = probs.iter().find(|p| !(p.is_finite() && **p >= 0.0)) {
        return Err(TestkitError::Invalid {
            what: "probability",
            value: p,
        });
    }
    let total: f64 = probs.iter().sum();
    if (total - 1.0).abs() > 1e-9 {
        return Err(TestkitError::Invalid {
            what: "sum of probabilities",
            value: total,
        });
    }
    if min_expected.is_nan() || min_expected < 0.0 {
        return Err(TestkitError::Invalid {
            what: "minimum expected count",
            value: min_expected,
        });
    }
    let n: u64 = observed.iter().sum();
    if n == 0 {
        return Err(TestkitError::TooFew {
            what: "observations",
            need: 1,
            got: 0,
        });
    }
    let n = n as f64;
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut o, mut e) = (0.0, 0.0);
    let mut impossible = false;
    for (&c, &p) in observed.iter().zip(probs) {
        if p == 0.0 {
            impossible |= c > 0;
            continue;
        }
        o += c as f64;
        e += n * p;
        if e >= min_expected {
            cells.push((o, e));
            (o, e) = (0.0, 0.0);
        }
    }
    if let Some(last) = cells.last_mut() {
        last.0 += o;
        last.1 += e;
    }
    if cells.len() < 2 {
        return Err(TestkitError::TooFew {
            what: "pooled cells",
            need: 2,
            got: cells.len(),
        });
    }
    let dof = cells.len() - 1;
    if impossible {
        return Ok(ChiSquare {
            statistic: f64::INFINITY,
            dof,
            p_value: 0.0,
        });
    }
    let statistic: f64 = cells.iter().map(|&(o, e)| (o - e) * (o - e) / e).sum();
    Ok(ChiSquare {
        statistic,
        dof,
        p_value: chi_square_sf(statistic, dof as f64),
    })
}

/// Asserts that `observed` fits `probs` at level `alpha` (FPR `alpha`): panics, naming `what`,
/// when [`chi_square_gof`] (pooling at [`MIN_EXPECTED`]) gives `p < alpha` or fails.
pub fn assert_chi_square_gof(observed: &[u64], probs: &[f64], alpha: f64, what: &str) -> ChiSquare {
    check_alpha(alpha);
    let t = chi_square_gof(observed, probs, MIN_EXPECTED)
        .unwrap_or_else(|e| panic!("{what}: chi-square test not computable: {e}"));
    assert!(
        t.p_value >= alpha,
        "{what}: chi-square {:.4} with {} dof, p = {:.3e} < α = {alpha:e}",
        t.statistic,
        t.dof,
        t.p_value
    );
    t
}

/// Asserts that a statistic which is `χ²_dof` under `H₀` (e.g. a sum of `dof` squared
/// independent standard normals) is below its upper `alpha` quantile (FPR `alpha`); returns
/// its p-value.
pub fn assert_chi_square_statistic(statistic: f64, dof: usize, alpha: f64, what: &str) -> f64 {
    check_alpha(alpha);
    let p = chi_square_sf(statistic, dof as f64);
    assert!(
        p >= alpha,
        "{what}: chi-square {statistic:.4} with {dof} dof, p = {p:.3e} < α = {alpha:e}"
    );
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn known_statistic_for_fixed_counts() {
        // A fair die, 60 rolls: (O − 10)²/10 summed = (4 + 1 + 0 + 9 + 1 + 9)/10 = 2.4, 5 dof.
        let t = chi_square_gof(&[12, 9, 10, 13, 9, 7], &[1.0 / 6.0; 6], MIN_EXPECTED).unwrap();
        assert!((t.statistic - 2.4).abs() < 1e-12, "{t:?}");
        assert_eq!(t.dof, 5);
        // Q(5/2, y) = erfc(√y) + e^{−y}(2√y + 4y^{3/2}/3)/√π with y = X²/2 (A&S 6.5.22 recurrence),
        // erfc(√y) = 2(1 − Φ(√(2y))).
        let y: f64 = 1.2;
        let want = 2.0 * privfed_special::norm_sf((2.0 * y).sqrt())
            + (-y).exp() * (2.0 * y.sqrt() + 4.0 * y.powf(1.5) / 3.0) / std::f64::consts::PI.sqrt();
        assert!((t.p_value - want).abs() < 1e-13, "{} vs {want}", t.p_value);
        assert!((t.p_value - 0.791_474_120_594_324_7).abs() < 1e-13);
    }

    #[test]
    fn survival_function_closed_forms() {
        // k = 2: e^{−x/2}; k = 4: e^{−x/2}(1 + x/2); k = 1: 2(1 − Φ(√x)).
        for &x in &[0.1, 1.0, 3.0, 10.0, 40.0, 80.0] {
            let h = x / 2.0;
            assert!(
                (chi_square_sf(x, 2.0) / (-h).exp() - 1.0).abs() < 1e-13,
                "k=2 x={x}"
            );
            let r = (-h).exp() * (1.0 + h);
            assert!((chi_square_sf(x, 4.0) / r - 1.0).abs() < 1e-13, "k=4 x={x}");
            let r = 2.0 * privfed_special::norm_sf(f64::sqrt(x));
            assert!((chi_square_sf(x, 1.0) / r - 1.0).abs() < 1e-12, "k=1 x={x}");
        }
        assert_eq!(chi_square_sf(0.0, 3.0), 1.0);
        assert_eq!(chi_square_sf(-1.0, 3.0), 1.0);
        assert!(chi_square_sf(f64::NAN, 3.0).is_nan());
        // Near the 1e-6 quantiles of χ²₄ and χ²₁₉ (mpmath, 30 digits).
        assert!((chi_square_sf(33.3768, 4.0) / 1.000_019_615_657_82e-6 - 1.0).abs() < 1e-12);
        assert!((chi_square_sf(63.6826, 19.0) / 9.979_401_597_615_21e-7 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn pooling_and_zero_cells() {
        // Expected counts 50, 30, 10, 4, 3, 3 (n = 100): 4 + 3 pool into one cell, and the
        // remaining 3 joins it (below 5 on its own): four cells.
        let probs = [0.5, 0.3, 0.1, 0.04, 0.03, 0.03];
        let t = chi_square_gof(&[50, 30, 10, 4, 3, 3], &probs, MIN_EXPECTED).unwrap();
        assert_eq!(t.dof, 3);
        assert_eq!(t.statistic, 0.0);
        assert_eq!(t.p_value, 1.0);
        // Without pooling all six cells count.
        assert_eq!(
            chi_square_gof(&[50, 30, 10, 4, 3, 3], &probs, 0.0)
                .unwrap()
                .dof,
            5
        );
        // A count in a zero-probability cell rejects outright; an empty one is ignored.
        let t = chi_square_gof(&[10, 0, 10], &[0.5, 0.0, 0.5], MIN_EXPECTED).unwrap();
        assert_eq!((t.dof, t.statistic), (1, 0.0));
        let t = chi_square_gof(&[10, 1, 10], &[0.5, 0.0, 0.5], MIN_EXPECTED).unwrap();
        assert_eq!(t.p_value, 0.0);
    }

    #[test]
    fn invalid_inputs_are_errors() {
        assert!(matches!(
            chi_square_gof(&[1, 2], &[1.0], 5.0),
            Err(TestkitError::LengthMismatch { .. })
        ));
        assert!(chi_square_gof(&[1, 2], &[0.5, 0.6], 5.0).is_err());
        assert!(chi_square_gof(&[1, 2], &[f64::NAN, 0.5], 5.0).is_err());
        assert!(chi_square_gof(&[0, 0], &[0.5, 0.5], 5.0).is_err());
        // 6 observations cannot fill two cells of expected count 5.
        assert!(matches!(
            chi_square_gof(&[3, 3], &[0.5, 0.5], 5.0),
            Err(TestkitError::TooFew { .. })
        ));
    }

    #[test]
    #[should_panic(expected = "chi-square")]
    fn assert_rejects_a_wrong_distribution() {
        assert_chi_square_gof(&[700, 300], &[0.5, 0.5], 1e-6, "biased coin");
    }

    /// Under H₀ (multinomial draws from the tested probabilities), 4000 tests at α = 0.05 reject
    /// about 200 times: the count is Binomial(4000, 0.05) (sd 13.8), and the bounds [150, 250]
    /// are ±3.6 sd (chance ≈ 3·10⁻⁴ that a correct kit fails at some seed).
    #[test]
    fn calibration_under_h0() {
        let probs = [0.02, 0.08, 0.2, 0.3, 0.25, 0.1, 0.05];
        let cdf: Vec<f64> = probs
            .iter()
            .scan(0.0, |s, p| {
                *s += p;
                Some(*s)
            })
            .collect();
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(1);
        let mut rejections = 0;
        for _ in 0..4000 {
            let mut counts = [0u64; 7];
            for _ in 0..400 {
                let u: f64 = rng.random();
                counts[cdf.iter().position(|&c| u < c).unwrap_or(6)] += 1;
            }
            let t = chi_square_gof(&counts, &probs, MIN_EXPECTED).unwrap();
            rejections += usize::from(t.p_value < 0.05);
        }
        assert!((150..=250).contains(&rejections), "{rejections} of 4000");
    }
}

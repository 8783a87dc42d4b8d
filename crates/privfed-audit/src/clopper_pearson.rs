//! Clopper–Pearson (exact binomial) confidence bounds (Clopper & Pearson 1934;
//! docs/ALGORITHMS.md "Empirical privacy auditing", §A.1).
//!
//! For `k` successes in `n` Bernoulli(`p`) trials, the one-sided bounds at significance `α` are
//! the beta quantiles
//!
//! * lower: `p_lo = B⁻¹(α; k, n − k + 1)` (`0` when `k = 0`), so `P[p_lo > p] ≤ α`;
//! * upper: `p_hi = B⁻¹(1 − α; k + 1, n − k)` (`1` when `k = n`), so `P[p_hi < p] ≤ α`.
//!
//! They are exact (never below their nominal coverage) for every `n` and `p`, which is what an
//! audit needs: a lower bound on ε must not be inflated by a normal approximation in the tails,
//! where the interesting false-positive rates live. The quantiles are computed by
//! [`privfed_special::beta_inc_inv_ln`] and its complement, in log space, so `α` as small as
//! `10⁻³⁰⁰` works. The reference values (scipy's `beta.ppf`) are checked in the integration
//! tests (`tests/it/reference.rs`).

use crate::error::{AuditError, Result, check_alpha};
use privfed_special::{beta_inc_complement_inv_ln, beta_inc_inv_ln};

fn check_counts(k: u64, n: u64) -> Result<()> {
    if n == 0 {
        return Err(AuditError::TooFewSamples(
            "a binomial bound needs n ≥ 1 trials".into(),
        ));
    }
    if k > n {
        return Err(AuditError::invalid(
            "k",
            k as f64,
            format!("successes must not exceed the trials n = {n}"),
        ));
    }
    Ok(())
}

/// One-sided lower Clopper–Pearson bound `B⁻¹(α; k, n−k+1)` on a binomial proportion: with
/// probability at least `1 − α` the true `p` is at least this (0 when `k = 0`).
pub fn lower(k: u64, n: u64, alpha: f64) -> Result<f64> {
    check_counts(k, n)?;
    check_alpha(alpha)?;
    if k == 0 {
        return Ok(0.0);
    }
    Ok(beta_inc_inv_ln(k as f64, (n - k + 1) as f64, alpha.ln()))
}

/// One-sided upper Clopper–Pearson bound `B⁻¹(1−α; k+1, n−k)` on a binomial proportion: with
/// probability at least `1 − α` the true `p` is at most this (1 when `k = n`). Computed as the
/// `x` with `1 − I_x(k+1, n−k) = α`, so small upper bounds keep their relative accuracy.
pub fn upper(k: u64, n: u64, alpha: f64) -> Result<f64> {
    check_counts(k, n)?;
    check_alpha(alpha)?;
    if k == n {
        return Ok(1.0);
    }
    Ok(beta_inc_complement_inv_ln(
        (k + 1) as f64,
        (n - k) as f64,
        alpha.ln(),
    ))
}

/// Two-sided Clopper–Pearson interval at confidence `1 − α`: `(lower(k, n, α/2),
/// upper(k, n, α/2))`.
pub fn interval(k: u64, n: u64, alpha: f64) -> Result<(f64, f64)> {
    check_alpha(alpha)?;
    Ok((lower(k, n, alpha / 2.0)?, upper(k, n, alpha / 2.0)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_counts() {
        assert_eq!(lower(0, 10, 0.05).unwrap(), 0.0);
        assert_eq!(upper(10, 10, 0.05).unwrap(), 1.0);
        // k = n: lower bound is α^{1/n}; k = 0: upper bound is 1 − α^{1/n}.
        let lo = lower(10, 10, 0.05).unwrap();
        assert!((lo - 0.05f64.powf(0.1)).abs() < 1e-14, "{lo}");
        let hi = upper(0, 10, 0.05).unwrap();
        assert!((hi - (1.0 - 0.05f64.powf(0.1))).abs() < 1e-14, "{hi}");
    }

    #[test]
    fn bounds_bracket_the_estimate_and_shrink() {
        let (lo, hi) = interval(300, 1000, 0.05).unwrap();
        assert!(lo < 0.3 && 0.3 < hi);
        let (lo2, hi2) = interval(3000, 10000, 0.05).unwrap();
        assert!(lo2 > lo && hi2 < hi);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(lower(11, 10, 0.05).is_err());
        assert!(upper(1, 0, 0.05).is_err());
        assert!(lower(1, 10, 0.0).is_err());
        assert!(upper(1, 10, f64::NAN).is_err());
    }

    /// Coverage is exact-or-conservative: at p = 0.02, n = 200 the upper bound at α = 0.05 is
    /// below p exactly when k ≤ k* for the largest such k*; P[Bin(200, 0.02) ≤ k*] must be ≤ α.
    #[test]
    fn upper_bound_coverage_is_at_least_nominal() {
        let (n, p, alpha) = (200u64, 0.02f64, 0.05);
        let mut miss = 0.0;
        for k in 0..=n {
            if upper(k, n, alpha).unwrap() < p {
                let ln_pmf = privfed_special::ln_binomial(n as f64, k as f64)
                    + k as f64 * p.ln()
                    + (n - k) as f64 * (1.0 - p).ln();
                miss += ln_pmf.exp();
            }
        }
        assert!(miss <= alpha, "non-coverage {miss}");
    }
}

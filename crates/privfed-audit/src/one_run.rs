//! The one-run audit of Steinke, Nasr, Jagielski 2023, "Privacy Auditing with One (1) Training
//! Run" (NeurIPS 2023; docs/ALGORITHMS.md "Empirical privacy auditing", §A.4).
//!
//! `m` canaries are each included independently with probability ½ (`S ∈ {±1}^m` uniform); the
//! auditor sees the output and guesses `T ∈ {−1, 0, +1}^m`, making `r` non-abstaining guesses of
//! which `v` are correct. If the algorithm is ε-DP with respect to each canary, the number of
//! correct guesses is stochastically dominated by `Binomial(r, q)` with `q = e^ε/(1 + e^ε)`
//! (their Theorem 3.1 / Proposition 5.1). For (ε, δ)-DP their Theorem 5.2 adds a term linear in
//! δ; the p-value of observing at least `v` correct guesses is
//!
//! `p(ε, δ) = min(1, β + α·δ·2m)`, `β = P[Binomial(r, q) ≥ v]`,
//! `α = max_{1≤i≤v} P[v > Binomial(r, q) ≥ v − i]/i`
//!
//! (the paper's Algorithm / appendix code `p_value_DP_audit`). [`epsilon_lower_bound`] returns
//! the largest ε with `p(ε, δ) ≤ α_sig` — a lower bound on ε at confidence `1 − α_sig`. The
//! reference values (an independent Python computation with scipy's binomial) are checked in
//! `tests/it/reference.rs`.

use crate::error::{AuditError, Result, check_alpha, check_delta, check_epsilon};
use privfed_special::{beta_inc, ln_binomial, softplus};

pub(crate) fn check_counts(m: u64, r: u64, v: u64) -> Result<()> {
    if !(v <= r && r <= m) {
        return Err(AuditError::invalid(
            "counts",
            v as f64,
            format!("need correct v ≤ guesses r ≤ canaries m, got v = {v}, r = {r}, m = {m}"),
        ));
    }
    Ok(())
}

/// `P[Binomial(r, q) ≥ v] = I_q(v, r − v + 1)` (1 for `v = 0`).
fn binomial_sf_ge(r: u64, q: f64, v: u64) -> f64 {
    if v == 0 {
        1.0
    } else {
        beta_inc(v as f64, (r - v + 1) as f64, q)
    }
}

/// The p-value of observing `v` or more correct guesses out of `r` when `m` canaries are each
/// included with probability ½ and the algorithm is (ε, δ)-DP (see the [module docs](self)).
pub fn p_value(m: u64, r: u64, v: u64, epsilon: f64, delta: f64) -> Result<f64> {
    check_counts(m, r, v)?;
    check_epsilon(epsilon)?;
    check_delta(delta)?;
    // q = e^ε/(1+e^ε); ln q = −softplus(−ε), ln(1 − q) = −softplus(ε).
    let q = 1.0 / (1.0 + (-epsilon).exp());
    let beta = binomial_sf_ge(r, q, v);
    if delta == 0.0 || v == 0 {
        return Ok(beta.min(1.0));
    }
    let (ln_q, ln_1mq) = (-softplus(-epsilon), -softplus(epsilon));
    // Σ_{j=v−i}^{v−1} pmf(j), accumulated downwards from j = v − 1.
    let mut alpha: f64 = 0.0;
    let mut sum = 0.0;
    let rf = r as f64;
    for i in 1..=v {
        let j = (v - i) as f64;
        let ln_pmf = ln_binomial(rf, j) + j * ln_q + (rf - j) * ln_1mq;
        sum += ln_pmf.exp();
        alpha = alpha.max(sum / i as f64);
    }
    Ok((beta + alpha * delta * 2.0 * m as f64).min(1.0))
}

/// The largest `ε ≥ 0` with [`p_value`]`(m, r, v, ε, δ) ≤ alpha`: the one-run audit's lower
/// bound on ε at confidence `1 − alpha` (0 if even ε = 0 is not rejected). Bisection to an
/// absolute width of `10⁻⁹`, returning the lower end (so the returned ε is rejected as
/// computed).
pub fn epsilon_lower_bound(m: u64, r: u64, v: u64, delta: f64, alpha: f64) -> Result<f64> {
    check_counts(m, r, v)?;
    check_delta(delta)?;
    check_alpha(alpha)?;
    largest_rejected(1e4, |e| Ok(p_value(m, r, v, e, delta)? <= alpha))
}

/// The largest `x ≥ 0` that `rejected` rejects, for a predicate that rejects every value below
/// its boundary (the one-run audits' bounds): 0 when 0 is not rejected; otherwise the bracket
/// doubles from 1 (its upper end is returned once it passes `cap`) and is bisected to an
/// absolute width of `10⁻⁹`, returning the lower end (a value that was rejected).
pub(crate) fn largest_rejected(
    cap: f64,
    mut rejected: impl FnMut(f64) -> Result<bool>,
) -> Result<f64> {
    if !rejected(0.0)? {
        return Ok(0.0);
    }
    let mut hi = 1.0;
    while rejected(hi)? {
        hi *= 2.0;
        if hi > cap {
            return Ok(hi);
        }
    }
    let mut lo = 0.0;
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if rejected(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The guesses of the one-run audit from canary scores: the `k_plus` highest scores guess
/// "included", the `k_minus` lowest guess "excluded", the rest abstain. Returns `(r, v)`:
/// guesses made and how many were right (`included[i]` is the truth `S_i = +1`). Ties in score
/// are broken by index, which does not depend on the truth.
pub fn guesses(
    scores: &[f64],
    included: &[bool],
    k_plus: usize,
    k_minus: usize,
) -> Result<(u64, u64)> {
    if scores.len() != included.len() {
        return Err(AuditError::invalid(
            "included",
            included.len() as f64,
            format!("need one truth per score ({})", scores.len()),
        ));
    }
    if k_plus + k_minus > scores.len() {
        return Err(AuditError::invalid(
            "k_plus + k_minus",
            (k_plus + k_minus) as f64,
            format!("at most the number of canaries ({})", scores.len()),
        ));
    }
    if let Some(bad) = scores.iter().find(|s| s.is_nan()) {
        return Err(AuditError::invalid("score", *bad, "scores must not be NaN"));
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut v = 0u64;
    for &i in &order[..k_plus] {
        v += u64::from(included[i]);
    }
    for &i in &order[scores.len() - k_minus..] {
        v += u64::from(!included[i]);
    }
    Ok(((k_plus + k_minus) as u64, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With δ = 0 the p-value is the binomial tail; at ε = 0 with r = v = 1 it is ½.
    #[test]
    fn pure_dp_is_the_binomial_tail() {
        assert!((p_value(10, 1, 1, 0.0, 0.0).unwrap() - 0.5).abs() < 1e-15);
        // P[Bin(3, q) ≥ 3] = q³.
        let q = 1.0 / (1.0 + (-1.0f64).exp());
        assert!((p_value(10, 3, 3, 1.0, 0.0).unwrap() - q.powi(3)).abs() < 1e-14);
    }

    #[test]
    fn p_value_grows_with_epsilon_and_delta() {
        let a = p_value(1000, 200, 150, 0.5, 0.0).unwrap();
        let b = p_value(1000, 200, 150, 1.0, 0.0).unwrap();
        let c = p_value(1000, 200, 150, 1.0, 1e-5).unwrap();
        assert!(a < b && b < c, "{a} {b} {c}");
    }

    /// The bound is the ε where the p-value crosses α.
    #[test]
    fn bound_is_where_the_p_value_crosses_alpha() {
        let e = epsilon_lower_bound(1000, 200, 150, 1e-5, 0.05).unwrap();
        assert!(e > 0.0);
        assert!(p_value(1000, 200, 150, e, 1e-5).unwrap() <= 0.05);
        assert!(p_value(1000, 200, 150, e + 1e-6, 1e-5).unwrap() > 0.05);
        // Chance-level guessing gives 0.
        assert_eq!(
            epsilon_lower_bound(1000, 200, 100, 1e-5, 0.05).unwrap(),
            0.0
        );
    }

    #[test]
    fn guesses_count_correct_ones() {
        let scores = [3.0, 2.0, 1.0, 0.0];
        let truth = [true, false, true, false];
        assert_eq!(guesses(&scores, &truth, 1, 1).unwrap(), (2, 2));
        assert_eq!(guesses(&scores, &truth, 2, 0).unwrap(), (2, 1));
        assert!(guesses(&scores, &truth, 3, 2).is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(p_value(10, 11, 1, 1.0, 0.0).is_err());
        assert!(p_value(10, 5, 6, 1.0, 0.0).is_err());
        assert!(p_value(10, 5, 1, -1.0, 0.0).is_err());
        assert!(epsilon_lower_bound(10, 5, 1, 0.0, 0.0).is_err());
    }
}

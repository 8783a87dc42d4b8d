//! The histogram tester for mechanisms with finitely many outputs (docs/ALGORITHMS.md
//! "Empirical privacy auditing", §A.3).
//!
//! For output distributions `P = M(x)` and `Q = M(x′)` on a finite set, the smallest δ for which
//! the pair satisfies `(ε, δ)` is the hockey-stick divergence, in both directions:
//!
//! `δ(ε) = max( Σ_o max(0, P(o) − e^ε Q(o)),  Σ_o max(0, Q(o) − e^ε P(o)) )`.
//!
//! [`exact_delta`] computes it from exact pmfs (the mechanism's own: `GridRr::pmf`,
//! `BitwiseRr::pmf`, `Mvu::pmf`); [`empirical_delta`] plugs in the empirical frequencies
//! `P̂`, `Q̂`. Its finite-sample tolerance: `Σ_o max(0, P(o) − e^ε Q(o)) = sup_S P(S) − e^ε Q(S)`,
//! so `|δ̂(ε) − δ(ε)| ≤ sup_S|P̂(S) − P(S)| + e^ε sup_S|Q̂(S) − Q(S)|` (and the same with `P`, `Q`
//! swapped), and `sup_S |P̂(S) − P(S)| = ½‖P̂ − P‖₁`. By Weissman, Ordentlich, Seroussi,
//! Verdú, Weinberger 2003 (Thm. 2.1), for `k` outcomes and `n` samples
//! `P[‖P̂ − P‖₁ ≥ t] ≤ (2^k − 2)·e^{−n t²/2}`; with significance `α/2` for each of the two
//! distributions, `t(n) = √(2·(ln(2^k − 2) + ln(2/α))/n)` and, with probability `1 − α`,
//!
//! `|δ̂(ε) − δ(ε)| ≤ ½·max( t(n_x) + e^ε t(n_x′),  t(n_x′) + e^ε t(n_x) )` ([`delta_tolerance`]).
//!
//! A claim `(ε, δ)` is rejected at confidence `1 − α` when `δ̂(ε) − tolerance > δ`.
//!
//! The histogram also yields a *score* for the distinguishing test: [`learned_scores`] ranks the
//! outcomes by their empirical log ratio on the selection half, and
//! [`crate::distinguish::split_audit`] bounds ε on the other half (the Neyman–Pearson sets of a
//! discrete pair are exactly the upper sets of this ratio).

use crate::error::{AuditError, Result, check_alpha, check_epsilon};
use serde::Serialize;
use std::collections::BTreeMap;

/// `Σ_o max(0, p_o − e^ε q_o)`: one direction of the hockey-stick divergence.
fn hockey_stick(p: &[f64], q: &[f64], epsilon: f64) -> f64 {
    let e = epsilon.exp();
    p.iter().zip(q).map(|(&a, &b)| (a - e * b).max(0.0)).sum()
}

fn check_pmfs(p: &[f64], q: &[f64]) -> Result<()> {
    if p.len() != q.len() || p.is_empty() {
        return Err(AuditError::invalid(
            "pmf",
            q.len() as f64,
            format!(
                "the two pmfs must be non-empty and of one length ({})",
                p.len()
            ),
        ));
    }
    if let Some(&bad) = p.iter().chain(q).find(|v| !(v.is_finite() && **v >= 0.0)) {
        return Err(AuditError::invalid(
            "pmf",
            bad,
            "probabilities must be finite and non-negative",
        ));
    }
    Ok(())
}

/// The exact `δ(ε) = max(Σ_o max(0, P(o) − e^ε Q(o)), Σ_o max(0, Q(o) − e^ε P(o)))` of a pair
/// of pmfs over the same outcomes.
pub fn exact_delta(p: &[f64], q: &[f64], epsilon: f64) -> Result<f64> {
    check_pmfs(p, q)?;
    check_epsilon(epsilon)?;
    Ok(hockey_stick(p, q, epsilon).max(hockey_stick(q, p, epsilon)))
}

/// The exact pure ε of a pair of pmfs: `max_o |ln P(o) − ln Q(o)|` (`+∞` if an outcome has
/// probability 0 on one side only; outcomes impossible on both sides are skipped).
pub fn exact_epsilon(p: &[f64], q: &[f64]) -> Result<f64> {
    check_pmfs(p, q)?;
    Ok(p.iter()
        .zip(q)
        .filter(|(a, b)| **a > 0.0 || **b > 0.0)
        .map(|(&a, &b)| (a.ln() - b.ln()).abs())
        .fold(0.0, f64::max))
}

/// `δ̂(ε)`: [`exact_delta`] of the empirical frequencies `counts_x/n_x`, `counts_x′/n_x′`.
pub fn empirical_delta(counts_x: &[u64], counts_x_prime: &[u64], epsilon: f64) -> Result<f64> {
    let (nx, nxp) = (total(counts_x)?, total(counts_x_prime)?);
    let p: Vec<f64> = counts_x.iter().map(|&c| c as f64 / nx).collect();
    let q: Vec<f64> = counts_x_prime.iter().map(|&c| c as f64 / nxp).collect();
    exact_delta(&p, &q, epsilon)
}

fn total(counts: &[u64]) -> Result<f64> {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return Err(AuditError::TooFewSamples(
            "a histogram has no samples".into(),
        ));
    }
    Ok(n as f64)
}

/// The `1 − α` tolerance of [`empirical_delta`] for `outcomes` outcomes and `n_x`, `n_x′`
/// samples (see the [module docs](self)).
pub fn delta_tolerance(
    n_x: u64,
    n_x_prime: u64,
    outcomes: usize,
    epsilon: f64,
    alpha: f64,
) -> Result<f64> {
    check_alpha(alpha)?;
    check_epsilon(epsilon)?;
    if n_x == 0 || n_x_prime == 0 {
        return Err(AuditError::TooFewSamples(
            "a histogram has no samples".into(),
        ));
    }
    if outcomes < 2 {
        return Ok(0.0);
    }
    // ln(2^k − 2) = k ln 2 + ln(1 − 2^{1−k}).
    let k = outcomes as f64;
    let ln_sets = k * std::f64::consts::LN_2 + (-(2f64.powf(1.0 - k))).ln_1p();
    let t = |n: u64| (2.0 * (ln_sets + (2.0 / alpha).ln()) / n as f64).sqrt();
    let e = epsilon.exp();
    let (tx, txp) = (t(n_x), t(n_x_prime));
    Ok(0.5 * (tx + e * txp).max(txp + e * tx))
}

/// The result of [`histogram_test`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistogramTest {
    /// The ε at which δ is estimated.
    pub epsilon: f64,
    /// `δ̂(ε)` from the counts.
    pub delta_hat: f64,
    /// Its `1 − α` tolerance ([`delta_tolerance`]).
    pub tolerance: f64,
    /// The exact `δ(ε)` when the pmfs were given.
    pub delta_exact: Option<f64>,
    /// Number of outcomes.
    pub outcomes: usize,
    /// `1 − α`.
    pub confidence: f64,
    /// `δ̂(ε) − tolerance > claimed δ`: the claim `(ε, δ)` is rejected at confidence `1 − α`.
    pub rejects_claim: bool,
}

/// Estimates `δ(ε)` from histograms, with its tolerance, compares it with the exact pmfs if
/// given (`exact`: `(P, Q)` over the same outcomes as the counts), and tests the claim
/// `(epsilon, claimed_delta)`.
pub fn histogram_test(
    counts_x: &[u64],
    counts_x_prime: &[u64],
    exact: Option<(&[f64], &[f64])>,
    epsilon: f64,
    claimed_delta: f64,
    alpha: f64,
) -> Result<HistogramTest> {
    if counts_x.len() != counts_x_prime.len() {
        return Err(AuditError::invalid(
            "counts",
            counts_x_prime.len() as f64,
            format!(
                "both histograms need the same outcomes ({})",
                counts_x.len()
            ),
        ));
    }
    let delta_hat = empirical_delta(counts_x, counts_x_prime, epsilon)?;
    let tolerance = delta_tolerance(
        counts_x.iter().sum(),
        counts_x_prime.iter().sum(),
        counts_x.len(),
        epsilon,
        alpha,
    )?;
    let delta_exact = match exact {
        Some((p, q)) => {
            if p.len() != counts_x.len() {
                return Err(AuditError::invalid(
                    "pmf",
                    p.len() as f64,
                    format!("must have one entry per outcome ({})", counts_x.len()),
                ));
            }
            Some(exact_delta(p, q, epsilon)?)
        }
        None => None,
    };
    Ok(HistogramTest {
        epsilon,
        delta_hat,
        tolerance,
        delta_exact,
        outcomes: counts_x.len(),
        confidence: 1.0 - alpha,
        rejects_claim: delta_hat - tolerance > claimed_delta,
    })
}

/// Scores of discrete outcomes learned from a selection half: `s(o) = ln((c_x(o) + ½)/(n_x + 1))
/// − ln((c_x′(o) + ½)/(n_x′ + 1))`, the smoothed empirical log likelihood ratio (outcomes unseen
/// in the selection half are absent: give them score 0). Used with
/// [`crate::distinguish::split_audit`] on the evaluation half, which keeps the bound honest.
pub fn learned_scores(select_x: &[u64], select_x_prime: &[u64]) -> BTreeMap<u64, f64> {
    let mut counts: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for &o in select_x {
        counts.entry(o).or_default().0 += 1;
    }
    for &o in select_x_prime {
        counts.entry(o).or_default().1 += 1;
    }
    let (nx, nxp) = (
        select_x.len() as f64 + 1.0,
        select_x_prime.len() as f64 + 1.0,
    );
    counts
        .into_iter()
        .map(|(o, (a, b))| {
            (
                o,
                ((a as f64 + 0.5) / nx).ln() - ((b as f64 + 0.5) / nxp).ln(),
            )
        })
        .collect()
}

/// Counts of each outcome of `keys` (outcomes in `outcomes` order; keys not listed are errors).
pub fn counts(keys: &[u64], outcomes: &[u64]) -> Result<Vec<u64>> {
    let index: BTreeMap<u64, usize> = outcomes.iter().enumerate().map(|(i, &o)| (o, i)).collect();
    let mut c = vec![0u64; outcomes.len()];
    for k in keys {
        let Some(&i) = index.get(k) else {
            return Err(AuditError::invalid(
                "outcome",
                f64::from_bits(*k),
                "an observed output is not among the mechanism's outcomes",
            ));
        };
        c[i] += 1;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Randomized response on two outcomes at ε₀: `P = (p, 1−p)`, `Q = (1−p, p)` with
    /// `p = e^{ε₀}/(1+e^{ε₀})`; `δ(ε) = p − e^ε(1 − p)` for `ε < ε₀`, 0 from ε₀ on.
    #[test]
    fn randomized_response_delta() {
        let e0: f64 = 1.0;
        let p = e0.exp() / (1.0 + e0.exp());
        let (pp, qq) = ([p, 1.0 - p], [1.0 - p, p]);
        let d = exact_delta(&pp, &qq, 0.5).unwrap();
        assert!((d - (p - 0.5f64.exp() * (1.0 - p))).abs() < 1e-15);
        assert!(exact_delta(&pp, &qq, 1.0).unwrap() < 1e-15);
        assert!((exact_epsilon(&pp, &qq).unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn tolerance_shrinks_like_one_over_root_n() {
        let a = delta_tolerance(10_000, 10_000, 8, 1.0, 0.05).unwrap();
        let b = delta_tolerance(40_000, 40_000, 8, 1.0, 0.05).unwrap();
        assert!((a / b - 2.0).abs() < 1e-12);
        // k = 2: ln(2^2 − 2) = ln 2.
        let t = (2.0 * (2f64.ln() + (2.0 / 0.05f64).ln()) / 100.0).sqrt();
        let c = delta_tolerance(100, 100, 2, 0.0, 0.05).unwrap();
        assert!((c - t).abs() < 1e-12, "{c} {t}");
    }

    #[test]
    fn learned_scores_rank_by_ratio() {
        let s = learned_scores(&[1, 1, 1, 2], &[2, 2, 2, 1]);
        assert!(s[&1] > 0.0 && s[&2] < 0.0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(exact_delta(&[0.5], &[0.5, 0.5], 1.0).is_err());
        assert!(exact_delta(&[f64::NAN], &[1.0], 1.0).is_err());
        assert!(empirical_delta(&[0, 0], &[1, 1], 1.0).is_err());
        assert!(counts(&[5], &[1, 2]).is_err());
        assert!(histogram_test(&[1, 2], &[1], None, 1.0, 0.0, 0.05).is_err());
    }
}

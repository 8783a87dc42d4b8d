//! The distinguishing test: a lower bound on ε from how well one event separates the outputs on
//! two neighbouring inputs (docs/ALGORITHMS.md "Empirical privacy auditing", §A.2).
//!
//! If a mechanism `M` is (ε, δ)-DP and `x`, `x′` are neighbours, then for **every** event `E`
//! `P[M(x) ∈ E] ≤ e^ε·P[M(x′) ∈ E] + δ`, and the same with `x`, `x′` swapped. Hence, with
//! `TPR = P[M(x) ∈ E]` and `FPR = P[M(x′) ∈ E]`,
//!
//! `ε ≥ ln(TPR − δ) − ln(FPR)`.
//!
//! From `n` samples on each side, the Clopper–Pearson bounds `TPR_lo` and `FPR_hi`, each at
//! significance `α/2`, give with probability at least `1 − α` (union bound)
//!
//! `ε_lb = ln(TPR_lo − δ) − ln(FPR_hi) ≤ ε`
//!
//! (Jagielski, Ullman, Oprea 2020, "Auditing differentially private machine learning"; Nasr et
//! al. 2021; the standard Clopper–Pearson form). Reported as `max(ε_lb, 0)`.
//!
//! The events are thresholds on a scalar score `s(z)` of the output, `E = {s ≥ t}` or
//! `E = {s < t}`, each bounding `ln P_x(E)/P_x′(E)` or the symmetric `ln P_x′(E)/P_x(E)` (DP holds
//! in both directions, so all four [`Direction`]s are valid). Choosing `t` and the direction by looking at the same
//! samples that are then used for the bound would make the confidence dishonest (the maximum of
//! many bounds each at `1 − α` holds with less than `1 − α`). Two honest selections:
//!
//! * [`Selection::Split`] (the default, and what the CLI uses): the threshold and direction are
//!   chosen on the **first half** of each side's samples (maximizing the same bound there, at
//!   the stricter level `α/K` for `K` candidates so that lucky far-tail counts do not win), and
//!   the bound is computed once on the **second half**. It costs half the samples, but any number
//!   of candidate thresholds can be searched, including data-dependent ones; the confidence is
//!   exactly the single test's `1 − α`.
//! * [`Selection::Bonferroni`]: a list of `K` thresholds **fixed before seeing the data** (e.g.
//!   the outcomes of a discrete mechanism), all evaluated on all samples, each of the four
//!   directions of each threshold at significance `α/(4K)`; the maximum holds with probability `1 − α`. It keeps
//!   every sample, but the Clopper–Pearson quantile grows with `ln K`. With data-chosen
//!   thresholds a union bound over them is not valid, which is why this variant takes them as an
//!   argument.

use crate::clopper_pearson;
use crate::error::{AuditError, Result, check_alpha, check_delta};
use serde::Serialize;

/// Counts of an event `E` on both inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EventCounts {
    /// Samples of `M(x)` in `E`.
    pub hits_x: u64,
    /// Samples of `M(x)`.
    pub n_x: u64,
    /// Samples of `M(x′)` in `E`.
    pub hits_x_prime: u64,
    /// Samples of `M(x′)`.
    pub n_x_prime: u64,
}

/// `ln(tpr − δ) − ln(fpr)`: the ε an (ε, δ)-DP mechanism needs for an event with these rates
/// (`−∞` when `tpr ≤ δ`, `+∞` when `fpr = 0 < tpr − δ`).
pub fn epsilon_from_rates(tpr: f64, fpr: f64, delta: f64) -> f64 {
    if tpr <= delta {
        f64::NEG_INFINITY
    } else {
        (tpr - delta).ln() - fpr.ln()
    }
}

/// The bound from one event (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EventBound {
    /// `max(0, ln(TPR_lo − δ) − ln(FPR_hi))`.
    pub epsilon_lower_bound: f64,
    /// Clopper–Pearson lower bound on `TPR = P[M(x) ∈ E]` at significance `α/2`.
    pub tpr_lower: f64,
    /// Clopper–Pearson upper bound on `FPR = P[M(x′) ∈ E]` at significance `α/2`.
    pub fpr_upper: f64,
    /// The counts it came from.
    pub counts: EventCounts,
}

/// `ε_lb = max(0, ln(TPR_lo − δ) − ln(FPR_hi))` with `TPR_lo = CP_lower(hits_x, n_x, α/2)` and
/// `FPR_hi = CP_upper(hits_x′, n_x′, α/2)`: a lower bound on the ε of any (ε, δ)-DP mechanism
/// that holds with probability at least `1 − α`.
pub fn event_bound(counts: EventCounts, delta: f64, alpha: f64) -> Result<EventBound> {
    check_delta(delta)?;
    check_alpha(alpha)?;
    let tpr_lower = clopper_pearson::lower(counts.hits_x, counts.n_x, alpha / 2.0)?;
    let fpr_upper = clopper_pearson::upper(counts.hits_x_prime, counts.n_x_prime, alpha / 2.0)?;
    let e = epsilon_from_rates(tpr_lower, fpr_upper, delta);
    Ok(EventBound {
        epsilon_lower_bound: if e > 0.0 { e } else { 0.0 },
        tpr_lower,
        fpr_upper,
        counts,
    })
}

/// The event and which input's probability is in the numerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// `E = {s ≥ t}`, bounds `ln P[M(x) ∈ E]/P[M(x′) ∈ E]` (x scores high).
    XAbove,
    /// `E = {s < t}`, bounds `ln P[M(x′) ∈ E]/P[M(x) ∈ E]` (x scores high; the complement).
    XPrimeBelow,
    /// `E = {s ≥ t}`, bounds `ln P[M(x′) ∈ E]/P[M(x) ∈ E]` (x′ scores high).
    XPrimeAbove,
    /// `E = {s < t}`, bounds `ln P[M(x) ∈ E]/P[M(x′) ∈ E]` (x′ scores high; the complement).
    XBelow,
}

impl Direction {
    /// All four.
    pub const ALL: [Direction; 4] = [
        Direction::XAbove,
        Direction::XPrimeBelow,
        Direction::XPrimeAbove,
        Direction::XBelow,
    ];
}

/// How the threshold is chosen honestly (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// Choose on the first half of each sample set, bound on the second.
    Split,
    /// Every threshold of this data-independent list, all four directions, each at `α/(4K)`.
    Bonferroni(Vec<f64>),
}

/// The result of [`threshold_audit`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdBound {
    /// The lower bound on ε, at confidence `1 − α`.
    pub epsilon_lower_bound: f64,
    /// `1 − α`.
    pub confidence: f64,
    /// The chosen threshold `t`.
    pub threshold: f64,
    /// The chosen side.
    pub direction: Direction,
    /// The event bound at `t` (`hits_x`/`n_x` are of the numerator side of `direction`).
    pub event: EventBound,
    /// How many thresholds were considered (the candidates of the selection half, or `K`).
    pub candidates: usize,
    /// `"split"` or `"bonferroni"`.
    pub selection: &'static str,
}

/// Scores sorted ascending, with counting of `s ≥ t`.
struct Sorted(Vec<f64>);

impl Sorted {
    fn new(scores: &[f64]) -> Result<Self> {
        if let Some(bad) = scores.iter().find(|s| s.is_nan()) {
            return Err(AuditError::invalid("score", *bad, "scores must not be NaN"));
        }
        let mut v = scores.to_vec();
        v.sort_by(f64::total_cmp);
        Ok(Self(v))
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    /// `#{s ≥ t}`.
    fn at_least(&self, t: f64) -> u64 {
        (self.0.len() - self.0.partition_point(|&s| s < t)) as u64
    }
}

/// The bound for threshold `t` and `direction` on sorted samples at significance `alpha`.
fn bound_at(
    sx: &Sorted,
    sxp: &Sorted,
    t: f64,
    direction: Direction,
    delta: f64,
    alpha: f64,
) -> Result<EventBound> {
    event_bound(counts_at(sx, sxp, t, direction), delta, alpha)
}

/// The counts of the event of `direction` at `t` (numerator side first).
fn counts_at(sx: &Sorted, sxp: &Sorted, t: f64, direction: Direction) -> EventCounts {
    let (ax, axp) = (sx.at_least(t), sxp.at_least(t));
    let (nx, nxp) = (sx.len(), sxp.len());
    // (hits of the numerator side, its n, hits of the denominator side, its n).
    let (h1, n1, h0, n0) = match direction {
        Direction::XAbove => (ax, nx, axp, nxp),
        Direction::XPrimeBelow => (nxp - axp, nxp, nx - ax, nx),
        Direction::XPrimeAbove => (axp, nxp, ax, nx),
        Direction::XBelow => (nx - ax, nx, nxp - axp, nxp),
    };
    EventCounts {
        hits_x: h1,
        n_x: n1,
        hits_x_prime: h0,
        n_x_prime: n0,
    }
}

/// Largest number of candidate thresholds the split searches; above it, candidates are taken at
/// geometrically spaced ranks from both tails plus evenly spaced ranks of the pooled selection
/// half (the tails are where the large likelihood ratios are).
pub const MAX_CANDIDATES: usize = 4096;

/// Candidate thresholds: the distinct pooled values, thinned when there are too many.
fn candidates(pool: &mut Vec<f64>) -> Vec<f64> {
    pool.sort_by(f64::total_cmp);
    pool.dedup();
    let n = pool.len();
    if n <= MAX_CANDIDATES {
        return pool.clone();
    }
    let mut ranks = Vec::new();
    let mut r = 1.0f64;
    while (r as usize) < n / 2 {
        ranks.push(r as usize);
        ranks.push(n - r as usize);
        r = (r * 1.01).max(r + 1.0);
    }
    let even = MAX_CANDIDATES / 4;
    ranks.extend((0..even).map(|i| i * n / even));
    ranks.sort_unstable();
    ranks.dedup();
    ranks
        .into_iter()
        .filter(|&i| i < n)
        .map(|i| pool[i])
        .collect()
}

/// The best bound over candidate thresholds and all four directions, on `sx`, `sxp` at `alpha`
/// each. The Clopper–Pearson bound never exceeds the point estimate (`TPR_lo ≤ TPR̂`,
/// `FPR_hi ≥ FPR̂`), so the candidates are visited in decreasing order of their point estimate
/// and the search stops once no remaining estimate can beat the best bound: the same maximum as
/// the exhaustive search, with far fewer beta quantiles.
fn best_over(
    sx: &Sorted,
    sxp: &Sorted,
    thresholds: &[f64],
    delta: f64,
    alpha: f64,
) -> Result<(f64, Direction, EventBound)> {
    let mut order: Vec<(f64, f64, Direction)> = thresholds
        .iter()
        .flat_map(|&t| Direction::ALL.map(|dir| (t, dir)))
        .map(|(t, dir)| {
            let c = counts_at(sx, sxp, t, dir);
            let point = epsilon_from_rates(
                c.hits_x as f64 / c.n_x as f64,
                c.hits_x_prime as f64 / c.n_x_prime as f64,
                delta,
            );
            // NaN (0/0 cannot occur: n ≥ 1) sorts last.
            (
                if point.is_nan() {
                    f64::NEG_INFINITY
                } else {
                    point
                },
                t,
                dir,
            )
        })
        .collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut best: Option<(f64, Direction, EventBound)> = None;
    for (point, t, dir) in order {
        if let Some((_, _, cur)) = &best
            && point < cur.epsilon_lower_bound
        {
            break;
        }
        let b = bound_at(sx, sxp, t, dir, delta, alpha)?;
        // Ties: prefer the larger TPR bound (more stable on the evaluation half).
        let better = match &best {
            None => true,
            Some((_, _, cur)) => {
                b.epsilon_lower_bound > cur.epsilon_lower_bound
                    || (b.epsilon_lower_bound == cur.epsilon_lower_bound
                        && b.tpr_lower > cur.tpr_lower)
            }
        };
        if better {
            best = Some((t, dir, b));
        }
    }
    best.ok_or_else(|| AuditError::TooFewSamples("no candidate thresholds".into()))
}

/// The split distinguishing test on pre-split samples: the threshold and direction maximizing
/// the bound on (`select_x`, `select_x_prime`) are evaluated once on (`eval_x`,
/// `eval_x_prime`). Use it when the score itself was learned from the selection half (e.g.
/// [`crate::histogram::learned_scores`]).
pub fn split_audit(
    select_x: &[f64],
    select_x_prime: &[f64],
    eval_x: &[f64],
    eval_x_prime: &[f64],
    delta: f64,
    alpha: f64,
) -> Result<ThresholdBound> {
    check_delta(delta)?;
    check_alpha(alpha)?;
    for (name, s) in [
        ("selection samples of x", select_x),
        ("selection samples of x'", select_x_prime),
        ("evaluation samples of x", eval_x),
        ("evaluation samples of x'", eval_x_prime),
    ] {
        if s.is_empty() {
            return Err(AuditError::TooFewSamples(format!("{name} are empty")));
        }
    }
    let (selx, selxp) = (Sorted::new(select_x)?, Sorted::new(select_x_prime)?);
    let mut pool: Vec<f64> = select_x.iter().chain(select_x_prime).copied().collect();
    let cands = candidates(&mut pool);
    // The selection criterion is the bound on the selection half at the stricter α/K (K the
    // number of candidates): at plain α the maximum over thousands of candidates favours a
    // far-tail threshold whose few counts were lucky, and that threshold then fails on the
    // evaluation half. Only the choice changes; the evaluation stays at α.
    let alpha_select = alpha / cands.len().max(1) as f64;
    let (t, dir, _) = best_over(&selx, &selxp, &cands, delta, alpha_select)?;
    let (evx, evxp) = (Sorted::new(eval_x)?, Sorted::new(eval_x_prime)?);
    let event = bound_at(&evx, &evxp, t, dir, delta, alpha)?;
    Ok(ThresholdBound {
        epsilon_lower_bound: event.epsilon_lower_bound,
        confidence: 1.0 - alpha,
        threshold: t,
        direction: dir,
        event,
        candidates: cands.len(),
        selection: "split",
    })
}

/// The distinguishing test on scores of `M(x)` (`scores_x`) and `M(x′)` (`scores_x_prime`):
/// a lower bound on ε at `delta` holding with probability at least `1 − alpha`, with the
/// threshold chosen as `selection` says (see the [module docs](self)).
pub fn threshold_audit(
    scores_x: &[f64],
    scores_x_prime: &[f64],
    delta: f64,
    alpha: f64,
    selection: &Selection,
) -> Result<ThresholdBound> {
    check_delta(delta)?;
    check_alpha(alpha)?;
    match selection {
        Selection::Split => {
            if scores_x.len() < 2 || scores_x_prime.len() < 2 {
                return Err(AuditError::TooFewSamples(
                    "the split needs at least 2 samples on each side".into(),
                ));
            }
            let (hx, hxp) = (scores_x.len() / 2, scores_x_prime.len() / 2);
            split_audit(
                &scores_x[..hx],
                &scores_x_prime[..hxp],
                &scores_x[hx..],
                &scores_x_prime[hxp..],
                delta,
                alpha,
            )
        }
        Selection::Bonferroni(thresholds) => {
            if thresholds.is_empty() {
                return Err(AuditError::TooFewSamples(
                    "Bonferroni needs at least one threshold".into(),
                ));
            }
            if scores_x.is_empty() || scores_x_prime.is_empty() {
                return Err(AuditError::TooFewSamples("empty sample set".into()));
            }
            let (sx, sxp) = (Sorted::new(scores_x)?, Sorted::new(scores_x_prime)?);
            let k = Direction::ALL.len() * thresholds.len();
            let (t, dir, event) = best_over(&sx, &sxp, thresholds, delta, alpha / k as f64)?;
            Ok(ThresholdBound {
                epsilon_lower_bound: event.epsilon_lower_bound,
                confidence: 1.0 - alpha,
                threshold: t,
                direction: dir,
                event,
                candidates: thresholds.len(),
                selection: "bonferroni",
            })
        }
    }
}

/// Samples per input that the split test needs to flag a claim: the power calculation of the
/// audit suite. For an event with true rates `tpr`, `fpr` (so the event's
/// `ε_true = ln(tpr − δ) − ln(fpr)`), the evaluation half has `m = n/2` samples per side, and
/// by the delta method `ln p̂` has standard deviation `s/√m` with `s₁ = √((1−tpr)/tpr)`,
/// `s₀ = √((1−fpr)/fpr)`. The Clopper–Pearson bounds at significance `a` (each) sit about
/// `z_a·s/√m` below/above the estimates, so `ε_lb ≈ ε_true − z_a(s₁ + s₀)/√m`, with standard
/// deviation `√(s₁² + s₀²)/√m`. `P[ε_lb > claim] ≥ 1 − β` needs
///
/// `m ≥ ((z_a(s₁ + s₀) + z_β √(s₁² + s₀²)) / (ε_true − claim))²`, `n = 2m`.
///
/// A normal approximation (good when `m·fpr` is in the tens or more); the split's threshold
/// choice also costs a little, so callers add a margin. `None` when `ε_true ≤ claim`.
pub fn samples_for_power(
    tpr: f64,
    fpr: f64,
    delta: f64,
    claim: f64,
    alpha_per_bound: f64,
    beta: f64,
) -> Option<u64> {
    let e_true = epsilon_from_rates(tpr, fpr, delta);
    if e_true.is_nan() || e_true <= claim || !(fpr > 0.0 && fpr < 1.0 && tpr < 1.0) {
        return None;
    }
    let z_a = -privfed_special::norm_quantile(alpha_per_bound);
    let z_b = -privfed_special::norm_quantile(beta);
    let s1 = ((1.0 - tpr) / (tpr - delta)).sqrt();
    let s0 = ((1.0 - fpr) / fpr).sqrt();
    let root_m = (z_a * (s1 + s0) + z_b * (s1 * s1 + s0 * s0).sqrt()) / (e_true - claim);
    Some(2 * (root_m * root_m).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_formula() {
        assert!((epsilon_from_rates(0.5, 0.5 * (-1.0f64).exp(), 0.0) - 1.0).abs() < 1e-15);
        assert_eq!(epsilon_from_rates(1e-6, 0.1, 1e-5), f64::NEG_INFINITY);
        let e = epsilon_from_rates(0.3, 0.1, 0.01);
        assert!((e - (0.29f64 / 0.1).ln()).abs() < 1e-15);
    }

    #[test]
    fn event_bound_is_below_the_point_estimate() {
        let c = EventCounts {
            hits_x: 5000,
            n_x: 10000,
            hits_x_prime: 1840,
            n_x_prime: 10000,
        };
        let b = event_bound(c, 0.0, 0.05).unwrap();
        let point = (0.5f64 / 0.184).ln();
        assert!(b.epsilon_lower_bound < point && b.epsilon_lower_bound > point - 0.15);
        assert!(b.tpr_lower < 0.5 && b.fpr_upper > 0.184);
    }

    /// Deterministic scores: `x` always scores 1, `x′` always 0. Perfect separation; the bound
    /// is limited only by the sample size: `TPR_lo = (α/2)^{1/n}`, `FPR_hi = 1 − (α/2)^{1/n}`.
    #[test]
    fn perfect_separation_is_limited_by_n() {
        let x = vec![1.0; 1000];
        let xp = vec![0.0; 1000];
        let b = threshold_audit(&x, &xp, 0.0, 0.05, &Selection::Split).unwrap();
        let n = 500.0;
        let tpr = 0.025f64.powf(1.0 / n);
        let fpr = 1.0 - tpr;
        assert!(
            (b.epsilon_lower_bound - (tpr / fpr).ln()).abs() < 1e-9,
            "{b:?}"
        );
        let bf = threshold_audit(&x, &xp, 0.0, 0.05, &Selection::Bonferroni(vec![0.5])).unwrap();
        assert!(bf.epsilon_lower_bound > b.epsilon_lower_bound);
    }

    /// The symmetric direction is found when `x′` is the one with large scores.
    #[test]
    fn symmetric_direction() {
        let x = vec![0.0; 1000];
        let xp = vec![1.0; 1000];
        let b = threshold_audit(&x, &xp, 0.0, 0.05, &Selection::Split).unwrap();
        assert!(matches!(
            b.direction,
            Direction::XPrimeAbove | Direction::XBelow
        ));
        assert!(b.epsilon_lower_bound > 4.0);
    }

    #[test]
    fn identical_distributions_give_zero() {
        let x: Vec<f64> = (0..2000).map(|i| (i % 97) as f64).collect();
        let b = threshold_audit(&x, &x, 0.0, 0.05, &Selection::Split).unwrap();
        assert_eq!(b.epsilon_lower_bound, 0.0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(threshold_audit(&[1.0], &[0.0], 0.0, 0.05, &Selection::Split).is_err());
        assert!(
            threshold_audit(&[1.0, f64::NAN], &[0.0, 1.0], 0.0, 0.05, &Selection::Split).is_err()
        );
        assert!(threshold_audit(&[1.0, 2.0], &[0.0, 1.0], 1.5, 0.05, &Selection::Split).is_err());
        assert!(
            threshold_audit(
                &[1.0, 2.0],
                &[0.0, 1.0],
                0.0,
                0.05,
                &Selection::Bonferroni(vec![])
            )
            .is_err()
        );
    }
}

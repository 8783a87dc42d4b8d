//! PrivUnitInf: ε-LDP unbiased privatization of vectors in the hypercube `[-1,1]^d` with
//! hypercube caps (paper 000, Algorithm 2; `docs/ALGORITHMS.md` §1.3).
//!
//! Given `v ∈ [-1,1]^d`:
//! 1. Round each coordinate: `U_j = +1` with probability `(1+v_j)/2`, else `−1` (so `E[U] = v`).
//! 2. For `z ∈ {±1}^d` let `M(z) = #{j : z_j = U_j}` (the number of matches with `U`). With
//!    probability `p` draw `Z` uniform on the cap `{M ≥ τ}`, otherwise uniform on its complement
//!    `{M < τ}`. Under the uniform distribution on the cube `M ~ Bin(d,½)`, so the match count is
//!    drawn from `Bin(d,½)` truncated to the region and the matching coordinates are a uniform
//!    random subset of that size.
//! 3. Output `Ẑ = Z/m`.
//!
//! ## Exact quantities (derived and checked by enumeration in the tests)
//! With `q = P(Bin(d,½) ≥ τ)` (the cap's share of the cube) and `b(k) = P(Bin(d,½) = k)`:
//! * Privacy: given `U`, `P(Z = z)` is `p/(2^d q)` on the cap and `(1−p)/(2^d (1−q))` off it; the
//!   output law at any input is a mixture of these over `U`, and extreme inputs `v, −v ∈ {±1}^d`
//!   put the point `z = v` in the cap of one and off the cap of the other (`1 ≤ τ ≤ d`), so the
//!   exact guarantee is `ε = ln( p(1−q) / ((1−p) q) )`.
//! * Normalization: by exchangeability `E[Z | U] = (2E[M]/d − 1)·U`, so `m = p(2E[M|cap]/d − 1) +
//!   (1−p)(2E[M|not cap]/d − 1)` with `E[M|cap] = (d/2)·P(Bin(d−1,½) ≥ τ−1)/q` and
//!   `E[M|not cap] = (d/2)·P(Bin(d−1,½) ≤ τ−2)/(1−q)`. Using the binomial identity
//!   `E[(M − d/2)·1{M ≥ τ}] = (τ/2)·b(τ)` this is, without cancellation,
//!   `m = (τ/d)·b(τ)·( p/q − (1−p)/(1−q) )`, positive exactly when `p > q` (i.e. `ε > 0`).
//! * Error: `E[Ẑ] = v`, `‖Ẑ‖² = d/m²` always, so `E‖Ẑ − v‖² = d/m² − ‖v‖²`; worst case `d/m²` at `v = 0`.
//!
//! Binomial probabilities are computed in log space for `d` up to 10^6 and beyond with Loader's
//! saddle-point expansion (`special::ln_binomial_half_pmf`; relative accuracy ~1e-14, no `lgamma`
//! cancellation), and tails by log-sum-exp (`special::log_sum_exp_iter`).
//!
//! ## Floating point
//! The guarantee is exact for the ideal sampler. The implementation draws the cap/complement
//! choice exactly (`p ∈ [½,1)` is a multiple of 2^-53 and uniforms are 53-bit), the subset of
//! matching coordinates exactly (uniform integer draws), but the match count by inverse CDF with
//! one 53-bit uniform over a table of double-precision probabilities: a count whose probability
//! within its region is below ~2^-53 may be emitted with probability 0 or ~2^-53 instead. See
//! `docs/FLOATING_POINT.md`.

use crate::error::{MechanismError, Result, check_positive};
use crate::special::{ln_binomial_half_pmf, log_add_exp, log_sum_exp_iter};
use crate::{Domain, Guarantee, LocalRandomizer, check_out_len};
use rand::{CryptoRng, Rng, RngExt};
use serde::Serialize;

/// PrivUnitInf (paper 000, Algorithm 2; `docs/ALGORITHMS.md` §1.3): ε-LDP unbiased randomizer on the
/// hypercube `[-1,1]^d` using hypercube caps `{z ∈ {±1}^d : #{j : z_j = U_j} ≥ τ}`.
///
/// Parameters: threshold `τ`, cap probability `p`; derived: cap share `q = P(Bin(d,½) ≥ τ)`,
/// normalizer `m = (τ/d)·P(Bin(d,½)=τ)·(p/q − (1−p)/(1−q))` and exact
/// `ε = ln(p(1−q)/((1−p)q))`. Output `Ẑ ∈ {±1/m}^d` with `E[Ẑ] = v` and
/// `E‖Ẑ − v‖² = d/m² − ‖v‖²`. See the [module documentation](self) for derivations.
#[derive(Debug, Clone, Serialize)]
pub struct PrivUnitInf {
    dim: usize,
    tau: usize,
    p: f64,
    q: f64,
    m: f64,
    epsilon: f64,
    /// Match-count sampler for the cap `{M ≥ τ}`.
    #[serde(skip)]
    cap_counts: CountTable,
    /// Match-count sampler for the complement `{M < τ}`.
    #[serde(skip)]
    rest_counts: CountTable,
}

impl PrivUnitInf {
    /// PrivUnitInf with explicit threshold `tau` (`τ`) and cap probability `p` (paper 000, Alg. 2).
    ///
    /// Requires `dim ≥ 1`, `1 ≤ τ ≤ dim`, `p ∈ [½, 1)` and `p > q = P(Bin(dim,½) ≥ τ)`: when
    /// `p ≤ q` the output is independent of the input or anti-correlated with it (`ε ≤ 0`,
    /// `m ≤ 0`), so such a `τ` is too small for this `p` and is rejected. The guarantee is the exact
    /// `ε = ln(p(1−q)/((1−p)q))`.
    pub fn new(dim: usize, tau: usize, p: f64) -> Result<Self> {
        check_dim(dim)?;
        if tau < 1 || tau > dim {
            return Err(MechanismError::invalid(
                "tau",
                tau as f64,
                format!("must be an integer in [1, d] = [1, {dim}]"),
            ));
        }
        if !(p.is_finite() && (0.5..1.0).contains(&p)) {
            return Err(MechanismError::invalid(
                "p",
                p,
                "must lie in [0.5, 1) (probability of sampling the cap)",
            ));
        }
        let bin = HalfBinomial::new(dim);
        let (log_q, log_1mq) = bin.log_tails_at(tau);
        let informative = |t: usize| {
            let (lq, l1q) = bin.log_tails_at(t);
            epsilon_of(p, lq, l1q) > 0.0 && scale(dim, t, bin.lp[t], p, lq, l1q) > 0.0
        };
        if !informative(tau) {
            // Smallest informative threshold (q decreases in τ), for the message.
            let hint = if informative(dim) {
                let (mut lo, mut hi) = (tau, dim);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if informative(mid) { hi = mid } else { lo = mid }
                }
                format!("τ ≥ {hi} is needed for this p")
            } else {
                "no τ works for this p".to_string()
            };
            return Err(MechanismError::invalid(
                "tau",
                tau as f64,
                format!(
                    "the cap share q = P(Bin({dim},½) ≥ τ) = {} is not below p = {p}: the output \
                     would carry no information (ε ≤ 0, m ≤ 0); {hint}",
                    log_q.exp()
                ),
            ));
        }
        Ok(Self::build(&bin, tau, p, log_q, log_1mq))
    }

    /// PrivUnitInf with the parameters that minimize the worst-case variance `d/m²` subject to
    /// exact ε-LDP (the analogue of the optimized PrivUnit2 of paper 002, `docs/ALGORITHMS.md` §1.3).
    ///
    /// For each threshold `τ ∈ [1, d]` the best cap probability exhausts the budget,
    /// `p/(1−p) = e^ε·q/(1−q)` (`m` and `ε` both increase with `p`), which gives
    /// `m = (τ/d)·b(τ)·(e^ε − 1)/(e^ε q + 1 − q)`; thresholds whose `p` would fall below ½ are
    /// skipped, and the `τ` with the largest `m` is kept. The reported ε is recomputed from the
    /// final `(τ, p)` and never exceeds `epsilon` (`p` is lowered by ulps if rounding requires;
    /// when `p` would round to 1 it is capped below 1, and ε is then smaller than requested).
    /// Costs O(d).
    ///
    /// The restriction `p ≥ ½` (that of [`PrivUnitInf::new`]) binds only for very small budgets,
    /// roughly `ε ≲ 1.6/√d` at even `d` (measured with mpmath: `d = 12, ε = 0.3` gives variance
    /// 11364 with `p ≥ ½` against 9935 at `τ = 7, p = 0.46`; `d = 1000, ε = 0.01`: 0.05% worse).
    pub fn optimized(epsilon: f64, dim: usize) -> Result<Self> {
        check_positive("epsilon", epsilon)?;
        check_dim(dim)?;
        let bin = HalfBinomial::new(dim);
        let upper = bin.running_log_upper();
        let lower = bin.running_log_lower();
        let mut best: Option<(usize, f64)> = None;
        for tau in 1..=dim {
            let (lq, l1q) = (upper[tau], lower[tau - 1]);
            let Some(p) = budget_p(epsilon, lq, l1q) else {
                continue;
            };
            let m = scale(dim, tau, bin.lp[tau], p, lq, l1q);
            if m.is_finite() && m > 0.0 && best.is_none_or(|(_, bm)| m > bm) {
                best = Some((tau, m));
            }
        }
        let Some((tau, _)) = best else {
            return Err(MechanismError::Infeasible(format!(
                "no threshold τ gives a cap probability p ∈ [½,1) with 0 < ε ≤ {epsilon} at d = {dim}"
            )));
        };
        // Recompute q at the chosen τ with the direct (more accurate) summation, then p from it.
        let (log_q, log_1mq) = bin.log_tails_at(tau);
        let p = budget_p(epsilon, log_q, log_1mq).ok_or_else(|| {
            MechanismError::Numerical(format!(
                "the budget-exhausting p at τ = {tau} left [½,1) on recomputation (ε = {epsilon}, d = {dim})"
            ))
        })?;
        Ok(Self::build(&bin, tau, p, log_q, log_1mq))
    }

    fn build(bin: &HalfBinomial, tau: usize, p: f64, log_q: f64, log_1mq: f64) -> Self {
        let dim = bin.d;
        let epsilon = epsilon_of(p, log_q, log_1mq);
        let m = scale(dim, tau, bin.lp[tau], p, log_q, log_1mq);
        Self {
            dim,
            tau,
            p,
            q: log_q.exp(),
            m,
            epsilon,
            cap_counts: CountTable::new(&bin.lp, tau, dim),
            rest_counts: CountTable::new(&bin.lp, 0, tau - 1),
        }
    }

    /// The threshold `τ`: the cap is `{z : #{j : z_j = U_j} ≥ τ}`.
    pub fn tau(&self) -> usize {
        self.tau
    }

    /// The probability `p` of sampling from the cap.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// The cap's share of the cube, `q = P(Bin(d,½) ≥ τ)` (may underflow to 0 in this accessor for
    /// extreme `τ`; the mechanism itself works with `ln q`).
    pub fn q(&self) -> f64 {
        self.q
    }

    /// The normalizer `m = (τ/d)·P(Bin(d,½)=τ)·(p/q − (1−p)/(1−q))`; outputs are `±1/m`.
    pub fn m(&self) -> f64 {
        self.m
    }

    /// Draws a match count from `Bin(d,½)` truncated to the cap (`cap = true`) or its complement.
    fn sample_count<R: Rng + ?Sized>(&self, cap: bool, rng: &mut R) -> usize {
        if cap {
            self.cap_counts.sample(rng)
        } else {
            self.rest_counts.sample(rng)
        }
    }
}

impl LocalRandomizer for PrivUnitInf {
    fn name(&self) -> &'static str {
        "privunit-inf"
    }

    fn domain(&self) -> Domain {
        Domain::LInfBall {
            dim: self.dim,
            radius: 1.0,
        }
    }

    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.epsilon,
        }
    }

    /// `E‖Ẑ − x‖² = d/m² − ‖x‖²` (paper 000 Alg. 2; exact, since `‖Ẑ‖² = d/m²`).
    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain().check(x)?;
        let sq: f64 = x.iter().map(|v| v * v).sum();
        Ok(self.worst_case_variance() - sq)
    }

    /// `d/m²`, attained at `x = 0`.
    fn worst_case_variance(&self) -> f64 {
        self.dim as f64 / (self.m * self.m)
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        self.domain().check(x)?;
        check_out_len(out, self.dim)?;
        let d = self.dim;
        let inv_m = 1.0 / self.m;
        // Cap or complement: `random::<f64>()` is k·2^-53 and p ∈ [½,1) is a multiple of 2^-53,
        // so P(u < p) = p exactly.
        let cap = rng.random::<f64>() < self.p;
        let matches = self.sample_count(cap, rng);
        // Start with every coordinate matching (`matches ≥ d/2`) or mismatching, then flip a
        // uniform random subset of the minority size.
        let (base, flips) = if 2 * matches >= d {
            (inv_m, d - matches)
        } else {
            (-inv_m, matches)
        };
        for (o, &v) in out.iter_mut().zip(x) {
            // U_j = +1 w.p. (1+v)/2: with u = k·2^-53, w = 2u − 1 is exact and P(w < v) = (1+v)/2
            // up to 2^-53.
            let w = 2.0 * rng.random::<f64>() - 1.0;
            *o = if w < v { base } else { -base };
        }
        // Floyd's algorithm: a uniform random `flips`-subset of {0,…,d−1}.
        let mut chosen = vec![false; d];
        for j in (d - flips)..d {
            let t = rng.random_range(0..=j);
            let pick = if chosen[t] { j } else { t };
            chosen[pick] = true;
            out[pick] = -out[pick];
        }
        Ok(())
    }
}

fn check_dim(dim: usize) -> Result<()> {
    if dim == 0 {
        Err(MechanismError::invalid("dim", 0.0, "must be at least 1"))
    } else {
        Ok(())
    }
}

/// `ln(p/(1−p))`.
fn log_p_ratio(p: f64) -> f64 {
    p.ln() - (-p).ln_1p()
}

/// `ε = ln(p/(1−p)) + ln(1−q) − ln q`.
fn epsilon_of(p: f64, log_q: f64, log_1mq: f64) -> f64 {
    log_p_ratio(p) + log_1mq - log_q
}

/// `m = (τ/d)·b(τ)·(p/q − (1−p)/(1−q))`, from `ln b(τ)`, `ln q`, `ln(1−q)`.
fn scale(d: usize, tau: usize, log_b_tau: f64, p: f64, log_q: f64, log_1mq: f64) -> f64 {
    let a = p * (log_b_tau - log_q).exp();
    let b = (1.0 - p) * (log_b_tau - log_1mq).exp();
    (tau as f64 / d as f64) * (a - b)
}

/// The largest `p ∈ [½,1)` with `ln(p(1−q)/((1−p)q)) ≤ epsilon` and `p > q` (budget
/// exhausted up to rounding), or `None` if the budget-exhausting `p` is below ½ or not above `q`.
fn budget_p(epsilon: f64, log_q: f64, log_1mq: f64) -> Option<f64> {
    // p/(1−p) = r with ln r = ε + ln q − ln(1−q); p = 1/(1 + 1/r).
    let log_r = epsilon + log_q - log_1mq;
    if log_r.is_nan() || log_r < 0.0 {
        return None;
    }
    let mut p = 1.0 / (1.0 + (-log_r).exp());
    if p >= 1.0 {
        p = 1.0f64.next_down();
    }
    // Rounding leaves ε(p) within a few ulps of the budget: lower p until it is within it.
    for _ in 0..64 {
        if epsilon_of(p, log_q, log_1mq) <= epsilon || p <= 0.5 {
            break;
        }
        p = p.next_down();
    }
    let eps = epsilon_of(p, log_q, log_1mq);
    (p >= 0.5 && eps <= epsilon && eps > 0.0).then_some(p)
}

/// Sampler of a match count from `Bin(d,½)` truncated to `[lo, hi]`: inverse CDF by binary search
/// over cumulative weights `Σ exp(ln b(k) − max)`; counts whose weight underflows are dropped.
#[derive(Debug, Clone)]
struct CountTable {
    /// Count of `cum[0]`.
    start: usize,
    /// Cumulative (unnormalized) weights; strictly positive increments at both ends.
    cum: Vec<f64>,
}

impl CountTable {
    fn new(lp: &[f64], lo: usize, hi: usize) -> Self {
        let max = lp[lo..=hi]
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        // exp(x) > 0 for x ≥ −745; the pmf is unimodal so the kept counts are contiguous.
        let keep = |k: &usize| lp[*k] - max >= -740.0;
        let first = (lo..=hi).find(keep).unwrap_or(lo);
        let last = (lo..=hi).rev().find(keep).unwrap_or(hi);
        let mut acc = 0.0;
        let cum = (first..=last)
            .map(|k| {
                acc += (lp[k] - max).exp();
                acc
            })
            .collect();
        Self { start: first, cum }
    }

    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let total = *self.cum.last().expect("nonempty region");
        let u = rng.random::<f64>() * total;
        let i = self.cum.partition_point(|&c| c <= u);
        self.start + i.min(self.cum.len() - 1)
    }
}

/// `ln P(Bin(d,½) = k)` for every `k`, with tails.
struct HalfBinomial {
    d: usize,
    lp: Vec<f64>,
}

impl HalfBinomial {
    /// The table is exactly symmetric (`lp[k] == lp[d−k]`) so that mirrored tails agree to the bit
    /// (e.g. `q = ½` exactly at `τ = (d+1)/2`, where `p = ½` must give `ε = 0`).
    fn new(d: usize) -> Self {
        let mut lp: Vec<f64> = (0..=d / 2)
            .map(|k| ln_binomial_half_pmf(d as u64, k as u64))
            .collect();
        for k in d / 2 + 1..=d {
            lp.push(lp[d - k]);
        }
        Self { d, lp }
    }

    /// `(ln P(M ≥ τ), ln P(M ≤ τ−1))` by shifted direct summation (1 ≤ τ ≤ d), each summed from
    /// its far end toward the mode (small terms first; mirrored tails sum identical sequences).
    fn log_tails_at(&self, tau: usize) -> (f64, f64) {
        (
            log_sum_exp_iter(self.lp[tau..].iter().rev().copied()),
            log_sum_exp_iter(self.lp[..tau].iter().copied()),
        )
    }

    /// `ln P(M ≥ k)` for `k = 0..=d+1`, by running log-sum-exp from the top.
    fn running_log_upper(&self) -> Vec<f64> {
        let mut out = vec![f64::NEG_INFINITY; self.d + 2];
        for k in (0..=self.d).rev() {
            out[k] = log_add_exp(out[k + 1], self.lp[k]);
        }
        out
    }

    /// `ln P(M ≤ k)` for `k = 0..=d`, by running log-sum-exp from the bottom.
    fn running_log_lower(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.d + 1);
        let mut acc = f64::NEG_INFINITY;
        for &l in &self.lp {
            acc = log_add_exp(acc, l);
            out.push(acc);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;

    // ---------------------------------------------------------------------------------------
    // Independent helpers (definitions, not the closed forms used above).

    /// Exact output pmf of the mechanism with parameters (d, τ, p) at input `v`, by enumerating
    /// every rounding `U ∈ {±1}^d` and every output `z ∈ {±1}^d` (bit j of an index set ⇔ +1).
    /// The cap size is counted, not computed from tails.
    fn enumerated_pmf(d: usize, tau: usize, p: f64, v: &[f64]) -> Vec<f64> {
        let n = 1usize << d;
        let matches = |z: usize, u: usize| d - ((z ^ u).count_ones() as usize);
        let n_cap = (0..n).filter(|&z| matches(z, n - 1) >= tau).count() as f64;
        let n_rest = n as f64 - n_cap;
        let mut pmf = vec![0.0; n];
        for u in 0..n {
            let pu: f64 = (0..d)
                .map(|j| {
                    if u >> j & 1 == 1 {
                        (1.0 + v[j]) / 2.0
                    } else {
                        (1.0 - v[j]) / 2.0
                    }
                })
                .product();
            if pu == 0.0 {
                continue;
            }
            for (z, slot) in pmf.iter_mut().enumerate() {
                *slot += pu
                    * if matches(z, u) >= tau {
                        p / n_cap
                    } else {
                        (1.0 - p) / n_rest
                    };
            }
        }
        pmf
    }

    fn bits_to_vec(d: usize, x: usize) -> Vec<f64> {
        (0..d)
            .map(|j| if x >> j & 1 == 1 { 1.0 } else { -1.0 })
            .collect()
    }

    /// ln P(Bin(d,½) = k) from lgamma (independent of Loader's expansion).
    fn lgamma_log_pmf(d: usize, k: usize) -> f64 {
        libm::lgamma(d as f64 + 1.0)
            - libm::lgamma(k as f64 + 1.0)
            - libm::lgamma((d - k) as f64 + 1.0)
            - d as f64 * std::f64::consts::LN_2
    }

    use privfed_testkit::{assert_mean, assert_z, z_mean_known_variance};

    /// Chi-square goodness-of-fit p-value and degrees of freedom of `counts` against `probs`,
    /// pooling consecutive cells until each expected count is at least 20.
    fn chi2_pvalue(counts: &[u64], probs: &[f64]) -> (f64, usize) {
        let t = privfed_testkit::chi_square_gof(counts, probs, 20.0).unwrap();
        (t.p_value, t.dof)
    }

    // ---------------------------------------------------------------------------------------
    // Numerics against the mpmath fixture.

    fn reference() -> serde_json::Value {
        serde_json::from_str(include_str!("../tests/data/privunit_inf_reference.json")).unwrap()
    }

    #[test]
    fn log_pmf_and_tails_match_mpmath() {
        let r = reference();
        for row in r["tails"].as_array().unwrap() {
            let d = row["d"].as_u64().unwrap() as usize;
            let tau = row["tau"].as_u64().unwrap() as usize;
            let f = |k: &str| row[k].as_f64().unwrap();
            let close = |got: f64, want: f64, what: &str| {
                // absolute error in a log = relative error of the probability
                let tol = 2e-14 * want.abs().max(1.0);
                assert!(
                    (got - want).abs() <= tol,
                    "d={d} τ={tau} {what}: {got} vs {want} (diff {:e})",
                    got - want
                );
            };
            close(
                ln_binomial_half_pmf(d as u64, tau as u64),
                f("log_pmf"),
                "ln b(τ)",
            );
            let bin = HalfBinomial::new(d);
            let (lq, l1q) = bin.log_tails_at(tau);
            close(lq, f("log_q"), "ln q");
            close(l1q, f("log_1mq"), "ln(1−q)");
            // the running tails used by the optimizer (looser: accumulated rounding)
            let up = bin.running_log_upper();
            let lo = bin.running_log_lower();
            let tol = 1e-11 * f("log_q").abs().max(1.0);
            assert!(
                (up[tau] - f("log_q")).abs() <= tol,
                "running upper d={d} τ={tau}"
            );
            let tol = 1e-11 * f("log_1mq").abs().max(1.0);
            assert!(
                (lo[tau - 1] - f("log_1mq")).abs() <= tol,
                "running lower d={d} τ={tau}"
            );
            if let Some(eps) = row.get("epsilon").and_then(|e| e.as_f64()) {
                let mech = PrivUnitInf::new(d, tau, 0.8).unwrap();
                let e = mech.guarantee().epsilon();
                assert!(
                    (e - eps).abs() <= 1e-13 * eps.max(1.0),
                    "ε d={d} τ={tau}: {e} vs {eps}"
                );
                // m ∝ b(τ)/q, a ratio of probabilities held as logs: its relative error is the
                // absolute error of ln b(k) − ln b(τ), a few ulps of |ln b| (≈ 2000 at the
                // far-tail rows): allow 1e-12 + 5e-15·|ln q|.
                let m = f("m");
                let tol = 1e-12 + 5e-15 * f("log_q").abs();
                assert!(
                    (mech.m() / m - 1.0).abs() < tol,
                    "m d={d} τ={tau}: {} vs {m}",
                    mech.m()
                );
            } else {
                // q ≥ 0.8: rejected
                assert!(
                    PrivUnitInf::new(d, tau, 0.8).is_err(),
                    "d={d} τ={tau} accepted"
                );
            }
        }
    }

    #[test]
    fn loader_pmf_agrees_with_lgamma_and_sums_to_one() {
        for &d in &[1usize, 2, 3, 10, 15, 16, 17, 35, 36, 80, 81, 500, 501, 5000] {
            let bin = HalfBinomial::new(d);
            for k in 0..=d {
                let a = bin.lp[k];
                let b = lgamma_log_pmf(d, k);
                assert!(
                    (a - b).abs() < 1e-11 * b.abs().max(1.0),
                    "d={d} k={k}: {a} vs {b}"
                );
            }
            let total = log_sum_exp_iter(bin.lp.iter().copied());
            assert!(total.abs() < 1e-14, "d={d}: ln Σ = {total}");
        }
    }

    #[test]
    fn optimized_matches_mpmath_brute_force() {
        let r = reference();
        for row in r["optimized"].as_array().unwrap() {
            let d = row["d"].as_u64().unwrap() as usize;
            let eps = row["epsilon"].as_f64().unwrap();
            let mech = PrivUnitInf::optimized(eps, d).unwrap();
            assert_eq!(
                mech.tau() as u64,
                row["tau"].as_u64().unwrap(),
                "τ d={d} ε={eps}"
            );
            let m = row["m"].as_f64().unwrap();
            assert!((mech.m() / m - 1.0).abs() < 1e-12, "m d={d} ε={eps}");
            let p = row["p"].as_f64().unwrap();
            assert!((mech.p() - p).abs() < 1e-14, "p d={d} ε={eps}");
            let e = mech.guarantee().epsilon();
            assert!(
                e <= eps && e > eps - 1e-13,
                "ε d={d}: {e} vs requested {eps}"
            );
            let v = row["worst_case_variance"].as_f64().unwrap();
            assert!((mech.worst_case_variance() / v - 1.0).abs() < 1e-12);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Exact privacy and moments by enumeration.

    #[test]
    fn epsilon_equals_enumerated_max_log_ratio() {
        for d in 1..=8usize {
            let n = 1usize << d;
            for tau in 1..=d {
                for &p in &[0.5, 0.6, 0.75, 0.9, 0.99] {
                    let Ok(mech) = PrivUnitInf::new(d, tau, p) else {
                        // rejected only when q ≥ p: check by counting
                        let n_cap = (0..n).filter(|&z| z.count_ones() as usize >= tau).count();
                        assert!(n_cap as f64 / n as f64 >= p, "d={d} τ={tau} p={p} rejected");
                        continue;
                    };
                    // Extreme inputs: all of {±1}^d.
                    let pmfs: Vec<Vec<f64>> = (0..n)
                        .map(|x| enumerated_pmf(d, tau, p, &bits_to_vec(d, x)))
                        .collect();
                    let mut worst = f64::NEG_INFINITY;
                    for z in 0..n {
                        let hi = pmfs.iter().map(|f| f[z]).fold(0.0, f64::max);
                        let lo = pmfs.iter().map(|f| f[z]).fold(f64::INFINITY, f64::min);
                        worst = worst.max((hi / lo).ln());
                    }
                    let eps = mech.guarantee().epsilon();
                    assert!(
                        (worst - eps).abs() < 1e-12 * eps.max(1.0),
                        "d={d} τ={tau} p={p}: enumerated {worst} vs {eps}"
                    );
                }
            }
        }
    }

    #[test]
    fn interior_inputs_respect_epsilon() {
        // Inputs in {−1, −½, 0, ½, 1}^d at d = 4: the output law is a mixture, so its ratios must
        // stay within e^ε.
        let d = 4;
        let levels = [-1.0, -0.5, 0.0, 0.5, 1.0];
        for (tau, p) in [(3, 0.8), (4, 0.7), (2, 0.9)] {
            let mech = PrivUnitInf::new(d, tau, p).unwrap();
            let eps = mech.guarantee().epsilon();
            let mut pmfs = Vec::new();
            for code in 0..levels.len().pow(d as u32) {
                let mut c = code;
                let v: Vec<f64> = (0..d)
                    .map(|_| {
                        let l = levels[c % 5];
                        c /= 5;
                        l
                    })
                    .collect();
                pmfs.push(enumerated_pmf(d, tau, p, &v));
            }
            for z in 0..(1 << d) {
                let hi = pmfs.iter().map(|f| f[z]).fold(0.0, f64::max);
                let lo = pmfs.iter().map(|f| f[z]).fold(f64::INFINITY, f64::min);
                assert!((hi / lo).ln() <= eps * (1.0 + 1e-12), "τ={tau} p={p} z={z}");
            }
        }
    }

    #[test]
    fn enumerated_mean_and_variance_match_closed_forms() {
        let mut rng = seeded_rng_for_experiments(11);
        for d in 1..=7usize {
            for tau in 1..=d {
                for &p in &[0.55, 0.8, 0.95] {
                    let Ok(mech) = PrivUnitInf::new(d, tau, p) else {
                        continue;
                    };
                    let m = mech.m();
                    for trial in 0..3 {
                        let v: Vec<f64> = (0..d)
                            .map(|j| match trial {
                                0 => 0.0,
                                1 => {
                                    if j % 2 == 0 {
                                        1.0
                                    } else {
                                        -1.0
                                    }
                                }
                                _ => 2.0 * rng.random::<f64>() - 1.0,
                            })
                            .collect();
                        let pmf = enumerated_pmf(d, tau, p, &v);
                        let mut mean = vec![0.0; d];
                        let mut mse = 0.0;
                        for (z, &pz) in pmf.iter().enumerate() {
                            let zv = bits_to_vec(d, z);
                            for j in 0..d {
                                mean[j] += pz * zv[j] / m;
                                mse += pz * (zv[j] / m - v[j]).powi(2);
                            }
                        }
                        for j in 0..d {
                            assert!(
                                (mean[j] - v[j]).abs() < 1e-12 / m,
                                "d={d} τ={tau} p={p} j={j}: E = {} vs {}",
                                mean[j],
                                v[j]
                            );
                        }
                        let want = mech.variance_at(&v).unwrap();
                        assert!(
                            (mse - want).abs() < 1e-10 * want,
                            "d={d} τ={tau} p={p}: mse {mse} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn conditional_mean_formulas_match_definition() {
        // m from docs/ALGORITHMS.md §1.3's conditional means (counted) equals the closed form used here.
        for d in 1..=12usize {
            let n = 1usize << d;
            for tau in 1..=d {
                let (mut n_cap, mut s_cap, mut s_rest) = (0.0, 0.0, 0.0);
                for z in 0..n {
                    let k = z.count_ones() as f64;
                    if z.count_ones() as usize >= tau {
                        n_cap += 1.0;
                        s_cap += k;
                    } else {
                        s_rest += k;
                    }
                }
                let n_rest = n as f64 - n_cap;
                let q = n_cap / n as f64;
                let p = 0.97;
                if q >= p {
                    continue;
                }
                let e_cap = s_cap / n_cap;
                let mut m = p * (2.0 * e_cap / d as f64 - 1.0);
                if n_rest > 0.0 {
                    m += (1.0 - p) * (2.0 * (s_rest / n_rest) / d as f64 - 1.0);
                }
                let mech = PrivUnitInf::new(d, tau, p).unwrap();
                assert!(
                    (mech.m() / m - 1.0).abs() < 1e-12,
                    "d={d} τ={tau}: {} vs {m}",
                    mech.m()
                );
                assert!((mech.q() / q - 1.0).abs() < 1e-14);
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // The sampler.

    #[test]
    fn output_distribution_matches_exact_pmf_d4() {
        // Whole-output chi-square test (16 outputs, 15 df) at d = 4 against the enumerated pmf.
        // Per case FPR 1e-7 (threshold on the p-value); 3 cases: overall ≤ 3e-7.
        let d = 4;
        let v = [0.5, -0.3, 1.0, 0.0];
        let mut rng = seeded_rng_for_experiments(2024);
        for (tau, p) in [(3, 0.8), (4, 0.6), (2, 0.95)] {
            let mech = PrivUnitInf::new(d, tau, p).unwrap();
            let pmf = enumerated_pmf(d, tau, p, &v);
            let mut counts = vec![0u64; 1 << d];
            let mut out = vec![0.0; d];
            for _ in 0..200_000 {
                mech.privatize_into(&v, &mut out, &mut rng).unwrap();
                let z = (0..d)
                    .filter(|&j| out[j] > 0.0)
                    .map(|j| 1 << j)
                    .sum::<usize>();
                assert!(out.iter().all(|o| (o.abs() - 1.0 / mech.m()).abs() < 1e-15));
                counts[z] += 1;
            }
            let (pv, df) = chi2_pvalue(&counts, &pmf);
            assert_eq!(df, 15);
            assert!(pv > 1e-7, "τ={tau} p={p}: p-value {pv}");
        }
    }

    /// Monte Carlo unbiasedness and variance: per-coordinate two-sided z-tests at α = 2e-9
    /// (|z| < 6.0) using the exact per-coordinate variance 1/m² − v_j², and a z-test at α = 2e-9 of
    /// the mean squared error against `variance_at` with the sample variance.
    fn monte_carlo_check(mech: &PrivUnitInf, v: &[f64], n: usize, seed: u64) {
        let d = v.len();
        let m = mech.m();
        let mut rng = seeded_rng_for_experiments(seed);
        let mut sum = vec![0.0; d];
        let mut sq_err = Vec::with_capacity(n);
        let mut out = vec![0.0; d];
        for _ in 0..n {
            mech.privatize_into(v, &mut out, &mut rng).unwrap();
            let mut e = 0.0;
            for j in 0..d {
                sum[j] += out[j];
                e += (out[j] - v[j]).powi(2);
            }
            sq_err.push(e);
        }
        let nf = n as f64;
        for j in 0..d {
            let var = 1.0 / (m * m) - v[j] * v[j];
            let z = z_mean_known_variance(sum[j] / nf, n, v[j], var);
            assert_z(z, 2e-9, &format!("coordinate {j}"));
        }
        let want = mech.variance_at(v).unwrap();
        assert_mean(&sq_err, want, 2e-9, &format!("mse vs {want}"));
    }

    #[test]
    fn monte_carlo_unbiased_with_exact_variance() {
        // 16 + 200 + 16 coordinates and 3 MSE tests at FPR 2.0e-9 each: overall FPR < 5e-7.
        let mut rng = seeded_rng_for_experiments(5);
        let v16: Vec<f64> = (0..16).map(|_| 2.0 * rng.random::<f64>() - 1.0).collect();
        let mech = PrivUnitInf::optimized(2.0, 16).unwrap();
        monte_carlo_check(&mech, &v16, 200_000, 100);
        let mech = PrivUnitInf::new(16, 12, 0.7).unwrap();
        let vext: Vec<f64> = (0..16)
            .map(|j| if j % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        monte_carlo_check(&mech, &vext, 200_000, 101);
        let v200: Vec<f64> = (0..200).map(|_| 2.0 * rng.random::<f64>() - 1.0).collect();
        let mech = PrivUnitInf::optimized(4.0, 200).unwrap();
        monte_carlo_check(&mech, &v200, 20_000, 102);
    }

    /// Chi-square test of `sample_count` against Bin(d,½) truncated to the region, with the pmf
    /// from lgamma (independent of the Loader expansion). Returns the p-value.
    fn count_pvalue(mech: &PrivUnitInf, cap: bool, n: usize, seed: u64) -> f64 {
        let d = mech.dim;
        let (lo, hi) = if cap {
            (mech.tau, d)
        } else {
            (0, mech.tau - 1)
        };
        let lp: Vec<f64> = (lo..=hi).map(|k| lgamma_log_pmf(d, k)).collect();
        let max = lp.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = lp.iter().map(|l| (l - max).exp()).collect();
        let total: f64 = w.iter().sum();
        let probs: Vec<f64> = w.iter().map(|x| x / total).collect();
        let mut counts = vec![0u64; hi - lo + 1];
        let mut rng = seeded_rng_for_experiments(seed);
        for _ in 0..n {
            let k = mech.sample_count(cap, &mut rng);
            assert!((lo..=hi).contains(&k), "count {k} outside [{lo}, {hi}]");
            counts[k - lo] += 1;
        }
        chi2_pvalue(&counts, &probs).0
    }

    #[test]
    fn match_counts_follow_truncated_binomial() {
        // Six chi-square tests, each rejecting at p-value < 1e-7: overall FPR ≤ 6e-7.
        let small = PrivUnitInf::new(50, 30, 0.8).unwrap();
        assert!(count_pvalue(&small, true, 400_000, 1) > 1e-7);
        assert!(count_pvalue(&small, false, 400_000, 2) > 1e-7);
        let mid = PrivUnitInf::optimized(3.0, 2000).unwrap();
        assert!(count_pvalue(&mid, true, 400_000, 3) > 1e-7);
        assert!(count_pvalue(&mid, false, 400_000, 4) > 1e-7);
        // Far-tail cap at d = 10^5, ε = 16.
        let far = PrivUnitInf::optimized(16.0, 100_000).unwrap();
        assert!(far.q() < 1e-5, "expected a far-tail cap, q = {}", far.q());
        assert!(count_pvalue(&far, true, 400_000, 5) > 1e-7);
        assert!(count_pvalue(&far, false, 400_000, 6) > 1e-7);
    }

    #[test]
    fn match_counts_from_privatize_at_large_d() {
        // The full path at d = 10^5, ε = 16 with an extreme input (U = v, so the match count is
        // read off the output): 300 outputs, two-sided z-test of the mean count at α = 2e-9
        // (|z| < 6.0) against E[M] = p E[M|cap] + (1−p) E[M|rest] from lgamma, and every count on
        // the right side of τ for the cap/complement proportion checked by a binomial z-test at
        // α = 2e-9.
        let d = 100_000;
        let mech = PrivUnitInf::optimized(16.0, d).unwrap();
        let tau = mech.tau;
        let v: Vec<f64> = (0..d)
            .map(|j| if j % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut rng = seeded_rng_for_experiments(77);
        let n = 300;
        let mut counts = Vec::with_capacity(n);
        for _ in 0..n {
            let z = mech.privatize(&v, &mut rng).unwrap();
            counts.push((0..d).filter(|&j| (z[j] > 0.0) == (v[j] > 0.0)).count());
        }
        let moments = |lo: usize, hi: usize| {
            let lp: Vec<f64> = (lo..=hi).map(|k| lgamma_log_pmf(d, k)).collect();
            let max = lp.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let (mut s0, mut s1, mut s2) = (0.0, 0.0, 0.0);
            for (i, l) in lp.iter().enumerate() {
                let w = (l - max).exp();
                let k = (lo + i) as f64;
                s0 += w;
                s1 += w * k;
                s2 += w * k * k;
            }
            (s1 / s0, s2 / s0)
        };
        let (c1, c2) = moments(tau, d);
        let (r1, r2) = moments(0, tau - 1);
        let p = mech.p();
        let mean = p * c1 + (1.0 - p) * r1;
        let var = p * c2 + (1.0 - p) * r2 - mean * mean;
        let got = counts.iter().sum::<usize>() as f64 / n as f64;
        let z = z_mean_known_variance(got, n, mean, var);
        assert_z(z, 2e-9, &format!("mean count {got} vs {mean}"));
        let in_cap = counts.iter().filter(|&&k| k >= tau).count() as f64;
        let z = z_mean_known_variance(in_cap / n as f64, n, p, p * (1.0 - p));
        assert_z(z, 2e-9, &format!("cap share {in_cap}/{n} vs p = {p}"));
    }

    // ---------------------------------------------------------------------------------------
    // The optimizer.

    #[test]
    fn optimizer_beats_brute_force_grid() {
        // For each τ and p on a grid of 2000 values in [½,1), the exact ε and m from counting
        // (no tails, no closed form); no feasible point may have a smaller worst-case variance.
        for d in [1usize, 2, 3, 5, 8, 12] {
            let n = (1usize << d) as f64;
            for &eps in &[0.3, 1.0, 2.5, 5.0] {
                let mech = PrivUnitInf::optimized(eps, d).unwrap();
                assert!(mech.guarantee().epsilon() <= eps);
                let best = mech.worst_case_variance();
                for tau in 1..=d {
                    let (mut n_cap, mut s_cap, mut s_rest) = (0.0, 0.0, 0.0);
                    for z in 0..(1usize << d) {
                        let k = z.count_ones() as f64;
                        if z.count_ones() as usize >= tau {
                            n_cap += 1.0;
                            s_cap += k;
                        } else {
                            s_rest += k;
                        }
                    }
                    let q = n_cap / n;
                    let n_rest = n - n_cap;
                    for i in 0..2000 {
                        let p = 0.5 + 0.5 * i as f64 / 2000.0;
                        if p <= q {
                            continue;
                        }
                        let e = (p * (1.0 - q) / ((1.0 - p) * q)).ln();
                        if e > eps {
                            continue;
                        }
                        let mut m = p * (2.0 * s_cap / n_cap / d as f64 - 1.0);
                        if n_rest > 0.0 {
                            m += (1.0 - p) * (2.0 * s_rest / n_rest / d as f64 - 1.0);
                        }
                        let var = d as f64 / (m * m);
                        assert!(
                            var >= best * (1.0 - 1e-12),
                            "d={d} ε={eps}: τ={tau} p={p} gives {var} < {best} (τ*={})",
                            mech.tau()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn variance_decreases_with_epsilon_and_budget_is_used() {
        for d in [7usize, 100, 1000, 20_000] {
            let mut prev = f64::INFINITY;
            for i in 1..=40 {
                let eps = 0.25 * i as f64;
                let mech = PrivUnitInf::optimized(eps, d).unwrap();
                let e = mech.guarantee().epsilon();
                assert!(e <= eps, "d={d}: ε {e} > {eps}");
                assert!(e > eps - 1e-12, "d={d}: budget not used: {e} vs {eps}");
                let v = mech.worst_case_variance();
                assert!(v < prev, "d={d} ε={eps}: {v} ≥ {prev}");
                prev = v;
            }
        }
    }

    #[test]
    fn huge_epsilon_caps_p_below_one() {
        // Budgets beyond what any (τ, p < 1) can spend: p stays below 1 and ε below the request.
        for (d, eps) in [(3usize, 60.0), (10, 500.0), (1000, 1e4)] {
            let mech = PrivUnitInf::optimized(eps, d).unwrap();
            assert!(mech.p() < 1.0 && mech.p() >= 0.5);
            let e = mech.guarantee().epsilon();
            assert!(e <= eps && e > 0.0, "d={d}: {e}");
            assert!(mech.worst_case_variance().is_finite());
        }
    }

    // ---------------------------------------------------------------------------------------
    // Scale, validation, serialization.

    #[test]
    fn million_dimensions() {
        let d = 1_000_000;
        let t0 = std::time::Instant::now();
        let mech = PrivUnitInf::optimized(8.0, d).unwrap();
        let t_opt = t0.elapsed();
        let t0 = std::time::Instant::now();
        let explicit = PrivUnitInf::new(d, mech.tau(), 0.9).unwrap();
        let t_new = t0.elapsed();
        let mut rng = seeded_rng_for_experiments(3);
        let x: Vec<f64> = (0..d).map(|_| 2.0 * rng.random::<f64>() - 1.0).collect();
        let t0 = std::time::Instant::now();
        let z = mech.privatize(&x, &mut rng).unwrap();
        let t_priv = t0.elapsed();
        eprintln!(
            "d=1e6 ε=8: τ={} p={} q={:e} m={:e} var={:e}; optimized {t_opt:?}, new {t_new:?}, privatize {t_priv:?}",
            mech.tau(),
            mech.p(),
            mech.q(),
            mech.m(),
            mech.worst_case_variance()
        );
        assert_eq!(z.len(), d);
        assert!(z.iter().all(|v| (v.abs() * mech.m() - 1.0).abs() < 1e-12));
        let e = mech.guarantee().epsilon();
        assert!(e <= 8.0 && e > 8.0 - 1e-12);
        assert!(explicit.guarantee().epsilon() > 0.0);
        // Extreme thresholds are fine in log space: τ = d gives q = 2^-d.
        let top = PrivUnitInf::new(d, d, 0.9).unwrap();
        let want = (0.9f64 / 0.1).ln() + d as f64 * std::f64::consts::LN_2;
        assert!((top.guarantee().epsilon() / want - 1.0).abs() < 1e-14);
        assert!((top.m() - 0.9).abs() < 1e-12, "m = {}", top.m());
    }

    #[test]
    fn rejects_bad_parameters_and_inputs() {
        assert!(PrivUnitInf::new(0, 1, 0.8).is_err());
        assert!(PrivUnitInf::new(5, 0, 0.8).is_err());
        assert!(PrivUnitInf::new(5, 6, 0.8).is_err());
        for p in [0.49, 1.0, f64::NAN, f64::INFINITY, -0.5] {
            assert!(PrivUnitInf::new(5, 4, p).is_err(), "p = {p}");
        }
        // d = 7, τ = 4: q = ½; p = ½ gives ε = 0 and m = 0, rejected with a hint.
        let err = PrivUnitInf::new(7, 4, 0.5).unwrap_err();
        assert!(err.to_string().contains("τ ≥ 5"), "{err}");
        assert!(PrivUnitInf::new(7, 1, 0.9).is_err()); // q = 127/128 > p
        assert!(PrivUnitInf::new(7, 1, 0.995).is_ok()); // q < p
        for eps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(PrivUnitInf::optimized(eps, 10).is_err(), "ε = {eps}");
        }
        assert!(PrivUnitInf::optimized(1.0, 0).is_err());

        let mech = PrivUnitInf::optimized(1.0, 3).unwrap();
        let mut rng = seeded_rng_for_experiments(1);
        assert!(mech.privatize(&[0.0, 0.0], &mut rng).is_err());
        assert!(mech.privatize(&[0.0, 1.5, 0.0], &mut rng).is_err());
        assert!(mech.privatize(&[0.0, f64::NAN, 0.0], &mut rng).is_err());
        assert!(
            mech.privatize(&[f64::NEG_INFINITY, 0.0, 0.0], &mut rng)
                .is_err()
        );
        assert!(mech.privatize(&[], &mut rng).is_err());
        let mut short = vec![0.0; 2];
        assert!(
            mech.privatize_into(&[0.0; 3], &mut short, &mut rng)
                .is_err()
        );
        assert!(mech.variance_at(&[2.0, 0.0, 0.0]).is_err());
        assert!(mech.privatize(&[1.0, -1.0, 0.25], &mut rng).is_ok());
    }

    #[test]
    fn serializes_parameters_and_names_itself() {
        let mech = PrivUnitInf::new(7, 5, 0.8).unwrap();
        assert_eq!(mech.name(), "privunit-inf");
        assert_eq!(mech.dim(), 7);
        assert_eq!(
            mech.domain(),
            Domain::LInfBall {
                dim: 7,
                radius: 1.0
            }
        );
        let j = serde_json::to_value(&mech).unwrap();
        let obj = j.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["dim", "epsilon", "m", "p", "q", "tau"]);
        assert_eq!(j["tau"], 5);
        assert!((j["q"].as_f64().unwrap() - 29.0 / 128.0).abs() < 1e-15);
        assert_eq!(j["epsilon"].as_f64().unwrap(), mech.guarantee().epsilon());
    }
}

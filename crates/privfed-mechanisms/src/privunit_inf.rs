//! PrivUnitInf: ε-LDP unbiased privatization of vectors in the hypercube `[-1,1]^d` with
//! hypercube caps (paper 000, Algorithm 2; `ALGORITHMS.md` §1.3).
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
//! saddle-point expansion (relative accuracy ~1e-14, no `lgamma` cancellation), and tails by
//! log-sum-exp.
//!
//! ## Floating point
//! The guarantee is exact for the ideal sampler. The implementation draws the cap/complement
//! choice exactly (`p ∈ [½,1)` is a multiple of 2^-53 and uniforms are 53-bit), the subset of
//! matching coordinates exactly (uniform integer draws), but the match count by inverse CDF with
//! one 53-bit uniform over a table of double-precision probabilities: a count whose probability
//! within its region is below ~2^-53 may be emitted with probability 0 or ~2^-53 instead. See
//! `docs/FLOATING_POINT.md`.

use crate::error::{MechanismError, Result, check_positive};
use crate::{Domain, Guarantee, LocalRandomizer, check_out_len};
use rand::{CryptoRng, Rng, RngExt};
use serde::Serialize;

/// PrivUnitInf (paper 000, Algorithm 2; `ALGORITHMS.md` §1.3): ε-LDP unbiased randomizer on the
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
        if !(log_p_ratio(p) + log_1mq - log_q > 0.0) {
            // Smallest threshold with q(τ) < p, for the message.
            let upper = bin.running_log_upper();
            let lp = p.ln();
            let min_tau = (1..=dim).find(|&t| upper[t] < lp);
            let hint = match min_tau {
                Some(t) => format!("τ ≥ {t} is needed for this p"),
                None => "no τ works for this p".to_string(),
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
    /// exact ε-LDP (the analogue of the optimized PrivUnit2 of paper 002, `ALGORITHMS.md` §1.3).
    ///
    /// For each threshold `τ ∈ [1, d]` the best cap probability exhausts the budget,
    /// `p/(1−p) = e^ε·q/(1−q)` (`m` and `ε` both increase with `p`), which gives
    /// `m = (τ/d)·b(τ)·(e^ε − 1)/(e^ε q + 1 − q)`; thresholds whose `p` would fall below ½ are
    /// skipped, and the `τ` with the largest `m` is kept. The reported ε is recomputed from the
    /// final `(τ, p)` and never exceeds `epsilon` (`p` is lowered by ulps if rounding requires;
    /// when `p` would round to 1 it is capped below 1, and ε is then smaller than requested).
    /// Costs O(d).
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
    if !(log_r >= 0.0) {
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
        let max = lp[lo..=hi].iter().copied().fold(f64::NEG_INFINITY, f64::max);
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
    fn new(d: usize) -> Self {
        Self {
            d,
            lp: (0..=d).map(|k| log_binom_half_pmf(d, k)).collect(),
        }
    }

    /// `(ln P(M ≥ τ), ln P(M ≤ τ−1))` by shifted direct summation (1 ≤ τ ≤ d).
    fn log_tails_at(&self, tau: usize) -> (f64, f64) {
        (
            log_sum_exp(&self.lp[tau..]),
            log_sum_exp(&self.lp[..tau]),
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

fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// `ln Σ exp(x_i)` with the maximum factored out and compensated (Neumaier) summation.
fn log_sum_exp(xs: &[f64]) -> f64 {
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for &x in xs {
        let t = (x - max).exp();
        let n = s + t;
        c += if s.abs() >= t.abs() {
            (s - n) + t
        } else {
            (t - n) + s
        };
        s = n;
    }
    max + (s + c).ln()
}

/// `ln P(Bin(d,½) = k)` by Loader's saddle-point expansion (C. Loader, "Fast and accurate
/// computation of binomial probabilities", 2000): `ln b(k) = δ(d) − δ(k) − δ(d−k) − D(k; d/2) −
/// D(d−k; d/2) − ½ ln(2π k(d−k)/d)`, where `δ` is the Stirling remainder and `D` the deviance
/// term. Relative accuracy ~1e-14 for every `d`, unlike `lgamma` differences.
fn log_binom_half_pmf(d: usize, k: usize) -> f64 {
    if k > d {
        return f64::NEG_INFINITY;
    }
    let n = d as f64;
    if k == 0 || k == d {
        return -n * std::f64::consts::LN_2;
    }
    let x = k as f64;
    let half = 0.5 * n;
    let lc = stirlerr(d) - stirlerr(k) - stirlerr(d - k) - bd0(x, half) - bd0(n - x, half);
    let lf = (2.0 * std::f64::consts::PI).ln() + x.ln() + (-x / n).ln_1p();
    lc - 0.5 * lf
}

/// Stirling remainder `δ(n) = ln n! − (n+½) ln n + n − ½ ln 2π` for `n ≥ 1`.
fn stirlerr(n: usize) -> f64 {
    // δ(1..=15), computed with mpmath at 40 digits.
    const SMALL: [f64; 15] = [
        0.081_061_466_795_327_258,
        0.041_340_695_955_409_294,
        0.027_677_925_684_998_339,
        0.020_790_672_103_765_093,
        0.016_644_691_189_821_192,
        0.013_876_128_823_070_748,
        0.011_896_709_945_891_770,
        0.010_411_265_261_972_096,
        0.009_255_462_182_712_733,
        0.008_330_563_433_362_871,
        0.007_573_675_487_951_841,
        0.006_942_840_107_209_530,
        0.006_408_994_188_004_207,
        0.005_951_370_112_758_848,
        0.005_554_733_551_962_801,
    ];
    if n == 0 {
        return 0.0;
    }
    if n <= 15 {
        return SMALL[n - 1];
    }
    // Asymptotic series δ(n) = 1/(12n) − 1/(360n³) + 1/(1260n⁵) − 1/(1680n⁷) + 1/(1188n⁹) − …
    const S0: f64 = 1.0 / 12.0;
    const S1: f64 = 1.0 / 360.0;
    const S2: f64 = 1.0 / 1260.0;
    const S3: f64 = 1.0 / 1680.0;
    const S4: f64 = 1.0 / 1188.0;
    let x = n as f64;
    let nn = x * x;
    if n > 500 {
        (S0 - S1 / nn) / x
    } else if n > 80 {
        (S0 - (S1 - S2 / nn) / nn) / x
    } else if n > 35 {
        (S0 - (S1 - (S2 - S3 / nn) / nn) / nn) / x
    } else {
        (S0 - (S1 - (S2 - (S3 - S4 / nn) / nn) / nn) / nn) / x
    }
}

/// Deviance term `D(x; μ) = x ln(x/μ) + μ − x`, by a series when `x ≈ μ` (no cancellation).
fn bd0(x: f64, mu: f64) -> f64 {
    if (x - mu).abs() < 0.1 * (x + mu) {
        let mut v = (x - mu) / (x + mu);
        let mut s = (x - mu) * v;
        let mut ej = 2.0 * x * v;
        v *= v;
        // |v| < 0.1: each term is < 1% of the previous; converges in < 20 terms.
        for j in 1..200 {
            ej *= v;
            let s1 = s + ej / f64::from(2 * j + 1);
            if s1 == s {
                break;
            }
            s = s1;
        }
        return s;
    }
    x * (x / mu).ln() + mu - x
}

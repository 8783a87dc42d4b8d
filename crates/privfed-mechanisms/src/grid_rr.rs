//! Randomized response on a grid with unbiased decoding (`docs/ALGORITHMS.md` §1.4).
//!
//! One mechanism, [`GridRr`], covers three named mechanisms of the papers, which differ only in
//! their grid `g_0 < g_1 < … < g_{K−1}`:
//!
//! | constructor | paper | grid |
//! |---|---|---|
//! | [`GridRr::scalar_dp`] | 000 Alg. 3 (ScalarDP) | uniform `g_i = i·r_max/k`, `K = k+1`, `k` optimized |
//! | [`GridRr::scalar_rel_dp`] | 000 Alg. 4, App. B.2 (ScalarRelDP) | geometric `0, a, a(1+κ), …, r_max` |
//! | [`GridRr::unbiased_grr`] | 004 §3.3 (unbiased generalized RR) | `K = 2^bits` evenly spaced points on `[lo, hi]` |
//! | [`GridRr::new`] | — | any strictly increasing grid |
//!
//! ## The mechanism
//! For an input `x ∈ [g_0, g_{K−1}]`:
//! 1. **Unbiased randomized rounding.** With `x ∈ [g_i, g_{i+1}]` and
//!    `λ = (x − g_i)/(g_{i+1} − g_i)`, take index `I = i+1` with probability `λ`, else `I = i`
//!    (so `E[g_I] = x`).
//! 2. **K-ary randomized response.** Report `J = I` with probability
//!    `p = e^ε/(e^ε + K − 1)`, otherwise one of the other `K − 1` indices uniformly, each with
//!    probability `q = 1/(e^ε + K − 1)`.
//! 3. **Unbiased decoding.** The server maps `J` to
//!    `a_J = (g_J·(K − 1 + e^ε) − Σ_i g_i)/(e^ε − 1)`, so `E[a_J] = x`.
//!
//! The device sends only the index `J` (`⌈log₂ K⌉` bits): see [`GridRr::encode`] and
//! [`GridRr::decode`].
//!
//! ## Exact privacy
//! Whatever the rounding did, the output distribution given `x` is a mixture of rows of the RR
//! matrix, whose entries are `p` (diagonal) and `q`; the largest ratio of output probabilities
//! over all pairs of inputs is therefore `p/q`, attained at two distinct grid points. The
//! guarantee reported by [`LocalRandomizer::guarantee`] is `ln(p/q)` computed from the
//! probabilities the sampler realizes (see there), not an echo of the requested ε.
//!
//! ## Exact variance
//! Writing `ḡ = Σ g_i/K`, `u_i = g_i − ḡ`, `U₂ = Σ u_i²` and `t = e^{−ε}`, the decoded values are
//! `a_j = ḡ + c·u_j` with `c = (1 + (K−1)t)/(1 − t)`, and the conditional variance of `a_J`
//! given `I = i` is
//! `v_i = K·u_i²·t/(1 − t) + U₂·t(1 + (K−1)t)/(1 − t)²`
//! (a sum of non-negative terms: no cancellation). For `x = g_i + λ(g_{i+1} − g_i)`,
//! `Var(x) = (1−λ)v_i + λv_{i+1} + λ(1−λ)(g_{i+1} − g_i)²` — the law of total variance over the
//! rounding. This is concave in `x` on each grid interval, so its maximum over the interval is
//! at `λ* = clamp(½ + (v_{i+1} − v_i)/(2h²), 0, 1)`: [`GridRr::worst_case_variance`] is the
//! exact maximum over all intervals.
//!
//! ## Sampling
//! Both Bernoulli draws (the rounding and "report another index") are sampled exactly for the
//! `f64` probability used, by comparing the binary expansion of a uniform variate with that of
//! the probability (one 64-bit word except with probability 2⁻⁶⁴; at most 17). The other index
//! is drawn uniformly with rand's unbiased integer sampler. So the realized distribution equals
//! [`GridRr::pmf`] up to one rounding of each `f64` probability, and tiny probabilities `q`
//! (large ε) are not distorted by the 53-bit resolution of `random::<f64>()`.

use crate::dither::{check_report_bits, grid_point, interval_max, interval_value, round_index};
use crate::domain::check_range;
use crate::error::{MechanismError, Result, check_positive};
use crate::sampling::bernoulli_exact;
use crate::{CryptoRng, Domain, Guarantee, LocalRandomizer, Rng, check_out_len};
use rand::RngExt;
use serde::Serialize;

/// The largest number of grid points accepted by every constructor (`2^16`, the output of the
/// 16-bit unbiased generalized RR).
pub const MAX_GRID_POINTS: usize = 1 << 16;

/// Which named mechanism (and parameters) a [`GridRr`] was built as.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum GridFamily {
    /// A user-supplied grid ([`GridRr::new`]).
    Custom {
        /// The grid points.
        grid: Vec<f64>,
    },
    /// ScalarDP (paper 000 Alg. 3): uniform grid `g_i = i·r_max/k`, `i = 0..=k`.
    ScalarDp {
        /// Upper end of the input range `[0, r_max]`.
        r_max: f64,
        /// Number of grid intervals (`K = k + 1` points).
        k: usize,
    },
    /// ScalarRelDP (paper 000 Alg. 4, App. B.2): geometric grid `0, a, a(1+κ), …`, ending at
    /// `r_max`.
    ScalarRelDp {
        /// Upper end of the input range `[0, r_max]`.
        r_max: f64,
        /// Accuracy parameter: the first non-zero grid point.
        a: f64,
        /// Growth rate of the grid intervals.
        kappa: f64,
    },
    /// Unbiased generalized randomized response (paper 004 §3.3): `2^bits` evenly spaced points.
    UnbiasedGrr {
        /// Bits per report (`K = 2^bits`).
        bits: u32,
        /// Lower end of the input range.
        lo: f64,
        /// Upper end of the input range.
        hi: f64,
    },
}

/// Grid randomized response with unbiased decoding (`docs/ALGORITHMS.md` §1.4; papers 000 Alg. 3–4
/// and 004 §3.3). See the [module documentation](self) for the formulas.
///
/// An immutable, validated value; construct it with [`GridRr::new`], [`GridRr::scalar_dp`],
/// [`GridRr::scalar_dp_with_k`], [`GridRr::scalar_rel_dp`] or [`GridRr::unbiased_grr`].
/// Serializes as its parameters (`family` with the named mechanism's parameters, the requested
/// `epsilon`, the number of points and the keep probability).
#[doc(alias = "k-ary randomized response")]
#[doc(alias = "randomized response")]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridRr {
    family: GridFamily,
    /// The requested ε (the guarantee is recomputed from the probabilities).
    epsilon: f64,
    num_points: usize,
    keep_probability: f64,
    #[serde(skip)]
    other_probability: f64,
    /// Probability of reporting an index different from the rounded one, `(K−1)q`.
    #[serde(skip)]
    change_probability: f64,
    #[serde(skip)]
    grid: Vec<f64>,
    #[serde(skip)]
    alphabet: Vec<f64>,
    /// `v_i = Var(a_J | I = i)`.
    #[serde(skip)]
    cond_var: Vec<f64>,
    #[serde(skip)]
    worst_case: f64,
    #[serde(skip)]
    worst_case_x: f64,
}

/// RR constants for `K` points at budget ε: `(t = e^{−ε}, 1 − t, 1 + (K−1)t)`.
fn rr_constants(epsilon: f64, k_points: usize) -> (f64, f64, f64) {
    let t = (-epsilon).exp();
    let one_minus_t = -libm::expm1(-epsilon);
    let denom = 1.0 + (k_points - 1) as f64 * t;
    (t, one_minus_t, denom)
}

/// Exact worst-case variance of ScalarDP with `k` intervals on `[0, r_max]`, in closed form.
///
/// On a uniform grid `v_i` grows with `|u_i|`, so every interval's variance curve is dominated
/// pointwise by that of the first (or, mirrored, the last) interval; the maximum is the
/// first interval's. (Tested against the general O(K) maximum.)
fn uniform_worst_case(epsilon: f64, r_max: f64, k: usize) -> f64 {
    let kp = (k + 1) as f64;
    let (t, omt, denom) = rr_constants(epsilon, k + 1);
    let h = r_max / k as f64;
    let u0 = -0.5 * r_max;
    let u1 = h - 0.5 * r_max;
    let u2 = h * h * kp * (kp * kp - 1.0) / 12.0;
    let a = kp * t / omt;
    let b = u2 * t * denom / (omt * omt);
    interval_max(a * u0 * u0 + b, a * u1 * u1 + b, h).1
}

impl GridRr {
    /// Grid randomized response on an arbitrary grid (`docs/ALGORITHMS.md` §1.4).
    ///
    /// `grid` must have between 2 and [`MAX_GRID_POINTS`] finite, strictly increasing points;
    /// `epsilon` must be finite and positive. Errors also when ε is so small that the decoded
    /// values or the variance overflow, or so large that `q = 1/(e^ε + K − 1)` underflows below
    /// the smallest normal `f64`. [`LocalRandomizer::name`] is `"grid-rr"`.
    pub fn new(grid: Vec<f64>, epsilon: f64) -> Result<GridRr> {
        let family = GridFamily::Custom { grid: grid.clone() };
        Self::build(grid, epsilon, family)
    }

    /// ScalarDP (paper 000 Alg. 3) on `[0, r_max]` with the number of intervals `k` chosen to
    /// **minimize the exact worst-case variance** over `k = 1..=k_max`, where
    /// `k_max = min(max(64, ⌈8·e^{ε/3}⌉), MAX_GRID_POINTS − 1)` (the optimal `k` grows like
    /// `e^{ε/3}`, paper 000 Lemma 4.4). Grid `g_i = i·r_max/k`, `K = k + 1`. Name `"scalar-dp"`.
    ///
    /// Measured: the minimizer is `k ≈ 1.14·e^{ε/3}` for ε ≥ 8 (k = 16 at ε = 8, 899 at ε = 20),
    /// well inside the search range; the cap `K ≤ MAX_GRID_POINTS` binds only for ε ≳ 33, where
    /// the largest allowed `k` is used. The search evaluates the exact worst case in closed form
    /// (O(1) per `k`; 5 ms at the cap).
    #[doc(alias = "ScalarDP")]
    pub fn scalar_dp(epsilon: f64, r_max: f64) -> Result<GridRr> {
        check_positive("epsilon", epsilon)?;
        check_positive("r_max", r_max)?;
        let k_max = Self::scalar_dp_k_max(epsilon);
        let mut best_k = 1;
        let mut best = f64::INFINITY;
        for k in 1..=k_max {
            let w = uniform_worst_case(epsilon, r_max, k);
            if w < best {
                best = w;
                best_k = k;
            }
        }
        Self::scalar_dp_with_k(epsilon, r_max, best_k)
    }

    /// The upper end of the search range of [`GridRr::scalar_dp`]:
    /// `min(max(64, ⌈8·e^{ε/3}⌉), MAX_GRID_POINTS − 1)`.
    pub fn scalar_dp_k_max(epsilon: f64) -> usize {
        let cap = MAX_GRID_POINTS - 1;
        let base = 8.0 * (epsilon / 3.0).exp();
        if base.is_nan() || base >= cap as f64 {
            cap
        } else {
            (base.ceil() as usize).clamp(64, cap)
        }
    }

    /// ScalarDP (paper 000 Alg. 3) with a given number of intervals `k ≥ 1`: grid
    /// `g_i = i·r_max/k`, `i = 0..=k`. Name `"scalar-dp"`.
    #[doc(alias = "ScalarDP")]
    pub fn scalar_dp_with_k(epsilon: f64, r_max: f64, k: usize) -> Result<GridRr> {
        check_positive("epsilon", epsilon)?;
        check_positive("r_max", r_max)?;
        if k == 0 || k >= MAX_GRID_POINTS {
            return Err(MechanismError::invalid(
                "k",
                k as f64,
                format!("must be in 1..={}", MAX_GRID_POINTS - 1),
            ));
        }
        let grid = (0..=k)
            .map(|i| r_max * (i as f64 / k as f64))
            .collect::<Vec<_>>();
        Self::build(grid, epsilon, GridFamily::ScalarDp { r_max, k })
    }

    /// ScalarRelDP (paper 000 Alg. 4, App. B.2): randomized response on the geometric grid
    /// `0, a, a(1+κ), a(1+κ)², …` for relative error, on the input range `[0, r_max]`.
    /// Name `"scalar-rel-dp"`.
    ///
    /// **Top end.** The paper covers `[0, r_max]` with the intervals `[0, a]` and
    /// `[a(1+κ)^{i−1}, a(1+κ)^i]`, the last of which may end above `r_max`. Here the grid is
    /// `{0} ∪ {a(1+κ)^i < r_max} ∪ {r_max}`: the last interval is cut at `r_max`, so the
    /// mechanism's domain is exactly `[0, r_max]` and no decoded value is spent on inputs that
    /// cannot occur. A geometric point within a relative `10⁻⁹` of `r_max` is merged into `r_max`
    /// (no sliver interval). Points are computed as `a·exp(i·ln(1+κ))`.
    ///
    /// Requires `0 < a < r_max`, `κ > 0` finite, and at most [`MAX_GRID_POINTS`] points
    /// (roughly `2 + ln(r_max/a)/ln(1+κ)`); otherwise an error says which to increase.
    #[doc(alias = "ScalarRelDP")]
    pub fn scalar_rel_dp(epsilon: f64, r_max: f64, a: f64, kappa: f64) -> Result<GridRr> {
        check_positive("epsilon", epsilon)?;
        check_positive("r_max", r_max)?;
        crate::error::check_open_interval("a", a, 0.0, r_max)?;
        check_positive("kappa", kappa)?;
        let step = libm::log1p(kappa);
        let estimate = (r_max / a).ln() / step + 2.0;
        if estimate.is_nan() || estimate > MAX_GRID_POINTS as f64 {
            return Err(MechanismError::Infeasible(format!(
                "ScalarRelDP with a = {a}, kappa = {kappa}, r_max = {r_max} needs about {estimate:.0} \
                 grid points, more than {MAX_GRID_POINTS}: increase `a` or `kappa`"
            )));
        }
        let top = r_max * (1.0 - 1e-9);
        let mut grid = vec![0.0];
        let mut i = 0u32;
        loop {
            let g = a * (f64::from(i) * step).exp();
            if g >= top {
                break;
            }
            if g <= *grid.last().unwrap_or(&0.0) {
                return Err(MechanismError::invalid(
                    "kappa",
                    kappa,
                    "too small: consecutive grid points coincide in floating point",
                ));
            }
            grid.push(g);
            i += 1;
            if grid.len() >= MAX_GRID_POINTS {
                return Err(MechanismError::Infeasible(format!(
                    "ScalarRelDP grid exceeds {MAX_GRID_POINTS} points: increase `a` or `kappa`"
                )));
            }
        }
        grid.push(r_max);
        Self::build(grid, epsilon, GridFamily::ScalarRelDp { r_max, a, kappa })
    }

    /// Unbiased generalized randomized response (paper 004 §3.3): dithering onto the
    /// `B = 2^bits` evenly spaced points `g_i = lo + (hi − lo)·i/(B − 1)` (the paper's grid
    /// `{0, 1/(B−1), …, 1}` mapped affinely onto `[lo, hi]`; the end points are exactly `lo` and
    /// `hi`), then generalized RR and unbiased decoding. `bits ∈ 1..=16`, `lo < hi` finite.
    /// Name `"grr"`.
    #[doc(alias = "gRR")]
    #[doc(alias = "unbiased generalized randomized response")]
    #[doc(alias = "generalized randomized response")]
    pub fn unbiased_grr(epsilon: f64, bits: u32, lo: f64, hi: f64) -> Result<GridRr> {
        check_positive("epsilon", epsilon)?;
        check_report_bits(bits)?;
        check_range(lo, hi)?;
        let b = 1usize << bits;
        let grid = (0..b).map(|i| grid_point(i, b, lo, hi)).collect::<Vec<_>>();
        Self::build(grid, epsilon, GridFamily::UnbiasedGrr { bits, lo, hi })
    }

    fn build(grid: Vec<f64>, epsilon: f64, family: GridFamily) -> Result<GridRr> {
        check_positive("epsilon", epsilon)?;
        let k = grid.len();
        if !(2..=MAX_GRID_POINTS).contains(&k) {
            return Err(MechanismError::invalid(
                "grid",
                k as f64,
                format!("the number of grid points must be in 2..={MAX_GRID_POINTS}"),
            ));
        }
        if let Some((i, &g)) = grid.iter().enumerate().find(|(_, g)| !g.is_finite()) {
            return Err(MechanismError::invalid(
                "grid",
                g,
                format!("grid point {i} is not finite"),
            ));
        }
        if let Some(i) = (1..k).find(|&i| grid[i] <= grid[i - 1]) {
            return Err(MechanismError::invalid(
                "grid",
                grid[i],
                format!(
                    "grid must be strictly increasing, but point {i} does not exceed point {} = {}",
                    i - 1,
                    grid[i - 1]
                ),
            ));
        }
        if grid.windows(2).any(|w| !(w[1] - w[0]).is_finite()) {
            return Err(MechanismError::invalid(
                "grid",
                grid[k - 1],
                "the grid spacing overflows",
            ));
        }
        let kf = k as f64;
        let (t, omt, denom) = rr_constants(epsilon, k);
        let keep = 1.0 / denom;
        let other = t / denom;
        let change = (k - 1) as f64 * t / denom;
        if other.is_nan() || other < f64::MIN_POSITIVE {
            return Err(MechanismError::invalid(
                "epsilon",
                epsilon,
                format!(
                    "too large for {k} grid points: the probability of the other indices, \
                     1/(e^ε + K − 1), underflows"
                ),
            ));
        }
        // Two-pass mean (the correction makes Σ u_i vanish to rounding).
        let mean0 = grid.iter().sum::<f64>() / kf;
        let mean = mean0 + grid.iter().map(|g| g - mean0).sum::<f64>() / kf;
        let u: Vec<f64> = grid.iter().map(|g| g - mean).collect();
        let u2: f64 = u.iter().map(|v| v * v).sum();
        let c = denom / omt;
        let alphabet: Vec<f64> = u.iter().map(|ui| mean + c * ui).collect();
        let a_coef = kf * t / omt;
        let b_coef = u2 * t * denom / (omt * omt);
        let cond_var: Vec<f64> = u.iter().map(|ui| a_coef * ui * ui + b_coef).collect();
        let mut worst_case = f64::NEG_INFINITY;
        let mut worst_case_x = grid[0];
        for i in 0..k - 1 {
            let h = grid[i + 1] - grid[i];
            let (lam, w) = interval_max(cond_var[i], cond_var[i + 1], h);
            if w > worst_case {
                worst_case = w;
                worst_case_x = grid[i] + lam * h;
            }
        }
        if !(alphabet.iter().all(|a| a.is_finite()) && worst_case.is_finite()) {
            return Err(MechanismError::invalid(
                "epsilon",
                epsilon,
                format!(
                    "too small for this grid: the decoded values or the variance overflow \
                     (c = (e^ε + K − 1)/(e^ε − 1) = {c})"
                ),
            ));
        }
        Ok(GridRr {
            family,
            epsilon,
            num_points: k,
            keep_probability: keep,
            other_probability: other,
            change_probability: change,
            grid,
            alphabet,
            cond_var,
            worst_case,
            worst_case_x,
        })
    }

    /// The named mechanism and its parameters.
    pub fn family(&self) -> &GridFamily {
        &self.family
    }

    /// The ε requested at construction (the guarantee is recomputed from the probabilities:
    /// [`LocalRandomizer::guarantee`]).
    pub fn requested_epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The grid `g_0 < … < g_{K−1}`.
    pub fn grid(&self) -> &[f64] {
        &self.grid
    }

    /// Number of grid points (and of output letters) `K`.
    pub fn num_points(&self) -> usize {
        self.num_points
    }

    /// The decoded values `a_j = (g_j(K−1+e^ε) − Σ_i g_i)/(e^ε − 1)`, computed as
    /// `ḡ + (g_j − ḡ)·(1 + (K−1)e^{−ε})/(1 − e^{−ε})` (same value, no overflow for large ε).
    pub fn alphabet(&self) -> &[f64] {
        &self.alphabet
    }

    /// `p = e^ε/(e^ε + K − 1)`: the probability of reporting the rounded index.
    pub fn keep_probability(&self) -> f64 {
        self.keep_probability
    }

    /// `q = 1/(e^ε + K − 1)`: the probability of reporting any one given other index.
    pub fn other_probability(&self) -> f64 {
        self.other_probability
    }

    /// `Var(a_J | I = i)` for each grid index `i`: `K u_i² t/(1−t) + U₂ t(1+(K−1)t)/(1−t)²`
    /// with `t = e^{−ε}` (see the module documentation).
    pub fn conditional_variances(&self) -> &[f64] {
        &self.cond_var
    }

    /// Checks `x` and returns `(i, λ)` with `x = g_i + λ(g_{i+1} − g_i)`, `i ≤ K − 2`.
    fn locate(&self, x: f64) -> Result<(usize, f64)> {
        if !x.is_finite() {
            return Err(MechanismError::NonFiniteInput { index: 0, value: x });
        }
        let k = self.num_points;
        let (lo, hi) = (self.grid[0], self.grid[k - 1]);
        if x < lo || x > hi {
            return Err(MechanismError::OutOfDomain(format!(
                "{x} is outside [{lo}, {hi}]"
            )));
        }
        let i = (self.grid.partition_point(|&g| g <= x).max(1) - 1).min(k - 2);
        let lam = ((x - self.grid[i]) / (self.grid[i + 1] - self.grid[i])).clamp(0.0, 1.0);
        Ok((i, lam))
    }

    /// What a device sends: the index `J ∈ 0..K` (randomized rounding of `x`, then K-ary RR).
    /// Errors if `x` is NaN, infinite or outside `[g_0, g_{K−1}]`.
    pub fn encode<R: Rng + CryptoRng + ?Sized>(&self, x: f64, rng: &mut R) -> Result<usize> {
        let (i, lam) = self.locate(x)?;
        let rounded = round_index(i, lam, rng);
        if bernoulli_exact(rng, self.change_probability) {
            let r = rng.random_range(0..self.num_points - 1);
            Ok(if r >= rounded { r + 1 } else { r })
        } else {
            Ok(rounded)
        }
    }

    /// The server's unbiased estimate `a_j` for a received index `j`; errors if `j ≥ K`.
    pub fn decode(&self, j: usize) -> Result<f64> {
        self.alphabet.get(j).copied().ok_or_else(|| {
            MechanismError::invalid(
                "index",
                j as f64,
                format!("must be < {} (the number of grid points)", self.num_points),
            )
        })
    }

    /// `decode(encode(x))`: a private, unbiased estimate of the scalar `x`.
    pub fn privatize_scalar<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: f64,
        rng: &mut R,
    ) -> Result<f64> {
        let j = self.encode(x, rng)?;
        self.decode(j)
    }

    /// The exact distribution of [`encode`](Self::encode) at `x`: `P(J = j | x)` for `j = 0..K`.
    /// With `x = g_i + λ(g_{i+1} − g_i)`: `q` everywhere, except `(1−λ)p + λq` at `i` and
    /// `λp + (1−λ)q` at `i + 1`.
    pub fn pmf(&self, x: f64) -> Result<Vec<f64>> {
        let (i, lam) = self.locate(x)?;
        let (p, q) = (self.keep_probability, self.other_probability);
        let mut out = vec![q; self.num_points];
        out[i] = (1.0 - lam) * p + lam * q;
        out[i + 1] = lam * p + (1.0 - lam) * q;
        Ok(out)
    }

    /// Exact `E[(a_J − x)²]` at the scalar `x`:
    /// `(1−λ)v_i + λv_{i+1} + λ(1−λ)(g_{i+1} − g_i)²` (equal to `Σ_j P(J=j|x)(a_j − x)²`).
    pub fn variance_scalar(&self, x: f64) -> Result<f64> {
        let (i, lam) = self.locate(x)?;
        let h = self.grid[i + 1] - self.grid[i];
        Ok(interval_value(
            self.cond_var[i],
            self.cond_var[i + 1],
            h,
            lam,
        ))
    }

    /// An input attaining [`LocalRandomizer::worst_case_variance`].
    pub fn worst_case_input(&self) -> f64 {
        self.worst_case_x
    }
}

impl LocalRandomizer for GridRr {
    fn name(&self) -> &'static str {
        match self.family {
            GridFamily::Custom { .. } => "grid-rr",
            GridFamily::ScalarDp { .. } => "scalar-dp",
            GridFamily::ScalarRelDp { .. } => "scalar-rel-dp",
            GridFamily::UnbiasedGrr { .. } => "grr",
        }
    }

    fn domain(&self) -> Domain {
        Domain::Interval {
            lo: self.grid[0],
            hi: self.grid[self.num_points - 1],
        }
    }

    /// `Pure { ε = ln(p/q) }`: the largest ratio of output probabilities over all pairs of
    /// inputs (attained at two distinct grid points), computed from the probabilities the sampler
    /// realizes: it reports another index with probability `c = (K−1)q` (an exact Bernoulli draw
    /// for that `f64`), so `p = 1 − c`, `q = c/(K−1)` and `ε = ln(1 − c) + ln(K−1) − ln c`.
    fn guarantee(&self) -> Guarantee {
        let c = self.change_probability;
        let km1 = (self.num_points - 1) as f64;
        Guarantee::Pure {
            epsilon: libm::log1p(-c) + km1.ln() - c.ln(),
        }
    }

    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain().check(x)?;
        self.variance_scalar(x[0])
    }

    /// Exact maximum of the concave per-interval variance curves (see the module docs).
    fn worst_case_variance(&self) -> f64 {
        self.worst_case
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        check_out_len(out, 1)?;
        self.domain().check(x)?;
        out[0] = self.privatize_scalar(x[0], rng)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_chi_square_gof, assert_z, z_mean_known_variance};

    fn all_test_mechanisms() -> Vec<GridRr> {
        let mut v = vec![
            GridRr::scalar_dp_with_k(2.0, 1.0, 5).unwrap(),
            GridRr::scalar_dp_with_k(0.3, 2.5, 1).unwrap(),
            GridRr::scalar_dp_with_k(8.0, 1.0, 40).unwrap(),
            GridRr::scalar_dp(1.0, 3.0).unwrap(),
            GridRr::scalar_rel_dp(1.5, 10.0, 0.1, 0.5).unwrap(),
            GridRr::scalar_rel_dp(4.0, 1.0, 0.01, 0.2).unwrap(),
            GridRr::unbiased_grr(1.0, 3, -1.0, 1.0).unwrap(),
            GridRr::unbiased_grr(5.0, 1, 0.0, 1.0).unwrap(),
            GridRr::unbiased_grr(30.0, 4, -2.0, 7.0).unwrap(),
            GridRr::new(vec![-3.0, -2.9, 0.0, 0.1, 5.0], 0.7).unwrap(),
        ];
        // A random grid.
        let mut rng = seeded_rng_for_experiments(99);
        let mut g: Vec<f64> = (0..12).map(|_| rng.random::<f64>() * 4.0 - 1.0).collect();
        g.sort_by(f64::total_cmp);
        v.push(GridRr::new(g, 2.3).unwrap());
        v
    }

    fn test_points(m: &GridRr, rng: &mut crate::rng::ExperimentRng) -> Vec<f64> {
        let g = m.grid();
        let (lo, hi) = (g[0], g[g.len() - 1]);
        let mut xs = g.to_vec();
        for w in g.windows(2) {
            xs.push(0.5 * (w[0] + w[1]));
        }
        for _ in 0..50 {
            xs.push(lo + (hi - lo) * rng.random::<f64>());
        }
        xs
    }

    #[test]
    fn algorithms_md_sanity_values() {
        // ALGORITHMS §1.4: uniform grid r_max = 1, k = 5, ε = 2; Monte Carlo (4e5 draws) variances
        // 0.448, 0.239, 0.447 at x = 0, 0.37, 1. Those are estimates with standard error ≈ 1e-3,
        // so the exact values must agree within 1.5e-3; the exact values themselves are pinned
        // tighter from the closed form (x = 0 and x = 1 are equal by symmetry).
        let m = GridRr::scalar_dp_with_k(2.0, 1.0, 5).unwrap();
        let quoted = [(0.0, 0.448), (0.37, 0.239), (1.0, 0.447)];
        for (x, v) in quoted {
            let exact = m.variance_scalar(x).unwrap();
            assert!(
                (exact - v).abs() < 1.5e-3,
                "x={x}: exact {exact} vs quoted {v}"
            );
        }
        // Independent hand computation at x = 0: t = e^-2, K = 6, u_0 = -1/2, U₂ = 0.7.
        let t = (-2.0f64).exp();
        let v0 = 6.0 * 0.25 * t / (1.0 - t) + 0.7 * t * (1.0 + 5.0 * t) / (1.0 - t).powi(2);
        assert!((m.variance_scalar(0.0).unwrap() - v0).abs() < 1e-14);
        assert!((m.variance_scalar(1.0).unwrap() - v0).abs() < 1e-14);
        // Against the direct definition of the decoded values: a_j = (g_j(K−1+e^ε) − Σg)/(e^ε − 1).
        let e = 2.0f64.exp();
        for (j, &a) in m.alphabet().iter().enumerate() {
            let direct = (m.grid()[j] * (5.0 + e) - 3.0) / (e - 1.0);
            assert!((a - direct).abs() < 1e-13, "a_{j} = {a} vs {direct}");
        }
    }

    #[test]
    fn monte_carlo_mean_and_variance_at_sanity_points() {
        // Two-sided z-tests at α = 6e-7 (|z| < 4.99) on the mean (variance Var) and on the sample
        // second moment about x (variance μ4 − Var², μ4 exact from the pmf), 6 tests.
        let m = GridRr::scalar_dp_with_k(2.0, 1.0, 5).unwrap();
        let mut rng = seeded_rng_for_experiments(2024);
        let n = 400_000;
        for x in [0.0, 0.37, 1.0] {
            let var = m.variance_scalar(x).unwrap();
            let pmf = m.pmf(x).unwrap();
            let mu4: f64 = pmf
                .iter()
                .zip(m.alphabet())
                .map(|(p, a)| p * (a - x).powi(4))
                .sum();
            let (mut s1, mut s2) = (0.0, 0.0);
            for _ in 0..n {
                let z = m.privatize_scalar(x, &mut rng).unwrap() - x;
                s1 += z;
                s2 += z * z;
            }
            let nf = n as f64;
            let z = z_mean_known_variance(s1 / nf, n, 0.0, var);
            assert_z(z, 6e-7, &format!("x={x}: mean error"));
            let z = z_mean_known_variance(s2 / nf, n, var, mu4 - var * var);
            assert_z(z, 6e-7, &format!("x={x}: MC variance vs exact {var}"));
        }
    }

    #[test]
    fn exactly_unbiased_from_pmf() {
        let mut rng = seeded_rng_for_experiments(1);
        for m in all_test_mechanisms() {
            let scale = m.alphabet().iter().fold(1.0f64, |s, a| s.max(a.abs()));
            for x in test_points(&m, &mut rng) {
                let pmf = m.pmf(x).unwrap();
                let total: f64 = pmf.iter().sum();
                assert!((total - 1.0).abs() < 1e-12);
                assert!(pmf.iter().all(|&p| p > 0.0));
                let mean: f64 = pmf.iter().zip(m.alphabet()).map(|(p, a)| p * a).sum();
                assert!(
                    (mean - x).abs() < 1e-12 * scale,
                    "{}: E[a_J] = {mean} at x = {x}",
                    m.name()
                );
            }
        }
    }

    #[test]
    fn variance_matches_direct_sum_over_pmf() {
        let mut rng = seeded_rng_for_experiments(2);
        for m in all_test_mechanisms() {
            for x in test_points(&m, &mut rng) {
                let pmf = m.pmf(x).unwrap();
                let direct: f64 = pmf
                    .iter()
                    .zip(m.alphabet())
                    .map(|(p, a)| p * (a - x) * (a - x))
                    .sum();
                let v = m.variance_at(&[x]).unwrap();
                assert!(
                    (v - direct).abs() <= 1e-10 * direct,
                    "{}: variance {v} vs direct {direct} at x = {x}",
                    m.name()
                );
            }
        }
    }

    #[test]
    fn pmf_ratios_are_bounded_by_e_epsilon_and_attain_it() {
        let mut rng = seeded_rng_for_experiments(3);
        for m in all_test_mechanisms() {
            let eps = m.guarantee().epsilon();
            assert!(
                (eps - m.requested_epsilon()).abs() < 1e-12 * m.requested_epsilon().max(1.0),
                "guarantee {eps} vs requested {}",
                m.requested_epsilon()
            );
            let bound = eps.exp();
            let xs = test_points(&m, &mut rng);
            let pmfs: Vec<Vec<f64>> = xs.iter().map(|&x| m.pmf(x).unwrap()).collect();
            let mut max_ratio = 0.0f64;
            for p1 in &pmfs {
                for p2 in &pmfs {
                    for (a, b) in p1.iter().zip(p2) {
                        max_ratio = max_ratio.max(a / b);
                    }
                }
            }
            assert!(
                max_ratio <= bound * (1.0 + 1e-12),
                "{}: max ratio {max_ratio} > e^ε = {bound}",
                m.name()
            );
            assert!(
                (max_ratio / bound - 1.0).abs() < 1e-12,
                "{}: max ratio {max_ratio} not attained (e^ε = {bound})",
                m.name()
            );
        }
    }

    #[test]
    fn worst_case_variance_is_the_maximum_and_attained() {
        for m in all_test_mechanisms() {
            let w = m.worst_case_variance();
            let g = m.grid();
            let (lo, hi) = (g[0], g[g.len() - 1]);
            let mut dense_max = 0.0f64;
            for i in 0..=20_000 {
                let x = (lo + (hi - lo) * (i as f64 / 20_000.0)).clamp(lo, hi);
                let v = m.variance_scalar(x).unwrap();
                assert!(v <= w * (1.0 + 1e-12), "{}: Var({x}) = {v} > {w}", m.name());
                dense_max = dense_max.max(v);
            }
            for &x in g {
                assert!(m.variance_scalar(x).unwrap() <= w * (1.0 + 1e-12));
            }
            let at = m.variance_scalar(m.worst_case_input()).unwrap();
            assert!((at - w).abs() <= 1e-12 * w, "{}: not attained", m.name());
            // The dense scan gets close to the maximum (the curves are smooth parabolas).
            assert!(dense_max >= w * (1.0 - 1e-3));
        }
    }

    #[test]
    fn uniform_closed_form_matches_general_worst_case() {
        for eps in [0.1, 0.5, 1.0, 2.0, 5.0, 9.0, 20.0] {
            for k in [1, 2, 3, 4, 5, 7, 10, 33, 100, 257] {
                let m = GridRr::scalar_dp_with_k(eps, 2.0, k).unwrap();
                let closed = uniform_worst_case(eps, 2.0, k);
                let general = m.worst_case_variance();
                assert!(
                    (closed - general).abs() <= 1e-12 * general,
                    "eps={eps} k={k}: closed {closed} vs general {general}"
                );
            }
        }
    }

    #[test]
    fn scalar_dp_chooses_the_minimizing_k() {
        for eps in [0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 12.0] {
            let m = GridRr::scalar_dp(eps, 1.0).unwrap();
            let chosen = match *m.family() {
                GridFamily::ScalarDp { k, .. } => k,
                _ => unreachable!(),
            };
            let k_max = GridRr::scalar_dp_k_max(eps);
            assert!(
                chosen < k_max,
                "eps={eps}: the search range is not generous"
            );
            let mut best = (0, f64::INFINITY);
            for k in 1..=k_max {
                let w = GridRr::scalar_dp_with_k(eps, 1.0, k)
                    .unwrap()
                    .worst_case_variance();
                if w < best.1 {
                    best = (k, w);
                }
            }
            assert!(
                m.worst_case_variance() <= best.1 * (1.0 + 1e-12),
                "eps={eps}: chose k={chosen} ({}), brute force k={} ({})",
                m.worst_case_variance(),
                best.0,
                best.1
            );
        }
        // Scale invariance: r_max multiplies the variance by r_max² and does not change k.
        let a = GridRr::scalar_dp(3.0, 1.0).unwrap();
        let b = GridRr::scalar_dp(3.0, 7.0).unwrap();
        assert_eq!(a.num_points(), b.num_points());
        assert!((b.worst_case_variance() / a.worst_case_variance() - 49.0).abs() < 1e-10);
    }

    #[test]
    fn scalar_dp_large_epsilon() {
        // The optimal k grows like e^{ε/3}; at ε = 25 it is in the thousands.
        let m = GridRr::scalar_dp(25.0, 1.0).unwrap();
        assert!(m.num_points() > 1000, "K = {}", m.num_points());
        assert!((m.guarantee().epsilon() - 25.0).abs() < 1e-12);
        assert!(m.worst_case_variance() < 1e-6);
        let m = GridRr::scalar_dp(700.0, 1.0).unwrap();
        assert_eq!(m.num_points(), MAX_GRID_POINTS);
        assert!((m.guarantee().epsilon() - 700.0).abs() < 1e-9);
    }

    #[test]
    fn encode_matches_pmf_chi_square() {
        // Pearson chi-square against the exact pmf at α = 1e-6 per test, 8 tests (FPR ≤ 8e-6).
        let mut rng = seeded_rng_for_experiments(7);
        let cases = [
            (
                GridRr::scalar_dp_with_k(2.0, 1.0, 5).unwrap(),
                vec![0.0, 0.37, 0.5, 1.0],
            ),
            (
                GridRr::scalar_rel_dp(1.0, 4.0, 0.2, 1.0).unwrap(),
                vec![0.05, 3.3],
            ),
            (
                GridRr::unbiased_grr(6.0, 2, -1.0, 1.0).unwrap(),
                vec![-0.9, 0.2],
            ),
        ];
        let n = 200_000;
        for (m, xs) in cases {
            for x in xs {
                let pmf = m.pmf(x).unwrap();
                let mut counts = vec![0u64; m.num_points()];
                for _ in 0..n {
                    counts[m.encode(x, &mut rng).unwrap()] += 1;
                }
                assert_chi_square_gof(&counts, &pmf, 1e-6, &format!("{} x={x}", m.name()));
            }
        }
    }

    #[test]
    fn scalar_rel_dp_grid() {
        let m = GridRr::scalar_rel_dp(1.0, 10.0, 0.1, 0.5).unwrap();
        let g = m.grid();
        assert_eq!(g[0], 0.0);
        assert_eq!(g[1], 0.1);
        assert_eq!(*g.last().unwrap(), 10.0);
        for w in g[1..g.len() - 1].windows(2) {
            assert!((w[1] / w[0] - 1.5).abs() < 1e-12);
        }
        // 0.1·1.5^i < 10 ⇔ i ≤ 11 (1.5^11 = 86.5, 1.5^12 = 129.7): 0, 12 geometric points, 10.
        assert_eq!(g.len(), 14);
        assert!(g[g.len() - 2] < 10.0);
        // Exact powers: r_max = a(1+κ)^m is merged (no sliver interval).
        let m = GridRr::scalar_rel_dp(1.0, 8.0, 1.0, 1.0).unwrap();
        assert_eq!(m.grid(), &[0.0, 1.0, 2.0, 4.0, 8.0]);
        assert_eq!(m.name(), "scalar-rel-dp");
        assert_eq!(m.domain(), Domain::Interval { lo: 0.0, hi: 8.0 });
    }

    #[test]
    fn unbiased_grr_grid() {
        let m = GridRr::unbiased_grr(2.0, 3, -1.0, 1.0).unwrap();
        assert_eq!(m.num_points(), 8);
        assert_eq!(m.grid()[0], -1.0);
        assert_eq!(m.grid()[7], 1.0);
        for (i, g) in m.grid().iter().enumerate() {
            assert!((g - (-1.0 + 2.0 * i as f64 / 7.0)).abs() < 1e-15);
        }
        let m16 = GridRr::unbiased_grr(2.0, 16, 0.1, 0.3).unwrap();
        assert_eq!(m16.num_points(), 65536);
        assert_eq!(m16.grid()[65535], 0.3);
        assert_eq!(m16.name(), "grr");
        // Paper 004 §3.3: P = (e^ε−1)/(B+e^ε−1)·I + 1/(B+e^ε−1): diagonal e^ε/(B+e^ε−1).
        let e = 2.0f64.exp();
        assert!((m.keep_probability() - e / (8.0 + e - 1.0)).abs() < 1e-15);
        assert!((m.other_probability() - 1.0 / (8.0 + e - 1.0)).abs() < 1e-15);
    }

    #[test]
    fn names_domain_and_serialization() {
        let m = GridRr::scalar_dp_with_k(2.0, 1.0, 5).unwrap();
        assert_eq!(m.name(), "scalar-dp");
        assert_eq!(m.dim(), 1);
        assert_eq!(m.domain(), Domain::Interval { lo: 0.0, hi: 1.0 });
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["family"]["family"], "scalar_dp");
        assert_eq!(json["family"]["k"], 5);
        assert_eq!(json["epsilon"], 2.0);
        assert_eq!(json["num_points"], 6);
        assert!(json.get("alphabet").is_none());
        let c = GridRr::new(vec![0.0, 1.0, 3.0], 1.0).unwrap();
        assert_eq!(c.name(), "grid-rr");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["family"]["grid"], serde_json::json!([0.0, 1.0, 3.0]));
        let mut rng = seeded_rng_for_experiments(5);
        let out = c.privatize(&[2.0], &mut rng).unwrap();
        assert!(c.alphabet().contains(&out[0]));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let m = GridRr::scalar_dp_with_k(2.0, 1.0, 5).unwrap();
        let mut rng = seeded_rng_for_experiments(0);
        assert!(matches!(
            m.encode(f64::NAN, &mut rng),
            Err(MechanismError::NonFiniteInput { .. })
        ));
        assert!(m.encode(f64::INFINITY, &mut rng).is_err());
        assert!(matches!(
            m.encode(1.0 + 1e-12, &mut rng),
            Err(MechanismError::OutOfDomain(_))
        ));
        assert!(m.encode(-1e-300, &mut rng).is_err());
        assert!(m.pmf(f64::NAN).is_err());
        assert!(m.variance_scalar(2.0).is_err());
        assert!(m.decode(6).is_err());
        assert!(m.decode(5).is_ok());
        assert!(m.variance_at(&[0.1, 0.2]).is_err());
        assert!(m.privatize(&[], &mut rng).is_err());
        let mut out = [0.0; 2];
        assert!(m.privatize_into(&[0.5], &mut out, &mut rng).is_err());

        assert!(GridRr::new(vec![0.0], 1.0).is_err());
        assert!(GridRr::new(vec![], 1.0).is_err());
        assert!(GridRr::new(vec![0.0, 0.0], 1.0).is_err());
        assert!(GridRr::new(vec![1.0, 0.0], 1.0).is_err());
        assert!(GridRr::new(vec![0.0, f64::NAN], 1.0).is_err());
        assert!(GridRr::new(vec![0.0, f64::INFINITY], 1.0).is_err());
        assert!(GridRr::new(vec![-f64::MAX, f64::MAX], 1.0).is_err());
        assert!(GridRr::new(vec![0.0; MAX_GRID_POINTS + 1], 1.0).is_err());
        for eps in [0.0, -1.0, f64::NAN, f64::INFINITY, 800.0, 1e-300] {
            assert!(GridRr::new(vec![0.0, 1.0], eps).is_err(), "eps = {eps}");
        }
        assert!(GridRr::scalar_dp(1.0, 0.0).is_err());
        assert!(GridRr::scalar_dp(1.0, f64::NAN).is_err());
        assert!(GridRr::scalar_dp_with_k(1.0, 1.0, 0).is_err());
        assert!(GridRr::scalar_dp_with_k(1.0, 1.0, MAX_GRID_POINTS).is_err());
        assert!(GridRr::scalar_rel_dp(1.0, 1.0, 1.0, 0.5).is_err());
        assert!(GridRr::scalar_rel_dp(1.0, 1.0, 0.0, 0.5).is_err());
        assert!(GridRr::scalar_rel_dp(1.0, 1.0, 0.5, 0.0).is_err());
        assert!(GridRr::scalar_rel_dp(1.0, 1.0, 0.5, f64::NAN).is_err());
        assert!(matches!(
            GridRr::scalar_rel_dp(1.0, 1.0, 1e-9, 1e-5),
            Err(MechanismError::Infeasible(_))
        ));
        assert!(GridRr::scalar_rel_dp(1.0, 1.0, 0.5, 1e-300).is_err());
        assert!(GridRr::unbiased_grr(1.0, 0, 0.0, 1.0).is_err());
        assert!(GridRr::unbiased_grr(1.0, 17, 0.0, 1.0).is_err());
        assert!(GridRr::unbiased_grr(1.0, 2, 1.0, 1.0).is_err());
        assert!(GridRr::unbiased_grr(1.0, 2, f64::NAN, 1.0).is_err());
    }
}

//! Privacy loss distributions (docs/ALGORITHMS.md §5.3).
//!
//! A [`DiscretePld`] is the law of the privacy loss `L = ln(P(o)/Q(o))`, `o ~ P`, on the grid
//! `{i·h}` plus a mass at `+∞`. `δ(ε) = P(L = ∞) + Σ_i p_i·(1 − e^{ε − i·h})₊`.
//!
//! **Discretization (pessimistic, "connect the dots").** A loss value `y` in the grid cell
//! `[i·h, (i+1)·h]` with P-mass `p` (and hence Q-mass `p·e^{−y}`) is split between the two grid
//! points, `a = p·expm1((i+1)h − y)/expm1(h)` at `i·h` and `p − a` at `(i+1)·h`. This preserves
//! both the P-mass and the Q-mass, so the discrete pair is a pair of probability measures from
//! which the original is obtained by post-processing (merging the two points back into `y`):
//! the discrete pair *dominates* the original, every δ(ε) is an upper bound, and composition of
//! dominating pairs dominates the composition (Doroshenko et al. 2022; Zhu, Dong, Wang 2022).
//! Unlike rounding every loss up (error up to `T·h` after `T` compositions), the error is
//! second order in `h`. For a continuous loss, the split of a whole cell uses the exact cell
//! masses: `a = (e^{(i+1)h}·Q(cell) − P(cell))/expm1(h)`.
//!
//! **Tails.** Mass below the lowest grid point is rounded **up** to it and mass above the
//! highest goes to `+∞` (both only increase δ). Composition is cyclic convolution by real FFT on
//! a window `[x_lo, x_hi]` chosen by Chernoff bounds on the composed loss, each tail at most
//! [`DEFAULT_TAIL_MASS`]: the upper-tail bound is added to the `+∞` mass, and everything outside
//! the window that the cyclic convolution wraps into it is *extra* mass (δ only grows). Negative
//! round-off of the FFT is clamped to 0.
//!
//! **Bounded memory.** If a window would need more than [`MAX_PMF_LEN`] points, the grid is
//! coarsened by factors of 2 (each odd point split exactly as above, again dominating), so
//! large-ε compositions stay within memory at a coarser, still pessimistic, grid.

use std::sync::Arc;

use realfft::RealFftPlanner;
use realfft::num_complex::Complex;

use crate::accountant::{Ledger, NeighbouringRelation, PrivacyAccountant};
use crate::error::{AccountingError, Result, check_delta, check_nonnegative, check_positive};
use crate::event::DpEvent;
use crate::numerics::NormPoint;
use crate::skellam::skellam_ln_pmf;

/// Default grid width `h` of the loss (dp_accounting's default is also 1e-4).
pub const DEFAULT_VALUE_DISCRETIZATION: f64 = 1e-4;
/// Probability mass allowed outside each end of a composition window (Chernoff bound).
pub const DEFAULT_TAIL_MASS: f64 = 1e-15;
/// Mass trimmed from each end of a single mechanism's PLD (lower end rounded up, upper end sent
/// to `+∞`).
pub const TRIM_MASS: f64 = 1e-30;
/// Largest pmf (and FFT) length; beyond it the grid is coarsened.
pub const MAX_PMF_LEN: usize = 1 << 21;

/// A discrete, pessimistic privacy-loss distribution: P-mass `pmf[j]` at loss
/// `(offset + j)·h`, plus `inf_mass` at `+∞`.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscretePld {
    h: f64,
    offset: i64,
    pmf: Vec<f64>,
    inf_mass: f64,
}

/// Accumulates masses on a fixed index range `[lo, hi]` with the connect-the-dots split.
struct Builder {
    h: f64,
    lo: i64,
    pmf: Vec<f64>,
    inf_mass: f64,
    expm1_h: f64,
}

impl Builder {
    fn new(h: f64, lo: i64, hi: i64) -> Self {
        Self {
            h,
            lo,
            pmf: vec![0.0; (hi - lo + 1) as usize],
            inf_mass: 0.0,
            expm1_h: libm::expm1(h),
        }
    }

    fn hi(&self) -> i64 {
        self.lo + self.pmf.len() as i64 - 1
    }

    /// An atom of P-mass `p` at loss `y` (its Q-mass is `p·e^{−y}`).
    fn atom(&mut self, y: f64, p: f64) {
        if p <= 0.0 {
            return;
        }
        if y == f64::INFINITY {
            self.inf_mass += p;
            return;
        }
        let i = (y / self.h).floor() as i64;
        if i < self.lo {
            self.pmf[0] += p; // rounded up
        } else if i >= self.hi() {
            if i == self.hi() && y == self.hi() as f64 * self.h {
                let k = self.pmf.len() - 1;
                self.pmf[k] += p;
            } else {
                self.inf_mass += p;
            }
        } else {
            let up = (i + 1) as f64 * self.h;
            let a = (p * libm::expm1(up - y) / self.expm1_h).clamp(0.0, p);
            let k = (i - self.lo) as usize;
            self.pmf[k] += a;
            self.pmf[k + 1] += p - a;
        }
    }

    /// The cell `(i·h, (i+1)·h]` with P-mass `p` and Q-mass `q`.
    fn cell(&mut self, i: i64, p: f64, q: f64) {
        self.cell_with(i, p, q, ((i + 1) as f64 * self.h).exp());
    }

    /// [`Self::cell`] given `exp_up = e^{(i+1)h}`.
    fn cell_with(&mut self, i: i64, p: f64, q: f64, exp_up: f64) {
        if p <= 0.0 {
            return;
        }
        // q·e^{(i+1)h}, in log space when e^{(i+1)h} overflows (losses above ~709).
        let qe = if exp_up.is_finite() {
            q * exp_up
        } else if q > 0.0 {
            (q.ln() + (i + 1) as f64 * self.h).exp()
        } else {
            0.0
        };
        let a = ((qe - p) / self.expm1_h).clamp(0.0, p);
        let k = (i - self.lo) as usize;
        self.pmf[k] += a;
        self.pmf[k + 1] += p - a;
    }

    fn finish(self) -> DiscretePld {
        DiscretePld {
            h: self.h,
            offset: self.lo,
            pmf: self.pmf,
            inf_mass: self.inf_mass,
        }
        .trimmed(TRIM_MASS)
    }
}

/// Builds the PLD of a continuous loss from exact masses of loss intervals, on the grid
/// covering `[loss_lo, loss_hi]`: `point(e)` precomputes whatever describes the loss value `e`
/// (once per grid point, and at `±∞`), and `cell_mass(a, c) = (P(a < L ≤ c), Q(a < L ≤ c))`.
fn from_cells<E>(
    h0: f64,
    loss_lo: f64,
    loss_hi: f64,
    point: impl Fn(f64) -> E,
    cell_mass: impl Fn(&E, &E) -> (f64, f64),
) -> DiscretePld {
    let h = fit_h(h0, loss_lo, loss_hi);
    let lo = (loss_lo / h).floor() as i64;
    let hi = ((loss_hi / h).ceil() as i64).max(lo + 1);
    let mut b = Builder::new(h, lo, hi);
    let mut prev = point(lo as f64 * h);
    b.pmf[0] += cell_mass(&point(f64::NEG_INFINITY), &prev).0;
    // e^{(i+1)h} by multiplication, re-anchored every 256 cells (drift ≤ 256 ulp).
    let step = h.exp();
    let mut exp_up = 0.0;
    for i in lo..hi {
        let next = point((i + 1) as f64 * h);
        let (p, q) = cell_mass(&prev, &next);
        exp_up = if (i - lo) % 256 == 0 {
            ((i + 1) as f64 * h).exp()
        } else {
            exp_up * step
        };
        b.cell_with(i, p, q, exp_up);
        prev = next;
    }
    b.inf_mass += cell_mass(&prev, &point(f64::INFINITY)).0;
    b.finish()
}

/// Builds the PLD of a discrete loss from its atoms `(loss, P-mass)`.
fn from_atoms(h0: f64, atoms: &[(f64, f64)], inf_mass: f64) -> DiscretePld {
    let finite = atoms.iter().filter(|a| a.0.is_finite() && a.1 > 0.0);
    let min = finite.clone().map(|a| a.0).fold(f64::INFINITY, f64::min);
    let max = finite
        .clone()
        .map(|a| a.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let h = if min <= max { fit_h(h0, min, max) } else { h0 };
    let lo = finite
        .clone()
        .map(|a| (a.0 / h).floor() as i64)
        .min()
        .unwrap_or(0);
    let hi = finite
        .map(|a| (a.0 / h).ceil() as i64)
        .max()
        .unwrap_or(0)
        .max(lo + 1);
    let mut b = Builder::new(h, lo, hi);
    for &(y, p) in atoms {
        b.atom(y, p);
    }
    b.inf_mass += inf_mass;
    b.finish()
}

impl DiscretePld {
    /// The PLD of a mechanism that reveals nothing (all mass at loss 0).
    pub fn identity(h: f64) -> Self {
        Self {
            h,
            offset: 0,
            pmf: vec![1.0],
            inf_mass: 0.0,
        }
    }

    /// All masses finite and non-negative.
    fn is_valid(&self) -> bool {
        self.inf_mass.is_finite()
            && self.inf_mass >= 0.0
            && self.pmf.iter().all(|p| p.is_finite() && *p >= 0.0)
    }

    /// Whether this is the PLD of a mechanism that reveals nothing.
    pub fn is_identity(&self) -> bool {
        self.offset == 0 && self.pmf == [1.0] && self.inf_mass == 0.0
    }

    /// Grid width.
    pub fn h(&self) -> f64 {
        self.h
    }

    /// Mass at `+∞`.
    pub fn inf_mass(&self) -> f64 {
        self.inf_mass
    }

    /// Number of grid points kept.
    pub fn len(&self) -> usize {
        self.pmf.len()
    }

    /// Whether no grid point is kept (never true for PLDs built by this crate).
    pub fn is_empty(&self) -> bool {
        self.pmf.is_empty()
    }

    /// `(loss, P-mass)` of every grid point.
    pub fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.pmf
            .iter()
            .enumerate()
            .map(|(j, &p)| ((self.offset + j as i64) as f64 * self.h, p))
    }

    /// Gaussian mechanism with `μ = Δ²/(2σ²)`: `L ~ N(μ, 2μ)` under P and `N(−μ, 2μ)` under Q.
    pub fn gaussian(mu: f64, h: f64) -> Result<Self> {
        check_positive("mu", mu)?;
        check_positive("value_discretization_interval", h)?;
        let s = (2.0 * mu).sqrt();
        Ok(from_cells(
            h,
            mu - 12.0 * s,
            mu + 12.0 * s,
            |e| (NormPoint::new((e - mu) / s), NormPoint::new((e + mu) / s)),
            |a, c| (a.0.diff_to(&c.0), a.1.diff_to(&c.1)),
        ))
    }

    /// Laplace mechanism, sensitivity 1, scale `b`: P = Lap(0, b), Q = Lap(1, b),
    /// `L(x) = (|x−1| − |x|)/b`: an atom `1/b` (P-mass ½), an atom `−1/b` (P-mass ½e^{−1/b}) and
    /// a continuous part `(1−2x)/b` for `x ∈ (0, 1)`.
    pub fn laplace(b: f64, h0: f64) -> Result<Self> {
        check_positive("scale", b)?;
        check_positive("value_discretization_interval", h0)?;
        let e = 1.0 / b;
        let h = fit_h(h0, -e, e);
        let lo = (-e / h).floor() as i64;
        let hi = ((e / h).ceil() as i64).max(lo + 1);
        let mut bld = Builder::new(h, lo, hi);
        bld.atom(e, 0.5);
        bld.atom(-e, 0.5 * (-e).exp());
        // Continuous part: L ∈ (a, c] ⟺ x ∈ [(1 − c·b)/2, (1 − a·b)/2), clipped to (0, 1).
        let p_int = |x1: f64, x2: f64| 0.5 * ((-x1 / b).exp() - (-x2 / b).exp());
        let q_int = |x1: f64, x2: f64| 0.5 * (((x2 - 1.0) / b).exp() - ((x1 - 1.0) / b).exp());
        for i in lo..hi {
            let (a, c) = (i as f64 * h, (i + 1) as f64 * h);
            let x1 = ((1.0 - c * b) / 2.0).clamp(0.0, 1.0);
            let x2 = ((1.0 - a * b) / 2.0).clamp(0.0, 1.0);
            if x2 > x1 {
                bld.cell(i, p_int(x1, x2), q_int(x1, x2));
            }
        }
        Ok(bld.finish())
    }

    /// Any pure ε-DP randomizer, via binary randomized response (the dominating pair for ε-DP):
    /// loss `ε` with P-mass `e^ε/(1+e^ε)`, loss `−ε` with P-mass `1/(1+e^ε)`.
    pub fn pure_dp(epsilon: f64, h: f64) -> Result<Self> {
        check_positive("epsilon", epsilon)?;
        check_positive("value_discretization_interval", h)?;
        let small = (-epsilon).exp();
        let p_low = small / (1.0 + small); // 1/(1+e^ε) without cancellation
        Ok(from_atoms(
            h,
            &[(epsilon, 1.0 / (1.0 + small)), (-epsilon, p_low)],
            0.0,
        ))
    }

    /// The PLD of local sampling with participation probability `q` ([`DpEvent::LocalSampled`]):
    /// the pair `(qP + (1−q)⊥, qQ + (1−q)⊥)` has loss `L` with probability `q` and loss 0 (the
    /// visible non-participation) with probability `1 − q`, so its PLD is `q·self + (1−q)·δ₀`.
    /// `δ(ε)` is linear in the PLD, so a pessimistic `self` gives a pessimistic result.
    pub fn locally_sampled(&self, q: f64) -> Self {
        let q = q.clamp(0.0, 1.0);
        let mut pmf: Vec<f64> = self.pmf.iter().map(|p| p * q).collect();
        let mut offset = self.offset;
        if offset > 0 {
            let mut grown = vec![0.0; offset as usize];
            grown.extend_from_slice(&pmf);
            pmf = grown;
            offset = 0;
        }
        let zero = (-offset) as usize;
        if zero >= pmf.len() {
            pmf.resize(zero + 1, 0.0);
        }
        pmf[zero] += 1.0 - q;
        Self {
            h: self.h,
            offset,
            pmf,
            inf_mass: self.inf_mass * q,
        }
    }

    /// Exact one-dimensional Skellam mechanism with integer sensitivity `Δ`:
    /// P = Δ + Sk(μ), Q = Sk(μ), atoms `L(k) = ln pmf(k−Δ) − ln pmf(k)` with P-mass
    /// `pmf(k−Δ)`; the pmf beyond ±(Δ + 40√μ + 60) (mass below 1e-300) goes to `+∞`.
    pub fn skellam(mu: f64, sensitivity: u64, h: f64) -> Result<Self> {
        check_positive("value_discretization_interval", h)?;
        if sensitivity == 0 {
            return Err(AccountingError::invalid(
                "sensitivity",
                0.0,
                "must be at least 1",
            ));
        }
        let d = sensitivity as i64;
        let kmax = (40.0 * mu.sqrt() + 60.0) as i64 + d;
        let lp = skellam_ln_pmf(mu, kmax as usize)?;
        let ln_p = |k: i64| lp[k.unsigned_abs() as usize];
        let mut atoms = Vec::with_capacity((2 * kmax + 1) as usize);
        let mut kept = 0.0;
        for k in (-kmax + d)..=kmax {
            let p = ln_p(k - d).exp();
            if p > 0.0 {
                atoms.push((ln_p(k - d) - ln_p(k), p));
                kept += p;
            }
        }
        Ok(from_atoms(h, &atoms, (1.0 - kept).max(0.0)))
    }

    /// The Poisson-subsampled Laplace mechanism (rate `q`, scale `b`, sensitivity 1), with
    /// `ℓ(x) = (|x| − |x−1|)/b` the base loss of Lap(1,b) against Lap(0,b).
    /// `remove == true`: P = (1−q)Lap(0,b) + qLap(1,b), Q = Lap(0,b), `L = ln(1−q+q·e^{ℓ(x)})`;
    /// `remove == false` (add): P = Lap(0,b), Q = the mixture, `L = −ln(1−q+q·e^{ℓ(x)})`.
    /// Two atoms (`x ≤ 0`, `x ≥ 1`) and a continuous part on `x ∈ (0, 1)` whose cell masses
    /// come from the exact Laplace CDFs.
    pub fn poisson_laplace(q: f64, b: f64, remove: bool, h0: f64) -> Result<Self> {
        crate::error::check_rate(q)?;
        check_positive("scale", b)?;
        check_positive("value_discretization_interval", h0)?;
        if q == 1.0 {
            return Self::laplace(b, h0);
        }
        let g = |l: f64| crate::numerics::log_add(libm::log1p(-q), q.ln() + l); // ln(1−q+q e^ℓ)
        let sign = if remove { 1.0 } else { -1.0 };
        let (l_left, l_right) = (sign * g(-1.0 / b), sign * g(1.0 / b)); // x ≤ 0, x ≥ 1
        let (lo_l, hi_l) = (l_left.min(l_right), l_left.max(l_right));
        let h = fit_h(h0, lo_l, hi_l);
        let lo = (lo_l / h).floor() as i64;
        let hi = ((hi_l / h).ceil() as i64).max(lo + 1);
        let mut bld = Builder::new(h, lo, hi);
        // Masses of x-intervals under Lap(0,b) and Lap(1,b), inside (0, 1).
        let p0 = |x1: f64, x2: f64| 0.5 * ((-x1 / b).exp() - (-x2 / b).exp());
        let p1 = |x1: f64, x2: f64| 0.5 * (((x2 - 1.0) / b).exp() - ((x1 - 1.0) / b).exp());
        let em = (-1.0 / b).exp();
        let (left0, left1, right0, right1) = (0.5, 0.5 * em, 0.5 * em, 0.5);
        let mix = |m0: f64, m1: f64| (1.0 - q) * m0 + q * m1;
        if remove {
            bld.atom(l_left, mix(left0, left1));
            bld.atom(l_right, mix(right0, right1));
        } else {
            bld.atom(l_left, left0);
            bld.atom(l_right, right0);
        }
        // x of a base loss ℓ ∈ [−1/b, 1/b]: x = (bℓ + 1)/2; ℓ of a loss L: ln((expm1(±L)+q)/q).
        let x_of = |l: f64| -> f64 {
            let v = libm::expm1(sign * l) + q;
            if v <= 0.0 {
                0.0
            } else {
                ((b * (v / q).ln() + 1.0) / 2.0).clamp(0.0, 1.0)
            }
        };
        for i in lo..hi {
            let (a, c) = (i as f64 * h, (i + 1) as f64 * h);
            let (xa, xc) = (x_of(a), x_of(c));
            let (x1, x2) = if remove { (xa, xc) } else { (xc, xa) };
            if x2 > x1 {
                let (m0, m1) = (p0(x1, x2), p1(x1, x2));
                if remove {
                    bld.cell(i, mix(m0, m1), m0);
                } else {
                    bld.cell(i, m0, mix(m0, m1));
                }
            }
        }
        Ok(bld.finish())
    }

    /// The Poisson-subsampled Gaussian (rate `q`, noise multiplier `z`, sensitivity 1).
    /// `remove == true`: P = (1−q)N(0,z²) + qN(1,z²), Q = N(0,z²),
    /// `L(x) = ln(1 − q + q·e^{(2x−1)/(2z²)})`, increasing in x, `L > ln(1−q)`.
    /// `remove == false` (add): P = N(0,z²), Q = the mixture, `L(x) = −ln(…)`, decreasing,
    /// `L < −ln(1−q)`. Cell masses from exact normal CDF differences of the x-intervals.
    pub fn poisson_gaussian(q: f64, z: f64, remove: bool, h: f64) -> Result<Self> {
        crate::error::check_rate(q)?;
        check_positive("noise_multiplier", z)?;
        check_positive("value_discretization_interval", h)?;
        if q == 1.0 {
            return Self::gaussian(1.0 / (2.0 * z * z), h);
        }
        let z2 = z * z;
        // x(L) solves e^{±L} = 1 − q + q·e^{(2x−1)/(2z²)}.
        let x_of = |l: f64| -> f64 {
            let v = libm::expm1(l) + q;
            if v <= 0.0 {
                f64::NEG_INFINITY
            } else if v == f64::INFINITY {
                f64::INFINITY
            } else {
                z2 * (v / q).ln() + 0.5
            }
        };
        let loss = |x: f64| -> f64 {
            let u = (2.0 * x - 1.0) / (2.0 * z2);
            crate::numerics::log_add(libm::log1p(-q), q.ln() + u)
        };
        // Each grid point carries the x-value's normal tails under N(0,z²) and N(1,z²).
        let point = |x: f64| (NormPoint::new(x / z), NormPoint::new((x - 1.0) / z));
        let masses = |a: &(NormPoint, NormPoint), c: &(NormPoint, NormPoint)| {
            let p0 = a.0.diff_to(&c.0);
            (p0, (1.0 - q) * p0 + q * a.1.diff_to(&c.1))
        };
        // x beyond 10z of either component has mass below Φ(−10) ≈ 7.6e-24 (rounded up at the
        // low end, sent to +∞ at the high end).
        if remove {
            let lo = loss(-10.0 * z);
            let hi = loss(1.0 + 10.0 * z);
            Ok(from_cells(
                h,
                lo,
                hi,
                |e| point(x_of(e)),
                |a, c| {
                    let (n, m) = masses(a, c);
                    (m, n)
                },
            ))
        } else {
            let lo = -loss(10.0 * z + 1.0);
            let hi = -libm::log1p(-q);
            // L ∈ (a, c] ⟺ x ∈ [x(−c), x(−a)): the x-order is reversed.
            Ok(from_cells(
                h,
                lo,
                hi,
                |e| point(x_of(-e)),
                |a, c| masses(c, a),
            ))
        }
    }

    /// Removes up to `cut` mass from each end: the lower end is moved up to the first kept
    /// point, the upper end goes to `+∞` (both pessimistic).
    fn trimmed(mut self, cut: f64) -> Self {
        let n = self.pmf.len();
        let mut lo = 0;
        let mut low_mass = 0.0;
        while lo + 1 < n && low_mass + self.pmf[lo] <= cut {
            low_mass += self.pmf[lo];
            lo += 1;
        }
        let mut hi = n - 1;
        let mut high_mass = 0.0;
        while hi > lo && high_mass + self.pmf[hi] <= cut {
            high_mass += self.pmf[hi];
            hi -= 1;
        }
        self.pmf[lo] += low_mass;
        self.inf_mass += high_mass;
        self.offset += lo as i64;
        self.pmf.truncate(hi + 1);
        self.pmf.drain(..lo);
        self
    }

    /// The same PLD on the grid `2h` (odd points split between their neighbours so that P- and
    /// Q-masses are preserved: still dominating).
    pub fn coarsened(&self) -> Self {
        let lo = self.offset.div_euclid(2);
        let hi = (self.offset + self.pmf.len() as i64).div_euclid(2) + 1;
        let mut b = Builder::new(2.0 * self.h, lo, hi);
        let frac_low = 1.0 / (1.0 + self.h.exp()); // expm1(h)/expm1(2h)
        for (j, &p) in self.pmf.iter().enumerate() {
            let s = self.offset + j as i64;
            if s.rem_euclid(2) == 0 {
                b.pmf[(s / 2 - lo) as usize] += p;
            } else {
                let k = (s.div_euclid(2) - lo) as usize;
                b.pmf[k] += p * frac_low;
                b.pmf[k + 1] += p * (1.0 - frac_low);
            }
        }
        b.inf_mass = self.inf_mass;
        b.finish()
    }

    /// Coarsens (by factors of 2) until the grid width is at least `h` (which must be
    /// `self.h·2^k`).
    fn coarsened_to(&self, h: f64) -> Self {
        let mut out = self.clone();
        while out.h < h * (1.0 - 1e-9) {
            out = out.coarsened();
        }
        out
    }

    /// Variance of the finite part's loss (as a sub-probability, normalized).
    fn variance(&self) -> f64 {
        let m0: f64 = self.pmf.iter().sum();
        if m0 <= 0.0 {
            return 0.0;
        }
        let m1: f64 = self.points().map(|(l, p)| l * p).sum::<f64>() / m0;
        self.points()
            .map(|(l, p)| (l - m1) * (l - m1) * p)
            .sum::<f64>()
            / m0
    }

    /// `(L_j, ln p_j)` of the points with positive mass (for moment generating functions).
    fn log_support(&self) -> Vec<(f64, f64)> {
        self.points()
            .filter(|p| p.1 > 0.0)
            .map(|(l, p)| (l, p.ln()))
            .collect()
    }

    /// ln of a finite part's moment generating function, `ln Σ p_j e^{t L_j}`, from
    /// [`Self::log_support`].
    fn log_mgf(support: &[(f64, f64)], t: f64) -> f64 {
        let m = support
            .iter()
            .map(|&(l, lp)| t * l + lp)
            .fold(f64::NEG_INFINITY, f64::max);
        if !m.is_finite() {
            return m;
        }
        // Terms below e^{-60} of the largest are skipped (they change the sum by less than
        // len·e^{-60} ≈ 1e-21 relative: the Chernoff bound moves by a negligible factor).
        m + support
            .iter()
            .map(|&(l, lp)| t * l + lp - m)
            .filter(|&v| v > -60.0)
            .map(f64::exp)
            .sum::<f64>()
            .ln()
    }

    /// Chernoff window `[x_lo, x_hi]` (in loss units) for a sum whose log-MGF is `k(t)`, with
    /// at most `tail` mass beyond each end; also clipped to `[min_sum, max_sum]`. `var` is the
    /// variance of the sum, used only to guess good values of `t`.
    fn window(
        k: impl Fn(f64) -> f64,
        tail: f64,
        min_sum: f64,
        max_sum: f64,
        var: f64,
        refine_above: f64,
    ) -> (f64, f64) {
        let lt = tail.ln();
        let mut hi = max_sum;
        let mut lo = min_sum;
        // Any t > 0 gives a valid bound. For a near-normal sum the best t is about
        // √(2 ln(1/tail)/var); try around it (factors of √2) plus a coarse fallback grid.
        let t_star = if var > 0.0 {
            (-2.0 * lt / var).sqrt()
        } else {
            1.0
        };
        let guesses = [-1i32, 0, 1].map(|j| t_star * 2f64.powf(j as f64 / 2.0));
        let fallback = [2f64.powi(-8), 2f64.powi(-4), 1.0, 16.0];
        let bound = |ts: &[f64], hi: &mut f64, lo: &mut f64| {
            for &t in ts {
                if !(t > 0.0 && t.is_finite()) {
                    continue;
                }
                let kp = k(t);
                if kp.is_finite() {
                    *hi = hi.min((kp - lt) / t);
                }
                let km = k(-t);
                if km.is_finite() {
                    *lo = lo.max((lt - km) / t);
                }
            }
        };
        bound(&guesses, &mut hi, &mut lo);
        // The coarse grid only if the guesses found nothing (e.g. a degenerate variance).
        if hi == max_sum || lo == min_sum {
            bound(&fallback, &mut hi, &mut lo);
        }
        // Wide window (heavy tails, e.g. the remove direction at small z): minimize each bound
        // over ln t by golden-section search (each is unimodal in t: the derivative of
        // (nK(t) − ln tail)/t has the sign of t·nK'(t) − nK(t) + ln tail, increasing in t).
        if hi - lo > refine_above {
            let golden = |f: &dyn Fn(f64) -> f64| -> f64 {
                let (mut a, mut b) = (t_star.ln() - 12.0, t_star.ln() + 6.0);
                let r = 0.618_033_988_749_895;
                let mut best = f64::INFINITY;
                // 16 steps shrink the 18-wide bracket in ln t to 0.008: ample for a window.
                for _ in 0..16 {
                    let (c, d) = (b - r * (b - a), a + r * (b - a));
                    let (fc, fd) = (f(c.exp()), f(d.exp()));
                    best = best.min(fc).min(fd);
                    if fc <= fd {
                        b = d;
                    } else {
                        a = c;
                    }
                }
                best
            };
            let f_hi = |t: f64| {
                let v = k(t);
                if v.is_finite() {
                    (v - lt) / t
                } else {
                    f64::INFINITY
                }
            };
            let f_lo = |t: f64| {
                let v = k(-t);
                if v.is_finite() {
                    -(lt - v) / t
                } else {
                    f64::INFINITY
                }
            };
            hi = hi.min(golden(&f_hi));
            lo = lo.max(-golden(&f_lo));
        }
        (lo.min(hi), hi)
    }

    fn min_loss(&self) -> f64 {
        self.offset as f64 * self.h
    }

    fn max_loss(&self) -> f64 {
        (self.offset + self.pmf.len() as i64 - 1) as f64 * self.h
    }

    /// The `n`-fold composition (`n ≥ 1`), by one real FFT, a pointwise `n`-th power and one
    /// inverse FFT on a Chernoff window with at most `tail` mass beyond each end.
    pub fn self_composed(&self, n: u64, tail: f64) -> Self {
        if n == 0 {
            return Self::identity(self.h);
        }
        if n == 1 {
            return self.clone();
        }
        let nf = n as f64;
        let inf_mass = -libm::expm1(nf * libm::log1p(-self.inf_mass.min(1.0)));
        let support = self.log_support();
        let (x_lo, x_hi) = Self::window(
            |t| nf * Self::log_mgf(&support, t),
            tail,
            nf * self.min_loss(),
            nf * self.max_loss(),
            nf * self.variance(),
            (MAX_PMF_LEN / 4) as f64 * self.h,
        );
        let w_lo = (x_lo / self.h).floor() as i64;
        let w_hi = (x_hi / self.h).ceil() as i64;
        let width = (w_hi - w_lo + 1) as usize;
        if width > MAX_PMF_LEN {
            return self.coarsened().self_composed(n, tail);
        }
        let len = fft_len(width.max(2));
        let shift = self.offset * n as i64; // absolute index of Σ j = 0
        let spec = cpow_all(forward(&fold(&self.pmf, len)), n);
        let cyc = inverse(spec, len);
        let mut upper = 0.0;
        // Upper-tail mass beyond x_hi is at most `tail` by construction of the window (unless
        // the window reached the maximum possible sum, where it is 0).
        if w_hi as f64 * self.h < nf * self.max_loss() {
            upper = tail;
        }
        self.unfold(cyc, len, w_lo, width, shift, inf_mass + upper)
    }

    /// Composition with another PLD (grids are coarsened to the wider of the two).
    pub fn composed(&self, other: &Self, tail: f64) -> Self {
        if self.is_identity() {
            return other.coarsened_to(self.h);
        }
        if other.is_identity() {
            return self.coarsened_to(other.h);
        }
        let h = self.h.max(other.h);
        let (a, b) = (self.coarsened_to(h), other.coarsened_to(h));
        let inf_mass = 1.0 - (1.0 - a.inf_mass) * (1.0 - b.inf_mass);
        let (sa, sb) = (a.log_support(), b.log_support());
        let (x_lo, x_hi) = Self::window(
            |t| Self::log_mgf(&sa, t) + Self::log_mgf(&sb, t),
            tail,
            a.min_loss() + b.min_loss(),
            a.max_loss() + b.max_loss(),
            a.variance() + b.variance(),
            (MAX_PMF_LEN / 4) as f64 * h,
        );
        let w_lo = (x_lo / h).floor() as i64;
        let w_hi = (x_hi / h).ceil() as i64;
        let width = (w_hi - w_lo + 1) as usize;
        if width > MAX_PMF_LEN {
            return a.coarsened().composed(&b.coarsened(), tail);
        }
        let len = fft_len(width.max(2));
        let sa = forward(&fold(&a.pmf, len));
        let sb = forward(&fold(&b.pmf, len));
        let spec: Vec<Complex<f64>> = sa.into_iter().zip(sb).map(|(x, y)| x * y).collect();
        let cyc = inverse(spec, len);
        let upper = if (w_hi as f64) * h < a.max_loss() + b.max_loss() {
            tail
        } else {
            0.0
        };
        a.unfold(cyc, len, w_lo, width, a.offset + b.offset, inf_mass + upper)
    }

    /// Reads the window `[w_lo, w_lo + width)` (absolute indices) out of a cyclic result whose
    /// index 0 is absolute index `shift`.
    fn unfold(
        &self,
        cyc: Vec<f64>,
        len: usize,
        w_lo: i64,
        width: usize,
        shift: i64,
        inf_mass: f64,
    ) -> Self {
        let l = len as i64;
        let pmf: Vec<f64> = (0..width as i64)
            .map(|i| cyc[(w_lo + i - shift).rem_euclid(l) as usize].max(0.0))
            .collect();
        Self {
            h: self.h,
            offset: w_lo,
            pmf,
            inf_mass: inf_mass.min(1.0),
        }
        .trimmed(TRIM_MASS)
    }

    /// `δ(ε) = P(L = ∞) + Σ_i p_i (1 − e^{ε − L_i})₊`, capped at 1.
    pub fn get_delta(&self, epsilon: f64) -> f64 {
        let s: f64 = self
            .points()
            .filter(|&(l, _)| l > epsilon)
            .map(|(l, p)| -p * libm::expm1(epsilon - l))
            .sum();
        (self.inf_mass + s).min(1.0)
    }

    /// The smallest `ε ≥ 0` with `δ(ε) ≤ delta` (exact for this discrete PLD; `+∞` if the mass
    /// at `+∞` alone exceeds `delta`).
    pub fn get_epsilon(&self, delta: f64) -> f64 {
        if self.inf_mass >= delta {
            return f64::INFINITY;
        }
        let n = self.pmf.len();
        // Scan down: at point e_i, δ(e_i) = inf + S1 − S2 with S1 = Σ_{j>i} p_j and
        // S2 = Σ_{j>i} p_j e^{e_i − e_j} (kept relative to the current point).
        let mut s1 = 0.0;
        let mut s2 = 0.0;
        let decay = (-self.h).exp();
        for i in (0..n).rev() {
            if i + 1 < n {
                s2 = (s2 + self.pmf[i + 1]) * decay;
                s1 += self.pmf[i + 1];
            }
            let d = self.inf_mass + s1 - s2;
            if d > delta {
                // δ(ε) = inf + S1 − S2·e^{ε − e_i} on (e_i, e_{i+1}].
                let e_i = (self.offset + i as i64) as f64 * self.h;
                return (e_i + ((self.inf_mass + s1 - delta) / s2).ln()).max(0.0);
            }
        }
        // Below the lowest point: δ(ε) = inf + S1 − S2·e^{ε − e_0} with all points included.
        s2 = (s2 + self.pmf[0]) * 1.0;
        s1 += self.pmf[0];
        let e0 = self.offset as f64 * self.h;
        if s2 <= 0.0 {
            return 0.0;
        }
        (e0 + ((self.inf_mass + s1 - delta) / s2).ln()).max(0.0)
    }
}

/// The grid width `h0·2^k` (smallest `k ≥ 0`) whose grid over `[lo, hi]` has at most
/// [`MAX_PMF_LEN`] points: bounded memory for very large losses.
fn fit_h(h0: f64, lo: f64, hi: f64) -> f64 {
    let mut h = h0;
    while (hi - lo) / h + 2.0 > MAX_PMF_LEN as f64 {
        h *= 2.0;
    }
    h
}

/// Smallest `2^a` or `3·2^a` at least `n`.
fn fft_len(n: usize) -> usize {
    let p = n.next_power_of_two();
    if p / 4 * 3 >= n { p / 4 * 3 } else { p }
}

fn fold(p: &[f64], len: usize) -> Vec<f64> {
    let mut out = vec![0.0; len];
    for (j, &v) in p.iter().enumerate() {
        out[j % len] += v;
    }
    out
}

thread_local! {
    static PLANNER: std::cell::RefCell<RealFftPlanner<f64>> = std::cell::RefCell::new(RealFftPlanner::new());
}

fn forward(x: &[f64]) -> Vec<Complex<f64>> {
    let plan: Arc<dyn realfft::RealToComplex<f64>> =
        PLANNER.with(|p| p.borrow_mut().plan_fft_forward(x.len()));
    let mut input = x.to_vec();
    let mut out = plan.make_output_vec();
    plan.process(&mut input, &mut out)
        .expect("lengths from the plan");
    out
}

fn inverse(mut spec: Vec<Complex<f64>>, len: usize) -> Vec<f64> {
    let plan: Arc<dyn realfft::ComplexToReal<f64>> =
        PLANNER.with(|p| p.borrow_mut().plan_fft_inverse(len));
    // The imaginary parts of the DC (and Nyquist) bins must be exactly 0 for realfft.
    spec[0].im = 0.0;
    if len.is_multiple_of(2) {
        let last = spec.len() - 1;
        spec[last].im = 0.0;
    }
    let mut out = plan.make_output_vec();
    plan.process(&mut spec, &mut out)
        .expect("lengths from the plan");
    let scale = 1.0 / len as f64;
    out.iter_mut().for_each(|v| *v *= scale);
    out
}

/// `c^n` for every bin by binary exponentiation (about `2·log₂ n` complex products per bin;
/// relative error of order `n·2⁻⁵³`, like the polar form, and `|c| ≤ 1` so nothing overflows).
/// The loop over bits is outside the loop over bins so that the inner loops vectorize.
fn cpow_all(mut c: Vec<Complex<f64>>, mut n: u64) -> Vec<Complex<f64>> {
    let mut acc = vec![Complex::new(1.0, 0.0); c.len()];
    while n > 0 {
        if n & 1 == 1 {
            acc.iter_mut().zip(&c).for_each(|(a, b)| *a *= *b);
        }
        n >>= 1;
        if n > 0 {
            c.iter_mut().for_each(|b| *b = *b * *b);
        }
    }
    acc
}

/// δ of the Gaussian PLD with parameter μ (sum over composed Gaussians of `1/(2z²)`), exactly:
/// `δ(ε) = Φ((μ − ε)/√(2μ)) − e^ε·Φ((−μ − ε)/√(2μ))`.
///
/// This is the analytic-Gaussian privacy profile of Balle & Wang 2018 (docs/ALGORITHMS.md §2.5)
/// in its μ form: with `μ = Δ²/(2σ²)`, i.e. `σ = 1` and `Δ = √(2μ)`, `Δ/(2σ) − εσ/Δ =
/// (μ − ε)/√(2μ)`; it is computed by [`privfed_mechanisms::gaussian::gaussian_delta`], the one
/// home of the formula. `μ = 0` (no Gaussian) gives 0; NaN for an invalid μ or ε.
pub fn gaussian_delta(mu: f64, epsilon: f64) -> f64 {
    if mu == 0.0 && epsilon >= 0.0 {
        return 0.0;
    }
    privfed_mechanisms::gaussian::gaussian_delta(1.0, (2.0 * mu).sqrt(), epsilon)
}

/// The smallest ε ≥ 0 with [`gaussian_delta`]`(μ, ε) ≤ δ`: the inverse of the profile by
/// [`privfed_mechanisms::gaussian::gaussian_epsilon`] at `σ = 1`, `Δ = √(2μ)` (bisection to a
/// relative width of `4·2^{−52}`, rounded up). `μ = 0` gives 0 and `μ = +∞` (no noise) `+∞`;
/// NaN for an invalid μ or δ.
pub fn gaussian_epsilon(mu: f64, delta: f64) -> f64 {
    if mu == 0.0 {
        return 0.0;
    }
    if mu == f64::INFINITY {
        return f64::INFINITY;
    }
    privfed_mechanisms::gaussian::gaussian_epsilon(1.0, (2.0 * mu).sqrt(), delta)
        .unwrap_or(f64::NAN)
}

const SKELLAM_1D: &str =
    "the exact PLD is one-dimensional: needs l1_sensitivity == l2_sensitivity, an integer";
const POISSON_KINDS: &str =
    "Poisson sampling is supported for the Gaussian and the Laplace only (use the RDP accountant)";
const LOCAL_KINDS: &str = "local sampling is supported for the Gaussian, Laplace, pure-DP and one-dimensional Skellam events only (use the RDP accountant)";
const RDP_CURVE: &str = "an RDP curve does not determine a PLD";

/// The sensitivity of a Skellam event the exact (one-dimensional) PLD handles: `l1 == l2`, an
/// integer up to 10⁶.
fn skellam_dim(l1: f64, l2: f64) -> Option<u64> {
    (l1 == l2 && l1.fract() == 0.0 && l1 <= 1e6).then_some(l1 as u64)
}

/// `outer · inner` repetitions, or an error if the product overflows `u64`.
fn total_count(outer: u64, inner: u64) -> Result<u64> {
    outer.checked_mul(inner).ok_or_else(|| {
        AccountingError::invalid(
            "count",
            inner as f64,
            "total composition count overflows u64",
        )
    })
}

/// PLD accountant: keeps a discrete PLD for each neighbouring direction (remove, add) and the
/// total Gaussian parameter μ (Gaussians compose exactly: `N(μ₁,2μ₁) * N(μ₂,2μ₂) = N(μ₁+μ₂, …)`,
/// so they are discretized once, at query time). Reports the worse of the two directions.
///
/// Supports Gaussian, Laplace, pure ε-DP (as randomized response), one-dimensional Skellam
/// (`l1_sensitivity == l2_sensitivity`, an integer), Poisson-sampled Gaussian and Laplace, compositions.
/// Rejects Poisson sampling of anything else and user RDP curves with
/// [`AccountingError::UnsupportedEvent`].
#[derive(Debug, Clone)]
pub struct PldAccountant {
    h: f64,
    tail: f64,
    gaussian_mu: f64,
    remove: DiscretePld,
    add: DiscretePld,
    ledger: Ledger,
}

impl Default for PldAccountant {
    fn default() -> Self {
        Self::new()
    }
}

impl PldAccountant {
    /// An empty accountant with grid width [`DEFAULT_VALUE_DISCRETIZATION`].
    pub fn new() -> Self {
        Self::with_discretization(DEFAULT_VALUE_DISCRETIZATION).expect("valid default")
    }

    /// An empty accountant with grid width `h` (> 0; smaller is tighter and slower).
    pub fn with_discretization(h: f64) -> Result<Self> {
        crate::error::check_positive("value_discretization_interval", h)?;
        Ok(Self {
            h,
            tail: DEFAULT_TAIL_MASS,
            gaussian_mu: 0.0,
            remove: DiscretePld::identity(h),
            add: DiscretePld::identity(h),
            ledger: Ledger::new(),
        })
    }

    /// The current grid width (larger than requested if memory bounds forced coarsening).
    pub fn discretization(&self) -> f64 {
        self.remove.h.max(self.add.h)
    }

    /// Composes `event` (validated first; on error the accountant is unchanged).
    pub fn compose(&mut self, event: &DpEvent) -> Result<()> {
        event.validate()?;
        Self::check_supported(event, 1)?;
        let mut next = self.clone();
        next.compose_inner(event, 1)?;
        next.ledger.record(event);
        *self = next;
        Ok(())
    }

    /// The events composed so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// `Ok` if a valid `event` repeated `count` times is of a kind this accountant composes
    /// (the structure [`PldAccountant::compose`] walks, without discretizing anything).
    fn check_supported(event: &DpEvent, count: u64) -> Result<()> {
        match event {
            DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } | DpEvent::PureDp { .. } => Ok(()),
            DpEvent::Skellam {
                l1_sensitivity,
                l2_sensitivity,
                ..
            } => match skellam_dim(*l1_sensitivity, *l2_sensitivity) {
                Some(_) => Ok(()),
                None => Err(Self::unsupported(event, SKELLAM_1D)),
            },
            DpEvent::PoissonSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return Self::check_supported(inner, count);
                }
                match **inner {
                    DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } => Ok(()),
                    _ => Err(Self::unsupported(event, POISSON_KINDS)),
                }
            }
            DpEvent::LocalSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return Self::check_supported(inner, count);
                }
                match **inner {
                    DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } | DpEvent::PureDp { .. } => {
                        Ok(())
                    }
                    DpEvent::Skellam {
                        l1_sensitivity,
                        l2_sensitivity,
                        ..
                    } if skellam_dim(l1_sensitivity, l2_sensitivity).is_some() => Ok(()),
                    _ => Err(Self::unsupported(event, LOCAL_KINDS)),
                }
            }
            DpEvent::Composed { events } => events
                .iter()
                .try_for_each(|e| Self::check_supported(e, count)),
            DpEvent::SelfComposed { event: e, count: c } => {
                let total = total_count(count, *c)?;
                if total == 0 {
                    return Ok(());
                }
                Self::check_supported(e, total)
            }
            DpEvent::RdpCurve { .. } => Err(Self::unsupported(event, RDP_CURVE)),
        }
    }

    fn unsupported(event: &DpEvent, reason: &str) -> AccountingError {
        AccountingError::UnsupportedEvent {
            accountant: "pld",
            event: event.name(),
            reason: reason.into(),
        }
    }

    fn add_pair(
        &mut self,
        remove: DiscretePld,
        add: Option<DiscretePld>,
        count: u64,
    ) -> Result<()> {
        for p in std::iter::once(&remove).chain(add.as_ref()) {
            if !p.is_valid() {
                return Err(AccountingError::Numerical(
                    "non-finite or negative mass in a discretized PLD".into(),
                ));
            }
        }
        let r = remove.self_composed(count, self.tail);
        let symmetric_so_far = self.remove == self.add;
        match add {
            Some(a) => {
                let a = a.self_composed(count, self.tail);
                self.remove = self.remove.composed(&r, self.tail);
                self.add = self.add.composed(&a, self.tail);
            }
            None if symmetric_so_far => {
                self.remove = self.remove.composed(&r, self.tail);
                self.add = self.remove.clone();
            }
            None => {
                self.remove = self.remove.composed(&r, self.tail);
                self.add = self.add.composed(&r, self.tail);
            }
        }
        Ok(())
    }

    fn compose_inner(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let h = self.h;
        match event {
            DpEvent::Gaussian { noise_multiplier } => {
                self.gaussian_mu += count as f64 / (2.0 * noise_multiplier * noise_multiplier);
            }
            DpEvent::Laplace { scale } => {
                self.add_pair(DiscretePld::laplace(*scale, h)?, None, count)?
            }
            DpEvent::PureDp { epsilon } => {
                self.add_pair(DiscretePld::pure_dp(*epsilon, h)?, None, count)?
            }
            DpEvent::Skellam {
                mu,
                l1_sensitivity,
                l2_sensitivity,
            } => {
                let d = skellam_dim(*l1_sensitivity, *l2_sensitivity)
                    .ok_or_else(|| Self::unsupported(event, SKELLAM_1D))?;
                // Symmetric: Sk(μ) vs Δ+Sk(μ) and the reverse have the same PLD.
                self.add_pair(DiscretePld::skellam(*mu, d, h)?, None, count)?
            }
            DpEvent::PoissonSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return self.compose_inner(inner, count);
                }
                match **inner {
                    DpEvent::Gaussian { noise_multiplier } => self.add_pair(
                        DiscretePld::poisson_gaussian(*rate, noise_multiplier, true, h)?,
                        Some(DiscretePld::poisson_gaussian(
                            *rate,
                            noise_multiplier,
                            false,
                            h,
                        )?),
                        count,
                    )?,
                    DpEvent::Laplace { scale } => self.add_pair(
                        DiscretePld::poisson_laplace(*rate, scale, true, h)?,
                        Some(DiscretePld::poisson_laplace(*rate, scale, false, h)?),
                        count,
                    )?,
                    _ => return Err(Self::unsupported(event, POISSON_KINDS)),
                }
            }
            DpEvent::LocalSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return self.compose_inner(inner, count);
                }
                // Every supported inner pair is symmetric (its reversed pair has the same PLD).
                let base = match **inner {
                    DpEvent::Gaussian { noise_multiplier } => {
                        DiscretePld::gaussian(1.0 / (2.0 * noise_multiplier * noise_multiplier), h)?
                    }
                    DpEvent::Laplace { scale } => DiscretePld::laplace(scale, h)?,
                    DpEvent::PureDp { epsilon } => DiscretePld::pure_dp(epsilon, h)?,
                    DpEvent::Skellam {
                        mu,
                        l1_sensitivity,
                        l2_sensitivity,
                    } => match skellam_dim(l1_sensitivity, l2_sensitivity) {
                        Some(d) => DiscretePld::skellam(mu, d, h)?,
                        None => return Err(Self::unsupported(event, LOCAL_KINDS)),
                    },
                    _ => return Err(Self::unsupported(event, LOCAL_KINDS)),
                };
                self.add_pair(base.locally_sampled(*rate), None, count)?
            }
            DpEvent::Composed { events } => {
                for e in events {
                    self.compose_inner(e, count)?;
                }
            }
            DpEvent::SelfComposed { event: e, count: c } => {
                self.compose_inner(e, total_count(count, *c)?)?;
            }
            DpEvent::RdpCurve { .. } => return Err(Self::unsupported(event, RDP_CURVE)),
        }
        Ok(())
    }

    /// The final PLDs (remove, add), with the Gaussian part folded in; `None` if only
    /// Gaussians were composed (answered exactly by [`gaussian_delta`]).
    fn finals(&self) -> Result<Option<(DiscretePld, DiscretePld)>> {
        if self.remove.is_identity() && self.add.is_identity() {
            return Ok(None);
        }
        if self.gaussian_mu > 0.0 {
            let g = DiscretePld::gaussian(self.gaussian_mu, self.h)?;
            Ok(Some((
                self.remove.composed(&g, self.tail),
                self.add.composed(&g, self.tail),
            )))
        } else {
            Ok(Some((self.remove.clone(), self.add.clone())))
        }
    }

    /// ε at `delta` ∈ (0,1): the larger of the two directions (`+∞` if the mass at `+∞`
    /// exceeds δ).
    pub fn get_epsilon(&self, delta: f64) -> Result<f64> {
        check_delta(delta)?;
        if !self.gaussian_mu.is_finite() {
            return Ok(f64::INFINITY); // a Gaussian with (numerically) no noise
        }
        Ok(match self.finals()? {
            None if self.gaussian_mu == 0.0 => 0.0,
            None => gaussian_epsilon(self.gaussian_mu, delta),
            Some((r, a)) => r.get_epsilon(delta).max(a.get_epsilon(delta)),
        })
    }

    /// δ at `epsilon` ≥ 0: the larger of the two directions.
    pub fn get_delta(&self, epsilon: f64) -> Result<f64> {
        check_nonnegative("epsilon", epsilon)?;
        if !self.gaussian_mu.is_finite() {
            return Ok(1.0);
        }
        Ok(match self.finals()? {
            None if self.gaussian_mu == 0.0 => 0.0,
            None => gaussian_delta(self.gaussian_mu, epsilon),
            Some((r, a)) => r.get_delta(epsilon).max(a.get_delta(epsilon)),
        })
    }
}

/// Neighbouring relation add/remove-one: both directions (remove, add) are tracked and the
/// worse is reported. Supports the events listed on [`PldAccountant`].
impl PrivacyAccountant for PldAccountant {
    fn name(&self) -> &'static str {
        "pld"
    }

    fn neighbouring_relation(&self) -> NeighbouringRelation {
        NeighbouringRelation::AddOrRemoveOne
    }

    fn supports(&self, event: &DpEvent) -> bool {
        event.validate().is_ok() && Self::check_supported(event, 1).is_ok()
    }

    fn compose(&mut self, event: &DpEvent) -> Result<()> {
        PldAccountant::compose(self, event)
    }

    fn get_epsilon(&self, delta: f64) -> Result<f64> {
        PldAccountant::get_epsilon(self, delta)
    }

    fn get_delta(&self, epsilon: f64) -> Result<f64> {
        PldAccountant::get_delta(self, epsilon)
    }

    fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(p: &DiscretePld) -> f64 {
        p.pmf.iter().sum::<f64>() + p.inf_mass
    }

    /// Q-mass `Σ p e^{−L}` of the finite part.
    fn q_mass(p: &DiscretePld) -> f64 {
        p.points().map(|(l, m)| m * (-l).exp()).sum()
    }

    #[test]
    fn discretization_preserves_both_masses() {
        let h = 1e-3;
        for p in [
            DiscretePld::gaussian(0.5, h).unwrap(),
            DiscretePld::laplace(1.3, h).unwrap(),
            DiscretePld::pure_dp(1.234_567, h).unwrap(),
            DiscretePld::poisson_gaussian(0.1, 1.0, true, h).unwrap(),
            DiscretePld::poisson_gaussian(0.1, 1.0, false, h).unwrap(),
            DiscretePld::poisson_laplace(0.1, 1.5, true, h).unwrap(),
            DiscretePld::poisson_laplace(0.1, 1.5, false, h).unwrap(),
            DiscretePld::skellam(5.0, 2, h).unwrap(),
        ] {
            assert!((total(&p) - 1.0).abs() < 1e-10, "P mass {}", total(&p));
            // Q-mass ≤ 1 (trimming only removes Q mass) and close to 1.
            let qm = q_mass(&p);
            assert!(qm <= 1.0 + 1e-10 && qm > 1.0 - 1e-8, "Q mass {qm}");
        }
    }

    #[test]
    fn gaussian_pld_matches_closed_form_and_is_pessimistic() {
        // Single Gaussian and 100-fold composition: discrete δ ≥ exact δ, and close.
        for (mu, n) in [(0.5, 1u64), (0.005, 100), (2.0, 1)] {
            let p = DiscretePld::gaussian(mu, 1e-4)
                .unwrap()
                .self_composed(n, DEFAULT_TAIL_MASS);
            for eps in [0.0, 0.5, 1.0, 2.0, 4.0] {
                let exact = gaussian_delta(mu * n as f64, eps);
                let disc = p.get_delta(eps);
                assert!(
                    disc >= exact * (1.0 - 1e-9) - 1e-15,
                    "μ={mu} n={n} ε={eps}: {disc} < {exact}"
                );
                assert!(
                    disc <= exact * 1.01 + 1e-14,
                    "μ={mu} n={n} ε={eps}: {disc} ≫ {exact}"
                );
            }
        }
    }

    #[test]
    fn epsilon_and_delta_are_inverse() {
        let p = DiscretePld::poisson_gaussian(0.05, 1.0, true, 1e-4)
            .unwrap()
            .self_composed(500, DEFAULT_TAIL_MASS);
        for delta in [1e-3, 1e-5, 1e-8] {
            let e = p.get_epsilon(delta);
            let d = p.get_delta(e);
            assert!((d / delta - 1.0).abs() < 1e-6, "δ={delta}: ε={e}, δ(ε)={d}");
        }
    }

    #[test]
    fn pure_dp_single_use_is_exact() {
        // One ε-DP randomized response: δ(ε') = (e^ε − e^{ε'})/(1+e^ε) for ε' < ε, ε at δ→0 is ε.
        let eps = 1.0;
        let p = DiscretePld::pure_dp(eps, 1e-4).unwrap();
        let want = (eps.exp() - 0.5f64.exp()) / (1.0 + eps.exp());
        assert!(
            (p.get_delta(0.5) / want - 1.0).abs() < 1e-3,
            "{} {want}",
            p.get_delta(0.5)
        );
        let e = p.get_epsilon(1e-12);
        assert!(e >= eps - 1e-9 && e < eps + 2e-4, "{e}");
    }

    /// `T` uses of a locally sampled ε-DP randomizer: the exact δ(ε') by enumeration (k of the
    /// `T` take part, j of those draw the "+ε" letter of randomized response; loss `(2j − k)ε`)
    /// against the accountant; the discretization may only add (pessimistic) and by little.
    #[test]
    fn local_sampling_of_pure_dp_matches_enumeration() {
        let ln_choose =
            |n: u64, k: u64| -> f64 { (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum() };
        for (eps, q, t) in [(1.0f64, 0.1f64, 1u64), (2.0, 0.25, 10), (0.5, 0.5, 40)] {
            let p = eps.exp() / (1.0 + eps.exp());
            let mut acc = PldAccountant::new();
            acc.compose(&DpEvent::SelfComposed {
                event: Box::new(DpEvent::LocalSampled {
                    rate: q,
                    event: Box::new(DpEvent::PureDp { epsilon: eps }),
                }),
                count: t,
            })
            .unwrap();
            for target in [0.0, 0.3 * eps, 0.9 * eps, 2.0 * eps] {
                let mut exact = 0.0;
                for k in 0..=t {
                    let wk =
                        (ln_choose(t, k) + k as f64 * q.ln() + (t - k) as f64 * (1.0 - q).ln())
                            .exp();
                    for j in 0..=k {
                        let wj =
                            (ln_choose(k, j) + j as f64 * p.ln() + (k - j) as f64 * (1.0 - p).ln())
                                .exp();
                        let l = (2.0 * j as f64 - k as f64) * eps;
                        exact += wk * wj * (1.0 - (target - l).exp()).max(0.0);
                    }
                }
                let got = acc.get_delta(target).unwrap();
                assert!(
                    got >= exact - 1e-12 && got <= exact * 1.002 + 1e-9,
                    "ε={eps} q={q} T={t} ε'={target}: {got} vs exact {exact}"
                );
            }
        }
        // One use: no amplification of the pure ε (the sample is visible), unlike
        // PoissonSampled's ln(1 + q(e^ε − 1)).
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::LocalSampled {
            rate: 0.1,
            event: Box::new(DpEvent::PureDp { epsilon: 2.0 }),
        })
        .unwrap();
        let e = acc.get_epsilon(1e-12).unwrap();
        assert!(e > 2.0 - 1e-3 && e < 2.0 + 2e-4, "{e}");
        // The mixture keeps both masses and puts 1 − q at loss 0.
        let m = DiscretePld::laplace(1.0, 1e-3)
            .unwrap()
            .locally_sampled(0.3);
        assert!((total(&m) - 1.0).abs() < 1e-12);
        assert!(q_mass(&m) <= 1.0 + 1e-9);
        let far = DiscretePld::pure_dp(3.0, 1e-3).unwrap();
        assert!(far.offset < 0, "RR has a negative atom");
        let shifted = DiscretePld {
            offset: 5,
            ..DiscretePld::identity(1e-3)
        };
        let s = shifted.locally_sampled(0.5);
        assert_eq!(s.offset, 0);
        assert_eq!(s.pmf[0], 0.5);
        assert_eq!(s.pmf[5], 0.5);
    }

    #[test]
    fn coarsening_is_pessimistic() {
        let p = DiscretePld::laplace(1.0, 1e-3)
            .unwrap()
            .self_composed(10, DEFAULT_TAIL_MASS);
        let c = p.coarsened().coarsened();
        for eps in [0.5, 1.0, 3.0] {
            assert!(c.get_delta(eps) >= p.get_delta(eps) * (1.0 - 1e-12));
        }
    }

    #[test]
    fn accountant_rejects_unsupported_events() {
        let mut acc = PldAccountant::new();
        let e = DpEvent::PoissonSampled {
            rate: 0.1,
            event: Box::new(DpEvent::PureDp { epsilon: 1.0 }),
        };
        match acc.compose(&e) {
            Err(AccountingError::UnsupportedEvent {
                accountant, event, ..
            }) => {
                assert_eq!(accountant, "pld");
                assert_eq!(event, "PoissonSampled(PureDp)");
            }
            other => panic!("{other:?}"),
        }
        let local = DpEvent::LocalSampled {
            rate: 0.1,
            event: Box::new(DpEvent::Composed {
                events: vec![DpEvent::PureDp { epsilon: 1.0 }],
            }),
        };
        assert!(matches!(
            acc.compose(&local),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        let curve = DpEvent::RdpCurve {
            orders: vec![2.0],
            epsilons: vec![1.0],
        };
        assert!(matches!(
            acc.compose(&curve),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        let sk = DpEvent::Skellam {
            mu: 10.0,
            l1_sensitivity: 3.0,
            l2_sensitivity: 2.0,
        };
        assert!(matches!(
            acc.compose(&sk),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        // The failed compositions left the accountant empty.
        assert_eq!(acc.get_epsilon(1e-5).unwrap(), 0.0);
        assert!(acc.get_epsilon(0.0).is_err());
        assert!(acc.get_delta(f64::NAN).is_err());
    }

    #[test]
    fn large_epsilon_stays_bounded_and_pessimistic() {
        // 5000 uses of a 5-DP randomized response: the composed loss is 5·(2K − n) with
        // K ~ Bin(n, e^5/(1+e^5)); its Chernoff window at h = 1e-4 needs > MAX_PMF_LEN points, so
        // the grid is coarsened. Compare with the exact δ from the binomial pmf.
        let (e1, n) = (5.0f64, 5000u64);
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::SelfComposed {
            event: Box::new(DpEvent::PureDp { epsilon: e1 }),
            count: n,
        })
        .unwrap();
        assert!(acc.discretization() > 1e-4, "not coarsened");
        let p = 1.0 / (1.0 + (-e1).exp());
        let nf = n as f64;
        let exact_delta = |eps: f64| -> f64 {
            (0..=n)
                .map(|k| {
                    let kf = k as f64;
                    let l = e1 * (2.0 * kf - nf);
                    let lp = libm::lgamma(nf + 1.0)
                        - libm::lgamma(kf + 1.0)
                        - libm::lgamma(nf - kf + 1.0)
                        + kf * p.ln()
                        + (nf - kf) * libm::log1p(-p);
                    if l > eps {
                        -lp.exp() * libm::expm1(eps - l)
                    } else {
                        0.0
                    }
                })
                .sum()
        };
        for eps in [24_000.0, 24_500.0, 24_800.0] {
            let exact = exact_delta(eps);
            let got = acc.get_delta(eps).unwrap();
            assert!(
                got >= exact * (1.0 - 1e-9),
                "ε={eps}: {got} < exact {exact}"
            );
            assert!(
                got <= exact * 1.05 + 1e-15,
                "ε={eps}: {got} ≫ exact {exact}"
            );
        }
    }

    #[test]
    fn skellam_pld_matches_direct_summation() {
        // Single use: δ(ε) = Σ_k pmf(k−Δ)(1 − e^{ε − L(k)})₊ summed directly over the pmf.
        for (mu, d) in [(2.0, 1u64), (50.0, 3)] {
            let p = DiscretePld::skellam(mu, d, 1e-4).unwrap();
            let kmax = 400usize;
            let lp = skellam_ln_pmf(mu, kmax).unwrap();
            let ln_p = |k: i64| lp[k.unsigned_abs() as usize];
            let di = d as i64;
            for eps in [0.1, 0.5, 1.0] {
                let exact: f64 = ((-300 + di)..=300)
                    .map(|k| {
                        let l = ln_p(k - di) - ln_p(k);
                        if l > eps {
                            -ln_p(k - di).exp() * libm::expm1(eps - l)
                        } else {
                            0.0
                        }
                    })
                    .sum();
                let got = p.get_delta(eps);
                assert!(
                    got >= exact * (1.0 - 1e-9),
                    "μ={mu} ε={eps}: {got} < {exact}"
                );
                assert!(
                    got <= exact * 1.001 + 1e-15,
                    "μ={mu} ε={eps}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn skellam_pld_is_tighter_than_rdp_bound() {
        // The exact PLD must not exceed the §2.2 RDP bound's ε (both are valid; PLD is tight).
        for (mu, steps) in [(4.0, 10u64), (100.0, 50)] {
            let ev = DpEvent::SelfComposed {
                event: Box::new(DpEvent::Skellam {
                    mu,
                    l1_sensitivity: 1.0,
                    l2_sensitivity: 1.0,
                }),
                count: steps,
            };
            let mut pld = PldAccountant::new();
            pld.compose(&ev).unwrap();
            let mut rdp = crate::RdpAccountant::new();
            rdp.compose(&ev).unwrap();
            let (a, b) = (
                pld.get_epsilon(1e-6).unwrap(),
                rdp.get_epsilon(1e-6).unwrap(),
            );
            assert!(a < b, "μ={mu}: PLD {a} ≥ RDP {b}");
        }
    }

    #[test]
    fn huge_single_losses_use_a_coarser_grid() {
        // ε = 500 randomized response (atoms at ±500) and a Laplace scale of 1e-3 (losses in
        // ±1000) would need 1e7 and 2e7 points at h = 1e-4: the grid is coarsened instead.
        let p = DiscretePld::pure_dp(500.0, 1e-4).unwrap();
        assert!(p.h() > 1e-4, "{}", p.h());
        // δ(ε') = P(L = 500)(1 − e^{ε'−500}) for ε' < 500; ε at tiny δ is 500 (pessimistic).
        assert!(p.get_epsilon(1e-12) >= 500.0 - 1e-9);
        let l = DiscretePld::laplace(1e-3, 1e-4).unwrap();
        assert!(
            l.h() > 1e-4 && l.get_epsilon(1e-12) >= 1000.0 - 1e-9,
            "{} {} {}",
            l.h(),
            l.get_epsilon(1e-12),
            l.inf_mass()
        );
        // Mixed with a fine-grid Gaussian in the accountant (μ = 200, discretized at query time
        // on the coarser grid).
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::PureDp { epsilon: 500.0 }).unwrap();
        acc.compose(&DpEvent::Gaussian {
            noise_multiplier: 0.05,
        })
        .unwrap();
        let e = acc.get_epsilon(1e-5).unwrap();
        // ε of the Gaussian alone plus the 500 of the randomized response (its loss is 500 with
        // probability 1 − 7e-218), up to the coarse grid.
        let g = gaussian_epsilon(200.0, 1e-5);
        assert!(e.is_finite() && e >= g + 500.0 - 1.0, "{e} vs {g}");
    }

    #[test]
    fn constructors_validate_and_degenerate_noise_is_infinite() {
        assert!(DiscretePld::gaussian(0.0, 1e-4).is_err());
        assert!(DiscretePld::gaussian(1.0, 0.0).is_err());
        assert!(DiscretePld::laplace(f64::NAN, 1e-4).is_err());
        assert!(DiscretePld::pure_dp(-1.0, 1e-4).is_err());
        assert!(DiscretePld::poisson_gaussian(1.5, 1.0, true, 1e-4).is_err());
        assert!(DiscretePld::poisson_gaussian(0.5, 0.0, true, 1e-4).is_err());
        assert!(DiscretePld::skellam(1.0, 0, 1e-4).is_err());
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::Gaussian {
            noise_multiplier: 1e-200,
        })
        .unwrap();
        assert_eq!(acc.get_epsilon(1e-5).unwrap(), f64::INFINITY);
        assert_eq!(acc.get_delta(10.0).unwrap(), 1.0);
    }
}

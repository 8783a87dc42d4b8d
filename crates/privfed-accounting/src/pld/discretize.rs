//! Per-mechanism discretization: the dominating discrete PLD of each supported mechanism
//! (Gaussian, Laplace, pure ε-DP, Skellam, local sampling, Poisson-sampled Gaussian and Laplace).

use super::pmf::{Builder, DiscretePld, fit_h, from_atoms, from_cells};
use crate::error::{AccountingError, Result, check_positive};
use crate::skellam::skellam_ln_pmf;
use privfed_special::NormPoint;

impl DiscretePld {
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

    /// The PLD of local sampling with participation probability `q` ([`DpEvent::LocalSampled`](crate::DpEvent::LocalSampled)):
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
        let g = |l: f64| privfed_special::log_add_exp(libm::log1p(-q), q.ln() + l); // ln(1−q+q e^ℓ)
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
            privfed_special::log_add_exp(libm::log1p(-q), q.ln() + u)
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
}

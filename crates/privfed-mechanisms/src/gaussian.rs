//! The Gaussian mechanism with the **analytic Gaussian calibration** of Balle & Wang (ICML 2018),
//! `docs/ALGORITHMS.md` §2.5, as a local randomizer baseline.
//!
//! `M(x) = x + N(0, σ²I)` is `(ε, δ)`-DP for neighbours at ℓ2 distance at most `Δ` exactly when
//! `δ ≥ δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ)` (Balle & Wang, Theorem 8): this is the
//! privacy profile of the Gaussian mechanism, tight for every ε. [`gaussian_delta`] evaluates it,
//! [`gaussian_epsilon`] inverts it in ε and [`analytic_gaussian_sigma`] finds the smallest σ for a
//! target `(ε, δ)`. The classical calibration `σ = Δ√(2 ln(1.25/δ))/ε` is valid only for ε < 1,
//! and there it is larger than the analytic σ (tested).
//!
//! **Numerics.** `e^ε` overflows for ε > 709 and `Φ(−Δ/(2σ) − εσ/Δ)` underflows below −38.5, so
//! the second term is formed as `exp(ε + ln Φ(·))`, and `δ = Φ(A)·(1 − exp(ε + ln Φ(B) − ln Φ(A)))`
//! with `expm1`. `ln Φ` uses `libm::erfc` down to `z = −30` and the continued fraction of the Mills
//! ratio below (a private helper here; `special.rs` will own Φ and ln Φ). All values are checked
//! against 60-digit mpmath (`scripts/reference/gaussian_analytic.py`).
//!
//! **One home.** These are the only implementation of the analytic-Gaussian profile in privfed:
//! `privfed-accounting` calls them for `analysis::analytic_gaussian_sigma` and for the Gaussian
//! PLD, whose μ form `δ(ε) = Φ((μ − ε)/√(2μ)) − e^ε·Φ((−μ − ε)/√(2μ))` is this profile at
//! `σ = 1`, `Δ = √(2μ)` (μ = Δ²/(2σ²)).
//!
//! **Floating point.** As for [`crate::laplace`], the guarantee is that of the ideal real-valued
//! mechanism; `f64` Gaussian samples are not hardened against floating-point attacks.

use crate::additive::privatize_additive;
use crate::domain::validate_domain;
use crate::error::{MechanismError, Result, check_positive};
use crate::{CryptoRng, Domain, Guarantee, LocalRandomizer, Rng};
use serde::Serialize;

use crate::special::ln_norm_cdf as ln_std_normal_cdf;

/// The exact privacy profile of the Gaussian mechanism (Balle & Wang 2018, Theorem 8):
/// `δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ)` for noise `σ`, ℓ2 sensitivity `Δ` and
/// `ε ≥ 0`, computed in log space (see the module docs). Returns NaN if `σ` or `Δ` is not finite
/// and positive, or `ε` is NaN, negative or infinite.
pub fn gaussian_delta(sigma: f64, sensitivity: f64, epsilon: f64) -> f64 {
    let ok = sigma.is_finite()
        && sigma > 0.0
        && sensitivity.is_finite()
        && sensitivity > 0.0
        && epsilon.is_finite()
        && epsilon >= 0.0;
    if !ok {
        return f64::NAN;
    }
    let half_ratio = 0.5 * sensitivity / sigma;
    let m = epsilon * sigma / sensitivity;
    let a = half_ratio - m;
    let b = -half_ratio - m;
    let ln_a = ln_std_normal_cdf(a);
    if ln_a == f64::NEG_INFINITY {
        return 0.0;
    }
    let ln_b = epsilon + ln_std_normal_cdf(b);
    let diff = ln_b - ln_a;
    if diff.is_nan() || diff >= 0.0 {
        // ln_b = −∞ gives diff = −∞ (handled below); ≥ 0 only by rounding when δ ≈ 0.
        if diff.is_nan() {
            return f64::NAN;
        }
        return 0.0;
    }
    ln_a.exp() * -libm::expm1(diff)
}

fn check_delta(delta: f64) -> Result<f64> {
    crate::error::check_open_interval("delta", delta, 0.0, 1.0)
}

/// The exact ε of the Gaussian mechanism with noise `σ` and ℓ2 sensitivity `Δ` at a given δ:
/// the smallest `ε ≥ 0` with `δ(ε) ≤ δ` ([`gaussian_delta`] is decreasing in ε). Bisection to
/// a relative width of `4·2^{−52}`, returning the upper end (so `δ(ε) ≤ δ` holds for the
/// returned value as computed). Returns 0 when `δ(0) = 2Φ(Δ/(2σ)) − 1 ≤ δ`.
///
/// Errors unless `σ, Δ` are finite and positive and `δ ∈ (0, 1)`.
pub fn gaussian_epsilon(sigma: f64, sensitivity: f64, delta: f64) -> Result<f64> {
    check_positive("sigma", sigma)?;
    check_positive("sensitivity", sensitivity)?;
    check_delta(delta)?;
    let f = |e: f64| gaussian_delta(sigma, sensitivity, e);
    if f(0.0) <= delta {
        return Ok(0.0);
    }
    let mut lo = 0.0;
    let mut hi = 1.0;
    let ok = |e: f64| f(e) <= delta;
    while !ok(hi) {
        lo = hi;
        hi *= 2.0;
        if !hi.is_finite() || hi > 1e300 {
            return Err(MechanismError::Numerical(format!(
                "gaussian_epsilon: no ε with δ(ε) ≤ {delta} found (sigma = {sigma}, sensitivity = \
                 {sensitivity})"
            )));
        }
    }
    bisect(&mut lo, &mut hi, ok);
    Ok(hi)
}

/// Bisection on a monotone predicate with `pred(hi)` true and `pred(lo)` false, until the bracket
/// is `4·2^{−52}` relative wide (or no representable midpoint remains).
fn bisect(lo: &mut f64, hi: &mut f64, pred: impl Fn(f64) -> bool) {
    for _ in 0..2200 {
        if *hi - *lo <= 4.0 * f64::EPSILON * *hi {
            break;
        }
        let mid = 0.5 * (*lo + *hi);
        if mid <= *lo || mid >= *hi {
            break;
        }
        if pred(mid) {
            *hi = mid;
        } else {
            *lo = mid;
        }
    }
}

/// The analytic Gaussian calibration (Balle & Wang 2018, `docs/ALGORITHMS.md` §2.5): the smallest σ
/// with `δ(ε; σ, Δ) ≤ δ` ([`gaussian_delta`], decreasing in σ), by bisection to a relative width
/// of `4·2^{−52}`. The **upper** end of the final bracket is returned, so the returned σ satisfies
/// `gaussian_delta(σ, Δ, ε) ≤ δ` as computed (rounded up, never down).
///
/// Errors unless ε and `Δ` are finite and positive and `δ ∈ (0, 1)`.
pub fn analytic_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    check_positive("epsilon", epsilon)?;
    check_delta(delta)?;
    check_positive("sensitivity", sensitivity)?;
    let ok = |s: f64| gaussian_delta(s, sensitivity, epsilon) <= delta;
    let classical = sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon;
    let mut hi = if classical.is_finite() && classical > 0.0 {
        classical
    } else {
        sensitivity
    };
    let mut steps = 0;
    while !ok(hi) {
        hi *= 2.0;
        steps += 1;
        if !hi.is_finite() || steps > 2100 {
            return Err(MechanismError::Numerical(format!(
                "analytic_gaussian_sigma: no σ found for epsilon = {epsilon}, delta = {delta}"
            )));
        }
    }
    let mut lo = hi;
    steps = 0;
    loop {
        lo *= 0.5;
        steps += 1;
        if !ok(lo) {
            break;
        }
        hi = lo;
        if lo == 0.0 || steps > 2100 {
            return Err(MechanismError::Numerical(format!(
                "analytic_gaussian_sigma: δ(σ) ≤ {delta} for arbitrarily small σ (epsilon = \
                 {epsilon})"
            )));
        }
    }
    bisect(&mut lo, &mut hi, ok);
    Ok(hi)
}

/// The ℓ2 diameter `Δ₂ = sup ‖x − x'‖₂` of a domain (the sensitivity of the identity under local
/// DP):
///
/// | domain | `Δ₂` | attained at |
/// |---|---|---|
/// | ℓ1 ball of radius r | `2r` (`‖v‖₂ ≤ ‖v‖₁`) | `±r·e₁` |
/// | ℓ2 ball of radius r | `2r` | `±r·e₁` |
/// | unit sphere | `2` | `±e₁` |
/// | ℓ∞ ball of radius r, dim d | `2r√d` | `±r·(1,…,1)` |
/// | interval `[lo, hi]` | `hi − lo` | `lo, hi` |
///
/// Errors if the domain's parameters are invalid or the diameter overflows.
pub fn l2_diameter(domain: &Domain) -> Result<f64> {
    validate_domain(domain)?;
    let d = domain.dim() as f64;
    let diam = match *domain {
        Domain::L1Ball { radius, .. } | Domain::L2Ball { radius, .. } => 2.0 * radius,
        Domain::UnitSphere { .. } => 2.0,
        Domain::LInfBall { radius, .. } => 2.0 * radius * d.sqrt(),
        Domain::Interval { lo, hi } => hi - lo,
    };
    if diam.is_finite() {
        Ok(diam)
    } else {
        Err(MechanismError::Infeasible(format!(
            "the ℓ2 diameter of the domain overflows ({domain:?})"
        )))
    }
}

/// The Gaussian mechanism `x + N(0, σ²I)` on a [`Domain`], `(ε, δ)`-LDP with `Δ₂` the ℓ2
/// diameter of the domain ([`l2_diameter`]) and ε computed exactly from σ and δ
/// ([`gaussian_epsilon`]). Name `"gaussian"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gaussian {
    domain: Domain,
    /// `Δ₂`.
    sensitivity: f64,
    sigma: f64,
    delta: f64,
    /// ε computed from σ, Δ₂ and δ.
    epsilon: f64,
    /// The ε requested from [`Gaussian::new`] (`None` for [`Gaussian::with_sigma`]).
    requested_epsilon: Option<f64>,
}

impl Gaussian {
    /// Calibrates σ with [`analytic_gaussian_sigma`]`(ε, δ, Δ₂)`; the guarantee's ε is then
    /// recomputed from σ ([`gaussian_epsilon`]) and is at most the requested ε.
    pub fn new(epsilon: f64, delta: f64, domain: Domain) -> Result<Gaussian> {
        check_positive("epsilon", epsilon)?;
        check_delta(delta)?;
        let sensitivity = l2_diameter(&domain)?;
        let sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)?;
        let mut g = Self::with_sigma(sigma, delta, domain)?;
        g.requested_epsilon = Some(epsilon);
        Ok(g)
    }

    /// A Gaussian mechanism with a given σ; its ε at `δ` is computed with [`gaussian_epsilon`].
    pub fn with_sigma(sigma: f64, delta: f64, domain: Domain) -> Result<Gaussian> {
        check_positive("sigma", sigma)?;
        check_delta(delta)?;
        let sensitivity = l2_diameter(&domain)?;
        let epsilon = gaussian_epsilon(sigma, sensitivity, delta)?;
        Ok(Gaussian {
            domain,
            sensitivity,
            sigma,
            delta,
            epsilon,
            requested_epsilon: None,
        })
    }

    /// The noise standard deviation σ per coordinate.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The ℓ2 sensitivity `Δ₂` (diameter of the domain).
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }
}

impl LocalRandomizer for Gaussian {
    fn name(&self) -> &'static str {
        "gaussian"
    }

    fn domain(&self) -> Domain {
        self.domain
    }

    /// `Approximate { ε = gaussian_epsilon(σ, Δ₂, δ), δ }`.
    fn guarantee(&self) -> Guarantee {
        Guarantee::Approximate {
            epsilon: self.epsilon,
            delta: self.delta,
        }
    }

    /// `σ²·d` (the same for every input).
    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain.check(x)?;
        Ok(self.worst_case_variance())
    }

    /// `σ²·d`.
    fn worst_case_variance(&self) -> f64 {
        self.sigma * self.sigma * self.domain.dim() as f64
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        self.privatize_into_threads(x, out, rng, crate::rng::Threads::ONE)
    }

    /// `x + σ·g`, `g` drawn in blocks from streams of a fresh key (the same output for every
    /// thread count).
    fn privatize_into_threads<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
        threads: crate::rng::Threads,
    ) -> Result<()> {
        let sigma = self.sigma;
        privatize_additive(self.domain, x, out, rng, threads, |stream, xs, chunk| {
            crate::batch::fill_normal(stream, chunk);
            for (o, &xi) in chunk.iter_mut().zip(xs) {
                *o = xi + sigma * *o;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_z, z_mean_known_variance};
    use rand::RngExt;

    /// mpmath reference values (60 digits), generated by scripts/reference/gaussian_analytic.py.
    fn reference() -> serde_json::Value {
        serde_json::from_str(include_str!("../tests/data/gaussian_analytic.json")).unwrap()
    }

    fn num(v: &serde_json::Value) -> f64 {
        match v {
            serde_json::Value::String(s) => s.parse().unwrap(),
            other => other.as_f64().unwrap(),
        }
    }

    fn rel(a: f64, b: f64) -> f64 {
        if a == b { 0.0 } else { (a - b).abs() / b.abs() }
    }

    #[test]
    fn ln_phi_against_mpmath() {
        let r = reference();
        for e in r["ln_phi"].as_array().unwrap() {
            let z = num(&e["z"]);
            let want = num(&e["ln_phi"]);
            let got = ln_std_normal_cdf(z);
            // 1e-13 relative (the z = 8 value is ≈ 6e-16 itself, relative still holds).
            assert!(rel(got, want) < 1e-13, "z={z}: {got} vs {want}");
        }
        assert_eq!(ln_std_normal_cdf(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(ln_std_normal_cdf(f64::INFINITY), 0.0);
        assert!(ln_std_normal_cdf(f64::NAN).is_nan());
    }

    #[test]
    fn delta_against_mpmath() {
        let r = reference();
        let mut worst = 0.0f64;
        for e in r["delta"].as_array().unwrap() {
            let (s, d, eps) = (num(&e["sigma"]), num(&e["sensitivity"]), num(&e["epsilon"]));
            let want = num(&e["delta"]);
            let got = gaussian_delta(s, d, eps);
            worst = worst.max(rel(got, want));
            // Relative 1e-9: the loss comes from cancellation in 1 − e^{ε + ln Φ(B) − ln Φ(A)}
            // when δ ≪ Φ(A) (measured worst case over these fixtures is printed on failure).
            assert!(
                rel(got, want) < 1e-9,
                "σ={s} Δ={d} ε={eps}: {got} vs {want}"
            );
        }
        println!("worst relative error of gaussian_delta: {worst:e}");
    }

    #[test]
    fn sigma_against_mpmath_and_rounded_up() {
        let r = reference();
        for e in r["sigma"].as_array().unwrap() {
            let (eps, delta, d) = (num(&e["epsilon"]), num(&e["delta"]), num(&e["sensitivity"]));
            let want = num(&e["sigma"]);
            let got = analytic_gaussian_sigma(eps, delta, d).unwrap();
            assert!(rel(got, want) < 1e-9, "ε={eps} δ={delta}: {got} vs {want}");
            assert!(gaussian_delta(got, d, eps) <= delta);
            // Tight: 1e-12 less noise already violates the target (or is within rounding).
            let smaller = got * (1.0 - 1e-12);
            assert!(gaussian_delta(smaller, d, eps) > delta * (1.0 - 1e-6));
        }
    }

    #[test]
    fn epsilon_against_mpmath_and_round_trip() {
        let r = reference();
        for e in r["epsilon"].as_array().unwrap() {
            let (s, d, delta) = (num(&e["sigma"]), num(&e["sensitivity"]), num(&e["delta"]));
            let want = num(&e["epsilon"]);
            let got = gaussian_epsilon(s, d, delta).unwrap();
            assert!(rel(got, want) < 1e-9, "σ={s} δ={delta}: {got} vs {want}");
        }
        for s in [0.3, 1.0, 2.0, 10.0, 100.0] {
            for delta in [1e-3, 1e-5, 1e-9, 1e-15] {
                let eps = gaussian_epsilon(s, 1.0, delta).unwrap();
                let back = gaussian_delta(s, 1.0, eps);
                assert!(back <= delta);
                assert!(rel(back, delta) < 1e-9, "σ={s} δ={delta}: δ(ε(σ)) = {back}");
            }
        }
        // δ(0) ≤ δ gives ε = 0: σ = 1000, Δ = 1: δ(0) = 2Φ(0.0005) − 1 ≈ 4e-4.
        assert_eq!(gaussian_epsilon(1000.0, 1.0, 1e-3).unwrap(), 0.0);
    }

    #[test]
    fn analytic_beats_classical_for_small_epsilon() {
        for eps in [0.01, 0.1, 0.5, 0.9, 0.99] {
            for delta in [1e-3, 1e-5, 1e-8, 1e-12] {
                let classical = (2.0 * (1.25f64 / delta).ln()).sqrt() / eps;
                let analytic = analytic_gaussian_sigma(eps, delta, 1.0).unwrap();
                assert!(analytic < classical, "ε={eps} δ={delta}");
                // The classical σ is (ε, δ)-DP, so it must satisfy the exact profile.
                assert!(gaussian_delta(classical, 1.0, eps) <= delta);
            }
        }
    }

    #[test]
    fn monotonicity() {
        // δ(ε) decreasing in ε and in σ; σ(ε, δ) decreasing in ε and in δ.
        for s in [0.5, 1.0, 3.0] {
            let mut prev = f64::INFINITY;
            for i in 0..200 {
                let d = gaussian_delta(s, 1.0, i as f64 * 0.05);
                assert!(d <= prev, "σ={s}: not decreasing at ε={}", i as f64 * 0.05);
                prev = d;
            }
        }
        let mut prev = f64::INFINITY;
        for i in 1..200 {
            let d = gaussian_delta(i as f64 * 0.05, 1.0, 1.0);
            assert!(d <= prev);
            prev = d;
        }
        let mut prev = f64::INFINITY;
        for eps in [0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0] {
            let s = analytic_gaussian_sigma(eps, 1e-6, 1.0).unwrap();
            assert!(s < prev);
            prev = s;
        }
        let mut prev = f64::INFINITY;
        for delta in [1e-12, 1e-9, 1e-6, 1e-3, 0.1] {
            let s = analytic_gaussian_sigma(1.0, delta, 1.0).unwrap();
            assert!(s < prev);
            prev = s;
        }
        // Scale: σ is proportional to Δ.
        let a = analytic_gaussian_sigma(1.0, 1e-5, 1.0).unwrap();
        let b = analytic_gaussian_sigma(1.0, 1e-5, 8.0).unwrap();
        assert!(rel(b, 8.0 * a) < 1e-12);
    }

    #[test]
    fn extreme_epsilon_does_not_overflow() {
        let d = gaussian_delta(0.02, 1.0, 1500.0);
        assert!(d.is_finite() && d > 0.0);
        let s = analytic_gaussian_sigma(1000.0, 1e-10, 1.0).unwrap();
        assert!(s.is_finite() && s > 0.0);
        assert!(gaussian_delta(s, 1.0, 1000.0) <= 1e-10);
        let s = analytic_gaussian_sigma(1e-4, 1e-10, 1.0).unwrap();
        assert!(gaussian_delta(s, 1.0, 1e-4) <= 1e-10);
    }

    #[test]
    fn l2_diameters() {
        let d = 5usize;
        let s = (d as f64).sqrt();
        assert_eq!(
            l2_diameter(&Domain::L1Ball {
                dim: d,
                radius: 1.5
            })
            .unwrap(),
            3.0
        );
        assert_eq!(
            l2_diameter(&Domain::L2Ball {
                dim: d,
                radius: 1.5
            })
            .unwrap(),
            3.0
        );
        assert_eq!(l2_diameter(&Domain::UnitSphere { dim: d }).unwrap(), 2.0);
        let linf = Domain::LInfBall {
            dim: d,
            radius: 0.5,
        };
        assert!(rel(l2_diameter(&linf).unwrap(), s) < 1e-15);
        // Attained by ±r(1,…,1), both in the ℓ∞ ball.
        let x = vec![0.5; d];
        let xm = vec![-0.5; d];
        linf.check(&x).unwrap();
        linf.check(&xm).unwrap();
        let dist = crate::domain::l2_norm(&[1.0; 5]);
        assert!(rel(dist, l2_diameter(&linf).unwrap()) < 1e-15);
        assert_eq!(
            l2_diameter(&Domain::Interval { lo: -1.0, hi: 3.0 }).unwrap(),
            4.0
        );
        assert!(l2_diameter(&Domain::UnitSphere { dim: 0 }).is_err());
        // ℓ1 ball: random pairs never exceed 2r in ℓ2 (‖v‖₂ ≤ ‖v‖₁).
        let mut rng = seeded_rng_for_experiments(4);
        for _ in 0..1000 {
            let pt = |rng: &mut crate::rng::ExperimentRng| -> Vec<f64> {
                let g: Vec<f64> = (0..d).map(|_| rng.random::<f64>() - 0.5).collect();
                let n: f64 = g.iter().map(|v| v.abs()).sum();
                g.iter().map(|v| v / n * 1.5).collect()
            };
            let (a, b) = (pt(&mut rng), pt(&mut rng));
            let diff: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
            assert!(crate::domain::l2_norm(&diff) <= 3.0 * (1.0 + 1e-12));
        }
    }

    #[test]
    fn mechanism_guarantee_variance_and_monte_carlo() {
        let dom = Domain::L2Ball {
            dim: 3,
            radius: 1.0,
        };
        let m = Gaussian::new(1.0, 1e-5, dom).unwrap();
        assert_eq!(m.sensitivity(), 2.0);
        let g = m.guarantee();
        assert_eq!(g.delta(), 1e-5);
        assert!(
            g.epsilon() <= 1.0 && g.epsilon() > 1.0 - 1e-9,
            "ε = {}",
            g.epsilon()
        );
        // σ = 2 × the Δ = 1 value (mpmath: 3.730631634815941813869689).
        assert!(rel(m.sigma(), 2.0 * 3.730_631_634_815_942) < 1e-9);
        assert!(rel(m.worst_case_variance(), 3.0 * m.sigma() * m.sigma()) < 1e-15);
        assert_eq!(m.name(), "gaussian");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["delta"], 1e-5);
        assert_eq!(json["requested_epsilon"], 1.0);

        // Two-sided z-tests at α = 6e-7 (|z| < 4.99) on the mean (variance σ²) and on the mean
        // square (Var(Z²) = 2σ⁴) of each coordinate, 6 tests.
        let x = [0.6, -0.3, 0.0];
        let n = 300_000;
        let mut rng = seeded_rng_for_experiments(29);
        let mut out = [0.0; 3];
        let (mut s1, mut s2) = ([0.0; 3], [0.0; 3]);
        for _ in 0..n {
            m.privatize_into(&x, &mut out, &mut rng).unwrap();
            for i in 0..3 {
                let z = out[i] - x[i];
                s1[i] += z;
                s2[i] += z * z;
            }
        }
        let (nf, s) = (n as f64, m.sigma());
        for i in 0..3 {
            let z = z_mean_known_variance(s1[i] / nf, n, 0.0, s * s);
            assert_z(z, 6e-7, &format!("coordinate {i}: mean"));
            let z = z_mean_known_variance(s2[i] / nf, n, s * s, 2.0 * s.powi(4));
            assert_z(z, 6e-7, &format!("coordinate {i}: mean square"));
        }

        let w = Gaussian::with_sigma(3.0, 1e-5, Domain::Interval { lo: 0.0, hi: 1.0 }).unwrap();
        assert!(
            rel(
                w.guarantee().epsilon(),
                gaussian_epsilon(3.0, 1.0, 1e-5).unwrap()
            ) == 0.0
        );
        assert_eq!(json["requested_epsilon"], 1.0);
        assert!(serde_json::to_value(&w).unwrap()["requested_epsilon"].is_null());
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(gaussian_delta(0.0, 1.0, 1.0).is_nan());
        assert!(gaussian_delta(1.0, f64::NAN, 1.0).is_nan());
        assert!(gaussian_delta(1.0, 1.0, -1.0).is_nan());
        for delta in [0.0, 1.0, -0.1, f64::NAN] {
            assert!(gaussian_epsilon(1.0, 1.0, delta).is_err());
            assert!(analytic_gaussian_sigma(1.0, delta, 1.0).is_err());
            assert!(Gaussian::new(1.0, delta, Domain::UnitSphere { dim: 2 }).is_err());
        }
        assert!(gaussian_epsilon(-1.0, 1.0, 1e-5).is_err());
        assert!(gaussian_epsilon(1.0, f64::INFINITY, 1e-5).is_err());
        assert!(analytic_gaussian_sigma(0.0, 1e-5, 1.0).is_err());
        assert!(analytic_gaussian_sigma(f64::INFINITY, 1e-5, 1.0).is_err());
        assert!(analytic_gaussian_sigma(1.0, 1e-5, 0.0).is_err());
        assert!(Gaussian::with_sigma(f64::NAN, 1e-5, Domain::UnitSphere { dim: 2 }).is_err());
        assert!(
            Gaussian::new(
                1.0,
                1e-5,
                Domain::L2Ball {
                    dim: 2,
                    radius: 0.0
                }
            )
            .is_err()
        );
        let m = Gaussian::new(1.0, 1e-5, Domain::UnitSphere { dim: 2 }).unwrap();
        let mut rng = seeded_rng_for_experiments(0);
        assert!(m.privatize(&[1.0], &mut rng).is_err());
        assert!(m.privatize(&[0.5, 0.5], &mut rng).is_err());
        assert!(m.privatize(&[f64::NAN, 1.0], &mut rng).is_err());
        assert!(m.variance_at(&[1.0, 0.0, 0.0]).is_err());
    }
}

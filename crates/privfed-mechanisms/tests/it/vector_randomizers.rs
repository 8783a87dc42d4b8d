//! Statistical and exact tests of the sphere randomizers PrivUnit2 and PrivUnitG.

use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use privfed_mechanisms::sampling::uniform_on_sphere;
use privfed_mechanisms::special;
use privfed_mechanisms::{LocalRandomizer, MechanismError};
use privfed_testkit::{assert_ks_fits, assert_mean};

/// Monte Carlo check of `E[M(u)] = u` (per-coordinate two-sided z-tests at α = 4e-8, |z| < 5.49;
/// Bonferroni over ≤ 20 coordinates → ≤ 8e-7) and of `E‖M(u) − u‖²` against the exact
/// variance (α = 4e-8).
fn check_unbiased_and_variance<M: LocalRandomizer>(mech: &M, n: usize, seed: u64) {
    let d = mech.dim();
    let mut rng = seeded_rng_for_experiments(seed);
    let u = uniform_on_sphere(d, &mut rng).unwrap();
    let mut coords = vec![Vec::with_capacity(n); d];
    let mut sq_err = Vec::with_capacity(n);
    let mut out = vec![0.0; d];
    for _ in 0..n {
        mech.privatize_into(&u, &mut out, &mut rng).unwrap();
        let mut e = 0.0;
        for j in 0..d {
            coords[j].push(out[j]);
            e += (out[j] - u[j]).powi(2);
        }
        sq_err.push(e);
    }
    for j in 0..d {
        let what = format!("{}: coordinate {j} biased", mech.name());
        assert_mean(&coords[j], u[j], 4e-8, &what);
    }
    let exact = mech.worst_case_variance();
    let what = format!("{}: squared error vs exact variance {exact}", mech.name());
    assert_mean(&sq_err, exact, 4e-8, &what);
}

#[test]
fn privunit2_is_unbiased_with_exact_variance() {
    for &(eps, d) in &[(1.0, 5usize), (4.0, 16), (10.0, 20)] {
        check_unbiased_and_variance(&PrivUnit2::optimized(eps, d).unwrap(), 200_000, 21);
    }
    check_unbiased_and_variance(&PrivUnit2::paper000(6.0, 2.0, 8).unwrap(), 200_000, 22);
    check_unbiased_and_variance(&PrivUnit2::new(2, 0.3, 0.8).unwrap(), 200_000, 23);
    check_unbiased_and_variance(&PrivUnit2::new(3, 0.5, 0.7).unwrap(), 200_000, 24);
}

#[test]
fn privunitg_is_unbiased_with_exact_variance() {
    for &(eps, d) in &[(1.0, 5usize), (4.0, 16), (10.0, 20)] {
        check_unbiased_and_variance(&PrivUnitG::optimized(eps, d).unwrap(), 200_000, 25);
    }
    check_unbiased_and_variance(&PrivUnitG::new(10, 0.2, 0.8).unwrap(), 200_000, 26);
}

/// ln P(T ≥ t) and ln P(T ≤ t) for T = ⟨U,u⟩, U uniform on S^{d−1}: (1+T)/2 ~ Beta(α, α).
fn ln_tails(d: usize, t: f64) -> (f64, f64) {
    let a = (d as f64 - 1.0) / 2.0;
    (
        special::ln_beta_inc(a, a, (1.0 - t) / 2.0),
        special::ln_beta_inc(a, a, (1.0 + t) / 2.0),
    )
}

/// CDF of PrivUnit2's `⟨V,u⟩`: the mixture `p·Beta-law|cap + (1−p)·Beta-law|complement`.
fn privunit2_inner_cdf(m: &PrivUnit2, d: usize, t: f64) -> f64 {
    let (p, q, g) = (m.p(), m.q(), m.gamma());
    let (ln_up, ln_down) = ln_tails(d, t);
    if t >= g {
        (1.0 - p) + p * (1.0 - (ln_up - q.ln()).exp())
    } else {
        (1.0 - p) * (ln_down - (-q).ln_1p()).exp()
    }
}

#[test]
fn privunit2_inner_product_follows_truncated_beta_mixture() {
    // KS level 1e-6 per case; 5 cases → family-wise FPR ≤ 5e-6. Includes d = 10^5 at ε = 16,
    // where the cap probability is ~2.5e-6, so the far-tail sampler is what is exercised.
    let cases = [
        (4.0, 10usize),
        (4.0, 1000),
        (8.0, 1000),
        (16.0, 100_000),
        (1.0, 100_000),
    ];
    let mut rng = seeded_rng_for_experiments(31);
    for &(eps, d) in &cases {
        let m = PrivUnit2::optimized(eps, d).unwrap();
        let n = 60_000;
        let mut ts: Vec<f64> = (0..n).map(|_| m.sample_inner_product(&mut rng)).collect();
        let cdf = |t| privunit2_inner_cdf(&m, d, t);
        assert_ks_fits(&mut ts, cdf, 1e-6, &format!("ε={eps} d={d}"));
    }
    // Through the full privatize path at d = 10^5, ε = 16: m·⟨Ẑ, u⟩ has the same law and
    // ‖m·Ẑ‖ = 1 (KS level 1e-6).
    let d = 100_000;
    let m = PrivUnit2::optimized(16.0, d).unwrap();
    let u = uniform_on_sphere(d, &mut rng).unwrap();
    let n = 3000;
    let mut ts = Vec::with_capacity(n);
    let mut out = vec![0.0; d];
    for _ in 0..n {
        m.privatize_into(&u, &mut out, &mut rng).unwrap();
        let dot: f64 = out.iter().zip(&u).map(|(a, b)| a * b).sum();
        let norm: f64 = out.iter().map(|a| a * a).sum::<f64>().sqrt();
        assert!((norm * m.m() - 1.0).abs() < 1e-9);
        ts.push(dot * m.m());
    }
    let cdf = |t| privunit2_inner_cdf(&m, d, t);
    assert_ks_fits(&mut ts, cdf, 1e-6, "privatize path");
}

#[test]
fn privunit2_epsilon_matches_independent_quadrature() {
    // q and K by composite Simpson quadrature of (1−t²)^β on [−1, 1] (no incomplete beta), then
    // ε = ln(p(1−q)/((1−p)q)) and m = K(p/q − (1−p)/(1−q)) compared with the mechanism's.
    for &(eps, d) in &[(2.0, 10usize), (4.0, 1000), (8.0, 1000), (16.0, 5000)] {
        let mech = PrivUnit2::optimized(eps, d).unwrap();
        let (g, p) = (mech.gamma(), mech.p());
        let beta = (d as f64 - 3.0) / 2.0;
        let f = |t: f64| {
            if t.abs() >= 1.0 {
                0.0
            } else {
                (beta * (-(t * t)).ln_1p()).exp()
            }
        };
        let simpson = |a: f64, b: f64, h: &dyn Fn(f64) -> f64| {
            let n = 400_000;
            let w = (b - a) / n as f64;
            let mut s = h(a) + h(b);
            for i in 1..n {
                s += h(a + w * i as f64) * if i % 2 == 1 { 4.0 } else { 2.0 };
            }
            s * w / 3.0
        };
        let z = simpson(-1.0, 1.0, &f);
        let q = simpson(g, 1.0, &f) / z;
        let k = simpson(g, 1.0, &|t| t * f(t)) / z;
        let eps_quad = (p * (1.0 - q) / ((1.0 - p) * q)).ln();
        let m_quad = k * (p / q - (1.0 - p) / (1.0 - q));
        assert!(
            (eps_quad - mech.guarantee().epsilon()).abs() < 1e-6,
            "ε {eps_quad} vs {}",
            mech.guarantee().epsilon()
        );
        assert!(
            (m_quad / mech.m() - 1.0).abs() < 1e-6,
            "m {m_quad} vs {}",
            mech.m()
        );
    }
}

#[test]
fn privunitg_epsilon_matches_independent_quadrature() {
    // q = Φ(z) by Simpson quadrature of the normal density; ε and m recomputed independently.
    for &(eps, d) in &[(2.0, 10usize), (4.0, 1000), (8.0, 1000)] {
        let mech = PrivUnitG::optimized(eps, d).unwrap();
        let (z, p) = (mech.z(), mech.p());
        let phi = |x: f64| (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let n = 200_000;
        let (a, b) = (z, 40.0);
        let w = (b - a) / n as f64;
        let mut s = phi(a) + phi(b);
        for i in 1..n {
            s += phi(a + w * i as f64) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        let sf = s * w / 3.0;
        let q = 1.0 - sf;
        let eps_quad = (p * q / ((1.0 - p) * sf)).ln();
        let m_quad = phi(z) * (p / sf - (1.0 - p) / q) / (d as f64).sqrt();
        assert!((eps_quad - mech.guarantee().epsilon()).abs() < 1e-7);
        assert!((m_quad / mech.m() - 1.0).abs() < 1e-7);
    }
}

#[test]
fn optimized_beats_every_split_on_a_fine_grid() {
    // The optimizer's variance is no worse than any of 400 budget splits (PrivUnit2) or 400
    // thresholds (PrivUnitG) at several (d, ε).
    for &(eps, d) in &[(1.0, 100usize), (4.0, 1000), (8.0, 20), (12.0, 100_000)] {
        let best = PrivUnit2::optimized(eps, d).unwrap().worst_case_variance();
        for i in 1..400 {
            let e0 = eps * i as f64 / 400.0;
            if let Ok(m) = PrivUnit2::with_budget_split(eps, e0, d) {
                assert!(
                    best <= m.worst_case_variance() * (1.0 + 1e-9),
                    "ε={eps} d={d} ε0={e0}"
                );
            }
        }
        let best_g = PrivUnitG::optimized(eps, d).unwrap().worst_case_variance();
        for i in 1..400 {
            let z = 6.0 * i as f64 / 400.0;
            if let Ok(m) = PrivUnitG::with_threshold(eps, z, d) {
                assert!(
                    best_g <= m.worst_case_variance() * (1.0 + 1e-9),
                    "G ε={eps} d={d} z={z}"
                );
            }
        }
        // Paper 002: PrivUnit2 is optimal, so the Gaussian variant is never better; the ratio
        // tends to 1 as d grows (docs/ALGORITHMS.md §1.2: 1.0016 and 1.0043 at d = 1000).
        assert!(best_g >= best * (1.0 - 1e-9), "{best_g} vs {best}");
        if d >= 1000 {
            assert!(best_g <= best * 1.01, "{best_g} vs {best}");
        }
    }
}

#[test]
fn pfl_research_parameters_are_beaten() {
    // The issue quotes 614.0 for the public pfl-research parameters at d=1000, ε=4; the exact
    // optimum is 434.60.
    let m = PrivUnit2::optimized(4.0, 1000).unwrap();
    assert!((m.worst_case_variance() - 434.60).abs() < 0.005 * 434.60);
    assert!(m.worst_case_variance() < 614.0);
}

#[test]
fn paper000_parameterization_is_private_but_looser() {
    for &(eps, e0, d) in &[
        (4.0, 1.0, 1000usize),
        (8.0, 2.5, 1000),
        (20.0, 5.0, 100_000),
    ] {
        let m = PrivUnit2::paper000(eps, e0, d).unwrap();
        assert!(
            m.guarantee().epsilon() <= eps,
            "exact ε {} > requested {eps}",
            m.guarantee().epsilon()
        );
        let opt = PrivUnit2::optimized(eps, d).unwrap();
        assert!(opt.worst_case_variance() <= m.worst_case_variance());
    }
}

#[test]
fn large_dimension_works() {
    let d = 1_000_000;
    let mut rng = seeded_rng_for_experiments(41);
    let u = uniform_on_sphere(d, &mut rng).unwrap();
    for eps in [1.0, 16.0] {
        let m = PrivUnit2::optimized(eps, d).unwrap();
        assert!((m.guarantee().epsilon() - eps).abs() < 1e-9);
        let z = m.privatize(&u, &mut rng).unwrap();
        assert!(z.iter().all(|v| v.is_finite()));
        let g = PrivUnitG::optimized(eps, d).unwrap();
        assert!(
            g.privatize(&u, &mut rng)
                .unwrap()
                .iter()
                .all(|v| v.is_finite())
        );
    }
}

#[test]
fn bad_parameters_and_inputs_are_typed_errors() {
    let mut rng = seeded_rng_for_experiments(1);
    for eps in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e6] {
        assert!(matches!(
            PrivUnit2::optimized(eps, 10),
            Err(MechanismError::InvalidParameter {
                name: "epsilon",
                ..
            })
        ));
        assert!(matches!(
            PrivUnitG::optimized(eps, 10),
            Err(MechanismError::InvalidParameter {
                name: "epsilon",
                ..
            })
        ));
    }
    assert!(PrivUnit2::optimized(1.0, 1).is_err());
    assert!(PrivUnit2::optimized(1.0, 0).is_err());
    assert!(PrivUnitG::optimized(1.0, 1).is_err());
    assert!(PrivUnit2::new(10, 1.0, 0.8).is_err());
    assert!(PrivUnit2::new(10, 0.2, 1.0).is_err());
    assert!(PrivUnit2::new(10, 0.2, 0.3).is_err());
    assert!(PrivUnit2::paper000(4.0, 4.0, 10).is_err());
    let m = PrivUnit2::optimized(2.0, 3).unwrap();
    let g = PrivUnitG::optimized(2.0, 3).unwrap();
    for bad in [
        vec![0.0, 0.0, 0.0],
        vec![1.0, 0.0],
        vec![f64::NAN, 0.0, 0.0],
        vec![2.0, 0.0, 0.0],
        vec![],
    ] {
        assert!(m.privatize(&bad, &mut rng).is_err(), "{bad:?}");
        assert!(g.privatize(&bad, &mut rng).is_err(), "{bad:?}");
    }
    let mut short = vec![0.0; 2];
    assert!(
        m.privatize_into(&[1.0, 0.0, 0.0], &mut short, &mut rng)
            .is_err()
    );
}

//! The audit suite: every covered mechanism, audited at its own claimed ε on its worst-case
//! neighbours, is not flagged; and a planted bug in *test code* (the mechanism run at a larger ε
//! than claimed, or its noise calibrated to the radius where the diameter belongs) is caught.
//!
//! Error rates. Each audit flags a true claim with probability at most `ALPHA = 10⁻³` (the
//! verdict's confidence, `privfed_audit::randomizer::evaluate`); the 15 honest audits here keep
//! the family-wise false-positive rate below 1.5%, and at the fixed seeds the outcome is
//! deterministic. Sample sizes come from the power calculation
//! `privfed_audit::distinguish::samples_for_power` for a miss rate `BETA = 10⁻³` against the
//! planted bug, plus a 50% margin for the split's threshold choice: each test asserts that its
//! `N` is at least that, so a change that weakens the design fails here, not silently.

use privfed_audit::distinguish::samples_for_power;
use privfed_audit::randomizer::{
    AuditReport, Claim, NeighbourPair, Side, Statistic, evaluate, sample, worst_case_pair,
};
use privfed_mechanisms::domain::Domain;
use privfed_mechanisms::gaussian::Gaussian;
use privfed_mechanisms::grid_rr::GridRr;
use privfed_mechanisms::laplace::{Laplace, sample_laplace};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_mechanisms::{
    AnyRandomizer, LocalRandomizer, MechanismError, bitwise_rr::BitwiseRr, mvu::Mvu,
    privunit_inf::PrivUnitInf, privunit2::PrivUnit2, privunitg::PrivUnitG, separated::Separated,
};

/// False-positive rate of one audit.
const ALPHA: f64 = 1e-3;
/// Miss rate the sample sizes are designed for.
const BETA: f64 = 1e-3;
/// The significance of each Clopper–Pearson bound inside a verdict: finite outputs split `α`
/// between the distinguishing and the histogram test, and each test splits its share between
/// the TPR and FPR bounds.
const ALPHA_PER_BOUND_DISCRETE: f64 = ALPHA / 4.0;
const ALPHA_PER_BOUND_CONTINUOUS: f64 = ALPHA / 2.0;

/// Samples both sides with `privatize` at `seed` and evaluates `claim`.
fn audit<F>(pair: &NeighbourPair, n: usize, seed: u64, claim: Claim, privatize: F) -> AuditReport
where
    F: Fn(&[f64], &mut [f64], &mut ExperimentRng) -> Result<(), MechanismError>,
{
    let mut rng = seeded_rng_for_experiments(seed);
    let ox = sample(pair, Side::X, n, &privatize, &mut rng).unwrap();
    let oxp = sample(pair, Side::XPrime, n, &privatize, &mut rng).unwrap();
    evaluate(pair, &ox, &oxp, claim, ALPHA).unwrap()
}

/// The power requirement: `n` per side is at least 1.5× the calculation for an event with
/// `tpr` at the bug's ε (`fpr = tpr·e^{−ε_bug}` for the tight pure-DP events).
fn assert_powered(n: usize, tpr: f64, fpr: f64, delta: f64, claim: f64, alpha_per_bound: f64) {
    let need = samples_for_power(tpr, fpr, delta, claim, alpha_per_bound, BETA)
        .expect("the bug must exceed the claim");
    assert!(
        n as f64 >= 1.5 * need as f64,
        "n = {n} is below 1.5× the power calculation ({need})"
    );
}

/// The honest audit: not flagged, and the bound is reported (and must be positive: a test that
/// finds nothing at all would not be evidence of tightness).
fn holds(name: &str, mech: &AnyRandomizer, n: usize, seed: u64) -> AuditReport {
    let pair = worst_case_pair(mech).unwrap();
    let g = mech.guarantee();
    let claim = Claim {
        epsilon: g.epsilon(),
        delta: g.delta(),
    };
    let r = audit(&pair, n, seed, claim, |x, o, rng| {
        mech.privatize_into(x, o, rng)
    });
    eprintln!(
        "{name}: eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{name}: a true claim was flagged: {r:#?}");
    assert!(r.epsilon_lower_bound > 0.0, "{name}: no evidence at all");
    if let Some(h) = &r.histogram
        && let Some(exact) = h.delta_exact
    {
        // The estimate agrees with the exact δ(ε) of the mechanism's pmf within its tolerance.
        assert!(
            (h.delta_hat - exact).abs() <= h.tolerance,
            "{name}: δ̂ = {} vs exact {exact} ± {}",
            h.delta_hat,
            h.tolerance
        );
    }
    r
}

/// The planted bug: `buggy` privatizes in place of `honest` on the honest mechanism's
/// worst-case pair, and the honest claim must be flagged.
fn caught<F>(name: &str, honest: &AnyRandomizer, n: usize, seed: u64, buggy: F) -> AuditReport
where
    F: Fn(&[f64], &mut [f64], &mut ExperimentRng) -> Result<(), MechanismError>,
{
    let pair = worst_case_pair(honest).unwrap();
    let g = honest.guarantee();
    let claim = Claim {
        epsilon: g.epsilon(),
        delta: g.delta(),
    };
    let r = audit(&pair, n, seed, claim, buggy);
    eprintln!(
        "{name} (planted bug): eps_lb = {:.4} > claim {:.4}: {}",
        r.epsilon_lower_bound, claim.epsilon, r.violation
    );
    assert!(r.violation, "{name}: the planted bug was missed: {r:#?}");
    r
}

fn any(m: impl Into<AnyRandomizer>) -> AnyRandomizer {
    m.into()
}

/// GRR on 8 points at ε = 1; bug: run at ε = 1.5. The worst event is `{output = x's point}` with
/// `TPR = e^ε/(e^ε + 7)`.
#[test]
fn grr() {
    let n = 40_000;
    let honest = any(GridRr::unbiased_grr(1.0, 3, -1.0, 1.0).unwrap());
    let bug = GridRr::unbiased_grr(1.5, 3, -1.0, 1.0).unwrap();
    let tpr = bug.keep_probability();
    assert_powered(
        n,
        tpr,
        bug.other_probability(),
        0.0,
        1.0,
        ALPHA_PER_BOUND_DISCRETE,
    );
    holds("grr", &honest, n, 1);
    let AnyRandomizer::GridRr(h) = &honest else {
        unreachable!()
    };
    // The device encodes at ε = 1.5, the server decodes for the claimed ε = 1: the outputs stay
    // in the claimed alphabet, so the histogram test sees them too.
    caught("grr", &honest, n, 2, |x, o, r| {
        o[0] = h.decode(bug.encode(x[0], r)?)?;
        Ok(())
    });
}

/// ScalarDP at ε = 1 on [0, 1]; bug: ε = 1.5.
#[test]
fn scalar_dp() {
    let n = 40_000;
    let honest = any(GridRr::scalar_dp(1.0, 1.0).unwrap());
    let g = GridRr::scalar_dp(1.0, 1.0).unwrap().num_points() - 1;
    let bug = GridRr::scalar_dp_with_k(1.5, 1.0, g).unwrap();
    assert_powered(
        n,
        bug.keep_probability(),
        bug.other_probability(),
        0.0,
        1.0,
        ALPHA_PER_BOUND_DISCRETE,
    );
    holds("scalar-dp", &honest, n, 3);
    let AnyRandomizer::GridRr(h) = &honest else {
        unreachable!()
    };
    caught("scalar-dp", &honest, n, 4, |x, o, r| {
        o[0] = h.decode(bug.encode(x[0], r)?)?;
        Ok(())
    });
}

/// Unbiased bitwise RR, 3 bits, ε = 1 in total; bug: ε = 1.5. The worst pair flips every bit:
/// `TPR = (1 − f)³`, `FPR = f³`.
#[test]
fn bitwise_rr() {
    let n = 60_000;
    let honest = any(BitwiseRr::new(1.0, 3, 0.0, 1.0).unwrap());
    let bug = BitwiseRr::new(1.5, 3, 0.0, 1.0).unwrap();
    let f = bug.flip_probability();
    assert_powered(
        n,
        (1.0 - f).powi(3),
        f.powi(3),
        0.0,
        1.0,
        ALPHA_PER_BOUND_DISCRETE,
    );
    holds("bitwise-rr", &honest, n, 5);
    let AnyRandomizer::BitwiseRr(h) = &honest else {
        unreachable!()
    };
    caught("bitwise-rr", &honest, n, 6, |x, o, r| {
        o[0] = h.decode(bug.encode(x[0], r)?)?;
        Ok(())
    });
}

/// An MVU design (2 input bits, 2 output bits, ε = 1, from the designer); bug: the design for
/// ε = 1.5 on the same grid.
#[test]
fn mvu() {
    use privfed_compression::designer::{DesignOptions, design_mvu};
    use privfed_mechanisms::mvu::DpConstraint;
    let n = 60_000;
    let design = |e: f64| {
        let d = design_mvu(2, 2, e, DpConstraint::Ldp, &DesignOptions::default())
            .unwrap()
            .design;
        Mvu::new(d, 0.0, 1.0).unwrap()
    };
    let honest = any(design(1.0));
    let bug = design(1.5);
    // Power: the bug's worst event, from its exact pmfs on the honest worst-case pair.
    let pair = worst_case_pair(&honest).unwrap();
    let (px, pxp) = (
        bug.pmf(pair.x[0]).unwrap(),
        bug.pmf(pair.x_prime[0]).unwrap(),
    );
    let (tpr, fpr) = px
        .iter()
        .zip(&pxp)
        .map(|(&a, &b)| if a / b >= 1.0 { (a, b) } else { (b, a) })
        .max_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)))
        .unwrap();
    assert_powered(n, tpr, fpr, 0.0, 1.0, ALPHA_PER_BOUND_DISCRETE);
    holds("mvu", &honest, n, 7);
    let AnyRandomizer::Mvu(h) = &honest else {
        unreachable!()
    };
    caught("mvu", &honest, n, 8, |x, o, r| {
        o[0] = h.decode(bug.encode(x[0], r)?)?;
        Ok(())
    });
}

/// Vector MVU (paper 004 Lemma 6): d = 2, an ℓ1 metric design from the designer (2 input bits,
/// 2 output bits, metric ε = 1.5) on the ℓ1 ball of radius 1 with dither bound `R = 1 + h/2`
/// (h = 2/3: the smallest bound at which `±e₁` can run, their second coordinate dithers to
/// `±h/2`), claim `ε = 1.5·R` = 2. The pair is the worst for the **marginal** law
/// (`mvu_vector_pair`: the dither summed out); its exact ε is below the claim, which bounds the
/// ratio given the dither. Bug: the design for metric ε = 3 on the same grid, its letters
/// decoded by the honest design.
#[test]
fn mvu_vector() {
    use privfed_audit::randomizer::mvu_vector_pair;
    use privfed_compression::designer::{DesignOptions, design_mvu};
    use privfed_mechanisms::mvu::{DpConstraint, MvuVector};
    let n = 30_000;
    let bound = 1.0 + 1.0 / 3.0;
    let make = |e: f64| {
        let d = design_mvu(
            2,
            2,
            e,
            DpConstraint::Metric { power: 1 },
            &DesignOptions::default(),
        )
        .unwrap()
        .design;
        MvuVector::new(d, 2, 1.0, bound, 1000).unwrap()
    };
    let (honest, bug) = (make(1.5), make(3.0));
    let pair = mvu_vector_pair(&honest).unwrap();
    eprintln!(
        "mvu-vector pair: {:?} vs {:?}: {}",
        pair.x, pair.x_prime, pair.rationale
    );
    let claim = Claim {
        epsilon: honest.epsilon(),
        delta: 0.0,
    };
    let Statistic::OutcomeVector {
        pmf_x, pmf_x_prime, ..
    } = &pair.statistic
    else {
        unreachable!()
    };
    // The marginal pair's exact ε is at most the claim (Lemma 6 holds for the marginal) and
    // positive.
    let exact = privfed_audit::histogram::exact_epsilon(pmf_x, pmf_x_prime).unwrap();
    assert!(
        exact > 0.0 && exact <= claim.epsilon + 1e-12,
        "{exact} vs {claim:?}"
    );
    // The dither matters: the antipodal grid points ±e₁ dither their first coordinate not at
    // all, and their second (0) alike, so they reach only the rows' end-to-end ratio, the
    // metric ε; the searched pair reaches the claim (its zero coordinates dither outwards to
    // ±h/2, so its dithered vectors are 2R apart in ℓ1).
    let ends = privfed_audit::histogram::exact_epsilon(
        &honest.pmf(&[1.0, 0.0]).unwrap(),
        &honest.pmf(&[-1.0, 0.0]).unwrap(),
    )
    .unwrap();
    let metric = honest.scalar().metric_epsilon();
    eprintln!("mvu-vector: exact ε of ±e1 = {ends:.4}, metric ε = {metric:.4}");
    assert!((ends - metric).abs() < 1e-9, "{ends} vs {metric}");
    assert!(exact > ends + 0.4, "{exact} vs {ends}");
    // Power: the bug's best single outcome on the pair, from its exact marginal laws.
    let (bx, bxp) = (bug.pmf(&pair.x).unwrap(), bug.pmf(&pair.x_prime).unwrap());
    let (tpr, fpr) = bx
        .iter()
        .zip(&bxp)
        .map(|(&a, &b)| if a / b >= 1.0 { (a, b) } else { (b, a) })
        .max_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)))
        .unwrap();
    assert_powered(n, tpr, fpr, 0.0, claim.epsilon, ALPHA_PER_BOUND_DISCRETE);
    let r = audit(&pair, n, 31, claim, |x, o, rng| {
        honest.privatize_into(x, o, rng).map(|_| ())
    });
    eprintln!(
        "mvu-vector: eps_lb = {:.4}, exact marginal {exact:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "mvu-vector: a true claim was flagged: {r:#?}");
    assert!(r.epsilon_lower_bound > 0.0);
    let h = r.histogram.as_ref().unwrap();
    let want = h.delta_exact.unwrap();
    assert!((h.delta_hat - want).abs() <= h.tolerance, "{h:?}");
    let letter = |v: &MvuVector, z: f64| {
        (0..4)
            .find(|&j| v.scalar().decode(j).is_ok_and(|a| a == z))
            .ok_or(MechanismError::Numerical("not a letter".into()))
    };
    let r = audit(&pair, n, 32, claim, |x, o, rng| {
        bug.privatize_into(x, o, rng)?;
        for v in o.iter_mut() {
            *v = honest.scalar().decode(letter(&bug, *v)?)?;
        }
        Ok(())
    });
    eprintln!(
        "mvu-vector (planted bug): eps_lb = {:.4} > claim {:.4}: {}",
        r.epsilon_lower_bound, claim.epsilon, r.violation
    );
    assert!(
        r.violation,
        "mvu-vector: the planted bug was missed: {r:#?}"
    );
}

/// Laplace on the 1-D ℓ1 ball of radius 1 (x = ±1, Δ₁ = 2), ε = 1; bug: the scale calibrated
/// to the radius instead of the diameter (`b = 1/ε`, effectively ε = 2). Event `{z ≥ 1}`:
/// `TPR = ½`, `FPR = ½e^{−ε}`.
#[test]
fn laplace() {
    let n = 20_000;
    let ball = |r: f64| Domain::L1Ball { dim: 1, radius: r };
    let honest = any(Laplace::new(1.0, ball(1.0)).unwrap());
    let bug = Laplace::new(1.0, ball(0.5)).unwrap();
    assert_powered(
        n,
        0.5,
        0.5 * (-2.0f64).exp(),
        0.0,
        1.0,
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    holds("laplace", &honest, n, 9);
    let b_bug = bug.scale();
    caught("laplace", &honest, n, 10, |x, o, r| {
        o[0] = x[0] + sample_laplace(r, b_bug);
        Ok(())
    });
}

/// Gaussian on the 1-D ℓ2 ball of radius 1 at (ε, δ) = (2, 10⁻⁵); bug: σ calibrated to the
/// radius instead of the diameter (σ/2). Black-box auditing of a Gaussian at small δ is loose
/// (the best event sits where FPR is ~10⁻³); the power calculation takes the event
/// `{z ≥ 4.5}` of the bug (`TPR = Q((4.5 − 1)/(σ/2))`, `FPR = Q((4.5 + 1)/(σ/2))`).
#[test]
fn gaussian() {
    let n = 200_000;
    let ball = Domain::L2Ball {
        dim: 1,
        radius: 1.0,
    };
    let g = Gaussian::new(2.0, 1e-5, ball).unwrap();
    let sigma_bug = g.sigma() / 2.0;
    let q = |t: f64| privfed_special::norm_sf(t);
    assert_powered(
        n,
        q((4.5 - 1.0) / sigma_bug),
        q((4.5 + 1.0) / sigma_bug),
        1e-5,
        g.guarantee().epsilon(),
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    let bug = Gaussian::with_sigma(sigma_bug, 1e-5, ball).unwrap();
    let honest = any(g);
    let r = holds("gaussian", &honest, n, 11);
    // The GDP view: μ_lb is a rigorous lower bound on μ = Δ/σ.
    let gdp = r
        .gdp
        .expect("continuous audits with δ > 0 report the GDP view");
    let mu = 2.0 / honest_sigma(&honest);
    assert!(
        gdp.bound.mu_lower_bound <= mu,
        "{} > {mu}",
        gdp.bound.mu_lower_bound
    );
    eprintln!(
        "gaussian: mu_lb = {:.4}, mu = {mu:.4}",
        gdp.bound.mu_lower_bound
    );
    caught("gaussian", &honest, n, 12, |x, o, r| {
        bug.privatize_into(x, o, r)
    });
}

fn honest_sigma(m: &AnyRandomizer) -> f64 {
    match m {
        AnyRandomizer::Gaussian(g) => g.sigma(),
        _ => unreachable!(),
    }
}

/// PrivUnit2 in d = 16 at ε = 2; bug: ε = 3. The cap of x has `TPR = p`, `FPR = p·e^{−ε}`.
#[test]
fn privunit2() {
    let n = 40_000;
    let honest = any(PrivUnit2::optimized(2.0, 16).unwrap());
    let bug = PrivUnit2::optimized(3.0, 16).unwrap();
    let p = bug.p();
    assert_powered(
        n,
        p,
        p * (-3.0f64).exp(),
        0.0,
        2.0,
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    holds("privunit2", &honest, n, 13);
    caught("privunit2", &honest, n, 14, |x, o, r| {
        bug.privatize_into(x, o, r)
    });
}

/// PrivUnitG in d = 16 at ε = 2; bug: ε = 3.
#[test]
fn privunitg() {
    let n = 40_000;
    let honest = any(PrivUnitG::optimized(2.0, 16).unwrap());
    let bug = PrivUnitG::optimized(3.0, 16).unwrap();
    let p = bug.p();
    assert_powered(
        n,
        p,
        p * (-3.0f64).exp(),
        0.0,
        2.0,
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    holds("privunitg", &honest, n, 15);
    caught("privunitg", &honest, n, 16, |x, o, r| {
        bug.privatize_into(x, o, r)
    });
}

/// PrivUnitInf in d = 8 at ε = 2; bug: ε = 3.
#[test]
fn privunit_inf() {
    let n = 40_000;
    let honest = any(PrivUnitInf::optimized(2.0, 8).unwrap());
    let bug = PrivUnitInf::optimized(3.0, 8).unwrap();
    let p = bug.p();
    assert_powered(
        n,
        p,
        p * (-3.0f64).exp(),
        0.0,
        2.0,
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    holds("privunit-inf", &honest, n, 17);
    caught("privunit-inf", &honest, n, 18, |x, o, r| {
        bug.privatize_into(x, o, r)
    });
}

/// Separated in d = 8: direction ε₁ = 1.8, magnitude ε₂ = 0.2 (total 2); bug: direction at
/// ε₁ = 2.8. The worst event is (x's cap, top magnitude), `TPR = p_dir·p_keep`.
#[test]
fn separated() {
    let n = 60_000;
    let honest = any(Separated::new(1.8, 0.2, 8, 1.0).unwrap());
    let bug = Separated::new(2.8, 0.2, 8, 1.0).unwrap();
    let tpr = bug.direction().p() * bug.magnitude().keep_probability();
    assert_powered(
        n,
        tpr,
        tpr * (-3.0f64).exp(),
        0.0,
        2.0,
        ALPHA_PER_BOUND_DISCRETE,
    );
    holds("separated", &honest, n, 19);
    caught("separated", &honest, n, 20, |x, o, r| {
        bug.privatize_into(x, o, r)
    });
}

/// The one-dimensional Skellam mechanism (sensitivity 1) with μ calibrated by the PLD
/// accountant to (ε, δ) = (2, 10⁻⁵); bug: the variance calibrated for sensitivity ½ (μ/4:
/// "the radius where the diameter belongs" again). Like the Gaussian, black-box auditing at
/// small δ is loose; the power calculation takes the bug's event `{z ≥ 4}` from the exact pmf.
#[test]
fn skellam() {
    use privfed_accounting::calibrate::{AccountantKind, calibrate_skellam_variance, epsilon_of};
    use privfed_accounting::{DpEvent, skellam::skellam_ln_pmf};
    use privfed_audit::randomizer::skellam_pair;
    use privfed_mechanisms::skellam::Skellam;
    let n = 240_000;
    let cal = calibrate_skellam_variance(AccountantKind::Pld, 2.0, 1e-5, 1.0, 1.0, 1.0, 1).unwrap();
    let mu = cal.parameter;
    let event = DpEvent::Skellam {
        mu,
        l1_sensitivity: 1.0,
        l2_sensitivity: 1.0,
    };
    let claim = Claim {
        epsilon: epsilon_of(AccountantKind::Pld, &event, 1e-5).unwrap(),
        delta: 1e-5,
    };
    // Independent check of the accountant: the exact δ(ε_claim) of the pair, from the pmf
    // on [−200, 201] (the rest is below 10⁻³⁰⁰), is at most δ and not far below it.
    let lp0 = skellam_ln_pmf(mu, 202).unwrap();
    let p0 = |k: i64| lp0[k.unsigned_abs() as usize].exp();
    let (px, pxp): (Vec<f64>, Vec<f64>) = (-200..=201).map(|z| (p0(z), p0(z - 1))).unzip();
    let exact = privfed_audit::histogram::exact_delta(&px, &pxp, claim.epsilon).unwrap();
    eprintln!("skellam: exact delta at the claimed eps = {exact:e}");
    assert!(exact <= 1e-5 * (1.0 + 1e-6) && exact > 0.5e-5, "{exact}");
    let pair = skellam_pair(mu, 1).unwrap();
    // Power: the bug Sk(μ/4) on x = 0 vs 1, event {z ≥ t}: P_x = P(k ≥ t), P_x′ = P(k ≥ t − 1).
    let mu_bug = mu / 4.0;
    let lp = skellam_ln_pmf(mu_bug, 400).unwrap();
    let sf = |t: i64| -> f64 {
        // P(k ≥ t) for t ≥ 1 by symmetry of the table.
        0.5 * (1.0 - lp[0].exp()) - (1..t).map(|j| lp[j as usize].exp()).sum::<f64>()
    };
    // x′ = 1 is the numerator side of {z ≥ t}; the calculation takes the best t.
    let t = (1..30)
        .filter_map(|t| {
            samples_for_power(
                sf(t - 1),
                sf(t),
                1e-5,
                claim.epsilon,
                ALPHA_PER_BOUND_DISCRETE,
                BETA,
            )
            .map(|need| (need, t))
        })
        .min()
        .unwrap()
        .1;
    eprintln!("skellam: mu = {mu:.4}, power event z >= {t}");
    assert_powered(
        n,
        sf(t - 1),
        sf(t),
        1e-5,
        claim.epsilon,
        ALPHA_PER_BOUND_DISCRETE,
    );
    let honest = Skellam::new(mu).unwrap();
    let bug = Skellam::new(mu_bug).unwrap();
    let r = audit(&pair, n, 21, claim, |x, o, rng| {
        o[0] = x[0] + honest.sample(rng) as f64;
        Ok(())
    });
    eprintln!(
        "skellam (mu = {mu:.3}): eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{r:#?}");
    assert!(r.epsilon_lower_bound > 0.0);
    let h = r.histogram.as_ref().unwrap();
    let exact = h.delta_exact.unwrap();
    assert!((h.delta_hat - exact).abs() <= h.tolerance, "{h:?}");
    let rb = audit(&pair, n, 22, claim, |x, o, rng| {
        o[0] = x[0] + bug.sample(rng) as f64;
        Ok(())
    });
    eprintln!(
        "skellam (planted bug, mu/4): eps_lb = {:.4} > claim {:.4}: {}",
        rb.epsilon_lower_bound, claim.epsilon, rb.violation
    );
    assert!(rb.violation, "{rb:#?}");
}

/// The best event `{z ≥ t}` (or `{z ≤ t}`) of an integer-binned pair: the `(tpr, fpr)` of the
/// tail bin set needing the fewest samples to flag `claim`, from the exact bin pmfs.
fn best_tail_event(pair: &NeighbourPair, delta: f64, claim: f64) -> (f64, f64) {
    let Statistic::IntegerBins {
        pmf_x, pmf_x_prime, ..
    } = &pair.statistic
    else {
        unreachable!()
    };
    let mut best: Option<(u64, f64, f64)> = None;
    for (num, den) in [(pmf_x_prime, pmf_x), (pmf_x, pmf_x_prime)] {
        for t in 1..num.len() {
            // Upper tail for x′ (shifted up), lower tail for x.
            let (a, b) = if std::ptr::eq(num, pmf_x_prime) {
                (num[t..].iter().sum::<f64>(), den[t..].iter().sum::<f64>())
            } else {
                (num[..t].iter().sum::<f64>(), den[..t].iter().sum::<f64>())
            };
            if let Some(need) =
                samples_for_power(a, b, delta, claim, ALPHA_PER_BOUND_DISCRETE, BETA)
                && best.is_none_or(|(n, _, _)| need < n)
            {
                best = Some((need, a, b));
            }
        }
    }
    let (need, a, b) = best.expect("the bug must exceed the claim");
    eprintln!("power: event tpr = {a:.3e}, fpr = {b:.3e}, {need} samples per input");
    (a, b)
}

/// The distributed discrete Gaussian in one dimension: 5 clients each add `N_ℤ(0, σ_local²)`,
/// σ_local calibrated by the RDP accountant (the one that accounts DDG) to (ε, δ) = (2, 10⁻⁵),
/// sensitivity 1; bug: a dropped noise term — only one client's share is added (central
/// variance σ_local² instead of 5σ_local²). The
/// exact pmf of the sum gives the histogram test's δ(ε) and, independently of the audit, checks
/// that the accountant's claim holds for the pair: exact δ(ε_claim) ≤ δ (the RDP bound is loose,
/// so the black-box bound sits further below the claim than Skellam's).
#[test]
fn ddg() {
    use privfed_accounting::calibrate::{AccountantKind, calibrate_parameter, epsilon_of};
    use privfed_audit::randomizer::{ddg_event, ddg_pair};
    use privfed_mechanisms::discrete_gaussian::DiscreteGaussian;
    let (clients, delta) = (5, 1e-5);
    let n = 100_000;
    let cal = calibrate_parameter(AccountantKind::Rdp, 2.0, delta, |s2| {
        ddg_event(clients, s2, 1).expect("valid parameters")
    })
    .unwrap();
    let honest = DiscreteGaussian::new(cal.parameter).unwrap();
    let s2 = honest.sigma2();
    let claim = Claim {
        epsilon: epsilon_of(
            AccountantKind::Rdp,
            &ddg_event(clients, s2, 1).unwrap(),
            delta,
        )
        .unwrap(),
        delta,
    };
    let pair = ddg_pair(clients, s2, 1).unwrap();
    let Statistic::IntegerBins {
        pmf_x, pmf_x_prime, ..
    } = &pair.statistic
    else {
        unreachable!()
    };
    let exact = privfed_audit::histogram::exact_delta(pmf_x, pmf_x_prime, claim.epsilon).unwrap();
    eprintln!(
        "ddg: local sigma2 = {s2:.4}, claim eps = {:.4}, exact delta at the claim = {exact:e}",
        claim.epsilon
    );
    assert!(exact <= delta, "{exact}");
    // The bug: the shares of all clients but one are dropped (a dropped noise term).
    let bug_pair = ddg_pair(1, s2, 1).unwrap();
    let (tpr, fpr) = best_tail_event(&bug_pair, delta, claim.epsilon);
    assert_powered(n, tpr, fpr, delta, claim.epsilon, ALPHA_PER_BOUND_DISCRETE);
    let run = |shares: usize| {
        move |x: &[f64], o: &mut [f64], rng: &mut ExperimentRng| {
            o[0] = x[0] + (0..shares).map(|_| honest.sample(rng)).sum::<i64>() as f64;
            Ok(())
        }
    };
    let r = audit(&pair, n, 23, claim, run(clients));
    eprintln!(
        "ddg: eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{r:#?}");
    assert!(r.epsilon_lower_bound > 0.0);
    let h = r.histogram.as_ref().unwrap();
    assert!(
        (h.delta_hat - h.delta_exact.unwrap()).abs() <= h.tolerance,
        "{h:?}"
    );
    let rb = audit(&pair, n, 24, claim, run(1));
    eprintln!(
        "ddg (planted bug, one share of {clients}): eps_lb = {:.4} > claim {:.4}: {}",
        rb.epsilon_lower_bound, claim.epsilon, rb.violation
    );
    assert!(rb.violation, "{rb:#?}");
}

/// The Draw-and-Discard client update (`privfed_ddml::client`), against adversary I of
/// docs/ALGORITHMS.md §4.3 (the channel listener, who sees the model `B` sent and the update
/// `B′ = B − γ·clip(G) + Lap(b)` returned): ε-DP of the whole update for
/// `PrivacyUnit::Model` (ℓ1 sensitivity `2γp`, `b = 2γp/ε`). Worst-case neighbours: `B = 0`
/// and average gradients `G = 𝟙` and `G′ = −𝟙`, which clip to the two ends of `[−1, 1]^p`: the
/// released means are `∓γ·𝟙`, at ℓ1 distance `2γp`, the sensitivity. Statistic: the Laplace log
/// likelihood ratio around those means. `p = 2`, `γ = 0.001` (paper 003's), ε = 1; bug: the
/// per-weight scale `2γ/ε` (`PrivacyUnit::Feature`'s) released under the model-level claim, so
/// the update is `pε`-DP. Worst event: both coordinates on `x`'s side, `TPR = ¼`,
/// `FPR = ¼·e^{−2}` under the bug.
#[test]
fn draw_and_discard_client_update() {
    use privfed_ddml::client::{ClientNoise, ClientStep, PrivacyUnit};
    let (gamma, p, eps) = (0.001, 2, 1.0);
    let n = 20_000;
    let noise = ClientNoise::Laplace { epsilon: eps };
    let honest = ClientStep::new(gamma, noise, PrivacyUnit::Model, p).unwrap();
    let bug = ClientStep::new(gamma, noise, PrivacyUnit::Feature, p).unwrap();
    assert!((honest.noise_scale() - 2.0 * gamma * p as f64 / eps).abs() < 1e-15);
    let g = honest.guarantee().unwrap();
    let claim = Claim {
        epsilon: g.epsilon(),
        delta: g.delta(),
    };
    assert_powered(
        n,
        0.25,
        0.25 * (-2.0f64).exp(),
        0.0,
        eps,
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    let pair = NeighbourPair {
        x: vec![-gamma; p],
        x_prime: vec![gamma; p],
        statistic: Statistic::LaplaceLlr,
        rationale: "B = 0, G = 1 vs G' = -1 (released means -γ·1 and +γ·1)".into(),
    };
    // The input of a side is the released mean `−γ·G`; the client gets `G = −mean/γ`.
    let run = |step: ClientStep| {
        move |mean: &[f64], o: &mut [f64], rng: &mut ExperimentRng| {
            let grad: Vec<f64> = mean.iter().map(|m| -m / gamma).collect();
            let z = step
                .privatize_step(&vec![0.0; mean.len()], &grad, rng)
                .expect("valid inputs");
            o.copy_from_slice(&z);
            Ok(())
        }
    };
    let r = audit(&pair, n, 25, claim, run(honest));
    eprintln!(
        "draw-and-discard: eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{r:#?}");
    assert!(r.epsilon_lower_bound > 0.0);
    let rb = audit(&pair, n, 26, claim, run(bug));
    eprintln!(
        "draw-and-discard (planted bug, per-weight scale): eps_lb = {:.4} > claim {:.4}: {}",
        rb.epsilon_lower_bound, claim.epsilon, rb.violation
    );
    assert!(rb.violation, "{rb:#?}");
}

/// The central projection mechanism (`privfed_mechanisms::central::CentralGaussian`, the
/// DP-FedAvg step: `Σ_i Π_M(u_i)/(qN) + N(0, (zM/(qN))² I)`), one unsampled round (`q = 1`,
/// `N = 4`, `d = 2`, `M = 1`), `z` calibrated by the PLD accountant to (ε, δ) = (2, 10⁻⁵); the
/// claim is the accountant's ε of `DpEvent::Gaussian { z }`. Neighbours (add/remove, the
/// accountant's relation): three fixed clients, with and without a fourth whose update is
/// `3M·e₁` — far outside the ball, so that the projection is what bounds it. As means, `x` is
/// the average without the client and `x′` adds `Π_M(3M·e₁)/(qN) = e₁/4`: ℓ2 distance `M/(qN)`,
/// the sensitivity. Statistic `⟨z, x − x′⟩` (Neyman–Pearson optimal). Bug: the projection
/// skipped (the update added unclipped: three times the sensitivity); the power calculation
/// takes the bug's best event `{⟨z, e₁⟩ ≥ t}` on a grid of `t`.
#[test]
fn central_projection() {
    use privfed_accounting::DpEvent;
    use privfed_accounting::calibrate::{AccountantKind, calibrate_noise_multiplier, epsilon_of};
    use privfed_mechanisms::central::CentralGaussian;
    let (d, qn, m, delta) = (2usize, 4.0f64, 1.0f64, 1e-5);
    let n = 40_000;
    let z = calibrate_noise_multiplier(AccountantKind::Pld, 2.0, delta, 1.0, 1)
        .unwrap()
        .parameter;
    let claim = Claim {
        epsilon: epsilon_of(
            AccountantKind::Pld,
            &DpEvent::Gaussian {
                noise_multiplier: z,
            },
            delta,
        )
        .unwrap(),
        delta,
    };
    let central = CentralGaussian::new(m, z).unwrap();
    let sigma = central.noise_std(qn);
    let others = [vec![0.3, -0.2], vec![-0.5, 0.1], vec![0.2, 0.4]];
    let base: Vec<f64> = (0..d)
        .map(|j| others.iter().map(|u| u[j]).sum::<f64>() / qn)
        .collect();
    let big = vec![3.0 * m, 0.0];
    let mut with = base.clone();
    with[0] += m / qn;
    // Power: under the bug the client moves the mean by 3M/(qN) along e₁.
    let shift = 3.0 * m / qn;
    let q = privfed_special::norm_sf;
    let (tpr, fpr) = (0..40)
        .map(|i| i as f64 * 0.25 * sigma)
        .filter_map(|t| {
            let (a, b) = (q((t - shift) / sigma), q(t / sigma));
            samples_for_power(a, b, delta, claim.epsilon, ALPHA_PER_BOUND_CONTINUOUS, BETA)
                .map(|need| (need, a, b))
        })
        .min_by_key(|v| v.0)
        .map(|(_, a, b)| (a, b))
        .unwrap();
    assert_powered(
        n,
        tpr,
        fpr,
        delta,
        claim.epsilon,
        ALPHA_PER_BOUND_CONTINUOUS,
    );
    let pair = NeighbourPair {
        x: base.clone(),
        x_prime: with,
        statistic: Statistic::Projection,
        rationale: "three fixed clients, without / with a fourth at 3M·e1".into(),
    };
    // The input of a side is the mean it stands for: `x` (the base) runs the three clients,
    // `x′` the four. `project` decides whether the fourth is projected.
    let run = |project: bool| {
        let (central, others, big, base) = (central, others.clone(), big.clone(), base.clone());
        move |mean: &[f64], o: &mut [f64], rng: &mut ExperimentRng| {
            let mut batch: Vec<Vec<f64>> = others.to_vec();
            if mean != base.as_slice() {
                batch.push(big.clone());
            }
            let agg = if project {
                central.aggregate(&batch, d, qn, rng)?
            } else {
                // The bug: the sum of the raw updates plus the same noise.
                let mut noise = CentralGaussian::new(m, z)?.aggregate(
                    std::iter::empty::<&[f64]>(),
                    d,
                    qn,
                    rng,
                )?;
                for u in &batch {
                    noise.iter_mut().zip(u).for_each(|(v, ui)| *v += ui / qn);
                }
                noise
            };
            o.copy_from_slice(&agg);
            Ok(())
        }
    };
    let r = audit(&pair, n, 27, claim, run(true));
    eprintln!(
        "central: z = {z:.4}, eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{r:#?}");
    assert!(r.epsilon_lower_bound > 0.0);
    let rb = audit(&pair, n, 28, claim, run(false));
    eprintln!(
        "central (planted bug, no projection): eps_lb = {:.4} > claim {:.4}: {}",
        rb.epsilon_lower_bound, claim.epsilon, rb.violation
    );
    assert!(rb.violation, "{rb:#?}");
}

//! The methods on privfed's own mechanisms: the histogram estimate against the exact δ(ε) where
//! δ > 0, and the one-run audit on randomized response canaries.

use privfed_audit::histogram::{counts, exact_delta, histogram_test};
use privfed_audit::one_run;
use privfed_audit::randomizer::{Side, Statistic, sample, worst_case_pair};
use privfed_mechanisms::grid_rr::GridRr;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use privfed_mechanisms::{AnyRandomizer, LocalRandomizer};
use rand::RngExt;

/// GRR at ε = 1 on 8 points, δ estimated at ε ∈ {0.25, 0.5, 0.75} where the exact δ is
/// positive: the estimate is within its 99.9% tolerance of the exact value, and the tolerance
/// is small enough to matter (below half the exact δ at ε = 0.25).
#[test]
fn histogram_estimate_agrees_with_the_exact_delta() {
    let mech = AnyRandomizer::GridRr(GridRr::unbiased_grr(1.0, 3, -1.0, 1.0).unwrap());
    let pair = worst_case_pair(&mech).unwrap();
    let Statistic::Outcome {
        outcomes,
        pmf_x,
        pmf_x_prime,
    } = &pair.statistic
    else {
        unreachable!()
    };
    let mut rng = seeded_rng_for_experiments(31);
    let run = |x: &[f64], o: &mut [f64], r: &mut _| mech.privatize_into(x, o, r);
    let n = 100_000;
    let ox = sample(&pair, Side::X, n, run, &mut rng).unwrap();
    let oxp = sample(&pair, Side::XPrime, n, run, &mut rng).unwrap();
    let (cx, cxp) = (
        counts(&ox.outcomes, outcomes).unwrap(),
        counts(&oxp.outcomes, outcomes).unwrap(),
    );
    for eps in [0.25, 0.5, 0.75] {
        let h = histogram_test(&cx, &cxp, Some((pmf_x, pmf_x_prime)), eps, 0.0, 1e-3).unwrap();
        let exact = exact_delta(pmf_x, pmf_x_prime, eps).unwrap();
        assert_eq!(h.delta_exact, Some(exact));
        assert!(
            (h.delta_hat - exact).abs() <= h.tolerance,
            "ε = {eps}: δ̂ = {} vs {exact} ± {}",
            h.delta_hat,
            h.tolerance
        );
        // The claim (ε, 0) is false below the mechanism's ε, and the test says so.
        assert!(h.rejects_claim, "ε = {eps}: {h:?}");
        if eps == 0.25 {
            assert!(h.tolerance < 0.5 * exact, "{} vs {exact}", h.tolerance);
        }
    }
}

/// One run, m = 1000 canaries: canary i is input `hi` (included, `S_i = +1`) or `lo` with
/// probability ½, each privatized once by randomized response (GRR on 2 points); the auditor
/// guesses "included" for the 250 highest outputs and "excluded" for the 250 lowest. At the
/// mechanism's own ε = 1 the one-run bound (α = 0.05) stays below 1; with canaries privatized
/// at ε = 3 (a planted bug) the claim ε = 1 is rejected.
#[test]
fn one_run_audit_of_randomized_response() {
    let m = 1000usize;
    let run = |eps: f64, seed: u64| -> f64 {
        let rr = GridRr::unbiased_grr(eps, 1, 0.0, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(seed);
        let included: Vec<bool> = (0..m).map(|_| rng.random::<bool>()).collect();
        let scores: Vec<f64> = included
            .iter()
            .map(|&s| {
                rr.privatize(&[if s { 1.0 } else { 0.0 }], &mut rng).unwrap()[0]
                    // Ties (two output values) broken by a uniform draw independent of S.
                    + 1e-9 * rng.random::<f64>()
            })
            .collect();
        let (r, v) = one_run::guesses(&scores, &included, 250, 250).unwrap();
        one_run::epsilon_lower_bound(m as u64, r, v, 1e-5, 0.05).unwrap()
    };
    let honest = run(1.0, 5);
    let bug = run(3.0, 6);
    eprintln!("one-run: eps_lb = {honest:.3} (claim 1), planted ε = 3: {bug:.3}");
    assert!(honest <= 1.0 && honest > 0.3, "{honest}");
    assert!(bug > 1.0, "{bug}");
}

/// The paper's unequal-variance reading of the one-shot estimate (Andrew et al. 2024) on the
/// Gaussian mechanism it is proved for: a
/// model delta `Δ = Σ_i c_i + N(0, σ²I)` in `d = 10⁴` dimensions with `k = 1000` random unit
/// canaries (sensitivity 1 each) and `σ = 2`.
///
/// What to expect: `‖Δ‖ ≈ √(k + σ²d) = 202.5`, so the observed cosines are about
/// `N(m, s²)` with `m = 1/‖Δ‖` and `s = σ/‖Δ‖ = 0.988/√d` (slightly narrower than the null
/// `N(0, 1/d)`, which raises ε at small δ), and `m̂` has standard error `s/√k`. The test asserts
/// the estimate lies in the band of `gaussian_pair_epsilon` at `m ± 3.2` standard errors (a
/// false failure about once in 700 seeds), and prints it next to the mechanism's exact ε (the
/// Gaussian mechanism with `μ = 1/σ`): at this `d` the estimate overshoots it, as the variance
/// mismatch predicts — an estimate, not a bound.
#[test]
fn one_shot_estimate_behaves_as_analysed_on_the_gaussian_mechanism() {
    use privfed_audit::gdp::epsilon_for_mu;
    use privfed_audit::one_shot::{
        cosine, gaussian_pair_epsilon, one_shot_epsilon_unequal_variance,
    };
    use privfed_mechanisms::batch::fill_normal;
    use privfed_mechanisms::sampling::uniform_on_sphere;
    let (d, k, sigma, delta) = (10_000usize, 1000usize, 2.0f64, 1e-5);
    let mut rng = seeded_rng_for_experiments(41);
    let canaries: Vec<Vec<f64>> = (0..k)
        .map(|_| uniform_on_sphere(d, &mut rng).unwrap())
        .collect();
    let mut model = vec![0.0; d];
    fill_normal(&mut rng, &mut model);
    model.iter_mut().for_each(|v| *v *= sigma);
    for c in &canaries {
        model.iter_mut().zip(c).for_each(|(m, ci)| *m += ci);
    }
    let cosines: Vec<f64> = canaries
        .iter()
        .map(|c| cosine(c, &model).unwrap())
        .collect();
    let (eps_hat, mean, sd) = one_shot_epsilon_unequal_variance(&cosines, d, delta).unwrap();
    let norm = (k as f64 + sigma * sigma * d as f64).sqrt();
    let (m, s) = (1.0 / norm, sigma / norm);
    let se = s / (k as f64).sqrt();
    let null_sd = 1.0 / (d as f64).sqrt();
    let lo = gaussian_pair_epsilon(m - 3.2 * se, s, 0.0, null_sd, delta).unwrap();
    let hi = gaussian_pair_epsilon(m + 3.2 * se, s, 0.0, null_sd, delta).unwrap();
    eprintln!(
        "one-shot: eps_hat = {eps_hat:.3} (mean {mean:.3e}, sd·√d {:.3}); band [{lo:.3}, {hi:.3}]; \
         the mechanism's exact eps = {:.3}",
        sd / null_sd,
        epsilon_for_mu(1.0 / sigma, delta).unwrap()
    );
    assert!(
        (lo..=hi).contains(&eps_hat),
        "{eps_hat} not in [{lo}, {hi}]"
    );
}

/// The one-shot estimate (`one_shot_epsilon`, the equal-variance μ-GDP reading) is not biased
/// upward on the Gaussian mechanism with a known μ: `K = 100` random unit canaries in `d = 1000`
/// dimensions, each included with probability ½, model delta `Δ = Σ_included c_i + N(0, σ²I)`.
/// With respect to one canary this is the Gaussian mechanism with sensitivity 1 and noise σ,
/// i.e. `μ = 1/σ`, and the true ε is `ε_μ(δ)` at δ = 10⁻⁵.
///
/// The stated tolerance: the estimate's **median** is at most the true ε, i.e.
/// `P(ε̂ > ε) ≤ ½`. Over 400 seeded runs per μ the test rejects when the one-sided
/// Clopper–Pearson lower bound on `P(ε̂ > ε)` at α = 10⁻⁴ exceeds ½ (a false failure at most once
/// in 10⁴ for an estimator that meets the tolerance; expected `P` ≈ 0.45, since the cosines'
/// shift is `√d/‖Δ‖ ≈ 0.98` of μ). The same check on the paper's unequal-variance reading
/// (`one_shot_epsilon_unequal_variance`, null `N(0, 1/d)`) rejects: it is the check's power,
/// and the reason the equal-variance reading is the one reported.
#[test]
fn the_one_shot_estimate_is_not_biased_upward_on_the_gaussian_mechanism() {
    use privfed_audit::clopper_pearson;
    use privfed_audit::gdp::epsilon_for_mu;
    use privfed_audit::one_shot::{cosine, one_shot_epsilon, one_shot_epsilon_unequal_variance};
    use privfed_mechanisms::batch::fill_normal;
    use privfed_mechanisms::sampling::uniform_on_sphere;
    let (d, k, trials, delta, alpha) = (1000usize, 100usize, 400u64, 1e-5, 1e-4);
    for (mu, seed) in [(0.5f64, 51u64), (1.0, 52)] {
        let sigma = 1.0 / mu;
        let truth = epsilon_for_mu(mu, delta).unwrap();
        let mut rng = seeded_rng_for_experiments(seed);
        let (mut above, mut above_unequal, mut sum) = (0u64, 0u64, 0.0);
        for _ in 0..trials {
            let canaries: Vec<Vec<f64>> = (0..k)
                .map(|_| uniform_on_sphere(d, &mut rng).unwrap())
                .collect();
            let included: Vec<bool> = (0..k).map(|_| rng.random_bool(0.5)).collect();
            let mut model = vec![0.0; d];
            fill_normal(&mut rng, &mut model);
            model.iter_mut().for_each(|v| *v *= sigma);
            for (c, _) in canaries.iter().zip(&included).filter(|(_, s)| **s) {
                model.iter_mut().zip(c).for_each(|(m, ci)| *m += ci);
            }
            let cos: Vec<f64> = canaries
                .iter()
                .map(|c| cosine(c, &model).unwrap())
                .collect();
            let pick = |want: bool| -> Vec<f64> {
                cos.iter()
                    .zip(&included)
                    .filter(|(_, s)| **s == want)
                    .map(|(c, _)| *c)
                    .collect()
            };
            let (ins, outs) = (pick(true), pick(false));
            let e = one_shot_epsilon(&ins, &outs, delta).unwrap();
            let (u, _, _) = one_shot_epsilon_unequal_variance(&ins, d, delta).unwrap();
            above += u64::from(e.epsilon > truth);
            above_unequal += u64::from(u > truth);
            sum += e.epsilon;
        }
        let lo = clopper_pearson::lower(above, trials, alpha).unwrap();
        let lo_unequal = clopper_pearson::lower(above_unequal, trials, alpha).unwrap();
        eprintln!(
            "mu = {mu}: true eps {truth:.3}; equal-variance estimate above it in {above}/{trials} \
             (mean {:.3}); unequal-variance above it in {above_unequal}/{trials}",
            sum / trials as f64
        );
        assert!(
            lo <= 0.5,
            "mu = {mu}: P(eps_hat > eps) ≥ {lo} > 1/2 ({above}/{trials})"
        );
        assert!(
            lo_unequal > 0.5,
            "mu = {mu}: the unequal-variance reading was not caught ({above_unequal}/{trials})"
        );
    }
}

/// The known-null one-shot estimate under its null: `k = 50` canaries drawn uniformly on the
/// sphere in `d = 64` dimensions, none inserted, cosines with a fixed model delta. Each cosine has
/// mean 0 and variance exactly `1/d`, so `z = √k·μ̂` is about standard normal and the flag
/// `p < 0.05` fires in 5% of runs. Over 2000 seeded runs the test rejects when the two-sided
/// Clopper–Pearson interval at α = 10⁻⁶ on the flag's rate excludes 0.05 (a false failure at
/// most once in 10⁶ for a correctly stated null, up to the normal approximation of `z`), and
/// when `μ̂`'s sample variance is off `1/k` by more than 5 of its standard errors (`√(2/R)/k`).
#[test]
fn known_null_estimate_has_its_stated_false_positive_rate() {
    use privfed_audit::clopper_pearson;
    use privfed_audit::one_shot::{cosine, one_shot_epsilon_known_null};
    use privfed_mechanisms::batch::fill_normal;
    use privfed_mechanisms::sampling::uniform_on_sphere;
    let (d, k, runs, delta) = (64usize, 50usize, 2000u64, 1e-5);
    let mut rng = seeded_rng_for_experiments(61);
    let mut model = vec![0.0; d];
    fill_normal(&mut rng, &mut model);
    let mut flagged = 0u64;
    let mut mus = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let cosines: Vec<f64> = (0..k)
            .map(|_| cosine(&uniform_on_sphere(d, &mut rng).unwrap(), &model).unwrap())
            .collect();
        let e = one_shot_epsilon_known_null(&cosines, d, delta).unwrap();
        assert!((e.z - (k as f64).sqrt() * e.mu).abs() < 1e-12);
        flagged += u64::from(e.p_value < 0.05);
        mus.push(e.mu);
    }
    let (lo, hi) = clopper_pearson::interval(flagged, runs, 1e-6).unwrap();
    eprintln!("known null: {flagged}/{runs} flagged at p < 0.05, CI [{lo:.4}, {hi:.4}]");
    assert!(lo <= 0.05 && 0.05 <= hi, "{flagged}/{runs}");
    let r = runs as f64;
    let m = mus.iter().sum::<f64>() / r;
    let var = mus.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (r - 1.0);
    let se = (2.0 / r).sqrt() / k as f64;
    eprintln!(
        "known null: var(mu_hat) = {var:.5} vs 1/k = {:.5}",
        1.0 / k as f64
    );
    assert!((var - 1.0 / k as f64).abs() <= 5.0 * se, "{var}");
    assert!(m.abs() <= 5.0 / (k as f64 * r).sqrt(), "{m}");
}

/// The known-null estimate on the Gaussian mechanism with a known μ: `k = 500` inserted random
/// unit canaries in `d = 10⁴` dimensions, `Δ = Σ c_i + N(0, σ²I)`, σ = 1 (μ = 1 per canary).
/// Each inserted cosine is about `N(1/‖Δ‖, σ²/‖Δ‖²)`, so `μ̂ = √d·m̂_in` has mean
/// `√d/‖Δ‖ ≈ 0.976` and standard error `√d·σ/(‖Δ‖√k)`; the test asserts `μ̂` within 4.9 standard
/// errors (a false failure about once in 10⁶) and prints ε̂ beside the exact `ε_μ(δ)`.
#[test]
fn known_null_estimate_recovers_the_gaussian_mechanism() {
    use privfed_audit::gdp::epsilon_for_mu;
    use privfed_audit::one_shot::{cosine, one_shot_epsilon_known_null};
    use privfed_mechanisms::batch::fill_normal;
    use privfed_mechanisms::sampling::uniform_on_sphere;
    let (d, k, sigma, delta) = (10_000usize, 500usize, 1.0f64, 1e-5);
    let mut rng = seeded_rng_for_experiments(62);
    let canaries: Vec<Vec<f64>> = (0..k)
        .map(|_| uniform_on_sphere(d, &mut rng).unwrap())
        .collect();
    let mut model = vec![0.0; d];
    fill_normal(&mut rng, &mut model);
    model.iter_mut().for_each(|v| *v *= sigma);
    for c in &canaries {
        model.iter_mut().zip(c).for_each(|(m, ci)| *m += ci);
    }
    let cosines: Vec<f64> = canaries
        .iter()
        .map(|c| cosine(c, &model).unwrap())
        .collect();
    let e = one_shot_epsilon_known_null(&cosines, d, delta).unwrap();
    let norm = (k as f64 + sigma * sigma * d as f64).sqrt();
    let want = (d as f64).sqrt() / norm;
    let se = (d as f64).sqrt() * sigma / (norm * (k as f64).sqrt());
    eprintln!(
        "known null: mu_hat = {:.4} (expected {want:.4} ± {se:.4}), eps_hat = {:.3}, exact eps = {:.3}, p = {:e}",
        e.mu,
        e.epsilon,
        epsilon_for_mu(1.0 / sigma, delta).unwrap(),
        e.p_value
    );
    assert!((e.mu - want).abs() <= 4.9 * se, "{e:?}");
    assert!(e.p_value < 1e-6);
}

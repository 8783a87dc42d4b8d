//! What the audit sees of floating point: privfed's continuous Laplace mechanism assumes ideal
//! reals (`docs/FLOATING_POINT.md`), and a statistic that looks at the last bit of the output
//! shows why. This test pins the documented caveat: if the sampler is ever made safe (e.g.
//! snapped to a grid), it fails and the docs must change with it.
//!
//! `z = x + η` with `x = ±1` and Laplace `η` of scale 2 (ε = 1, Δ₁ = 2). For `z ∈ [−2, −1)`:
//! from `x = 1` it needs `η ∈ [−3, −2)`, whose f64 spacing is `2^{−51}`, and `1 + η` is exact, so
//! `z` is a multiple of `2^{−51}` (last mantissa bit 0); from `x′ = −1` it needs `η ∈ [−1, 0)`,
//! finer, and `−1 + η` rounds to the `2^{−52}` grid, odd about half the time. The event
//! `E = {z ∈ [−2, −1), last bit 1}` has probability ≈ 0.1 under `x′` and 0 under `x`: infinite
//! privacy loss (Mironov 2012, "On significance of the least significant bits for differential
//! privacy").

use privfed_audit::distinguish::{Selection, threshold_audit};
use privfed_mechanisms::LocalRandomizer;
use privfed_mechanisms::domain::Domain;
use privfed_mechanisms::laplace::Laplace;
use privfed_mechanisms::rng::seeded_rng_for_experiments;

/// The indicator of `E` (a fixed, data-independent event: Bonferroni over the one threshold ½).
fn low_bit_event(z: f64) -> f64 {
    f64::from(u8::from((-2.0..-1.0).contains(&z) && z.to_bits() & 1 == 1))
}

#[test]
fn laplace_leaks_its_input_through_the_last_bit() {
    let m = Laplace::new(
        1.0,
        Domain::L1Ball {
            dim: 1,
            radius: 1.0,
        },
    )
    .unwrap();
    let mut rng = seeded_rng_for_experiments(77);
    let n = 20_000;
    let mut scores = |x: f64| -> Vec<f64> {
        (0..n)
            .map(|_| low_bit_event(m.privatize(&[x], &mut rng).unwrap()[0]))
            .collect()
    };
    let (sx, sxp) = (scores(1.0), scores(-1.0));
    assert_eq!(
        sx.iter().sum::<f64>(),
        0.0,
        "x = 1 never lands on an odd multiple of 2^-52"
    );
    let b = threshold_audit(&sx, &sxp, 0.0, 1e-3, &Selection::Bonferroni(vec![0.5])).unwrap();
    eprintln!(
        "laplace last-bit audit: eps_lb = {:.3} against the claim 1 ({} of {n} samples of x' in E)",
        b.epsilon_lower_bound, b.event.counts.hits_x
    );
    // Zero hits under x: the bound is limited only by n (FPR_hi = 1 − (α/4)^{1/n} ≈ 4·10⁻⁴ at
    // n = 20,000), far above the claimed ε = 1.
    assert!(b.epsilon_lower_bound > 4.0, "{b:?}");
}

/// The same for the Gaussian mechanism (ε = 2, δ = 10⁻⁵ on the 1-D ℓ2 ball of radius 1), also
/// documented as assuming ideal reals: `x + σg` from `x = 1` lands on the `2^{−51}` grid in
/// `[−2, −1)`, from `x′ = −1` half the time off it.
#[test]
fn gaussian_leaks_its_input_through_the_last_bit() {
    use privfed_mechanisms::gaussian::Gaussian;
    let m = Gaussian::new(
        2.0,
        1e-5,
        Domain::L2Ball {
            dim: 1,
            radius: 1.0,
        },
    )
    .unwrap();
    let mut rng = seeded_rng_for_experiments(78);
    let n = 20_000;
    let mut scores = |x: f64| -> Vec<f64> {
        (0..n)
            .map(|_| low_bit_event(m.privatize(&[x], &mut rng).unwrap()[0]))
            .collect()
    };
    let (sx, sxp) = (scores(1.0), scores(-1.0));
    assert_eq!(sx.iter().sum::<f64>(), 0.0);
    let b = threshold_audit(&sx, &sxp, 1e-5, 1e-3, &Selection::Bonferroni(vec![0.5])).unwrap();
    eprintln!(
        "gaussian last-bit audit: eps_lb = {:.3} against the claim 2 ({} of {n} samples of x' in E)",
        b.epsilon_lower_bound, b.event.counts.hits_x
    );
    assert!(b.epsilon_lower_bound > 4.0, "{b:?}");
}

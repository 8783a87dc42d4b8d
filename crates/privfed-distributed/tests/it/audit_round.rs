//! A black-box audit of one composed distributed round (encoder → modular sum of the clients'
//! encodings → decoder) against the ε the accounting reports for it
//! (`privfed_distributed::accounting::epsilon_for_rounds_with`, one round, every client present).
//!
//! Covered: clipping, scaling, the rotation, stochastic rounding, each client's noise share
//! (Skellam, and the discrete Gaussian of the DDG baseline), the modular sum and the decoding,
//! composed as the server runs them, in `d = 1` and `d = 4`. Not covered: client sampling and
//! composition over rounds (the accountant's, not audited), the secure aggregation protocol
//! itself (the test adds the encodings in the clear, which is what secure aggregation reveals).
//!
//! The worst direction for `d > 1`. The noise is added coordinate-wise in the rotated domain and
//! the decoder's inverse rotation is orthonormal, so what tells the two inputs apart is the
//! audited client's rotated, scaled, **rounded** contribution. Stochastic rounding is unbiased:
//! its mean is the scaled vector whatever the direction, and its randomness, which the observer
//! does not see, only adds spread (the accounting's `Δ₂ = s·c + √d′` is the bound *given* the
//! rounding). For a test of the mean shift, the direction that leaves the adversary the most is
//! therefore one whose rounding is deterministic: `e₁`, which every randomized Hadamard rotation maps to `±𝟙/√d′`, with
//! `s·c/√d′` an integer (here `4/2 = 2`): the contribution is exactly `±2` in every rotated
//! coordinate, `s·c` in ℓ2, with no rounding spread. The statistic is `⟨z, x − x′⟩`, the
//! projection on that direction (Neyman–Pearson optimal for a mean shift in spherical Gaussian
//! noise, which the sum of the shares nearly is at these variances).
//!
//! False-positive rate: each honest audit flags a true claim with probability at most
//! `α = 10⁻³` (three honest audits: at most 0.3% family-wise), at fixed seeds.

use privfed_audit::distinguish::samples_for_power;
use privfed_audit::randomizer::{Claim, NeighbourPair, Side, Statistic, evaluate, sample};
use privfed_distributed::accounting::epsilon_for_rounds_with;
use privfed_distributed::decoder::SkellamDecoder;
use privfed_distributed::encoder::{NoiseShare, SkellamEncoder};
use privfed_distributed::modular::ModularSum;
use privfed_distributed::params::{SkellamConfig, SkellamParams};
use privfed_mechanisms::MechanismError;
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};

const ALPHA: f64 = 1e-3;
const ROTATION: [u8; 32] = [3; 32];
/// Clients in the round (the audited one and two others at 0).
const CLIENTS: usize = 3;
const SCALE: f64 = 4.0;
const SIGMA: f64 = 1.2;
const DELTA: f64 = 1e-5;

fn params(dim: usize, clip: f64, sigma: f64) -> SkellamParams {
    SkellamParams::new(SkellamConfig {
        dim,
        clip,
        bits: 20,
        scale: SCALE,
        local_noise_stddev: sigma,
        beta: 0.0,
        k: 4.0,
    })
    .unwrap()
}

/// The planted bug of a case.
#[derive(Clone, Copy)]
enum Bug {
    /// The audited client's clipping skipped on an input `f` times too long: emulated by encoding
    /// `f·x` with clip `f` at the same scale, so its contribution is `f·s·c` against the
    /// accounted `s·c + √d′`.
    SkippedClip(f64),
}

/// One round audit: the claim (the accounting's ε for one round of `CLIENTS` contributors at
/// δ = 10⁻⁵), the honest audit (not flagged, bound > 0) and the planted bug (flagged). The power
/// calculation reads the decoded sum's noise as Gaussian with the shares' variance `σ²` each
/// (in decoded units) and takes the best event `{⟨z, x⟩ ≥ t}` on a grid of `t`.
fn audit_round(share: NoiseShare, dim: usize, bug: Bug, n: usize, seeds: (u64, u64)) {
    let honest = params(dim, 1.0, SIGMA);
    let claim = Claim {
        epsilon: epsilon_for_rounds_with(share, &honest, CLIENTS, 1.0, 1, DELTA)
            .unwrap()
            .epsilon,
        delta: DELTA,
    };
    let Bug::SkippedClip(shift_bug) = bug;
    let noise_sd = (CLIENTS as f64).sqrt() * SIGMA; // decoded units
    let q = privfed_special::norm_sf;
    let need = (0..80)
        .filter_map(|i| {
            let t = i as f64 * 0.25 * noise_sd;
            samples_for_power(
                q((t - shift_bug) / noise_sd),
                q(t / noise_sd),
                DELTA,
                claim.epsilon,
                ALPHA / 2.0,
                1e-3,
            )
        })
        .min()
        .expect("the bug exceeds the claim");
    let case = format!("{share:?}, d = {dim}");
    eprintln!(
        "composed round ({case}): claim eps = {:.4}, power needs {need} per input",
        claim.epsilon
    );
    assert!(n as f64 >= 1.5 * need as f64, "{n} < 1.5 × {need}");
    let mut e1 = vec![0.0; dim];
    e1[0] = 1.0;
    let pair = NeighbourPair {
        x: e1,
        x_prime: vec![0.0; dim],
        statistic: Statistic::Projection,
        rationale: "client 0 sends c·e1 (deterministic rounding: s·c/√d′ is an integer) or 0; \
                    two other clients send 0"
            .into(),
    };
    let encoder = |p| SkellamEncoder::with_noise(p, ROTATION, share).unwrap();
    let decoder = SkellamDecoder::new(honest, ROTATION).unwrap();
    let round = |audited: SkellamEncoder, others: SkellamEncoder, scale_input: f64| {
        let decoder = decoder.clone();
        move |x: &[f64], o: &mut [f64], rng: &mut ExperimentRng| -> Result<(), MechanismError> {
            let fail = |e: privfed_distributed::error::DistributedError| {
                MechanismError::invalid("round", 0.0, e.to_string())
            };
            let padded = audited.params().padded_dim();
            let mut sum = ModularSum::new(20, padded).map_err(fail)?;
            let scaled: Vec<f64> = x.iter().map(|v| v * scale_input).collect();
            let (enc, _) = audited.encode(&scaled, rng).map_err(fail)?;
            sum.add(&enc).map_err(fail)?;
            let zero = vec![0.0; x.len()];
            for _ in 1..CLIENTS {
                let (enc, _) = others.encode(&zero, rng).map_err(fail)?;
                sum.add(&enc).map_err(fail)?;
            }
            let decoded = decoder.decode(sum.value(), CLIENTS).map_err(fail)?;
            o.copy_from_slice(&decoded.sum);
            Ok(())
        }
    };
    let run = |privatize, seed| {
        let mut rng = seeded_rng_for_experiments(seed);
        let ox = sample(&pair, Side::X, n, &privatize, &mut rng).unwrap();
        let oxp = sample(&pair, Side::XPrime, n, &privatize, &mut rng).unwrap();
        evaluate(&pair, &ox, &oxp, claim, ALPHA).unwrap()
    };
    let r = run(round(encoder(honest), encoder(honest), 1.0), seeds.0);
    eprintln!(
        "composed round ({case}): eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{case}: {r:#?}");
    assert!(r.epsilon_lower_bound > 0.0, "{case}: no evidence at all");
    let buggy = round(
        encoder(params(dim, shift_bug, SIGMA)),
        encoder(honest),
        shift_bug,
    );
    let rb = run(buggy, seeds.1);
    eprintln!(
        "composed round ({case}, planted bug): eps_lb = {:.4} > claim {:.4}: {}",
        rb.epsilon_lower_bound, claim.epsilon, rb.violation
    );
    assert!(rb.violation, "{case}: the planted bug was missed: {rb:#?}");
}

/// Skellam shares, `d = 1`: the audited client sends `c = 1` or 0 (its rounded contribution
/// differs by `s·c = 4` in the integer domain, within the accounted `Δ₂ = s·c + √d′ = 5`); bug:
/// its clip skipped on an input of length 4 (contribution 16).
#[test]
fn one_composed_round_holds_its_accounted_epsilon_and_a_skipped_clip_is_caught() {
    audit_round(
        NoiseShare::Skellam,
        1,
        Bug::SkippedClip(4.0),
        20_000,
        (31, 32),
    );
}

/// Discrete Gaussian shares (the DDG baseline), `d = 1`, claim from the RDP accountant with the
/// sum correction τ; bug: the clip skipped on an input of length 4. (Dropping the two other
/// clients' shares, the sum's variance a third of the accounted one, is a bug too weak for a
/// black-box audit of this size: the power calculation asks for 1.07·10⁷ samples per input.)
#[test]
fn one_composed_ddg_round_holds_its_accounted_epsilon_and_a_skipped_clip_is_caught() {
    audit_round(
        NoiseShare::DiscreteGaussian,
        1,
        Bug::SkippedClip(4.0),
        20_000,
        (33, 34),
    );
}

/// Skellam shares, `d = 4` (`d′ = 4`), direction `e₁` (module docs: deterministic rounding, the
/// full `s·c = 4` in ℓ2 against the accounted `Δ₂ = 4 + 2 = 6`, so the claim is larger than in
/// `d = 1`); bug: the clip skipped on an input of length 8.
#[test]
fn one_composed_round_in_four_dimensions_holds_and_a_skipped_clip_is_caught() {
    audit_round(
        NoiseShare::Skellam,
        4,
        Bug::SkippedClip(8.0),
        8_000,
        (35, 36),
    );
}

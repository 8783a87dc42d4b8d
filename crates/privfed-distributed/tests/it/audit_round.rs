//! A black-box audit of one composed distributed round (encoder → modular sum of the clients'
//! encodings → decoder) against the ε the accounting reports for it
//! (`privfed_distributed::accounting::epsilon_for_rounds`, one round, every client present).
//!
//! Covered: clipping, scaling, the rotation, stochastic rounding, each client's Skellam share,
//! the modular sum and the decoding, composed as the server runs them, in `d = 1`. Not covered:
//! client sampling and composition over rounds (the accountant's, not audited), the secure
//! aggregation protocol itself (the test adds the encodings in the clear, which is what secure
//! aggregation reveals), and `d > 1`.
//!
//! False-positive rate: the honest audit flags a true claim with probability at most
//! `α = 10⁻³`, at a fixed seed.

use privfed_audit::distinguish::samples_for_power;
use privfed_audit::randomizer::{Claim, NeighbourPair, Side, Statistic, evaluate, sample};
use privfed_distributed::accounting::epsilon_for_rounds;
use privfed_distributed::decoder::SkellamDecoder;
use privfed_distributed::encoder::SkellamEncoder;
use privfed_distributed::modular::ModularSum;
use privfed_distributed::params::{SkellamConfig, SkellamParams};
use privfed_mechanisms::MechanismError;
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};

const ALPHA: f64 = 1e-3;
const ROTATION: [u8; 32] = [3; 32];

fn params(clip: f64) -> SkellamParams {
    SkellamParams::new(SkellamConfig {
        dim: 1,
        clip,
        bits: 20,
        scale: 4.0,
        local_noise_stddev: 1.2,
        beta: 0.0,
        k: 4.0,
    })
    .unwrap()
}

/// Three clients, two of them at 0; the audited client sends `x = c = 1` or `x′ = 0` (its
/// rounded contribution differs by `s·c = 4` in the integer domain, within the accounted
/// `Δ₂ = s·c + √d′ = 5`). The release is the decoded sum; statistic `⟨z, x − x′⟩`. The claim is
/// the accounting's ε at δ = 10⁻⁵ for one round of 3 contributors. Bug: the audited client's
/// clipping skipped — emulated by encoding its `x = 4` with clip 4 at the same scale, so its
/// contribution is `16` against the accounted 5; the power calculation reads the decoded sum's
/// noise as Gaussian (the sum of three Skellam shares of variance `(sσ)²` each, nearly normal at
/// this variance), event `{z ≥ t}` at the best `t` on a grid.
#[test]
fn one_composed_round_holds_its_accounted_epsilon_and_a_skipped_clip_is_caught() {
    let (m, delta) = (3usize, 1e-5);
    let honest = params(1.0);
    let report = epsilon_for_rounds(&honest, m, 1.0, 1, delta).unwrap();
    let claim = Claim {
        epsilon: report.epsilon,
        delta,
    };
    let (s, sigma) = (4.0f64, 1.2f64);
    let noise_sd = (m as f64).sqrt() * s * sigma / s; // decoded units
    let shift_bug = 4.0;
    let q = privfed_special::norm_sf;
    let n = 20_000;
    let need = (0..60)
        .filter_map(|i| {
            let t = i as f64 * 0.25 * noise_sd;
            samples_for_power(
                q((t - shift_bug) / noise_sd),
                q(t / noise_sd),
                delta,
                claim.epsilon,
                ALPHA / 2.0,
                1e-3,
            )
        })
        .min()
        .expect("the bug exceeds the claim");
    eprintln!(
        "composed round: claim eps = {:.4}, power needs {need} per input",
        claim.epsilon
    );
    assert!(n as f64 >= 1.5 * need as f64, "{n} < 1.5 × {need}");
    let pair = NeighbourPair {
        x: vec![1.0],
        x_prime: vec![0.0],
        statistic: Statistic::Projection,
        rationale: "client 0 sends c = 1 or 0; two other clients send 0".into(),
    };
    let decoder = SkellamDecoder::new(honest, ROTATION).unwrap();
    let others = SkellamEncoder::new(honest, ROTATION).unwrap();
    let round = |audited: SkellamEncoder, scale_input: f64| {
        let (decoder, others) = (decoder.clone(), others.clone());
        move |x: &[f64], o: &mut [f64], rng: &mut ExperimentRng| -> Result<(), MechanismError> {
            let fail = |e: privfed_distributed::error::DistributedError| {
                MechanismError::invalid("round", 0.0, e.to_string())
            };
            let mut sum = ModularSum::new(20, 1).map_err(fail)?;
            let (enc, _) = audited.encode(&[x[0] * scale_input], rng).map_err(fail)?;
            sum.add(&enc).map_err(fail)?;
            for _ in 1..m {
                let (enc, _) = others.encode(&[0.0], rng).map_err(fail)?;
                sum.add(&enc).map_err(fail)?;
            }
            o[0] = decoder.decode(sum.value(), m).map_err(fail)?.sum[0];
            Ok(())
        }
    };
    let run = |privatize, seed| {
        let mut rng = seeded_rng_for_experiments(seed);
        let ox = sample(&pair, Side::X, n, &privatize, &mut rng).unwrap();
        let oxp = sample(&pair, Side::XPrime, n, &privatize, &mut rng).unwrap();
        evaluate(&pair, &ox, &oxp, claim, ALPHA).unwrap()
    };
    let r = run(round(others.clone(), 1.0), 31);
    eprintln!(
        "composed round: eps_lb = {:.4}, claim = {:.4} (ratio {:.3}), n = {n}",
        r.epsilon_lower_bound,
        claim.epsilon,
        r.epsilon_lower_bound / claim.epsilon
    );
    assert!(!r.violation, "{r:#?}");
    assert!(r.epsilon_lower_bound > 0.0);
    let unclipped = SkellamEncoder::new(params(4.0), ROTATION).unwrap();
    let rb = run(round(unclipped, 4.0), 32);
    eprintln!(
        "composed round (planted bug, clip skipped): eps_lb = {:.4} > claim {:.4}: {}",
        rb.epsilon_lower_bound, claim.epsilon, rb.violation
    );
    assert!(rb.violation, "{rb:#?}");
}

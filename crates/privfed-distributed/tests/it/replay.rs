//! Gray-box replay of paper 001's encoder at the point where the Skellam noise is added: with
//! identical seeded randomness, the rounded integer vector of one client (against the empty
//! contribution, which rounds to 0) must never be longer than the ℓ2 sensitivity `Δ₂` the
//! accounting uses (`SkellamParams::l2_sensitivity`, the rounding-inflated bound of 001 Prop.
//! 4.2), nor its ℓ1 norm longer than `Δ₁`. The inputs include one crafted against the rotation so
//! that every rotated, scaled coordinate sits at ½, where stochastic rounding inflates the norm
//! most. A planted bug in test code — declaring the unrounded `s·c` as the sensitivity — is
//! caught by the same replay.

use privfed_audit::replay::{Norm, ReplayReport, replay_sensitivity};
use privfed_distributed::encoder::SkellamEncoder;
use privfed_distributed::params::{SkellamConfig, SkellamParams};
use privfed_mechanisms::hadamard::RandomizedHadamard;
use privfed_mechanisms::rng::seeded_rng_for_experiments;

const DIM: usize = 64;
const ROTATION_SEED: [u8; 32] = [7; 32];
/// Rounding of `x·s` after the rotation is exact to ~1e-15 relative; the bounds are compared
/// with this much room.
const REL_TOL: f64 = 1e-9;

fn params(beta: f64) -> SkellamParams {
    // s·c = ½·√d, so the crafted input's rotated coordinates are all exactly ½.
    SkellamParams::new(SkellamConfig {
        dim: DIM,
        clip: 1.0,
        bits: 20,
        scale: 0.5 * (DIM as f64).sqrt(),
        local_noise_stddev: 1.0,
        beta,
        k: 4.0,
    })
    .unwrap()
}

/// `(x, 0)` pairs: a basis vector, a flat vector, and the crafted worst case for the rounding.
fn pairs(p: &SkellamParams) -> Vec<(Vec<f64>, Vec<f64>)> {
    let zero = vec![0.0; DIM];
    let mut e1 = zero.clone();
    e1[0] = 1.0;
    let flat = vec![1.0 / (DIM as f64).sqrt(); DIM];
    let rot = RandomizedHadamard::new(DIM, ROTATION_SEED).unwrap();
    let y = vec![0.5; p.padded_dim()];
    let crafted: Vec<f64> = rot
        .inverse(&y)
        .unwrap()
        .iter()
        .map(|v| v / p.scale() * (1.0 - 1e-12))
        .collect();
    vec![(e1, zero.clone()), (flat, zero.clone()), (crafted, zero)]
}

fn replay(p: &SkellamParams, norm: Norm, declared: f64) -> ReplayReport {
    let enc = SkellamEncoder::new(*p, ROTATION_SEED).unwrap();
    let run = |x: &[f64], seed: u64| {
        let mut out = vec![0i64; p.padded_dim()];
        enc.round_into(x, &mut out, &mut seeded_rng_for_experiments(seed))
            .map_err(|e| privfed_audit::AuditError::Unsupported(e.to_string()))?;
        Ok(out.iter().map(|&v| v as f64).collect())
    };
    let seeds: Vec<u64> = (0..300).collect();
    replay_sensitivity(&pairs(p), &seeds, run, norm, declared, REL_TOL).unwrap()
}

#[test]
fn rounded_contribution_stays_within_the_declared_sensitivity() {
    for beta in [(-0.5f64).exp(), 0.0] {
        let p = params(beta);
        let l2 = replay(&p, Norm::L2, p.l2_sensitivity());
        let l1 = replay(&p, Norm::L1, p.l1_sensitivity());
        eprintln!(
            "beta = {beta:.3}: l2 measured {:.3} <= declared {:.3}; l1 measured {:.3} <= {:.3}",
            l2.measured, l2.declared, l1.measured, l1.declared
        );
        assert!(l2.holds, "{l2:?}");
        assert!(l1.holds, "{l1:?}");
        // The crafted input makes rounding matter: the measured norm exceeds the unrounded s·c.
        assert!(l2.measured > p.scale() * p.clip() * 1.2, "{l2:?}");
    }
}

#[test]
fn forgetting_the_rounding_inflation_is_caught() {
    let p = params((-0.5f64).exp());
    let bug = replay(&p, Norm::L2, p.scale() * p.clip());
    assert!(!bug.holds, "{bug:?}");
}

//! Distributed DP end to end (paper 001): plan a round for 100 clients, 32-bit secure
//! aggregation and ε = 2 over 10 rounds; each client clips, rotates, rounds, adds its share of
//! Skellam noise and wraps mod 2^32; the aggregator sums modulo 2^32 (secure aggregation carries
//! exactly these vectors); the server decodes the mean and accounts for what it released.
//!
//! Run: `cargo run --release -p privfed-distributed --example skellam_round`

use privfed_accounting::RdpAccountant;
use privfed_distributed::{
    ModularSum, NoiseTarget, PlanRequest, SkellamDecoder, SkellamEncoder, plan, rotation_seed,
    round_event,
};
use privfed_mechanisms::rng::seeded_rng_for_experiments;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (dim, clients, bits, rounds, delta) = (256, 100, 32, 10, 1e-5);
    let p = plan(&PlanRequest {
        dim,
        clip: 1.0,
        bits,
        clients,
        max_contributors: None,
        k: 4.0,
        beta: (-0.5f64).exp(),
        noise: NoiseTarget::Epsilon(2.0),
        delta: Some(delta),
        sampling_rate: 1.0,
        rounds,
        share: Default::default(),
        colluding_fraction: 0.0,
    })?;
    println!(
        "plan: scale {:.1}, central σ {:.3}, ε = {:.4} after {rounds} rounds, predicted MSE {:.2e}",
        p.scale,
        p.central_noise_stddev,
        p.epsilon.expect("a δ was given"),
        p.mse.total
    );
    assert!(p.epsilon.unwrap() <= 2.0);

    let mut rng = seeded_rng_for_experiments(5);
    let mut accountant = RdpAccountant::new();
    for round in 0..rounds {
        // Shared randomness for the rotation: derived from the session and the round.
        let seed = rotation_seed(b"example-session", round);
        let encoder = SkellamEncoder::new(p.params, seed)?;
        let mut sum = ModularSum::new(bits, p.padded_dim)?;
        // Client i holds a vector of norm 0.5 pointing along coordinate i mod dim, plus a common
        // component, so the true mean is known exactly.
        let mut truth = vec![0.0; dim];
        for i in 0..clients {
            let mut x = vec![0.0; dim];
            x[0] = 0.3;
            x[1 + i % (dim - 1)] = 0.4;
            truth
                .iter_mut()
                .zip(&x)
                .for_each(|(t, v)| *t += v / clients as f64);
            let (encoded, _) = encoder.encode(&x, &mut rng)?;
            sum.add(&encoded)?;
        }
        let decoded = SkellamDecoder::new(p.params, seed)?.decode(sum.value(), clients)?;
        assert!(!decoded.wrap_suspected);
        // The round's privacy event comes from the clients that actually contributed.
        accountant.compose(&round_event(&p.params, sum.contributions())?)?;
        if round == 0 {
            let err: f64 = decoded
                .mean
                .iter()
                .zip(&truth)
                .map(|(a, b)| (a - b).powi(2))
                .sum();
            println!(
                "round 0: first coordinate {:.4} (true 0.3000), squared error {err:.2e}",
                decoded.mean[0]
            );
            assert!(err < 10.0 * p.mse.total);
        }
    }
    let eps = accountant.get_epsilon(delta)?;
    println!("after {rounds} rounds the server's accountant reports ε = {eps:.4} at δ = {delta}");
    assert!(eps <= 2.0 + 1e-9);
    Ok(())
}

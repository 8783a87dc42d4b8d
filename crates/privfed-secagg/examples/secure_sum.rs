//! Secure aggregation end to end, in one process: 20 enrolled devices hold vectors in Z_{2^16}^8,
//! three of them drop out after sharing their keys, and the server recovers the survivors' sum
//! (and nothing else) in the actively secure mode, over a SecAgg+ graph planned for the cohort.
//!
//! Run: `cargo run -p privfed-secagg --example secure_sum`

use privfed_secagg::local::{Enrollment, LocalRound, plain_sum};
use privfed_secagg::{GraphChoice, Stage, round_config_for};
use rand::{SeedableRng, rngs::ChaCha20Rng};

fn main() -> Result<(), privfed_secagg::SecAggError> {
    let (clients, bits, dim) = (20u32, 16u32, 8usize);
    // A seeded CSPRNG for a reproducible run; a device seeds its generator from the OS.
    let mut rng = ChaCha20Rng::seed_from_u64(7);

    // An authority enrolls every device (Ed25519 keys, a signed roster): only enrolled devices
    // can join an active-mode round.
    let enrollment = Enrollment::new(clients as usize, &mut rng);
    let threat_model = enrollment.threat_model();
    // Plan the graph and threshold for a 20% expected dropout (SecAgg+ when it is cheaper).
    let config = round_config_for(
        threat_model,
        clients,
        bits,
        dim,
        0.2,
        GraphChoice::Auto,
        [42; 32], // the session id: fresh randomness in a deployment
    )?;
    println!(
        "round: {clients} clients, threshold {}, {} neighbours each",
        config.threshold,
        config.degree()
    );

    // Client i holds the vector (i, 2i, ..., 8i); clients 3, 9 and 15 go silent before sending
    // their masked input (they did share their keys, so their masks must be removed).
    let inputs: Vec<Vec<u64>> = (1..=u64::from(clients))
        .map(|i| (1..=dim as u64).map(|j| i * j).collect())
        .collect();
    let drop_before = (1..=clients)
        .map(|id| [3, 9, 15].contains(&id).then_some(Stage::MaskedInput))
        .collect();
    let mut round = LocalRound::with_credentials(
        config,
        inputs.clone(),
        drop_before,
        enrollment.credentials()?,
    )?;
    let aggregate = round.run(&mut rng)?;

    println!("survivors: {:?}", aggregate.survivors);
    println!("dropped:   {:?}", aggregate.dropped);
    println!("sum:       {:?}", aggregate.sum);
    assert_eq!(aggregate.dropped, [3, 9, 15]);
    assert_eq!(aggregate.survivors.len(), 17);
    // The unmasked sum equals the plain sum of the survivors' inputs: every mask cancelled.
    assert_eq!(
        aggregate.sum,
        plain_sum(&inputs, &aggregate.survivors, bits)
    );
    // Σ over survivors of i·j = (210 − 27)·j.
    assert_eq!(aggregate.sum[0], 183);
    Ok(())
}

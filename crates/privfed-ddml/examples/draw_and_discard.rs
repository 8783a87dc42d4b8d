//! Draw-and-Discard end to end, in memory (paper 003): a server keeps k = 10 instances of a
//! logistic model; 20,000 devices each draw one at random, take one noisy local step on their own
//! example (Laplace noise, ε = ln 32 per update) and send it back; the server overwrites a random
//! instance. The instances' spread stays near its predicted stationary value (k/2)·σ² and the
//! average model learns the rule.
//!
//! Run: `cargo run --release -p privfed-ddml --example draw_and_discard`

use privfed_ddml::client::{ClientNoise, ClientStep, PrivacyUnit};
use privfed_ddml::engine::{
    DrawAndDiscard, Strategy, initialize_instances, predicted_intra_model_variance,
};
use privfed_learn::glm::{Example, Glm};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use rand::RngExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = seeded_rng_for_experiments(3);
    let glm = Glm::logistic(2)?;
    let k = 10;
    let step = ClientStep::new(
        0.05,
        ClientNoise::Laplace {
            epsilon: 32f64.ln(),
        },
        PrivacyUnit::Feature,
        glm.num_weights(),
    )?;
    let instances = initialize_instances(
        &vec![0.0; glm.num_weights()],
        k,
        step.noise_variance(),
        &mut rng,
    )?;
    let mut server = DrawAndDiscard::new(Strategy::DrawAndDiscard, instances, None)?;

    // The rule: y = 1 when x₀ > x₁.
    let example = |rng: &mut ExperimentRng| {
        let x: Vec<f64> = (0..2).map(|_| rng.random::<f64>()).collect();
        let y = f64::from(u8::from(x[0] > x[1]));
        Example::new(x, y)
    };
    for _device in 0..20_000 {
        let drawn = server.draw(&mut rng);
        let data = vec![example(&mut rng)];
        let update = step.apply(&glm, server.instance(drawn), &data, &mut rng)?;
        server.submit(drawn, &update, &mut rng)?;
    }

    let test: Vec<Example> = (0..2000).map(|_| example(&mut rng)).collect();
    let model = server.mean_model();
    let accuracy = glm.accuracy(&model, &test)?;
    let predicted = predicted_intra_model_variance(k, step.noise_variance());
    println!(
        "accepted {} updates; intra-model variance {:.4} (stationary prediction {predicted:.4})",
        server.stats().accepted,
        server.intra_model_variance()
    );
    println!("average model {model:.3?}: accuracy {accuracy:.3} on 2,000 fresh examples");
    assert_eq!(server.stats().accepted, 20_000);
    assert!(accuracy > 0.8);
    // One snapshot of a random quantity: within a factor of 3 of its expectation.
    let ratio = server.intra_model_variance() / predicted;
    assert!(ratio > 1.0 / 3.0 && ratio < 3.0, "ratio {ratio}");
    Ok(())
}

//! A model's main job in privfed: 50 clients each hold 20 labelled examples; every round each
//! client computes the average gradient of a logistic model on its own data, and the server
//! averages the clients' gradients and takes a step (federated SGD, no noise here: the
//! mechanisms and the simulator add it). The loss falls and the model learns the rule.
//!
//! Run: `cargo run -p privfed-learn --example federated_logistic`

use privfed_learn::error::LearnError;
use privfed_learn::glm::{Example, Glm};
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use rand::RngExt;

fn main() -> Result<(), LearnError> {
    let mut rng = seeded_rng_for_experiments(11);
    // The rule to learn: y = 1 when 2·x₀ − x₁ + 0.5·x₂ > 0.7 (features in [0, 1]). The model
    // has no separate bias weight, so a constant feature 1 carries the intercept.
    let clients: Vec<Vec<Example>> = (0..50)
        .map(|_| {
            (0..20)
                .map(|_| {
                    let mut x: Vec<f64> = (0..3).map(|_| rng.random::<f64>()).collect();
                    let y = f64::from(u8::from(2.0 * x[0] - x[1] + 0.5 * x[2] > 0.7));
                    x.push(1.0);
                    Example::new(x, y)
                })
                .collect()
        })
        .collect();
    let all: Vec<Example> = clients.iter().flatten().cloned().collect();

    let glm = Glm::logistic(4)?;
    let mut w = vec![0.0; glm.num_weights()];
    let initial = glm.loss(&w, &all)?;
    for _round in 0..300 {
        // Each client's gradient on its own examples; the server sees only these.
        let mut step = vec![0.0; w.len()];
        for data in &clients {
            let g = glm.average_gradient(&w, data)?;
            step.iter_mut()
                .zip(&g)
                .for_each(|(s, gi)| *s += gi / clients.len() as f64);
        }
        w.iter_mut().zip(&step).for_each(|(wi, si)| *wi -= 2.0 * si);
    }
    let loss = glm.loss(&w, &all)?;
    let accuracy = glm.accuracy(&w, &all)?;
    println!("log loss {initial:.4} → {loss:.4} after 300 rounds, accuracy {accuracy:.3}");
    println!(
        "weights {:?}",
        w.iter()
            .map(|v| (v * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    assert!(loss < 0.5 * initial);
    assert!(accuracy > 0.9);
    Ok(())
}

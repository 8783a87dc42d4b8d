//! Times one client's local epoch (plain SGD over mini-batches) for the issue-13 models on
//! synthetic data of the real shapes, single-threaded, and prints the median over repeats.
//!
//! ```text
//! cargo run --release -p privfed-learn --example nn_epoch [repeats] [name filter, e.g. lenet5]
//! ```
//!
//! The numbers and the side-by-side comparison with candle and PyTorch are in `BENCHMARKS.md`
//! ("FL models").

use std::time::Instant;

use privfed_learn::nn::{Batch, Inputs, Model, ModelSpec, Scratch};
use rand::{RngExt, SeedableRng};

/// Batch `a..b` of a fixed data set.
type Batches<'a> = &'a dyn Fn(usize, usize) -> Batch<'static>;

/// Median seconds of `repeats` local epochs of `model` over `rows` rows in batches of `batch`.
fn epoch(
    model: &dyn Model,
    inputs: Batches<'_>,
    rows: usize,
    batch: usize,
    repeats: usize,
) -> (f64, f64) {
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(0);
    let mut params = model.init(&mut rng);
    let mut grad = vec![0.0; model.num_params()];
    let mut scratch = Scratch::default();
    let mut times = Vec::new();
    let mut loss = 0.0;
    for _ in 0..repeats + 1 {
        let start = Instant::now();
        for b in (0..rows).step_by(batch) {
            loss = model
                .loss_grad(
                    &params,
                    &inputs(b, (b + batch).min(rows)),
                    &mut grad,
                    &mut scratch,
                )
                .expect("valid batch");
            params
                .iter_mut()
                .zip(&grad)
                .for_each(|(p, g)| *p -= 0.05 * g);
        }
        times.push(start.elapsed().as_secs_f64());
    }
    times.remove(0); // warm-up (buffers grow on first use)
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], loss)
}

fn main() {
    let repeats: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(21);
    // Optional: only the runs whose name contains this (e.g. `lenet5` for a profile).
    let only = std::env::args().nth(2).unwrap_or_default();
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(1);
    // MNIST-shaped rows: 784 pixels in [0, 1], labels below 10 (leaked: the example runs once).
    let images: &'static [f32] =
        Vec::leak((0..600 * 784).map(|_| rng.random_range(0.0..1.0)).collect());
    let labels: &'static [u32] = Vec::leak((0..600).map(|_| rng.random_range(0..10)).collect());
    let dense = move |a: usize, b: usize| Batch {
        inputs: Inputs::Dense {
            x: &images[a * 784..b * 784],
            features: 784,
        },
        targets: &labels[a..b],
    };
    // Tiny-Shakespeare-shaped sequences: 10 of 80 characters over a 65-character vocabulary.
    let text: &'static [u32] = Vec::leak((0..10 * 81).map(|_| rng.random_range(0..65)).collect());
    let x: &'static [u32] = Vec::leak(
        (0..10)
            .flat_map(|r| text[r * 81..r * 81 + 80].to_vec())
            .collect(),
    );
    let y: &'static [u32] = Vec::leak(
        (0..10)
            .flat_map(|r| text[r * 81 + 1..r * 81 + 81].to_vec())
            .collect(),
    );
    let seqs = move |a: usize, b: usize| Batch {
        inputs: Inputs::Tokens {
            x: &x[a * 80..b * 80],
            len: 80,
        },
        targets: &y[a * 80..b * 80],
    };
    let mlp = ModelSpec::Mlp {
        features: 784,
        hidden: vec![200, 200],
        classes: 10,
    };
    let runs: [(&str, ModelSpec, Batches<'_>, usize); 8] = [
        ("lenet5, 60 examples", ModelSpec::Lenet5 {}, &dense, 60),
        ("lenet5, 600 examples", ModelSpec::Lenet5 {}, &dense, 600),
        ("mlp 784-200-200-10, 60 examples", mlp.clone(), &dense, 60),
        ("mlp 784-200-200-10, 600 examples", mlp, &dense, 600),
        (
            "char_gru 65/8/128, 10 seqs of 80",
            ModelSpec::CharGru {
                vocab: 65,
                embed: 8,
                hidden: 128,
            },
            &seqs,
            10,
        ),
        (
            "char_gru 65/8/256, 10 seqs of 80",
            ModelSpec::CharGru {
                vocab: 65,
                embed: 8,
                hidden: 256,
            },
            &seqs,
            10,
        ),
        (
            "char_gru 65/8/128, 10 seqs, batch 1",
            ModelSpec::CharGru {
                vocab: 65,
                embed: 8,
                hidden: 128,
            },
            &seqs,
            10,
        ),
        (
            "char_gru 65/8/256, 10 seqs, batch 1",
            ModelSpec::CharGru {
                vocab: 65,
                embed: 8,
                hidden: 256,
            },
            &seqs,
            10,
        ),
    ];
    println!("one local epoch, batch 10 (batch 1 where noted), single thread, median of {repeats}");
    for (i, (name, spec, batches, rows)) in runs.into_iter().enumerate() {
        if !name.contains(only.as_str()) {
            continue;
        }
        let model = spec.build().expect("valid spec");
        let batch = if i >= 6 { 1 } else { 10 };
        let (t, loss) = epoch(model.as_ref(), batches, rows, batch, repeats);
        println!(
            "{name:38} {:>9} params  {:9.3} ms  (last loss {loss:.3})",
            model.num_params(),
            t * 1e3
        );
    }
}

//! Models with gradients for federated training.
//!
//! Every model keeps its parameters as **one flat `f32` vector**, so a client's update (new
//! parameters minus old) is a slice the mechanisms take directly, and the server optimizer, the
//! checkpoints and the secure sum all see the same layout. A model is a description (layer sizes)
//! plus pure functions of `(parameters, batch)`: no hidden state, no threads inside (the simulator
//! parallelizes across clients, which keeps results independent of the thread count), no
//! randomness except in [`Model::init`], which takes the generator.
//!
//! | model | spec (`kind`) | layers |
//! |---|---|---|
//! | softmax regression | [`ModelSpec::Softmax`] (`softmax`) | `W x + b`, softmax cross-entropy |
//! | multilayer perceptron | [`ModelSpec::Mlp`] (`mlp`) | (dense → ReLU)×k → dense, softmax cross-entropy |
//! | convolutional network | [`ModelSpec::Cnn`] (`cnn`) | (conv → ReLU → 2×2 max pool)×k → flatten → (dense → ReLU)×j → dense |
//! | LeNet-5 (MNIST, 61,706 parameters) | [`ModelSpec::Lenet5`] (`lenet5`) | `cnn` with conv 5×5 6 pad 2, conv 5×5 16, dense 120, 84, 10 |
//! | character GRU | [`ModelSpec::CharGru`] (`char_gru`) | embedding → GRU → dense to the vocabulary at every position |
//!
//! The layers, each with its forward and backward formulas in its module's documentation (the
//! layer code itself is internal: models are the public interface):
//!
//! | layer | module | used by |
//! |---|---|---|
//! | dense `X Wᵀ + b` | [`dense`] | mlp, cnn, char_gru |
//! | ReLU, σ, tanh | [`activation`] | mlp, cnn; GRU gates |
//! | conv2d (stride 1, zero padding; im2col + matrix product) | [`conv`] | cnn |
//! | 2×2 max pool | [`pool`] | cnn |
//! | flatten | identity on the flat `c×h×w` buffer ([`sequential`]) | cnn |
//! | embedding | [`embedding`] | char_gru |
//! | GRU with backpropagation through time | [`gru`] | char_gru |
//! | softmax cross-entropy | `softmax_xent_in_place` here | all |
//!
//! Matrix products go through faer's single-threaded kernels; the choice was measured
//! (`BENCHMARKS.md`, "FL models"). Every layer and model is checked against central
//! finite differences in its tests.

pub mod activation;
pub mod char_gru;
pub mod conv;
pub mod dense;
pub mod embedding;
mod gemm;
pub mod gru;
pub mod pool;
pub mod sequential;
mod simd;
pub mod softmax;

pub use char_gru::CharGru;
pub use sequential::{ConvSpec, Sequential};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::{LearnError, Result};

/// The inputs of a batch: dense feature rows or token sequences.
#[derive(Debug, Clone, Copy)]
pub enum Inputs<'a> {
    /// Dense features, row-major, `rows × features`.
    Dense {
        /// The features.
        x: &'a [f32],
        /// Features per row.
        features: usize,
    },
    /// Token sequences, row-major, `rows × len` (character models).
    Tokens {
        /// The tokens.
        x: &'a [u32],
        /// Tokens per row.
        len: usize,
    },
}

/// A batch: inputs and integer targets (one class per row for classifiers, one next token per
/// position for sequence models).
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The inputs.
    pub inputs: Inputs<'a>,
    /// The targets.
    pub targets: &'a [u32],
}

impl Batch<'_> {
    /// Number of rows (examples or sequences).
    pub fn rows(&self) -> usize {
        match self.inputs {
            Inputs::Dense { x, features } => x.len().checked_div(features).unwrap_or(0),
            Inputs::Tokens { x, len } => x.len().checked_div(len).unwrap_or(0),
        }
    }
}

/// Loss and accuracy over a batch, as sums so batches combine by addition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Eval {
    /// Sum of per-prediction losses (natural-log cross-entropy).
    pub loss_sum: f64,
    /// Number of correct predictions (arg max equals target).
    pub correct: u64,
    /// Number of predictions.
    pub count: u64,
}

impl Eval {
    /// Adds another batch's sums.
    pub fn merge(&mut self, other: Eval) {
        self.loss_sum += other.loss_sum;
        self.correct += other.correct;
        self.count += other.count;
    }
    /// Mean loss per prediction (NaN when empty).
    pub fn loss(&self) -> f64 {
        self.loss_sum / self.count as f64
    }
    /// Fraction of correct predictions (NaN when empty).
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.count as f64
    }
}

/// Reusable buffers for one thread's forward and backward passes (activations, their gradients).
/// Models take what they need and grow the buffers on first use; reuse one per worker thread to
/// avoid allocating per batch.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Buffers, indexed by the model's own convention.
    pub bufs: Vec<Vec<f32>>,
    /// Bytes kept from a forward pass for the backward pass (the max pools' arg max).
    pub bytes: Vec<u8>,
}

impl Scratch {
    /// Buffer `i`, resized to `len` and zeroed.
    pub fn zeroed(&mut self, i: usize, len: usize) -> &mut Vec<f32> {
        if self.bufs.len() <= i {
            self.bufs.resize_with(i + 1, Vec::new);
        }
        let b = &mut self.bufs[i];
        b.clear();
        b.resize(len, 0.0);
        b
    }
    /// Takes buffer `i` out (resized to `len`, zeroed) so several can be borrowed at once; give it
    /// back with [`Scratch::put`].
    pub fn take(&mut self, i: usize, len: usize) -> Vec<f32> {
        // Emptied first, so every element comes back as a fresh zero.
        let mut b = self.take_dirty(i, 0);
        b.resize(len, 0.0);
        b
    }
    /// Takes buffer `i` out with length `len` and **unspecified contents** (values left from
    /// earlier use; zeros where it grew), for a buffer the caller writes completely before
    /// reading: zero-filling the activations each step was 2% of a LeNet-5 step. Give it back
    /// with [`Scratch::put`].
    pub fn take_dirty(&mut self, i: usize, len: usize) -> Vec<f32> {
        let mut b = self.bufs.get_mut(i).map(std::mem::take).unwrap_or_default();
        b.resize(len, 0.0);
        b
    }
    /// Returns a buffer taken with [`Scratch::take`] or [`Scratch::take_dirty`].
    pub fn put(&mut self, i: usize, b: Vec<f32>) {
        if self.bufs.len() <= i {
            self.bufs.resize_with(i + 1, Vec::new);
        }
        self.bufs[i] = b;
    }
}

/// A model with gradients over a flat `f32` parameter vector.
pub trait Model: Send + Sync + std::fmt::Debug {
    /// Length of the parameter vector.
    fn num_params(&self) -> usize;
    /// Initial parameters (the model's standard initialization) drawn from `rng`.
    fn init(&self, rng: &mut dyn Rng) -> Vec<f32>;
    /// Mean loss over the batch's predictions; writes the gradient of that mean into `grad`
    /// (overwritten, length [`Model::num_params`]).
    ///
    /// # Errors
    /// Wrong lengths, inputs of the wrong kind, targets out of range.
    fn loss_grad(
        &self,
        params: &[f32],
        batch: &Batch<'_>,
        grad: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<f64>;
    /// Loss and accuracy sums over the batch.
    ///
    /// # Errors
    /// As [`Model::loss_grad`].
    fn evaluate(&self, params: &[f32], batch: &Batch<'_>, scratch: &mut Scratch) -> Result<Eval>;
}

/// A model's description, as it appears in a training config (`kind = "softmax"`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelSpec {
    /// Multinomial logistic (softmax) regression; `classes = 2` is logistic regression.
    Softmax {
        /// Input features.
        features: usize,
        /// Output classes (≥ 2).
        classes: usize,
    },
    /// Multilayer perceptron: dense layers of sizes `hidden` with ReLU, then a dense layer to
    /// `classes` logits ([`Sequential::mlp`]).
    Mlp {
        /// Input features.
        features: usize,
        /// Hidden layer sizes (may be empty: softmax regression).
        hidden: Vec<usize>,
        /// Output classes (≥ 2).
        classes: usize,
    },
    /// Convolutional network over `input = [channels, height, width]` images
    /// ([`Sequential::cnn`]): each `conv` block is convolution → ReLU → 2×2 max pool, then
    /// dense layers `hidden` with ReLU, then `classes` logits. Paper 000's TF-tutorial CNN is
    /// `input = [1, 28, 28]`, `conv = [{channels = 32, kernel = 5, padding = 2},
    /// {channels = 64, kernel = 5, padding = 2}]`, `hidden = [1024]`, `classes = 10`.
    Cnn {
        /// Image shape `[channels, height, width]`; examples are flat rows in that order.
        input: [usize; 3],
        /// Convolution blocks.
        conv: Vec<ConvSpec>,
        /// Hidden dense layer sizes.
        hidden: Vec<usize>,
        /// Output classes (≥ 2).
        classes: usize,
    },
    /// LeNet-5 for 1×28×28 images, 10 classes ([`Sequential::lenet5`]; 61,706 parameters).
    Lenet5 {},
    /// Character-level GRU language model ([`CharGru`]): embedding of size `embed`, a GRU with
    /// `hidden` units, a dense layer to `vocab` logits at every position.
    CharGru {
        /// Vocabulary size (tokens and targets are below it).
        vocab: usize,
        /// Embedding size.
        embed: usize,
        /// GRU hidden units.
        hidden: usize,
    },
}

impl ModelSpec {
    /// Builds the model.
    ///
    /// # Errors
    /// Sizes that are zero or too large.
    pub fn build(&self) -> Result<Box<dyn Model>> {
        Ok(match self {
            ModelSpec::Softmax { features, classes } => {
                Box::new(softmax::Softmax::new(*features, *classes)?)
            }
            ModelSpec::Mlp {
                features,
                hidden,
                classes,
            } => Box::new(Sequential::mlp(*features, hidden, *classes)?),
            ModelSpec::Cnn {
                input,
                conv,
                hidden,
                classes,
            } => Box::new(Sequential::cnn(*input, conv, hidden, *classes)?),
            ModelSpec::Lenet5 {} => Box::new(Sequential::lenet5()),
            ModelSpec::CharGru {
                vocab,
                embed,
                hidden,
            } => Box::new(CharGru::new(*vocab, *embed, *hidden)?),
        })
    }
}

/// Checks a batch's dense inputs against the model's feature count and returns `(x, rows)`.
pub(crate) fn dense<'a>(batch: &Batch<'a>, features: usize) -> Result<(&'a [f32], usize)> {
    match batch.inputs {
        Inputs::Dense { x, features: f } => {
            if f != features {
                return Err(LearnError::DimensionMismatch {
                    what: "features",
                    expected: features,
                    got: f,
                });
            }
            if x.len() % features != 0 {
                return Err(LearnError::DimensionMismatch {
                    what: "inputs",
                    expected: x.len() / features * features,
                    got: x.len(),
                });
            }
            let rows = x.len() / features;
            if batch.targets.len() != rows {
                return Err(LearnError::DimensionMismatch {
                    what: "targets",
                    expected: rows,
                    got: batch.targets.len(),
                });
            }
            if rows == 0 {
                return Err(LearnError::Empty("batch"));
            }
            Ok((x, rows))
        }
        Inputs::Tokens { .. } => Err(LearnError::Unsupported(
            "this model takes dense features, not token sequences".into(),
        )),
    }
}

/// Checks a slice length (parameters, gradient).
pub(crate) fn check_lengths(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(LearnError::DimensionMismatch {
            what,
            expected,
            got,
        })
    }
}

/// Checks a batch's token inputs (every token below `vocab`, one target per token) and returns
/// `(tokens, rows, len)`.
pub(crate) fn tokens<'a>(batch: &Batch<'a>, vocab: usize) -> Result<(&'a [u32], usize, usize)> {
    match batch.inputs {
        Inputs::Tokens { x, len } => {
            if len == 0 {
                return Err(LearnError::invalid(
                    "len",
                    0.0,
                    "sequences must have ≥ 1 token",
                ));
            }
            if x.len() % len != 0 {
                return Err(LearnError::DimensionMismatch {
                    what: "tokens",
                    expected: x.len() / len * len,
                    got: x.len(),
                });
            }
            check_lengths("targets", batch.targets.len(), x.len())?;
            if x.is_empty() {
                return Err(LearnError::Empty("batch"));
            }
            for &t in x {
                check_target(t, vocab)?;
            }
            Ok((x, x.len() / len, len))
        }
        Inputs::Dense { .. } => Err(LearnError::Unsupported(
            "this model takes token sequences, not dense features".into(),
        )),
    }
}

/// Checks that a target is a class index below `classes`.
pub(crate) fn check_target(t: u32, classes: usize) -> Result<usize> {
    let t = t as usize;
    if t < classes {
        Ok(t)
    } else {
        Err(LearnError::InvalidLabel {
            label: t as f64,
            reason: format!("class index must be < {classes}"),
        })
    }
}

/// Softmax cross-entropy of one row of logits in place: turns `logits` into
/// `softmax(logits) − onehot(target)` (the gradient of the loss with respect to the logits) and
/// returns `(loss, correct)`.
pub(crate) fn softmax_xent_in_place(logits: &mut [f32], target: usize) -> (f64, bool) {
    let mut arg = 0;
    let mut max = f32::NEG_INFINITY;
    for (i, &z) in logits.iter().enumerate() {
        if z > max {
            max = z;
            arg = i;
        }
    }
    let mut sum = 0.0f64;
    for z in logits.iter_mut() {
        let e = ((*z - max) as f64).exp();
        *z = e as f32;
        sum += e;
    }
    let p_t = logits[target] as f64 / sum;
    let loss = -(p_t.max(f64::MIN_POSITIVE)).ln();
    let inv = (1.0 / sum) as f32;
    for z in logits.iter_mut() {
        *z *= inv;
    }
    logits[target] -= 1.0;
    (loss, arg == target)
}

/// Finite-difference gradient check shared by every model's tests: compares `loss_grad`'s
/// gradient with central differences (in `f64` around the `f32` parameters) at `probes`
/// coordinates, returning the largest relative error `|g − ĝ| / max(1e-3, |g| + |ĝ|)`.
#[cfg(test)]
pub(crate) fn max_grad_error(
    model: &dyn Model,
    params: &[f32],
    batch: &Batch<'_>,
    probes: &[usize],
    h: f32,
) -> f64 {
    let mut scratch = Scratch::default();
    let mut grad = vec![0.0; model.num_params()];
    model
        .loss_grad(params, batch, &mut grad, &mut scratch)
        .unwrap();
    let mut worst: f64 = 0.0;
    let mut p = params.to_vec();
    let mut g2 = vec![0.0; model.num_params()];
    for &i in probes {
        let orig = p[i];
        p[i] = orig + h;
        let up = model.loss_grad(&p, batch, &mut g2, &mut scratch).unwrap();
        p[i] = orig - h;
        let down = model.loss_grad(&p, batch, &mut g2, &mut scratch).unwrap();
        p[i] = orig;
        let step = ((orig + h) as f64) - ((orig - h) as f64);
        let fd = (up - down) / step;
        let g = grad[i] as f64;
        let err = (g - fd).abs() / (g.abs() + fd.abs()).max(1e-3);
        worst = worst.max(err);
    }
    worst
}

#[cfg(test)]
pub(crate) mod tests {
    //! Shared test helpers: seeded batches, the finite-difference check at the model's own
    //! initialization, and "a few SGD steps lower the loss".
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn rng(seed: u64) -> rand::rngs::ChaCha8Rng {
        rand::rngs::ChaCha8Rng::seed_from_u64(seed)
    }

    /// Two small convolution blocks (3×3 pad 1 with 3 channels, then 2×2 pad 0 with 4): padded
    /// and unpadded, and odd pool inputs on the usual test images.
    pub fn two_small_convs() -> [ConvSpec; 2] {
        [
            ConvSpec {
                channels: 3,
                kernel: 3,
                padding: 1,
            },
            ConvSpec {
                channels: 4,
                kernel: 2,
                padding: 0,
            },
        ]
    }

    /// `rows` dense rows of uniform(−1, 1) features and uniform targets below `classes`.
    pub fn dense_batch(
        rows: usize,
        features: usize,
        classes: usize,
        seed: u64,
    ) -> (Vec<f32>, Vec<u32>) {
        let mut r = rng(seed);
        let x = (0..rows * features)
            .map(|_| r.random_range(-1.0..1.0))
            .collect();
        let y = (0..rows)
            .map(|_| r.random_range(0..classes as u32))
            .collect();
        (x, y)
    }

    /// `rows` sequences of `len` uniform tokens below `vocab` and their targets.
    pub fn token_batch(rows: usize, len: usize, vocab: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
        let mut r = rng(seed);
        let x = (0..rows * len)
            .map(|_| r.random_range(0..vocab as u32))
            .collect();
        let y = (0..rows * len)
            .map(|_| r.random_range(0..vocab as u32))
            .collect();
        (x, y)
    }

    /// Parameters for a gradient check: the model's initialization plus small noise on every
    /// coordinate (so biases are not all 0 and no ReLU sits exactly at its kink).
    fn check_params(model: &dyn Model, seed: u64) -> Vec<f32> {
        let mut r = rng(seed);
        let mut p = model.init(&mut r);
        p.iter_mut().for_each(|v| *v += r.random_range(-0.05..0.05));
        p
    }

    /// `probes` coordinates: all when there are at most that many, else a seeded sample.
    fn probes(n: usize, count: usize, seed: u64) -> Vec<usize> {
        if n <= count {
            return (0..n).collect();
        }
        let mut r = rng(seed);
        (0..count).map(|_| r.random_range(0..n)).collect()
    }

    /// `|a − b| / max(0.01, |a| + |b|)`: relative for gradients above 0.01, absolute below.
    ///
    /// The floor is set by `f32` rounding: the loss of a LeNet-sized model moves by ~1e-7 from
    /// rounding alone, so a central difference at `h = 1e-2` carries ~1e-5 of noise, which a
    /// floor of 1e-3 (as in [`max_grad_error`]) would count as a 1% error.
    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / (a.abs() + b.abs()).max(1e-2)
    }

    /// Central differences (`h = 1e-2`) against `loss_grad` at `probes` coordinates (all when
    /// `usize::MAX`), asserting [`rel`] below `tol`, in the smooth region only.
    ///
    /// ReLU and max pooling make the loss piecewise smooth: a perturbation of one weight of a
    /// convolution moves hundreds of pre-activations, and one of them crossing 0 (or a pool's
    /// arg max changing) bends the difference quotient. A probe counts as smooth when the
    /// quotients at `h` and `h/2` agree (they differ by O(h²) plus rounding in a smooth region,
    /// by O(1) across a kink), which uses the loss alone, never the gradient under test. At most
    /// a tenth of the probes may be skipped, so the check cannot pass vacuously.
    fn check(model: &dyn Model, batch: &Batch<'_>, probe: usize, tol: f64) {
        let p = check_params(model, 7);
        let idx = probes(model.num_params(), probe, 8);
        let mut s = Scratch::default();
        let mut grad = vec![0.0; model.num_params()];
        model.loss_grad(&p, batch, &mut grad, &mut s).unwrap();
        let mut g = vec![0.0; model.num_params()];
        let (mut worst, mut checked, mut skipped) = (0.0f64, 0, 0);
        for &i in &idx {
            let mut fd = |h: f32| {
                let mut q = p.clone();
                q[i] = p[i] + h;
                let up = model.loss_grad(&q, batch, &mut g, &mut s).unwrap();
                q[i] = p[i] - h;
                let down = model.loss_grad(&q, batch, &mut g, &mut s).unwrap();
                (up - down) / ((p[i] + h) as f64 - (p[i] - h) as f64)
            };
            let (a, b) = (fd(1e-2), fd(5e-3));
            if rel(a, b) > 2e-3 {
                skipped += 1;
                continue;
            }
            checked += 1;
            worst = worst.max(rel(grad[i] as f64, a));
        }
        assert!(
            skipped * 10 <= idx.len(),
            "{skipped} of {} probes not smooth",
            idx.len()
        );
        assert!(
            worst < tol,
            "gradient error {worst} ≥ {tol} ({checked} probes, {skipped} skipped)"
        );
    }

    /// [`check`] on a dense batch.
    pub fn check_model(
        model: &dyn Model,
        x: &[f32],
        features: usize,
        y: &[u32],
        probe: usize,
        tol: f64,
    ) {
        check(
            model,
            &Batch {
                inputs: Inputs::Dense { x, features },
                targets: y,
            },
            probe,
            tol,
        );
    }

    /// [`check`] on a token batch.
    pub fn check_tokens_model(
        model: &dyn Model,
        x: &[u32],
        len: usize,
        y: &[u32],
        probe: usize,
        tol: f64,
    ) {
        check(
            model,
            &Batch {
                inputs: Inputs::Tokens { x, len },
                targets: y,
            },
            probe,
            tol,
        );
    }

    /// Ten full-batch SGD steps at rate `lr` from the model's initialization lower the loss by
    /// at least 10%, and the evaluation agrees with `loss_grad`'s loss.
    pub fn sgd_lowers_loss(model: &dyn Model, inputs: Inputs<'_>, y: &[u32], lr: f32) {
        let batch = Batch { inputs, targets: y };
        let mut p = model.init(&mut rng(1));
        let mut g = vec![0.0; model.num_params()];
        let mut s = Scratch::default();
        let first = model.loss_grad(&p, &batch, &mut g, &mut s).unwrap();
        let e = model.evaluate(&p, &batch, &mut s).unwrap();
        assert!((e.loss() - first).abs() < 1e-9 * first.max(1.0));
        for _ in 0..10 {
            model.loss_grad(&p, &batch, &mut g, &mut s).unwrap();
            p.iter_mut().zip(&g).for_each(|(p, g)| *p -= lr * g);
        }
        let last = model.evaluate(&p, &batch, &mut s).unwrap().loss();
        assert!(last < 0.9 * first, "loss {first} → {last}");
    }

    #[test]
    fn specs_read_from_toml_like_json_and_refuse_unknown_fields() {
        let mlp: ModelSpec = serde_json::from_str(
            r#"{"kind": "mlp", "features": 784, "hidden": [200, 200], "classes": 10}"#,
        )
        .unwrap();
        assert_eq!(mlp.build().unwrap().num_params(), 199_210);
        let cnn: ModelSpec = serde_json::from_str(
            r#"{"kind": "cnn", "input": [1, 28, 28], "conv": [{"channels": 6, "kernel": 5, "padding": 2},
               {"channels": 16, "kernel": 5, "padding": 0}], "hidden": [120, 84], "classes": 10}"#,
        )
        .unwrap();
        assert_eq!(cnn.build().unwrap().num_params(), 61_706);
        assert!(serde_json::from_str::<ModelSpec>(r#"{"kind": "lenet5", "classes": 10}"#).is_err());
        assert!(
            serde_json::from_str::<ModelSpec>(
                r#"{"kind": "cnn", "input": [1, 28, 28], "conv": [{"channels": 6, "kernel": 5, "padding": 2, "stride": 1}], "hidden": [], "classes": 10}"#
            )
            .is_err()
        );
        let back: ModelSpec = serde_json::from_str(&serde_json::to_string(&cnn).unwrap()).unwrap();
        assert_eq!(back, cnn);
        assert!(
            ModelSpec::Mlp {
                features: 3,
                hidden: vec![0],
                classes: 2
            }
            .build()
            .is_err()
        );
    }

    #[test]
    fn initialization_is_deterministic_given_the_generator() {
        for spec in [
            ModelSpec::Lenet5 {},
            ModelSpec::CharGru {
                vocab: 7,
                embed: 3,
                hidden: 5,
            },
        ] {
            let m = spec.build().unwrap();
            assert_eq!(m.init(&mut rng(3)), m.init(&mut rng(3)));
            assert_ne!(m.init(&mut rng(3)), m.init(&mut rng(4)));
        }
    }
}

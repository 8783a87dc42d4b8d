//! Models with gradients for federated training (issue 13).
//!
//! Every model keeps its parameters as **one flat `f32` vector**, so a client's update (new
//! parameters minus old) is a slice the mechanisms take directly, and the server optimizer, the
//! checkpoints and the secure sum all see the same layout. A model is a description (layer sizes)
//! plus pure functions of `(parameters, batch)`: no hidden state, no threads inside (the simulator
//! parallelizes across clients, which keeps results independent of the thread count), no
//! randomness except in [`Model::init`], which takes the generator.
//!
//! | model | spec | layers |
//! |---|---|---|
//! | softmax regression | [`ModelSpec::Softmax`] | `W x + b`, softmax cross-entropy |

pub mod softmax;

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
        let mut b = if self.bufs.len() > i {
            std::mem::take(&mut self.bufs[i])
        } else {
            Vec::new()
        };
        b.clear();
        b.resize(len, 0.0);
        b
    }
    /// Returns a buffer taken with [`Scratch::take`].
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
}

impl ModelSpec {
    /// Builds the model.
    ///
    /// # Errors
    /// Sizes that are zero or too large.
    pub fn build(&self) -> Result<Box<dyn Model>> {
        match *self {
            ModelSpec::Softmax { features, classes } => {
                Ok(Box::new(softmax::Softmax::new(features, classes)?))
            }
        }
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

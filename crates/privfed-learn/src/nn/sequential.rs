//! Feed-forward networks as a list of layers: the multilayer perceptron ([`Sequential::mlp`]),
//! convolutional networks ([`Sequential::cnn`]) and the LeNet-5 preset ([`Sequential::lenet5`]).
//!
//! Activations are batch-major flat buffers, `rows × size`; a convolutional activation is
//! `c × h × w` per row, so **flatten** is the identity on the buffer (the first dense layer
//! reads the `c·h·w` values of a row in channel, row, column order, as PyTorch's `flatten` does).
//! The last layer's outputs are logits; the loss is softmax cross-entropy averaged over the
//! batch, whose gradient with respect to the logits is `(softmax(z) − e_y) / rows`.
//!
//! Parameters are the layers' parameters in order (each layer: weights, then biases). The
//! forward pass keeps every layer's output; the backward pass walks the layers in reverse,
//! each taking its input and `∂L/∂output` and producing its parameter gradient and
//! `∂L/∂input` (skipped for the first layer).

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::activation::{relu_backward, relu_forward};
use super::conv::Conv2d;
use super::dense::{Dense, Init};
use super::pool::MaxPool2;
use super::{
    Batch, Eval, Model, Scratch, check_lengths, check_target, dense, softmax_xent_in_place,
};
use crate::error::{LearnError, Result};

/// One convolution block of a [`Sequential::cnn`]: `k × k` convolution (stride 1) with zero
/// padding, then ReLU, then 2×2 max pooling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvSpec {
    /// Output channels.
    pub channels: usize,
    /// Kernel side `k`.
    pub kernel: usize,
    /// Zero padding on each side (`(k − 1) / 2` keeps the size).
    pub padding: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Layer {
    Dense(Dense),
    Relu(usize),
    Conv(Conv2d),
    Pool(MaxPool2),
}

impl Layer {
    fn out_size(&self) -> usize {
        match self {
            Layer::Dense(d) => d.out,
            Layer::Relu(s) => *s,
            Layer::Conv(c) => c.out_size(),
            Layer::Pool(p) => p.out_size(),
        }
    }
    fn num_params(&self) -> usize {
        match self {
            Layer::Dense(d) => d.num_params(),
            Layer::Conv(c) => c.num_params(),
            Layer::Relu(_) | Layer::Pool(_) => 0,
        }
    }
}

/// Largest parameter vector a model may have (2^28 `f32`, 1 GiB).
pub(crate) const MAX_PARAMS: usize = 1 << 28;

/// A feed-forward network ending in softmax cross-entropy over `classes` logits.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequential {
    input: usize,
    classes: usize,
    layers: Vec<Layer>,
    /// `offsets[l]..offsets[l + 1]` are layer `l`'s parameters.
    offsets: Vec<usize>,
    /// Largest work buffer of any convolution ([`Conv2d::work_len`]; 0 without convolutions).
    col: usize,
}

impl Sequential {
    fn new(input: usize, layers: Vec<Layer>) -> Result<Self> {
        let classes = layers.last().map_or(0, Layer::out_size);
        if classes < 2 {
            return Err(LearnError::invalid(
                "classes",
                classes as f64,
                "must be ≥ 2",
            ));
        }
        let mut offsets = vec![0];
        let mut total = 0usize;
        for l in &layers {
            total = total.saturating_add(l.num_params());
            offsets.push(total);
        }
        if total > MAX_PARAMS {
            return Err(LearnError::invalid(
                "model size",
                total as f64,
                format!("more than {MAX_PARAMS} parameters"),
            ));
        }
        let col = layers
            .iter()
            .map(|l| match l {
                Layer::Conv(c) => c.work_len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        Ok(Self {
            input,
            classes,
            layers,
            offsets,
            col,
        })
    }

    /// Multilayer perceptron: `features → hidden[0] → … → classes`, dense layers with ReLU
    /// between them (none after the last).
    ///
    /// # Errors
    /// A zero size, fewer than 2 classes, more than 2^28 parameters.
    pub fn mlp(features: usize, hidden: &[usize], classes: usize) -> Result<Self> {
        let mut layers = Vec::new();
        let mut inp = features;
        if features == 0 {
            return Err(LearnError::invalid("features", 0.0, "must be ≥ 1"));
        }
        push_dense(&mut layers, &mut inp, hidden, classes)?;
        Self::new(features, layers)
    }

    /// Convolutional network over `input = [channels, height, width]` images: each
    /// [`ConvSpec`] block (convolution → ReLU → 2×2 max pool), flatten, dense layers of sizes
    /// `hidden` with ReLU, then a dense layer to `classes` logits.
    ///
    /// # Errors
    /// Zero sizes, a kernel larger than its padded input, an input too small to pool, fewer than
    /// 2 classes, more than 2^28 parameters.
    pub fn cnn(
        input: [usize; 3],
        conv: &[ConvSpec],
        hidden: &[usize],
        classes: usize,
    ) -> Result<Self> {
        let [mut c, mut h, mut w] = input;
        if c.checked_mul(h)
            .and_then(|v| v.checked_mul(w))
            .is_none_or(|v| v == 0 || v > MAX_PARAMS)
        {
            return Err(LearnError::invalid(
                "input",
                (c * h * w) as f64,
                format!("image {c}×{h}×{w} must be non-empty and at most 2^28 values"),
            ));
        }
        let mut layers = Vec::new();
        for s in conv {
            let cv = Conv2d::new(c, h, w, s.channels, s.kernel, s.padding)?;
            if cv.out_size() > MAX_PARAMS || cv.patch() > MAX_PARAMS {
                return Err(LearnError::invalid(
                    "channels",
                    s.channels as f64,
                    "activation too large",
                ));
            }
            let pool = MaxPool2::new(cv.c_out, cv.oh(), cv.ow())?;
            layers.push(Layer::Conv(cv));
            layers.push(Layer::Relu(cv.out_size()));
            layers.push(Layer::Pool(pool));
            (c, (h, w)) = (cv.c_out, pool.out_hw());
        }
        let mut inp = c * h * w;
        push_dense(&mut layers, &mut inp, hidden, classes)?;
        Self::new(input.iter().product(), layers)
    }

    /// LeNet-5 for 1×28×28 images (MNIST): conv 5×5 6 channels padding 2 → ReLU → pool →
    /// conv 5×5 16 channels → ReLU → pool → dense 400→120 → ReLU → 120→84 → ReLU → 84→10;
    /// 61,706 parameters.
    pub fn lenet5() -> Self {
        Self::cnn([1, 28, 28], &LENET5_CONV, &[120, 84], 10).expect("LeNet-5's sizes are valid")
    }

    /// Inputs per example.
    pub fn input_size(&self) -> usize {
        self.input
    }

    /// Output classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Forward pass over `x` (`rows × input`) into the per-layer outputs `acts`, then
    /// softmax cross-entropy in place on the logits; returns `(loss sum, correct)`. The last
    /// buffer then holds `softmax − onehot` per row.
    fn forward(
        &self,
        params: &[f32],
        x: &[f32],
        targets: &[u32],
        acts: &mut [Vec<f32>],
        col: &mut [f32],
        mut args: Option<&mut [u8]>,
    ) -> Result<(f64, u64)> {
        let rows = targets.len();
        let mut arg_at = 0;
        for (l, layer) in self.layers.iter().enumerate() {
            let (done, rest) = acts.split_at_mut(l);
            let x = if l == 0 { x } else { &done[l - 1][..] };
            let y = &mut rest[0][..];
            let p = &params[self.offsets[l]..self.offsets[l + 1]];
            match layer {
                Layer::Dense(d) => d.forward(p, x, y, rows),
                Layer::Relu(_) => relu_forward(x, y),
                Layer::Conv(c) => c.forward(p, x, y, rows, col),
                Layer::Pool(pool) => {
                    let n = rows * pool.out_size();
                    let arg = args.as_deref_mut().map(|a| &mut a[arg_at..arg_at + n]);
                    arg_at += n;
                    pool.forward(x, y, rows, arg);
                }
            }
        }
        let logits = acts.last_mut().expect("at least one layer");
        let (mut loss, mut correct) = (0.0, 0);
        for (row, &t) in logits.chunks_exact_mut(self.classes).zip(targets) {
            let (l, ok) = softmax_xent_in_place(row, t as usize);
            loss += l;
            correct += ok as u64;
        }
        Ok((loss, correct))
    }

    /// Outputs per example of all the max pools together (one arg-max byte each in training).
    fn pool_outputs(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                Layer::Pool(p) => p.out_size(),
                _ => 0,
            })
            .sum()
    }

    /// Checks the parameters and the batch, returns `(x, rows)` with every target in range.
    fn check<'a>(&self, params: &[f32], batch: &Batch<'a>) -> Result<(&'a [f32], usize)> {
        check_lengths("params", params.len(), self.num_params())?;
        let (x, rows) = dense(batch, self.input)?;
        for &t in batch.targets {
            check_target(t, self.classes)?;
        }
        Ok((x, rows))
    }

    /// Every layer's output buffer and the convolutions' work buffer, with stale contents: each
    /// layer's forward pass writes all of its output, and a convolution all of its work buffer
    /// that it reads (a test runs on NaN-filled buffers).
    fn take_buffers(&self, scratch: &mut Scratch, rows: usize) -> (Vec<Vec<f32>>, Vec<f32>) {
        let acts = (0..self.layers.len())
            .map(|l| scratch.take_dirty(l, rows * self.layers[l].out_size()))
            .collect();
        (acts, scratch.take_dirty(self.layers.len(), self.col))
    }

    fn put_buffers(&self, scratch: &mut Scratch, acts: Vec<Vec<f32>>, col: Vec<f32>) {
        for (l, a) in acts.into_iter().enumerate() {
            scratch.put(l, a);
        }
        scratch.put(self.layers.len(), col);
    }
}

/// The LeNet-5 convolution blocks.
pub(crate) const LENET5_CONV: [ConvSpec; 2] = [
    ConvSpec {
        channels: 6,
        kernel: 5,
        padding: 2,
    },
    ConvSpec {
        channels: 16,
        kernel: 5,
        padding: 0,
    },
];

/// Appends dense layers `inp → hidden… → classes` with ReLU between them.
fn push_dense(
    layers: &mut Vec<Layer>,
    inp: &mut usize,
    hidden: &[usize],
    classes: usize,
) -> Result<()> {
    for &h in hidden {
        if h == 0 {
            return Err(LearnError::invalid(
                "hidden",
                0.0,
                "layer sizes must be ≥ 1",
            ));
        }
        check_product(*inp, h)?;
        layers.push(Layer::Dense(Dense { inp: *inp, out: h }));
        layers.push(Layer::Relu(h));
        *inp = h;
    }
    if classes < 2 {
        return Err(LearnError::invalid(
            "classes",
            classes as f64,
            "must be ≥ 2",
        ));
    }
    check_product(*inp, classes)?;
    layers.push(Layer::Dense(Dense {
        inp: *inp,
        out: classes,
    }));
    Ok(())
}

fn check_product(a: usize, b: usize) -> Result<()> {
    if a.checked_mul(b).is_none_or(|v| v > MAX_PARAMS) {
        return Err(LearnError::invalid(
            "model size",
            a as f64 * b as f64,
            format!("a {a}×{b} layer exceeds {MAX_PARAMS} parameters"),
        ));
    }
    Ok(())
}

impl Model for Sequential {
    fn num_params(&self) -> usize {
        *self.offsets.last().expect("offsets start with 0")
    }

    fn init(&self, rng: &mut dyn Rng) -> Vec<f32> {
        let mut p = vec![0.0; self.num_params()];
        for (l, layer) in self.layers.iter().enumerate() {
            let relu_next = matches!(self.layers.get(l + 1), Some(Layer::Relu(_)));
            let init = if relu_next { Init::He } else { Init::Glorot };
            let pl = &mut p[self.offsets[l]..self.offsets[l + 1]];
            match layer {
                Layer::Dense(d) => d.init(pl, init, rng),
                Layer::Conv(c) => c.init(pl, rng),
                Layer::Relu(_) | Layer::Pool(_) => {}
            }
        }
        p
    }

    fn loss_grad(
        &self,
        params: &[f32],
        batch: &Batch<'_>,
        grad: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<f64> {
        let (x, rows) = self.check(params, batch)?;
        check_lengths("grad", grad.len(), self.num_params())?;
        let (mut acts, mut col) = self.take_buffers(scratch, rows);
        // Each max pool's arg max, kept for its backward pass.
        // (Every byte is written by the forward pass: only the length matters here.)
        let mut args = std::mem::take(&mut scratch.bytes);
        args.resize(rows * self.pool_outputs(), 0);
        let (loss, _) = self.forward(
            params,
            x,
            batch.targets,
            &mut acts,
            &mut col,
            Some(&mut args),
        )?;
        let mut arg_end = args.len();
        let n_layers = self.layers.len();
        // `∂L/∂output` and `∂L/∂input` of the layer at hand, swapped after each layer: buffers as
        // long as the largest activation with stale contents (every backward pass writes all of
        // `∂L/∂input`), used through their leading `rows × size` values.
        let widest = self.layers.iter().map(Layer::out_size).max().unwrap_or(0);
        let mut dy = scratch.take_dirty(n_layers + 1, rows * widest);
        let mut dx = scratch.take_dirty(n_layers + 3, rows * widest);
        // ∂(mean loss)/∂logits = (softmax − onehot) / rows (the forward pass left softmax − onehot).
        let inv = 1.0 / rows as f32;
        let mut dy_len = rows * self.classes;
        for (d, z) in dy.iter_mut().zip(&acts[n_layers - 1]) {
            *d = z * inv;
        }
        let mut dcol = scratch.take_dirty(n_layers + 2, self.col);
        let mut l = n_layers;
        while l > 0 {
            l -= 1;
            let x = if l == 0 { x } else { &acts[l - 1][..] };
            let dx_len = if l > 0 {
                rows * self.layers[l - 1].out_size()
            } else {
                0
            };
            let want_dx = (l > 0).then_some(&mut dx[..dx_len]);
            let dy_l = &dy[..dy_len];
            let p = &params[self.offsets[l]..self.offsets[l + 1]];
            let g = &mut grad[self.offsets[l]..self.offsets[l + 1]];
            match &self.layers[l] {
                Layer::Dense(d) => d.backward(p, x, dy_l, g, want_dx, rows),
                Layer::Conv(c) => c.backward(p, x, dy_l, g, want_dx, rows, &mut col, &mut dcol),
                Layer::Relu(_) => {
                    if let Some(dx) = want_dx {
                        relu_backward(x, dy_l, dx);
                    }
                }
                Layer::Pool(pool) => {
                    // The layers run backwards, so each pool's arg max ends where the previous
                    // (later) pool's began.
                    let n = rows * pool.out_size();
                    arg_end -= n;
                    let arg = &args[arg_end..arg_end + n];
                    // A ReLU feeding the pool (every `cnn` block) is folded into the pool's
                    // backward pass: one pass instead of two, the same bits.
                    let relu_below = l >= 2 && matches!(self.layers[l - 1], Layer::Relu(_));
                    if let Some(dx) = want_dx {
                        if relu_below {
                            pool.backward_from(arg, dy_l, dx, rows, Some(&acts[l]));
                            l -= 1;
                        } else {
                            pool.backward_from(arg, dy_l, dx, rows, None);
                        }
                    }
                }
            }
            std::mem::swap(&mut dy, &mut dx);
            dy_len = dx_len;
        }
        scratch.put(n_layers + 1, dy);
        scratch.put(n_layers + 3, dx);
        scratch.put(n_layers + 2, dcol);
        scratch.bytes = args;
        self.put_buffers(scratch, acts, col);
        Ok(loss / rows as f64)
    }

    fn evaluate(&self, params: &[f32], batch: &Batch<'_>, scratch: &mut Scratch) -> Result<Eval> {
        let (x, rows) = self.check(params, batch)?;
        let (mut acts, mut col) = self.take_buffers(scratch, rows);
        let result = self.forward(params, x, batch.targets, &mut acts, &mut col, None);
        self.put_buffers(scratch, acts, col);
        let (loss_sum, correct) = result?;
        Ok(Eval {
            loss_sum,
            correct,
            count: rows as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::tests::{check_model, dense_batch, sgd_lowers_loss, two_small_convs};
    use crate::nn::{Inputs, ModelSpec};

    #[test]
    fn lenet5_has_61706_parameters_and_the_tf_tutorial_cnn_is_expressible() {
        assert_eq!(Sequential::lenet5().num_params(), 61_706);
        let spec: ModelSpec = serde_json::from_str(r#"{"kind": "lenet5"}"#).unwrap();
        assert_eq!(spec.build().unwrap().num_params(), 61_706);
        // Paper 000's TF-tutorial CNN: conv 5×5 32 pad 2, pool, conv 5×5 64 pad 2, pool,
        // dense 1024, dense 10: 832 + 51,264 + 3,212,288 + 10,250 parameters.
        let tf = Sequential::cnn(
            [1, 28, 28],
            &[
                ConvSpec {
                    channels: 32,
                    kernel: 5,
                    padding: 2,
                },
                ConvSpec {
                    channels: 64,
                    kernel: 5,
                    padding: 2,
                },
            ],
            &[1024],
            10,
        )
        .unwrap();
        assert_eq!(tf.num_params(), 832 + 51_264 + 3_212_288 + 10_250);
        let mlp = Sequential::mlp(784, &[200, 200], 10).unwrap();
        assert_eq!(mlp.num_params(), 785 * 200 + 201 * 200 + 201 * 10);
    }

    #[test]
    fn lenet5_gradient_matches_finite_differences_at_sampled_coordinates() {
        let m = Sequential::lenet5();
        let (x, y) = dense_batch(2, 784, 10, 3);
        // 5e-3 rather than 2e-3: probes that pass the smoothness screen (quotients at h and h/2
        // agreeing to 2e-3) may still sit near a kink by that much; the worst seen is 2.6e-3.
        check_model(&m, &x, 784, &y, 120, 5e-3);
    }

    /// Buffers are reused without zeroing, so every value a pass reads must be one it wrote:
    /// with every scratch buffer full of NaN, loss, gradient and evaluation have the same bits
    /// as with fresh zeroed buffers (odd pool inputs, padded and unpadded convolutions, MLP).
    #[test]
    fn stale_scratch_buffers_change_nothing() {
        let odd = Sequential::cnn([2, 9, 7], &two_small_convs(), &[5], 3).unwrap();
        let models = [
            (Sequential::lenet5(), 784, 10),
            (odd, 2 * 9 * 7, 3),
            (Sequential::mlp(7, &[6, 5], 4).unwrap(), 7, 4),
        ];
        for (m, features, classes) in models {
            let (x, y) = dense_batch(3, features, classes, 5);
            let batch = Batch {
                inputs: Inputs::Dense { x: &x, features },
                targets: &y,
            };
            let p = m.init(&mut <rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(2));
            let run = |s: &mut Scratch| {
                let mut g = vec![0.0f32; m.num_params()];
                let loss = m.loss_grad(&p, &batch, &mut g, s).unwrap();
                let e = m.evaluate(&p, &batch, s).unwrap();
                let bits: Vec<u32> = g.iter().map(|v| v.to_bits()).collect();
                (loss.to_bits(), e.loss_sum.to_bits(), e.correct, bits)
            };
            let fresh = run(&mut Scratch::default());
            let mut stale = Scratch {
                bufs: vec![vec![f32::NAN; 1 << 20]; 16],
                bytes: vec![0xff; 1 << 16],
            };
            assert_eq!(run(&mut stale), fresh, "{features} features");
            // And again on the buffers the first run left.
            assert_eq!(run(&mut stale), fresh, "{features} features, second run");
        }
    }

    #[test]
    fn mlp_gradient_matches_finite_differences() {
        let m = Sequential::mlp(7, &[6, 5], 4).unwrap();
        let (x, y) = dense_batch(5, 7, 4, 8);
        check_model(&m, &x, 7, &y, usize::MAX, 2e-3);
    }

    #[test]
    fn sgd_steps_lower_the_loss() {
        let m = Sequential::lenet5();
        let (x, y) = dense_batch(10, 784, 10, 4);
        sgd_lowers_loss(
            &m,
            Inputs::Dense {
                x: &x,
                features: 784,
            },
            &y,
            0.05,
        );
        let m = Sequential::mlp(20, &[16], 3).unwrap();
        let (x, y) = dense_batch(12, 20, 3, 6);
        sgd_lowers_loss(
            &m,
            Inputs::Dense {
                x: &x,
                features: 20,
            },
            &y,
            0.1,
        );
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let m = Sequential::cnn(
            [1, 6, 6],
            &[ConvSpec {
                channels: 2,
                kernel: 3,
                padding: 1,
            }],
            &[4],
            3,
        )
        .unwrap();
        let p = m.init(&mut <rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0));
        let mut s = Scratch::default();
        let mut g = vec![0.0; m.num_params()];
        let x = vec![0.5; 72];
        let ok = Batch {
            inputs: Inputs::Dense {
                x: &x,
                features: 36,
            },
            targets: &[0, 2],
        };
        assert!(m.loss_grad(&p, &ok, &mut g, &mut s).is_ok());
        let bad_target = Batch {
            targets: &[0, 3],
            ..ok
        };
        assert!(matches!(
            m.loss_grad(&p, &bad_target, &mut g, &mut s),
            Err(LearnError::InvalidLabel { .. })
        ));
        assert!(matches!(
            m.evaluate(&p, &bad_target, &mut s),
            Err(LearnError::InvalidLabel { .. })
        ));
        let wrong_features = Batch {
            inputs: Inputs::Dense {
                x: &x,
                features: 24,
            },
            targets: &[0, 1, 2],
        };
        assert!(matches!(
            m.evaluate(&p, &wrong_features, &mut s),
            Err(LearnError::DimensionMismatch { .. })
        ));
        let ragged = Batch {
            inputs: Inputs::Dense {
                x: &x[..70],
                features: 36,
            },
            targets: &[0, 2],
        };
        assert!(m.evaluate(&p, &ragged, &mut s).is_err());
        let few_targets = Batch {
            targets: &[0],
            ..ok
        };
        assert!(m.evaluate(&p, &few_targets, &mut s).is_err());
        let empty = Batch {
            inputs: Inputs::Dense {
                x: &[],
                features: 36,
            },
            targets: &[],
        };
        assert!(matches!(
            m.evaluate(&p, &empty, &mut s),
            Err(LearnError::Empty(_))
        ));
        let tokens = Batch {
            inputs: Inputs::Tokens { x: &[1, 2], len: 2 },
            targets: &[0, 1],
        };
        assert!(matches!(
            m.evaluate(&p, &tokens, &mut s),
            Err(LearnError::Unsupported(_))
        ));
        assert!(matches!(
            m.evaluate(&p[1..], &ok, &mut s),
            Err(LearnError::DimensionMismatch { .. })
        ));
        assert!(matches!(
            m.loss_grad(&p, &ok, &mut g[1..], &mut s),
            Err(LearnError::DimensionMismatch { .. })
        ));
        // Bad architectures.
        assert!(Sequential::mlp(0, &[], 2).is_err());
        assert!(Sequential::mlp(3, &[0], 2).is_err());
        assert!(Sequential::mlp(3, &[], 1).is_err());
        assert!(Sequential::mlp(1 << 20, &[1 << 10], 2).is_err());
        assert!(
            Sequential::cnn(
                [1, 3, 3],
                &[ConvSpec {
                    channels: 2,
                    kernel: 3,
                    padding: 0
                }],
                &[],
                2
            )
            .is_err()
        );
        assert!(Sequential::cnn([0, 28, 28], &[], &[], 2).is_err());
        assert!(
            Sequential::cnn(
                [1, 28, 28],
                &[ConvSpec {
                    channels: 2,
                    kernel: 9,
                    padding: 9
                }],
                &[],
                2
            )
            .is_err()
        );
    }

    #[test]
    fn results_do_not_depend_on_the_scratch_history() {
        // A scratch used by a bigger batch first gives the same loss and gradient.
        let m = Sequential::lenet5();
        let p = m.init(&mut <rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(2));
        let (x, y) = dense_batch(4, 784, 10, 9);
        let big = Batch {
            inputs: Inputs::Dense {
                x: &x,
                features: 784,
            },
            targets: &y,
        };
        let small = Batch {
            inputs: Inputs::Dense {
                x: &x[..784],
                features: 784,
            },
            targets: &y[..1],
        };
        let (mut g1, mut g2) = (vec![0.0; m.num_params()], vec![0.0; m.num_params()]);
        let l1 = m
            .loss_grad(&p, &small, &mut g1, &mut Scratch::default())
            .unwrap();
        let mut used = Scratch::default();
        m.loss_grad(&p, &big, &mut g2, &mut used).unwrap();
        let l2 = m.loss_grad(&p, &small, &mut g2, &mut used).unwrap();
        assert_eq!((l1, &g1), (l2, &g2));
    }
}

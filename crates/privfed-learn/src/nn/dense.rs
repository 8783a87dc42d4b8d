//! Fully connected (dense) layer over a batch, as one matrix product.
//!
//! Parameters `W` (`out × inp`, row-major) then `b` (`out`). For a batch `X` (`rows × inp`):
//!
//! * forward: `Y = X Wᵀ + 1 bᵀ` (`rows × out`);
//! * backward, given `G = ∂L/∂Y`: `∂L/∂W = Gᵀ X`, `∂L/∂b = Gᵀ 1` (column sums),
//!   `∂L/∂X = G W`.
//!
//! Initialization: `W` uniform on `±√(6 / inp)` (He) when a ReLU follows, `±√(6 / (inp + out))`
//! (Glorot) otherwise; `b = 0`.

use rand::{Rng, RngExt};

use super::gemm::{Acc, matmul, n, t};

/// Which uniform initialization a weight matrix gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Init {
    /// He (Kaiming) uniform, `±√(6 / fan_in)`: for layers followed by a ReLU.
    He,
    /// Glorot (Xavier) uniform, `±√(6 / (fan_in + fan_out))`: for the rest.
    Glorot,
}

/// Fills `w` uniformly on `±limit` from `rng` (in order, so a seed fixes the result).
pub(crate) fn init_uniform(
    w: &mut [f32],
    init: Init,
    fan_in: usize,
    fan_out: usize,
    rng: &mut dyn Rng,
) {
    let limit = match init {
        Init::He => (6.0 / fan_in as f64).sqrt(),
        Init::Glorot => (6.0 / (fan_in + fan_out) as f64).sqrt(),
    } as f32;
    for x in w.iter_mut() {
        *x = rng.random_range(-limit..=limit);
    }
}

/// A dense layer's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dense {
    /// Inputs per row.
    pub inp: usize,
    /// Outputs per row.
    pub out: usize,
}

impl Dense {
    /// `out·inp + out`.
    pub fn num_params(&self) -> usize {
        self.out * self.inp + self.out
    }

    /// Draws `W`, zeroes `b`.
    pub fn init(&self, p: &mut [f32], init: Init, rng: &mut dyn Rng) {
        let (w, b) = p.split_at_mut(self.out * self.inp);
        init_uniform(w, init, self.inp, self.out, rng);
        b.fill(0.0);
    }

    /// `y = x Wᵀ + b` for `rows` rows.
    pub fn forward(&self, p: &[f32], x: &[f32], y: &mut [f32], rows: usize) {
        let (w, b) = p.split_at(self.out * self.inp);
        matmul(y, Acc::Replace, n(x), t(w), rows, self.inp, self.out);
        for row in y[..rows * self.out].chunks_exact_mut(self.out) {
            for (y, b) in row.iter_mut().zip(b) {
                *y += b;
            }
        }
    }

    /// Writes `∂L/∂W`, `∂L/∂b` into `g` (overwritten) and, when asked, `∂L/∂X` into `dx`.
    pub fn backward(
        &self,
        p: &[f32],
        x: &[f32],
        dy: &[f32],
        g: &mut [f32],
        dx: Option<&mut [f32]>,
        rows: usize,
    ) {
        let (gw, gb) = g.split_at_mut(self.out * self.inp);
        matmul(gw, Acc::Replace, t(dy), n(x), self.out, rows, self.inp);
        gb.fill(0.0);
        for row in dy[..rows * self.out].chunks_exact(self.out) {
            for (g, d) in gb.iter_mut().zip(row) {
                *g += d;
            }
        }
        if let Some(dx) = dx {
            let w = &p[..self.out * self.inp];
            matmul(dx, Acc::Replace, n(dy), n(w), rows, self.out, self.inp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::sequential::Sequential;
    use crate::nn::tests::{check_model, dense_batch};

    #[test]
    fn forward_is_x_w_transpose_plus_b() {
        let d = Dense { inp: 2, out: 3 };
        let p = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.5, -0.5, 1.0];
        let mut y = [0.0; 6];
        d.forward(&p, &[1.0, 1.0, 2.0, 0.0], &mut y, 2);
        assert_eq!(y, [3.5, 6.5, 12.0, 2.5, 5.5, 11.0]);
    }

    #[test]
    fn gradients_of_a_two_dense_layer_network_match_finite_differences() {
        // Dense → ReLU → dense: the second layer's input gradient reaches the first's weights.
        let m = Sequential::mlp(6, &[5], 3).unwrap();
        let (x, y) = dense_batch(4, 6, 3, 11);
        check_model(&m, &x, 6, &y, usize::MAX, 2e-3);
    }
}

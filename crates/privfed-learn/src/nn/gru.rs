//! A single-layer gated recurrent unit (Cho et al. 2014, in PyTorch's formulation) over
//! time-major sequences, with backpropagation through time.
//!
//! Parameters: `W_x` (`3H × D`) and `b_x` (`3H`), then `W_h` (`3H × H`) and `b_h` (`3H`); the
//! `3H` rows are the reset, update and candidate gates in that order (PyTorch's `r, z, n`).
//! With `h_0 = 0`, for `t = 1..T` and each sequence of the batch:
//!
//! ```text
//! a = W_x x_t + b_x,   c = W_h h_{t−1} + b_h          (3H each: a_r, a_z, a_n; c_r, c_z, c_n)
//! r = σ(a_r + c_r),    z = σ(a_z + c_z),    n = tanh(a_n + r ⊙ c_n)
//! h_t = (1 − z) ⊙ n + z ⊙ h_{t−1}
//! ```
//!
//! Backward, given `∂L/∂h_t` from the layer above (`G_t`), from `t = T` down with `δ = 0`:
//!
//! ```text
//! g = G_t + δ                                    (total gradient reaching h_t)
//! ∂n = g ⊙ (1 − z),   ∂z = g ⊙ (h_{t−1} − n)
//! ∂a_n = ∂n ⊙ (1 − n²),  ∂r = ∂a_n ⊙ c_n,  ∂a_r = ∂r ⊙ r(1 − r),  ∂a_z = ∂z ⊙ z(1 − z)
//! ∂a = (∂a_r, ∂a_z, ∂a_n),   ∂c = (∂a_r, ∂a_z, ∂a_n ⊙ r)
//! δ = g ⊙ z + W_hᵀ ∂c                             (gradient reaching h_{t−1})
//! ```
//!
//! and over all steps `∂L/∂W_x = Σ ∂a x_tᵀ`, `∂L/∂b_x = Σ ∂a`, `∂L/∂W_h = Σ ∂c h_{t−1}ᵀ`,
//! `∂L/∂b_h = Σ ∂c`, `∂L/∂x_t = W_xᵀ ∂a`. The input projections of all steps are one matrix
//! product before the recurrence, and the weight gradients one product each after it; only
//! `W_h h_{t−1}` and `W_hᵀ ∂c` are computed step by step.
//!
//! Initialization: Glorot uniform for `W_x` (fan `D`, `3H`) and `W_h` (fan `H`, `3H`), biases 0.

use rand::Rng;

use super::activation::sigmoid;
use super::dense::{Dense, Init};
use super::gemm::{Acc, matmul, n};

/// A GRU layer's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gru {
    /// Input size `D`.
    pub input: usize,
    /// Hidden size `H`.
    pub hidden: usize,
}

/// Buffers of one forward pass over `T` steps of `B` sequences (rows are `t·B + b`), kept for
/// the backward pass.
#[derive(Debug, Default)]
pub(crate) struct GruState {
    /// Activated gates `r, z, n` per row (`T·B × 3H`).
    pub gates: Vec<f32>,
    /// Hidden projections `W_h h_{t−1} + b_h` per row (`T·B × 3H`).
    pub hproj: Vec<f32>,
    /// `h_0 … h_T` (`(T+1)·B × H`; `h_0 = 0`).
    pub hs: Vec<f32>,
}

impl Gru {
    fn input_proj(&self) -> Dense {
        Dense {
            inp: self.input,
            out: 3 * self.hidden,
        }
    }
    fn hidden_proj(&self) -> Dense {
        Dense {
            inp: self.hidden,
            out: 3 * self.hidden,
        }
    }

    /// `3H·D + 3H + 3H·H + 3H`.
    pub fn num_params(&self) -> usize {
        self.input_proj().num_params() + self.hidden_proj().num_params()
    }

    /// Glorot-uniform weights, zero biases.
    pub fn init(&self, p: &mut [f32], rng: &mut dyn Rng) {
        let (px, ph) = p.split_at_mut(self.input_proj().num_params());
        self.input_proj().init(px, Init::Glorot, rng);
        self.hidden_proj().init(ph, Init::Glorot, rng);
    }

    /// Runs the recurrence over `x` (`steps·batch × D`, time-major) and fills `st`; the outputs
    /// `h_1 … h_T` are `st.hs[batch·H..]`.
    pub fn forward(&self, p: &[f32], x: &[f32], steps: usize, batch: usize, st: &mut GruState) {
        let h = self.hidden;
        let (rows, h3) = (steps * batch, 3 * h);
        let (px, ph) = p.split_at(self.input_proj().num_params());
        st.gates.clear();
        st.gates.resize(rows * h3, 0.0);
        st.hproj.clear();
        st.hproj.resize(rows * h3, 0.0);
        st.hs.clear();
        st.hs.resize((steps + 1) * batch * h, 0.0);
        // a = W_x x + b_x for every step at once (held in `gates` until activated).
        self.input_proj().forward(px, x, &mut st.gates, rows);
        for s in 0..steps {
            let (before, after) = st.hs.split_at_mut((s + 1) * batch * h);
            let hprev = &before[s * batch * h..];
            let hnext = &mut after[..batch * h];
            let c = &mut st.hproj[s * batch * h3..(s + 1) * batch * h3];
            self.hidden_proj().forward(ph, hprev, c, batch);
            let g = &mut st.gates[s * batch * h3..(s + 1) * batch * h3];
            for b in 0..batch {
                let (gb, cb) = (&mut g[b * h3..(b + 1) * h3], &c[b * h3..(b + 1) * h3]);
                for j in 0..h {
                    let r = sigmoid(gb[j] + cb[j]);
                    let z = sigmoid(gb[h + j] + cb[h + j]);
                    let nn = (gb[2 * h + j] + r * cb[2 * h + j]).tanh();
                    let hp = hprev[b * h + j];
                    hnext[b * h + j] = (1.0 - z) * nn + z * hp;
                    (gb[j], gb[h + j], gb[2 * h + j]) = (r, z, nn);
                }
            }
        }
    }

    /// Backpropagation through time. `dhs` is `∂L/∂h_t` from above (`steps·batch × H`);
    /// writes the parameter gradient into `g` (overwritten) and `∂L/∂x` into `dx`. `da`, `dc`
    /// (`steps·batch × 3H`) and `delta` (`batch × H`) are work buffers.
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        p: &[f32],
        x: &[f32],
        steps: usize,
        batch: usize,
        st: &GruState,
        dhs: &[f32],
        g: &mut [f32],
        dx: &mut [f32],
        da: &mut Vec<f32>,
        dc: &mut Vec<f32>,
        delta: &mut Vec<f32>,
    ) {
        let h = self.hidden;
        let (rows, h3) = (steps * batch, 3 * h);
        let split = self.input_proj().num_params();
        let (px, ph) = p.split_at(split);
        let (gx, gh) = g.split_at_mut(split);
        for v in [&mut *da, &mut *dc] {
            v.clear();
            v.resize(rows * h3, 0.0);
        }
        delta.clear();
        delta.resize(batch * h, 0.0);
        for s in (0..steps).rev() {
            let block = s * batch * h3..(s + 1) * batch * h3;
            let (gates, cproj) = (&st.gates[block.clone()], &st.hproj[block.clone()]);
            let hprev = &st.hs[s * batch * h..(s + 1) * batch * h];
            let dh_above = &dhs[s * batch * h..(s + 1) * batch * h];
            let (das, dcs) = (&mut da[block.clone()], &mut dc[block]);
            for b in 0..batch {
                let o = b * h3;
                for j in 0..h {
                    let (r, z, nn) = (gates[o + j], gates[o + h + j], gates[o + 2 * h + j]);
                    let gtot = dh_above[b * h + j] + delta[b * h + j];
                    let dn = gtot * (1.0 - z);
                    let dz = gtot * (hprev[b * h + j] - nn);
                    let dan = dn * (1.0 - nn * nn);
                    let dar = dan * cproj[o + 2 * h + j] * r * (1.0 - r);
                    let daz = dz * z * (1.0 - z);
                    (das[o + j], das[o + h + j], das[o + 2 * h + j]) = (dar, daz, dan);
                    (dcs[o + j], dcs[o + h + j], dcs[o + 2 * h + j]) = (dar, daz, dan * r);
                    delta[b * h + j] = gtot * z;
                }
            }
            // δ += W_hᵀ ∂c, as rows: δ (B × H) += ∂c (B × 3H) · W_h (3H × H).
            matmul(delta, Acc::Add, n(dcs), n(&ph[..h3 * h]), batch, h3, h);
        }
        self.hidden_proj()
            .backward(ph, &st.hs[..rows * h], dc, gh, None, rows);
        self.input_proj().backward(px, x, da, gx, Some(dx), rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::activation::sigmoid;

    #[test]
    fn two_steps_follow_the_gate_equations() {
        // D = 1, H = 1: parameters W_x = (wr, wz, wn), b_x, W_h = (ur, uz, un), b_h.
        let gru = Gru {
            input: 1,
            hidden: 1,
        };
        let p = [
            0.5, -0.3, 0.8, 0.1, 0.2, -0.1, 0.7, -0.4, 0.9, 0.05, -0.02, 0.03,
        ];
        let x = [1.5, -0.5];
        let mut st = GruState::default();
        gru.forward(&p, &x, 2, 1, &mut st);
        let mut h = 0.0f32;
        for (s, &xt) in x.iter().enumerate() {
            let a = [p[0] * xt + p[3], p[1] * xt + p[4], p[2] * xt + p[5]];
            let c = [p[6] * h + p[9], p[7] * h + p[10], p[8] * h + p[11]];
            let r = sigmoid(a[0] + c[0]);
            let z = sigmoid(a[1] + c[1]);
            let n = (a[2] + r * c[2]).tanh();
            h = (1.0 - z) * n + z * h;
            assert!(
                (st.hs[s + 1] - h).abs() < 1e-6,
                "step {s}: {} vs {h}",
                st.hs[s + 1]
            );
            assert!((st.gates[3 * s + 2] - n).abs() < 1e-6);
        }
        assert_eq!(gru.num_params(), 12);
    }
}

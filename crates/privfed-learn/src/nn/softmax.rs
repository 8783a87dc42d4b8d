//! Multinomial logistic (softmax) regression over a flat parameter vector.
//!
//! Parameters: `W` (`classes × features`, row-major) then `b` (`classes`). Logits `z = W x + b`;
//! loss `−ln softmax(z)_y`; gradient `∂/∂W = (softmax(z) − e_y) xᵀ`, `∂/∂b = softmax(z) − e_y`,
//! averaged over the batch.

use rand::Rng;

use super::{
    Batch, Eval, Model, Scratch, check_lengths, check_target, dense, softmax_xent_in_place,
};
use crate::error::{LearnError, Result};

/// Softmax regression with `features` inputs and `classes` outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Softmax {
    features: usize,
    classes: usize,
}

impl Softmax {
    /// A model with the given sizes (`features ≥ 1`, `classes ≥ 2`, at most 2^28 parameters).
    ///
    /// # Errors
    /// Sizes out of range.
    pub fn new(features: usize, classes: usize) -> Result<Self> {
        if features == 0 {
            return Err(LearnError::invalid("features", 0.0, "must be ≥ 1"));
        }
        if classes < 2 {
            return Err(LearnError::invalid(
                "classes",
                classes as f64,
                "must be ≥ 2",
            ));
        }
        if features.saturating_add(1).saturating_mul(classes) > 1 << 28 {
            return Err(LearnError::invalid(
                "features",
                features as f64,
                "model would exceed 2^28 parameters",
            ));
        }
        Ok(Self { features, classes })
    }

    fn forward_row(&self, params: &[f32], x: &[f32], logits: &mut [f32]) {
        let (w, b) = params.split_at(self.classes * self.features);
        for (c, z) in logits.iter_mut().enumerate() {
            let row = &w[c * self.features..(c + 1) * self.features];
            *z = b[c] + row.iter().zip(x).map(|(a, b)| a * b).sum::<f32>();
        }
    }
}

impl Model for Softmax {
    fn num_params(&self) -> usize {
        (self.features + 1) * self.classes
    }

    fn init(&self, _rng: &mut dyn Rng) -> Vec<f32> {
        // A convex model: zeros are the standard start (and make runs comparable across seeds).
        vec![0.0; self.num_params()]
    }

    fn loss_grad(
        &self,
        params: &[f32],
        batch: &Batch<'_>,
        grad: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<f64> {
        check_lengths("params", params.len(), self.num_params())?;
        check_lengths("grad", grad.len(), self.num_params())?;
        let (x, rows) = dense(batch, self.features)?;
        grad.fill(0.0);
        let logits = scratch.zeroed(0, self.classes);
        let (gw, gb) = grad.split_at_mut(self.classes * self.features);
        let mut loss = 0.0;
        for (r, &t) in batch.targets.iter().enumerate() {
            let t = check_target(t, self.classes)?;
            let xr = &x[r * self.features..(r + 1) * self.features];
            self.forward_row(params, xr, logits);
            loss += softmax_xent_in_place(logits, t).0;
            for (c, &d) in logits.iter().enumerate() {
                gb[c] += d;
                let g = &mut gw[c * self.features..(c + 1) * self.features];
                for (gi, xi) in g.iter_mut().zip(xr) {
                    *gi += d * xi;
                }
            }
        }
        let inv = 1.0 / rows as f32;
        grad.iter_mut().for_each(|g| *g *= inv);
        Ok(loss / rows as f64)
    }

    fn evaluate(&self, params: &[f32], batch: &Batch<'_>, scratch: &mut Scratch) -> Result<Eval> {
        check_lengths("params", params.len(), self.num_params())?;
        let (x, _) = dense(batch, self.features)?;
        let logits = scratch.zeroed(0, self.classes);
        let mut eval = Eval::default();
        for (r, &t) in batch.targets.iter().enumerate() {
            let t = check_target(t, self.classes)?;
            self.forward_row(
                params,
                &x[r * self.features..(r + 1) * self.features],
                logits,
            );
            let (l, ok) = softmax_xent_in_place(logits, t);
            eval.merge(Eval {
                loss_sum: l,
                correct: ok as u64,
                count: 1,
            });
        }
        Ok(eval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Inputs, max_grad_error};
    use rand::{RngExt, SeedableRng};

    #[test]
    fn gradient_matches_finite_differences() {
        let m = Softmax::new(5, 3).unwrap();
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(1);
        let params: Vec<f32> = (0..m.num_params())
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let x: Vec<f32> = (0..20).map(|_| rng.random_range(-1.0..1.0)).collect();
        let targets = [0, 2, 1, 2];
        let batch = Batch {
            inputs: Inputs::Dense { x: &x, features: 5 },
            targets: &targets,
        };
        let probes: Vec<usize> = (0..m.num_params()).collect();
        let err = max_grad_error(&m, &params, &batch, &probes, 1e-2);
        assert!(err < 1e-3, "relative gradient error {err}");
    }

    #[test]
    fn zero_parameters_give_ln_classes_and_bad_input_is_refused() {
        let m = Softmax::new(2, 4).unwrap();
        let p = m.init(&mut rand::rngs::ChaCha8Rng::seed_from_u64(0));
        let x = [1.0, 2.0];
        let batch = Batch {
            inputs: Inputs::Dense { x: &x, features: 2 },
            targets: &[3],
        };
        let mut s = Scratch::default();
        let e = m.evaluate(&p, &batch, &mut s).unwrap();
        assert!((e.loss() - 4f64.ln()).abs() < 1e-6);
        let bad = Batch {
            inputs: Inputs::Dense { x: &x, features: 2 },
            targets: &[4],
        };
        assert!(matches!(
            m.evaluate(&p, &bad, &mut s),
            Err(LearnError::InvalidLabel { .. })
        ));
        let tokens = Batch {
            inputs: Inputs::Tokens { x: &[1, 2], len: 2 },
            targets: &[0],
        };
        assert!(m.evaluate(&p, &tokens, &mut s).is_err());
        assert!(Softmax::new(0, 2).is_err() && Softmax::new(3, 1).is_err());
    }
}

//! Generalized linear models trained by Draw-and-Discard (paper 003 §III-A, `docs/ALGORITHMS.md` §4.1):
//! linear regression, logistic regression and multinomial logistic (softmax) regression.
//!
//! Weights are a flat vector. For the linear and logistic models it has one weight per feature;
//! for softmax with `C` classes it is row-major `C × features` (row `c` holds class `c`'s weights).
//! There is no implicit intercept: append a constant-1 feature to get one. Paper 003 normalizes
//! features and responses to `[0, 1]`; the models accept any finite values.
//!
//! Every model's per-example gradient has the GLM form `(ŷ − y)·x` (per class for softmax), which
//! is what the client step averages and clips.

use crate::error::{LearnError, Result, check_vector};
use serde::{Deserialize, Serialize};

/// One labelled example.
///
/// `y` is the response in `[0, 1]` for the linear and logistic models (paper 003 normalizes it),
/// and the class index (an integer in `0..classes`, stored as `f64`) for softmax.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// Feature vector `x`.
    pub x: Vec<f64>,
    /// Response (or class index for softmax).
    pub y: f64,
}

impl Example {
    /// An example with features `x` and response/class `y`.
    pub fn new(x: Vec<f64>, y: f64) -> Self {
        Self { x, y }
    }
}

/// The kind of GLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GlmKind {
    /// Linear regression: `ŷ = w·x`, loss `½(ŷ − y)²`.
    Linear,
    /// Logistic regression: `ŷ = 1/(1 + e^{−w·x})`, loss `−y ln ŷ − (1 − y) ln(1 − ŷ)`.
    Logistic,
    /// Multinomial logistic regression: `p_c = e^{w_c·x} / Σ_j e^{w_j·x}`, loss `−ln p_y`.
    Softmax {
        /// Number of classes `C ≥ 2`.
        classes: usize,
    },
}

/// A validated GLM: its kind and number of features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Glm {
    kind: GlmKind,
    features: usize,
}

fn check_features(features: usize) -> Result<()> {
    if features == 0 {
        Err(LearnError::invalid("features", 0.0, "must be ≥ 1"))
    } else {
        Ok(())
    }
}

/// Numerically stable logistic function `1/(1 + e^{−z})`.
fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

fn dot(w: &[f64], x: &[f64]) -> f64 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

impl Glm {
    /// Linear regression on `features` features.
    pub fn linear(features: usize) -> Result<Self> {
        check_features(features)?;
        Ok(Self {
            kind: GlmKind::Linear,
            features,
        })
    }

    /// Logistic regression on `features` features.
    pub fn logistic(features: usize) -> Result<Self> {
        check_features(features)?;
        Ok(Self {
            kind: GlmKind::Logistic,
            features,
        })
    }

    /// Softmax regression on `features` features and `classes ≥ 2` classes.
    pub fn softmax(features: usize, classes: usize) -> Result<Self> {
        check_features(features)?;
        if classes < 2 {
            return Err(LearnError::invalid(
                "classes",
                classes as f64,
                "must be ≥ 2",
            ));
        }
        Ok(Self {
            kind: GlmKind::Softmax { classes },
            features,
        })
    }

    /// The model's kind.
    pub fn kind(&self) -> GlmKind {
        self.kind
    }

    /// Number of features.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Number of outputs: 1, or `C` for softmax.
    pub fn outputs(&self) -> usize {
        match self.kind {
            GlmKind::Softmax { classes } => classes,
            _ => 1,
        }
    }

    /// Number of weights `p` (features × outputs).
    pub fn num_weights(&self) -> usize {
        self.features * self.outputs()
    }

    fn check_weights(&self, weights: &[f64]) -> Result<()> {
        check_vector("weights", weights, self.num_weights())
    }

    fn check_example(&self, e: &Example) -> Result<()> {
        check_vector("features", &e.x, self.features)?;
        match self.kind {
            GlmKind::Softmax { classes } => {
                if !(e.y >= 0.0 && e.y < classes as f64 && e.y.fract() == 0.0) {
                    return Err(LearnError::InvalidLabel {
                        label: e.y,
                        reason: format!("must be a class index in 0..{classes}"),
                    });
                }
            }
            _ => {
                if !e.y.is_finite() {
                    return Err(LearnError::InvalidLabel {
                        label: e.y,
                        reason: "must be finite".into(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Writes the prediction for `x` into `out` (length [`Glm::outputs`]): `w·x` (linear), the
    /// probability of class 1 (logistic), or the class probabilities (softmax). Unchecked helper.
    fn predict_into(&self, weights: &[f64], x: &[f64], out: &mut [f64]) {
        match self.kind {
            GlmKind::Linear => out[0] = dot(weights, x),
            GlmKind::Logistic => out[0] = sigmoid(dot(weights, x)),
            GlmKind::Softmax { .. } => {
                let f = self.features;
                for (c, o) in out.iter_mut().enumerate() {
                    *o = dot(&weights[c * f..(c + 1) * f], x);
                }
                let m = out.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut s = 0.0;
                for o in out.iter_mut() {
                    *o = (*o - m).exp();
                    s += *o;
                }
                for o in out.iter_mut() {
                    *o /= s;
                }
            }
        }
    }

    /// The prediction for `x`: `[w·x]` (linear), `[P(y = 1)]` (logistic) or the `C` class
    /// probabilities (softmax).
    pub fn predict(&self, weights: &[f64], x: &[f64]) -> Result<Vec<f64>> {
        self.check_weights(weights)?;
        check_vector("features", x, self.features)?;
        let mut out = vec![0.0; self.outputs()];
        self.predict_into(weights, x, &mut out);
        Ok(out)
    }

    /// Mean loss over `examples` (squared error ½(ŷ−y)², log loss, or cross-entropy); errors on an
    /// empty set.
    pub fn loss(&self, weights: &[f64], examples: &[Example]) -> Result<f64> {
        self.check_weights(weights)?;
        if examples.is_empty() {
            return Err(LearnError::Empty("examples"));
        }
        let mut out = vec![0.0; self.outputs()];
        let mut total = 0.0;
        for e in examples {
            self.check_example(e)?;
            total += match self.kind {
                GlmKind::Linear => {
                    let r = dot(weights, &e.x) - e.y;
                    0.5 * r * r
                }
                GlmKind::Logistic => {
                    // −y ln σ(z) − (1−y) ln(1−σ(z)) = softplus(z) − y z, computed stably.
                    let z = dot(weights, &e.x);
                    let softplus = if z > 0.0 {
                        z + (-z).exp().ln_1p()
                    } else {
                        z.exp().ln_1p()
                    };
                    softplus - e.y * z
                }
                GlmKind::Softmax { .. } => {
                    let f = self.features;
                    for (c, o) in out.iter_mut().enumerate() {
                        *o = dot(&weights[c * f..(c + 1) * f], &e.x);
                    }
                    let m = out.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let lse = m + out.iter().map(|o| (o - m).exp()).sum::<f64>().ln();
                    lse - out[e.y as usize]
                }
            };
        }
        Ok(total / examples.len() as f64)
    }

    /// The average gradient of the loss over `examples`, `G = (1/N_c) Σ (ŷ_i − y_i)·x_i`
    /// (paper 003 eq. (3) and Alg. 1; per class `c`: `(p_c − 1[y = c])·x` for softmax).
    /// Errors on an empty set, wrong lengths, non-finite values or invalid labels.
    pub fn average_gradient(&self, weights: &[f64], examples: &[Example]) -> Result<Vec<f64>> {
        self.check_weights(weights)?;
        if examples.is_empty() {
            return Err(LearnError::Empty("examples"));
        }
        let f = self.features;
        let mut g = vec![0.0; self.num_weights()];
        let mut out = vec![0.0; self.outputs()];
        for e in examples {
            self.check_example(e)?;
            self.predict_into(weights, &e.x, &mut out);
            match self.kind {
                GlmKind::Softmax { .. } => {
                    for (c, p) in out.iter().enumerate() {
                        let r = p - if c == e.y as usize { 1.0 } else { 0.0 };
                        for (gj, xj) in g[c * f..(c + 1) * f].iter_mut().zip(&e.x) {
                            *gj += r * xj;
                        }
                    }
                }
                _ => {
                    let r = out[0] - e.y;
                    for (gj, xj) in g.iter_mut().zip(&e.x) {
                        *gj += r * xj;
                    }
                }
            }
        }
        let n = examples.len() as f64;
        for gj in &mut g {
            *gj /= n;
        }
        Ok(g)
    }

    /// Fraction of `examples` classified correctly: argmax for softmax, `ŷ ≥ ½` against `y ≥ ½`
    /// for logistic. For linear regression it returns the same thresholded agreement (useful when
    /// the response is binary).
    pub fn accuracy(&self, weights: &[f64], examples: &[Example]) -> Result<f64> {
        self.check_weights(weights)?;
        if examples.is_empty() {
            return Err(LearnError::Empty("examples"));
        }
        let mut out = vec![0.0; self.outputs()];
        let mut correct = 0usize;
        for e in examples {
            self.check_example(e)?;
            self.predict_into(weights, &e.x, &mut out);
            let ok = match self.kind {
                GlmKind::Softmax { .. } => {
                    let mut best = 0;
                    for c in 1..out.len() {
                        if out[c] > out[best] {
                            best = c;
                        }
                    }
                    best == e.y as usize
                }
                _ => (out[0] >= 0.5) == (e.y >= 0.5),
            };
            correct += usize::from(ok);
        }
        Ok(correct as f64 / examples.len() as f64)
    }
}

/// The average of the `k` instances, weight by weight: the model Draw-and-Discard predicts with
/// (paper 003 Alg. 2, "Prediction: average k model instances"). Errors if `instances` is empty or
/// the instances differ in length or hold non-finite values.
pub fn average_instances<S: AsRef<[f64]>>(instances: &[S]) -> Result<Vec<f64>> {
    let first = instances.first().ok_or(LearnError::Empty("instances"))?;
    let p = first.as_ref().len();
    let mut mean = vec![0.0; p];
    for inst in instances {
        check_vector("instance", inst.as_ref(), p)?;
        for (m, w) in mean.iter_mut().zip(inst.as_ref()) {
            *m += w;
        }
    }
    let k = instances.len() as f64;
    for m in &mut mean {
        *m /= k;
    }
    Ok(mean)
}

/// The average of the `k` instances' predictions for `x` (the alternative ensemble rule of paper
/// 003 §III-D5).
pub fn predict_average_of_predictions<S: AsRef<[f64]>>(
    glm: &Glm,
    instances: &[S],
    x: &[f64],
) -> Result<Vec<f64>> {
    if instances.is_empty() {
        return Err(LearnError::Empty("instances"));
    }
    let mut acc = vec![0.0; glm.outputs()];
    for inst in instances {
        let p = glm.predict(inst.as_ref(), x)?;
        for (a, v) in acc.iter_mut().zip(p) {
            *a += v;
        }
    }
    let k = instances.len() as f64;
    for a in &mut acc {
        *a /= k;
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;
    use rand::RngExt;

    fn random_examples(glm: &Glm, n: usize, seed: u64) -> Vec<Example> {
        let mut rng = seeded_rng_for_experiments(seed);
        (0..n)
            .map(|_| {
                let x: Vec<f64> = (0..glm.features()).map(|_| rng.random::<f64>()).collect();
                let y = match glm.kind() {
                    GlmKind::Softmax { classes } => rng.random_range(0..classes) as f64,
                    _ => rng.random::<f64>(),
                };
                Example::new(x, y)
            })
            .collect()
    }

    /// The analytic gradient matches central finite differences of the mean loss (relative error
    /// below 1e-6 with step 1e-5: the truncation error is O(h²) ≈ 1e-10 here).
    #[test]
    fn gradient_matches_finite_differences() {
        let models = [
            Glm::linear(5).unwrap(),
            Glm::logistic(5).unwrap(),
            Glm::softmax(4, 3).unwrap(),
        ];
        for (mi, glm) in models.iter().enumerate() {
            let ex = random_examples(glm, 10, 11 + mi as u64);
            let mut rng = seeded_rng_for_experiments(99 + mi as u64);
            let w: Vec<f64> = (0..glm.num_weights())
                .map(|_| rng.random::<f64>() * 2.0 - 1.0)
                .collect();
            let g = glm.average_gradient(&w, &ex).unwrap();
            let h = 1e-5;
            for j in 0..w.len() {
                let mut wp = w.clone();
                wp[j] += h;
                let mut wm = w.clone();
                wm[j] -= h;
                let fd = (glm.loss(&wp, &ex).unwrap() - glm.loss(&wm, &ex).unwrap()) / (2.0 * h);
                assert!(
                    (fd - g[j]).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "{glm:?} weight {j}: analytic {} vs finite difference {fd}",
                    g[j]
                );
            }
        }
    }

    #[test]
    fn softmax_probabilities_sum_to_one_and_are_stable() {
        let glm = Glm::softmax(2, 4).unwrap();
        let w = vec![800.0, 0.0, -800.0, 0.0, 1.0, 1.0, 0.0, 0.0];
        let p = glm.predict(&w, &[1.0, 0.5]).unwrap();
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p.iter().all(|v| v.is_finite()));
        assert!((p[0] - 1.0).abs() < 1e-12);
        let l = glm.loss(&w, &[Example::new(vec![1.0, 0.5], 2.0)]).unwrap();
        // Logits (800, −800, 1.5, 0): −ln p_2 = 800 − 1.5 up to e^{−798}.
        assert!((l - 798.5).abs() < 1e-9, "{l}");
    }

    #[test]
    fn logistic_loss_is_stable_for_large_margins() {
        let glm = Glm::logistic(1).unwrap();
        let l = glm
            .loss(&[-1000.0], &[Example::new(vec![1.0], 1.0)])
            .unwrap();
        assert!((l - 1000.0).abs() < 1e-9);
        let l = glm
            .loss(&[1000.0], &[Example::new(vec![1.0], 1.0)])
            .unwrap();
        assert!(l >= 0.0 && l < 1e-300_f64.max(1e-12));
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let glm = Glm::softmax(2, 3).unwrap();
        let w = vec![0.0; 6];
        assert!(matches!(
            glm.average_gradient(&w, &[]),
            Err(LearnError::Empty(_))
        ));
        assert!(matches!(
            glm.average_gradient(&w, &[Example::new(vec![0.0], 0.0)]),
            Err(LearnError::DimensionMismatch { .. })
        ));
        assert!(matches!(
            glm.average_gradient(&w, &[Example::new(vec![0.0, f64::NAN], 0.0)]),
            Err(LearnError::NonFinite { .. })
        ));
        for bad in [3.0, -1.0, 0.5, f64::NAN] {
            assert!(matches!(
                glm.average_gradient(&w, &[Example::new(vec![0.0, 1.0], bad)]),
                Err(LearnError::InvalidLabel { .. })
            ));
        }
        assert!(glm.predict(&w[..5], &[0.0, 0.0]).is_err());
        assert!(Glm::softmax(3, 1).is_err());
        assert!(Glm::linear(0).is_err());
        assert!(average_instances::<Vec<f64>>(&[]).is_err());
        assert!(average_instances(&[vec![1.0], vec![1.0, 2.0]]).is_err());
    }

    #[test]
    fn ensemble_average_and_accuracy() {
        let a = average_instances(&[vec![1.0, 2.0], vec![3.0, -2.0]]).unwrap();
        assert_eq!(a, vec![2.0, 0.0]);
        let glm = Glm::logistic(1).unwrap();
        let p = predict_average_of_predictions(&glm, &[vec![0.0], vec![0.0]], &[1.0]).unwrap();
        assert_eq!(p, vec![0.5]);
        let ex = vec![Example::new(vec![1.0], 1.0), Example::new(vec![-1.0], 0.0)];
        assert_eq!(glm.accuracy(&[5.0], &ex).unwrap(), 1.0);
        assert_eq!(glm.accuracy(&[-5.0], &ex).unwrap(), 0.0);
    }
}

//! Elementwise activations and their derivatives.
//!
//! * ReLU: `y = max(0, x)`; backward `∂L/∂x = ∂L/∂y · [x > 0]` (the subgradient 0 at the kink).
//! * Logistic sigmoid: `σ(x) = 1 / (1 + e^(−x))`; `σ' = σ (1 − σ)` (used by the GRU's gates).
//! * Hyperbolic tangent: `tanh' = 1 − tanh²` (used by the GRU's candidate state).
//!
//! Backward passes take the forward input (ReLU) or output (σ, tanh), so a model keeps only
//! what it already has.

/// ReLU of `x` into `y` (same length).
pub(crate) fn relu_forward(x: &[f32], y: &mut [f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = x.max(0.0);
    }
}

/// ReLU backward: `dx = dy · [x > 0]` (all the same length).
pub(crate) fn relu_backward(x: &[f32], dy: &[f32], dx: &mut [f32]) {
    for ((dx, &dy), &x) in dx.iter_mut().zip(dy).zip(x) {
        *dx = if x > 0.0 { dy } else { 0.0 };
    }
}

/// Logistic sigmoid, evaluated without overflow for large `|x|`.
pub(crate) fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_central_differences() {
        let h = 1e-3f64;
        for &x in &[-3.0f32, -0.7, -0.1, 0.2, 1.5, 4.0] {
            let s = sigmoid(x) as f64;
            let fd = (sigmoid((x as f64 + h) as f32) as f64
                - sigmoid((x as f64 - h) as f32) as f64)
                / (2.0 * h);
            assert!((fd - s * (1.0 - s)).abs() < 1e-4, "sigmoid' at {x}");
            let t = (x as f64).tanh();
            let fd = ((x as f64 + h).tanh() - (x as f64 - h).tanh()) / (2.0 * h);
            assert!((fd - (1.0 - t * t)).abs() < 1e-6);
        }
        assert_eq!(sigmoid(-200.0), 0.0);
        assert_eq!(sigmoid(200.0), 1.0);
        let (x, dy) = ([-1.0, 0.0, 2.0], [5.0, 5.0, 5.0]);
        let (mut y, mut dx) = ([0.0; 3], [0.0; 3]);
        relu_forward(&x, &mut y);
        relu_backward(&x, &dy, &mut dx);
        assert_eq!((y, dx), ([0.0, 0.0, 2.0], [0.0, 0.0, 5.0]));
    }
}

//! Max pooling over non-overlapping 2×2 windows (stride 2).
//!
//! Input `c × h × w` per example, output `c × ⌊h/2⌋ × ⌊w/2⌋` (a last odd row or column is
//! dropped, as in PyTorch's and TensorFlow's `valid` pooling).
//!
//! * forward: `Y[c, y, x] = max_{i,j ∈ {0,1}} X[c, 2y+i, 2x+j]`;
//! * backward: `∂L/∂X[c, 2y+i, 2x+j] = ∂L/∂Y[c, y, x]` at the window's arg max (the first in
//!   row-major order on ties) and 0 elsewhere.
//!
//! The backward pass finds the arg max again from `X`, so nothing but the input is kept.

use crate::error::{LearnError, Result};

/// A 2×2 max pool's input geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaxPool2 {
    /// Channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
}

impl MaxPool2 {
    /// Checks that the input has at least one 2×2 window.
    pub fn new(c: usize, h: usize, w: usize) -> Result<Self> {
        if c == 0 || h < 2 || w < 2 {
            return Err(LearnError::invalid(
                "pool input",
                h.min(w) as f64,
                format!("a 2×2 max pool needs at least 2×2 pixels (got {c}×{h}×{w})"),
            ));
        }
        Ok(Self { c, h, w })
    }

    /// Output height and width.
    pub fn out_hw(&self) -> (usize, usize) {
        (self.h / 2, self.w / 2)
    }

    /// Inputs per example.
    pub fn in_size(&self) -> usize {
        self.c * self.h * self.w
    }

    /// Outputs per example.
    pub fn out_size(&self) -> usize {
        let (oh, ow) = self.out_hw();
        self.c * oh * ow
    }

    /// Calls `f(output index, input index of the window's arg max)` for every output of every
    /// example.
    fn for_each_argmax(&self, x: &[f32], rows: usize, mut f: impl FnMut(usize, usize)) {
        let (oh, ow) = self.out_hw();
        let mut o = 0;
        for plane in 0..rows * self.c {
            let base = plane * self.h * self.w;
            for y in 0..oh {
                for xx in 0..ow {
                    let top = base + 2 * y * self.w + 2 * xx;
                    let mut best = top;
                    for cand in [top + 1, top + self.w, top + self.w + 1] {
                        if x[cand] > x[best] {
                            best = cand;
                        }
                    }
                    f(o, best);
                    o += 1;
                }
            }
        }
    }

    /// `y = maxpool(x)` for `rows` examples.
    pub fn forward(&self, x: &[f32], y: &mut [f32], rows: usize) {
        self.for_each_argmax(x, rows, |o, i| y[o] = x[i]);
    }

    /// `dx` = `dy` routed to each window's arg max (overwritten).
    pub fn backward(&self, x: &[f32], dy: &[f32], dx: &mut [f32], rows: usize) {
        dx[..rows * self.in_size()].fill(0.0);
        self.for_each_argmax(x, rows, |o, i| dx[i] += dy[o]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_odd_sizes_and_routes_gradients_to_the_maximum() {
        let p = MaxPool2::new(1, 3, 5).unwrap();
        #[rustfmt::skip]
        let x = [
            1.0, 5.0, 2.0, 2.0, 9.0,
            3.0, 4.0, 7.0, 1.0, 9.0,
            9.0, 9.0, 9.0, 9.0, 9.0,
        ];
        let mut y = [0.0; 2];
        p.forward(&x, &mut y, 1);
        assert_eq!(y, [5.0, 7.0]);
        let mut dx = [1.0; 15];
        p.backward(&x, &[10.0, 20.0], &mut dx, 1);
        let mut want = [0.0; 15];
        want[1] = 10.0;
        want[7] = 20.0;
        assert_eq!(dx, want);
        assert!(MaxPool2::new(1, 1, 4).is_err());
    }
}

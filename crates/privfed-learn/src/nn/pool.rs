//! Max pooling over non-overlapping 2×2 windows (stride 2).
//!
//! Input `c × h × w` per example, output `c × ⌊h/2⌋ × ⌊w/2⌋` (a last odd row or column is
//! dropped, as in PyTorch's and TensorFlow's `valid` pooling).
//!
//! * forward: `Y[c, y, x] = max_{i,j ∈ {0,1}} X[c, 2y+i, 2x+j]`;
//! * backward: `∂L/∂X[c, 2y+i, 2x+j] = ∂L/∂Y[c, y, x]` at the window's arg max (the first in
//!   row-major order on ties) and 0 elsewhere.
//!
//! In training the forward pass records each window's arg max (one byte per output) and the
//! backward pass routes `∂L/∂Y` by it, with no comparisons (finding it again from `X` was a sixth
//! of a LeNet-5 step).

use super::simd::{run, simd_kernel};
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

    /// `y = maxpool(x)` for `rows` examples; with `arg`, also each window's arg max (0–3, one
    /// byte per output) for [`MaxPool2::backward_from`].
    pub fn forward(&self, x: &[f32], y: &mut [f32], rows: usize, arg: Option<&mut [u8]>) {
        run(PoolRows {
            pool: self,
            x,
            y,
            rows,
            arg,
        });
    }

    /// `dx` = `dy` routed to each window's arg max as [`MaxPool2::forward`] recorded it in `arg`
    /// (overwritten): no comparisons, one pass writing each window.
    ///
    /// With `relu_out = Some(y)` (this pool's outputs, the pool reading a ReLU's output), `dx` is
    /// the gradient with respect to the **ReLU's input** instead: the ReLU passes the gradient
    /// at the arg max exactly when the pooled value is positive, so the two backward passes fold
    /// into one with the same bits as running them in turn.
    pub fn backward_from(
        &self,
        arg: &[u8],
        dy: &[f32],
        dx: &mut [f32],
        rows: usize,
        relu_out: Option<&[f32]>,
    ) {
        let (h, w) = (self.h, self.w);
        // A last odd row or column belongs to no window.
        if h % 2 == 1 || w % 2 == 1 {
            dx[..rows * self.in_size()].fill(0.0);
        }
        run(Route {
            pool: self,
            arg,
            dy,
            dx,
            rows,
            relu_out,
        });
    }
}

simd_kernel!(
    /// [`pool_rows`]' arguments.
    PoolRows<'a> => pool_rows(
        pool: &'a MaxPool2,
        x: &'a [f32],
        y: &'a mut [f32],
        rows: usize,
        arg: Option<&'a mut [u8]>,
    )
);

/// [`MaxPool2::forward`]'s loop (run through [`run`]).
#[inline(always)]
fn pool_rows(pool: &MaxPool2, x: &[f32], y: &mut [f32], rows: usize, mut arg: Option<&mut [u8]>) {
    let (oh, ow) = pool.out_hw();
    let (h, w) = (pool.h, pool.w);
    for p in 0..rows * pool.c {
        for r in 0..oh {
            let top = &x[p * h * w + 2 * r * w..][..2 * ow];
            let bottom = &x[p * h * w + (2 * r + 1) * w..][..2 * ow];
            let at = (p * oh + r) * ow;
            let mut arg = arg.as_deref_mut().map(|a| &mut a[at..at + ow]);
            for (i, o) in y[at..at + ow].iter_mut().enumerate() {
                let (v, k) =
                    window_max(top[2 * i], top[2 * i + 1], bottom[2 * i], bottom[2 * i + 1]);
                *o = v;
                if let Some(a) = arg.as_deref_mut() {
                    a[i] = k as u8;
                }
            }
        }
    }
}

simd_kernel!(
    /// [`route`]'s arguments.
    Route<'a> => route(
        pool: &'a MaxPool2,
        arg: &'a [u8],
        dy: &'a [f32],
        dx: &'a mut [f32],
        rows: usize,
        relu_out: Option<&'a [f32]>,
    )
);

/// [`MaxPool2::backward_from`]'s loop (run through [`run`]).
#[inline(always)]
fn route(
    pool: &MaxPool2,
    arg: &[u8],
    dy: &[f32],
    dx: &mut [f32],
    rows: usize,
    relu_out: Option<&[f32]>,
) {
    let (oh, ow) = pool.out_hw();
    let (h, w) = (pool.h, pool.w);
    for p in 0..rows * pool.c {
        for r in 0..oh {
            let at = (p * oh + r) * ow;
            let (g, a) = (&dy[at..][..ow], &arg[at..][..ow]);
            let (d_top, d_bottom) = dx[p * h * w + 2 * r * w..][..2 * w].split_at_mut(w);
            let (d_top, d_bottom) = (&mut d_top[..2 * ow], &mut d_bottom[..2 * ow]);
            let gate = relu_out.map(|y| &y[at..][..ow]);
            for i in 0..ow {
                // `0 + g`, not `g`: the same bits as accumulating onto zeros (−0 becomes +0).
                let mut v = (0.0 + g[i]).to_bits();
                if let Some(y) = gate {
                    v &= u32::from(y[i] > 0.0).wrapping_neg();
                }
                let k = u32::from(a[i]);
                let at = |j: u32| f32::from_bits(v & u32::from(k == j).wrapping_neg());
                d_top[2 * i] = at(0);
                d_top[2 * i + 1] = at(1);
                d_bottom[2 * i] = at(2);
                d_bottom[2 * i + 1] = at(3);
            }
        }
    }
}

/// The maximum of a window `(top left, top right, bottom left, bottom right)` and its position
/// 0–3, the first in that order on ties (`>` comparisons, as a loop over the window would make).
/// Selects by bit masks: LLVM turns `if`-selects here back into branches, which mispredict on
/// every other window.
#[inline(always)]
fn window_max(a: f32, b: f32, c: f32, d: f32) -> (f32, u32) {
    #[inline(always)]
    fn pick(take: bool, new: (f32, u32), old: (f32, u32)) -> (f32, u32) {
        let m = u32::from(take).wrapping_neg();
        (
            f32::from_bits((new.0.to_bits() & m) | (old.0.to_bits() & !m)),
            (new.1 & m) | (old.1 & !m),
        )
    }
    let mut best = (a, 0);
    best = pick(b > best.0, (b, 1), best);
    best = pick(c > best.0, (c, 2), best);
    best = pick(d > best.0, (d, 3), best);
    best
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
        p.forward(&x, &mut y, 1, None);
        assert_eq!(y, [5.0, 7.0]);
        let mut arg = [9u8; 2];
        p.forward(&x, &mut y, 1, Some(&mut arg));
        let mut dx = [1.0; 15];
        p.backward_from(&arg, &[10.0, 20.0], &mut dx, 1, None);
        let mut want = [0.0; 15];
        want[1] = 10.0;
        want[7] = 20.0;
        assert_eq!(dx, want);
        assert!(MaxPool2::new(1, 1, 4).is_err());
    }

    /// The row-pair kernels give the same bits as a plain loop over windows (first arg max on
    /// ties, gradients added onto zeros), for even and odd sizes, several planes and examples,
    /// inputs with many ties, and gradients that include −0.
    #[test]
    fn kernels_match_a_plain_loop_bit_for_bit() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(7);
        for (c, h, w, rows) in [(1, 2, 2, 1), (3, 5, 4, 2), (2, 6, 7, 3), (6, 28, 28, 2)] {
            let p = MaxPool2::new(c, h, w).unwrap();
            // Few distinct values, so windows often tie.
            let x: Vec<f32> = (0..rows * p.in_size())
                .map(|_| f32::from(rng.random_range(0u8..4)) - 1.0)
                .collect();
            let dy: Vec<f32> = (0..rows * p.out_size())
                .map(|i| {
                    if i % 5 == 0 {
                        -0.0
                    } else {
                        rng.random_range(-1.0..1.0)
                    }
                })
                .collect();
            let (oh, ow) = p.out_hw();
            let (mut y_ref, mut dx_ref) = (vec![0.0f32; dy.len()], vec![0.0f32; x.len()]);
            let mut o = 0;
            for plane in 0..rows * c {
                for yy in 0..oh {
                    for xx in 0..ow {
                        let top = plane * h * w + 2 * yy * w + 2 * xx;
                        let mut best = top;
                        for cand in [top + 1, top + w, top + w + 1] {
                            if x[cand] > x[best] {
                                best = cand;
                            }
                        }
                        y_ref[o] = x[best];
                        dx_ref[best] += dy[o];
                        o += 1;
                    }
                }
            }
            let mut y = vec![f32::NAN; dy.len()];
            p.forward(&x, &mut y, rows, None);
            // With the arg max recorded: the same outputs, and the same gradients from it.
            let (mut y2, mut arg) = (vec![f32::NAN; dy.len()], vec![9u8; dy.len()]);
            p.forward(&x, &mut y2, rows, Some(&mut arg));
            let mut dx2 = vec![f32::NAN; x.len()];
            p.backward_from(&arg, &dy, &mut dx2, rows, None);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&y), bits(&y_ref), "forward {c}×{h}×{w}");
            assert_eq!(bits(&y2), bits(&y_ref), "forward with arg {c}×{h}×{w}");
            assert_eq!(bits(&dx2), bits(&dx_ref), "backward from arg {c}×{h}×{w}");
            // Folded with a ReLU below: `x` read as the ReLU's input, pooled after the ReLU, and
            // the gradient taken to the ReLU's input, against the two passes in turn.
            let relu: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
            let (mut y_r, mut arg_r) = (vec![f32::NAN; dy.len()], vec![9u8; dy.len()]);
            p.forward(&relu, &mut y_r, rows, Some(&mut arg_r));
            let mut two = vec![f32::NAN; x.len()];
            p.backward_from(&arg_r, &dy, &mut two, rows, None);
            let mut two_ref = vec![f32::NAN; x.len()];
            crate::nn::activation::relu_backward(&x, &two, &mut two_ref);
            let mut one = vec![f32::NAN; x.len()];
            p.backward_from(&arg_r, &dy, &mut one, rows, Some(&y_r));
            assert_eq!(
                bits(&one),
                bits(&two_ref),
                "backward through ReLU {c}×{h}×{w}"
            );
        }
    }
}

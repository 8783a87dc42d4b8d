//! 2-D convolution (stride 1, zero padding `p`) by im2col and one matrix product per example.
//!
//! Input `X` is `c_in × h × w` per example (row-major, channels first), kernel `k × k`, output
//! `c_out × h' × w'` with `h' = h + 2p − k + 1`, `w' = w + 2p − k + 1`. Parameters `W`
//! (`c_out × c_in·k·k`, row-major: channel, then kernel row, then kernel column) then `b`
//! (`c_out`).
//!
//! * im2col: `C[(c, i, j), (y, x)] = X[c, y + i − p, x + j − p]` (0 outside the image), a
//!   `c_in·k·k × h'·w'` matrix;
//! * forward: `Y = W C + b 1ᵀ`, i.e. `Y[o, y, x] = b_o + Σ_{c,i,j} W[o, c, i, j] X[c, y+i−p, x+j−p]`;
//! * backward, given `G = ∂L/∂Y` (`c_out × h'·w'`): `∂L/∂W = Σ_examples G Cᵀ`,
//!   `∂L/∂b_o = Σ G[o, ·]`, and `∂L/∂X = col2im(Wᵀ G)`, where col2im adds each column entry back
//!   onto the input pixel it was copied from (the adjoint of im2col).
//!
//! The backward pass rebuilds `C` from `X` rather than keeping one per example (cheap next to
//! the products, and the memory stays one `C` whatever the batch size). Initialization: He
//! uniform with `fan_in = c_in·k·k` (a ReLU follows in every model here), `b = 0`.

use rand::Rng;

use super::dense::{Init, init_uniform};
use super::gemm::{Acc, matmul, n, t};
use crate::error::{LearnError, Result};

/// A convolution's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conv2d {
    /// Input channels.
    pub c_in: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel side.
    pub k: usize,
    /// Zero padding on every side.
    pub pad: usize,
}

impl Conv2d {
    /// Checks that the kernel fits the padded input and that the sizes are non-zero.
    pub fn new(
        c_in: usize,
        h: usize,
        w: usize,
        c_out: usize,
        k: usize,
        pad: usize,
    ) -> Result<Self> {
        for (name, v) in [
            ("channels", c_in),
            ("height", h),
            ("width", w),
            ("channels", c_out),
            ("kernel", k),
        ] {
            if v == 0 {
                return Err(LearnError::invalid(name, 0.0, "must be ≥ 1"));
            }
        }
        if pad >= k {
            return Err(LearnError::invalid(
                "padding",
                pad as f64,
                format!("must be < kernel ({k})"),
            ));
        }
        let fits = |side: usize| side.checked_add(2 * pad).is_some_and(|s| s >= k);
        if !fits(h) || !fits(w) {
            return Err(LearnError::invalid(
                "kernel",
                k as f64,
                format!("larger than the padded {h}×{w} input (padding {pad})"),
            ));
        }
        Ok(Self {
            c_in,
            h,
            w,
            c_out,
            k,
            pad,
        })
    }

    /// Output height `h + 2p − k + 1`.
    pub fn oh(&self) -> usize {
        self.h + 2 * self.pad + 1 - self.k
    }

    /// Output width `w + 2p − k + 1`.
    pub fn ow(&self) -> usize {
        self.w + 2 * self.pad + 1 - self.k
    }

    /// Inputs per example.
    pub fn in_size(&self) -> usize {
        self.c_in * self.h * self.w
    }

    /// Outputs per example.
    pub fn out_size(&self) -> usize {
        self.c_out * self.oh() * self.ow()
    }

    /// Rows of the im2col matrix, `c_in·k·k`.
    pub fn patch(&self) -> usize {
        self.c_in * self.k * self.k
    }

    /// `c_out·c_in·k·k + c_out`.
    pub fn num_params(&self) -> usize {
        self.c_out * self.patch() + self.c_out
    }

    /// He-uniform `W`, zero `b`.
    pub fn init(&self, p: &mut [f32], rng: &mut dyn Rng) {
        let (w, b) = p.split_at_mut(self.c_out * self.patch());
        init_uniform(w, Init::He, self.patch(), self.c_out * self.k * self.k, rng);
        b.fill(0.0);
    }

    /// For each im2col row `(c, i, j)` and output row `y`: the valid output columns `x0..x1`
    /// and the input offset of output column `x0`, or `None` when the row reads padding only.
    fn for_each_run(&self, mut f: impl FnMut(usize, usize, usize, usize, Option<usize>)) {
        let (oh, ow, k, p) = (self.oh(), self.ow(), self.k, self.pad);
        for c in 0..self.c_in {
            for i in 0..k {
                for j in 0..k {
                    let row = (c * k + i) * k + j;
                    // Output column x reads input column x + j − p: valid for p − j ≤ x < w + p − j.
                    let x0 = p.saturating_sub(j);
                    let x1 = (self.w + p).saturating_sub(j).min(ow).max(x0);
                    for y in 0..oh {
                        let iy = (y + i).checked_sub(p).filter(|&iy| iy < self.h && x1 > x0);
                        let src = iy.map(|iy| (c * self.h + iy) * self.w + x0 + j - p);
                        f(row * oh * ow + y * ow, x0, x1, ow, src);
                    }
                }
            }
        }
    }

    /// `col = im2col(x)` for one example (`col` has `patch × h'·w'` elements).
    pub fn im2col(&self, x: &[f32], col: &mut [f32]) {
        self.for_each_run(|start, x0, x1, ow, src| {
            let out = &mut col[start..start + ow];
            match src {
                Some(s) => {
                    out[..x0].fill(0.0);
                    copy_run(&mut out[x0..x1], &x[s..s + (x1 - x0)]);
                    out[x1..].fill(0.0);
                }
                None => out.fill(0.0),
            }
        });
    }

    /// `dx += col2im(dcol)` for one example (the adjoint of [`Conv2d::im2col`]).
    pub fn col2im_add(&self, dcol: &[f32], dx: &mut [f32]) {
        self.for_each_run(|start, x0, x1, _, src| {
            if let Some(s) = src {
                for (d, c) in dx[s..s + (x1 - x0)]
                    .iter_mut()
                    .zip(&dcol[start + x0..start + x1])
                {
                    *d += c;
                }
            }
        });
    }

    /// `y = W im2col(x) + b` for `rows` examples; `col` is a work buffer of `patch·h'·w'`.
    pub fn forward(&self, p: &[f32], x: &[f32], y: &mut [f32], rows: usize, col: &mut [f32]) {
        let (w, b) = p.split_at(self.c_out * self.patch());
        let (ins, outs, hw) = (self.in_size(), self.out_size(), self.oh() * self.ow());
        for r in 0..rows {
            self.im2col(&x[r * ins..(r + 1) * ins], col);
            let yr = &mut y[r * outs..(r + 1) * outs];
            matmul(yr, Acc::Replace, n(w), n(col), self.c_out, self.patch(), hw);
            for (plane, b) in yr.chunks_exact_mut(hw).zip(b) {
                plane.iter_mut().for_each(|v| *v += b);
            }
        }
    }

    /// Writes `∂L/∂W`, `∂L/∂b` into `g` (overwritten) and, when asked, `∂L/∂X` into `dx`;
    /// `col` and `dcol` are work buffers of `patch·h'·w'`.
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        p: &[f32],
        x: &[f32],
        dy: &[f32],
        g: &mut [f32],
        mut dx: Option<&mut [f32]>,
        rows: usize,
        col: &mut [f32],
        dcol: &mut [f32],
    ) {
        let w = &p[..self.c_out * self.patch()];
        let (gw, gb) = g.split_at_mut(self.c_out * self.patch());
        gw.fill(0.0);
        gb.fill(0.0);
        let (ins, outs, hw) = (self.in_size(), self.out_size(), self.oh() * self.ow());
        if let Some(dx) = dx.as_deref_mut() {
            dx[..rows * ins].fill(0.0);
        }
        for r in 0..rows {
            let xr = &x[r * ins..(r + 1) * ins];
            let dyr = &dy[r * outs..(r + 1) * outs];
            self.im2col(xr, col);
            matmul(gw, Acc::Add, n(dyr), t(col), self.c_out, hw, self.patch());
            for (plane, g) in dyr.chunks_exact(hw).zip(gb.iter_mut()) {
                *g += plane.iter().sum::<f32>();
            }
            if let Some(dx) = dx.as_deref_mut() {
                matmul(
                    dcol,
                    Acc::Replace,
                    t(w),
                    n(dyr),
                    self.patch(),
                    self.c_out,
                    hw,
                );
                self.col2im_add(dcol, &mut dx[r * ins..(r + 1) * ins]);
            }
        }
    }
}

/// `dst.copy_from_slice(src)` for the short runs of im2col (an image row, often under 32
/// floats) without a `memmove` call per run: up to four fixed 8-float moves and one overlapping
/// tail move, straight-line (a loop of them is turned back into a `memmove` call). Measured:
/// im2col's `memmove` calls were 14% of a LeNet-5 epoch.
#[inline]
fn copy_run(dst: &mut [f32], src: &[f32]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    if len > 32 {
        dst.copy_from_slice(src);
    } else if len >= 8 {
        let mut eight = |at: usize| {
            let d: &mut [f32; 8] = (&mut dst[at..at + 8]).try_into().expect("8 floats");
            let s: &[f32; 8] = (&src[at..at + 8]).try_into().expect("8 floats");
            *d = *s;
        };
        eight(0);
        if len >= 16 {
            eight(8);
        }
        if len >= 24 {
            eight(16);
        }
        if len >= 32 {
            eight(24);
        }
        eight(len - 8);
    } else if len >= 4 {
        let mut four = |at: usize| {
            let d: &mut [f32; 4] = (&mut dst[at..at + 4]).try_into().expect("4 floats");
            let s: &[f32; 4] = (&src[at..at + 4]).try_into().expect("4 floats");
            *d = *s;
        };
        four(0);
        four(len - 4);
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::sequential::{ConvSpec, Sequential};
    use crate::nn::tests::{check_model, dense_batch};

    /// Every length from 0 to 40, at every offset within a block of 8.
    #[test]
    fn copy_run_copies_exactly_its_run() {
        let src: Vec<f32> = (0..64).map(|i| i as f32).collect();
        for off in 0..8 {
            for len in 0..=40 {
                let mut dst = vec![-1.0f32; 64];
                copy_run(&mut dst[off..off + len], &src[off..off + len]);
                for (i, v) in dst.iter().enumerate() {
                    let want = if (off..off + len).contains(&i) {
                        i as f32
                    } else {
                        -1.0
                    };
                    assert_eq!(*v, want, "offset {off}, length {len}, index {i}");
                }
            }
        }
    }

    fn direct(cv: &Conv2d, p: &[f32], x: &[f32]) -> Vec<f32> {
        let (oh, ow, k) = (cv.oh() as isize, cv.ow() as isize, cv.k as isize);
        let mut y = Vec::new();
        for o in 0..cv.c_out {
            for yy in 0..oh {
                for xx in 0..ow {
                    let mut s = p[cv.c_out * cv.patch() + o];
                    for c in 0..cv.c_in {
                        for i in 0..k {
                            for j in 0..k {
                                let (iy, ix) = (yy + i - cv.pad as isize, xx + j - cv.pad as isize);
                                if iy >= 0 && ix >= 0 && iy < cv.h as isize && ix < cv.w as isize {
                                    let wi =
                                        ((o * cv.c_in + c) * cv.k + i as usize) * cv.k + j as usize;
                                    s += p[wi] * x[(c * cv.h + iy as usize) * cv.w + ix as usize];
                                }
                            }
                        }
                    }
                    y.push(s);
                }
            }
        }
        y
    }

    #[test]
    fn forward_matches_the_direct_sum_and_col2im_is_the_adjoint_of_im2col() {
        for pad in [0, 1, 2] {
            let cv = Conv2d::new(2, 5, 4, 3, 3, pad).unwrap();
            let p: Vec<f32> = (0..cv.num_params())
                .map(|i| (i as f32 * 0.7).sin())
                .collect();
            let x: Vec<f32> = (0..2 * cv.in_size())
                .map(|i| (i as f32 * 0.3).cos())
                .collect();
            let mut y = vec![0.0; 2 * cv.out_size()];
            let mut col = vec![0.0; cv.patch() * cv.oh() * cv.ow()];
            cv.forward(&p, &x, &mut y, 2, &mut col);
            for r in 0..2 {
                let want = direct(&cv, &p, &x[r * cv.in_size()..(r + 1) * cv.in_size()]);
                for (a, b) in y[r * cv.out_size()..(r + 1) * cv.out_size()]
                    .iter()
                    .zip(&want)
                {
                    assert!((a - b).abs() < 1e-5, "pad {pad}: {a} vs {b}");
                }
            }
            // ⟨im2col(x), c⟩ = ⟨x, col2im(c)⟩.
            let c: Vec<f32> = (0..col.len()).map(|i| (i as f32 * 0.13).sin()).collect();
            cv.im2col(&x[..cv.in_size()], &mut col);
            let lhs: f64 = col.iter().zip(&c).map(|(a, b)| (a * b) as f64).sum();
            let mut back = vec![0.0; cv.in_size()];
            cv.col2im_add(&c, &mut back);
            let rhs: f64 = back.iter().zip(&x).map(|(a, b)| (a * b) as f64).sum();
            assert!(
                (lhs - rhs).abs() < 1e-4 * lhs.abs().max(1.0),
                "pad {pad}: {lhs} vs {rhs}"
            );
        }
        assert!(Conv2d::new(1, 2, 2, 1, 5, 1).is_err());
        assert!(Conv2d::new(1, 8, 8, 1, 3, 3).is_err());
        assert!(Conv2d::new(0, 8, 8, 1, 3, 0).is_err());
    }

    #[test]
    fn gradients_of_two_stacked_convolutions_match_finite_differences() {
        // conv 3×3 pad 1 → ReLU → pool → conv 2×2 pad 0 → ReLU → pool → dense: the second
        // convolution's input gradient (col2im) reaches the first's weights.
        let conv = [
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
        ];
        let m = Sequential::cnn([2, 7, 6], &conv, &[], 3).unwrap();
        let (x, y) = dense_batch(3, 2 * 7 * 6, 3, 5);
        check_model(&m, &x, 2 * 7 * 6, &y, usize::MAX, 2e-3);
    }
}

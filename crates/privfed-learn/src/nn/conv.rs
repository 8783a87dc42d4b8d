//! 2-D convolution (stride 1, zero padding `p`) by im2col and one matrix product per example.
//!
//! Input `X` is `c_in × h × w` per example (row-major, channels first), kernel `k × k`, output
//! `c_out × h' × w'` with `h' = h + 2p − k + 1`, `w' = w + 2p − k + 1`. Parameters `W`
//! (`c_out × c_in·k·k`, row-major: channel, then kernel row, then kernel column) then `b`
//! (`c_out`).
//!
//! * im2col: `C[(c, i, j), (y, x)] = X[c, y + i − p, x + j − p]` (0 outside the image);
//! * forward: `Y = W C + b 1ᵀ`, i.e. `Y[o, y, x] = b_o + Σ_{c,i,j} W[o, c, i, j] X[c, y+i−p, x+j−p]`;
//! * backward, given `G = ∂L/∂Y`: `∂L/∂W = Σ_examples G Cᵀ`, `∂L/∂b_o = Σ G[o, ·]`, and
//!   `∂L/∂X = col2im(Wᵀ G)`, where col2im adds each column entry back onto the input pixel it was
//!   copied from (the adjoint of im2col).
//!
//! **Full-width layout.** The example is first copied into a zero-padded buffer `P` of
//! `c_in × (h+2p) × (w+2p)` (plus `k − 1` zeros at the end), and the output is computed over the
//! padded width `w + 2p` instead of `w'`: column `(y, x)` with `x < w + 2p`. Then every im2col row
//! `(c, i, j)` is one contiguous slice of `P` (`P[c, i, j …]` of length `h'·(w+2p)`), and col2im
//! one contiguous add, instead of `h'` short runs each (measured: the runs were a fifth of a
//! LeNet-5 step). The `k − 1` extra columns per output row read pixels of the next row (finite,
//! meaningless): the forward pass drops them, and the backward pass gives them a zero gradient,
//! so they add nothing to `∂L/∂W` or `∂L/∂X`.
//!
//! The backward pass rebuilds `C` from `X` rather than keeping one per example (cheap next to
//! the products, and the memory stays one `C` whatever the batch size). Initialization: He
//! uniform with `fan_in = c_in·k·k` (a ReLU follows in every model here), `b = 0`.

use rand::Rng;

use super::dense::{Init, init_uniform};
use super::gemm::{Acc, matmul, n as n_, t};
use super::simd::{run, simd_kernel};
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

    /// Padded height `h + 2p`.
    fn ph(&self) -> usize {
        self.h + 2 * self.pad
    }

    /// Padded width `w + 2p`, the width of the full-width output rows.
    fn pw(&self) -> usize {
        self.w + 2 * self.pad
    }

    /// Columns of the full-width im2col matrix, `h'·(w+2p)`.
    fn full(&self) -> usize {
        self.oh() * self.pw()
    }

    /// Length of the padded input buffer: the planes and `k − 1` zeros read by the last row's
    /// extra columns.
    fn padded_len(&self) -> usize {
        self.c_in * self.ph() * self.pw() + self.k - 1
    }

    /// Work buffer length of [`Conv2d::forward`] and of `col` in [`Conv2d::backward`]: the
    /// full-width im2col matrix, the padded input and a full-width output.
    pub fn work_len(&self) -> usize {
        (self.patch() + self.c_out) * self.full() + self.padded_len()
    }

    /// A work buffer's parts: the full-width im2col matrix, the padded input, and `c_out`
    /// full-width rows (the output, or its gradient).
    fn split_work<'a>(&self, work: &'a mut [f32]) -> (&'a mut [f32], &'a mut [f32], &'a mut [f32]) {
        let (col, rest) = work.split_at_mut(self.patch() * self.full());
        let (padded, rest) = rest.split_at_mut(self.padded_len());
        (col, padded, &mut rest[..self.c_out * self.full()])
    }

    /// `(offset in an example, offset in the padded input)` of each of the `c_in·h` image rows.
    fn image_rows(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let (h, w, p, pw) = (self.h, self.w, self.pad, self.pw());
        (0..self.c_in * h).map(move |row| {
            let (c, iy) = (row / h, row % h);
            (row * w, (c * self.ph() + iy + p) * pw + p)
        })
    }

    /// `(channel, offset in an example's output, offset in the full-width output)` of each of
    /// the `c_out·h'` output rows.
    fn output_rows(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let (oh, ow, pw, n) = (self.oh(), self.ow(), self.pw(), self.full());
        (0..self.c_out * oh).map(move |row| {
            let (o, y) = (row / oh, row % oh);
            (o, row * ow, o * n + y * pw)
        })
    }

    /// `padded` = one example zero-padded (planes of `(h+2p) × (w+2p)`, then `k − 1` zeros).
    fn pad_into(&self, x: &[f32], padded: &mut [f32]) {
        padded.fill(0.0);
        for (xi, pi) in self.image_rows() {
            padded[pi..pi + self.w].copy_from_slice(&x[xi..xi + self.w]);
        }
    }

    /// The start in the padded input of im2col row `(c, i, j)`, for each row in order.
    fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        let (k, pw, plane) = (self.k, self.pw(), self.ph() * self.pw());
        (0..self.c_in).flat_map(move |c| {
            (0..k).flat_map(move |i| (0..k).map(move |j| c * plane + i * pw + j))
        })
    }

    /// Full-width `col = im2col(padded)` (`patch × h'·(w+2p)`): one slice copy per row.
    fn im2col(&self, padded: &[f32], col: &mut [f32]) {
        let n = self.full();
        for (dst, src) in col.chunks_exact_mut(n).zip(self.rows()) {
            dst.copy_from_slice(&padded[src..src + n]);
        }
    }

    /// `padded += col2im(dcol)` for a full-width `dcol` (the adjoint of [`Conv2d::im2col`]).
    ///
    /// The `k` rows `(c, i, 0..k)` land on one run of `padded`, shifted by one each: every
    /// element of the run is loaded once, gets its `k` terms added in row order in a register,
    /// and is stored once — the same additions in the same order as adding the rows one after
    /// another (so the same bits), without re-reading each element just stored `k` times (the
    /// row-by-row adds stalled on store-to-load forwarding at the one-element shifts).
    fn col2im_add(&self, dcol: &[f32], padded: &mut [f32]) {
        run(Col2im {
            conv: self,
            dcol,
            padded,
        });
    }

    /// `y = W im2col(x) + b` for `rows` examples; `work` has [`Conv2d::work_len`] elements.
    pub fn forward(&self, p: &[f32], x: &[f32], y: &mut [f32], rows: usize, work: &mut [f32]) {
        let (w, b) = p.split_at(self.c_out * self.patch());
        let (ins, outs, ow, n) = (self.in_size(), self.out_size(), self.ow(), self.full());
        let (col, padded, yfull) = self.split_work(work);
        for r in 0..rows {
            self.pad_into(&x[r * ins..(r + 1) * ins], padded);
            self.im2col(padded, col);
            matmul(
                yfull,
                Acc::Replace,
                n_(w),
                n_(col),
                self.c_out,
                self.patch(),
                n,
            );
            let yr = &mut y[r * outs..(r + 1) * outs];
            for (o, yi, fi) in self.output_rows() {
                for (d, s) in yr[yi..yi + ow].iter_mut().zip(&yfull[fi..fi + ow]) {
                    *d = s + b[o];
                }
            }
        }
    }

    /// Writes `∂L/∂W`, `∂L/∂b` into `g` (overwritten) and, when asked, `∂L/∂X` into `dx`;
    /// `work` has [`Conv2d::work_len`] elements, `dwork` at least `patch·h'·(w+2p)` plus the
    /// padded input's length (both within [`Conv2d::work_len`]).
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        p: &[f32],
        x: &[f32],
        dy: &[f32],
        g: &mut [f32],
        mut dx: Option<&mut [f32]>,
        rows: usize,
        work: &mut [f32],
        dwork: &mut [f32],
    ) {
        let w = &p[..self.c_out * self.patch()];
        let (gw, gb) = g.split_at_mut(self.c_out * self.patch());
        gw.fill(0.0);
        gb.fill(0.0);
        let (ins, outs, ow, n) = (self.in_size(), self.out_size(), self.ow(), self.full());
        // The full-width G: the extra columns stay 0, so they add nothing below.
        let (col, padded, gfull) = self.split_work(work);
        gfull.fill(0.0);
        let (dcol, rest) = dwork.split_at_mut(self.patch() * n);
        let dpadded = &mut rest[..self.padded_len()];
        bias_sums_add(&dy[..rows * outs], outs / self.c_out, gb);
        for r in 0..rows {
            let dyr = &dy[r * outs..(r + 1) * outs];
            for (_, yi, fi) in self.output_rows() {
                gfull[fi..fi + ow].copy_from_slice(&dyr[yi..yi + ow]);
            }
            self.pad_into(&x[r * ins..(r + 1) * ins], padded);
            self.im2col(padded, col);
            matmul(gw, Acc::Add, n_(gfull), t(col), self.c_out, n, self.patch());
            if let Some(dx) = dx.as_deref_mut() {
                matmul(
                    dcol,
                    Acc::Replace,
                    t(w),
                    n_(gfull),
                    self.patch(),
                    self.c_out,
                    n,
                );
                dpadded.fill(0.0);
                self.col2im_add(dcol, dpadded);
                let dxr = &mut dx[r * ins..(r + 1) * ins];
                for (xi, pi) in self.image_rows() {
                    dxr[xi..xi + self.w].copy_from_slice(&dpadded[pi..pi + self.w]);
                }
            }
        }
    }
}

simd_kernel!(
    /// [`col2im_kernel`]'s arguments.
    Col2im<'a> => col2im_kernel(conv: &'a Conv2d, dcol: &'a [f32], padded: &'a mut [f32])
);

/// [`Conv2d::col2im_add`] (run through [`run`]).
#[inline(always)]
fn col2im_kernel(conv: &Conv2d, dcol: &[f32], padded: &mut [f32]) {
    /// `run[u..u + L] += Σ_j rows[j][u − j ..]` (all `k` terms exist there), in registers.
    #[inline(always)]
    fn lanes<const L: usize>(run: &mut [f32], rows: &[f32], n: usize, k: usize, u: usize) {
        let mut acc: [f32; L] = run[u..u + L].try_into().expect("L long");
        for j in 0..k {
            for (a, s) in acc.iter_mut().zip(&rows[j * n + u - j..][..L]) {
                *a += s;
            }
        }
        run[u..u + L].copy_from_slice(&acc);
    }
    let (n, k, pw, plane) = (conv.full(), conv.k, conv.pw(), conv.ph() * conv.pw());
    for (g, rows) in dcol.chunks_exact(k * n).enumerate() {
        let (c, i) = (g / k, g % k);
        let run = &mut padded[c * plane + i * pw..][..n + k - 1];
        // `run[u] += Σ_j rows[j][u − j]` over the `j` with `0 ≤ u − j < n`, `j` ascending: the
        // middle `k − 1 ≤ u < n`, where all `k` terms exist, 16, 8 and 4 elements at a time,
        // then the rest one at a time.
        let mut u = k - 1;
        while u + 16 <= n {
            lanes::<16>(run, rows, n, k, u);
            u += 16;
        }
        if u + 8 <= n {
            lanes::<8>(run, rows, n, k, u);
            u += 8;
        }
        if u + 4 <= n {
            lanes::<4>(run, rows, n, k, u);
            u += 4;
        }
        for u in (0..k - 1).chain(u..n + k - 1) {
            let mut a = run[u];
            for j in u.saturating_sub(n - 1)..=u.min(k - 1) {
                a += rows[j * n + u - j];
            }
            run[u] = a;
        }
    }
}

simd_kernel!(
    /// [`bias_sums_add`]'s arguments.
    BiasSums<'a> => bias_sums_kernel(dy: &'a [f32], hw: usize, gb: &'a mut [f32])
);

/// `gb[p mod c] += Σ_s dy[p·hw + s]` for each plane `p` of `dy` in order (`c = gb.len()`
/// channels; the planes of several examples one after another), each sum in order from −0 as
/// `Iterator::sum` gives it, so the bits are those of the plain loop over examples and channels.
/// But the chains of 16, 8, 4, 2 or 1 planes are interleaved in registers (one serial chain of
/// additions per channel was 40% of the convolution's backward pass), across examples too, and
/// compiled for the CPU's widest vectors.
fn bias_sums_add(dy: &[f32], hw: usize, gb: &mut [f32]) {
    run(BiasSums { dy, hw, gb });
}

/// [`bias_sums_add`] (run through [`run`]).
#[inline(always)]
fn bias_sums_kernel(dy: &[f32], hw: usize, gb: &mut [f32]) {
    // Indexed on purpose: position `s` of N planes a step, the N sums in registers.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    fn block<const N: usize>(planes: &[f32], hw: usize) -> [f32; N] {
        let planes: [&[f32]; N] = std::array::from_fn(|o| &planes[o * hw..(o + 1) * hw]);
        let mut acc = [-0.0f32; N];
        for s in 0..hw {
            for o in 0..N {
                acc[o] += planes[o][s];
            }
        }
        acc
    }
    #[inline(always)]
    fn add<const N: usize>(planes: &[f32], hw: usize, first: usize, gb: &mut [f32]) -> usize {
        let c = gb.len();
        for (q, a) in block::<N>(planes, hw).into_iter().enumerate() {
            gb[(first + q) % c] += a;
        }
        N
    }
    if gb.is_empty() || hw == 0 {
        return;
    }
    let total = dy.len() / hw;
    let mut p = 0;
    while p < total {
        let planes = &dy[p * hw..];
        p += match total - p {
            16.. => add::<16>(planes, hw, p, gb),
            8..=15 => add::<8>(planes, hw, p, gb),
            4..=7 => add::<4>(planes, hw, p, gb),
            2..=3 => add::<2>(planes, hw, p, gb),
            _ => add::<1>(planes, hw, p, gb),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::sequential::Sequential;
    use crate::nn::tests::{check_model, dense_batch, two_small_convs};

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
            let mut work = vec![f32::NAN; cv.work_len()];
            cv.forward(&p, &x, &mut y, 2, &mut work);
            for r in 0..2 {
                let want = direct(&cv, &p, &x[r * cv.in_size()..(r + 1) * cv.in_size()]);
                for (a, b) in y[r * cv.out_size()..(r + 1) * cv.out_size()]
                    .iter()
                    .zip(&want)
                {
                    assert!((a - b).abs() < 1e-5, "pad {pad}: {a} vs {b}");
                }
            }
            // ⟨im2col(P), c⟩ = ⟨P, col2im(c)⟩ on the padded input.
            let mut padded = vec![0.0; cv.padded_len()];
            cv.pad_into(&x[..cv.in_size()], &mut padded);
            let mut col = vec![0.0; cv.patch() * cv.full()];
            cv.im2col(&padded, &mut col);
            let c: Vec<f32> = (0..col.len()).map(|i| (i as f32 * 0.13).sin()).collect();
            let lhs: f64 = col.iter().zip(&c).map(|(a, b)| (a * b) as f64).sum();
            let mut back = vec![0.0; cv.padded_len()];
            cv.col2im_add(&c, &mut back);
            let rhs: f64 = back.iter().zip(&padded).map(|(a, b)| (a * b) as f64).sum();
            assert!(
                (lhs - rhs).abs() < 1e-4 * lhs.abs().max(1.0),
                "pad {pad}: {lhs} vs {rhs}"
            );
        }
        assert!(Conv2d::new(1, 2, 2, 1, 5, 1).is_err());
        assert!(Conv2d::new(1, 8, 8, 1, 3, 3).is_err());
        assert!(Conv2d::new(0, 8, 8, 1, 3, 0).is_err());
    }

    /// The interleaved bias sums have the bits of one `Iterator::sum` per channel (−0 included),
    /// for channel counts around the block of 16.
    /// The register-summed col2im has the bits of adding the full-width rows one after another
    /// onto the padded input (kernels 1–5, with and without padding, several channels, widths
    /// not a multiple of the 16-lane blocks).
    #[test]
    fn col2im_has_the_bits_of_adding_row_by_row() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(11);
        for (c_in, h, w, k, pad) in [
            (1, 28, 28, 5, 2),
            (6, 14, 14, 5, 0),
            (2, 5, 7, 3, 1),
            (3, 4, 3, 2, 0),
            (1, 3, 3, 1, 0),
            (2, 9, 21, 4, 3),
        ] {
            let cv = Conv2d::new(c_in, h, w, 2, k, pad).unwrap();
            let n = cv.full();
            let dcol: Vec<f32> = (0..cv.patch() * n)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect();
            let start: Vec<f32> = (0..cv.padded_len())
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect();
            let mut want = start.clone();
            for (d, src) in dcol.chunks_exact(n).zip(cv.rows()) {
                for (a, b) in want[src..src + n].iter_mut().zip(d) {
                    *a += b;
                }
            }
            let mut got = start;
            cv.col2im_add(&dcol, &mut got);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{c_in}×{h}×{w}, k {k}, pad {pad}");
        }
    }

    #[test]
    fn bias_sums_have_the_bits_of_a_plain_sum() {
        for (c, rows) in [
            (1, 1),
            (6, 1),
            (16, 1),
            (17, 1),
            (40, 1),
            (6, 10),
            (16, 3),
            (5, 7),
        ] {
            let hw = 37;
            let dy: Vec<f32> = (0..rows * c * hw)
                .map(|i| {
                    if i % 7 == 0 {
                        -0.0
                    } else {
                        (i as f32 * 0.37).sin() * 1e3
                    }
                })
                .collect();
            let start: Vec<f32> = (0..c).map(|o| o as f32 * 0.1 - 0.3).collect();
            let mut got = start.clone();
            bias_sums_add(&dy, hw, &mut got);
            // One example after another, one channel after another, each a plain sum.
            let mut want = start;
            for (p, plane) in dy.chunks_exact(hw).enumerate() {
                want[p % c] += plane.iter().sum::<f32>();
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{c} channels, {rows} examples");
        }
        let mut g = [0.0f32];
        bias_sums_add(&[-0.0; 3], 3, &mut g);
        assert_eq!(
            g[0].to_bits(),
            (0.0f32 + [-0.0f32; 3].iter().sum::<f32>()).to_bits()
        );
    }

    /// `∂L/∂W`, `∂L/∂b` and `∂L/∂X` against their direct sums, for several paddings, kernels
    /// and input widths (the full-width layout's extra columns must add nothing).
    #[test]
    fn backward_matches_the_direct_sums() {
        for (c_in, h, w, c_out, k, pad) in [
            (2, 5, 4, 3, 3, 0),
            (2, 5, 4, 3, 3, 2),
            (1, 6, 7, 2, 5, 2),
            (3, 4, 4, 2, 2, 1),
        ] {
            let cv = Conv2d::new(c_in, h, w, c_out, k, pad).unwrap();
            let rows = 2;
            let p: Vec<f32> = (0..cv.num_params())
                .map(|i| (i as f32 * 0.7).sin())
                .collect();
            let x: Vec<f32> = (0..rows * cv.in_size())
                .map(|i| (i as f32 * 0.3).cos())
                .collect();
            let dy: Vec<f32> = (0..rows * cv.out_size())
                .map(|i| (i as f32 * 0.11).sin())
                .collect();
            let mut g = vec![f32::NAN; cv.num_params()];
            let mut dx = vec![f32::NAN; rows * cv.in_size()];
            let (mut work, mut dwork) =
                (vec![f32::NAN; cv.work_len()], vec![f32::NAN; cv.work_len()]);
            cv.backward(
                &p,
                &x,
                &dy,
                &mut g,
                Some(&mut dx),
                rows,
                &mut work,
                &mut dwork,
            );
            let (oh, ow) = (cv.oh(), cv.ow());
            let (mut gw, mut gb, mut gx) = (
                vec![0.0f64; c_out * cv.patch()],
                vec![0.0f64; c_out],
                vec![0.0f64; rows * cv.in_size()],
            );
            for r in 0..rows {
                for o in 0..c_out {
                    for yy in 0..oh {
                        for xx in 0..ow {
                            let d = f64::from(dy[r * cv.out_size() + (o * oh + yy) * ow + xx]);
                            gb[o] += d;
                            for c in 0..c_in {
                                for i in 0..k {
                                    for j in 0..k {
                                        let (iy, ix) = (yy + i, xx + j);
                                        if iy < pad || ix < pad || iy >= h + pad || ix >= w + pad {
                                            continue;
                                        }
                                        let xi =
                                            r * cv.in_size() + (c * h + iy - pad) * w + ix - pad;
                                        let wi = ((o * c_in + c) * k + i) * k + j;
                                        gw[wi] += d * f64::from(x[xi]);
                                        gx[xi] += d * f64::from(p[wi]);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let close = |a: f32, b: f64| (f64::from(a) - b).abs() < 1e-4 * b.abs().max(1.0);
            for (a, b) in g.iter().zip(gw.iter().chain(&gb)) {
                assert!(
                    close(*a, *b),
                    "{c_in}×{h}×{w} k {k} pad {pad}: ∂W/∂b {a} vs {b}"
                );
            }
            for (a, b) in dx.iter().zip(&gx) {
                assert!(
                    close(*a, *b),
                    "{c_in}×{h}×{w} k {k} pad {pad}: ∂X {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn gradients_of_two_stacked_convolutions_match_finite_differences() {
        // conv 3×3 pad 1 → ReLU → pool → conv 2×2 pad 0 → ReLU → pool → dense: the second
        // convolution's input gradient (col2im) reaches the first's weights.
        let m = Sequential::cnn([2, 7, 6], &two_small_convs(), &[], 3).unwrap();
        let (x, y) = dense_batch(3, 2 * 7 * 6, 3, 5);
        check_model(&m, &x, 2 * 7 * 6, &y, usize::MAX, 2e-3);
    }
}

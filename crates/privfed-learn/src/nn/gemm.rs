//! Single-threaded matrix products over row-major `f32` slices (faer's kernels, `Par::Seq`).
//!
//! Every layer's dense work goes through [`matmul`]: `C = op(A)·op(B)` or `C += op(A)·op(B)`,
//! where `op` is the identity or the transpose, so a backward pass never copies a transposed
//! matrix. faer was measured against matrixmultiply (and ndarray over it), the `gemm` crate and a
//! plain loop on the shapes these models use (`BENCHMARKS.md`, "FL models"): faer and `gemm` are
//! about twice as fast as matrixmultiply on the small shapes; faer has a safe API (`gemm`'s and
//! matrixmultiply's entry points are `unsafe fn`, and this crate forbids `unsafe`). No threads:
//! the simulator parallelizes across clients.

use faer::{Accum, MatMut, MatRef, Par};

/// How the product lands in `C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acc {
    /// `C = op(A)·op(B)`.
    Replace,
    /// `C += op(A)·op(B)`.
    Add,
}

/// A row-major matrix operand: the slice holds `rows × cols` when `t` is false, and the
/// transpose's storage (`cols × rows`) when `t` is true.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op<'a> {
    pub data: &'a [f32],
    pub t: bool,
}

/// `A` as stored.
pub(crate) fn n(data: &[f32]) -> Op<'_> {
    Op { data, t: false }
}

/// `A` read transposed.
pub(crate) fn t(data: &[f32]) -> Op<'_> {
    Op { data, t: true }
}

fn view(op: Op<'_>, rows: usize, cols: usize) -> MatRef<'_, f32> {
    if op.t {
        MatRef::from_row_major_slice(&op.data[..rows * cols], cols, rows).transpose()
    } else {
        MatRef::from_row_major_slice(&op.data[..rows * cols], rows, cols)
    }
}

/// `C (m×n) ←/+= op(A) (m×k) · op(B) (k×n)`, all row-major. Callers size the slices (the
/// models check every length before computing); only the leading `m·k`, `k·n`, `m·n` elements
/// are used.
pub(crate) fn matmul(c: &mut [f32], into: Acc, a: Op<'_>, b: Op<'_>, m: usize, k: usize, n: usize) {
    let c = MatMut::from_row_major_slice_mut(&mut c[..m * n], m, n);
    let beta = match into {
        Acc::Replace => Accum::Replace,
        Acc::Add => Accum::Add,
    };
    faer::linalg::matmul::matmul(c, beta, view(a, m, k), view(b, k, n), 1.0f32, Par::Seq);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], ta: bool, b: &[f32], tb: bool, m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let x = if ta { a[p * m + i] } else { a[i * k + p] };
                    let y = if tb { b[j * k + p] } else { b[p * n + j] };
                    c[i * n + j] += x * y;
                }
            }
        }
        c
    }

    #[test]
    fn every_transpose_combination_matches_a_plain_loop() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let want = naive(&a, ta, &b, tb, m, k, n);
            let mut c = vec![1.0; m * n];
            let op = |d, t| Op { data: d, t };
            matmul(&mut c, Acc::Replace, op(&a, ta), op(&b, tb), m, k, n);
            for (x, y) in c.iter().zip(&want) {
                assert!((x - y).abs() < 1e-5);
            }
            matmul(&mut c, Acc::Add, op(&a, ta), op(&b, tb), m, k, n);
            for (x, y) in c.iter().zip(&want) {
                assert!((x - 2.0 * y).abs() < 1e-5);
            }
        }
    }
}

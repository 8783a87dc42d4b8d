//! Embedding lookup: a table `E` (`vocab × dim`, row-major) maps token `v` to row `E[v]`.
//!
//! * forward: `Y[i] = E[v_i]` for the `i`-th token of the list;
//! * backward: `∂L/∂E[v] = Σ_{i : v_i = v} ∂L/∂Y[i]` (scatter-add; rows of unused tokens are 0).
//!
//! Initialization: Glorot uniform over `vocab × dim` (the models here check every token
//! against the vocabulary before calling these functions).

/// `out[i] = table[ids[i]]` (each a `dim`-vector).
pub(crate) fn forward(
    table: &[f32],
    dim: usize,
    ids: impl Iterator<Item = usize>,
    out: &mut [f32],
) {
    for (row, v) in out.chunks_exact_mut(dim).zip(ids) {
        row.copy_from_slice(&table[v * dim..(v + 1) * dim]);
    }
}

/// `grad[ids[i]] += dy[i]` after zeroing `grad`.
pub(crate) fn backward(grad: &mut [f32], dim: usize, ids: impl Iterator<Item = usize>, dy: &[f32]) {
    grad.fill(0.0);
    for (row, v) in dy.chunks_exact(dim).zip(ids) {
        for (g, d) in grad[v * dim..(v + 1) * dim].iter_mut().zip(row) {
            *g += d;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lookup_and_scatter_add() {
        let table = [0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        let mut y = [0.0; 6];
        super::forward(&table, 2, [2, 0, 2].into_iter(), &mut y);
        assert_eq!(y, [20.0, 21.0, 0.0, 1.0, 20.0, 21.0]);
        let mut g = [9.0; 6];
        super::backward(
            &mut g,
            2,
            [2, 0, 2].into_iter(),
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        );
        assert_eq!(g, [3.0, 4.0, 0.0, 0.0, 6.0, 8.0]);
    }
}

//! Federated datasets: each client's examples as a [`Shard`], plus a held-out test shard.
//!
//! A shard stores its rows contiguously (dense `f32` features, or `u32` token sequences for
//! character models) with integer targets, and hands out [`Batch`]es of the `privfed_learn::nn`
//! models either as a contiguous range or gathered from row indices (for shuffled minibatches).

use privfed_learn::nn::{Batch, Inputs};
use privfed_learn::{LearnError, Result};
use serde::{Deserialize, Serialize};

/// What one row of a federated dataset is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RowKind {
    /// Dense features; one target (a class index below `classes`) per row.
    Dense {
        /// Features per row.
        features: usize,
        /// Number of classes.
        classes: usize,
    },
    /// A token sequence of `len` tokens below `vocab`; one target (the next token) per position.
    Tokens {
        /// Tokens per row.
        len: usize,
        /// Vocabulary size.
        vocab: usize,
    },
}

impl RowKind {
    /// Targets per row (1 for dense rows, `len` for token sequences).
    pub fn targets_per_row(&self) -> usize {
        match *self {
            RowKind::Dense { .. } => 1,
            RowKind::Tokens { len, .. } => len,
        }
    }
    /// Values per row (features or tokens).
    pub fn width(&self) -> usize {
        match *self {
            RowKind::Dense { features, .. } => features,
            RowKind::Tokens { len, .. } => len,
        }
    }
}

/// One client's (or the test set's) rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    kind: RowKind,
    dense: Vec<f32>,
    tokens: Vec<u32>,
    targets: Vec<u32>,
}

/// Reusable buffers for gathered batches.
#[derive(Debug, Default, Clone)]
pub struct BatchBuf {
    dense: Vec<f32>,
    tokens: Vec<u32>,
    targets: Vec<u32>,
}

impl Shard {
    /// A shard of dense rows (`x` row-major) with one class target per row.
    ///
    /// # Errors
    /// Lengths that do not match, targets out of range, non-finite features.
    pub fn dense(features: usize, classes: usize, x: Vec<f32>, targets: Vec<u32>) -> Result<Self> {
        let kind = RowKind::Dense { features, classes };
        if features == 0 || x.len() != targets.len() * features {
            return Err(LearnError::DimensionMismatch {
                what: "shard features",
                expected: targets.len() * features,
                got: x.len(),
            });
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(LearnError::NonFinite {
                what: "shard features",
                index: i,
                value: x[i] as f64,
            });
        }
        check_targets(&targets, classes)?;
        Ok(Self {
            kind,
            dense: x,
            tokens: Vec::new(),
            targets,
        })
    }

    /// A shard of token sequences (`x` row-major, `len` per row) with `len` next-token targets per
    /// row.
    ///
    /// # Errors
    /// Lengths that do not match, tokens or targets out of range.
    pub fn tokens(len: usize, vocab: usize, x: Vec<u32>, targets: Vec<u32>) -> Result<Self> {
        let kind = RowKind::Tokens { len, vocab };
        if len == 0 || !x.len().is_multiple_of(len) || targets.len() != x.len() {
            return Err(LearnError::DimensionMismatch {
                what: "shard tokens",
                expected: targets.len(),
                got: x.len(),
            });
        }
        check_targets(&x, vocab)?;
        check_targets(&targets, vocab)?;
        Ok(Self {
            kind,
            dense: Vec::new(),
            tokens: x,
            targets,
        })
    }

    /// What a row is.
    pub fn kind(&self) -> RowKind {
        self.kind
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.targets.len() / self.kind.targets_per_row()
    }

    /// Whether the shard has no rows.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The targets, `targets_per_row` per row.
    pub fn targets(&self) -> &[u32] {
        &self.targets
    }

    /// Rows `start..end` as a batch (clamped to the shard).
    pub fn range(&self, start: usize, end: usize) -> Batch<'_> {
        let end = end.min(self.rows());
        let start = start.min(end);
        let w = self.kind.width();
        let t = self.kind.targets_per_row();
        let targets = &self.targets[start * t..end * t];
        let inputs = match self.kind {
            RowKind::Dense { features, .. } => Inputs::Dense {
                x: &self.dense[start * w..end * w],
                features,
            },
            RowKind::Tokens { len, .. } => Inputs::Tokens {
                x: &self.tokens[start * w..end * w],
                len,
            },
        };
        Batch { inputs, targets }
    }

    /// The rows at `indices` (each `< rows()`), copied into `buf`, as a batch.
    ///
    /// # Panics
    /// Never on valid indices; an index `≥ rows()` panics (indices come from the simulator, not
    /// from input).
    pub fn gather<'b>(&self, indices: &[usize], buf: &'b mut BatchBuf) -> Batch<'b> {
        let w = self.kind.width();
        let t = self.kind.targets_per_row();
        buf.targets.clear();
        for &i in indices {
            buf.targets
                .extend_from_slice(&self.targets[i * t..(i + 1) * t]);
        }
        match self.kind {
            RowKind::Dense { features, .. } => {
                buf.dense.clear();
                for &i in indices {
                    buf.dense.extend_from_slice(&self.dense[i * w..(i + 1) * w]);
                }
                Batch {
                    inputs: Inputs::Dense {
                        x: &buf.dense,
                        features,
                    },
                    targets: &buf.targets,
                }
            }
            RowKind::Tokens { len, .. } => {
                buf.tokens.clear();
                for &i in indices {
                    buf.tokens
                        .extend_from_slice(&self.tokens[i * w..(i + 1) * w]);
                }
                Batch {
                    inputs: Inputs::Tokens {
                        x: &buf.tokens,
                        len,
                    },
                    targets: &buf.targets,
                }
            }
        }
    }

    /// A new shard of the rows at `indices` (each `< rows()`).
    pub fn select(&self, indices: &[usize]) -> Shard {
        let mut buf = BatchBuf::default();
        self.gather(indices, &mut buf);
        Shard {
            kind: self.kind,
            dense: buf.dense,
            tokens: buf.tokens,
            targets: buf.targets,
        }
    }
}

fn check_targets(v: &[u32], bound: usize) -> Result<()> {
    if let Some(&bad) = v.iter().find(|&&t| t as usize >= bound) {
        return Err(LearnError::InvalidLabel {
            label: bad as f64,
            reason: format!("must be < {bound}"),
        });
    }
    Ok(())
}

/// A federated dataset: one shard per client and a held-out test shard, all of one row kind.
#[derive(Debug, Clone, PartialEq)]
pub struct FederatedData {
    /// A short name for output (`mnist/dirichlet(0.3)`, `shakespeare/roles`, …).
    pub name: String,
    /// What a row is.
    pub kind: RowKind,
    /// The clients' shards (none empty).
    pub clients: Vec<Shard>,
    /// The held-out test shard.
    pub test: Shard,
}

impl FederatedData {
    /// Checks that every shard has the dataset's row kind and that no client is empty.
    ///
    /// # Errors
    /// The first violation.
    pub fn new(name: String, clients: Vec<Shard>, test: Shard) -> Result<Self> {
        let kind = test.kind();
        if clients.is_empty() {
            return Err(LearnError::Empty("clients"));
        }
        for (i, c) in clients.iter().enumerate() {
            if c.kind() != kind {
                return Err(LearnError::Unsupported(format!(
                    "client {i}'s rows are {:?}, the test set's {:?}",
                    c.kind(),
                    kind
                )));
            }
            if c.is_empty() {
                return Err(LearnError::Unsupported(format!("client {i} has no rows")));
            }
        }
        Ok(Self {
            name,
            kind,
            clients,
            test,
        })
    }

    /// Total training rows over all clients.
    pub fn train_rows(&self) -> usize {
        self.clients.iter().map(Shard::rows).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_and_range_agree_and_bad_shards_are_refused() {
        let s = Shard::dense(2, 3, vec![0., 1., 2., 3., 4., 5.], vec![0, 1, 2]).unwrap();
        assert_eq!(s.rows(), 3);
        let mut buf = BatchBuf::default();
        let g = s.gather(&[2, 0], &mut buf);
        assert_eq!(g.targets, &[2, 0]);
        match g.inputs {
            Inputs::Dense { x, .. } => assert_eq!(x, &[4., 5., 0., 1.]),
            _ => unreachable!(),
        }
        let r = s.range(1, 9);
        assert_eq!(r.targets, &[1, 2]);
        assert!(Shard::dense(2, 3, vec![0.; 5], vec![0, 1, 2]).is_err());
        assert!(Shard::dense(2, 3, vec![0.; 6], vec![0, 1, 3]).is_err());
        assert!(Shard::dense(1, 3, vec![f32::NAN], vec![0]).is_err());
        let t = Shard::tokens(2, 4, vec![0, 1, 2, 3], vec![1, 2, 3, 0]).unwrap();
        assert_eq!(t.rows(), 2);
        assert_eq!(t.select(&[1]).targets(), &[3, 0]);
        assert!(Shard::tokens(2, 4, vec![0, 4], vec![1, 2]).is_err());
        assert!(FederatedData::new("x".into(), vec![s.clone()], t.clone()).is_err());
        assert!(FederatedData::new("x".into(), vec![], s.clone()).is_err());
    }
}
